//! Shared HTTP plumbing: the client, the SDK-level retry loop (§2.4 layer 1), `retry-after`
//! parsing, and turning HTTP failures into `ChatError`s with the reference's messages (§2.5).
//!
//! Invariants:
//! * the request body is built once by the caller and re-sent as the same `Bytes` on retries;
//! * retries happen inside the caller's future (no spawned task), so dropping it cancels them;
//! * a server-requested delay in (0, 60] s is honoured between SDK retries and is also stored in
//!   `ChatError::Status::retry_after` for the agent-level loop;
//! * credentials never reach a log line (`docs/providers.md` §9): errors are logged with the URL's
//!   query and user info replaced by `<redacted>`, and credential headers are marked sensitive
//!   so their `Debug` form (in any library's trace) shows no value.

use std::time::Duration;

use bytes::Bytes;
use rand::Rng as _;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use super::chaos::Chaos;
use super::pyrepr;
use crate::llm::ChatError;

/// Connect timeout of the reference SDKs.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Read timeout of the reference SDKs (between bytes of the body, too).
const READ_TIMEOUT: Duration = Duration::from_secs(600);

/// Serializes a request body once; the same bytes are re-sent on SDK-level retries.
pub(crate) fn encode_body<T: serde::Serialize>(body: &T) -> Result<Bytes, ChatError> {
    serde_json::to_vec(body)
        .map(Bytes::from)
        .map_err(|e| ChatError::Other(format!("Error: cannot encode the request: {e}")))
}

pub(crate) fn new_client() -> Result<reqwest::Client, String> {
    crate::net::client_builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .read_timeout(READ_TIMEOUT)
        .build()
        .map_err(|e| format!("cannot build the HTTP client: {e}"))
}

/// How the error text of a failed HTTP response is rendered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorStyle {
    /// openai / anthropic SDKs: `Error code: {status} - {repr(body)}`.
    Stainless,
    /// google-genai: `{prefix}{code} {STATUS}. {repr(body)}`.
    Google,
}

/// The SDK-level retry behaviour of one provider.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RetryPolicy {
    /// Retries after the first request (openai / anthropic: 2; google-genai: 0).
    pub max_retries: u32,
    /// Whether to send `x-stainless-retry-count` (the stainless SDKs do).
    pub retry_count_header: bool,
}

pub(crate) const STAINLESS_RETRIES: RetryPolicy = RetryPolicy { max_retries: 2, retry_count_header: true };
pub(crate) const NO_RETRIES: RetryPolicy = RetryPolicy { max_retries: 0, retry_count_header: false };

/// One prepared POST: everything but the retry-count header is fixed.
pub(crate) struct PreparedRequest<'a> {
    pub client: &'a reqwest::Client,
    pub url: &'a str,
    pub headers: HeaderMap,
    pub body: Bytes,
    pub policy: RetryPolicy,
    pub style: ErrorStyle,
    pub chaos: Option<&'a Chaos>,
}

/// Sends the request, retrying like the reference SDK, and returns the successful response
/// (status 2xx) whose body is still unread.
pub(crate) async fn send(req: PreparedRequest<'_>) -> Result<reqwest::Response, ChatError> {
    let mut retries = 0u32;
    loop {
        let started = std::time::Instant::now();
        let outcome = attempt(&req, retries).await;
        let took = started.elapsed().as_millis();
        let url = crate::llm::settings::loggable_url(req.url);
        // One line per HTTP request: where, what came back, how long (never headers or body:
        // they carry the API key and the user's conversation).
        let (error, should_retry, server_wait) = match outcome {
            Ok(response) => {
                tracing::info!("LLM request POST {url}: {} in {took} ms (retry {retries})", response.status());
                return Ok(response);
            }
            Err(Failure::Transport(error)) => (error, true, None),
            Err(Failure::Status { error, should_retry, wait }) => (error, should_retry, wait),
        };
        tracing::info!("LLM request POST {url}: failed in {took} ms (retry {retries}): {error}");
        if !should_retry || retries >= req.policy.max_retries {
            return Err(error);
        }
        let wait = server_wait.unwrap_or_else(|| backoff(retries));
        tracing::info!(
            "retrying the LLM request in {:.2} s ({} of {} retries)",
            wait.as_secs_f64(),
            retries + 1,
            req.policy.max_retries
        );
        tokio::time::sleep(wait).await;
        retries += 1;
    }
}

enum Failure {
    Transport(ChatError),
    Status { error: ChatError, should_retry: bool, wait: Option<Duration> },
}

async fn attempt(req: &PreparedRequest<'_>, retries: u32) -> Result<reqwest::Response, Failure> {
    if let Some(fault) = req.chaos.and_then(Chaos::transport_fault) {
        return Err(status_failure(fault.status, &fault.headers, fault.body.as_bytes(), req.style));
    }
    let mut builder = req.client.post(req.url).headers(req.headers.clone()).body(req.body.clone());
    if req.policy.retry_count_header {
        builder = builder.header("x-stainless-retry-count", retries.to_string());
    }
    let response = builder.send().await.map_err(|e| Failure::Transport(transport_error(&e)))?;
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let headers = response.headers().clone();
    // A body read failure here still leaves us with the status, which is what matters.
    let body = response.bytes().await.unwrap_or_default();
    Err(status_failure(status.as_u16(), &headers, &body, req.style))
}

fn status_failure(status: u16, headers: &HeaderMap, body: &[u8], style: ErrorStyle) -> Failure {
    let should_retry = match headers.get("x-should-retry").and_then(|v| v.to_str().ok()) {
        Some("true") => true,
        Some("false") => false,
        _ => matches!(status, 408 | 409 | 429) || status >= 500,
    };
    let wait = retry_after(headers);
    let message = match style {
        ErrorStyle::Stainless => stainless_message(status, body),
        ErrorStyle::Google => google_message(status, body),
    };
    Failure::Status { error: ChatError::Status { status, message, retry_after: wait }, should_retry, wait }
}

/// `Error code: {status} - {repr(json)}`, the trimmed text for non-JSON bodies, or
/// `Error code: {status}` for an empty body.
pub(crate) fn stainless_message(status: u16, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    match serde_json::from_str::<Value>(text) {
        Ok(v) => format!("Error code: {status} - {}", pyrepr::repr(&v)),
        Err(_) if text.is_empty() => format!("Error code: {status}"),
        Err(_) => text.to_string(),
    }
}

/// google-genai's `APIError` text with kosong's prefix per status.
pub(crate) fn google_message(status: u16, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let json = serde_json::from_str::<Value>(text.trim()).unwrap_or_else(|_| {
        let mut m = serde_json::Map::new();
        m.insert("message".into(), Value::String(text.trim().to_string()));
        m.insert("status".into(), Value::String(reason_phrase(status).to_string()));
        Value::Object(m)
    });
    let error = json.get("error").unwrap_or(&json);
    let status_name = error.get("status").and_then(Value::as_str).unwrap_or_else(|| reason_phrase(status));
    let prefix = match status {
        429 => "Rate limit exceeded: ",
        401 => "Authentication failed: ",
        403 => "Permission denied: ",
        s if s >= 500 => "Server error: ",
        _ => "",
    };
    format!("{prefix}{status} {status_name}. {}", pyrepr::repr(&json))
}

fn reason_phrase(status: u16) -> &'static str {
    reqwest::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).unwrap_or("")
}

/// `retry-after-ms` (milliseconds) or `retry-after` (seconds or an HTTP date), kept only when
/// in (0, 60] seconds, as the stainless SDKs do.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    let secs = if let Some(ms) = get("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        Some(ms / 1000.0)
    } else if let Some(v) = get("retry-after") {
        v.parse::<f64>().ok().or_else(|| {
            let when = chrono::DateTime::parse_from_rfc2822(v).ok()?;
            let now = chrono::Utc::now();
            Some((when.timestamp_millis() - now.timestamp_millis()) as f64 / 1000.0)
        })
    } else {
        None
    }?;
    (secs > 0.0 && secs <= 60.0).then(|| Duration::from_secs_f64(secs))
}

/// `min(0.5·2^n, 8) · (1 − 0.25·U[0,1))`.
fn backoff(retries: u32) -> Duration {
    let base = (0.5 * 2f64.powi(retries as i32)).min(8.0);
    let jitter = 1.0 - 0.25 * rand::rng().random::<f64>();
    Duration::from_secs_f64(base * jitter)
}

/// A failure to get a response at all.
pub(crate) fn transport_error(e: &reqwest::Error) -> ChatError {
    if e.is_timeout() {
        ChatError::Timeout("Request timed out.".into())
    } else {
        let (error, source) = redacted(e);
        tracing::debug!(error = %error, source = %source, "LLM connection error");
        ChatError::Connection("Connection error.".into())
    }
}

/// A failure while reading the streamed body.
pub(crate) fn body_error(e: &reqwest::Error) -> ChatError {
    if e.is_timeout() {
        return ChatError::Timeout("Request timed out.".into());
    }
    let (error, source) = redacted(e);
    tracing::debug!(error = %error, source = %source, "LLM stream broke off");
    ChatError::Other(
        "Error: peer closed connection without sending complete message body (incomplete chunked read)".into(),
    )
}

/// The error and its source, as text fit for a log: the request URL's query (which may hold a
/// `key=`) and user info are replaced by `<redacted>`.
fn redacted(e: &reqwest::Error) -> (String, String) {
    let source = std::error::Error::source(e).map(|s| format!("{s:?}")).unwrap_or_default();
    let mut texts = [e.to_string(), source];
    if let Some(url) = e.url() {
        let secrets = [url.query(), url.password(), Some(url.username())];
        for secret in secrets.into_iter().flatten().filter(|s| !s.is_empty()) {
            for text in &mut texts {
                *text = text.replace(secret, "<redacted>");
            }
        }
    }
    let [error, source] = texts;
    (error, source)
}

/// Headers whose values are credentials.
fn is_credential_header(name: &HeaderName) -> bool {
    let name = name.as_str();
    name == "authorization" || name.contains("key") || name.contains("token") || name.contains("secret")
}

/// Builds a header map from static pairs plus owned ones; invalid values are reported.
pub(crate) fn header_map<'a>(pairs: impl IntoIterator<Item = (&'a str, String)>) -> Result<HeaderMap, String> {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| format!("invalid header name {name:?}: {e}"))?;
        let mut value = HeaderValue::from_str(&value).map_err(|e| format!("invalid value for header {name}: {e}"))?;
        value.set_sensitive(is_credential_header(&name));
        map.insert(name, value);
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_follow_the_sdks() {
        assert_eq!(
            stainless_message(429, br#"{"error":{"message":"slow","type":"rate"}}"#),
            "Error code: 429 - {'error': {'message': 'slow', 'type': 'rate'}}"
        );
        assert_eq!(stainless_message(500, b"  <html>oops</html>\n"), "<html>oops</html>");
        assert_eq!(stainless_message(502, b""), "Error code: 502");
        assert_eq!(
            google_message(429, br#"{"error":{"code":429,"message":"q","status":"RESOURCE_EXHAUSTED"}}"#),
            "Rate limit exceeded: 429 RESOURCE_EXHAUSTED. {'error': {'code': 429, 'message': 'q', 'status': 'RESOURCE_EXHAUSTED'}}"
        );
    }

    #[test]
    fn credential_headers_are_sensitive() {
        let map =
            header_map([("Authorization", "Bearer sk-1".to_string()), ("x-goog-api-key", "k".to_string())]).unwrap();
        assert!(map.values().all(HeaderValue::is_sensitive));
        assert!(!format!("{map:?}").contains("sk-1"));
        let map = header_map([("User-Agent", "kiwi".to_string())]).unwrap();
        assert!(!map.values().any(HeaderValue::is_sensitive));
    }

    #[test]
    fn retry_after_headers() {
        let h = |k: &str, v: &str| header_map([(k, v.to_string())]).unwrap();
        assert_eq!(retry_after(&h("retry-after-ms", "1")), Some(Duration::from_millis(1)));
        assert_eq!(retry_after(&h("retry-after", "2")), Some(Duration::from_secs(2)));
        assert_eq!(retry_after(&h("retry-after", "120")), None);
        assert_eq!(retry_after(&h("retry-after", "0")), None);
        assert!(backoff(0) <= Duration::from_millis(500) && backoff(0) > Duration::from_millis(370));
    }
}
