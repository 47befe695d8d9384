//! Requests the server sends and the client must answer (`docs/protocol-1.10.md` §3.4): approvals,
//! client-owned tool calls, questions, client hooks. The JSON-RPC id of each equals its
//! payload's `id`.
//!
//! Invariants: every member is serialized (nulls included) in the spec's order; a record written
//! by an older server (an `ApprovalRequest` without the 1.6 source fields) reads back with those
//! fields at their defaults; what kiwi's front ends pass along with a request (an approval's
//! parsed arguments and grant) never reaches the wire.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::display::DisplayBlock;

/// Who an approval is for (`docs/protocol-1.10.md` §3.4).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalSource {
    /// The main agent's turn, or a foreground subagent of it.
    #[default]
    ForegroundTurn,
    /// An agent running in the background (its approvals may arrive between turns).
    BackgroundAgent,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalRequest {
    pub id: String,
    pub tool_call_id: String,
    pub sender: String,
    pub action: String,
    pub description: String,
    #[serde(default)]
    pub source_kind: ApprovalSource,
    /// The turn's id (32 hex digits, shared by all approvals of one `prompt`), or a background
    /// task's id.
    #[serde(default)]
    pub source_id: Option<String>,
    #[serde(default)]
    pub agent_id: Option<String>,
    #[serde(default)]
    pub subagent_type: Option<String>,
    /// Always null over the wire; kept for the shape.
    #[serde(default)]
    pub source_description: Option<String>,
    #[serde(default)]
    pub display: Vec<DisplayBlock>,
    /// The asking call's own arguments, parsed (`None` when it had none, or not JSON). Never on
    /// the wire: a front end that shows the call (Claude's `can_use_tool`, ACP's permission card)
    /// reads it here, so it shows exactly the call that asks, a subagent's too.
    #[serde(skip)]
    pub arguments: Option<Value>,
    /// The session's grants for this run (yolo, afk, approve-for-session) cover the request.
    /// Never on the wire; only a front end with approval rules of its own is ever asked with it
    /// set (the others never see a granted request), and it applies it after its own rules.
    #[serde(skip)]
    pub granted: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCallRequest {
    pub id: String,
    pub name: String,
    pub arguments: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct QuestionOption {
    pub label: String,
    #[serde(default)]
    pub description: String,
}

/// One question of a `QuestionRequest`; every member is always present.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct QuestionItem {
    pub question: String,
    #[serde(default)]
    pub header: String,
    pub options: Vec<QuestionOption>,
    #[serde(default)]
    pub multi_select: bool,
    #[serde(default)]
    pub body: String,
    /// The label of the free-text "other" choice a client should offer (empty: its default).
    #[serde(default)]
    pub other_label: String,
    #[serde(default)]
    pub other_description: String,
}

impl QuestionItem {
    /// A question with only the members most callers set.
    pub fn new(question: impl Into<String>, header: impl Into<String>, options: Vec<QuestionOption>) -> Self {
        Self {
            question: question.into(),
            header: header.into(),
            options,
            multi_select: false,
            body: String::new(),
            other_label: String::new(),
            other_description: String::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct QuestionRequest {
    pub id: String,
    pub tool_call_id: String,
    pub questions: Vec<QuestionItem>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HookRequest {
    /// 12 lowercase hex digits.
    pub id: String,
    pub subscription_id: String,
    pub event: String,
    pub target: String,
    /// Exactly what a command hook gets on stdin.
    pub input_data: Map<String, Value>,
}

/// Requests (`"method":"request"`); the JSON-RPC id equals `payload.id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", content = "payload")]
pub enum Request {
    ApprovalRequest(ApprovalRequest),
    ToolCallRequest(ToolCallRequest),
    QuestionRequest(QuestionRequest),
    HookRequest(HookRequest),
}

impl Request {
    pub fn id(&self) -> &str {
        match self {
            Request::ApprovalRequest(r) => &r.id,
            Request::ToolCallRequest(r) => &r.id,
            Request::QuestionRequest(r) => &r.id,
            Request::HookRequest(r) => &r.id,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt(json: &str) {
        let v: Request = serde_json::from_str(json).unwrap();
        assert_eq!(serde_json::to_string(&v).unwrap(), json);
    }

    #[test]
    fn requests_round_trip_against_the_spec() {
        rt(
            r#"{"type":"ApprovalRequest","payload":{"id":"a","tool_call_id":"tc-1","sender":"Shell","action":"run command","description":"Run command `echo hi`","source_kind":"foreground_turn","source_id":"0123456789abcdef0123456789abcdef","agent_id":null,"subagent_type":null,"source_description":null,"display":[{"type":"shell","language":"bash","command":"echo hi"}]}}"#,
        );
        rt(
            r#"{"type":"ApprovalRequest","payload":{"id":"b","tool_call_id":"t","sender":"Shell","action":"run command","description":"d","source_kind":"background_agent","source_id":"agent-1a2b3c4d","agent_id":"ad02dc724","subagent_type":"explore","source_description":null,"display":[]}}"#,
        );
        rt(r#"{"type":"ToolCallRequest","payload":{"id":"c","name":"ext","arguments":null}}"#);
        rt(
            r#"{"type":"QuestionRequest","payload":{"id":"q","tool_call_id":"tc-2","questions":[{"question":"Enter plan mode?","header":"Plan Mode","options":[{"label":"Yes","description":""},{"label":"No","description":"x"}],"multi_select":false,"body":"","other_label":"","other_description":""}]}}"#,
        );
        rt(
            r#"{"type":"HookRequest","payload":{"id":"0123456789ab","subscription_id":"s1","event":"PreToolUse","target":"Shell","input_data":{"hook_event_name":"PreToolUse","session_id":"x","cwd":"/w"}}}"#,
        );
    }

    #[test]
    fn what_front_ends_pass_along_stays_off_the_wire() {
        let json = r#"{"type":"ApprovalRequest","payload":{"id":"a","tool_call_id":"t","sender":"Shell","action":"run command","description":"d","source_kind":"foreground_turn","source_id":null,"agent_id":null,"subagent_type":null,"source_description":null,"display":[]}}"#;
        let Request::ApprovalRequest(mut a) = serde_json::from_str(json).unwrap() else { panic!() };
        assert_eq!((a.arguments.clone(), a.granted), (None, false));
        a.arguments = Some(serde_json::json!({"command": "touch PWNED"}));
        a.granted = true;
        assert_eq!(serde_json::to_string(&Request::ApprovalRequest(a)).unwrap(), json);
    }

    #[test]
    fn a_1_2_approval_request_reads_with_default_source_fields() {
        let r: Request = serde_json::from_str(
            r#"{"type":"ApprovalRequest","payload":{"id":"a","tool_call_id":"t","sender":"Shell","action":"run command","description":"d","display":[]}}"#,
        )
        .unwrap();
        let Request::ApprovalRequest(a) = r else { panic!() };
        assert_eq!((a.source_kind, a.source_id), (ApprovalSource::ForegroundTurn, None));
    }

    #[test]
    fn question_items_fill_their_defaults() {
        let q: QuestionItem = serde_json::from_str(r#"{"question":"q","options":[{"label":"a"}]}"#).unwrap();
        assert_eq!(
            q,
            QuestionItem::new("q", "", vec![QuestionOption { label: "a".into(), description: String::new() }])
        );
        assert!(serde_json::from_str::<QuestionItem>(r#"{"question":"q"}"#).is_err());
    }

    #[test]
    fn unknown_request_types_are_rejected() {
        assert!(serde_json::from_str::<Request>(r#"{"type":"Bogus","payload":{}}"#).is_err());
    }
}
