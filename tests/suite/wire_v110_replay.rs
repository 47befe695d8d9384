//! `replay` (`docs/protocol-1.10.md` §2.6) over real pipes: a session recorded by an earlier process,
//! torn and foreign lines, older records in the current shape, replayed requests.

use crate::common;

use std::path::PathBuf;
use std::time::Duration;

use common::{Env, Kiwi, types};
use serde_json::{Value, json};

fn session_dir(env: &Env, id: &str) -> PathBuf {
    use md5::{Digest, Md5};
    let key: String = Md5::digest(env.work().to_str().unwrap().as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    env.share().join("sessions").join(key).join(id)
}

fn shell(id: &str, command: &str) -> String {
    let args = serde_json::to_string(&json!({ "command": command })).unwrap();
    format!("tool_call: {}", json!({"id": id, "name": "Shell", "arguments": args}))
}

fn finish(mut k: Kiwi) {
    k.close_stdin();
    assert!(k.wait_exit(Duration::from_secs(5)).expect("exit").success());
}

/// Replays and returns (what was sent, the result).
fn replay(k: &mut Kiwi, id: &str) -> (Vec<Value>, Value) {
    let (sent, response) = k.call(id, "replay", json!({}));
    (sent, response["result"].clone())
}

/// An approved Shell turn replays as its recorded events and no requests (approvals are not
/// recorded), after the process that recorded it is gone; `set_plan_mode`'s update is replayed.
#[test]
fn a_session_of_an_earlier_process_replays_in_order() {
    let env = Env::new();
    let config = env.scripted_config(&[&shell("tc-1", "echo hi"), "text: done"]);
    let mut k = env.spawn(&config, &["--session", "r"]);
    k.send(json!({"jsonrpc":"2.0","id":"p","method":"prompt","params":{"user_input":"go"}}));
    let (_, request) = k.until_request();
    k.send(json!({"jsonrpc":"2.0","id":request["id"],"result":{"request_id":request["id"],"response":"approve"}}));
    k.until_response(&json!("p"));
    let (_, plan) = k.call("m", "set_plan_mode", json!({"enabled": true}));
    assert_eq!(plan["result"]["plan_mode"], true);
    finish(k);

    let mut k = env.spawn(&config, &["--session", "r"]);
    let (sent, result) = replay(&mut k, "r1");
    assert_eq!(result, json!({"status":"finished","events":10,"requests":0}));
    assert_eq!(
        types(&sent),
        [
            "TurnBegin",
            "StepBegin",
            "ToolCall",
            "StatusUpdate",
            "ToolResult",
            "StepBegin",
            "ContentPart",
            "StatusUpdate",
            "TurnEnd",
            "StatusUpdate"
        ]
    );
    assert_eq!(sent[9]["params"]["payload"]["plan_mode"], true);
    // A replay is repeatable and leaves the server idle.
    let (_, again) = replay(&mut k, "r2");
    assert_eq!(again, result);
}

/// Torn last line, blank lines, foreign and invalid records are skipped; older records are sent
/// in the current schema; requests go out as requests whose answers are ignored.
#[test]
fn old_torn_and_foreign_records() {
    let env = Env::new();
    let dir = session_dir(&env, "old");
    std::fs::create_dir_all(&dir).unwrap();
    let lines = [
        r#"{"type": "metadata", "protocol_version": "1.1"}"#,
        "",
        r#"{"timestamp": 1, "message": {"type": "TurnBegin", "payload": {"user_input": "go"}}}"#,
        r#"{"timestamp": 2, "message": {"type": "StatusUpdate", "payload": {"context_usage": 0.5, "token_usage": null, "message_id": null}}}"#,
        r#"{"timestamp": 3, "message": {"type": "ApprovalRequest", "payload": {"id": "ap-1", "tool_call_id": "t", "sender": "Shell", "action": "run command", "description": "d", "display": []}}}"#,
        r#"{"timestamp": 4, "message": {"type": "ApprovalRequestResolved", "payload": {"request_id": "ap-1", "response": "approve"}}}"#,
        r#"{"timestamp": 5, "message": {"type": "SubagentEvent", "payload": {"task_tool_call_id": "task-1", "event": {"type": "StepBegin", "payload": {"n": 1}}}}}"#,
        r#"{"timestamp": 6, "message": {"type": "FutureEvent", "payload": {}}}"#,
        r#"{"timestamp": 7, "message": {"type": "StepBegin", "payload": {"n": "one"}}}"#,
        "this line is not json",
        r#"{"timestamp": 8, "message": {"type": "ToolCallRequest", "payload": {"id": "ext-1", "name": "lookup", "arguments": null}}}"#,
        r#"{"timestamp": 9, "message": {"type": "TurnEnd", "payload": {}}}"#,
        r#"{"timestamp": 10, "message": {"type": "TurnBegin", "payload": {"user_inp"#,
    ];
    std::fs::write(dir.join("wire.jsonl"), lines.join("\n")).unwrap();
    let config = env.scripted_config(&["text: live"]);
    let mut k = env.spawn(&config, &["--session", "old"]);
    let (sent, result) = replay(&mut k, "r");
    assert_eq!(result, json!({"status":"finished","events":5,"requests":2}));
    assert_eq!(
        types(&sent),
        [
            "TurnBegin",
            "StatusUpdate",
            "request:ApprovalRequest",
            "ApprovalResponse",
            "SubagentEvent",
            "request:ToolCallRequest",
            "TurnEnd"
        ]
    );
    assert_eq!(
        sent[1]["params"]["payload"],
        json!({"context_usage":0.5,"context_tokens":null,"max_context_tokens":null,"token_usage":null,"message_id":null,"plan_mode":null,"mcp_status":null})
    );
    assert_eq!(sent[2]["id"], "ap-1", "the JSON-RPC id is the payload's");
    assert_eq!(sent[2]["params"]["payload"]["source_kind"], "foreground_turn");
    assert_eq!(sent[3]["params"]["payload"], json!({"request_id":"ap-1","response":"approve","feedback":""}));
    assert_eq!(
        sent[4]["params"]["payload"],
        json!({"parent_tool_call_id":"task-1","agent_id":null,"subagent_type":null,"event":{"type":"StepBegin","payload":{"n":1}}})
    );
    // Replayed requests are informational: answering them does nothing, the server serves on.
    k.send(json!({"jsonrpc":"2.0","id":"ap-1","result":{"request_id":"ap-1","response":"approve"}}));
    k.send(json!({"jsonrpc":"2.0","id":"ext-1","result":{"tool_call_id":"ext-1","return_value":{"is_error":false,"output":"","message":"","display":[]}}}));
    let (events, response) = k.prompt("p", json!("now"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(types(&events), ["TurnBegin", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd"]);
    finish(k);
    // The live turn was appended on a fresh line after the torn one.
    let text = std::fs::read_to_string(dir.join("wire.jsonl")).unwrap();
    assert!(text.lines().last().unwrap().contains("TurnEnd"), "{text}");
}
