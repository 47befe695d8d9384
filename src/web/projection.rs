//! The session's stream as the sockets see it: [`Hub`], the session's first subscriber, keeps
//! the `session_status` machine in step with turns (and serializes each event once for every
//! socket); [`SocketProjection`] is one socket: events as the wire's frames into its bounded
//! queue, requests put through its `rpc::Peer` as to any wire client (`wire::projection::ask`),
//! and each turn's `prompt` answer followed by the `idle` status.
//!
//! Invariants: nothing here waits for a socket (a full queue disconnects that socket); a request
//! a socket cannot be asked (closing, full) is left to the other sockets, never answered for
//! them; the hub observes every turn's end before any socket does, so the status that follows a
//! `prompt` answer is already the new one.

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use futures::future::BoxFuture;
use tokio::sync::oneshot;

use super::hosted::Hosted;
use super::queue::Outgoing;
use crate::protocol::{Event, Request};
use crate::rpc::writer::encode;
use crate::rpc::{ErrorObject, Outbound, Peer, RequestId};
use crate::soul::{ClientAnswer, Projection, TurnResult, TurnTag};
use crate::wire::extensions::{COST, Granted, TOOL_OUTPUT};
use crate::wire::frames::{event_frame, event_frame_with_cost, request_id, tool_output_frame};
use crate::wire::params::PromptResult;
use crate::wire::projection::{Clients, ask, turn_error};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A frame as a socket sends it: the line without its end.
pub fn text(mut line: Vec<u8>) -> Option<Arc<str>> {
    if line.last() == Some(&b'\n') {
        line.pop();
    }
    String::from_utf8(line).ok().map(Arc::from)
}

/// The last event the hub serialized, keyed by its address: while a socket holds an event, no
/// other live event has its address, and the hub (first subscriber) has always seen it first.
#[derive(Default)]
pub struct FrameCache {
    last: Mutex<Option<(usize, Arc<str>)>>,
}

impl FrameCache {
    fn frame(&self, event: &Event) -> Option<Arc<str>> {
        let key = event as *const Event as usize;
        if let Some((k, frame)) = lock(&self.last).as_ref()
            && *k == key
        {
            return Some(frame.clone());
        }
        text(event_frame(event))
    }

    fn store(&self, event: &Event) {
        let key = event as *const Event as usize;
        *lock(&self.last) = text(event_frame(event)).map(|f| (key, f));
    }
}

/// The session's own first subscriber.
pub struct Hub {
    pub(super) hosted: Weak<Hosted>,
}

impl Projection for Hub {
    fn event<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, ()> {
        if let Some(hosted) = self.hosted.upgrade() {
            hosted.frames.store(event);
        }
        Box::pin(async {})
    }

    // Never answers: the sockets do.
    fn request(&self, _request: Request) -> BoxFuture<'_, oneshot::Receiver<ClientAnswer>> {
        crate::wire::host::unanswered()
    }

    fn turn_ended(&self, _tag: TurnTag, result: TurnResult) -> BoxFuture<'_, ()> {
        // Only a turn whose socket left comes here; the status still follows it.
        if let Some(hosted) = self.hosted.upgrade() {
            hosted.prompt_finished(&result);
        }
        Box::pin(async {})
    }

    fn turn_observed<'a>(&'a self, result: &'a TurnResult) -> BoxFuture<'a, ()> {
        if let Some(hosted) = self.hosted.upgrade() {
            hosted.prompt_finished(result);
        }
        Box::pin(async {})
    }
}

/// One WebSocket client of a session.
pub struct SocketProjection {
    pub out: Arc<Outgoing>,
    /// This client as far as asking it goes; its answers are routed back by the wire handler.
    pub peer: Arc<Peer>,
    hosted: Weak<Hosted>,
    /// What this socket's `initialize` was granted (kiwi-only events go out only when asked).
    pub granted: Arc<Granted>,
}

impl SocketProjection {
    pub fn new(out: Outgoing, hosted: Weak<Hosted>) -> Self {
        let out = Arc::new(out);
        let peer = Peer::new(Outbound::queue(out.clone()), "kiwi");
        Self { out, peer, hosted, granted: Arc::default() }
    }

    pub fn push(&self, frame: &str) -> bool {
        self.out.push(frame.to_string())
    }

    /// The answer to a `prompt`, then the status the end of its turn produced.
    fn prompt_answered(&self, id: Option<RequestId>, result: &TurnResult) {
        let Some(hosted) = self.hosted.upgrade() else { return };
        let (finished_id, status) = hosted.finished();
        if let Some(id) = id.or(finished_id)
            && let Some(frame) = prompt_response(&id, result)
        {
            self.out.push_line(frame);
        }
        if let Some(status) = status {
            self.push(&status);
        }
    }
}

fn is_priced_status(event: &Event) -> bool {
    matches!(event, Event::StatusUpdate(s) if s.cost.is_some())
}

/// `{"id": <prompt id>, "result": {"status": …}}`, or the turn's error.
pub fn prompt_response(id: &RequestId, result: &TurnResult) -> Option<Vec<u8>> {
    #[derive(serde::Serialize)]
    struct Ok<'a, T: serde::Serialize> {
        jsonrpc: &'static str,
        id: &'a RequestId,
        result: T,
    }
    #[derive(serde::Serialize)]
    struct Err<'a> {
        jsonrpc: &'static str,
        id: &'a RequestId,
        error: ErrorObject,
    }
    let answer = match result {
        Result::Ok(outcome) => PromptResult::of(outcome),
        Result::Err(e) => {
            let mut error = turn_error(e);
            // The code and message stay the wire's (clients match on them); a browser also
            // learns why there is no model: which key to set in which config file.
            if let crate::soul::TurnError::LlmNotSet { reason: Some(reason) } = e {
                error.data = serde_json::json!({ "detail": reason });
            }
            return encode(&Err { jsonrpc: "2.0", id, error });
        }
    };
    encode(&Ok { jsonrpc: "2.0", id, result: answer })
}

impl Projection for SocketProjection {
    fn event<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, ()> {
        let frame = match self.hosted.upgrade() {
            // A priced step's status with its `cost` member, for a socket that asked for it.
            Some(_) if self.granted.has(COST) && is_priced_status(event) => text(event_frame_with_cost(event)),
            Some(hosted) => hosted.frames.frame(event),
            None => text(event_frame(event)),
        };
        if let Some(frame) = frame {
            self.push(&frame);
        }
        Box::pin(async {})
    }

    fn tool_output<'a>(&'a self, tool_call_id: &'a str, text: &'a str) -> BoxFuture<'a, ()> {
        if self.granted.has(TOOL_OUTPUT)
            && let Some(frame) = tool_output_frame(tool_call_id, text)
        {
            self.out.push_line(frame);
        }
        Box::pin(async {})
    }

    // The receiver is the answer, awaited by the soul later; the future is only the asking.
    #[allow(clippy::async_yields_async)]
    fn request(&self, request: Request) -> BoxFuture<'_, oneshot::Receiver<ClientAnswer>> {
        Box::pin(ask(&self.peer, request, Clients::Shared))
    }

    fn resolved<'a>(&'a self, request: &'a Request) -> BoxFuture<'a, ()> {
        self.peer.forget(&request_id(request));
        Box::pin(async {})
    }

    fn turn_ended(&self, tag: TurnTag, result: TurnResult) -> BoxFuture<'_, ()> {
        self.prompt_answered(tag.take::<RequestId>(), &result);
        Box::pin(async {})
    }

    fn turn_observed<'a>(&'a self, result: &'a TurnResult) -> BoxFuture<'a, ()> {
        self.prompt_answered(None, result);
        Box::pin(async {})
    }
}
