//! The stdout writer: the only code that touches stdout; and [`Outbound`], the one way frames
//! leave for a client, whichever transport carries them.
//!
//! Frames arrive already serialized (payload plus `\n`) through a bounded queue. Writes are
//! coalesced: the buffer is flushed when the queue runs empty, not after every frame. A write
//! error (EPIPE: the client closed our stdout) cancels `closed` so the process can end at once.
//! A client of a session with many clients (a browser socket) has a [`Outgoing`] queue instead:
//! live frames never wait for it, paced ones (history, `replay`) do.

use std::io::{BufWriter, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::error_code::{ErrorCode, ErrorObject};
use super::message::{ErrorFrame, NotificationFrame, RequestFrame, RequestId, ResponseFrame};
use super::queue::Outgoing;

/// Frames waiting for stdout; a slow client slows the producers down.
pub const OUTBOUND_CAPACITY: usize = 1024;

const WRITE_BUFFER_BYTES: usize = 64 * 1024;

/// Handle for queueing frames. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Outbound {
    to: To,
}

#[derive(Clone, Debug)]
enum To {
    /// The stdout writer: every frame waits for room (the one client paces the session).
    Writer(mpsc::Sender<Vec<u8>>),
    /// One of many clients: a live frame never waits (a client that falls behind is closed).
    Queue(Arc<Outgoing>),
}

pub struct WriterHandle {
    thread: Option<std::thread::JoinHandle<()>>,
    /// Cancelled when stdout is gone.
    pub closed: CancellationToken,
    /// Bytes written so far (tells a slow reader from one that stopped reading).
    written: Arc<AtomicU64>,
}

impl WriterHandle {
    /// Waits (on a blocking thread) until every queued frame is written. All `Outbound`
    /// clones must be dropped first.
    pub async fn join(mut self) {
        if let Some(thread) = self.thread.take() {
            let _ = tokio::task::spawn_blocking(move || thread.join()).await;
        }
    }

    /// Like `join`, but gives up once the client has read nothing for `patience`: a client that
    /// stopped reading stdout must not keep us alive, a slow one still gets everything.
    pub async fn join_while_read(self, patience: Duration) {
        let written = self.written.clone();
        let join = self.join();
        tokio::pin!(join);
        let mut seen = written.load(Ordering::Relaxed);
        loop {
            if tokio::time::timeout(patience, &mut join).await.is_ok() {
                return;
            }
            let now = written.load(Ordering::Relaxed);
            if now == seen {
                tracing::info!("stdout is not being read; abandoning the queued output");
                return;
            }
            seen = now;
        }
    }
}

pub fn spawn_writer<W: Write + Send + 'static>(out: W) -> (Outbound, WriterHandle) {
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(OUTBOUND_CAPACITY);
    let closed = CancellationToken::new();
    let closed_flag = closed.clone();
    let written = Arc::new(AtomicU64::new(0));
    let counter = written.clone();
    let thread = std::thread::Builder::new()
        .name("kiwi-stdout".into())
        .spawn(move || {
            let mut out = BufWriter::with_capacity(WRITE_BUFFER_BYTES, Counting { inner: out, written: counter });
            while let Some(frame) = rx.blocking_recv() {
                let mut result = out.write_all(&frame);
                while result.is_ok() {
                    match rx.try_recv() {
                        Ok(frame) => result = out.write_all(&frame),
                        Err(_) => break,
                    }
                }
                if let Err(e) = result.and_then(|()| out.flush()) {
                    tracing::info!("stdout closed: {e}");
                    closed_flag.cancel();
                    return;
                }
            }
            let _ = out.flush();
        })
        .ok();
    if thread.is_none() {
        closed.cancel();
    }
    (Outbound { to: To::Writer(tx) }, WriterHandle { thread, closed, written })
}

/// Counts the bytes that actually reached the client.
struct Counting<W> {
    inner: W,
    written: Arc<AtomicU64>,
}

impl<W: Write> Write for Counting<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.written.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// One frame: the compact JSON of `value` plus `\n`. `None` when it cannot be serialized, which
/// for our own types is a bug (logged here; the caller decides what the client sees instead).
pub fn encode<T: Serialize>(value: &T) -> Option<Vec<u8>> {
    let mut buf = Vec::with_capacity(128);
    match serde_json::to_writer(&mut buf, value) {
        Ok(()) => {
            buf.push(b'\n');
            Some(buf)
        }
        Err(e) => {
            tracing::error!("cannot serialize an outbound frame: {e}");
            None
        }
    }
}

impl Outbound {
    /// An outbound queue for a transport that sends whole messages itself (a WebSocket): each
    /// frame arrives on the receiver as stdout would get it (payload plus `\n`).
    pub fn channel(capacity: usize) -> (Self, mpsc::Receiver<Vec<u8>>) {
        let (tx, rx) = mpsc::channel(capacity);
        (Self { to: To::Writer(tx) }, rx)
    }

    /// Frames to one client of many, through its queue.
    pub fn queue(queue: Arc<Outgoing>) -> Self {
        Self { to: To::Queue(queue) }
    }

    /// Queues a serialized live frame; false when the client is gone (or, for a queued client,
    /// fell too far behind and is being closed).
    pub async fn send_raw(&self, frame: Vec<u8>) -> bool {
        match &self.to {
            To::Writer(tx) => tx.send(frame).await.is_ok(),
            To::Queue(queue) => queue.push_line(frame),
        }
    }

    /// Queues one frame of a long stream (history, `replay`): waits until the client has room,
    /// whatever the transport; false when the client is gone.
    pub async fn send_paced(&self, frame: Vec<u8>) -> bool {
        match &self.to {
            To::Writer(tx) => tx.send(frame).await.is_ok(),
            To::Queue(queue) => queue.push_line_paced(frame).await,
        }
    }

    /// Queues a frame without waiting; false when the queue is full or the writer gone.
    pub fn try_send_raw(&self, frame: Vec<u8>) -> bool {
        match &self.to {
            To::Writer(tx) => tx.try_send(frame).is_ok(),
            To::Queue(queue) => queue.push_line(frame),
        }
    }

    pub async fn respond<T: Serialize>(&self, id: &RequestId, result: &T) {
        match encode(&ResponseFrame { jsonrpc: "2.0", id, result }) {
            Some(frame) => {
                self.send_raw(frame).await;
            }
            // The request still gets its one answer.
            None => self.error(Some(id), &ErrorCode::InternalError.with_message("cannot serialize the result")).await,
        }
    }

    pub async fn error(&self, id: Option<&RequestId>, error: &ErrorObject) {
        if let Some(frame) = encode(&ErrorFrame { jsonrpc: "2.0", id, error }) {
            self.send_raw(frame).await;
        }
    }

    pub fn notification_frame<T: Serialize>(method: &str, params: &T) -> Option<Vec<u8>> {
        encode(&NotificationFrame { jsonrpc: "2.0", method, params })
    }

    pub fn request_frame<T: Serialize>(id: &RequestId, method: &str, params: &T) -> Option<Vec<u8>> {
        encode(&RequestFrame { jsonrpc: "2.0", method, id, params })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    struct Broken;

    impl Write for Broken {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Err(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
        }
    }

    #[tokio::test]
    async fn frames_are_written_in_order_as_utf8_lines() {
        let sink = Shared::default();
        let (out, handle) = spawn_writer(sink.clone());
        out.respond(&RequestId::Str("a".into()), &serde_json::json!({"t":"héllo"})).await;
        out.send_raw(Outbound::notification_frame("event", &serde_json::json!({"n":1})).unwrap()).await;
        drop(out);
        handle.join().await;
        let text = String::from_utf8(sink.0.lock().unwrap().clone()).unwrap();
        assert_eq!(
            text,
            "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{\"t\":\"héllo\"}}\n{\"jsonrpc\":\"2.0\",\"method\":\"event\",\"params\":{\"n\":1}}\n"
        );
    }

    #[tokio::test]
    async fn broken_pipe_cancels_closed() {
        let (out, handle) = spawn_writer(Broken);
        out.send_raw(b"x\n".to_vec()).await;
        handle.closed.cancelled().await;
    }
}
