//! The wire protocol as a JSON Schema document, generated from the very types the server
//! serializes and parses (`kiwi schema`; committed as `docs/wire-schema-1.10.json`).
//!
//! Invariants: every shape in the document comes from a Rust type through `schemars` (the serde
//! attributes that shape the wire shape the schema too); the document is deterministic (sorted
//! definitions), so a test can compare it with the committed copy and fail when they disagree.

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, SchemaGenerator};
use serde_json::{Map, Value, json};

use super::errors::WireError;
use super::params::{
    ApprovalReply, Empty, ForkParams, ForkResult, HookReply, InitializeParams, InitializeResult, InterruptResult,
    PROTOCOL_VERSION, PromptParams, PromptResult, QuestionReply, ReplayResult, SetPlanModeParams, SetPlanModeResult,
    SteerParams, SteerResult, UndoParams, UndoResult,
};
use crate::protocol::{Event, Request, ToolResult, WireMessage};
use crate::rpc::ErrorCode;

/// The committed copy, relative to the repository root.
pub const COMMITTED_PATH: &str = "docs/wire-schema-1.10.json";

fn reference<T: JsonSchema>(generator: &mut SchemaGenerator) -> Value {
    generator.subschema_for::<T>().to_value()
}

fn method<P: JsonSchema, R: JsonSchema>(generator: &mut SchemaGenerator, summary: &str) -> Value {
    json!({"summary": summary, "params": reference::<P>(generator), "result": reference::<R>(generator)})
}

/// The whole document.
pub fn document() -> Value {
    let mut generator = SchemaSettings::draft2020_12().into_generator();
    let g = &mut generator;
    let no_params = json!({"description": "Any value, or absent; ignored."});
    let methods = json!({
        "initialize": method::<InitializeParams, InitializeResult>(g, "Optional handshake: client info, client-owned tools, capabilities, hook subscriptions. Refused while busy."),
        "prompt": method::<PromptParams, PromptResult>(g, "Runs one turn; its events stream before this answer."),
        "steer": method::<SteerParams, SteerResult>(g, "Queues input into the running turn's agent loop (taken at the next step boundary)."),
        "replay": {"summary": "Streams the session's recorded wire.jsonl back as events and requests. Busy while it runs; cancellable.", "params": no_params.clone(), "result": reference::<ReplayResult>(g)},
        "set_plan_mode": method::<SetPlanModeParams, SetPlanModeResult>(g, "Switches plan mode; allowed in every state."),
        "cancel": {"summary": "Cancels the running turn or replay.", "params": no_params.clone(), "result": reference::<Empty>(g)},
        "run": {"summary": "Legacy (pre-1.0 stdio server): like prompt, with params {\"input\"} or {\"prompt\"}.", "params": {"type": "object", "properties": {"input": {"type": "string"}, "prompt": {"type": "string"}}}, "result": reference::<PromptResult>(g), "legacy": true},
        "fork": method::<ForkParams, ForkResult>(g, "kiwi extension (advertised in initialize's `extensions`): forks the session after turn `turn_index` (or all of it) into a new session of the same work dir. Refused while busy."),
        "undo": method::<UndoParams, UndoResult>(g, "kiwi extension (advertised in initialize's `extensions`): undoes turn `turn_index` and every later turn, or the last `turns` turns (the last turn when neither is given): the context, wire.jsonl and the session state go back to before it, and the files kiwi's WriteFile/StrReplaceFile changed in those turns are restored when nobody changed them since (Shell's effects are not undone). Refused while busy."),
        "interrupt": {"summary": "Legacy: like cancel; also acted on as a notification.", "params": no_params, "result": reference::<InterruptResult>(g), "legacy": true},
    });
    let server = json!({
        "event": {"summary": "A notification: {\"jsonrpc\":\"2.0\",\"method\":\"event\",\"params\":Event}.", "params": reference::<Event>(g)},
        "request": {
            "summary": "A request the client answers: {\"jsonrpc\":\"2.0\",\"method\":\"request\",\"id\":<payload id>,\"params\":Request}.",
            "params": reference::<Request>(g),
            "answers": {
                "ApprovalRequest": reference::<ApprovalReply>(g),
                "ToolCallRequest": reference::<ToolResult>(g),
                "QuestionRequest": reference::<QuestionReply>(g),
                "HookRequest": reference::<HookReply>(g),
            },
        },
    });
    let record = json!({"summary": "A wire.jsonl line after the metadata header: {\"timestamp\": <epoch seconds>, \"message\": WireMessage}.", "message": reference::<WireMessage>(g)});
    let errors: Map<String, Value> = [
        (ErrorCode::ParseError.code(), "Invalid JSON format"),
        (ErrorCode::InvalidRequest.code(), "Invalid request / Invalid response"),
        (ErrorCode::MethodNotFound.code(), "Unexpected method received: <method>"),
        (ErrorCode::InvalidParams.code(), "Invalid parameters for method `<method>`"),
        (ErrorCode::InternalError.code(), "<ErrorKind>: <text>"),
        (WireError::InvalidState.code(), "An agent turn is already in progress / No agent turn is in progress"),
        (WireError::LlmNotSet.code(), "LLM is not set"),
        (WireError::LlmCapability.code(), "LLM model '<model>' does not support required capability: <cap>."),
        (WireError::ChatProvider.code(), "<the provider's error text>"),
    ]
    .into_iter()
    .map(|(code, message)| (code.to_string(), Value::from(message)))
    .collect();
    let mut defs: Vec<(String, Value)> = generator.take_definitions(true).into_iter().collect();
    defs.sort_by(|a, b| a.0.cmp(&b.0));
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": format!("Kimi Wire protocol {PROTOCOL_VERSION}, as served by kiwi"),
        "description": "JSON-RPC 2.0, one compact JSON object per line over stdio. `methods` are the client's requests (params and result of each); `server` the server's event notifications and requests (with the answer each expects); `record` a line of wire.jsonl; `errors` the error codes. Every shape is in `$defs`, generated from kiwi's Rust types.",
        "protocol_version": PROTOCOL_VERSION,
        "methods": methods,
        "server": server,
        "record": record,
        "errors": errors,
        "$defs": defs.into_iter().collect::<Map<String, Value>>(),
    })
}

/// The document as committed: pretty JSON with a final newline.
pub fn document_text() -> String {
    let mut text = serde_json::to_string_pretty(&document()).unwrap_or_else(|_| "{}".into());
    text.push('\n');
    text
}

/// `kiwi schema`: the document on stdout (a subcommand: no protocol runs on stdout then).
pub fn print() {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(document_text().as_bytes()).and_then(|()| out.flush()) {
        tracing::warn!("cannot write the schema: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_schema_matches_the_types() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(COMMITTED_PATH);
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == document_text(),
            "{COMMITTED_PATH} is out of date with the wire types; regenerate it with `cargo run -- schema > {COMMITTED_PATH}`"
        );
    }

    #[test]
    fn messages_validate_against_their_schema() {
        let doc = document();
        let validator = |def: &str| {
            let mut schema = doc.clone();
            let obj = schema.as_object_mut().unwrap();
            obj.insert("$ref".into(), Value::from(format!("#/$defs/{def}")));
            jsonschema::draft202012::new(&schema).unwrap()
        };
        let event = validator("Event");
        for good in [
            json!({"type":"TurnEnd","payload":{}}),
            json!({"type":"StepRetry","payload":{"n":1,"next_attempt":2,"max_attempts":3,"wait_s":0.4,"error_type":"APIStatusError","status_code":503}}),
            json!({"type":"ToolResult","payload":{"tool_call_id":"t","return_value":{"is_error":false,"output":"","message":"","display":[{"type":"custom","data":{"x":1}},{"type":"diff","path":"p","old_text":"","new_text":"a","old_start":1,"new_start":1,"is_summary":false}],"extras":null}}}),
        ] {
            assert!(event.is_valid(&good), "{good}");
        }
        for bad in [json!({"type":"StepBegin","payload":{"n":"one"}}), json!({"type":"Nope","payload":{}})] {
            assert!(!event.is_valid(&bad), "{bad}");
        }
        assert!(validator("Request").is_valid(&json!({"type":"HookRequest","payload":{"id":"0123456789ab","subscription_id":"s","event":"Stop","target":"","input_data":{}}})));
        assert!(validator("InitializeParams").is_valid(&json!({"protocol_version":"1.10","capabilities":{"supports_question":true},"hooks":[{"id":"a","event":"Stop"}]})));
    }
}
