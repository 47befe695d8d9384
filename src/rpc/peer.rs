//! The one way kiwi asks its client something: send a request under an id, wait for the answer
//! that carries the same id, and hand it on (interpreted) to whoever asked. Every front end's
//! requests go through here: the wire's approvals, questions, tool calls and hooks, ACP's
//! permission cards, terminals and file calls, the Claude dialect's `can_use_tool`.
//!
//! Invariants: an id waits at most once at a time (a second request under a waiting id is
//! refused, so two requests never share one answer); the asker always hears back: the client's
//! answer, or an error answer when the request cannot be sent or the output is closed, or its
//! channel closing when the peer shuts down; an asker that stops waiting (its turn was cancelled)
//! makes the peer forget the id, so a late answer finds nobody. The frame is the caller's (JSON-RPC
//! for the wire and ACP, a control request for the Claude dialect); the peer only routes.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::oneshot;

use super::error_code::ErrorCode;
use super::message::RequestId;
use super::pending::{PendingRequests, RawAnswer};
use super::writer::Outbound;

/// Why a `call` got no usable answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    #[error("{method} failed: {message}")]
    Refused { method: String, message: String },
    #[error("unreadable answer to {method}: {reason}")]
    Unreadable { method: String, reason: String },
    #[error("the client is gone")]
    Gone,
    #[error("duplicate request id")]
    DuplicateId,
}

/// What became of a request.
#[derive(Debug)]
pub enum Settled {
    /// The client's answer (or an error answer when the request could not be sent).
    Answer(RawAnswer),
    /// The peer shut down before the client answered.
    PeerGone,
    /// The asker stopped waiting (its turn was cancelled); the id is forgotten.
    AskerGone,
    /// The request could not reach the client (its output is closed, or it is one of many
    /// clients and fell behind): a sole client's asker hears an error answer, a session with
    /// other clients leaves the request to them.
    Unsent,
}

impl Settled {
    /// The answer, if the client (or the failed send) gave one.
    pub fn answer(self) -> Option<RawAnswer> {
        match self {
            Settled::Answer(raw) => Some(raw),
            Settled::Unsent => Some(Err(ErrorCode::InternalError.with_message("the output is closed"))),
            Settled::PeerGone | Settled::AskerGone => None,
        }
    }
}

/// The id is already waiting for an answer; the reply is handed back unused.
pub struct IdTaken<T>(pub oneshot::Sender<T>);

/// The client at the other end of one connection, as far as asking it goes.
pub struct Peer {
    outbound: Outbound,
    pending: Arc<PendingRequests>,
    /// Ids of requests that carry no id of their own: `<prefix>-1`, `<prefix>-2`, …
    prefix: &'static str,
    next: AtomicU64,
}

impl Peer {
    pub fn new(outbound: Outbound, prefix: &'static str) -> Arc<Self> {
        Arc::new(Self { outbound, pending: Arc::default(), prefix, next: AtomicU64::new(0) })
    }

    pub fn outbound(&self) -> &Outbound {
        &self.outbound
    }

    /// A fresh id (strings never collide with a client's integer ids).
    pub fn next_id(&self) -> RequestId {
        RequestId::Str(format!("{}-{}", self.prefix, self.next.fetch_add(1, Ordering::Relaxed) + 1))
    }

    /// Sends `frame` (a request under `id`) and relays what became of it to `reply` through
    /// `settle`: the client's answer, the peer shutting down, or the asker giving up (its turn was
    /// cancelled). `settle` may do its own work first (ACP tells the client an approved call is
    /// starting, the Claude dialect withdraws an abandoned question) and returns what the asker
    /// hears, if anything (`None` drops the reply: "client gone"). `None` for `frame` means it
    /// could not be encoded: the asker hears an error answer.
    pub async fn ask<T, F, Fut>(
        &self,
        id: RequestId,
        frame: Option<Vec<u8>>,
        mut reply: oneshot::Sender<T>,
        settle: F,
    ) -> Result<(), IdTaken<T>>
    where
        T: Send + 'static,
        F: FnOnce(Settled) -> Fut + Send + 'static,
        Fut: Future<Output = Option<T>> + Send,
    {
        let Ok(answer) = self.pending.register(id.clone()) else { return Err(IdTaken(reply)) };
        let Some(frame) = frame else {
            self.pending.forget(&id);
            let error = ErrorCode::InternalError.with_message("cannot send the request");
            if let Some(value) = settle(Settled::Answer(Err(error))).await {
                let _ = reply.send(value);
            }
            return Ok(());
        };
        let sent = self.outbound.send_raw(frame).await;
        if !sent {
            // Nobody can answer any more: the asker hears so now, not at shutdown.
            self.pending.forget(&id);
            drop(answer);
            if let Some(value) = settle(Settled::Unsent).await {
                let _ = reply.send(value);
            }
            return Ok(());
        }
        let pending = self.pending.clone();
        tokio::spawn(async move {
            let settled = tokio::select! {
                raw = answer => match raw {
                    Ok(raw) => Settled::Answer(raw),
                    Err(_) => Settled::PeerGone,
                },
                () = reply.closed() => {
                    pending.forget(&id);
                    Settled::AskerGone
                }
            };
            if let Some(value) = settle(settled).await {
                let _ = reply.send(value);
            }
        });
        Ok(())
    }

    /// A JSON-RPC request with a fresh id; waits for the typed result.
    pub async fn call<P: Serialize, R: DeserializeOwned + Send + 'static>(
        &self,
        method: &str,
        params: &P,
    ) -> Result<R, CallError> {
        let id = self.next_id();
        let frame = Outbound::request_frame(&id, method, params);
        let (reply, answer) = oneshot::channel();
        let name = method.to_string();
        self.ask(id, frame, reply, move |settled| async move {
            Some(match settled.answer()? {
                Ok(value) => serde_json::from_value(value)
                    .map_err(|e| CallError::Unreadable { method: name, reason: e.to_string() }),
                Err(e) => Err(CallError::Refused { method: name, message: e.message }),
            })
        })
        .await
        .map_err(|_| CallError::DuplicateId)?;
        answer.await.unwrap_or(Err(CallError::Gone))
    }

    /// A JSON-RPC request whose answer nobody waits for (a cleanup that must not block).
    pub fn fire<P: Serialize + Send + Sync + 'static>(self: &Arc<Self>, method: &'static str, params: P) {
        let peer = self.clone();
        tokio::spawn(async move {
            if let Err(e) = peer.call::<P, serde_json::Value>(method, &params).await {
                tracing::debug!("{e}");
            }
        });
    }

    /// The client's answer to one of our requests; false when nobody waits for `id`.
    pub fn answered(&self, id: &RequestId, outcome: RawAnswer) -> bool {
        self.pending.resolve(id, outcome)
    }

    /// Another client answered first (many clients on one session): a late answer is dropped.
    pub fn forget(&self, id: &RequestId) {
        self.pending.forget(id);
    }

    /// Shutdown: every asker still waiting hears that the client is gone.
    pub fn fail_all(&self) {
        self.pending.fail_all();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::rpc::writer::spawn_writer;

    /// A writer that refuses everything (the client closed our stdout).
    struct Closed;

    impl std::io::Write for Closed {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
    }

    fn frame(id: &RequestId) -> Option<Vec<u8>> {
        Outbound::request_frame(id, "ask", &json!({}))
    }

    #[tokio::test]
    async fn an_answer_reaches_the_asker_once_and_an_id_waits_once() {
        let (out, _writer) = spawn_writer(std::io::sink());
        let peer = Peer::new(out, "t");
        let id = peer.next_id();
        assert_eq!(id, RequestId::Str("t-1".into()));
        let (reply, answer) = oneshot::channel();
        assert!(peer.ask(id.clone(), frame(&id), reply, |settled| async move { settled.answer() }).await.is_ok());
        let (again, _) = oneshot::channel::<RawAnswer>();
        assert!(
            peer.ask(id.clone(), frame(&id), again, |settled| async move { settled.answer() }).await.is_err(),
            "the id is waiting"
        );
        assert!(peer.answered(&id, Ok(Value::from(7))));
        assert_eq!(answer.await.unwrap(), Ok(Value::from(7)));
        assert!(!peer.answered(&id, Ok(Value::Null)), "a second answer finds nobody");
    }

    #[tokio::test]
    async fn an_asker_that_gives_up_is_forgotten() {
        let (out, _writer) = spawn_writer(std::io::sink());
        let peer = Peer::new(out, "t");
        let id = peer.next_id();
        let (reply, answer) = oneshot::channel::<RawAnswer>();
        peer.ask(id.clone(), frame(&id), reply, |settled| async move { settled.answer() }).await.ok();
        drop(answer);
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        assert!(!peer.answered(&id, Ok(Value::Null)), "a late answer finds nobody");
    }

    #[tokio::test]
    async fn an_unsendable_request_is_answered_with_an_error() {
        let (out, writer) = spawn_writer(Closed);
        let peer = Peer::new(out, "t");
        // The first frame fails the writer; wait until its queue is gone too (it says so first,
        // then lets go of the queue: a frame in between would be queued for nobody).
        while peer.outbound().send_raw(b"x\n".to_vec()).await {
            tokio::task::yield_now().await;
        }
        assert!(writer.closed.is_cancelled());
        let id = peer.next_id();
        let (reply, answer) = oneshot::channel();
        peer.ask(id.clone(), frame(&id), reply, |settled| async move { settled.answer() }).await.ok();
        assert_eq!(answer.await.unwrap().unwrap_err().message, "the output is closed");
        let (reply, answer) = oneshot::channel();
        peer.ask(peer.next_id(), None, reply, |settled| async move { settled.answer() }).await.ok();
        assert_eq!(answer.await.unwrap().unwrap_err().message, "cannot send the request");
    }

    #[tokio::test]
    async fn call_types_the_result_and_names_a_refusal() {
        let (out, _writer) = spawn_writer(std::io::sink());
        let peer = Peer::new(out, "t");
        let asking = {
            let peer = peer.clone();
            tokio::spawn(async move { peer.call::<_, u32>("count", &json!({})).await })
        };
        while !peer.answered(&RequestId::Str("t-1".into()), Ok(Value::from(3))) {
            tokio::task::yield_now().await;
        }
        assert_eq!(asking.await.unwrap(), Ok(3));
        let refused = {
            let peer = peer.clone();
            tokio::spawn(async move { peer.call::<_, u32>("count", &json!({})).await })
        };
        let error = ErrorCode::InvalidParams.with_message("no");
        while !peer.answered(&RequestId::Str("t-2".into()), Err(error.clone())) {
            tokio::task::yield_now().await;
        }
        assert_eq!(refused.await.unwrap().unwrap_err().to_string(), "count failed: no");
        peer.fail_all();
    }
}
