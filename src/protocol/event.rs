//! Every event the server sends, as `{"type":T,"payload":{...}}` (`docs/protocol.md` §5,
//! `docs/protocol-1.10.md` §3.1).
//!
//! The same serialization is used for wire `params`, `wire.jsonl` records and nested
//! `SubagentEvent` payloads. All payload members are always present (nulls included). Records of
//! older servers read back in the current shape: the legacy `ApprovalRequestResolved` becomes
//! `ApprovalResponse` (with `feedback:""`), a pre-1.6 `SubagentEvent`'s `task_tool_call_id`
//! becomes `parent_tool_call_id`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::content::{ContentPart, UserInput};
use super::request::Request;
use super::status::StatusUpdate;
use super::tool::{ToolCall, ToolCallPart, ToolResult};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalDecision {
    Approve,
    ApproveForSession,
    Reject,
}

impl ApprovalDecision {
    pub fn is_approved(self) -> bool {
        !matches!(self, ApprovalDecision::Reject)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalResponse {
    pub request_id: String,
    pub response: ApprovalDecision,
    #[serde(default)]
    pub feedback: String,
}

/// An event of a subagent, wrapped (`docs/protocol-1.10.md` §8.3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SubagentEvent {
    /// The `Agent` tool call that runs the subagent (`task_tool_call_id` before 1.6).
    #[serde(default, alias = "task_tool_call_id")]
    pub parent_tool_call_id: Option<String>,
    #[serde(default)]
    pub agent_id: Option<String>,
    #[serde(default)]
    pub subagent_type: Option<String>,
    pub event: Box<Event>,
}

/// `StepRetry` (`docs/protocol-1.10.md` §4.2): an LLM call failed and is about to be retried.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct StepRetry {
    pub n: u32,
    /// The failed attempt's number plus one (the first retry is attempt 2).
    pub next_attempt: u32,
    pub max_attempts: u32,
    /// Seconds about to be slept before the next attempt.
    pub wait_s: f64,
    /// `APIStatusError`, `APIConnectionError`, `APITimeoutError` or `APIEmptyResponseError`.
    pub error_type: String,
    /// The HTTP status of an `APIStatusError`.
    pub status_code: Option<u16>,
}

/// What a batch of hooks decided.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HookAction {
    #[default]
    Allow,
    Block,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HookTriggered {
    pub event: String,
    pub target: String,
    pub hook_count: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HookResolved {
    pub event: String,
    pub target: String,
    pub action: HookAction,
    pub reason: String,
    pub duration_ms: u64,
}

/// A background notification (`docs/protocol-1.10.md` §9.3). Comes with background tasks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Notification {
    pub id: String,
    pub category: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub source_kind: String,
    pub source_id: String,
    pub title: String,
    pub body: String,
    pub severity: String,
    /// Epoch seconds.
    pub created_at: f64,
    pub payload: Map<String, Value>,
}

/// Notifications (`"method":"event"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", content = "payload")]
pub enum Event {
    TurnBegin {
        user_input: UserInput,
    },
    TurnEnd {},
    StepBegin {
        n: u32,
    },
    StepInterrupted {},
    StepRetry(StepRetry),
    /// Input a client steered into the running turn, exactly as received.
    SteerInput {
        user_input: UserInput,
    },
    CompactionBegin {},
    CompactionEnd {},
    StatusUpdate(StatusUpdate),
    ContentPart(ContentPart),
    ToolCall(ToolCall),
    ToolCallPart(ToolCallPart),
    ToolResult(ToolResult),
    #[serde(alias = "ApprovalRequestResolved")]
    ApprovalResponse(ApprovalResponse),
    /// A plan presented by `ExitPlanMode`, before its approval question.
    PlanDisplay {
        content: String,
        file_path: String,
    },
    HookTriggered(HookTriggered),
    HookResolved(HookResolved),
    #[serde(rename = "MCPLoadingBegin")]
    McpLoadingBegin {},
    #[serde(rename = "MCPLoadingEnd")]
    McpLoadingEnd {},
    Notification(Notification),
    SubagentEvent(SubagentEvent),
    /// Defined for reading records of other servers; `--wire` never emits it.
    BtwBegin {
        id: String,
        question: String,
    },
    /// Defined for reading records of other servers; `--wire` never emits it.
    BtwEnd {
        id: String,
        response: Option<String>,
        error: Option<String>,
    },
}

/// Anything recorded in `wire.jsonl`: an event or a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum WireMessage {
    Event(Event),
    Request(Request),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt<T: Serialize + for<'de> Deserialize<'de>>(json: &str) {
        let v: T = serde_json::from_str(json).unwrap();
        assert_eq!(serde_json::to_string(&v).unwrap(), json);
    }

    #[test]
    fn every_event_round_trips_against_the_spec() {
        for json in [
            r#"{"type":"TurnBegin","payload":{"user_input":"go"}}"#,
            r#"{"type":"TurnBegin","payload":{"user_input":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"u","id":null}}]}}"#,
            r#"{"type":"TurnEnd","payload":{}}"#,
            r#"{"type":"StepBegin","payload":{"n":1}}"#,
            r#"{"type":"StepInterrupted","payload":{}}"#,
            r#"{"type":"StepRetry","payload":{"n":1,"next_attempt":2,"max_attempts":3,"wait_s":0.42,"error_type":"APIStatusError","status_code":503}}"#,
            r#"{"type":"StepRetry","payload":{"n":2,"next_attempt":3,"max_attempts":3,"wait_s":1.0,"error_type":"APIConnectionError","status_code":null}}"#,
            r#"{"type":"SteerInput","payload":{"user_input":"also do this"}}"#,
            r#"{"type":"SteerInput","payload":{"user_input":[{"type":"text","text":"and this"}]}}"#,
            r#"{"type":"CompactionBegin","payload":{}}"#,
            r#"{"type":"CompactionEnd","payload":{}}"#,
            r#"{"type":"StatusUpdate","payload":{"context_usage":null,"context_tokens":null,"max_context_tokens":null,"token_usage":null,"message_id":null,"plan_mode":false,"mcp_status":null}}"#,
            r#"{"type":"ContentPart","payload":{"type":"text","text":"Hello"}}"#,
            r#"{"type":"ContentPart","payload":{"type":"think","think":"...","encrypted":null}}"#,
            r#"{"type":"ToolCall","payload":{"type":"function","id":"tc-1","function":{"name":"Shell","arguments":null},"extras":null}}"#,
            r#"{"type":"ToolCallPart","payload":{"arguments_part":null}}"#,
            r#"{"type":"ToolResult","payload":{"tool_call_id":"tc-1","return_value":{"is_error":false,"output":"","message":"Todo list updated","display":[{"type":"todo","items":[]}],"extras":null}}}"#,
            r#"{"type":"ApprovalResponse","payload":{"request_id":"r","response":"approve_for_session","feedback":""}}"#,
            r#"{"type":"ApprovalResponse","payload":{"request_id":"r","response":"reject","feedback":"use rg"}}"#,
            r##"{"type":"PlanDisplay","payload":{"content":"# Plan","file_path":"/h/.kimi/plans/a-b-c.md"}}"##,
            r#"{"type":"HookTriggered","payload":{"event":"UserPromptSubmit","target":"this is forbidden","hook_count":1}}"#,
            r#"{"type":"HookResolved","payload":{"event":"UserPromptSubmit","target":"this is forbidden","action":"block","reason":"no way","duration_ms":12}}"#,
            r#"{"type":"MCPLoadingBegin","payload":{}}"#,
            r#"{"type":"MCPLoadingEnd","payload":{}}"#,
            r#"{"type":"Notification","payload":{"id":"n1234abcd","category":"task","type":"task.completed","source_kind":"background_task","source_id":"bash-a1b2c3d4","title":"Background task completed: sleep","body":"Task ID: bash-a1b2c3d4","severity":"success","created_at":1767225600.5,"payload":{"task_id":"bash-a1b2c3d4","exit_code":0}}}"#,
            r#"{"type":"SubagentEvent","payload":{"parent_tool_call_id":"t","agent_id":"ad02dc724","subagent_type":"explore","event":{"type":"StepBegin","payload":{"n":1}}}}"#,
            r#"{"type":"BtwBegin","payload":{"id":"b1","question":"why?"}}"#,
            r#"{"type":"BtwEnd","payload":{"id":"b1","response":null,"error":"failed"}}"#,
        ] {
            rt::<Event>(json);
        }
    }

    #[test]
    fn legacy_records_read_in_the_current_shape() {
        let e: Event = serde_json::from_str(
            r#"{"type":"ApprovalRequestResolved","payload":{"request_id":"r","response":"reject"}}"#,
        )
        .unwrap();
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"type":"ApprovalResponse","payload":{"request_id":"r","response":"reject","feedback":""}}"#
        );
        let e: Event = serde_json::from_str(
            r#"{"type":"SubagentEvent","payload":{"task_tool_call_id":"t","event":{"type":"TurnEnd","payload":{}}}}"#,
        )
        .unwrap();
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"type":"SubagentEvent","payload":{"parent_tool_call_id":"t","agent_id":null,"subagent_type":null,"event":{"type":"TurnEnd","payload":{}}}}"#
        );
    }

    #[test]
    fn bad_payloads_are_rejected() {
        for bad in [
            r#"{"type":"Bogus","payload":{}}"#,
            r#"{"type":"HookResolved","payload":{"event":"Stop","target":"","action":"maybe","reason":"","duration_ms":1}}"#,
            r#"{"type":"StepRetry","payload":{"n":1}}"#,
            r#"{"type":"SteerInput","payload":{"user_input":5}}"#,
        ] {
            assert!(serde_json::from_str::<Event>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn wire_message_distinguishes_requests() {
        let m: WireMessage =
            serde_json::from_str(r#"{"type":"ToolCallRequest","payload":{"id":"c","name":"ext","arguments":"{}"}}"#)
                .unwrap();
        assert!(matches!(m, WireMessage::Request(_)));
        let m: WireMessage = serde_json::from_str(r#"{"type":"TurnEnd","payload":{}}"#).unwrap();
        assert!(matches!(m, WireMessage::Event(_)));
    }
}
