//! Control requests kiwi sends the host besides `can_use_tool` (`docs/print-mode.md` B.3a):
//! `mcp_message` for the SDK's in-process MCP servers and `hook_callback` for its hooks.
//!
//! Invariants: every request goes out under a fresh id through the run's [`Peer`], so the
//! host's `control_response` finds it; the asker hears the host's answer, its error text, or
//! that the host is gone; an asker that stops waiting (its time ran out, its turn was cancelled)
//! withdraws the request with `control_cancel_request`, and a late answer finds nobody.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::lines::{ControlCancelLine, OutLine};
use crate::rpc::peer::{IdTaken, Settled};
use crate::rpc::writer::encode;
use crate::rpc::{Outbound, Peer, RequestId};

/// Why a control request got no answer to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AskError {
    /// The host answered with an error response (its text).
    Refused(String),
    /// The host did not answer within the time allowed (the request was withdrawn).
    TimedOut,
    /// The host closed its input, or the run is ending.
    Gone,
}

impl std::fmt::Display for AskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AskError::Refused(text) => write!(f, "{text}"),
            AskError::TimedOut => write!(f, "the host did not answer in time"),
            AskError::Gone => write!(f, "the host is gone"),
        }
    }
}

/// Asks the host through the control channel.
#[derive(Clone)]
pub struct HostAsk {
    peer: Arc<Peer>,
    out: Outbound,
}

impl HostAsk {
    pub fn new(peer: Arc<Peer>, out: Outbound) -> Self {
        Self { peer, out }
    }

    /// Sends `{"type":"control_request","request_id":…,"request":request}` and waits for the
    /// success payload (at most `limit`, when given).
    pub async fn ask(&self, request: Value, limit: Option<Duration>) -> Result<Value, AskError> {
        self.ask_until(request, limit, std::future::pending()).await
    }

    /// [`HostAsk::ask`], given up (and withdrawn, before this returns) when `stop` completes.
    pub async fn ask_until(
        &self,
        request: Value,
        limit: Option<Duration>,
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<Value, AskError> {
        let request_id = format!("kiwi-{}", uuid::Uuid::new_v4().simple());
        let frame = encode(&json!({"type": "control_request", "request_id": request_id, "request": request}));
        let (reply, answer) = oneshot::channel::<Result<Value, AskError>>();
        // Withdrawn once, by whoever gives up first: this call (out of time, written before it
        // returns) or the asker's owner dropping it (a cancelled turn).
        let withdraw = Withdraw { out: self.out.clone(), request_id: request_id.clone(), done: Arc::default() };
        let on_gone = withdraw.clone();
        let settle = move |settled: Settled| async move {
            match settled {
                Settled::Answer(Ok(value)) => Some(Ok(value)),
                Settled::Answer(Err(e)) => Some(Err(AskError::Refused(e.message))),
                Settled::Unsent => Some(Err(AskError::Refused("the output is closed".into()))),
                Settled::PeerGone => Some(Err(AskError::Gone)),
                Settled::AskerGone => {
                    on_gone.send().await;
                    None
                }
            }
        };
        let id = RequestId::Str(request_id);
        if let Err(IdTaken(_)) = self.peer.ask(id.clone(), frame, reply, settle).await {
            return Err(AskError::Gone);
        }
        let limit = async {
            match limit {
                Some(limit) => tokio::time::sleep(limit).await,
                None => std::future::pending().await,
            }
        };
        let given_up = tokio::select! {
            answered = answer => return answered.unwrap_or(Err(AskError::Gone)),
            () = limit => AskError::TimedOut,
            () = stop => AskError::Gone,
        };
        self.peer.forget(&id);
        withdraw.send().await;
        Err(given_up)
    }
}

/// The `control_cancel_request` of one request, written at most once.
#[derive(Clone)]
struct Withdraw {
    out: Outbound,
    request_id: String,
    done: Arc<AtomicBool>,
}

impl Withdraw {
    async fn send(&self) {
        if self.done.swap(true, Ordering::SeqCst) {
            return;
        }
        let line = OutLine::ControlCancelRequest(ControlCancelLine { request_id: self.request_id.clone() });
        if let Some(frame) = encode(&line) {
            self.out.send_raw(frame).await;
        }
    }
}
