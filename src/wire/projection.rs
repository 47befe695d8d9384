//! The wire's projection of the soul's events: each event becomes one `event` notification, each
//! request one JSON-RPC request whose answer is interpreted here (the soul only sees typed
//! answers), and a turn's outcome becomes the answer to the `prompt` that started it.
//!
//! Requests do not block later events (the 1.3+ behavior): the answer is awaited on its own task,
//! so an approval in flight never holds back the events of other tool calls.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::oneshot;

use super::answers::{RequestKind, interpret};
use super::frames::{event_frame, request_frame, request_id};
use super::params::PromptResult;
use crate::protocol::{ApprovalDecision, Event, HookAction, Request, ToolReturnValue};
use crate::rpc::pending::{PendingRequests, RawAnswer};
use crate::rpc::{ErrorCode, ErrorObject, Outbound, RequestId};
use crate::soul::{ClientAnswer, Projection, TurnError, TurnOutcome, TurnResult, TurnTag};

pub struct WireProjection {
    outbound: Outbound,
    pending: Arc<PendingRequests>,
}

impl WireProjection {
    pub fn new(outbound: Outbound, pending: Arc<PendingRequests>) -> Self {
        Self { outbound, pending }
    }
}

impl Projection for WireProjection {
    fn event<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            // When stdout is gone the frame is dropped; the soul must never block on us.
            self.outbound.send_raw(event_frame(event)).await;
        })
    }

    // The receiver is the answer, awaited by the soul later; the future is only the send.
    #[allow(clippy::async_yields_async)]
    fn request(&self, request: Request) -> BoxFuture<'_, oneshot::Receiver<ClientAnswer>> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            let kind = RequestKind::of(&request);
            let id = request_id(&request);
            let Ok(raw) = self.pending.register(id.clone()) else {
                // Two calls of one step share a model-chosen id: the client's answer could not
                // be told apart, so the later call gets its own clear error instead.
                let _ = reply.send(duplicate_id_answer(kind, &id));
                return answer;
            };
            match request_frame(&id, &request) {
                Some(frame) => {
                    tokio::spawn(await_answer(kind, raw, reply, self.pending.clone()));
                    if !self.outbound.send_raw(frame).await {
                        // Nobody can answer any more: resolve now (reject / dismiss / allow / an
                        // error result) instead of waiting for a timeout or shutdown.
                        self.pending.resolve(&id, Err(ErrorCode::InternalError.with_message("the output is closed")));
                    }
                }
                None => {
                    self.pending.resolve(&id, Err(ErrorCode::InternalError.with_message("cannot send the request")));
                    let _ = reply.send(interpret(kind, Err(ErrorCode::InternalError.with_message("cannot send"))));
                }
            }
            answer
        })
    }

    fn turn_ended(&self, tag: TurnTag, result: TurnResult) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let Some(id) = tag.take::<RequestId>() else {
                tracing::error!("a turn ended without the id of its prompt");
                return;
            };
            match result {
                Ok(TurnOutcome::Finished(_)) => self.outbound.respond(&id, &PromptResult::Finished).await,
                Ok(TurnOutcome::Cancelled) => self.outbound.respond(&id, &PromptResult::Cancelled).await,
                Ok(TurnOutcome::MaxStepsReached(steps)) => {
                    self.outbound.respond(&id, &PromptResult::MaxStepsReached { steps }).await
                }
                Err(e) => self.outbound.error(Some(&id), &turn_error(&e)).await,
            }
        })
    }
}

fn duplicate_id_answer(kind: RequestKind, id: &RequestId) -> ClientAnswer {
    match kind {
        RequestKind::Approval => ClientAnswer::Approval { decision: ApprovalDecision::Reject, feedback: String::new() },
        RequestKind::Question => ClientAnswer::Questions(None),
        RequestKind::Hook => ClientAnswer::Hook { action: HookAction::Allow, reason: String::new() },
        RequestKind::ToolCall => ClientAnswer::ToolResult(ToolReturnValue::error(
            format!(
                "Another call with the id `{id}` is still waiting for the client; tool call ids must be unique. \
                 Call the tool again."
            ),
            "Duplicate tool call id",
        )),
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
    // On shutdown (`Err`) the reply is dropped: the waiting side reads that as "client gone".
    if let Ok(raw) = raw {
        let _ = reply.send(interpret(kind, raw));
    }
}

/// Each way a turn can fail, as its JSON-RPC error.
pub fn turn_error(e: &TurnError) -> ErrorObject {
    let code = match e {
        TurnError::LlmNotSet { .. } => ErrorCode::LlmNotSet,
        TurnError::Capability { .. } => ErrorCode::LlmCapability,
        TurnError::Provider(crate::llm::ChatError::LoginExpired) => ErrorCode::LoginExpired,
        TurnError::Provider(_) => ErrorCode::ChatProvider,
        TurnError::Internal { .. } => ErrorCode::InternalError,
    };
    // The whole error object is the interface (harnesses compare it): the fixed text and no
    // `data`. Why the model is missing is in the log and the start-up warning on stderr.
    code.with_message(e.to_string())
}
