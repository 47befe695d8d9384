//! Control requests kiwi sends the host besides `can_use_tool` (`docs/print-mode.md` B.3a):
//! `mcp_message` for the SDK's in-process MCP servers and `hook_callback` for its hooks.
//!
//! Invariants: every request goes out under a fresh id through the run's [`Peer`], so the
//! host's `control_response` finds it; the asker hears the host's answer, its error text, or
//! that the host is gone; an asker that stops waiting (its time ran out, its turn was cancelled)
//! withdraws the request with `control_cancel_request`, and a late answer finds nobody.

use std::sync::Arc;
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
        let request_id = format!("kiwi-{}", uuid::Uuid::new_v4().simple());
        let frame = encode(&json!({"type": "control_request", "request_id": request_id, "request": request}));
        let (reply, answer) = oneshot::channel::<Result<Value, AskError>>();
        let out = self.out.clone();
        let withdrawn = request_id.clone();
        let settle = move |settled: Settled| async move {
            match settled {
                Settled::Answer(Ok(value)) => Some(Ok(value)),
                Settled::Answer(Err(e)) => Some(Err(AskError::Refused(e.message))),
                Settled::PeerGone => Some(Err(AskError::Gone)),
                Settled::AskerGone => {
                    let line = OutLine::ControlCancelRequest(ControlCancelLine { request_id: withdrawn });
                    if let Some(frame) = encode(&line) {
                        out.send_raw(frame).await;
                    }
                    None
                }
            }
        };
        if let Err(IdTaken(_)) = self.peer.ask(RequestId::Str(request_id), frame, reply, settle).await {
            return Err(AskError::Gone);
        }
        let answered = match limit {
            Some(limit) => match tokio::time::timeout(limit, answer).await {
                Ok(answered) => answered,
                // Dropping the receiver withdraws the request (see `settle`).
                Err(_) => return Err(AskError::TimedOut),
            },
            None => answer.await,
        };
        answered.unwrap_or(Err(AskError::Gone))
    }
}
