//! The client's JSON-RPC answers to our requests, interpreted into what the soul understands.
//!
//! Invariant: every answer becomes a typed `ClientAnswer`; an answer that does not fit (an error,
//! a malformed result) is a rejection for approvals and an error result for tool calls, never a
//! hang.

use serde_json::Value;

use super::params::{ApprovalReply, HookReply, QuestionReply};
use crate::protocol::{ApprovalDecision, DisplayBlock, HookAction, Request, ToolResult, ToolReturnValue};
use crate::rpc::pending::RawAnswer;
use crate::soul::ClientAnswer;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestKind {
    Approval,
    ToolCall,
    Question,
    Hook,
}

impl RequestKind {
    pub fn of(request: &Request) -> Self {
        match request {
            Request::ApprovalRequest(_) => RequestKind::Approval,
            Request::ToolCallRequest(_) => RequestKind::ToolCall,
            Request::QuestionRequest(_) => RequestKind::Question,
            Request::HookRequest(_) => RequestKind::Hook,
        }
    }
}

/// Turns the client's JSON-RPC answer into what the soul understands (`docs/protocol-1.10.md` §3.5):
/// whatever does not fit is a rejection, an error result, a dismissal or an allow.
pub fn interpret(kind: RequestKind, raw: RawAnswer) -> ClientAnswer {
    let value = match raw {
        Ok(value) => Some(value),
        Err(error) => {
            tracing::info!("{kind:?} request answered with error {}: {}", error.code, error.message);
            if kind == RequestKind::ToolCall {
                return ClientAnswer::ToolResult(ToolReturnValue::error(error.message, "External tool error"));
            }
            None
        }
    };
    match kind {
        RequestKind::Approval => match value.map(serde_json::from_value::<ApprovalReply>) {
            Some(Ok(reply)) => ClientAnswer::Approval { decision: reply.response, feedback: reply.feedback },
            other => {
                if let Some(Err(e)) = other {
                    tracing::info!("invalid approval answer ({e}); counting it as reject");
                }
                ClientAnswer::Approval { decision: ApprovalDecision::Reject, feedback: String::new() }
            }
        },
        RequestKind::ToolCall => ClientAnswer::ToolResult(tool_result(value.unwrap_or(Value::Null))),
        RequestKind::Question => match value.map(serde_json::from_value::<QuestionReply>) {
            Some(Ok(reply)) if !reply.answers.is_empty() => ClientAnswer::Questions(Some(reply.answers)),
            _ => ClientAnswer::Questions(None),
        },
        RequestKind::Hook => match value.map(serde_json::from_value::<HookReply>) {
            Some(Ok(reply)) => ClientAnswer::Hook { action: reply.action, reason: reply.reason },
            _ => ClientAnswer::Hook { action: HookAction::Allow, reason: String::new() },
        },
    }
}

fn tool_result(value: Value) -> ToolReturnValue {
    match serde_json::from_value::<ToolResult>(value) {
        Ok(result) => result.return_value,
        Err(e) => {
            tracing::info!("invalid tool result from client: {e}");
            ToolReturnValue {
                display: vec![DisplayBlock::brief("Invalid tool result")],
                ..ToolReturnValue::error("Invalid tool result payload from client.", "")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::ErrorCode;

    #[test]
    fn approval_answers() {
        let reject = || ClientAnswer::Approval { decision: ApprovalDecision::Reject, feedback: String::new() };
        let ok = serde_json::json!({"request_id":"a","response":"approve_for_session"});
        assert_eq!(
            interpret(RequestKind::Approval, Ok(ok)),
            ClientAnswer::Approval { decision: ApprovalDecision::ApproveForSession, feedback: String::new() }
        );
        let with_feedback = serde_json::json!({"request_id":"a","response":"reject","feedback":"use rg"});
        assert_eq!(
            interpret(RequestKind::Approval, Ok(with_feedback)),
            ClientAnswer::Approval { decision: ApprovalDecision::Reject, feedback: "use rg".into() }
        );
        for bad in [
            serde_json::json!({"response":"approve"}),
            Value::Null,
            serde_json::json!({"request_id":"a","response":"yes"}),
            serde_json::json!({"request_id":"a","response":"approve","feedback":5}),
        ] {
            assert_eq!(interpret(RequestKind::Approval, Ok(bad)), reject());
        }
        let err = ErrorCode::InternalError.with_message("x");
        assert_eq!(interpret(RequestKind::Approval, Err(err)), reject());
    }

    #[test]
    fn question_answers() {
        let answered = serde_json::json!({"request_id":"q","answers":{"Enter plan mode?":"Yes"}});
        let ClientAnswer::Questions(Some(a)) = interpret(RequestKind::Question, Ok(answered)) else { panic!() };
        assert_eq!(a["Enter plan mode?"], "Yes");
        for dismissed in [serde_json::json!({}), serde_json::json!({"request_id":"q","answers":{}}), Value::Null] {
            assert_eq!(interpret(RequestKind::Question, Ok(dismissed)), ClientAnswer::Questions(None));
        }
        let err = ErrorCode::InternalError.with_message("x");
        assert_eq!(interpret(RequestKind::Question, Err(err)), ClientAnswer::Questions(None));
    }

    #[test]
    fn hook_answers_fail_open() {
        let block = serde_json::json!({"request_id":"h","action":"block","reason":"no"});
        assert_eq!(
            interpret(RequestKind::Hook, Ok(block)),
            ClientAnswer::Hook { action: HookAction::Block, reason: "no".into() }
        );
        let allow = ClientAnswer::Hook { action: HookAction::Allow, reason: String::new() };
        assert_eq!(interpret(RequestKind::Hook, Ok(serde_json::json!({"action":"block"}))), allow);
        let err = ErrorCode::InternalError.with_message("x");
        assert_eq!(interpret(RequestKind::Hook, Err(err)), allow);
    }

    #[test]
    fn tool_answers() {
        let err = ErrorCode::InternalError.with_message("boom");
        let ClientAnswer::ToolResult(r) = interpret(RequestKind::ToolCall, Err(err)) else { panic!() };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"is_error":true,"output":"","message":"boom","display":[{"type":"brief","text":"External tool error"}],"extras":null}"#
        );
        let ClientAnswer::ToolResult(r) = interpret(RequestKind::ToolCall, Ok(serde_json::json!({"x":1}))) else {
            panic!()
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"is_error":true,"output":"","message":"Invalid tool result payload from client.","display":[{"type":"brief","text":"Invalid tool result"}],"extras":null}"#
        );
        let good = serde_json::json!({"tool_call_id":"c","return_value":{"is_error":false,"output":"o","message":"m","display":[{"type":"custom","foo":1}]}});
        let ClientAnswer::ToolResult(r) = interpret(RequestKind::ToolCall, Ok(good)) else { panic!() };
        assert_eq!(serde_json::to_value(&r.display).unwrap(), serde_json::json!([{"type":"custom","data":{"foo":1}}]));
    }
}
