//! The kit of the `kiwi web` tests (and `benches/web-bench.rs`, which includes this file): a
//! real `kiwi web` on a free port of 127.0.0.1 with a scripted-echo config in its share dir,
//! plain HTTP requests over a TCP stream (any header, any method), stored sessions made on disk,
//! and a blocking WebSocket client that reads with a deadline. `kiwi web` requires a token by
//! default: the server's requests carry the one its banner printed (`Authorization: Bearer` on
//! HTTP, `?token=` on the socket) unless the test gives its own; `http` and `Server::ws_as`
//! send only what they are given.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tungstenite::protocol::WebSocket;
use tungstenite::{Message, client::IntoClientRequest};

pub const WAIT: Duration = Duration::from_secs(20);

/// A temp home: `home/.kimi` is the share dir, `work` a work dir.
pub struct Home {
    pub dir: tempfile::TempDir,
}

impl Home {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("work")).unwrap();
        std::fs::create_dir_all(dir.path().join("home/.kimi")).unwrap();
        Self { dir }
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    pub fn share(&self) -> PathBuf {
        self.home().join(".kimi")
    }

    /// The work dir, as kiwi names it (symlinks of the temp dir resolved).
    pub fn work(&self) -> PathBuf {
        std::fs::canonicalize(self.dir.path().join("work")).unwrap()
    }

    /// `config.toml` with the scripted-echo provider reading `scripts`.
    pub fn scripted(&self, scripts: &[String]) {
        let path = self.dir.path().join("scripts.json");
        std::fs::write(&path, serde_json::to_string(scripts).unwrap()).unwrap();
        let config = format!(
            "default_model = \"scripted\"\n\n[models.scripted]\nprovider = \"scripted_provider\"\nmodel = \"scripted_echo\"\n\
             max_context_size = 100000\ncapabilities = [\"image_in\", \"video_in\"]\n\n[providers.scripted_provider]\n\
             type = \"_scripted_echo\"\nbase_url = \"\"\napi_key = \"\"\n\n[providers.scripted_provider.env]\n\
             KIMI_SCRIPTED_ECHO_SCRIPTS = {}\n",
            serde_json::to_string(path.to_str().unwrap()).unwrap()
        );
        std::fs::write(self.share().join("config.toml"), config).unwrap();
    }

    /// A stored, empty session of the work dir (as `POST /api/sessions/` makes one); its id.
    pub fn new_session(&self) -> String {
        let id = uuid::Uuid::new_v4().to_string();
        let work = self.work();
        let work = work.to_str().unwrap();
        let key: String = {
            use md5::{Digest, Md5};
            Md5::digest(work.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
        };
        let dir = self.share().join("sessions").join(key).join(&id);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("context.jsonl"), "").unwrap();
        let meta = self.share().join("kimi.json");
        let mut doc: Value =
            std::fs::read_to_string(&meta).ok().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or(json!({}));
        let dirs = doc.as_object_mut().unwrap().entry("work_dirs").or_insert(json!([]));
        if !dirs.as_array().unwrap().iter().any(|d| d["path"] == work) {
            dirs.as_array_mut().unwrap().push(json!({"path": work, "kaos": "local", "last_session_id": null}));
        }
        std::fs::write(&meta, serde_json::to_string_pretty(&doc).unwrap()).unwrap();
        id
    }

    pub fn session_dir(&self, id: &str) -> PathBuf {
        let work = self.work();
        let key: String = {
            use md5::{Digest, Md5};
            Md5::digest(work.to_str().unwrap().as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
        };
        self.share().join("sessions").join(key).join(id)
    }

    /// `kiwi web --no-open` with `args`, in the work dir.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kiwi"));
        cmd.arg("web").arg("--no-open").args(args).current_dir(self.work());
        cmd.env("HOME", self.home()).env("KIMI_SHARE_DIR", self.share());
        for var in crate::common::SCRUBBED_ENV {
            cmd.env_remove(var);
        }
        cmd
    }

    /// Starts the server on a free port and waits for its banner.
    pub fn serve(&self, args: &[&str]) -> Server {
        let port = free_port();
        let port_arg = port.to_string();
        let mut all = vec!["-p", port_arg.as_str()];
        all.extend_from_slice(args);
        Server::start(self.command(&all))
    }
}

/// Percent-encodes a query value.
pub fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A running `kiwi web`; killed on drop.
pub struct Server {
    pub child: Child,
    pub port: u16,
    /// The stdout lines up to the end of the banner.
    pub banner: Vec<String>,
    /// The token the banner printed (`Token:   …`), if any.
    pub token: Option<String>,
    pub stderr: Receiver<String>,
}

impl Server {
    pub fn start(mut cmd: Command) -> Self {
        let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let (tx, lines) = channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let (etx, stderr) = channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                let _ = etx.send(line);
            }
        });
        let mut banner = Vec::new();
        let mut port = 0;
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            let Ok(line) = lines.recv_timeout(Duration::from_millis(200)) else {
                if child.try_wait().unwrap().is_some() {
                    break;
                }
                continue;
            };
            if port == 0
                && let Some(url) = line.split("http://").nth(1)
            {
                let hostport = url.split('/').next().unwrap();
                port = hostport.rsplit(':').next().unwrap().parse().unwrap();
            }
            let tips = line.contains("Tips:") || line.contains("Security tips:");
            banner.push(line);
            if tips {
                // The tips' lines follow; the banner ends with a blank line.
                while let Ok(more) = lines.recv_timeout(Duration::from_millis(500)) {
                    let end = more.is_empty();
                    banner.push(more);
                    if end {
                        break;
                    }
                }
                break;
            }
        }
        let token = banner.iter().find_map(|l| l.trim().strip_prefix("Token:").map(|t| t.trim().to_string()));
        Self { child, port, banner, stderr, token }
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    /// One HTTP/1.1 request with the server's token (unless `headers` name an `Authorization`);
    /// the status, the headers (lower-case names) and the body.
    pub fn http(&self, method: &str, path: &str, headers: &[(&str, &str)], body: Option<&str>) -> Response {
        let bearer = self.token.as_ref().map(|t| format!("Bearer {t}"));
        let mut all = headers.to_vec();
        if let Some(bearer) = &bearer
            && !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
        {
            all.push(("Authorization", bearer.as_str()));
        }
        http(self.port, method, path, &all, body)
    }

    pub fn get_json(&self, path: &str) -> (u16, Value) {
        let r = self.http("GET", path, &[], None);
        (r.status, serde_json::from_str(&r.body).unwrap_or(Value::Null))
    }

    /// Opens the session's WebSocket; `query` is added to the URL, with the server's token when
    /// it names none.
    pub fn ws(&self, id: &str, query: &str, headers: &[(&str, &str)]) -> Result<Ws, tungstenite::Error> {
        match &self.token {
            Some(token) if !query.contains("token=") => {
                let sep = if query.is_empty() { "?" } else { "&" };
                let query = format!("{query}{sep}token={}", encode(token));
                self.ws_as(id, &query, headers)
            }
            _ => self.ws_as(id, query, headers),
        }
    }

    /// Opens the session's WebSocket with exactly `query` (no token added).
    pub fn ws_as(&self, id: &str, query: &str, headers: &[(&str, &str)]) -> Result<Ws, tungstenite::Error> {
        self.socket(&format!("/api/sessions/{id}/stream{query}"), headers)
    }

    /// Opens the WebSocket at `path` (with its query) with exactly `headers`.
    pub fn socket(&self, path: &str, headers: &[(&str, &str)]) -> Result<Ws, tungstenite::Error> {
        let url = format!("ws://127.0.0.1:{}{path}", self.port);
        let mut request = url.into_client_request()?;
        for (k, v) in headers {
            request
                .headers_mut()
                .insert(tungstenite::http::HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
        }
        let stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        let (socket, _) = tungstenite::client(request, stream).map_err(|e| match e {
            tungstenite::HandshakeError::Failure(e) => e,
            tungstenite::HandshakeError::Interrupted(_) => tungstenite::Error::ConnectionClosed,
        })?;
        Ok(Ws { socket, seen: Vec::new(), closed: None })
    }

    /// Connects and reads up to and including the first `session_status` after
    /// `history_complete`; the messages before it.
    pub fn join(&self, id: &str) -> (Ws, Vec<Value>) {
        let mut ws = self.ws(id, "", &[]).unwrap();
        let (before, _) = ws.until(|m| m["method"] == "history_complete");
        let status = ws.next();
        assert_eq!(status["method"], "session_status", "{status}");
        (ws, before)
    }

    /// SIGTERM, then the exit status.
    pub fn terminate(&mut self) -> Option<std::process::ExitStatus> {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.pid(), libc::SIGTERM) };
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

pub fn http(port: u16, method: &str, path: &str, headers: &[(&str, &str)], body: Option<&str>) -> Response {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    let mut text = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        text.push_str(&format!("Host: 127.0.0.1:{port}\r\n"));
    }
    for (k, v) in headers {
        text.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(body) = body {
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-type")) {
            text.push_str("Content-Type: application/json\r\n");
        }
        text.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    text.push_str("\r\n");
    text.push_str(body.unwrap_or(""));
    stream.write_all(text.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, rest) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let mut lines = head.lines();
    let status = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|s| s.parse().ok()).unwrap_or(0);
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let chunked = headers.iter().any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked { dechunk(rest) } else { rest.to_string() };
    Response { status, headers, body }
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let n = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if n == 0 || tail.len() < n {
            break;
        }
        out.push_str(&tail[..n]);
        rest = tail[n..].trim_start_matches("\r\n");
    }
    out
}

/// A WebSocket client.
pub struct Ws {
    pub socket: WebSocket<TcpStream>,
    /// Every message read so far.
    pub seen: Vec<Value>,
    /// The close frame's code and reason, once read.
    pub closed: Option<(u16, String)>,
}

impl Ws {
    pub fn send(&mut self, message: Value) {
        self.send_text(&message.to_string());
    }

    pub fn send_text(&mut self, text: &str) {
        self.socket.send(Message::text(text)).unwrap();
    }

    /// The next message within `limit`; `None` on timeout or close.
    pub fn next_within(&mut self, limit: Duration) -> Option<Value> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            match self.socket.read() {
                Ok(Message::Text(text)) => {
                    let value: Value = serde_json::from_str(text.as_str()).unwrap_or(Value::String(text.to_string()));
                    self.seen.push(value.clone());
                    return Some(value);
                }
                Ok(Message::Close(frame)) => {
                    self.closed =
                        Some(frame.map(|f| (u16::from(f.code), f.reason.to_string())).unwrap_or((1005, String::new())));
                    return None;
                }
                Ok(_) => {}
                Err(tungstenite::Error::Io(e))
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => {
                    if self.closed.is_none() {
                        self.closed = Some((1006, String::new()));
                    }
                    return None;
                }
            }
        }
        None
    }

    /// Reads text frames without parsing them until one contains `marker`; how many came
    /// before it and their bytes (the benchmark's client).
    pub fn raw_until(&mut self, marker: &str) -> (usize, usize) {
        self.raw_count_until(marker, "")
    }

    /// [`Self::raw_until`], counting only the frames that contain `counted`.
    pub fn raw_count_until(&mut self, marker: &str, counted: &str) -> (usize, usize) {
        let (mut count, mut bytes) = (0, 0);
        let deadline = Instant::now() + WAIT;
        while Instant::now() < deadline {
            match self.socket.read() {
                Ok(Message::Text(text)) if text.as_str().contains(marker) => return (count, bytes),
                Ok(Message::Text(text)) => {
                    if text.as_str().contains(counted) {
                        count += 1;
                    }
                    bytes += text.len();
                }
                Ok(Message::Close(_)) => break,
                Ok(_) => {}
                Err(tungstenite::Error::Io(e))
                    if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => break,
            }
        }
        panic!("`{marker}` never came ({count} frames before)")
    }

    pub fn next(&mut self) -> Value {
        self.next_within(WAIT).unwrap_or_else(|| panic!("no message (closed: {:?}); seen {:?}", self.closed, self.seen))
    }

    /// Reads until `done`; the messages before it and the one that matched.
    pub fn until(&mut self, mut done: impl FnMut(&Value) -> bool) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let m = self.next();
            if done(&m) {
                return (before, m);
            }
            before.push(m);
        }
    }

    /// Sends a request and reads until its response.
    pub fn call(&mut self, id: &str, method: &str, params: Value) -> (Vec<Value>, Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.until(|m| m["id"] == id && m.get("method").is_none())
    }

    pub fn initialize(&mut self, id: &str) -> Value {
        let params = json!({"protocol_version": "1.10", "client": {"name": "t", "version": "0"},
            "capabilities": {"supports_question": true, "supports_plan_mode": true}});
        self.call(id, "initialize", params).1
    }

    /// Nothing arrives within `limit`.
    pub fn quiet_for(&mut self, limit: Duration) -> bool {
        self.next_within(limit).is_none()
    }

    /// Reads until the server closes; the close code and reason.
    pub fn until_closed(&mut self) -> (u16, String) {
        let deadline = Instant::now() + WAIT;
        while self.closed.is_none() && Instant::now() < deadline {
            self.next_within(Duration::from_millis(500));
        }
        self.closed.clone().unwrap_or((0, "not closed".into()))
    }
}

/// `event` messages' types, `request` as `request:<type>`, responses as `response:<id>`,
/// server messages by method.
pub fn kinds(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .map(|m| match m["method"].as_str() {
            Some("event") => m["params"]["type"].as_str().unwrap_or("?").to_string(),
            Some("request") => format!("request:{}", m["params"]["type"].as_str().unwrap_or("?")),
            Some(other) => other.to_string(),
            None => format!("response:{}", m["id"].as_str().unwrap_or("?")),
        })
        .collect()
}

/// A scripted answer that asks to run `command` with Shell.
pub fn shell_script(call_id: &str, command: &str) -> String {
    let arguments = json!({"command": command}).to_string();
    format!("tool_call: {}", json!({"id": call_id, "name": "Shell", "arguments": arguments}))
}

pub fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    done()
}

pub fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}
