//! The MCP servers of one session (`docs/subcommands.md` §2.3-§2.5): their statuses, the one
//! background job that connects them all concurrently, the snapshot a turn reports, and the
//! connection error that exactly one turn collects.
//!
//! Choices: the job starts when the first agent turn asks for it ([`McpManager::start`]), not
//! at build time. `initialize` therefore never waits, and a turn that starts while servers are
//! still connecting (always the first one) shows the `MCPLoading*` bracket however fast the
//! servers are, which is what clients expect (the spec allows deferring the start to the first
//! turn). Cancelling a turn stops only its wait: the job keeps running and the next turn waits
//! again. A connection attempt gets `mcp.client.tool_call_timeout_ms` (the spec sets no limit
//! for stdio; a server that never answers must not hold every turn). Dropping the manager (the session closes) stops the job and every server process.
//!
//! A server's tools whose names `super::names` refuses (a built-in's, odd ones) are neither
//! offered nor listed in `mcp_status`; a log line names the server, the tool and why.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::config::{RemoteAuth, ServerEntry, ServerTable};
use super::link::{LinkEnv, ServerLink};
use super::oauth::TokenSource;
use super::oauth_store;
use super::tool::McpTool;
use crate::protocol::{McpServerState, McpServerStatus, McpStatus};
use crate::tools::Tool;

/// Where the tools of a server that connected go (the session's toolset).
pub type RegisterTools = Arc<dyn Fn(Vec<Arc<dyn Tool>>) + Send + Sync>;

struct Slot {
    link: Arc<ServerLink>,
    oauth: Option<Arc<TokenSource>>,
    status: McpServerState,
    tools: Vec<String>,
    error: Option<String>,
    /// Turned off by the front end (Claude's `mcp_toggle`): not connected, its tools not offered.
    disabled: bool,
}

#[derive(Default)]
struct State {
    slots: Vec<Slot>,
    started: bool,
    running: bool,
    /// `Failed to connect MCP servers: …`, until a turn collects it.
    uncollected_error: Option<String>,
}

pub struct McpManager {
    state: Arc<Mutex<State>>,
    done: tokio::sync::watch::Sender<bool>,
    timeout: Duration,
    stop: CancellationToken,
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}

impl McpManager {
    /// Registers every server of `table`: `unauthorized` for OAuth servers without stored
    /// tokens (never connected), `pending` for the rest.
    pub fn new(table: ServerTable, base: LinkEnv, share_dir: &Path, tool_call_timeout: Duration) -> Self {
        let slots = table
            .into_iter()
            .map(|(name, entry)| {
                let mut env = base.clone();
                let mut status = McpServerState::Pending;
                if let ServerEntry::Remote(remote) = &entry
                    && remote.auth == RemoteAuth::OAuth
                {
                    if oauth_store::has_tokens(share_dir, &remote.url) {
                        env.oauth_token = Some(Arc::new(TokenSource::new(share_dir, &remote.url)));
                    } else {
                        tracing::warn!(
                            "MCP server {name} needs OAuth and has no stored tokens (run `kiwi mcp auth {name}`)"
                        );
                        status = McpServerState::Unauthorized;
                    }
                }
                let oauth = env.oauth_token.clone();
                Slot {
                    link: Arc::new(ServerLink::new(name, entry, env)),
                    oauth,
                    status,
                    tools: Vec::new(),
                    error: None,
                    disabled: false,
                }
            })
            .collect();
        let (done, _) = tokio::sync::watch::channel(false);
        Self {
            state: Arc::new(Mutex::new(State { slots, ..State::default() })),
            done,
            timeout: tool_call_timeout,
            stop: CancellationToken::new(),
        }
    }

    pub fn is_empty(&self) -> bool {
        lock(&self.state).slots.is_empty()
    }

    /// Starts connecting every pending server in the background, once. Needs a tokio runtime.
    pub fn start(&self, register: RegisterTools) {
        let mut state = lock(&self.state);
        if state.started {
            return;
        }
        state.started = true;
        let mut attempts = Vec::new();
        for (i, slot) in state.slots.iter_mut().enumerate() {
            if slot.status == McpServerState::Pending && !slot.disabled {
                slot.status = McpServerState::Connecting;
                attempts.push((i, slot.link.clone(), slot.oauth.clone()));
            }
        }
        if attempts.is_empty() {
            return;
        }
        state.running = true;
        drop(state);
        let shared = self.state.clone();
        let done = self.done.clone();
        let stop = self.stop.clone();
        let timeout = self.timeout;
        tokio::spawn(async move {
            let connect_all = futures::future::join_all(attempts.into_iter().map(|(i, link, oauth)| {
                let (shared, register) = (shared.clone(), register.clone());
                async move {
                    if let Ok(tools) = connect_slot(&shared, i, &link, oauth.as_deref(), timeout).await {
                        register(tools);
                    }
                }
            }));
            tokio::select! {
                _ = connect_all => {}
                () = stop.cancelled() => return,
            }
            let mut state = lock(&shared);
            state.running = false;
            let failed: Vec<String> = state
                .slots
                .iter()
                .filter_map(|s| s.error.as_ref().map(|e| format!("{:?}: {:?}", s.link.name, e)))
                .collect();
            if !failed.is_empty() {
                state.uncollected_error = Some(format!("Failed to connect MCP servers: {{{}}}", failed.join(", ")));
            }
            drop(state);
            let _ = done.send(true);
        });
    }

    /// Whether the connection job is still running.
    pub fn loading(&self) -> bool {
        lock(&self.state).running
    }

    /// Waits for the connection job; returns at once when none runs. Cancel-safe: dropping the
    /// wait leaves the job running.
    pub async fn wait(&self) {
        if !self.loading() {
            return;
        }
        let mut rx = self.done.subscribe();
        let _ = rx.wait_for(|finished| *finished).await;
    }

    /// The connection failure no turn has reported yet; a second call returns `None`.
    pub fn take_error(&self) -> Option<String> {
        lock(&self.state).uncollected_error.take()
    }

    /// `mcp_status` now.
    pub fn snapshot(&self) -> McpStatus {
        let state = lock(&self.state);
        let servers: Vec<McpServerStatus> = state
            .slots
            .iter()
            .map(|s| McpServerStatus { name: s.link.name.clone(), status: s.status, tools: s.tools.clone() })
            .collect();
        McpStatus {
            loading: state.running,
            connected: servers.iter().filter(|s| s.status == McpServerState::Connected).count() as u32,
            total: servers.len() as u32,
            tools: servers.iter().map(|s| s.tools.len() as u32).sum(),
            servers,
        }
    }
}

/// Connects the server of slot `i` and records the outcome there; its tools (to offer) or why it
/// failed. A server turned off meanwhile is shut down again and offers nothing.
async fn connect_slot(
    shared: &Mutex<State>,
    i: usize,
    link: &Arc<ServerLink>,
    oauth: Option<&TokenSource>,
    timeout: Duration,
) -> Result<Vec<Arc<dyn Tool>>, String> {
    // The spec has no connect limit for stdio; kiwi uses the tool call limit so that a server
    // that never answers `initialize` cannot hold turns forever.
    let connect = || async {
        match tokio::time::timeout(timeout, link.connect()).await {
            Ok(outcome) => outcome,
            Err(_) => Err(format!("no answer to initialize within {} ms", timeout.as_millis()).into()),
        }
    };
    let outcome = match super::oauth::with_tokens(oauth, connect).await {
        Ok(outcome) => outcome,
        // Stored tokens that cannot be used or refreshed need the user at a browser, which the
        // agent never opens: `unauthorized`, as without tokens.
        Err(e) => {
            let name = &link.name;
            tracing::warn!("MCP server {name} is unauthorized: {e} (run `kiwi mcp auth {name}`)");
            lock(shared).slots[i].status = McpServerState::Unauthorized;
            return Err(format!("MCP server {name} needs authorization: {e}"));
        }
    };
    if outcome.is_ok() && lock(shared).slots[i].disabled {
        link.shut_down().await;
        return Err(format!("MCP server {} is disabled", link.name));
    }
    let mut state = lock(shared);
    let slot = &mut state.slots[i];
    match outcome {
        Ok(mut tools) => {
            tools.retain(|tool| match super::names::refusal(&tool.name) {
                None => true,
                Some(why) => {
                    let (server, shown) = (&link.name, super::names::shown(&tool.name));
                    tracing::warn!("MCP server {server}: tool {shown} is not offered: {why}");
                    false
                }
            });
            tracing::info!("MCP server {} connected with {} tools", link.name, tools.len());
            slot.tools = tools.iter().map(|t| t.name.to_string()).collect();
            slot.status = McpServerState::Connected;
            slot.error = None;
            Ok(tools.iter().map(|t| Arc::new(McpTool::new(link.clone(), t, timeout)) as _).collect())
        }
        Err(e) => {
            tracing::error!("MCP server {} failed to connect: {e}", link.name);
            let text = e.into_text();
            slot.status = McpServerState::Failed;
            slot.error = Some(text.clone());
            Err(text)
        }
    }
}

/// Why a front end's request about one server cannot be served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerRequestError {
    /// No server of that name.
    Unknown,
    /// The server is turned off (reconnect asked).
    Disabled,
    /// Connecting failed (the reason).
    Failed(String),
}

impl McpManager {
    fn slot_of(&self, name: &str) -> Result<usize, ServerRequestError> {
        lock(&self.state).slots.iter().position(|s| s.link.name == name).ok_or(ServerRequestError::Unknown)
    }

    /// The servers turned off by [`McpManager::disable`].
    pub fn disabled(&self) -> Vec<String> {
        lock(&self.state).slots.iter().filter(|s| s.disabled).map(|s| s.link.name.clone()).collect()
    }

    /// The last connection error of server `name`.
    pub fn error_of(&self, name: &str) -> Option<String> {
        lock(&self.state).slots.iter().find(|s| s.link.name == name).and_then(|s| s.error.clone())
    }

    /// Turns server `name` off: its process stops and its tools are no longer offered; the names
    /// of the tools it offered (to take out of the toolset). Turning off a server that is off
    /// changes nothing.
    pub async fn disable(&self, name: &str) -> Result<Vec<String>, ServerRequestError> {
        let i = self.slot_of(name)?;
        let (link, tools) = {
            let mut state = lock(&self.state);
            let slot = &mut state.slots[i];
            slot.disabled = true;
            if slot.status != McpServerState::Unauthorized {
                slot.status = McpServerState::Pending;
            }
            (slot.link.clone(), std::mem::take(&mut slot.tools))
        };
        link.shut_down().await;
        Ok(tools)
    }

    /// Turns server `name` on again and connects it (a server that is on: nothing changes and
    /// no tools are returned); the tools to offer.
    pub async fn enable(&self, name: &str) -> Result<Vec<Arc<dyn Tool>>, ServerRequestError> {
        let i = self.slot_of(name)?;
        if !std::mem::replace(&mut lock(&self.state).slots[i].disabled, false) {
            return Ok(Vec::new());
        }
        self.connect_again(i).await
    }

    /// Connects server `name` anew (its old connection and process dropped); the tools to offer.
    pub async fn reconnect(&self, name: &str) -> Result<Vec<Arc<dyn Tool>>, ServerRequestError> {
        let i = self.slot_of(name)?;
        if lock(&self.state).slots[i].disabled {
            return Err(ServerRequestError::Disabled);
        }
        self.connect_again(i).await
    }

    async fn connect_again(&self, i: usize) -> Result<Vec<Arc<dyn Tool>>, ServerRequestError> {
        let (link, oauth) = {
            let mut state = lock(&self.state);
            let slot = &mut state.slots[i];
            slot.status = McpServerState::Connecting;
            slot.tools.clear();
            (slot.link.clone(), slot.oauth.clone())
        };
        connect_slot(&self.state, i, &link, oauth.as_deref(), self.timeout).await.map_err(ServerRequestError::Failed)
    }
}

impl Drop for McpManager {
    fn drop(&mut self) {
        // The job holds the links of servers still connecting; stopping it drops them (and
        // their processes) now rather than when they would have answered.
        self.stop.cancel();
    }
}
