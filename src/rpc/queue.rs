//! One client's outgoing frames when the session has many clients (a browser socket): a bounded
//! queue between everything that speaks to the client (the session's events, answers, status
//! messages) and the task that writes its connection. [`super::Outbound`] sends through it, so
//! the one wire handler and [`super::Peer`] serve such a client as they serve stdio.
//!
//! Invariants: a live push never waits (the turn and the other clients are never held up by this
//! one); when the queue is full the client is closed with [`CLOSE_TOO_SLOW`] and later frames are
//! dropped: a client that does not read loses its connection, never kiwi's memory. A paced push
//! (history, `replay`) waits for room instead, so streaming a long history never overflows the
//! queue it fills. A close asked for once (shutdown, session gone, too slow) is the one the
//! client gets.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{Notify, mpsc};
use tokio_util::sync::CancellationToken;

/// Frames a client may have waiting before it counts as too slow.
pub const QUEUE_FRAMES: usize = 8192;
/// Bytes a client may have waiting before it counts as too slow.
pub const QUEUE_BYTES: usize = 4 * 1024 * 1024;

/// The close code for a client that cannot keep up (1008, policy violation, as a WebSocket
/// close code).
pub const CLOSE_TOO_SLOW: u16 = 1008;
/// The reason sent with [`CLOSE_TOO_SLOW`].
pub const TOO_SLOW_REASON: &str = "Client too slow";

/// How a socket is to be closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Close {
    pub code: u16,
    pub reason: String,
}

#[derive(Debug)]
pub struct Outgoing {
    frames: mpsc::Sender<String>,
    capacity: usize,
    room: Arc<Room>,
    max_bytes: usize,
    close: Mutex<Option<Close>>,
    closing: CancellationToken,
}

/// What the two ends share: the bytes waiting, and the wake-up of a paced push.
#[derive(Debug, Default)]
struct Room {
    /// Bytes queued and not yet taken by the writer.
    queued: AtomicUsize,
    /// A paced push waits for room (the writer wakes it only then).
    wanted: AtomicBool,
    freed: Notify,
}

impl Room {
    fn taken(&self, len: usize) {
        self.queued.fetch_sub(len, Ordering::Relaxed);
        if self.wanted.load(Ordering::Relaxed) {
            self.freed.notify_one();
        }
    }
}

/// The writer's end of the queue.
pub struct Frames {
    frames: mpsc::Receiver<String>,
    room: Arc<Room>,
    /// Fired when the socket is to be closed; [`Outgoing::close_reason`] says how.
    pub closing: CancellationToken,
}

impl Frames {
    /// The next frame; `None` once every sender is gone.
    pub async fn recv(&mut self) -> Option<String> {
        let frame = self.frames.recv().await?;
        self.room.taken(frame.len());
        Some(frame)
    }

    /// The next frame if one is waiting.
    pub fn try_recv(&mut self) -> Option<String> {
        let frame = self.frames.try_recv().ok()?;
        self.room.taken(frame.len());
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
        let room = Arc::new(Room::default());
        let out = Self {
            frames: tx,
            capacity,
            room: room.clone(),
            max_bytes,
            close: Mutex::new(None),
            closing: closing.clone(),
        };
        (out, Frames { frames: rx, room, closing })
    }

    /// Queues one frame once the queue is at most half full, waiting for the writer meanwhile
    /// (history and `replay`: a long stream is paced by the client, never counted as too slow);
    /// false when the client is closing.
    pub async fn push_paced(&self, frame: String) -> bool {
        loop {
            if self.closing.is_cancelled() {
                return false;
            }
            self.room.wanted.store(true, Ordering::Relaxed);
            let roomy = self.room.queued.load(Ordering::Relaxed) + frame.len() <= self.max_bytes / 2
                && self.frames.capacity() > self.capacity / 2;
            if roomy {
                self.room.wanted.store(false, Ordering::Relaxed);
                return self.push(frame);
            }
            tokio::select! {
                () = self.room.freed.notified() => {}
                () = self.closing.cancelled() => return false,
            }
        }
    }

    /// Queues one frame (a JSON text without a line end); false when it was dropped because the
    /// socket is closing or fell too far behind (then it is being closed).
    pub fn push(&self, frame: String) -> bool {
        if self.closing.is_cancelled() {
            return false;
        }
        let len = frame.len();
        if self.room.queued.load(Ordering::Relaxed) + len > self.max_bytes {
            return self.too_slow();
        }
        // Counted before it can be taken, so the writer's subtraction never comes first.
        self.room.queued.fetch_add(len, Ordering::Relaxed);
        match self.frames.try_send(frame) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.room.queued.fetch_sub(len, Ordering::Relaxed);
                self.too_slow()
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.room.queued.fetch_sub(len, Ordering::Relaxed);
                false
            }
        }
    }

    fn too_slow(&self) -> bool {
        tracing::info!("a client fell too far behind; disconnecting it");
        self.close(CLOSE_TOO_SLOW, TOO_SLOW_REASON);
        false
    }

    /// Queues a frame given as a line (`rpc` frames end in `\n`).
    pub fn push_line(&self, line: Vec<u8>) -> bool {
        line_text(line).is_some_and(|text| self.push(text))
    }

    /// [`Self::push_paced`] for a line.
    pub async fn push_line_paced(&self, line: Vec<u8>) -> bool {
        match line_text(line) {
            Some(text) => self.push_paced(text).await,
            None => false,
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

/// A frame as a text message: the line without its end (our frames are UTF-8 by construction).
fn line_text(mut line: Vec<u8>) -> Option<String> {
    if line.last() == Some(&b'\n') {
        line.pop();
    }
    String::from_utf8(line).ok()
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
        out.close(1012, "later");
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

    #[tokio::test]
    async fn a_paced_push_waits_for_room_instead_of_closing() {
        let (out, mut frames) = Outgoing::new(4, 1000);
        let out = Arc::new(out);
        let pusher = {
            let out = out.clone();
            tokio::spawn(async move {
                for n in 0..100 {
                    assert!(out.push_paced(format!("f{n}")).await, "frame {n}");
                }
            })
        };
        for n in 0..100 {
            assert_eq!(frames.recv().await, Some(format!("f{n}")));
        }
        pusher.await.unwrap();
        assert!(out.close_reason().is_none(), "never too slow");
        out.close(1000, "");
        assert!(!out.push_paced("late".into()).await);
    }
}
