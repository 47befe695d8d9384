//! The legacy MCP transport "HTTP with SSE" (MCP 2024-11-05; `docs/subcommands.md` §2.7), which
//! rmcp has no client for: `GET <url>` opens an event stream whose first event, `endpoint`,
//! names the URI every client message is POSTed to; every server message arrives on the stream
//! as a `message` event. [`SseTransport`] is an rmcp client [`Transport`], so a session over it
//! is served exactly like one over stdio or Streamable HTTP.
//!
//! Choices:
//! * The events are parsed by kiwi's own WHATWG parser (`llm::providers::sse`, the one the chat
//!   providers use) rather than the `sse-stream` crate (0.2), which reports unknown fields, lines
//!   without a colon and repeated `event:` lines as errors and loses the rest of that read, where
//!   the WHATWG rules ignore them or let the last one win. `id:` and `retry:` only matter to a
//!   client that re-opens the stream, which this one never does: a new `GET` is a new MCP
//!   session on the server, so a dropped stream ends the session and the next tool call
//!   reconnects (`link.rs`).
//! * The endpoint must be on the origin of the SSE URL: the POSTs carry the entry's headers and
//!   token, which a server must not be able to redirect to another host.
//! * A `message` event whose data is not a JSON-RPC message is logged and skipped: one bad
//!   notification should not end a session whose other messages are fine (a reply lost that way
//!   shows up as the tool call's timeout).
//! * The limit is per read (as httpx's read timeout is in the reference): the stream dies when the
//!   server sends nothing (not even a `:` comment) for `sse_read_timeout` (default 300 s).
//!   Waiting for the `endpoint` event is both a read and part of connecting, so it gets the
//!   shorter of that and the 30 s connect limit.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use reqwest::header::{ACCEPT, AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use reqwest::{StatusCode, Url};
use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::sync::mpsc;

use super::config::{RemoteAuth, RemoteEntry};
use crate::llm::providers::sse::{SseEvent, SseParser};

/// HTTP connect and write limit (§2.7).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The read limit when the entry has no `sse_read_timeout` (§2.7).
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(300);

/// Server messages read ahead of the session; the stream waits while the session is busy.
const QUEUE: usize = 64;

type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, reqwest::Error>> + Send>>;

/// Why an SSE session could not be opened or a message not be sent; the texts end up in
/// `mcp_status` failures, `kiwi mcp test` and tool results.
#[derive(Debug, thiserror::Error)]
pub enum SseError {
    #[error("invalid SSE URL '{url}': {reason}")]
    Url { url: String, reason: String },
    #[error("{0}")]
    Header(String),
    #[error("Client failed to connect: {0}")]
    Connect(String),
    /// The shape of the reference's HTTP client error (`kiwi mcp test` prints it as is).
    #[error("{} error '{}' for url '{url}'\nFor more information check: https://developer.mozilla.org/en-US/docs/Web/HTTP/Status/{}",
        if status.is_client_error() { "Client" } else if status.is_server_error() { "Server" } else { "Unexpected" },
        status_text(*status), status.as_u16())]
    Status { status: StatusCode, url: String },
    #[error("GET {url} answered with content type '{content_type}', not an event stream (text/event-stream)")]
    NotAnEventStream { url: String, content_type: String },
    #[error("the SSE stream of {url} sent no `endpoint` event within {} s", .waited.as_secs_f64())]
    NoEndpoint { url: String, waited: Duration },
    #[error("the SSE stream of {url} ended before its `endpoint` event{}", detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    EndedEarly { url: String, detail: Option<String> },
    #[error("the `endpoint` event of {url} is not a URI: '{data}'")]
    BadEndpoint { url: String, data: String },
    #[error(
        "refusing the endpoint '{endpoint}': it is not on the origin of {url}, and kiwi does not send the session's messages, headers and tokens to another origin"
    )]
    CrossOrigin { url: String, endpoint: String },
    #[error("POST of a message failed: {0}")]
    Post(String),
    #[error("the message endpoint answered the POST with HTTP {}", status_text(*.0))]
    PostStatus(StatusCode),
}

impl SseError {
    /// The server answered HTTP 401 (to the stream's `GET` or a message's `POST`).
    pub fn is_unauthorized(&self) -> bool {
        matches!(
            self,
            SseError::Status { status: StatusCode::UNAUTHORIZED, .. } | SseError::PostStatus(StatusCode::UNAUTHORIZED)
        )
    }
}

fn status_text(status: StatusCode) -> String {
    match status.canonical_reason() {
        Some(reason) => format!("{} {reason}", status.as_u16()),
        None => status.as_u16().to_string(),
    }
}

/// What one event on the stream means to the client.
#[derive(Debug)]
enum Incoming {
    Endpoint(String),
    Message(Box<RxJsonRpcMessage<RoleClient>>),
    /// A `message` event that is not a JSON-RPC message (the parse error).
    Garbage(String),
    /// Any other event type: ignored, as an `EventSource` without a listener for it would.
    Other,
}

fn classify(event: &str, data: &str) -> Incoming {
    match event {
        "endpoint" => Incoming::Endpoint(data.to_string()),
        // An event without an `event:` field is a `message` (WHATWG).
        "" | "message" => match serde_json::from_str(data) {
            Ok(message) => Incoming::Message(Box::new(message)),
            Err(e) => Incoming::Garbage(e.to_string()),
        },
        _ => Incoming::Other,
    }
}

/// The POST target named by an `endpoint` event, resolved against the SSE URL.
fn resolve_endpoint(base: &Url, data: &str) -> Result<Url, SseError> {
    let endpoint =
        base.join(data.trim()).map_err(|_| SseError::BadEndpoint { url: base.to_string(), data: data.to_string() })?;
    if endpoint.origin() != base.origin() {
        return Err(SseError::CrossOrigin { url: base.to_string(), endpoint: endpoint.to_string() });
    }
    Ok(endpoint)
}

/// The entry's headers, then its token as `Authorization: Bearer`, replacing a hand-written
/// `Authorization` header (a server gets one, and `auth` is the field meant for it).
fn request_headers(remote: &RemoteEntry, oauth_token: Option<&str>) -> Result<HeaderMap, SseError> {
    let mut headers = HeaderMap::new();
    for (k, v) in &remote.headers {
        let name = HeaderName::from_bytes(k.as_bytes()).map_err(|e| SseError::Header(format!("header {k:?}: {e}")))?;
        let value = HeaderValue::from_str(v).map_err(|e| SseError::Header(format!("header {k:?}: {e}")))?;
        headers.append(name, value);
    }
    let token = match (&remote.auth, oauth_token) {
        (RemoteAuth::Bearer(token), _) => Some(token.as_str()),
        (RemoteAuth::OAuth, token) => token,
        (RemoteAuth::None, _) => None,
    };
    if let Some(token) = token {
        let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|e| SseError::Header(format!("auth token: {e}")))?;
        value.set_sensitive(true);
        headers.insert(AUTHORIZATION, value);
    }
    Ok(headers)
}

/// Where client messages go.
struct Poster {
    client: reqwest::Client,
    endpoint: Url,
    headers: HeaderMap,
}

impl Poster {
    async fn post(&self, message: TxJsonRpcMessage<RoleClient>) -> Result<(), SseError> {
        let body = serde_json::to_vec(&message).map_err(|e| SseError::Post(e.to_string()))?;
        let response = self
            .client
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .body(body)
            .timeout(CONNECT_TIMEOUT)
            .send()
            .await
            .map_err(|e| SseError::Post(crate::net::error_text(&e)))?;
        let status = response.status();
        // The answer (202 Accepted, a short text) means nothing; reading it lets the connection
        // be reused.
        let _ = response.bytes().await;
        if !status.is_success() {
            return Err(SseError::PostStatus(status));
        }
        Ok(())
    }
}

/// An open SSE session: the stream is read by a task of its own, which ends (ending the
/// session) when the stream closes, breaks or stays silent too long, or when this is dropped.
pub struct SseTransport {
    poster: Arc<Poster>,
    incoming: mpsc::Receiver<RxJsonRpcMessage<RoleClient>>,
    reader: tokio::task::AbortHandle,
}

impl SseTransport {
    /// Opens the stream and waits for its `endpoint` event. Needs a tokio runtime.
    pub async fn connect(remote: &RemoteEntry, oauth_token: Option<&str>) -> Result<Self, SseError> {
        let url =
            Url::parse(&remote.url).map_err(|e| SseError::Url { url: remote.url.clone(), reason: e.to_string() })?;
        let headers = request_headers(remote, oauth_token)?;
        let read_timeout = remote.sse_read_timeout.unwrap_or(DEFAULT_READ_TIMEOUT);
        let client = crate::net::client_builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .map_err(|e| SseError::Connect(crate::net::error_text(&e)))?;
        let request = client
            .get(url.clone())
            .headers(headers.clone())
            .header(ACCEPT, "text/event-stream")
            .header(CACHE_CONTROL, "no-cache")
            .send();
        let response = match tokio::time::timeout(CONNECT_TIMEOUT, request).await {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => return Err(SseError::Connect(crate::net::error_text(&e))),
            Err(_) => {
                return Err(SseError::Connect(format!(
                    "no answer to GET {url} within {} s",
                    CONNECT_TIMEOUT.as_secs()
                )));
            }
        };
        let status = response.status();
        if !status.is_success() {
            return Err(SseError::Status { status, url: url.to_string() });
        }
        let content_type = response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
        let media_type = content_type.split(';').next().unwrap_or("").trim();
        if !media_type.eq_ignore_ascii_case("text/event-stream") {
            return Err(SseError::NotAnEventStream { url: url.to_string(), content_type });
        }
        let mut stream = Reader::new(Box::pin(response.bytes_stream()), url.clone(), read_timeout);
        let waited = read_timeout.min(CONNECT_TIMEOUT);
        let endpoint = match tokio::time::timeout(waited, stream.endpoint()).await {
            Ok(endpoint) => endpoint?,
            Err(_) => return Err(SseError::NoEndpoint { url: url.to_string(), waited }),
        };
        tracing::info!(
            "MCP SSE session on {}: messages go to {}",
            crate::net::loggable_url(url.as_str()),
            crate::net::loggable_url(endpoint.as_str())
        );
        let (tx, incoming) = mpsc::channel(QUEUE);
        let reader = tokio::spawn(stream.run(tx)).abort_handle();
        Ok(Self { poster: Arc::new(Poster { client, endpoint, headers }), incoming, reader })
    }
}

impl Drop for SseTransport {
    fn drop(&mut self) {
        // Dropping the reader drops the response, which closes the stream: the server ends the
        // session.
        self.reader.abort();
    }
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn name() -> Cow<'static, str> {
        "SSE".into()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let poster = self.poster.clone();
        async move { poster.post(item).await }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.incoming.recv()
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.reader.abort();
        self.incoming.close();
        Ok(())
    }
}

/// The event stream: bytes in, events out.
struct Reader {
    body: ByteStream,
    parser: SseParser,
    /// Events parsed but not handled yet (one read can carry several).
    pending: VecDeque<(String, String)>,
    /// The first bytes, held until it is known whether they start with a byte order mark.
    head: Option<Vec<u8>>,
    url: Url,
    /// The limit on each read: any bytes, comments included, prove the server alive.
    read_timeout: Duration,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The most one event (its data, or a line not ended yet) may hold.
const MAX_EVENT_BYTES: usize = 64 << 20;

/// What [`Reader::next_event`] found.
enum Next {
    Event(String, String),
    /// The stream closed (`None`) or broke (the error).
    End(Option<String>),
    /// Nothing arrived within the read limit.
    Silent,
}

impl Reader {
    fn new(body: ByteStream, url: Url, read_timeout: Duration) -> Self {
        Self { body, parser: SseParser::new(), pending: VecDeque::new(), head: Some(Vec::new()), url, read_timeout }
    }

    /// The next event, after as many reads as it takes.
    async fn next_event(&mut self) -> Next {
        loop {
            if let Some((event, data)) = self.pending.pop_front() {
                return Next::Event(event, data);
            }
            match tokio::time::timeout(self.read_timeout, self.body.next()).await {
                Ok(Some(Ok(chunk))) => {
                    self.feed(&chunk);
                    if self.parser.pending_len() > MAX_EVENT_BYTES {
                        // A server that never ends its event must not grow kiwi without bound.
                        return Next::End(Some(format!(
                            "the server sent an SSE event larger than {} MiB",
                            MAX_EVENT_BYTES >> 20
                        )));
                    }
                }
                Ok(Some(Err(e))) => return Next::End(Some(crate::net::error_text(&e))),
                Ok(None) => return Next::End(None),
                Err(_) => return Next::Silent,
            }
        }
    }

    fn feed(&mut self, chunk: &[u8]) {
        if let Some(mut head) = self.head.take() {
            // The stream is decoded as UTF-8, which drops one leading BOM (WHATWG); kiwi's parser
            // would read it as part of the first field name.
            head.extend_from_slice(chunk);
            if head.len() < BOM.len() && BOM.starts_with(&head) {
                self.head = Some(head);
                return;
            }
            let rest = head.strip_prefix(BOM).unwrap_or(&head).to_vec();
            return self.parse(&rest);
        }
        self.parse(chunk);
    }

    fn parse(&mut self, chunk: &[u8]) {
        let pending = &mut self.pending;
        let _ = self.parser.feed(chunk, |SseEvent { event, data }| {
            // WHATWG dispatches no event whose data is empty (an `event:` line alone, `data:`).
            if !data.is_empty() {
                pending.push_back((event.to_string(), data.to_string()));
            }
            Ok::<(), ()>(())
        });
    }

    /// Reads up to the `endpoint` event. Messages before it (a server should send none) are
    /// kept for the session.
    async fn endpoint(&mut self) -> Result<Url, SseError> {
        let mut early = VecDeque::new();
        loop {
            match self.next_event().await {
                Next::Event(event, data) => {
                    if event == "endpoint" {
                        early.append(&mut self.pending);
                        self.pending = early;
                        return resolve_endpoint(&self.url, &data);
                    }
                    early.push_back((event, data));
                }
                Next::End(detail) => return Err(SseError::EndedEarly { url: self.url.to_string(), detail }),
                Next::Silent => {
                    return Err(SseError::NoEndpoint { url: self.url.to_string(), waited: self.read_timeout });
                }
            }
        }
    }

    /// Hands every server message to the session until the stream ends or the session is gone.
    async fn run(mut self, tx: mpsc::Sender<RxJsonRpcMessage<RoleClient>>) {
        // For the log only: user info and query never reach it.
        let url = crate::net::loggable_url(self.url.as_str());
        loop {
            let next = tokio::select! {
                next = self.next_event() => next,
                // The session closed: stop reading (dropping the response closes the stream).
                () = tx.closed() => return,
            };
            let (event, data) = match next {
                Next::Event(event, data) => (event, data),
                Next::End(None) => {
                    tracing::warn!("MCP SSE stream of {url} closed by the server");
                    return;
                }
                Next::End(Some(e)) => {
                    tracing::warn!("MCP SSE stream of {url} broke: {e}");
                    return;
                }
                Next::Silent => {
                    tracing::warn!(
                        "MCP SSE stream of {url} sent nothing for {} s (sse_read_timeout); closing the session",
                        self.read_timeout.as_secs_f64()
                    );
                    return;
                }
            };
            match classify(&event, &data) {
                Incoming::Message(message) => {
                    if tx.send(*message).await.is_err() {
                        return;
                    }
                }
                Incoming::Garbage(e) => {
                    tracing::warn!(
                        "MCP SSE stream of {url}: skipped a message that is not JSON-RPC ({e}): {data:.200}"
                    );
                }
                Incoming::Endpoint(again) => {
                    tracing::debug!("MCP SSE stream of {url}: ignored a second `endpoint` event ({again})");
                }
                Incoming::Other => tracing::debug!("MCP SSE stream of {url}: ignored an event of type {event:?}"),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn relative_and_absolute_endpoints_resolve_against_the_sse_url() {
        let base = url("http://127.0.0.1:8000/mcp/sse?x=1");
        for (data, want) in [
            ("/messages?session_id=abc", "http://127.0.0.1:8000/messages?session_id=abc"),
            ("messages/?session_id=abc", "http://127.0.0.1:8000/mcp/messages/?session_id=abc"),
            (" /m?s=1\n", "http://127.0.0.1:8000/m?s=1"),
            ("http://127.0.0.1:8000/abs", "http://127.0.0.1:8000/abs"),
            ("//127.0.0.1:8000/net", "http://127.0.0.1:8000/net"),
        ] {
            assert_eq!(resolve_endpoint(&base, data).unwrap().as_str(), want, "{data:?}");
        }
        // The default port is the same origin as no port.
        assert!(resolve_endpoint(&url("https://h/sse"), "https://h:443/m").is_ok());
    }

    #[test]
    fn endpoints_on_another_origin_are_refused() {
        let base = url("http://127.0.0.1:8000/sse");
        for data in
            ["http://evil.example/messages", "http://127.0.0.1:8001/m", "https://127.0.0.1:8000/m", "//evil.example/m"]
        {
            let err = resolve_endpoint(&base, data).unwrap_err();
            assert!(matches!(err, SseError::CrossOrigin { .. }), "{data}: {err}");
            assert!(err.to_string().contains("not on the origin of http://127.0.0.1:8000/sse"), "{err}");
        }
        assert!(matches!(resolve_endpoint(&base, "http://[bad").unwrap_err(), SseError::BadEndpoint { .. }));
    }

    fn block_on<F: Future>(future: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(future)
    }

    fn events(chunks: &[&[u8]]) -> Vec<(String, String)> {
        let body: ByteStream =
            Box::pin(futures::stream::iter(chunks.iter().map(|c| Ok(Bytes::copy_from_slice(c))).collect::<Vec<_>>()));
        let mut reader = Reader::new(body, url("http://h/sse"), DEFAULT_READ_TIMEOUT);
        let mut out = Vec::new();
        block_on(async {
            while let Next::Event(event, data) = reader.next_event().await {
                out.push((event, data));
            }
        });
        out
    }

    #[test]
    fn events_are_parsed_by_the_whatwg_rules_across_reads() {
        let stream: &[&[u8]] = &[
            b": a comment\r\nevent: endpoint\r\ndata: /messages?session_id=1\r",
            b"\n\r\nid: 7\nretry: 1000\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\n",
            b"data: \"method\":\"notifications/tools/list_changed\"}\n\n",
            b"data:no space\rdata:  two spaces\r\rfield-without-colon\nunknown: x\ndata: last\n\n",
        ];
        let want = [
            ("endpoint", "/messages?session_id=1"),
            ("message", "{\"jsonrpc\":\"2.0\",\n\"method\":\"notifications/tools/list_changed\"}"),
            ("", "no space\n two spaces"),
            ("", "last"),
        ];
        let got = events(stream);
        let got: Vec<(&str, &str)> = got.iter().map(|(e, d)| (e.as_str(), d.as_str())).collect();
        assert_eq!(got, want);
        // Byte by byte gives the same events, also after a byte order mark.
        let joined: Vec<u8> = [BOM, &stream.concat()].concat();
        let bytes: Vec<&[u8]> = joined.chunks(1).collect();
        assert_eq!(events(&bytes), events(stream));
        assert_eq!(events(&[&joined]), events(stream));
        // Only one BOM is dropped.
        assert_eq!(events(&[b"\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\n"]), []);
        // Events without data are not dispatched.
        assert_eq!(events(&[b"event: endpoint\n\nevent: endpoint\ndata:\n\nevent: endpoint\ndata: /m\n\n"]).len(), 1);
    }

    #[test]
    fn messages_are_json_rpc_and_other_events_are_ignored() {
        let list_changed = r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
        assert!(matches!(classify("message", list_changed), Incoming::Message(_)));
        assert!(matches!(classify("", r#"{"jsonrpc":"2.0","id":0,"result":{}}"#), Incoming::Message(_)));
        assert!(matches!(classify("message", "this is not json-rpc"), Incoming::Garbage(_)));
        assert!(matches!(classify("message", r#"{"jsonrpc":"2.0"}"#), Incoming::Garbage(_)));
        assert!(matches!(classify("endpoint", "/m"), Incoming::Endpoint(e) if e == "/m"));
        assert!(matches!(classify("ping", ""), Incoming::Other));
    }

    #[test]
    fn the_endpoint_wait_keeps_early_messages_and_reports_an_early_end() {
        let message = r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#;
        let text = format!("data: {message}\n\nevent: endpoint\ndata: /m\n\nevent: message\ndata: {message}\n\n");
        let body: ByteStream = Box::pin(futures::stream::iter(vec![Ok(Bytes::from(text))]));
        let mut reader = Reader::new(body, url("http://h/sse"), DEFAULT_READ_TIMEOUT);
        block_on(async {
            assert_eq!(reader.endpoint().await.unwrap().as_str(), "http://h/m");
            assert!(matches!(reader.next_event().await, Next::Event(e, _) if e.is_empty()));
            assert!(matches!(reader.next_event().await, Next::Event(e, _) if e == "message"));
            assert!(matches!(reader.next_event().await, Next::End(None)));
        });
        let body: ByteStream = Box::pin(futures::stream::iter(vec![Ok(Bytes::from_static(b": hi\n\n"))]));
        let err = block_on(Reader::new(body, url("http://h/sse"), DEFAULT_READ_TIMEOUT).endpoint()).unwrap_err();
        assert_eq!(err.to_string(), "the SSE stream of http://h/sse ended before its `endpoint` event");
    }

    /// A body that sends `chunks`, each after `gap`, and then stays open without a word.
    fn trickle(chunks: &[&'static [u8]], gap: Duration) -> ByteStream {
        let chunks: VecDeque<&'static [u8]> = chunks.iter().copied().collect();
        Box::pin(futures::stream::unfold(chunks, move |mut chunks| async move {
            match chunks.pop_front() {
                Some(chunk) => {
                    tokio::time::sleep(gap).await;
                    Some((Ok(Bytes::from_static(chunk)), chunks))
                }
                None => futures::future::pending().await,
            }
        }))
    }

    #[test]
    fn the_read_limit_is_per_read_and_comments_count() {
        let limit = Duration::from_millis(300);
        let gap = Duration::from_millis(100);
        let pings: &[&[u8]] = &[b": ping\n\n", b": ping\n\n", b": ping\n\n", b": ping\n\n", b"data: late\n\n"];
        let mut reader = Reader::new(trickle(pings, gap), url("http://h/sse"), limit);
        block_on(async {
            // Longer than the limit in all, but never silent for that long.
            assert!(matches!(reader.next_event().await, Next::Event(_, d) if d == "late"));
            let started = std::time::Instant::now();
            assert!(matches!(reader.next_event().await, Next::Silent));
            assert!(started.elapsed() >= limit);
        });
        let mut reader = Reader::new(trickle(&[], gap), url("http://h/sse"), limit);
        let err = block_on(reader.endpoint()).unwrap_err();
        assert_eq!(err.to_string(), "the SSE stream of http://h/sse sent no `endpoint` event within 0.3 s");
    }

    #[test]
    fn an_event_that_never_ends_ends_the_stream() {
        // 1 MiB of data lines without the blank line that would end the event, forever.
        let line: &'static [u8] = Box::leak(format!("data: {}\n", "x".repeat(1 << 20)).into_bytes().into_boxed_slice());
        let body: ByteStream = Box::pin(futures::stream::repeat_with(move || Ok(Bytes::from_static(line))));
        let mut reader = Reader::new(body, url("http://h/sse"), Duration::from_secs(5));
        let next = block_on(async { tokio::time::timeout(Duration::from_secs(5), reader.next_event()).await });
        let Ok(next) = next else { panic!("the reader kept reading an endless event") };
        assert!(matches!(&next, Next::End(Some(e)) if e == "the server sent an SSE event larger than 64 MiB"));
        assert!(reader.parser.pending_len() <= MAX_EVENT_BYTES + (2 << 20));
    }

    #[test]
    fn error_texts() {
        let err = SseError::Status { status: StatusCode::UNAUTHORIZED, url: "http://h/sse".into() };
        assert_eq!(
            err.to_string(),
            "Client error '401 Unauthorized' for url 'http://h/sse'\nFor more information check: https://developer.mozilla.org/en-US/docs/Web/HTTP/Status/401"
        );
        let err = SseError::PostStatus(StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(err.to_string(), "the message endpoint answered the POST with HTTP 503 Service Unavailable");
        let err = SseError::NoEndpoint { url: "http://h/sse".into(), waited: Duration::from_millis(1500) };
        assert_eq!(err.to_string(), "the SSE stream of http://h/sse sent no `endpoint` event within 1.5 s");
    }

    #[test]
    fn headers_carry_the_entry_headers_and_the_token() {
        let mut remote = RemoteEntry {
            url: "http://h/sse".into(),
            transport: super::super::config::RemoteTransport::Sse,
            headers: vec![("X-Team".into(), "kiwi".into()), ("Authorization".into(), "Basic old".into())],
            auth: RemoteAuth::Bearer("tok".into()),
            sse_read_timeout: None,
        };
        let headers = request_headers(&remote, None).unwrap();
        assert_eq!(headers["x-team"], "kiwi");
        assert_eq!(headers.get_all(AUTHORIZATION).iter().collect::<Vec<_>>(), ["Bearer tok"]);
        remote.auth = RemoteAuth::OAuth;
        assert_eq!(request_headers(&remote, Some("stored")).unwrap()[AUTHORIZATION], "Bearer stored");
        remote.headers = vec![("bad name".into(), "v".into())];
        assert!(request_headers(&remote, None).is_err());
    }
}
