//! Every event and request the server sends, as `{"type":T,"payload":{...}}`.
//!
//! The same serialization is used for wire `params`, `wire.jsonl` records and nested
//! `SubagentEvent` payloads. All payload fields are always present (nulls included).

use serde::{Deserialize, Serialize};

use super::content::{ContentPart, UserInput};
use super::display::DisplayBlock;
use super::tool::{ToolCall, ToolCallPart, ToolResult};

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub input_other: u64,
    pub output: u64,
    #[serde(default)]
    pub input_cache_read: u64,
    #[serde(default)]
    pub input_cache_creation: u64,
}

impl TokenUsage {
    /// All input tokens of the call (what fills the context window).
    pub fn input(&self) -> u64 {
        self.input_other + self.input_cache_read + self.input_cache_creation
    }

    pub fn total(&self) -> u64 {
        self.input() + self.output
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StatusUpdate {
    pub context_usage: Option<f64>,
    pub token_usage: Option<TokenUsage>,
    pub message_id: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalResponse {
    pub request_id: String,
    pub response: ApprovalDecision,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    pub id: String,
    pub tool_call_id: String,
    pub sender: String,
    pub action: String,
    pub description: String,
    #[serde(default)]
    pub display: Vec<DisplayBlock>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRequest {
    pub id: String,
    pub name: String,
    pub arguments: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubagentEvent {
    pub task_tool_call_id: String,
    pub event: Box<Event>,
}

/// Notifications (`"method":"event"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    CompactionBegin {},
    CompactionEnd {},
    StatusUpdate(StatusUpdate),
    ContentPart(ContentPart),
    ToolCall(ToolCall),
    ToolCallPart(ToolCallPart),
    ToolResult(ToolResult),
    #[serde(alias = "ApprovalRequestResolved")]
    ApprovalResponse(ApprovalResponse),
    SubagentEvent(SubagentEvent),
}

/// Requests (`"method":"request"`); the JSON-RPC id equals `payload.id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", content = "payload")]
pub enum Request {
    ApprovalRequest(ApprovalRequest),
    ToolCallRequest(ToolCallRequest),
}

impl Request {
    pub fn id(&self) -> &str {
        match self {
            Request::ApprovalRequest(r) => &r.id,
            Request::ToolCallRequest(r) => &r.id,
        }
    }
}

/// Anything recorded in `wire.jsonl`: an event or a request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum WireMessage {
    Event(Event),
    Request(Request),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::tool::ToolReturnValue;

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
            r#"{"type":"CompactionBegin","payload":{}}"#,
            r#"{"type":"CompactionEnd","payload":{}}"#,
            r#"{"type":"StatusUpdate","payload":{"context_usage":null,"token_usage":null,"message_id":null}}"#,
            r#"{"type":"StatusUpdate","payload":{"context_usage":0.00005,"token_usage":{"input_other":5,"output":2,"input_cache_read":0,"input_cache_creation":0},"message_id":"scripted-1"}}"#,
            r#"{"type":"ContentPart","payload":{"type":"text","text":"Hello"}}"#,
            r#"{"type":"ContentPart","payload":{"type":"think","think":"...","encrypted":null}}"#,
            r#"{"type":"ToolCall","payload":{"type":"function","id":"tc-1","function":{"name":"Shell","arguments":null},"extras":null}}"#,
            r#"{"type":"ToolCallPart","payload":{"arguments_part":null}}"#,
            r#"{"type":"ToolResult","payload":{"tool_call_id":"tc-1","return_value":{"is_error":false,"output":"","message":"Todo list updated","display":[{"type":"todo","items":[]}],"extras":null}}}"#,
            r#"{"type":"ApprovalResponse","payload":{"request_id":"r","response":"approve_for_session"}}"#,
            r#"{"type":"SubagentEvent","payload":{"task_tool_call_id":"t","event":{"type":"StepBegin","payload":{"n":1}}}}"#,
        ] {
            rt::<Event>(json);
        }
    }

    #[test]
    fn requests_round_trip() {
        rt::<Request>(
            r#"{"type":"ApprovalRequest","payload":{"id":"a","tool_call_id":"tc-1","sender":"Shell","action":"run command","description":"Run command `echo hi`","display":[{"type":"shell","language":"bash","command":"echo hi"}]}}"#,
        );
        rt::<Request>(r#"{"type":"ToolCallRequest","payload":{"id":"c","name":"ext","arguments":null}}"#);
    }

    #[test]
    fn legacy_approval_name_is_read() {
        let e: Event = serde_json::from_str(
            r#"{"type":"ApprovalRequestResolved","payload":{"request_id":"r","response":"reject"}}"#,
        )
        .unwrap();
        assert!(matches!(e, Event::ApprovalResponse(_)));
        assert!(serde_json::to_string(&e).unwrap().contains("\"ApprovalResponse\""));
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

    #[test]
    fn usage_input_sums_cache() {
        let u = TokenUsage { input_other: 10, output: 5, input_cache_read: 3, input_cache_creation: 0 };
        assert_eq!(u.input(), 13);
        let _ = ToolReturnValue::ok("", "");
    }
}
