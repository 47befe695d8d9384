//! One ACP session: an ordinary kiwi session (built by the session builder, recorded into its
//! `wire.jsonl`) with its own turn driver, projection and model choice. Many live in one process.
//!
//! Invariants: the session folder's lock is held while the session is open here; changing the
//! model rebuilds the agent over the same folder only while no turn runs (the context and state
//! are read back from disk, so nothing is lost).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;

use super::client_calls::ClientCalls;
use super::client_fs::AcpFiles;
use super::errors;
use super::mapping::EventMapper;
use super::modes::ModelChoice;
use super::projection::AcpProjection;
use super::terminal_shell::TerminalRunner;
use crate::builder::{AgentSetup, BuildError, SessionRequest};
use crate::live::{CloseReason, LiveSession, Sessions};
use crate::rpc::{ErrorObject, Outbound, Peer};
use crate::session::store::SessionChoice;
use crate::soul::TurnDriver;
use crate::tools::client_files::ClientFiles;

/// What every session of the server shares.
pub struct Shared {
    pub setup: AgentSetup,
    pub outbound: Outbound,
    /// kiwi's requests to the client (permission cards, terminals, files) and their answers.
    pub peer: Arc<Peer>,
    /// The process's live sessions (the shell closes those still open at exit).
    pub sessions: Sessions,
    /// The client runs terminals for us (`clientCapabilities.terminal`): Shell uses them.
    pub client_terminal: AtomicBool,
    /// The client serves reads / takes writes of files (`clientCapabilities.fs`).
    pub client_read: AtomicBool,
    pub client_write: AtomicBool,
}

impl Shared {
    fn calls(&self) -> ClientCalls {
        ClientCalls { peer: self.peer.clone() }
    }
}

pub struct AcpSession {
    pub id: String,
    pub cwd: PathBuf,
    pub mapper: Arc<Mutex<EventMapper>>,
    live: Arc<LiveSession>,
    choice: Mutex<ModelChoice>,
}

impl AcpSession {
    /// Opens (creates or resumes) a session in `cwd`.
    pub fn open(
        shared: &Shared,
        cwd: &Path,
        choice: SessionChoice,
        mcp_configs: Vec<Value>,
    ) -> Result<Arc<Self>, ErrorObject> {
        let model = ModelChoice::of(&shared.setup.config, shared.setup.model.as_deref(), shared.setup.thinking);
        let setup = session_setup(&shared.setup, &model, &mcp_configs);
        let built =
            setup.build(SessionRequest { work_dir: cwd.to_path_buf(), session: choice, trace: None }).map_err(|e| {
                match e {
                    BuildError::Usage(m) => errors::invalid_params(m),
                    BuildError::Fatal(m) => errors::internal(m),
                }
            })?;
        let id = built.session.id.clone();
        let mapper = Arc::new(Mutex::new(EventMapper::new(cwd.to_path_buf(), false)));
        let projection = Arc::new(AcpProjection::new(id.clone(), shared.peer.clone(), mapper.clone()));
        let shell = terminal_shell(shared, &id, &mapper);
        let files = client_files(shared, &id);
        let live = LiveSession::open(built, projection, &shared.sessions);
        fit_agent(live.driver(), shell, files);
        lock(&mapper).set_plan_mode(live.driver().agent().state.plan_mode());
        Ok(Arc::new(Self { id, cwd: cwd.to_path_buf(), mapper, live, choice: Mutex::new(model) }))
    }

    /// The turn driver; `None` once the session is closed.
    pub fn driver(&self) -> Option<Arc<TurnDriver>> {
        (!self.live.is_closed()).then(|| self.live.driver().clone())
    }

    pub fn wire_path(&self) -> Option<PathBuf> {
        (!self.live.is_closed()).then(|| self.live.wire_path())
    }

    pub fn model_choice(&self) -> ModelChoice {
        lock(&self.choice).clone()
    }

    pub fn resumed(&self) -> bool {
        self.live.resumed()
    }

    /// `SessionStart` hooks (not visible to the client, as on the wire).
    pub async fn start_hooks(&self) {
        self.live.start().await;
    }

    /// Switches the session to another model choice (the session, its MCP servers and its
    /// tools stay as they are); refused while a turn runs.
    pub fn change_model(&self, shared: &Shared, next: ModelChoice) -> Result<(), ErrorObject> {
        let Some(driver) = self.driver() else { return Err(errors::session_not_found()) };
        if driver.is_busy() {
            return Err(errors::internal("a prompt is running in this session; change the model after it"));
        }
        let base = &shared.setup;
        // Thinking is only forced when it differs from what the config would choose anyway.
        let thinking = Some(next.thinking).filter(|t| base.thinking.is_some() || *t != base.config.default_thinking);
        let agent = driver.agent();
        let model = base.model_switch(agent, next.model.as_deref(), thinking).map_err(errors::internal)?;
        agent.env.model.set(model);
        *lock(&self.choice) = next;
        Ok(())
    }

    /// Cancels what runs, stops the session's background tasks, runs the `SessionEnd` hooks and
    /// releases the session folder (the process goes on).
    pub async fn close(&self) {
        self.live.close(CloseReason::Closed).await;
    }
}

fn terminal_shell(shared: &Shared, id: &str, mapper: &Arc<Mutex<EventMapper>>) -> Option<Arc<dyn crate::tools::Tool>> {
    if !shared.client_terminal.load(Ordering::SeqCst) {
        return None;
    }
    let runner = TerminalRunner::new(id.to_string(), shared.calls(), mapper.clone());
    let tool = crate::tools::shell::Shell::with_runner(Arc::new(runner));
    Some(Arc::new(crate::tools::Typed::new(tool)))
}

fn client_files(shared: &Shared, id: &str) -> Option<Arc<dyn ClientFiles>> {
    let (read, write) = (shared.client_read.load(Ordering::SeqCst), shared.client_write.load(Ordering::SeqCst));
    if !read && !write {
        return None;
    }
    Some(Arc::new(AcpFiles { session_id: id.to_string(), calls: shared.calls(), read, write }))
}

/// Fits the agent to what the client offers: its files, its terminals, its modes.
fn fit_agent(driver: &TurnDriver, shell: Option<Arc<dyn crate::tools::Tool>>, files: Option<Arc<dyn ClientFiles>>) {
    if let Some(files) = files {
        driver.agent().client.set_files(files);
    }
    // Only an agent that has Shell gets the terminal one in its place.
    if let Some(shell) = shell
        && driver.agent().toolset().get("Shell").is_some()
    {
        driver.agent().update_toolset(|set| set.insert(shell));
    }
    // ACP has no question form; plan mode is an ACP mode, so its tools are offered.
    driver.agent().client.handshake(Some((false, true)));
}

fn session_setup(base: &AgentSetup, choice: &ModelChoice, mcp_configs: &[Value]) -> AgentSetup {
    let mut setup = base.clone();
    setup.model = choice.model.clone();
    // Thinking is only forced when it differs from what the config would choose anyway.
    setup.thinking = Some(choice.thinking).filter(|t| base.thinking.is_some() || *t != base.config.default_thinking);
    // The user's own servers (`mcp.json`, `--mcp-config`) and then the client's for this
    // session: a client server with the same name replaces the user's.
    setup.mcp_configs.extend(mcp_configs.iter().cloned());
    setup
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
