//! One configured MCP server and its live MCP session (`docs/subcommands.md` §2.6, §2.7):
//! spawning a stdio server in its own session and process group, or opening a Streamable HTTP
//! or SSE session; `initialize`, `tools/list`, `tools/call`; respawning a server that died.
//!
//! Invariants: the process of a stdio server lives exactly as long as its [`Live`] (dropping it
//! kills the server's whole process group, see `tools::process::CallGuard`); a call never holds
//! the lock while it waits for the server, so calls to one server run concurrently. What a
//! server can make kiwi keep is bounded: its tool list ([`MAX_PAGES`], [`MAX_TOOLS`],
//! [`MAX_LISTING_BYTES`]; rmcp bounds one message) and its stderr (`super::stderr`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, PaginatedRequestParams};
use rmcp::service::{Peer, RunningService, ServiceError};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value};

use super::config::{RemoteAuth, RemoteEntry, RemoteTransport, ServerEntry, StdioEntry};
use super::error::LinkError;
use crate::tools::process::CallGuard;

/// The part of kiwi's environment a stdio server inherits (§2.6); the entry's `env` goes on top.
const INHERITED_ENV: &[&str] = &["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];

/// HTTP connect and write limit (§2.7); reads may take as long as a tool call is allowed to.
const HTTP_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// The `tools/list` pages followed for one server: a server whose `nextCursor` never ends fails.
pub const MAX_PAGES: usize = 100;

/// The tools one server may list (more than any model can choose from).
pub const MAX_TOOLS: usize = 1000;

/// The size of one server's tool list as JSON (names, descriptions, schemas).
pub const MAX_LISTING_BYTES: usize = 16 * 1024 * 1024;

/// Where a stdio server's stderr goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StderrTo {
    /// Each line into kiwi's log (servers of a session: stdout and stderr belong to the protocol).
    Log,
    /// kiwi's own stderr (`kiwi mcp test`, where the user reads it).
    Inherit,
}

/// What a stdio server needs besides its entry.
#[derive(Debug, Clone)]
pub struct LinkEnv {
    /// The working directory of stdio servers without their own `cwd`.
    pub work_dir: PathBuf,
    pub stderr: StderrTo,
    /// The stored OAuth tokens of an `auth: "oauth"` server, if any (read, and refreshed when
    /// expired, at every connection).
    pub oauth_token: Option<std::sync::Arc<super::oauth::TokenSource>>,
}

type Service = RunningService<RoleClient, ClientConfig>;

/// A connected MCP session (and, for stdio, the process behind it).
struct Live {
    service: Service,
    _process: Option<CallGuard>,
    /// Tells a session apart from the one that replaced it (a failed call forgets only its own).
    generation: u64,
    /// The OAuth access token the session was opened with.
    token: Option<String>,
}

/// A tool call that went wrong before a result came back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallError {
    /// The server answered with a JSON-RPC error, or the transport failed; the text is for the model.
    Failed(String),
    /// The transport reported a timeout.
    TimedOut,
}

/// Why one attempt of a call failed.
enum Attempt {
    Failed(CallError),
    /// The server refused the OAuth access token the session was opened with.
    Refused(String),
}

impl Attempt {
    /// The error of a call that gets no further attempt.
    fn into_error(self) -> CallError {
        match self {
            Attempt::Failed(e) => e,
            Attempt::Refused(_) => CallError::Failed("the server refused the OAuth token".into()),
        }
    }
}

pub struct ServerLink {
    pub name: String,
    entry: ServerEntry,
    env: LinkEnv,
    live: tokio::sync::Mutex<Option<Live>>,
    generations: std::sync::atomic::AtomicU64,
}

impl ServerLink {
    pub fn new(name: String, entry: ServerEntry, env: LinkEnv) -> Self {
        Self { name, entry, env, live: tokio::sync::Mutex::new(None), generations: Default::default() }
    }

    /// Connects (or reconnects) and lists the server's tools.
    pub async fn connect(&self) -> Result<Vec<rmcp::model::Tool>, LinkError> {
        let mut live = self.live.lock().await;
        *live = None;
        let fresh = self.open().await?;
        let tools = list_tools(fresh.service.peer()).await?;
        *live = Some(fresh);
        Ok(tools)
    }

    /// Calls one tool; the result in MCP JSON form. A dead server is started again first. When
    /// an OAuth server refuses the session's token mid-session (it expired or was revoked), the
    /// token is refreshed and the call made once more on a new session: the refusal came
    /// before the server ran anything.
    pub async fn call(&self, tool: &str, arguments: Map<String, Value>) -> Result<Value, CallError> {
        // Only an OAuth server's call may need a second attempt: the others keep no copy.
        let Some(source) = &self.env.oauth_token else {
            return self.call_once(tool, arguments).await.map_err(Attempt::into_error);
        };
        let retry = arguments.clone();
        let refused = match self.call_once(tool, arguments).await {
            Ok(result) => return Ok(result),
            Err(Attempt::Failed(e)) => return Err(e),
            Err(Attempt::Refused(token)) => token,
        };
        tracing::info!("MCP server {}: the OAuth token was refused mid-session; refreshing it", self.name);
        source.replace_rejected(&refused).await.map_err(CallError::Failed)?;
        self.call_once(tool, retry).await.map_err(Attempt::into_error)
    }

    async fn call_once(&self, tool: &str, arguments: Map<String, Value>) -> Result<Value, Attempt> {
        let (peer, generation, token) =
            self.peer().await.map_err(|e| Attempt::Failed(CallError::Failed(e.into_text())))?;
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = Some(arguments);
        match peer.call_tool(params).await {
            Ok(result) => serde_json::to_value(&result).map_err(|e| Attempt::Failed(CallError::Failed(e.to_string()))),
            Err(e) => {
                if matches!(e, ServiceError::TransportClosed | ServiceError::TransportSend(_)) {
                    // Dropping the session kills what is left of the process; the next call respawns.
                    self.forget(generation).await;
                }
                let text = describe(&e);
                let lower = text.to_lowercase();
                let refused = LinkError::of_request(&e, String::new()).is_unauthorized();
                if let Some(token) = token.filter(|_| refused) {
                    self.forget(generation).await;
                    return Err(Attempt::Refused(token));
                }
                if matches!(e, ServiceError::Timeout { .. }) || lower.contains("timeout") || lower.contains("timed out")
                {
                    Err(Attempt::Failed(CallError::TimedOut))
                } else {
                    Err(Attempt::Failed(CallError::Failed(text)))
                }
            }
        }
    }

    /// Stops the server now (the session closes or kiwi exits).
    pub async fn shut_down(&self) {
        *self.live.lock().await = None;
    }

    async fn peer(&self) -> Result<(Peer<RoleClient>, u64, Option<String>), LinkError> {
        let mut live = self.live.lock().await;
        if let Some(l) = live.as_ref()
            && !l.service.is_closed()
        {
            return Ok((l.service.peer().clone(), l.generation, l.token.clone()));
        }
        *live = None;
        tracing::info!("MCP server {}: (re)connecting for a tool call", self.name);
        let fresh = self.open().await?;
        let peer = (fresh.service.peer().clone(), fresh.generation, fresh.token.clone());
        *live = Some(fresh);
        Ok(peer)
    }

    async fn forget(&self, generation: u64) {
        let mut live = self.live.lock().await;
        if live.as_ref().is_some_and(|l| l.generation == generation) {
            *live = None;
        }
    }

    async fn open(&self) -> Result<Live, LinkError> {
        let generation = self.generations.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let info = ClientConfig::new(ClientCapabilities::default(), Implementation::new("kiwi", crate::VERSION));
        // An OAuth server's token is read (and refreshed when expired) at every connection.
        let token = match (&self.entry, &self.env.oauth_token) {
            (ServerEntry::Remote(_), Some(source)) => Some(source.bearer().await?),
            _ => None,
        };
        match &self.entry {
            ServerEntry::Stdio(stdio) => {
                let (mut guard, stdout, stdin) = spawn(&self.name, stdio, &self.env)?;
                match info.serve((stdout, stdin)).await {
                    Ok(service) => Ok(Live { service, _process: Some(guard), generation, token: None }),
                    Err(e) => {
                        guard.kill();
                        let text = e.to_string().replace("connection closed: initialize response", "Connection closed");
                        Err(LinkError::of_initialize(&e, text))
                    }
                }
            }
            ServerEntry::Remote(remote) if remote.transport == RemoteTransport::Sse => {
                let transport = super::sse::SseTransport::connect(remote, token.as_deref())
                    .await
                    .map_err(|e| LinkError::of_sse(&e))?;
                let service = info.serve(transport).await.map_err(|e| LinkError::of_initialize(&e, e.to_string()))?;
                Ok(Live { service, _process: None, generation, token })
            }
            ServerEntry::Remote(remote) => {
                let transport = http_transport(remote, token.as_deref())?;
                let service = info.serve(transport).await.map_err(|e| LinkError::of_initialize(&e, e.to_string()))?;
                Ok(Live { service, _process: None, generation, token })
            }
        }
    }
}

fn spawn(
    name: &str,
    entry: &StdioEntry,
    env: &LinkEnv,
) -> Result<(CallGuard, tokio::process::ChildStdout, tokio::process::ChildStdin), String> {
    let mut cmd = tokio::process::Command::new(&entry.command);
    cmd.args(&entry.args).env_clear();
    for key in INHERITED_ENV {
        if let Ok(value) = std::env::var(key)
            && !value.starts_with("()")
        {
            cmd.env(key, value);
        }
    }
    cmd.envs(&entry.env);
    cmd.current_dir(entry.cwd.as_ref().map_or_else(|| env.work_dir.clone(), |c| env.work_dir.join(c)));
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
    cmd.stderr(match env.stderr {
        StderrTo::Log => Stdio::piped(),
        StderrTo::Inherit => Stdio::inherit(),
    });
    let mut guard = CallGuard::spawn(&mut cmd)
        .map_err(|e| format!("Client failed to connect: cannot start '{}': {e}", entry.command))?;
    let child = guard.child().ok_or("the server process is gone")?;
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        return Err("the server's pipes are missing".into());
    };
    if let Some(stderr) = child.stderr.take() {
        tokio::spawn(super::stderr::log_lines(name.to_string(), stderr));
    }
    Ok((guard, stdout, stdin))
}

fn http_transport(
    remote: &RemoteEntry,
    oauth_token: Option<&str>,
) -> Result<StreamableHttpClientTransport<reqwest::Client>, String> {
    let mut headers = HashMap::new();
    for (k, v) in &remote.headers {
        let name = reqwest::header::HeaderName::from_bytes(k.as_bytes()).map_err(|e| format!("header {k:?}: {e}"))?;
        let value = reqwest::header::HeaderValue::from_str(v).map_err(|e| format!("header {k:?}: {e}"))?;
        headers.insert(name, value);
    }
    let mut config = StreamableHttpClientTransportConfig::with_uri(remote.url.clone()).custom_headers(headers);
    let token = match (&remote.auth, oauth_token) {
        (RemoteAuth::Bearer(token), _) => Some(token.as_str()),
        (RemoteAuth::OAuth, token) => token,
        (RemoteAuth::None, _) => None,
    };
    if let Some(token) = token {
        config = config.auth_header(token.to_string());
    }
    let client =
        crate::net::client_builder().connect_timeout(HTTP_CONNECT_TIMEOUT).build().map_err(|e| e.to_string())?;
    Ok(StreamableHttpClientTransport::with_client(client, config))
}

/// Every page of the server's tool list, within [`MAX_PAGES`], [`MAX_TOOLS`] and
/// [`MAX_LISTING_BYTES`]: a server that goes past them fails to connect, saying which.
async fn list_tools(peer: &Peer<RoleClient>) -> Result<Vec<rmcp::model::Tool>, LinkError> {
    let mut tools = Vec::new();
    let mut bytes = 0;
    let mut cursor = None;
    for _ in 0..MAX_PAGES {
        let params = cursor.map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
        let page = peer.list_tools(params).await.map_err(|e| LinkError::of_request(&e, describe(&e)))?;
        for tool in page.tools {
            bytes += serde_json::to_vec(&tool).map_or(0, |v| v.len());
            tools.push(tool);
            if tools.len() > MAX_TOOLS {
                return Err(LinkError::Failed(format!("tools/list: the server lists more than {MAX_TOOLS} tools")));
            }
            if bytes > MAX_LISTING_BYTES {
                return Err(LinkError::Failed(format!(
                    "tools/list: the server's tools take more than {} MiB",
                    MAX_LISTING_BYTES >> 20
                )));
            }
        }
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(tools),
        }
    }
    Err(LinkError::Failed(format!("tools/list: the server's list goes on past {MAX_PAGES} pages")))
}

/// The text of a client error as the model and the user read it.
pub fn describe(e: &ServiceError) -> String {
    match e {
        ServiceError::McpError(data) => data.message.to_string(),
        ServiceError::TransportClosed => "Connection closed".into(),
        other => other.to_string(),
    }
}
