//! The SDK's in-process MCP servers (`docs/print-mode.md` B.3a): `--mcp-config` entries of
//! `"type": "sdk"` live in the host program, and kiwi's MCP client talks to them with
//! `mcp_message` control requests that carry the JSON-RPC messages. Their tools are offered as
//! `mcp__<server>__<tool>` and their results mapped as any MCP server's (`crate::mcp::content`).
//!
//! Invariants: the servers are connected while the host's `initialize` is answered (before any
//! turn), one after the other, each at most once; a server that fails to connect is `failed` and
//! offers nothing; a call is bounded by the MCP tool call limit and fails alone (a slow or
//! failing handler never holds another call, which run concurrently); a tool whose arguments
//! do not match its schema is refused before the host is asked.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};

use super::control::{AskError, HostAsk};
use super::lines::McpServerStatus;
use crate::llm::ToolSpec;
use crate::mcp::tool::ToolShape;
use crate::protocol::ToolReturnValue;
use crate::tools::{Tool, ToolCallContext};

/// The MCP protocol version kiwi offers the host's servers (what the real CLI sends them).
pub const PROTOCOL_VERSION: &str = "2025-11-25";

/// `tools/list` pages followed for one server.
const MAX_PAGES: usize = 100;

/// The prefix of an SDK server's tools: `mcp__<server>__<tool>`.
pub fn tool_name(server: &str, tool: &str) -> String {
    format!("mcp__{server}__{tool}")
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SdkState {
    Pending,
    Connected,
    Failed,
}

impl SdkState {
    fn word(self) -> &'static str {
        match self {
            SdkState::Pending => "pending",
            SdkState::Connected => "connected",
            SdkState::Failed => "failed",
        }
    }
}

/// One SDK server, as kiwi's client of it.
pub struct SdkServer {
    pub name: String,
    host: HostAsk,
    next_id: AtomicU64,
    state: Mutex<(SdkState, Vec<String>, Option<String>)>,
    timeout: Duration,
}

impl SdkServer {
    pub fn new(name: String, host: HostAsk, timeout: Duration) -> Self {
        Self {
            name,
            host,
            next_id: AtomicU64::new(0),
            state: Mutex::new((SdkState::Pending, Vec::new(), None)),
            timeout,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (SdkState, Vec<String>, Option<String>)> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn state(&self) -> SdkState {
        self.lock().0
    }

    /// `system/init`'s entry for this server.
    pub fn init_status(&self) -> McpServerStatus {
        McpServerStatus { name: self.name.clone(), status: self.state().word().into(), source: Some("sdk".into()) }
    }

    /// `mcp_status`'s entry for this server.
    pub fn status_value(&self) -> Value {
        let state = self.lock();
        let mut entry = json!({
            "name": self.name,
            "status": state.0.word(),
            "source": "sdk",
            "tools": state.1.iter().map(|t| json!({"name": t})).collect::<Vec<_>>(),
        });
        if let Some(error) = &state.2 {
            entry["error"] = Value::from(error.clone());
        }
        entry
    }

    /// One JSON-RPC request to the server; the `result`, or the error text.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, String> {
        self.exchange(method, params).await.map_err(|e| e.text(self.timeout))
    }

    async fn exchange(&self, method: &str, params: Value) -> Result<Value, RequestError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let answer = self.send(message).await?;
        let response = answer.get("mcp_response").cloned().unwrap_or(Value::Null);
        if let Some(error) = response.get("error") {
            let text = error.get("message").and_then(Value::as_str).unwrap_or("the server answered with an error");
            return Err(RequestError::Failed(text.to_string()));
        }
        match response.get("result") {
            Some(result) => Ok(result.clone()),
            None => Err(RequestError::Failed(format!("the host's answer to {method} has no mcp_response result"))),
        }
    }

    async fn notify(&self, method: &str) -> Result<(), String> {
        self.send(json!({"jsonrpc": "2.0", "method": method})).await.map(|_| ()).map_err(|e| e.text(self.timeout))
    }

    async fn send(&self, message: Value) -> Result<Value, RequestError> {
        let request = json!({"subtype": "mcp_message", "server_name": self.name, "message": message});
        self.host.ask(request, Some(self.timeout)).await.map_err(|e| match e {
            AskError::TimedOut => RequestError::TimedOut,
            other => RequestError::Failed(other.to_string()),
        })
    }

    /// How long one request to the server may take.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The handshake was given up (out of time): the server is failed with `why`, returned.
    pub fn give_up(&self, why: String) -> String {
        tracing::error!("SDK MCP server {} failed to connect: {why}", self.name);
        let mut state = self.lock();
        state.0 = SdkState::Failed;
        state.2 = Some(why.clone());
        why
    }

    /// `initialize`, `notifications/initialized`, `tools/list`: the server's tools, or why not.
    pub async fn connect(self: &Arc<Self>) -> Result<Vec<Arc<dyn Tool>>, String> {
        let outcome = self.handshake().await;
        let mut state = self.lock();
        match &outcome {
            Ok(tools) => {
                state.0 = SdkState::Connected;
                state.1 = tools.iter().map(|t| t.spec().name.clone()).collect();
            }
            Err(e) => {
                tracing::error!("SDK MCP server {} failed to connect: {e}", self.name);
                state.0 = SdkState::Failed;
                state.2 = Some(e.clone());
            }
        }
        outcome
    }

    async fn handshake(self: &Arc<Self>) -> Result<Vec<Arc<dyn Tool>>, String> {
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "kiwi", "version": crate::VERSION},
        });
        self.request("initialize", params).await.map_err(|e| format!("initialize: {e}"))?;
        self.notify("notifications/initialized").await.map_err(|e| format!("notifications/initialized: {e}"))?;
        let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
        let mut cursor: Option<Value> = None;
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let page = self.request("tools/list", params).await.map_err(|e| format!("tools/list: {e}"))?;
            for tool in page.get("tools").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default() {
                match SdkTool::new(self.clone(), tool) {
                    Ok(t) => tools.push(Arc::new(t)),
                    Err(why) => tracing::warn!("SDK MCP server {}: a tool is not offered: {why}", self.name),
                }
            }
            match page.get("nextCursor").filter(|c| !c.is_null()) {
                Some(next) => cursor = Some(next.clone()),
                None => return Ok(tools),
            }
        }
        Err(format!("tools/list: the server's list goes on past {MAX_PAGES} pages"))
    }
}

/// Why a request to an SDK server has no result.
enum RequestError {
    /// No answer within the MCP tool call limit.
    TimedOut,
    Failed(String),
}

impl RequestError {
    fn text(&self, limit: Duration) -> String {
        match self {
            RequestError::TimedOut => format!("no answer within {} ms", limit.as_millis()),
            RequestError::Failed(text) => text.clone(),
        }
    }
}

/// One tool of an SDK server.
pub struct SdkTool {
    shape: ToolShape,
    /// The server's own name for it.
    tool: String,
    server: Arc<SdkServer>,
}

impl SdkTool {
    fn new(server: Arc<SdkServer>, tool: &Value) -> Result<Self, String> {
        let name = tool.get("name").and_then(Value::as_str).ok_or("a tool without a name")?;
        let offered = tool_name(&server.name, name);
        if let Some(why) = crate::mcp::names::refusal(&offered) {
            return Err(format!("{}: {why}", crate::mcp::names::shown(name)));
        }
        let schema: Map<String, Value> = match tool.get("inputSchema") {
            Some(Value::Object(schema)) => schema.clone(),
            _ => json!({"type": "object"}).as_object().cloned().unwrap_or_default(),
        };
        let description = tool.get("description").and_then(Value::as_str);
        let shape = ToolShape::new(&server.name, offered, schema, description);
        Ok(Self { shape, tool: name.to_string(), server })
    }
}

impl Tool for SdkTool {
    fn spec(&self) -> &ToolSpec {
        &self.shape.spec
    }

    fn call<'a>(&'a self, arguments: Value, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        Box::pin(async move {
            let name = &self.shape.spec.name;
            let arguments = match self.shape.admit(arguments, ctx).await {
                Ok(arguments) => arguments,
                Err(refused) => return refused,
            };
            let params = json!({
                "name": self.tool,
                "arguments": arguments,
                "_meta": {"claudecode/toolUseId": ctx.tool_call_id, "progressToken": ctx.tool_call_id},
            });
            // Failures read as a server kiwi connects itself would make them read.
            match self.server.exchange("tools/call", params).await {
                Ok(result) => crate::mcp::content::tool_result(&result),
                Err(RequestError::TimedOut) => {
                    tracing::warn!("SDK MCP tool {name}: no answer within {:?}", self.server.timeout);
                    ToolReturnValue::error(crate::mcp::tool::timeout_message(name), "Timeout")
                }
                Err(RequestError::Failed(text)) => {
                    tracing::warn!("SDK MCP tool {name}: {text}");
                    ToolReturnValue::error(format!("Error running tool: {text}"), "MCP tool failed")
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_are_named_by_server() {
        assert_eq!(tool_name("calc", "add"), "mcp__calc__add");
    }
}
