//! A small mock LLM HTTP server on 127.0.0.1 for provider and end-to-end tests and for the
//! benchmarks.
//!
//! Invariants: every request is recorded (method, path, query, headers, body, when its last byte
//! arrived) before it is answered, and stamped again once its response is written; responses are
//! served from a FIFO queue (the last one repeats when the queue runs dry); bodies are sent with
//! chunked transfer encoding, one chunk per planned piece, so a test controls exactly how the
//! bytes are split and can cut a body off mid-way (the terminating chunk is then never sent and
//! the connection is closed); a connection the client drops while the server is waiting is
//! counted in `disconnects`.
//!
//! Use it from a test file with `#[path = "common/mock_llm.rs"] mod mock_llm;` (from a bench,
//! `#[path = "../../tests/common/mock_llm.rs"]`).
#![allow(dead_code)]

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A runtime for a mock driven from blocking code: its one worker keeps serving while the calling
/// thread blocks on a child's pipes.
pub fn background_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("tokio runtime")
}

/// The LLM fixtures, kept inside the repository so that a fresh clone tests on its own.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/llm"))
}

pub fn fixture(name: &str) -> Vec<u8> {
    let path = fixtures_dir().join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// How a body is cut into writes.
#[derive(Debug, Clone)]
pub enum Split {
    /// One write.
    Whole,
    /// Writes of `n` bytes.
    Every(usize),
    /// Random write sizes in 1..=max, from a seed (reproducible).
    Random { seed: u64, max: usize },
    /// Writes ending at these byte offsets (the rest is one last write).
    At(Vec<usize>),
}

#[derive(Debug, Clone)]
pub struct MockResponse {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub split: Split,
    /// Pause before each piece. Zero sends the whole response in one write, as a real server's
    /// buffered socket tends to; the pieces stay separate chunks of the body.
    pub write_delay: Duration,
    /// Delay before the status line is sent (the client may give up meanwhile).
    pub first_byte_delay: Duration,
    /// Send only this many body bytes, then close without the terminating chunk.
    pub cut_at: Option<usize>,
}

impl MockResponse {
    pub fn new(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            body: body.into(),
            split: Split::Whole,
            write_delay: Duration::ZERO,
            first_byte_delay: Duration::ZERO,
            cut_at: None,
        }
    }

    /// A 200 `text/event-stream` response.
    pub fn sse(body: impl Into<Vec<u8>>) -> Self {
        Self::new(200, "text/event-stream", body)
    }

    /// A 200 SSE response with a fixture file as its body.
    pub fn sse_fixture(name: &str) -> Self {
        Self::sse(fixture(name))
    }

    /// A JSON error response (`retry-after-ms: 1` keeps SDK retries fast).
    pub fn json(status: u16, body: impl Into<Vec<u8>>) -> Self {
        Self::new(status, "application/json", body).header("retry-after-ms", "1")
    }

    pub fn json_fixture(status: u16, name: &str) -> Self {
        Self::json(status, fixture(name))
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn split(mut self, split: Split) -> Self {
        self.split = split;
        self
    }

    pub fn write_delay(mut self, d: Duration) -> Self {
        self.write_delay = d;
        self
    }

    pub fn first_byte_delay(mut self, d: Duration) -> Self {
        self.first_byte_delay = d;
        self
    }

    pub fn cut_at(mut self, n: usize) -> Self {
        self.cut_at = Some(n);
        self
    }

    fn pieces(&self) -> Vec<&[u8]> {
        let body = match self.cut_at {
            Some(n) => &self.body[..n.min(self.body.len())],
            None => &self.body[..],
        };
        let mut out = Vec::new();
        match &self.split {
            Split::Whole => out.push(body),
            Split::Every(n) => out.extend(body.chunks((*n).max(1))),
            Split::Random { seed, max } => {
                let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let mut rest = body;
                while !rest.is_empty() {
                    state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    let n = 1 + (state >> 33) as usize % (*max).max(1);
                    let (a, b) = rest.split_at(n.min(rest.len()));
                    out.push(a);
                    rest = b;
                }
            }
            Split::At(offsets) => {
                let mut start = 0;
                for &o in offsets {
                    let o = o.min(body.len());
                    if o > start {
                        out.push(&body[start..o]);
                        start = o;
                    }
                }
                out.push(&body[start..]);
            }
        }
        out.retain(|p| !p.is_empty());
        out
    }
}

#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    pub query: String,
    /// Header names as sent (case preserved), in order.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// When the last byte of the request arrived.
    pub received: Instant,
    /// When the whole response had been handed to the kernel (None until then, and for a
    /// response cut off or abandoned by the client).
    pub answered: Option<Instant>,
}

impl RecordedRequest {
    /// The first header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("request body is JSON")
    }
}

#[derive(Default)]
struct State {
    queue: VecDeque<MockResponse>,
    last: Option<MockResponse>,
    requests: Vec<RecordedRequest>,
    /// Bumped by `reset`, so that a response written after it does not stamp a newer request
    /// that took the same index.
    generation: u64,
}

/// The running server; it stops when dropped.
pub struct MockLlm {
    addr: std::net::SocketAddr,
    state: Arc<Mutex<State>>,
    disconnects: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockLlm {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockLlm {
    pub async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local addr");
        let state = Arc::new(Mutex::new(State::default()));
        let disconnects = Arc::new(AtomicUsize::new(0));
        let (st, dc) = (state.clone(), disconnects.clone());
        let task = tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                let (st, dc) = (st.clone(), dc.clone());
                tokio::spawn(async move {
                    let _ = serve(sock, st, dc).await;
                });
            }
        });
        Self { addr, state, disconnects, task }
    }

    /// `http://127.0.0.1:PORT` (append `/v1` for the OpenAI-style providers).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Queues a response; the last queued response keeps being served once the queue is empty.
    pub fn push(&self, response: MockResponse) -> &Self {
        self.state.lock().unwrap().queue.push_back(response);
        self
    }

    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state.lock().unwrap().requests.clone()
    }

    pub fn request_count(&self) -> usize {
        self.state.lock().unwrap().requests.len()
    }

    /// Forgets queued responses and recorded requests, between runs that reuse one server.
    pub fn reset(&self) {
        let mut st = self.state.lock().unwrap();
        st.queue.clear();
        st.last = None;
        st.requests.clear();
        st.generation += 1;
    }

    /// Waits until `n` requests have been answered, then takes every request recorded so far
    /// (fewer answered ones when `timeout` runs out first). It blocks the calling thread: it is
    /// for blocking callers such as the benchmark, whose mock runs on `background_runtime`.
    pub fn take_answered(&self, n: usize, timeout: Duration) -> Vec<RecordedRequest> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut st = self.state.lock().unwrap();
            if st.requests.iter().filter(|r| r.answered.is_some()).count() >= n || Instant::now() >= deadline {
                return std::mem::take(&mut st.requests);
            }
            drop(st);
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Connections the client closed before the response was complete.
    pub fn disconnects(&self) -> usize {
        self.disconnects.load(Ordering::SeqCst)
    }

    /// Waits until at least `n` early disconnects were seen (false on timeout).
    pub async fn wait_disconnects(&self, n: usize, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while self.disconnects() < n {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }
}

async fn read_request(sock: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<Option<RecordedRequest>> {
    let header_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let mut tmp = [0u8; 8192];
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let method = parts.next().unwrap_or_default().to_string();
    let target = parts.next().unwrap_or_default();
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(':')).map(|(n, v)| (n.trim().to_string(), v.trim().to_string())).collect();
    let len: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let body_start = header_end + 4;
    while buf.len() < body_start + len {
        let mut tmp = [0u8; 65536];
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&tmp[..n]);
    }
    let body = buf[body_start..body_start + len].to_vec();
    buf.drain(..body_start + len);
    let (path, query) = (path.to_string(), query.to_string());
    Ok(Some(RecordedRequest { method, path, query, headers, body, received: Instant::now(), answered: None }))
}

/// Sleeps for `d` unless the peer closes first (then returns false).
async fn wait_or_closed(sock: &mut TcpStream, d: Duration) -> bool {
    if d.is_zero() {
        return true;
    }
    let mut probe = [0u8; 1];
    tokio::select! {
        _ = tokio::time::sleep(d) => true,
        r = sock.read(&mut probe) => !matches!(r, Ok(0) | Err(_)),
    }
}

/// Writes and empties `out`; false when the peer is gone.
async fn send(sock: &mut TcpStream, out: &mut Vec<u8>) -> bool {
    let sent = out.is_empty() || sock.write_all(out).await.is_ok();
    out.clear();
    sent
}

/// Stamps request `index` as answered, unless a `reset` came in between.
fn stamp_answered(state: &Mutex<State>, (generation, index): (u64, usize)) {
    let mut st = state.lock().unwrap();
    if st.generation == generation
        && let Some(request) = st.requests.get_mut(index)
    {
        request.answered = Some(Instant::now());
    }
}

async fn serve(mut sock: TcpStream, state: Arc<Mutex<State>>, disconnects: Arc<AtomicUsize>) -> std::io::Result<()> {
    sock.set_nodelay(true)?;
    let mut buf = Vec::new();
    while let Some(request) = read_request(&mut sock, &mut buf).await? {
        let (response, ticket) = {
            let mut st = state.lock().unwrap();
            st.requests.push(request);
            let ticket = (st.generation, st.requests.len() - 1);
            let next = st.queue.pop_front();
            if let Some(r) = next {
                st.last = Some(r);
            }
            (st.last.clone(), ticket)
        };
        let Some(response) = response else {
            sock.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n").await?;
            stamp_answered(&state, ticket);
            continue;
        };
        if !wait_or_closed(&mut sock, response.first_byte_delay).await {
            disconnects.fetch_add(1, Ordering::SeqCst);
            return Ok(());
        }
        let reason = match response.status {
            200 => "OK",
            400 => "Bad Request",
            401 => "Unauthorized",
            429 => "Too Many Requests",
            500 => "Internal Server Error",
            503 => "Service Unavailable",
            _ => "Status",
        };
        let mut head = format!("HTTP/1.1 {} {reason}\r\n", response.status);
        for (n, v) in &response.headers {
            head.push_str(&format!("{n}: {v}\r\n"));
        }
        head.push_str("transfer-encoding: chunked\r\n\r\n");
        // What is not sent yet: with a write delay, everything before a pause goes out before
        // it; without one, the whole response goes out in one write.
        let mut out = head.into_bytes();
        for piece in response.pieces() {
            if !response.write_delay.is_zero() {
                let paced = send(&mut sock, &mut out).await && wait_or_closed(&mut sock, response.write_delay).await;
                if !paced {
                    disconnects.fetch_add(1, Ordering::SeqCst);
                    return Ok(());
                }
            }
            out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
            out.extend_from_slice(piece);
            out.extend_from_slice(b"\r\n");
        }
        if response.cut_at.is_none() {
            out.extend_from_slice(b"0\r\n\r\n");
        }
        if !send(&mut sock, &mut out).await {
            disconnects.fetch_add(1, Ordering::SeqCst);
            return Ok(());
        }
        if response.cut_at.is_some() {
            // Close mid-body: the client sees an incomplete chunked read.
            return Ok(());
        }
        stamp_answered(&state, ticket);
    }
    Ok(())
}
