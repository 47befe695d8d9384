//! The guards every HTTP request passes (`docs/web.md` §2.2, §8 item 3), in this order: a CORS
//! preflight from an origin the CORS rule refuses (400), LAN-only (the TCP peer must have a
//! private address), the Host header in local mode (DNS rebinding), the Origin of every request
//! that can change something (any method but GET, HEAD and OPTIONS) in every mode (cross-site
//! request forgery: a page may POST `text/plain` without a preflight), then for `/api/` paths
//! the Origin of reads (when enforced), the token, and a body's type (JSON only as
//! `application/json`, uploads as `multipart/form-data`).
//!
//! Invariants: the token is compared in constant time and never logged (nor are query strings);
//! `OPTIONS`, `/healthz`, `/docs`, `/scalar` and every path outside `/api/` except
//! `/openapi.json` need no token; the WebSockets (a session's stream, `/api/acp`) do their own
//! handshake checks ([`socket_refusal`]: only the `token` query parameter counts), so they are
//! let through after the LAN and Host checks.

use std::collections::HashMap;
use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Query, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::errors::ApiError;
use super::settings::{Settings, is_private};
use super::state::AppState;

/// The CORS preflight check, outside the CORS layer (which would answer every preflight).
pub async fn preflight(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    if request.method() == Method::OPTIONS
        && headers.contains_key(header::ACCESS_CONTROL_REQUEST_METHOD)
        && let Some(origin) = headers.get(header::ORIGIN)
        && !origin.to_str().is_ok_and(|o| state.settings.origin_allowed(o))
    {
        return (
            StatusCode::BAD_REQUEST,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "Disallowed CORS origin",
        )
            .into_response();
    }
    next.run(request).await
}

/// LAN-only, Host, Origin and token, inside the CORS layer (so refusals carry its headers).
pub async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let settings = &state.settings;
    let peer = request.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
    if let Err(refusal) = check(settings, request.method(), request.uri(), request.headers(), peer) {
        return refusal.into_response();
    }
    next.run(request).await
}

/// The guard's decision for one request.
pub fn check(
    settings: &Settings,
    method: &Method,
    uri: &axum::http::Uri,
    headers: &HeaderMap,
    peer: Option<SocketAddr>,
) -> Result<(), ApiError> {
    if settings.lan_only
        && let Some(peer) = peer
        && !is_private(peer.ip())
    {
        return Err(ApiError::forbidden("Access denied: only local network access is allowed"));
    }
    if settings.local_mode() && !host_allowed(headers) {
        return Err(ApiError::forbidden("Host not allowed"));
    }
    let writes = !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS);
    if writes && !origin_ok(settings, headers) {
        return Err(ApiError::forbidden("Origin not allowed"));
    }
    let path = uri.path();
    let exempt = method == Method::OPTIONS
        || matches!(path, "/healthz" | "/docs" | "/scalar")
        || !(path.starts_with("/api/") || path == "/openapi.json")
        || is_stream_path(path);
    if exempt {
        return Ok(());
    }
    if settings.enforce_origin && !origin_ok(settings, headers) {
        return Err(ApiError::forbidden("Origin not allowed"));
    }
    if let Some(expected) = &settings.token {
        let given = bearer(headers).or_else(|| if method == Method::GET { query_token(uri) } else { None });
        if !given.is_some_and(|t| token_matches(&t, expected)) {
            return Err(ApiError::unauthorized());
        }
    }
    if writes && has_body(headers) && !body_type_ok(headers) {
        return Err(ApiError::new(
            axum::http::StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Content-Type must be application/json",
        ));
    }
    Ok(())
}

/// No `Origin` (not a browser), or one the CORS rule allows.
fn origin_ok(settings: &Settings, headers: &HeaderMap) -> bool {
    headers.get(header::ORIGIN).is_none_or(|o| o.to_str().is_ok_and(|o| settings.origin_allowed(o)))
}

/// The request carries a body: a non-zero `Content-Length` or a chunked one.
fn has_body(headers: &HeaderMap) -> bool {
    let length = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok());
    headers.contains_key(header::TRANSFER_ENCODING) || length.is_some_and(|l| l.trim() != "0")
}

/// `application/json` (any parameters), or `multipart/form-data` for uploads.
fn body_type_ok(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else { return false };
    let essence = value.split(';').next().unwrap_or("").trim();
    essence.eq_ignore_ascii_case("application/json") || essence.eq_ignore_ascii_case("multipart/form-data")
}

/// `/api/sessions/<id>/stream` and `/api/acp`: the WebSockets, which check their own handshake
/// ([`socket_refusal`]).
fn is_stream_path(path: &str) -> bool {
    path == "/api/acp"
        || path
            .strip_prefix("/api/sessions/")
            .and_then(|rest| rest.strip_suffix("/stream"))
            .is_some_and(|id| !id.is_empty() && !id.contains('/'))
}

/// Why a WebSocket handshake is refused (`docs/web.md` §3.1): a client outside the LAN
/// (LAN-only), an Origin the CORS rule does not allow (checked in every mode; no Origin
/// passes), a missing or wrong token (only the `token` query parameter counts).
pub fn socket_refusal(
    settings: &Settings,
    peer: SocketAddr,
    headers: &HeaderMap,
    token: Option<&str>,
) -> Option<&'static str> {
    if settings.lan_only && !is_private(peer.ip()) {
        return Some("not on the local network");
    }
    if let Some(origin) = headers.get(header::ORIGIN)
        && !origin.to_str().is_ok_and(|o| settings.origin_allowed(o))
    {
        return Some("origin not allowed");
    }
    if let Some(expected) = &settings.token
        && !token.is_some_and(|t| token_matches(t.trim(), expected))
    {
        return Some("missing or wrong token");
    }
    None
}

/// In local mode only `localhost`, `127.0.0.1` and `[::1]` (any port) may be named by the Host
/// header; a request without one (not a browser) passes.
fn host_allowed(headers: &HeaderMap) -> bool {
    let Some(host) = headers.get(header::HOST) else { return true };
    let Ok(host) = host.to_str() else { return false };
    let name = if host.starts_with('[') {
        host.split_once(']').map(|(h, _)| format!("{h}]")).unwrap_or_default()
    } else {
        host.split(':').next().unwrap_or("").to_string()
    };
    matches!(name.to_ascii_lowercase().as_str(), "localhost" | "127.0.0.1" | "[::1]")
}

/// `Authorization: Bearer <token>` (scheme in any case, token trimmed).
fn bearer(headers: &HeaderMap) -> Option<String> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim().to_string())
}

fn query_token(uri: &axum::http::Uri) -> Option<String> {
    let Query(query) = Query::<HashMap<String, String>>::try_from_uri(uri).ok()?;
    query.get("token").cloned()
}

/// Compares a token without leaking where it differs through timing.
pub fn token_matches(given: &str, expected: &str) -> bool {
    let (a, b) = (given.as_bytes(), expected.as_bytes());
    let mut diff = a.len() ^ b.len();
    for (i, byte) in b.iter().enumerate() {
        diff |= usize::from(a.get(i).copied().unwrap_or(0) ^ byte);
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(token: Option<&str>, enforce_origin: bool, local: bool) -> Settings {
        let mut s = Settings::local(5494, "/s".into());
        s.token = token.map(str::to_string);
        s.enforce_origin = enforce_origin;
        s.public_mode = !local;
        if enforce_origin {
            s.allowed_origins = vec!["http://good".into()];
        }
        s
    }

    fn request(method: Method, uri: &str, headers: &[(&str, &str)]) -> (Method, axum::http::Uri, HeaderMap) {
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            map.insert(axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
        }
        (method, uri.parse().unwrap(), map)
    }

    fn detail(r: Result<(), ApiError>) -> Option<String> {
        r.err().map(|e| e.detail.as_str().unwrap().to_string())
    }

    #[test]
    fn tokens() {
        let s = settings(Some("tok"), false, false);
        let peer = Some("10.0.0.2:1".parse().unwrap());
        let run = |m: Method, uri: &str, h: &[(&str, &str)]| {
            let (m, u, h) = request(m, uri, h);
            detail(check(&s, &m, &u, &h, peer))
        };
        assert_eq!(run(Method::GET, "/api/sessions/", &[]), Some("Unauthorized".into()));
        assert_eq!(run(Method::GET, "/api/sessions/?token=tok", &[]), None);
        assert_eq!(run(Method::POST, "/api/sessions/?token=tok", &[]), Some("Unauthorized".into()));
        assert_eq!(run(Method::POST, "/api/sessions/", &[("authorization", "BEARER  tok ")]), None);
        assert_eq!(
            run(Method::GET, "/api/sessions/", &[("authorization", "Bearer nope")]),
            Some("Unauthorized".into())
        );
        assert_eq!(run(Method::GET, "/api/sessions/", &[("authorization", "Basic tok")]), Some("Unauthorized".into()));
        for free in ["/healthz", "/", "/assets/x.js", "/docs", "/api/sessions/abc/stream"] {
            assert_eq!(run(Method::GET, free, &[]), None, "{free}");
        }
        assert_eq!(run(Method::OPTIONS, "/api/sessions/", &[]), None);
    }

    #[test]
    fn lan_host_and_origin() {
        let s = settings(None, true, false);
        let (m, u, h) = request(Method::GET, "/api/sessions/", &[("origin", "http://evil")]);
        assert_eq!(
            detail(check(&s, &m, &u, &h, Some("10.0.0.2:1".parse().unwrap()))),
            Some("Origin not allowed".into())
        );
        let (m, u, h) = request(Method::GET, "/api/sessions/", &[("origin", "http://good/")]);
        assert_eq!(detail(check(&s, &m, &u, &h, None)), None);
        let (m, u, h) = request(Method::GET, "/", &[]);
        assert_eq!(
            detail(check(&s, &m, &u, &h, Some("8.8.8.8:1".parse().unwrap()))),
            Some("Access denied: only local network access is allowed".into())
        );
        let local = settings(None, false, true);
        for (host, ok) in [
            ("localhost:5494", true),
            ("127.0.0.1", true),
            ("[::1]:80", true),
            ("LOCALHOST", true),
            ("evil.example:5494", false),
            ("localhost.evil", false),
            ("[::2]", false),
        ] {
            let (m, u, h) = request(Method::GET, "/", &[("host", host)]);
            assert_eq!(check(&local, &m, &u, &h, None).is_ok(), ok, "{host}");
        }
    }

    #[test]
    fn writes_need_an_allowed_origin_in_every_mode_and_json_as_json() {
        let local = settings(None, false, true);
        let run = |m: Method, uri: &str, h: &[(&str, &str)]| {
            let (m, u, h) = request(m, uri, h);
            detail(check(&local, &m, &u, &h, None))
        };
        let forged = [("origin", "http://evil.example"), ("content-type", "text/plain"), ("content-length", "2")];
        assert_eq!(run(Method::POST, "/api/sessions/", &forged), Some("Origin not allowed".into()));
        assert_eq!(run(Method::DELETE, "/api/sessions/x", &[("origin", "null")]), Some("Origin not allowed".into()));
        assert_eq!(
            run(Method::POST, "/healthz", &[("origin", "http://evil.example")]),
            Some("Origin not allowed".into())
        );
        assert_eq!(run(Method::GET, "/api/sessions/", &[("origin", "http://evil.example")]), None, "reads: CORS");
        let own = ("origin", "http://localhost:5494");
        assert_eq!(
            run(Method::POST, "/api/sessions/", &[own, ("content-type", "text/plain"), ("content-length", "2")]),
            Some("Content-Type must be application/json".into())
        );
        assert_eq!(
            run(Method::PATCH, "/api/config/", &[("content-length", "2")]),
            Some("Content-Type must be application/json".into())
        );
        let json = ("content-type", "Application/JSON; charset=utf-8");
        assert_eq!(run(Method::POST, "/api/sessions/", &[own, json, ("content-length", "2")]), None);
        let multipart = ("content-type", "multipart/form-data; boundary=x");
        assert_eq!(run(Method::POST, "/api/sessions/x/files", &[multipart, ("transfer-encoding", "chunked")]), None);
        assert_eq!(run(Method::POST, "/api/sessions/x/fork", &[("content-length", "0")]), None, "no body");
    }

    #[test]
    fn constant_time_comparison_is_still_a_comparison() {
        assert!(token_matches("abc", "abc"));
        for other in ["abd", "ab", "abcd", ""] {
            assert!(!token_matches(other, "abc"), "{other}");
        }
    }
}
