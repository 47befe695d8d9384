//! `FetchURL`: fetch a web page and return its readable text (`docs/tools.md` §18).
//!
//! Order: the `moonshot_fetch` service when configured (any failure falls back), then a direct
//! GET. Plain text, Markdown and JSON bodies are returned as they are; HTML is turned into text
//! with `html2text`, with navigation, headers, footers and asides hidden (a lighter stand-in for
//! the reference's trafilatura extraction).
//!
//! Invariants: at most 10 redirects; a total timeout per request; at most [`MAX_BODY_BYTES`] of
//! body are read (the rest is dropped, and the output builder caps the result at 50,000
//! characters anyway); only rustls is used for TLS.

use std::time::Duration;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use super::output::OutputBuilder;
use super::{ToolCallContext, TypedTool};
use crate::config::schema::ServiceConfig;
use crate::protocol::ToolReturnValue;

pub const MAX_BODY_BYTES: usize = 10 << 20;
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
pub const MAX_REDIRECTS: usize = 10;
/// Identifies us to the Moonshot services the way the reference CLI does.
pub const SERVICE_USER_AGENT: &str = "KimiCLI/1.8.0";
const BROWSER_USER_AGENT: &str =
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36";
/// Boilerplate hidden before HTML is rendered to text.
const HIDE_BOILERPLATE_CSS: &str = "nav, header, footer, aside, form, noscript, svg, button { display: none; }";
/// Wide enough that paragraphs are never re-wrapped.
const TEXT_WIDTH: usize = 100_000;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct FetchUrlParams {
    /// The URL to fetch (http or https).
    pub url: String,
}

pub struct FetchUrl {
    service: Option<ServiceConfig>,
    timeout: Duration,
}

impl FetchUrl {
    pub fn new(service: Option<ServiceConfig>) -> Self {
        Self { service, timeout: DEFAULT_TIMEOUT }
    }

    /// Same tool with a different per-request timeout (tests use short ones).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    fn client(&self, user_agent: &str) -> reqwest::Result<reqwest::Client> {
        crate::net::client_builder()
            .user_agent(user_agent)
            .redirect(reqwest::redirect::Policy::limited(MAX_REDIRECTS))
            .timeout(self.timeout)
            .connect_timeout(self.timeout.min(Duration::from_secs(15)))
            .build()
    }

    async fn via_service(
        &self,
        service: &ServiceConfig,
        url: &str,
        tool_call_id: &str,
        share_dir: &std::path::Path,
    ) -> Result<String, String> {
        // A stored login (`oauth`) replaces `api_key`, resolved per request (`crate::auth`).
        let api_key = crate::auth::service_api_key(service, share_dir);
        if service.base_url.is_empty() || api_key.is_empty() {
            return Err("fetch service is not configured".into());
        }
        let client = self.client(SERVICE_USER_AGENT).map_err(|e| e.to_string())?;
        let mut req = client
            .post(&service.base_url)
            .header("Accept", "text/markdown")
            .header("Authorization", format!("Bearer {api_key}"))
            .header("X-Msh-Tool-Call-Id", tool_call_id)
            .header("Content-Type", "application/json")
            .body(serde_json::json!({ "url": url }).to_string());
        for (k, v) in &service.custom_headers {
            req = req.header(k, v);
        }
        let resp = req.send().await.map_err(|e| e.to_string())?;
        if resp.status().as_u16() != 200 {
            return Err(format!("status {}", resp.status().as_u16()));
        }
        let content_type = header(&resp, "content-type");
        let (body, _) = read_limited(resp).await.map_err(|e| e.to_string())?;
        Ok(decode(&body, &content_type))
    }

    async fn direct(&self, url: &str) -> ToolReturnValue {
        let network_error = |e: &dyn std::fmt::Display| {
            OutputBuilder::unlimited_lines().error(
                format!(
                    "Failed to fetch URL due to network error: {e}. This may indicate the URL is invalid or the server \
                     is unreachable."
                ),
                "Network error",
            )
        };
        let client = match self.client(BROWSER_USER_AGENT) {
            Ok(c) => c,
            Err(e) => return network_error(&crate::net::error_text(&e)),
        };
        let resp = match client.get(url).send().await {
            Ok(r) => r,
            Err(e) => return network_error(&crate::net::error_text(&e)),
        };
        let status = resp.status().as_u16();
        if status >= 400 {
            return OutputBuilder::unlimited_lines().error(
                format!(
                    "Failed to fetch URL. Status: {status}. This may indicate the page is not accessible or the server \
                     is down."
                ),
                format!("HTTP {status} error"),
            );
        }
        let content_type = header(&resp, "content-type").to_ascii_lowercase();
        let final_url = resp.url().to_string();
        let body = match read_limited(resp).await {
            Ok((b, _)) => b,
            Err(e) => return network_error(&crate::net::error_text(&e)),
        };
        let text = decode(&body, &content_type);
        let mut builder = OutputBuilder::unlimited_lines();
        if content_type.starts_with("text/plain") || content_type.starts_with("text/markdown") || is_json(&content_type)
        {
            builder.write(&text);
            return builder.ok("The returned content is the full content of the page.");
        }
        if text.is_empty() {
            let mut r = builder.ok("The response body is empty.");
            r.display.insert(0, crate::protocol::DisplayBlock::brief("Empty response body"));
            return r;
        }
        let extracted = html_to_text(&text, &final_url);
        if extracted.trim().is_empty() {
            return builder.error(
                "Failed to extract meaningful content from the page. This may indicate the page content is not \
                 suitable for text extraction, or the page requires JavaScript to render its content.",
                "No content extracted",
            );
        }
        builder.write(&extracted);
        builder.ok("The returned content is the main text content extracted from the page.")
    }
}

impl TypedTool for FetchUrl {
    type Params = FetchUrlParams;
    const NAME: &'static str = "FetchURL";

    fn description(&self) -> String {
        include_str!("desc/fetch_url.md").trim().to_string()
    }

    fn run<'a>(&'a self, params: FetchUrlParams, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        Box::pin(async move {
            if let Some(service) = &self.service {
                match self.via_service(service, &params.url, &ctx.tool_call_id, &ctx.env.share_dir).await {
                    Ok(content) => {
                        let mut builder = OutputBuilder::unlimited_lines();
                        builder.write(&content);
                        return builder.ok("The returned content is the main content extracted from the page.");
                    }
                    Err(e) => tracing::warn!("fetch service failed, fetching directly: {e}"),
                }
            }
            self.direct(&params.url).await
        })
    }
}

fn header(resp: &reqwest::Response, name: &str) -> String {
    resp.headers().get(name).and_then(|v| v.to_str().ok()).unwrap_or("").to_string()
}

fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim();
    essence == "application/json" || essence.ends_with("+json")
}

/// Reads at most [`MAX_BODY_BYTES`]; the flag tells whether the body was cut.
async fn read_limited(mut resp: reqwest::Response) -> reqwest::Result<(Vec<u8>, bool)> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await? {
        let room = MAX_BODY_BYTES - body.len();
        if chunk.len() >= room {
            body.extend_from_slice(&chunk[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&chunk);
    }
    Ok((body, false))
}

/// Decodes with the charset named in the Content-Type (UTF-8 by default), replacing bad bytes.
fn decode(body: &[u8], content_type: &str) -> String {
    let label = content_type.split(';').skip(1).find_map(|p| {
        let (k, v) = p.split_once('=')?;
        k.trim().eq_ignore_ascii_case("charset").then(|| v.trim().trim_matches('"').to_string())
    });
    let encoding = label.and_then(|l| encoding_rs::Encoding::for_label(l.as_bytes())).unwrap_or(encoding_rs::UTF_8);
    let (text, _, _) = encoding.decode(body);
    text.into_owned()
}

/// Renders HTML to readable text, prefixed with a small metadata header when there is a title.
pub fn html_to_text(html: &str, url: &str) -> String {
    let render = |css: bool| {
        let config = html2text::config::plain_no_decorate().allow_width_overflow().no_table_borders();
        let config = if css { config.add_css(HIDE_BOILERPLATE_CSS).ok()? } else { config };
        config.string_from_read(html.as_bytes(), TEXT_WIDTH).ok()
    };
    let body = render(true).or_else(|| render(false)).unwrap_or_default();
    let body = collapse_blank_lines(&body);
    if body.trim().is_empty() {
        return String::new();
    }
    match page_title(html) {
        Some(title) => format!("---\ntitle: {title}\nurl: {url}\n---\n{body}"),
        None => body,
    }
}

fn collapse_blank_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut blank_run = 0;
    for line in text.lines() {
        let line = line.trim_end();
        if line.is_empty() {
            blank_run += 1;
            if blank_run > 1 {
                continue;
            }
        } else {
            blank_run = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.trim_matches('\n').to_string() + "\n"
}

fn page_title(html: &str) -> Option<String> {
    let lower = html.to_ascii_lowercase();
    let start = lower.find("<title")?;
    let open_end = start + lower[start..].find('>')? + 1;
    let close = open_end + lower[open_end..].find("</title")?;
    let raw = html.get(open_end..close)?;
    let title = html2text::config::plain_no_decorate()
        .string_from_read(format!("<p>{raw}</p>").as_bytes(), TEXT_WIDTH)
        .ok()?
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    (!title.is_empty()).then_some(title)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_is_rendered_without_boilerplate() {
        let html = "<html><head><title>T &amp; U</title><style>p{}</style></head><body><nav>Menu</nav>\
                    <main><h1>Head</h1><p>Hello <a href='/x'>world</a>.</p><table><tr><td>a</td><td>b</td></tr></table></main>\
                    <script>var x;</script><footer>Foot</footer></body></html>";
        let text = html_to_text(html, "http://h/");
        assert!(text.starts_with("---\ntitle: T & U\nurl: http://h/\n---\n"), "{text}");
        assert!(text.contains("# Head\n\nHello [world]."), "{text}");
        assert!(!text.contains("Menu") && !text.contains("Foot") && !text.contains("var x"), "{text}");
    }

    #[test]
    fn charset_and_json() {
        assert_eq!(decode(b"caf\xe9", "text/plain; charset=ISO-8859-1"), "café");
        assert!(is_json("application/json; charset=utf-8"));
        assert!(is_json("application/ld+json"));
        assert!(!is_json("text/html"));
    }
}
