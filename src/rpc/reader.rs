//! The stdin reader: splits bytes into lines, classifies each, and hands the result on.
//!
//! Invariants: a line longer than the limit is skipped and answered with one error, and the
//! buffer never grows past the limit (no up-front allocation of the maximum); invalid UTF-8 is
//! replaced, never fatal; EOF closes the channel, which the dispatcher takes as shutdown.
//! Lines waiting for the dispatcher are bounded in bytes as well as in number, so a client that
//! floods big lines while not reading our replies cannot make us grow without bound. Every stdin
//! protocol (wire, ACP, both print dialects) frames and queues its lines here, with the same
//! limits and the same words for a line that is too long ([`too_long_text`]).

use std::io::{BufRead, BufReader, Read};
use std::sync::{Arc, Condvar, Mutex};

use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::error_code::ErrorCode;
use super::message::{Incoming, classify};

/// Default maximum inbound line length: 100 MiB, like the reference.
pub const DEFAULT_MAX_LINE_BYTES: usize = 100 * 1024 * 1024;

/// Inbound messages waiting for the dispatcher; a flooding client is slowed down here.
pub const INBOUND_CAPACITY: usize = 256;

/// Bytes of inbound lines that may wait for the dispatcher (one line of any allowed size is
/// always admitted when nothing waits).
pub const INBOUND_BYTES: usize = 64 * 1024 * 1024;

const READ_BUFFER_BYTES: usize = 64 * 1024;

/// The consumer's end of a reader thread: framed items, bounded in number and in bytes.
pub struct BoundedLines<T> {
    rx: mpsc::Receiver<(T, Ticket)>,
}

impl<T> BoundedLines<T> {
    /// The next item, or None at EOF; its bytes leave the budget as it is taken.
    pub async fn recv(&mut self) -> Option<T> {
        self.rx.recv().await.map(|(item, _ticket)| item)
    }
}

/// The dispatcher's end of the reader.
pub struct Inbound {
    lines: BoundedLines<Incoming>,
}

impl Inbound {
    /// The next message, or None at EOF.
    pub async fn recv(&mut self) -> Option<Incoming> {
        self.lines.recv().await
    }

    /// Hands each message to `dispatch`, in order, until EOF or `stop`. A dispatch that hangs
    /// (a client that stopped reading our output blocks a reply) still ends at `stop`.
    pub async fn serve<F, Fut>(mut self, stop: &CancellationToken, mut dispatch: F)
    where
        F: FnMut(Incoming) -> Fut,
        Fut: std::future::Future<Output = ()>,
    {
        loop {
            let item = tokio::select! {
                item = self.recv() => item,
                () = stop.cancelled() => None,
            };
            let Some(item) = item else { break };
            tokio::select! {
                () = dispatch(item) => {}
                () = stop.cancelled() => break,
            }
        }
    }
}

/// The sending end of [`framed_channel`].
#[derive(Clone)]
pub struct FrameSender {
    tx: mpsc::Sender<(Incoming, Ticket)>,
    budget: Arc<Budget>,
}

impl FrameSender {
    /// Classifies one whole message as a stdin line is classified and queues it for the
    /// dispatcher, waiting while [`INBOUND_CAPACITY`] wait; false once the dispatcher is gone.
    pub async fn send(&self, frame: &[u8]) -> bool {
        let item = classify(frame);
        if skip(&item) {
            return true;
        }
        // The transport bounds a message's size; the queue bounds how many wait.
        let ticket = Ticket { budget: self.budget.clone(), bytes: 0 };
        self.tx.send((item, ticket)).await.is_ok()
    }
}

/// Inbound messages from a transport that frames them itself (a WebSocket's text messages), for
/// the same dispatchers as stdin: each frame is one message, classified like a line.
pub fn framed_channel() -> (FrameSender, Inbound) {
    let (tx, rx) = mpsc::channel(INBOUND_CAPACITY);
    (FrameSender { tx, budget: Arc::default() }, Inbound { lines: BoundedLines { rx } })
}

/// Bytes admitted and not yet taken by the dispatcher.
#[derive(Default)]
struct Budget {
    used: Mutex<usize>,
    freed: Condvar,
}

/// Returns its bytes to the budget when dropped.
struct Ticket {
    budget: Arc<Budget>,
    bytes: usize,
}

impl Budget {
    /// Blocks until `bytes` fit (or nothing else waits), then reserves them.
    fn admit(self: &Arc<Self>, bytes: usize, limit: usize) -> Ticket {
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        while *used > 0 && *used + bytes > limit {
            used = self.freed.wait(used).unwrap_or_else(|p| p.into_inner());
        }
        *used += bytes;
        Ticket { budget: self.clone(), bytes }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut used = self.budget.used.lock().unwrap_or_else(|p| p.into_inner());
        *used -= self.bytes;
        self.budget.freed.notify_all();
    }
}

/// Reads `input` on a dedicated thread until EOF or until the receiver is dropped.
pub fn spawn_reader<R: Read + Send + 'static>(input: R, max_line: usize) -> Inbound {
    spawn_reader_with(input, max_line, INBOUND_BYTES)
}

fn spawn_reader_with<R: Read + Send + 'static>(input: R, max_line: usize, budget_bytes: usize) -> Inbound {
    let lines = spawn_framed_with(input, max_line, INBOUND_CAPACITY, budget_bytes, move |line| {
        let (item, bytes) = match line {
            Line::Complete(bytes) => (classify(bytes), bytes.len()),
            Line::TooLong => (too_long(max_line), 0),
        };
        (!skip(&item)).then_some((item, bytes))
    });
    Inbound { lines }
}

/// Frames `input` on a thread of its own (`kiwi-stdin`) until EOF or until the receiver is
/// dropped: `item` turns each line into what the consumer gets and the bytes it holds (`None`:
/// nothing to deliver). At most `capacity` items and [`INBOUND_BYTES`] bytes wait (one item of
/// any size is always admitted when nothing waits); the thread stops reading while they do.
pub fn spawn_framed<T, R, F>(input: R, max_line: usize, capacity: usize, item: F) -> BoundedLines<T>
where
    T: Send + 'static,
    R: Read + Send + 'static,
    F: FnMut(Line<'_>) -> Option<(T, usize)> + Send + 'static,
{
    spawn_framed_with(input, max_line, capacity, INBOUND_BYTES, item)
}

fn spawn_framed_with<T, R, F>(
    input: R,
    max_line: usize,
    capacity: usize,
    budget_bytes: usize,
    mut item: F,
) -> BoundedLines<T>
where
    T: Send + 'static,
    R: Read + Send + 'static,
    F: FnMut(Line<'_>) -> Option<(T, usize)> + Send + 'static,
{
    let (tx, rx) = mpsc::channel(capacity);
    let budget = Arc::new(Budget::default());
    let spawned = std::thread::Builder::new().name("kiwi-stdin".into()).spawn(move || {
        frame_lines(input, max_line, |line| {
            let Some((item, bytes)) = item(line) else { return true };
            let ticket = budget.admit(bytes, budget_bytes);
            tx.blocking_send((item, ticket)).is_ok()
        });
    });
    if let Err(e) = spawned {
        tracing::error!("cannot start the stdin reader: {e}");
    }
    BoundedLines { rx }
}

/// What every stdin protocol says about a line longer than the limit.
pub fn too_long_text(max_line: usize) -> String {
    format!("line exceeds the maximum length of {max_line} bytes and was skipped")
}

/// One framed input line: its bytes (without `\n` or a trailing `\r`), or the fact that it
/// was longer than the limit and skipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line<'a> {
    Complete(&'a [u8]),
    TooLong,
}

/// The framing loop; `deliver` gets each message with the length of its line and returns false
/// when nobody listens any more.
#[cfg(test)]
fn read_lines<R: Read>(input: R, max_line: usize, mut deliver: impl FnMut(Incoming, usize) -> bool) {
    frame_lines(input, max_line, |line| {
        let (item, bytes) = match line {
            Line::Complete(bytes) => (classify(bytes), bytes.len()),
            Line::TooLong => (too_long(max_line), 0),
        };
        skip(&item) || deliver(item, bytes)
    });
}

/// Line framing with no interpretation, shared by every stdin protocol: a line longer than
/// `max_line` is reported once as `TooLong` and never buffered whole; a last line without a
/// terminator still counts unless it is blank. `deliver` returns false to stop reading.
pub fn frame_lines<R: Read>(input: R, max_line: usize, mut deliver: impl FnMut(Line<'_>) -> bool) {
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, input);
    let mut line: Vec<u8> = Vec::new();
    let mut discarding = false;
    loop {
        let chunk = match reader.fill_buf() {
            Ok([]) => break,
            Ok(chunk) => chunk,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::warn!("stdin read failed: {e}");
                break;
            }
        };
        let (take, complete) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        if !discarding {
            if line.len() + take > max_line {
                discarding = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(&chunk[..take]);
            }
        }
        reader.consume(if complete { take + 1 } else { take });
        if complete {
            let keep_going = if discarding { deliver(Line::TooLong) } else { deliver(Line::Complete(strip_cr(&line))) };
            discarding = false;
            line.clear();
            if line.capacity() > READ_BUFFER_BYTES * 16 {
                line.shrink_to(READ_BUFFER_BYTES);
            }
            if !keep_going {
                return;
            }
        }
    }
    if discarding {
        deliver(Line::TooLong);
    } else if !line.iter().all(u8::is_ascii_whitespace) {
        deliver(Line::Complete(&line));
    }
}

fn skip(item: &Incoming) -> bool {
    matches!(item, Incoming::Ignore)
}

fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn too_long(max_line: usize) -> Incoming {
    let mut error = ErrorCode::InvalidRequest.with_message("Invalid request");
    error.data = Value::String(too_long_text(max_line));
    Incoming::Reject { id: None, error }
}

/// Test input: `count` lines of `len` bytes each (the last one `\n`), made up as they are read,
/// counting the bytes handed out.
#[cfg(test)]
pub(crate) struct MadeUpLines {
    pub len: usize,
    pub count: usize,
    pub at: usize,
    pub pulled: Arc<std::sync::atomic::AtomicUsize>,
}

#[cfg(test)]
impl Read for MadeUpLines {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.count == 0 {
            return Ok(0);
        }
        let n = buf.len().min(self.len - self.at);
        buf[..n].fill(b'x');
        self.at += n;
        if self.at == self.len {
            buf[n - 1] = b'\n';
            self.at = 0;
            self.count -= 1;
        }
        self.pulled.fetch_add(n, std::sync::atomic::Ordering::SeqCst);
        Ok(n)
    }
}

/// Test check: lets a reader that nobody takes from run ahead until it stops (nothing more read
/// for a while), then fails if it read more than `bound` bytes.
#[cfg(test)]
pub(crate) fn assert_reads_ahead_at_most(pulled: &std::sync::atomic::AtomicUsize, bound: usize) {
    let read = || pulled.load(std::sync::atomic::Ordering::SeqCst);
    let mut last = usize::MAX;
    while read() != last && read() <= bound {
        last = read();
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    assert!(read() <= bound, "read {} bytes ahead, more than {bound}", read());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(input: &[u8], max: usize) -> Vec<Incoming> {
        let mut out = Vec::new();
        read_lines(input, max, |i, _| {
            out.push(i);
            true
        });
        out
    }

    #[test]
    fn waiting_lines_are_bounded_in_bytes() {
        // Budget of 100 bytes, lines of 60: the second line waits until the first is taken.
        let line = format!("{{\"id\":\"a\",\"method\":\"cancel\",\"x\":\"{}\"}}\n", "y".repeat(20));
        let input = line.repeat(3).into_bytes();
        let mut inbound = spawn_reader_with(std::io::Cursor::new(input), 1000, line.len() + 10);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            assert_eq!(inbound.lines.rx.len(), 1, "only one line fits the budget");
            let mut n = 0;
            while inbound.recv().await.is_some() {
                n += 1;
            }
            assert_eq!(n, 3);
        });
    }

    #[test]
    fn over_long_line_is_skipped_and_the_next_served() {
        let mut input = vec![b'x'; 100];
        input.extend_from_slice(b"\n{\"id\":\"a\",\"method\":\"cancel\"}\n");
        let out = collect(&input, 50);
        assert_eq!(out.len(), 2);
        assert!(matches!(&out[0], Incoming::Reject { error, .. } if error.code == -32600));
        assert!(matches!(&out[1], Incoming::Request { method, .. } if method == "cancel"));
    }

    #[test]
    fn blank_lines_are_parse_errors_and_last_line_without_newline_counts() {
        let out = collect(b"\n{\"id\":\"a\",\"method\":\"cancel\"}", 1000);
        assert_eq!(out.len(), 2);
        assert!(matches!(&out[0], Incoming::Reject { error, .. } if error.code == -32700));
    }

    #[test]
    fn crlf_lines_parse() {
        let out = collect(b"{\"id\":\"a\",\"method\":\"cancel\"}\r\n", 1000);
        assert!(matches!(&out[0], Incoming::Request { .. }));
    }
}
