//! The MCP authorization flow (`docs/subcommands.md` §1.6, §2.7): discovery of the authorization
//! server, dynamic client registration, the browser flow with PKCE (S256) and a local callback
//! server, and refreshing stored tokens.
//!
//! Who does what: `kiwi mcp auth` runs the interactive flow ([`flow::authorize`]) and stores
//! what it gets in the share dir's token store ([`super::oauth_store`]). The agent and
//! `kiwi mcp test` only read that store through a [`TokenSource`], which refreshes an expired
//! access token with the stored refresh token but never starts the browser flow: a client
//! driving kiwi over a pipe has no user at a browser, so a failed refresh makes the server
//! `unauthorized` instead (the reference would block a turn for up to 300 s).
//!
//! Written by hand with reqwest rather than on rmcp's `auth` feature: that feature pulls in the
//! `oauth2` crate (not otherwise in the build), keeps credentials in its own shape (we must write
//! the reference's store layout byte for byte anyway), and has no pre-flight check of the
//! authorization URL with the stale-client re-registration the reference does.

pub mod callback;
pub mod discovery;
pub mod flow;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};

use super::error::LinkError;
use super::oauth_store;

/// An access token this close to its expiry is refreshed first: a request must not carry a
/// token that runs out on the way.
const EXPIRY_MARGIN_S: f64 = 10.0;

/// Limit for one request to the authorization server.
const HTTP_TIMEOUT: Duration = Duration::from_secs(30);

/// A failure of the flow as the user reads it: `<kind>: <message>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowError {
    /// A short error class name, in the reference's `ErrorKind` position.
    pub kind: &'static str,
    pub message: String,
}

impl FlowError {
    pub fn new(kind: &'static str, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }

    fn network(what: &str, e: &reqwest::Error) -> Self {
        Self::new("ConnectError", format!("{what}: {}", crate::net::error_text(e)))
    }
}

impl std::fmt::Display for FlowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

/// The HTTP client for the authorization server (redirects followed, as for discovery).
pub(crate) fn http_client() -> Result<reqwest::Client, FlowError> {
    crate::net::client_builder()
        .timeout(HTTP_TIMEOUT)
        .build()
        .map_err(|e| FlowError::new("RuntimeError", format!("cannot build the HTTP client: {e}")))
}

/// Runs `connect` (which sends the token `source` holds) with usable tokens: an expired access
/// token is refreshed first, and one the server refuses (HTTP 401, as the transport reports it)
/// is refreshed once and `connect` run again. The outer `Err` says why the stored tokens cannot
/// be used (only `kiwi mcp auth` can help then); the inner result is `connect`'s. Without a
/// source, `connect` simply runs.
pub async fn with_tokens<T, F, Fut>(source: Option<&TokenSource>, connect: F) -> Result<Result<T, LinkError>, String>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, LinkError>>,
{
    let Some(source) = source else { return Ok(connect().await) };
    let sent = source.bearer().await?;
    let outcome = connect().await;
    if !outcome.as_ref().is_err_and(LinkError::is_unauthorized) {
        return Ok(outcome);
    }
    source.replace_rejected(&sent).await?;
    Ok(connect().await)
}

/// POSTs a token request (code exchange or refresh) and returns the token answer, which must
/// carry an `access_token`. The client authenticates with its secret when it has one.
async fn token_request(
    client: &reqwest::Client,
    token_endpoint: &str,
    info: &Map<String, Value>,
    pairs: &[(&str, &str)],
) -> Result<Map<String, Value>, FlowError> {
    let mut pairs = pairs.to_vec();
    let client_id = info.get("client_id").and_then(Value::as_str).unwrap_or_default();
    pairs.push(("client_id", client_id));
    let secret = info.get("client_secret").and_then(Value::as_str).filter(|s| !s.is_empty());
    let basic = info.get("token_endpoint_auth_method").and_then(Value::as_str) == Some("client_secret_basic");
    let mut request = client
        .post(token_endpoint)
        .header("Content-Type", "application/x-www-form-urlencoded")
        .header("Accept", "application/json");
    match secret {
        Some(secret) if basic => request = request.basic_auth(client_id, Some(secret)),
        Some(secret) => pairs.push(("client_secret", secret)),
        None => {}
    }
    let response =
        request.body(form_encode(&pairs)).send().await.map_err(|e| FlowError::network("token request failed", &e))?;
    let status = response.status();
    let body = response.bytes().await.map_err(|e| FlowError::network("token request failed", &e))?;
    let text = String::from_utf8_lossy(&body);
    if !status.is_success() {
        return Err(FlowError::new(
            "OAuthTokenError",
            format!("the token endpoint answered {}: {}", status.as_u16(), brief(&text)),
        ));
    }
    match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Object(token))
            if token.get("access_token").and_then(Value::as_str).is_some_and(|t| !t.is_empty()) =>
        {
            Ok(token)
        }
        _ => Err(FlowError::new(
            "OAuthTokenError",
            format!("the token endpoint's answer has no access token: {}", brief(&text)),
        )),
    }
}

/// An answer body as one line of at most 300 characters: an error page must not flood the
/// one-line failure message.
pub(crate) fn brief(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(300) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}

/// `application/x-www-form-urlencoded`: unreserved characters kept, the rest percent-encoded.
pub(crate) fn form_encode(pairs: &[(&str, &str)]) -> String {
    let mut out = String::new();
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        for (j, part) in [k, v].into_iter().enumerate() {
            if j == 1 {
                out.push('=');
            }
            for b in part.bytes() {
                match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => out.push(b as char),
                    _ => out.push_str(&format!("%{b:02X}")),
                }
            }
        }
    }
    out
}

/// An exclusive `flock` on `path`, held while the file lives. `None` when it cannot be had
/// within a few seconds: a stale lock must not keep a server from connecting, so the caller
/// then goes on without it.
async fn lock(path: &Path) -> Option<std::fs::File> {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    oauth_store::ensure_store_dir(path.parent()?.parent()?);
    let file =
        std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).mode(0o600).open(path).ok()?;
    for _ in 0..50 {
        // SAFETY: `flock` on a descriptor we own; it does not touch memory.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Some(file);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tracing::warn!("the OAuth refresh lock {} stays busy; refreshing without it", path.display());
    None
}

/// §1.6 step 1: an MCP `initialize` sent to `url` (with `token` when given); for the legacy SSE
/// transport (`sse`) the `GET` that opens its event stream instead. `Some(challenge)` (the
/// `WWW-Authenticate` value, maybe empty) when the server answers 401; `None` when it lets the
/// request through, in which case the session it may have opened is closed again.
pub async fn challenge(
    url: &str,
    sse: bool,
    headers: &[(String, String)],
    token: Option<&str>,
) -> Result<Option<String>, FlowError> {
    let client = http_client()?;
    let body = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "kiwi", "version": crate::VERSION}}});
    let with_headers = |mut request: reqwest::RequestBuilder| {
        for (k, v) in headers {
            request = request.header(k.as_str(), v.as_str());
        }
        request
    };
    let mut request = match sse {
        true => with_headers(client.get(url)).header("Accept", "text/event-stream"),
        false => with_headers(client.post(url))
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json")
            .body(body.to_string()),
    };
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.map_err(|e| FlowError::network(&format!("cannot reach {url}"), &e))?;
    if response.status() == reqwest::StatusCode::UNAUTHORIZED {
        let header = response.headers().get(reqwest::header::WWW_AUTHENTICATE);
        return Ok(Some(header.and_then(|h| h.to_str().ok()).unwrap_or_default().to_string()));
    }
    if let Some(session) = response.headers().get("mcp-session-id").cloned() {
        let mut close = with_headers(client.delete(url)).header("mcp-session-id", session);
        if let Some(token) = token {
            close = close.bearer_auth(token);
        }
        let _ = close.send().await;
    }
    Ok(None)
}

fn now_epoch() -> f64 {
    chrono::Utc::now().timestamp_micros() as f64 / 1e6
}

/// The stored OAuth tokens of one server, as the agent and `kiwi mcp test` use them.
#[derive(Debug)]
pub struct TokenSource {
    share: PathBuf,
    url: String,
    /// One refresh at a time within the process (the store lock covers other processes).
    refreshing: tokio::sync::Mutex<()>,
}

impl TokenSource {
    pub fn new(share: &Path, url: &str) -> Self {
        Self { share: share.to_path_buf(), url: url.to_string(), refreshing: tokio::sync::Mutex::new(()) }
    }

    /// The access token to send: the stored one, refreshed first when it has expired. The
    /// error says why no token is usable (the caller names the server).
    pub async fn bearer(&self) -> Result<String, String> {
        if let Some(token) = self.stored_fresh()? {
            return Ok(token);
        }
        let _one = self.refreshing.lock().await;
        // Another process may hold a refresh token that rotates on use: refresh under the
        // store's lock and look again once we hold it, it may have refreshed already.
        let _lock = lock(&oauth_store::refresh_lock_path(&self.share, &self.url)).await;
        if let Some(token) = self.stored_fresh()? {
            return Ok(token);
        }
        self.refresh().await.map_err(|e| format!("the OAuth token has expired and refreshing it failed: {e}"))
    }

    /// The server refused `rejected` (HTTP 401) although it had not expired by our clock (it
    /// was revoked, or its lifetime was unknown): refresh it once. `Ok` when a token other than
    /// `rejected` is now stored (also when another process refreshed it meanwhile).
    pub async fn replace_rejected(&self, rejected: &str) -> Result<(), String> {
        let _one = self.refreshing.lock().await;
        let _lock = lock(&oauth_store::refresh_lock_path(&self.share, &self.url)).await;
        if oauth_store::access_token(&self.share, &self.url).is_some_and(|t| t != rejected) {
            return Ok(());
        }
        self.refresh()
            .await
            .map(drop)
            .map_err(|e| format!("the server refused the OAuth token and refreshing it failed: {e}"))
    }

    /// The stored access token when it has not expired; `None` when it needs a refresh.
    fn stored_fresh(&self) -> Result<Option<String>, String> {
        let tokens = oauth_store::tokens(&self.share, &self.url).ok_or("no OAuth tokens are stored")?;
        let access = tokens.get("access_token").and_then(Value::as_str).filter(|t| !t.is_empty());
        let expired =
            oauth_store::token_expiry(&self.share, &self.url).is_some_and(|at| now_epoch() + EXPIRY_MARGIN_S >= at);
        Ok(access.filter(|_| !expired).map(str::to_string))
    }

    async fn refresh(&self) -> Result<String, FlowError> {
        let tokens = oauth_store::tokens(&self.share, &self.url).unwrap_or_default();
        let Some(refresh_token) = tokens.get("refresh_token").and_then(Value::as_str).filter(|t| !t.is_empty()) else {
            return Err(FlowError::new("OAuthTokenError", "no refresh token is stored"));
        };
        let Some(info) = oauth_store::client_info(&self.share, &self.url) else {
            return Err(FlowError::new("OAuthTokenError", "no registered client is stored"));
        };
        let client = http_client()?;
        let server = discovery::discover(&client, &self.url, None).await?;
        let pairs =
            [("grant_type", "refresh_token"), ("refresh_token", refresh_token), ("resource", self.url.as_str())];
        let mut fresh = token_request(&client, &server.token_endpoint, &info, &pairs).await?;
        // A server that does not rotate refresh tokens leaves it out; the old one stays valid.
        if fresh.get("refresh_token").is_none_or(Value::is_null) {
            fresh.insert("refresh_token".into(), Value::String(refresh_token.to_string()));
        }
        if let Err(e) = oauth_store::save_tokens(&self.share, &self.url, &fresh) {
            tracing::warn!("cannot store the refreshed OAuth token for {}: {e}", crate::net::loggable_url(&self.url));
        }
        tracing::info!("refreshed the OAuth token for {}", crate::net::loggable_url(&self.url));
        Ok(fresh["access_token"].as_str().unwrap_or_default().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_cut_to_one_short_line() {
        assert_eq!(brief(" {\"error\":\n  \"x\"} "), "{\"error\": \"x\"}");
        assert_eq!(brief(&"a".repeat(400)).chars().count(), 301);
    }

    #[test]
    fn forms_are_percent_encoded() {
        assert_eq!(form_encode(&[("a b", "x/y=z&"), ("k", "~._-")]), "a%20b=x%2Fy%3Dz%26&k=~._-");
    }
}
