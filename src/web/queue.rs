//! One WebSocket's outgoing frames: a bounded queue between everything that speaks to the client
//! (the session's events, answers, the server's status messages) and the task that writes the
//! socket.
//!
//! Invariants: pushing never waits (the turn and the other sockets are never held up by this
//! one); when the queue is full the socket is closed with [`CLOSE_TOO_SLOW`] and later frames are
//! dropped: a client that does not read loses its connection, never kiwi's memory; a close asked
//! for once (shutdown, session gone, too slow) is the one the client gets.

use std::sync::{Mutex, MutexGuard};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Frames a socket may have waiting before it counts as too slow.
pub const QUEUE_FRAMES: usize = 8192;

/// The close code for a client that cannot keep up (1008, policy violation).
pub const CLOSE_TOO_SLOW: u16 = 1008;
/// The reason sent with [`CLOSE_TOO_SLOW`].
pub const TOO_SLOW_REASON: &str = "Client too slow";
/// Server shutdown (1012, service restart).
pub const CLOSE_SHUTDOWN: u16 = 1012;
/// The session's process ended (deleted): 1001, going away.
pub const CLOSE_SESSION_GONE: u16 = 1001;
pub const SESSION_GONE_REASON: &str = "Session process exited";
/// No such session: 4004.
pub const CLOSE_NOT_FOUND: u16 = 4004;
pub const NOT_FOUND_REASON: &str = "Session not found";

/// How a socket is to be closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Close {
    pub code: u16,
    pub reason: String,
}

pub struct Outgoing {
    frames: mpsc::Sender<String>,
    close: Mutex<Option<Close>>,
    closing: CancellationToken,
}

/// The writer's end of the queue.
pub struct Frames {
    pub frames: mpsc::Receiver<String>,
    /// Fired when the socket is to be closed; [`Outgoing::close_reason`] says how.
    pub closing: CancellationToken,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Outgoing {
    pub fn new(capacity: usize) -> (Self, Frames) {
        let (tx, rx) = mpsc::channel(capacity);
        let closing = CancellationToken::new();
        (Self { frames: tx, close: Mutex::new(None), closing: closing.clone() }, Frames { frames: rx, closing })
    }

    /// Queues one frame (a JSON text without a line end); false when it was dropped because the
    /// socket is closing or fell too far behind (then it is being closed).
    pub fn push(&self, frame: String) -> bool {
        if self.closing.is_cancelled() {
            return false;
        }
        match self.frames.try_send(frame) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::info!(
                    "a WebSocket client fell {} frames behind; disconnecting it",
                    self.frames.max_capacity()
                );
                self.close(CLOSE_TOO_SLOW, TOO_SLOW_REASON);
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }

    /// Queues a frame given as a line (`rpc` frames end in `\n`).
    pub fn push_line(&self, mut line: Vec<u8>) -> bool {
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        match String::from_utf8(line) {
            Ok(text) => self.push(text),
            Err(_) => false,
        }
    }

    /// Asks for the socket to be closed with `code`; the first request wins.
    pub fn close(&self, code: u16, reason: &str) {
        let mut slot = lock(&self.close);
        if slot.is_none() {
            *slot = Some(Close { code, reason: reason.to_string() });
        }
        drop(slot);
        self.closing.cancel();
    }

    /// Fired when the socket is to be closed.
    pub fn closing_token(&self) -> CancellationToken {
        self.closing.clone()
    }

    pub fn is_closing(&self) -> bool {
        self.closing.is_cancelled()
    }

    /// How the socket is to be closed, once [`Self::close`] was called.
    pub fn close_reason(&self) -> Option<Close> {
        lock(&self.close).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_queue_closes_the_socket_and_drops_later_frames() {
        let (out, mut frames) = Outgoing::new(2);
        assert!(out.push("a".into()) && out.push_line(b"b\n".to_vec()));
        assert!(!out.push("c".into()));
        assert!(frames.closing.is_cancelled());
        assert_eq!(out.close_reason(), Some(Close { code: CLOSE_TOO_SLOW, reason: TOO_SLOW_REASON.into() }));
        out.close(CLOSE_SHUTDOWN, "later");
        assert_eq!(out.close_reason().unwrap().code, CLOSE_TOO_SLOW, "the first close wins");
        assert!(!out.push("d".into()));
        assert_eq!(frames.frames.recv().await.as_deref(), Some("a"));
        assert_eq!(frames.frames.recv().await.as_deref(), Some("b"));
    }
}
