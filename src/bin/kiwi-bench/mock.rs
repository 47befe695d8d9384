//! A mock Kimi (OpenAI-compatible `chat/completions`) server on 127.0.0.1, inside the bench
//! process: plain tokio TCP with a hand-written HTTP/1.1 reply. Replies are queued in advance and
//! fully encoded (SSE body in `Transfer-Encoding: chunked` frames), so serving costs the bench
//! almost nothing and keep-alive works; every request is logged with timestamps so the bench can
//! see when kiwi's next request arrived.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One request served.
pub struct Hit {
    /// Last byte of the request body read.
    pub received: Instant,
    /// The whole reply handed to the kernel.
    pub sent: Instant,
    pub body: Vec<u8>,
}

#[derive(Default)]
struct State {
    replies: Mutex<VecDeque<Vec<u8>>>,
    hits: Mutex<Vec<Hit>>,
}

pub struct MockKimi {
    port: u16,
    state: Arc<State>,
}

impl MockKimi {
    /// Binds and serves from a background thread for the rest of the process.
    pub fn start() -> MockKimi {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind mock");
        listener.set_nonblocking(true).expect("nonblocking");
        let port = listener.local_addr().expect("addr").port();
        let state = Arc::new(State::default());
        let shared = state.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                loop {
                    let Ok((sock, _)) = listener.accept().await else { continue };
                    tokio::spawn(serve(sock, shared.clone()));
                }
            });
        });
        MockKimi { port, state }
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Queues one `200 text/event-stream` reply carrying `sse` (already `data: …\n\n` framed).
    pub fn push(&self, sse: &str) {
        let mut reply = Vec::with_capacity(sse.len() + sse.len() / 1000 + 256);
        reply.extend_from_slice(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n",
        );
        // 16 KiB frames: the size a real server's socket writes tend to come in.
        for frame in sse.as_bytes().chunks(16 * 1024) {
            reply.extend_from_slice(format!("{:x}\r\n", frame.len()).as_bytes());
            reply.extend_from_slice(frame);
            reply.extend_from_slice(b"\r\n");
        }
        reply.extend_from_slice(b"0\r\n\r\n");
        self.state.replies.lock().expect("lock").push_back(reply);
    }

    /// The requests served since the last call, in arrival order, once there are `expected` of
    /// them: the mock logs a request only after its reply is written, which can be a moment
    /// after kiwi already answered the client.
    pub fn take_hits(&self, expected: usize) -> Vec<Hit> {
        let deadline = Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let mut hits = self.state.hits.lock().expect("lock");
            if hits.len() >= expected || Instant::now() > deadline {
                return std::mem::take(&mut *hits);
            }
            drop(hits);
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Drops replies a failed run left behind.
    pub fn reset(&self) {
        self.state.replies.lock().expect("lock").clear();
        self.state.hits.lock().expect("lock").clear();
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn content_length(head: &[u8]) -> usize {
    String::from_utf8_lossy(head)
        .lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .unwrap_or(0)
}

/// One keep-alive connection: request, queued reply, repeat.
async fn serve(mut sock: tokio::net::TcpStream, state: Arc<State>) {
    let _ = sock.set_nodelay(true);
    let mut buf: Vec<u8> = Vec::with_capacity(64 * 1024);
    loop {
        let head_end = loop {
            if let Some(p) = find(&buf, b"\r\n\r\n") {
                break p + 4;
            }
            buf.reserve(64 * 1024);
            match sock.read_buf(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        };
        let total = head_end + content_length(&buf[..head_end]);
        while buf.len() < total {
            buf.reserve(total - buf.len());
            match sock.read_buf(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
        let received = Instant::now();
        let body = buf[head_end..total].to_vec();
        buf.drain(..total);
        let reply = state.replies.lock().expect("lock").pop_front();
        let close = reply.is_none();
        let reply = reply.unwrap_or_else(|| {
            b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\nContent-Length: 45\r\nConnection: close\r\n\r\n{\"error\":{\"message\":\"mock: no reply queued\"}}".to_vec()
        });
        if sock.write_all(&reply).await.is_err() {
            return;
        }
        state.hits.lock().expect("lock").push(Hit { received, sent: Instant::now(), body });
        if close {
            return;
        }
    }
}

fn data(out: &mut String, chunk: &Value) {
    out.push_str("data: ");
    out.push_str(&chunk.to_string());
    out.push_str("\n\n");
}

/// Moonshot puts the usage inside the last choice.
fn finish(out: &mut String, reason: &str, prompt_tokens: u64) {
    data(
        out,
        &json!({"id":"chatcmpl-bench","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},
            "finish_reason":reason,"usage":{"prompt_tokens":prompt_tokens,"completion_tokens":20,
            "total_tokens":prompt_tokens + 20}}]}),
    );
    out.push_str("data: [DONE]\n\n");
}

/// `n` one-token content chunks, then the finish chunk and `[DONE]`.
pub fn text_stream(n: usize, token: &str) -> String {
    let one = json!({"id":"chatcmpl-bench","choices":[{"index":0,"delta":{"content":token}}]}).to_string();
    let mut out = String::with_capacity((one.len() + 8) * n + 512);
    for _ in 0..n {
        out.push_str("data: ");
        out.push_str(&one);
        out.push_str("\n\n");
    }
    finish(&mut out, "stop", 1000);
    out
}

/// One `SetTodoList` call: the name delta, then its arguments in four pieces.
pub fn todo_call_stream(step: usize, prompt_tokens: u64) -> String {
    let mut out = String::new();
    data(&mut out, &json!({"id":"chatcmpl-bench","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}));
    data(
        &mut out,
        &json!({"id":"chatcmpl-bench","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,
            "id":format!("SetTodoList:{step}"),"type":"function",
            "function":{"name":"SetTodoList","arguments":""}}]}}]}),
    );
    let args = format!(r#"{{"todos": [{{"title": "step {step}", "status": "in_progress"}}]}}"#);
    let quarter = args.len().div_ceil(4);
    for piece in args.as_bytes().chunks(quarter) {
        let piece = std::str::from_utf8(piece).expect("ascii");
        data(
            &mut out,
            &json!({"id":"chatcmpl-bench","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,
                "function":{"arguments":piece}}]}}]}),
        );
    }
    finish(&mut out, "tool_calls", prompt_tokens);
    out
}
