//! `SearchWeb`: web search through the Moonshot search service (`docs/tools.md` §17).
//!
//! Only offered when `services.moonshot_search` is configured; a configuration without a base URL
//! or API key still offers the tool, which then answers with the spec's "not configured" error.
//!
//! Invariants: one POST per call with the spec's JSON body and headers (custom headers last, so
//! they may override); output goes through the output builder without a per-line cap.

use std::time::Duration;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use super::fetch_url::SERVICE_USER_AGENT;
use super::output::OutputBuilder;
use super::{ToolCallContext, TypedTool, check_range};
use crate::config::schema::ServiceConfig;
use crate::protocol::ToolReturnValue;

/// The service is asked to finish within 30 s; allow for the round trip on top.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

fn five() -> i64 {
    5
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SearchWebParams {
    /// What to search for.
    pub query: String,
    /// How many results to return (1 to 20).
    #[serde(default = "five")]
    #[schemars(range(min = 1, max = 20))]
    pub limit: i64,
    /// Also fetch the content of each result page (more tokens; use when snippets are not enough).
    #[serde(default)]
    pub include_content: bool,
}

#[derive(Debug, Deserialize)]
struct SearchResponse {
    search_results: Vec<SearchResult>,
}

#[derive(Debug, Deserialize)]
struct SearchResult {
    #[allow(dead_code)]
    site_name: String,
    title: String,
    url: String,
    snippet: String,
    #[serde(default)]
    content: String,
    #[serde(default)]
    date: String,
}

pub struct SearchWeb {
    service: ServiceConfig,
}

impl SearchWeb {
    pub fn new(service: ServiceConfig) -> Self {
        Self { service }
    }
}

impl TypedTool for SearchWeb {
    type Params = SearchWebParams;
    const NAME: &'static str = "SearchWeb";

    fn description(&self) -> String {
        include_str!("desc/search_web.md").trim().to_string()
    }

    fn run<'a>(&'a self, params: SearchWebParams, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        Box::pin(async move {
            if let Some(invalid) = check_range("limit", params.limit, 1..=20) {
                return invalid;
            }
            match self.search(&params, &ctx.tool_call_id, &ctx.env.share_dir).await {
                Ok(r) => r,
                Err(e) => ToolReturnValue::crashed(format!("Error running tool: {e}")),
            }
        })
    }
}

impl SearchWeb {
    async fn search(
        &self,
        params: &SearchWebParams,
        tool_call_id: &str,
        share_dir: &std::path::Path,
    ) -> reqwest::Result<ToolReturnValue> {
        let builder = OutputBuilder::unlimited_lines();
        let svc = &self.service;
        // A stored login (`oauth`) replaces `api_key`, resolved per request (`crate::auth`).
        let api_key = crate::auth::service_api_key(svc, share_dir);
        if svc.base_url.is_empty() || api_key.is_empty() {
            return Ok(builder.error(
                "Search service is not configured. You may want to try other methods to search.",
                "Search service not configured",
            ));
        }
        let client = crate::net::client_builder().timeout(REQUEST_TIMEOUT).build()?;
        let body = serde_json::json!({
            "text_query": params.query,
            "limit": params.limit,
            "enable_page_crawling": params.include_content,
            "timeout_seconds": 30,
        });
        let mut req = client
            .post(&svc.base_url)
            .header("User-Agent", SERVICE_USER_AGENT)
            .header("Authorization", format!("Bearer {api_key}"))
            .header("X-Msh-Tool-Call-Id", tool_call_id)
            .header("Content-Type", "application/json")
            .body(body.to_string());
        for (k, v) in &svc.custom_headers {
            req = req.header(k, v);
        }
        let resp = req.send().await?;
        let status = resp.status().as_u16();
        if status != 200 {
            return Ok(builder.error(
                format!(
                    "Failed to search. Status: {status}. This may indicates that the search service is currently \
                     unavailable."
                ),
                "Failed to search",
            ));
        }
        let bytes = resp.bytes().await?;
        let results = match serde_json::from_slice::<SearchResponse>(&bytes) {
            Ok(r) => r.search_results,
            Err(e) => {
                return Ok(builder.error(
                    format!(
                        "Failed to parse search results. Error: {e}. This may indicates that the search service is \
                         currently unavailable."
                    ),
                    "Failed to parse search results",
                ));
            }
        };
        Ok(render(results))
    }
}

fn render(results: Vec<SearchResult>) -> ToolReturnValue {
    let mut builder = OutputBuilder::unlimited_lines();
    for (i, r) in results.iter().enumerate() {
        if i > 0 {
            builder.write("---\n\n");
        }
        builder.write(&format!("Title: {}\nDate: {}\nURL: {}\nSummary: {}\n\n", r.title, r.date, r.url, r.snippet));
        if !r.content.is_empty() {
            builder.write(&format!("{}\n\n", r.content));
        }
    }
    builder.ok("")
}
