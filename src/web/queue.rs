//! One WebSocket's outgoing frames: a bounded queue between everything that speaks to the client
//! (the session's events, answers, the server's status messages) and the task that writes the
//! socket.
//!
//! Invariants: pushing never waits (the turn and the other sockets are never held up by this
//! one); when the queue is full the socket is closed with [`CLOSE_TOO_SLOW`] and later frames are
//! dropped: a client that does not read loses its connection, never kiwi's memory; a close asked
//! for once (shutdown, session gone, too slow) is the one the client gets.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Frames a socket may have waiting before it counts as too slow.
pub const QUEUE_FRAMES: usize = 8192;
/// Bytes a socket may have waiting before it counts as too slow.
pub const QUEUE_BYTES: usize = 4 * 1024 * 1024;

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
    /// Bytes queued and not yet taken by the writer.
    queued: Arc<AtomicUsize>,
    max_bytes: usize,
    close: Mutex<Option<Close>>,
    closing: CancellationToken,
}

/// The writer's end of the queue.
pub struct Frames {
    frames: mpsc::Receiver<String>,
    queued: Arc<AtomicUsize>,
    /// Fired when the socket is to be closed; [`Outgoing::close_reason`] says how.
    pub closing: CancellationToken,
}

impl Frames {
    /// The next frame; `None` once every sender is gone.
    pub async fn recv(&mut self) -> Option<String> {
        let frame = self.frames.recv().await?;
        self.queued.fetch_sub(frame.len(), Ordering::Relaxed);
        Some(frame)
    }

    /// The next frame if one is waiting.
    pub fn try_recv(&mut self) -> Option<String> {
        let frame = self.frames.try_recv().ok()?;
        self.queued.fetch_sub(frame.len(), Ordering::Relaxed);
        Some(frame)
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Outgoing {
    /// A queue of at most `capacity` frames and `max_bytes` bytes.
    pub fn new(capacity: usize, max_bytes: usize) -> (Self, Frames) {
        let (tx, rx) = mpsc::channel(capacity);
        let closing = CancellationToken::new();
        let queued = Arc::new(AtomicUsize::new(0));
        let out =
            Self { frames: tx, queued: queued.clone(), max_bytes, close: Mutex::new(None), closing: closing.clone() };
        (out, Frames { frames: rx, queued, closing })
    }

    /// Queues one frame (a JSON text without a line end); false when it was dropped because the
    /// socket is closing or fell too far behind (then it is being closed).
    pub fn push(&self, frame: String) -> bool {
        if self.closing.is_cancelled() {
            return false;
        }
        let len = frame.len();
        if self.queued.load(Ordering::Relaxed) + len > self.max_bytes {
            return self.too_slow();
        }
        match self.frames.try_send(frame) {
            Ok(()) => {
                self.queued.fetch_add(len, Ordering::Relaxed);
                true
            }
            Err(mpsc::error::TrySendError::Full(_)) => self.too_slow(),
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }

    fn too_slow(&self) -> bool {
        tracing::info!("a WebSocket client fell too far behind; disconnecting it");
        self.close(CLOSE_TOO_SLOW, TOO_SLOW_REASON);
        false
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
        let (out, mut frames) = Outgoing::new(2, 100);
        assert!(out.push("a".into()) && out.push_line(b"b\n".to_vec()));
        assert!(!out.push("c".into()));
        assert!(frames.closing.is_cancelled());
        assert_eq!(out.close_reason(), Some(Close { code: CLOSE_TOO_SLOW, reason: TOO_SLOW_REASON.into() }));
        out.close(CLOSE_SHUTDOWN, "later");
        assert_eq!(out.close_reason().unwrap().code, CLOSE_TOO_SLOW, "the first close wins");
        assert!(!out.push("d".into()));
        assert_eq!(frames.recv().await.as_deref(), Some("a"));
        assert_eq!(frames.try_recv().as_deref(), Some("b"));
    }

    #[test]
    fn bytes_are_bounded_too() {
        let (out, _frames) = Outgoing::new(100, 5);
        assert!(out.push("abc".into()));
        assert!(!out.push("abc".into()));
        assert_eq!(out.close_reason().map(|c| c.code), Some(CLOSE_TOO_SLOW));
    }
}
