//! FetchURL and SearchWeb against a tiny HTTP server on 127.0.0.1 (never the internet).

use crate::tools_support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kiwi::config::Config;
use kiwi::config::schema::{ServiceConfig, Services};
use kiwi::protocol::ToolReturnValue;
use kiwi::tools::fetch_url::FetchUrl;
use kiwi::tools::{Toolset, Typed};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tools_support::*;

/// A request as the server saw it.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
    headers: BTreeMap<String, String>,
    body: String,
}

struct Server {
    base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
}

fn response(status: u16, content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

async fn serve() -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
    let seen2 = Arc::clone(&seen);
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else { return };
            let seen = Arc::clone(&seen2);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let header_end = loop {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                };
                let head = String::from_utf8_lossy(&buf[..header_end]).to_string();
                let mut lines = head.lines();
                let mut first = lines.next().unwrap_or("").split_whitespace();
                let method = first.next().unwrap_or("").to_string();
                let path = first.next().unwrap_or("").to_string();
                let headers: BTreeMap<String, String> = lines
                    .filter_map(|l| l.split_once(':'))
                    .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
                    .collect();
                let len: usize = headers.get("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
                while buf.len() < header_end + len {
                    let n = sock.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                let body = String::from_utf8_lossy(&buf[header_end..]).to_string();
                seen.lock().unwrap().push(Seen {
                    method,
                    path: path.clone(),
                    headers: headers.clone(),
                    body: body.clone(),
                });
                let reply = match path.as_str() {
                    "/text" => response(200, "text/plain; charset=utf-8", b"plain text\nline 2\n"),
                    "/md" => response(200, "text/markdown", b"# Title\n"),
                    "/json" => response(200, "application/json", br#"{"a":1}"#),
                    "/html" => response(
                        200,
                        "text/html",
                        b"<html><head><title>Page</title></head><body><nav>menu</nav><p>Main text here.</p></body></html>",
                    ),
                    "/blank-html" => response(200, "text/html", b"<html><body><script>x()</script></body></html>"),
                    "/empty" => response(200, "text/html", b""),
                    "/redirect" => b"HTTP/1.1 302 Found\r\nLocation: /text\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec(),
                    "/loop" => b"HTTP/1.1 302 Found\r\nLocation: /loop\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec(),
                    "/big" => response(200, "text/plain", &vec![b'a'; 11 << 20]),
                    "/slow" => {
                        tokio::time::sleep(Duration::from_secs(5)).await;
                        response(200, "text/plain", b"late")
                    }
                    "/service" => response(200, "text/markdown", format!("service says: {body}").as_bytes()),
                    "/service-fail" => response(500, "text/plain", b"boom"),
                    "/search" => response(
                        200,
                        "application/json",
                        json!({"search_results": [
                            {"site_name": "s", "title": "T1", "url": "http://u1", "snippet": "S1", "date": "2024-01-01"},
                            {"site_name": "s", "title": "T2", "url": "http://u2", "snippet": "S2", "content": "C2"}
                        ]})
                        .to_string()
                        .as_bytes(),
                    ),
                    "/search-bad" => response(200, "application/json", b"{\"nope\":1}"),
                    "/search-503" => response(503, "text/plain", b""),
                    _ => response(404, "text/plain", b"not found"),
                };
                let _ = sock.write_all(&reply).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    Server { base, seen }
}

fn fetch_toolset(service: Option<ServiceConfig>, timeout: Duration) -> Toolset {
    Toolset::new(vec![Arc::new(Typed::new(FetchUrl::new(service).with_timeout(timeout)))])
}

async fn fetch(ts: &Toolset, h: &Harness, url: String) -> ToolReturnValue {
    ts.dispatch("FetchURL", Some(&json!({"url": url}).to_string()), &h.ctx).await
}

#[tokio::test]
async fn fetch_text_markdown_json_html() {
    let s = serve().await;
    let h = harness(true);
    let ts = fetch_toolset(None, Duration::from_secs(10));
    let r = fetch(&ts, &h, format!("{}/text", s.base)).await;
    assert!(!r.is_error);
    assert_eq!(text(&r), "plain text\nline 2\n");
    assert_eq!(r.message, "The returned content is the full content of the page.");
    let r = fetch(&ts, &h, format!("{}/md", s.base)).await;
    assert_eq!(text(&r), "# Title\n");
    let r = fetch(&ts, &h, format!("{}/json", s.base)).await;
    assert_eq!(text(&r), r#"{"a":1}"#);
    let r = fetch(&ts, &h, format!("{}/html", s.base)).await;
    assert_eq!(r.message, "The returned content is the main text content extracted from the page.");
    assert!(text(&r).contains("title: Page") && text(&r).contains("Main text here."), "{}", text(&r));
    assert!(!text(&r).contains("menu"));
    let ua = s.seen.lock().unwrap()[0].headers.get("user-agent").cloned().unwrap_or_default();
    assert!(ua.starts_with("Mozilla/5.0"), "{ua}");
}

#[tokio::test]
async fn fetch_redirects_errors_and_limits() {
    let s = serve().await;
    let h = harness(true);
    let ts = fetch_toolset(None, Duration::from_secs(1));
    let r = fetch(&ts, &h, format!("{}/redirect", s.base)).await;
    assert_eq!(text(&r), "plain text\nline 2\n");
    let r = fetch(&ts, &h, format!("{}/missing", s.base)).await;
    assert!(r.is_error);
    assert_eq!(
        r.message,
        "Failed to fetch URL. Status: 404. This may indicate the page is not accessible or the server is down."
    );
    assert_eq!(brief(&r), Some("HTTP 404 error"));
    let r = fetch(&ts, &h, format!("{}/empty", s.base)).await;
    assert!(!r.is_error);
    assert_eq!(r.message, "The response body is empty.");
    assert_eq!(brief(&r), Some("Empty response body"));
    let r = fetch(&ts, &h, format!("{}/blank-html", s.base)).await;
    assert!(r.is_error);
    assert!(r.message.starts_with("Failed to extract meaningful content from the page."));
    assert_eq!(brief(&r), Some("No content extracted"));
    let r = fetch(&ts, &h, format!("{}/big", s.base)).await;
    assert!(!r.is_error);
    assert_eq!(text(&r).chars().count(), 50_000);
    assert!(r.message.ends_with("Output is truncated to fit in the message."));
    let r = fetch(&ts, &h, format!("{}/slow", s.base)).await;
    assert!(r.is_error);
    assert!(r.message.starts_with("Failed to fetch URL due to network error:"), "{}", r.message);
    assert_eq!(brief(&r), Some("Network error"));
    let r = fetch(&ts, &h, format!("{}/loop", s.base)).await;
    assert_eq!(brief(&r), Some("Network error"));
    let r = fetch(&ts, &h, "not a url".to_string()).await;
    assert_eq!(brief(&r), Some("Network error"));
    // Nothing listens on port 9 of localhost.
    let r = fetch(&ts, &h, "http://127.0.0.1:9/".to_string()).await;
    assert_eq!(brief(&r), Some("Network error"));
}

#[tokio::test]
async fn fetch_service_first_then_fallback() {
    let s = serve().await;
    let h = harness(true);
    let svc = |path: &str| ServiceConfig {
        base_url: format!("{}{path}", s.base),
        api_key: "k".into(),
        custom_headers: BTreeMap::from([("X-Extra".to_string(), "1".to_string())]),
        oauth: None,
    };
    let ts = fetch_toolset(Some(svc("/service")), Duration::from_secs(5));
    let r = fetch(&ts, &h, "http://example.invalid/page".into()).await;
    assert_eq!(r.message, "The returned content is the main content extracted from the page.");
    assert_eq!(text(&r), r#"service says: {"url":"http://example.invalid/page"}"#);
    let req = s.seen.lock().unwrap()[0].clone();
    assert_eq!((req.method.as_str(), req.path.as_str()), ("POST", "/service"));
    assert_eq!(req.headers.get("authorization").map(String::as_str), Some("Bearer k"));
    assert_eq!(req.headers.get("accept").map(String::as_str), Some("text/markdown"));
    assert_eq!(req.headers.get("x-msh-tool-call-id").map(String::as_str), Some("tc-1"));
    assert_eq!(req.headers.get("x-extra").map(String::as_str), Some("1"));

    let ts = fetch_toolset(Some(svc("/service-fail")), Duration::from_secs(5));
    let r = fetch(&ts, &h, format!("{}/text", s.base)).await;
    assert_eq!(text(&r), "plain text\nline 2\n");
}

fn search_harness(base_url: String, api_key: &str) -> Harness {
    let config = Config {
        services: Services {
            moonshot_search: Some(ServiceConfig {
                base_url,
                api_key: api_key.into(),
                custom_headers: BTreeMap::new(),
                oauth: None,
            }),
            moonshot_fetch: None,
        },
        ..Config::default()
    };
    harness_with(true, config, &[])
}

#[tokio::test]
async fn search_web_only_when_configured() {
    let h = harness(true);
    let r = h.call("SearchWeb", json!({"query": "x"})).await;
    assert_eq!(r.message, "Tool `SearchWeb` not found");
    let h = search_harness(String::new(), "");
    let r = h.call("SearchWeb", json!({"query": "x"})).await;
    assert_eq!(r.message, "Search service is not configured. You may want to try other methods to search.");
    assert_eq!(brief(&r), Some("Search service not configured"));
}

#[tokio::test]
async fn search_web_formats_results() {
    let s = serve().await;
    let h = search_harness(format!("{}/search", s.base), "key");
    let r = h.call("SearchWeb", json!({"query": "rust", "limit": 2, "include_content": true})).await;
    assert!(!r.is_error, "{r:?}");
    assert_eq!(
        text(&r),
        "Title: T1\nDate: 2024-01-01\nURL: http://u1\nSummary: S1\n\n---\n\nTitle: T2\nDate: \nURL: http://u2\nSummary: S2\n\nC2\n\n"
    );
    assert_eq!(r.message, "");
    let req = s.seen.lock().unwrap()[0].clone();
    let body: serde_json::Value = serde_json::from_str(&req.body).unwrap();
    assert_eq!(body, json!({"text_query": "rust", "limit": 2, "enable_page_crawling": true, "timeout_seconds": 30}));
    assert_eq!(req.headers.get("authorization").map(String::as_str), Some("Bearer key"));
    assert_eq!(req.headers.get("user-agent").map(String::as_str), Some("KimiCLI/1.8.0"));
    assert_eq!(req.headers.get("x-msh-tool-call-id").map(String::as_str), Some("tc-1"));

    let r = h.call("SearchWeb", json!({"query": "rust", "limit": 21})).await;
    assert!(r.message.starts_with("Error validating JSON arguments:"));
}

#[tokio::test]
async fn search_web_errors() {
    let s = serve().await;
    let h = search_harness(format!("{}/search-503", s.base), "key");
    let r = h.call("SearchWeb", json!({"query": "x"})).await;
    assert_eq!(
        r.message,
        "Failed to search. Status: 503. This may indicates that the search service is currently unavailable."
    );
    assert_eq!(brief(&r), Some("Failed to search"));
    let h = search_harness(format!("{}/search-bad", s.base), "key");
    let r = h.call("SearchWeb", json!({"query": "x"})).await;
    assert!(r.message.starts_with("Failed to parse search results."));
    assert_eq!(brief(&r), Some("Failed to parse search results"));
}
