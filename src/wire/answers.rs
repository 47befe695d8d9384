//! The client's JSON-RPC answers to our requests, interpreted into what the soul understands.
//!
//! Invariant: every answer becomes a typed `ClientAnswer`; an answer that does not fit (an error,
//! a malformed result) is a rejection for approvals and an error result for tool calls, never a
//! hang.

use serde_json::Value;

use super::params::ApprovalReply;
use crate::protocol::{ApprovalDecision, DisplayBlock, Request, ToolResult, ToolReturnValue};
use crate::rpc::pending::RawAnswer;
use crate::soul::ClientAnswer;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestKind {
    Approval,
    ToolCall,
}

impl RequestKind {
    pub fn of(request: &Request) -> Self {
        match request {
            Request::ApprovalRequest(_) => RequestKind::Approval,
            Request::ToolCallRequest(_) => RequestKind::ToolCall,
        }
    }
}

/// Turns the client's JSON-RPC answer into what the soul understands.
pub fn interpret(kind: RequestKind, raw: RawAnswer) -> ClientAnswer {
    match kind {
        RequestKind::Approval => {
            let decision = match raw {
                Ok(value) => match serde_json::from_value::<ApprovalReply>(value) {
                    Ok(reply) => reply.response,
                    Err(e) => {
                        tracing::info!("invalid approval answer ({e}); counting it as reject");
                        ApprovalDecision::Reject
                    }
                },
                Err(error) => {
                    tracing::info!("approval answered with error {}; counting it as reject", error.code);
                    ApprovalDecision::Reject
                }
            };
            ClientAnswer::Approval(decision)
        }
        RequestKind::ToolCall => ClientAnswer::ToolResult(match raw {
            Ok(value) => tool_result(value),
            Err(error) => ToolReturnValue::error(error.message, "External tool error"),
        }),
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
        let ok = serde_json::json!({"request_id":"a","response":"approve_for_session"});
        assert_eq!(
            interpret(RequestKind::Approval, Ok(ok)),
            ClientAnswer::Approval(ApprovalDecision::ApproveForSession)
        );
        for bad in [
            serde_json::json!({"response":"approve"}),
            Value::Null,
            serde_json::json!({"request_id":"a","response":"yes"}),
        ] {
            assert_eq!(interpret(RequestKind::Approval, Ok(bad)), ClientAnswer::Approval(ApprovalDecision::Reject));
        }
        let err = ErrorCode::InternalError.with_message("x");
        assert_eq!(interpret(RequestKind::Approval, Err(err)), ClientAnswer::Approval(ApprovalDecision::Reject));
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
