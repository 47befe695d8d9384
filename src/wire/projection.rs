//! Soul events → wire frames. Runs as one task: serializes each event once, records it in
//! `wire.jsonl`, queues the frame for the writer, and turns requests into JSON-RPC requests
//! whose answers are interpreted here (the soul only sees typed answers).
//!
//! Requests do not block later events (the 1.3+ behavior): an approval in flight never holds back
//! the events of other tool calls.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::protocol::methods::ApprovalReply;
use crate::protocol::{ApprovalDecision, DisplayBlock, Request, ToolResult, ToolReturnValue, WireMessage};
use crate::rpc::Outbound;
use crate::rpc::pending::{PendingRequests, RawAnswer};
use crate::session::wire_log::WireLog;
use crate::soul::{ClientAnswer, SoulEvent};

pub async fn run_projection(
    mut events: mpsc::Receiver<SoulEvent>,
    outbound: Outbound,
    pending: Arc<PendingRequests>,
    mut log: Option<WireLog>,
) {
    while let Some(item) = events.recv().await {
        match item {
            SoulEvent::Event(event) => {
                let frame = Outbound::event_frame(&event);
                if let Some(log) = &mut log {
                    log.record(WireMessage::Event(event));
                }
                if !outbound.send_raw(frame).await {
                    // stdout is gone; keep draining so the soul never blocks on us.
                    continue;
                }
            }
            SoulEvent::Request { request, reply } => {
                let id = request.id().to_string();
                let frame = Outbound::request_frame(&id, &request);
                let answer = pending.register(id);
                let kind = RequestKind::of(&request);
                if let Some(log) = &mut log {
                    log.record(WireMessage::Request(request));
                }
                tokio::spawn(await_answer(kind, answer, reply, pending.clone()));
                outbound.send_raw(frame).await;
            }
            SoulEvent::RawLine(line) => {
                let mut bytes = line.into_bytes();
                bytes.push(b'\n');
                outbound.send_raw(bytes).await;
            }
            SoulEvent::Flush(done) => {
                if let Some(log) = &mut log {
                    log.flush();
                }
                let _ = done.send(());
            }
        }
    }
    if let Some(log) = &mut log {
        log.flush();
    }
}

#[derive(Clone, Copy)]
enum RequestKind {
    Approval,
    ToolCall,
}

impl RequestKind {
    fn of(request: &Request) -> Self {
        match request {
            Request::ApprovalRequest(_) => RequestKind::Approval,
            Request::ToolCallRequest(_) => RequestKind::ToolCall,
        }
    }
}

async fn await_answer(
    kind: RequestKind,
    answer: oneshot::Receiver<RawAnswer>,
    mut reply: oneshot::Sender<ClientAnswer>,
    pending: Arc<PendingRequests>,
) {
    let raw = tokio::select! {
        raw = answer => raw,
        // The turn was cancelled: forget the request; a late answer finds nobody.
        () = reply.closed() => {
            pending.prune();
            return;
        }
    };
    let interpreted = match raw {
        Ok(raw) => interpret(kind, raw),
        // Shutdown: the waiting side reads a dropped sender as "client gone".
        Err(_) => return,
    };
    let _ = reply.send(interpreted);
}

/// Turns the client's JSON-RPC answer into what the soul understands.
fn interpret(kind: RequestKind, raw: RawAnswer) -> ClientAnswer {
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
