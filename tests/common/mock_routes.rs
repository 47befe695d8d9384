//! A routed mock HTTP server on 127.0.0.1 (plain threads, no runtime needed): the Kimi account
//! endpoints, the model list, chat completions and the Moonshot services in one place.
//!
//! Invariants: every request is recorded (method, path, headers, body) before it is answered;
//! each route (`"POST /api/oauth/token"`) answers from its own FIFO queue, the last reply
//! repeating once the queue is empty; an unknown route gets a 404; bodies are sent with a
//! `content-length`.
//!
//! Use it from a test file with `#[path = "common/mock_routes.rs"] mod mock_routes;`.
#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use serde_json::Value;

#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(status: u16, body: Value) -> Self {
        Self { status, content_type: "application/json".into(), body: body.to_string().into_bytes() }
    }

    pub fn text(status: u16, body: &str) -> Self {
        Self { status, content_type: "text/plain".into(), body: body.as_bytes().to_vec() }
    }

    /// A chat completions stream that says `text`.
    pub fn chat_text(text: &str) -> Self {
        let chunk = serde_json::json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": null}]});
        let done = serde_json::json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
        let body = format!("data: {chunk}\n\ndata: {done}\n\ndata: [DONE]\n\n");
        Self { status: 200, content_type: "text/event-stream".into(), body: body.into_bytes() }
    }
}

#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

#[derive(Default)]
struct Route {
    queue: VecDeque<Reply>,
    last: Option<Reply>,
}

#[derive(Default)]
struct State {
    routes: HashMap<String, Route>,
    requests: Vec<Recorded>,
}

pub struct MockRoutes {
    addr: std::net::SocketAddr,
    state: Arc<Mutex<State>>,
}

impl MockRoutes {
    pub fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local addr");
        let state = Arc::new(Mutex::new(State::default()));
        let st = state.clone();
        std::thread::spawn(move || {
            for sock in listener.incoming() {
                let Ok(sock) = sock else { break };
                let st = st.clone();
                std::thread::spawn(move || {
                    let _ = serve(sock, st);
                });
            }
        });
        Self { addr, state }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Queues a reply for `route` (`"METHOD /path"`).
    pub fn on(&self, route: &str, reply: Reply) -> &Self {
        self.state.lock().unwrap().routes.entry(route.to_string()).or_default().queue.push_back(reply);
        self
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state.lock().unwrap().requests.clone()
    }

    /// The requests of one route, in order.
    pub fn requests_to(&self, route: &str) -> Vec<Recorded> {
        self.requests().into_iter().filter(|r| format!("{} {}", r.method, r.path) == route).collect()
    }
}

fn read_request(sock: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<Option<Recorded>> {
    let header_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let mut tmp = [0u8; 8192];
        let n = sock.read(&mut tmp)?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..header_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split(' ');
    let method = request_line.next().unwrap_or_default().to_string();
    let target = request_line.next().unwrap_or_default();
    let path = target.split('?').next().unwrap_or_default().to_string();
    let headers: Vec<(String, String)> =
        lines.filter_map(|l| l.split_once(':')).map(|(n, v)| (n.trim().to_string(), v.trim().to_string())).collect();
    let len: usize = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let start = header_end + 4;
    while buf.len() < start + len {
        let mut tmp = [0u8; 65536];
        let n = sock.read(&mut tmp)?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&tmp[..n]);
    }
    let body = buf[start..start + len].to_vec();
    buf.drain(..start + len);
    Ok(Some(Recorded { method, path, headers, body }))
}

fn serve(mut sock: TcpStream, state: Arc<Mutex<State>>) -> std::io::Result<()> {
    let mut buf = Vec::new();
    while let Some(request) = read_request(&mut sock, &mut buf)? {
        let route = format!("{} {}", request.method, request.path);
        let reply = {
            let mut st = state.lock().unwrap();
            st.requests.push(request);
            st.routes.get_mut(&route).and_then(|r| {
                if let Some(next) = r.queue.pop_front() {
                    r.last = Some(next);
                }
                r.last.clone()
            })
        };
        let reply = reply.unwrap_or_else(|| Reply::text(404, "no such route"));
        let head = format!(
            "HTTP/1.1 {} Status\r\ncontent-type: {}\r\ncontent-length: {}\r\n\r\n",
            reply.status,
            reply.content_type,
            reply.body.len()
        );
        sock.write_all(head.as_bytes())?;
        sock.write_all(&reply.body)?;
        sock.flush()?;
    }
    Ok(())
}
