//! The wire's projection of the soul's events: each event becomes one `event` notification, each
//! request one JSON-RPC request whose answer is interpreted here (the soul only sees typed
//! answers), and a turn's outcome becomes the answer to the `prompt` that started it.
//!
//! Requests do not block later events (the 1.3+ behavior): the answer is awaited on its own task,
//! so an approval in flight never holds back the events of other tool calls. [`ask`] is how every
//! wire client is asked, the sole stdio client and each browser socket alike.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::oneshot;

use super::answers::{RequestKind, interpret};
use super::errors::WireError;
use super::extensions::{COST, Granted, TOOL_OUTPUT};
use super::frames::{event_frame, event_frame_with_cost, request_frame, request_id, tool_output_frame};
use super::params::PromptResult;
use crate::protocol::{ApprovalDecision, Event, HookAction, Request, ToolReturnValue};
use crate::rpc::peer::{IdTaken, Settled};
use crate::rpc::{ErrorCode, ErrorObject, Peer, RequestId};
use crate::soul::{ClientAnswer, Projection, TurnError, TurnResult, TurnTag};

pub struct WireProjection {
    peer: Arc<Peer>,
    /// What the client's `initialize` was granted (kiwi-only events go out only when asked).
    granted: Arc<Granted>,
}

impl WireProjection {
    pub fn new(peer: Arc<Peer>) -> Self {
        Self { peer, granted: Arc::default() }
    }

    /// The client's grant, set by the dispatcher when it answers `initialize`.
    pub fn granted(&self) -> Arc<Granted> {
        self.granted.clone()
    }
}

impl Projection for WireProjection {
    fn event<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            // When stdout is gone the frame is dropped; the soul must never block on us.
            let frame = if self.granted.has(COST) { event_frame_with_cost(event) } else { event_frame(event) };
            self.peer.outbound().send_raw(frame).await;
        })
    }

    fn tool_output<'a>(&'a self, tool_call_id: &'a str, text: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if self.granted.has(TOOL_OUTPUT)
                && let Some(frame) = tool_output_frame(tool_call_id, text)
            {
                self.peer.outbound().send_raw(frame).await;
            }
        })
    }

    // The receiver is the answer, awaited by the soul later; the future is only the send.
    #[allow(clippy::async_yields_async)]
    fn request(&self, request: Request) -> BoxFuture<'_, oneshot::Receiver<ClientAnswer>> {
        Box::pin(ask(&self.peer, request, Clients::Sole))
    }

    fn resolved<'a>(&'a self, request: &'a Request) -> BoxFuture<'a, ()> {
        self.peer.forget(&request_id(request));
        Box::pin(async {})
    }

    fn turn_ended(&self, tag: TurnTag, result: TurnResult) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let Some(id) = tag.take::<RequestId>() else {
                tracing::error!("a turn ended without the id of its prompt");
                return;
            };
            let out = self.peer.outbound();
            match result {
                Ok(outcome) => out.respond(&id, &PromptResult::of(&outcome)).await,
                Err(e) => out.error(Some(&id), &turn_error(&e)).await,
            }
        })
    }
}

/// Whether the client is the session's only one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clients {
    /// It alone can answer: a request it cannot be asked is answered with an error for it.
    Sole,
    /// One of several (browser sockets): a request it cannot be asked (closing, fallen behind,
    /// an id still waiting here) is left to the others, never answered for them.
    Shared,
}

/// Puts `request` to the client through its peer (the one way kiwi asks a client anything);
/// the receiver gets the interpreted answer.
pub async fn ask(peer: &Peer, request: Request, clients: Clients) -> oneshot::Receiver<ClientAnswer> {
    let (reply, answer) = oneshot::channel();
    let kind = RequestKind::of(&request);
    let id = request_id(&request);
    let frame = request_frame(&id, &request);
    let settle = move |settled: Settled| async move {
        match settled {
            Settled::Unsent if clients == Clients::Shared => None,
            settled => settled.answer().map(|raw| interpret(kind, raw)),
        }
    };
    if let Err(IdTaken(reply)) = peer.ask(id.clone(), frame, reply, settle).await
        && clients == Clients::Sole
    {
        // Two calls of one step share a model-chosen id: the client's answer could not
        // be told apart, so the later call gets its own clear error instead.
        let _ = reply.send(duplicate_id_answer(kind, &id));
    }
    answer
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

/// Each way a turn can fail, as its JSON-RPC error.
pub fn turn_error(e: &TurnError) -> ErrorObject {
    // The whole error object is the interface (harnesses compare it): the fixed text and no
    // `data`. Why the model is missing is in the log and the start-up warning on stderr.
    let message = e.to_string();
    match e {
        TurnError::LlmNotSet { .. } => WireError::LlmNotSet.with_message(message),
        TurnError::Capability { .. } => WireError::LlmCapability.with_message(message),
        TurnError::Provider(crate::llm::ChatError::LoginExpired) => WireError::LoginExpired.with_message(message),
        TurnError::Provider(_) => WireError::ChatProvider.with_message(message),
        TurnError::Internal { .. } => ErrorCode::InternalError.with_message(message),
    }
}
