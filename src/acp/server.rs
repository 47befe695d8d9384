//! The ACP dispatcher: routes each inbound message and never awaits a turn or the client. A
//! prompt starts a turn on the session's driver and returns; `session/cancel` cancels it (the
//! prompt then answers `cancelled`); answers to kiwi's own requests resolve the pending map;
//! `session/load` replays on its own task.
//!
//! Invariants: every request gets exactly one answer; unknown sessions are `-32602` with
//! `{"session_id":"Session not found"}`; sessions are ordinary kiwi sessions of the share dir.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AuthMethod, AuthMethodAgent, AuthMethodTerminal, AuthenticateRequest, AuthenticateResponse,
    AvailableCommand, AvailableCommandsUpdate, CancelNotification, ClientCapabilities, CloseSessionRequest,
    CloseSessionResponse, Implementation, InitializeRequest, InitializeResponse, ListSessionsRequest,
    ListSessionsResponse, LoadSessionRequest, LoadSessionResponse, McpCapabilities, McpServer, NewSessionRequest,
    NewSessionResponse, PromptCapabilities, PromptRequest, ResumeSessionRequest, ResumeSessionResponse,
    SessionCapabilities, SessionCloseCapabilities, SessionListCapabilities, SessionResumeCapabilities, SessionUpdate,
    SetSessionConfigOptionRequest, SetSessionConfigOptionResponse, SetSessionModeRequest, SetSessionModeResponse,
};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::errors;
use super::history;
use super::mcp_servers;
use super::modes;
use super::projection::send_update;
use super::prompt_input;
use super::session::{AcpSession, Shared};
use crate::protocol::{Event, StatusUpdate};
use crate::rpc::reader::Inbound;
use crate::rpc::{ErrorObject, Incoming, RequestId};
use crate::session::store::SessionChoice;
use crate::soul::TurnTag;

/// How long shutdown waits for each session's turn to unwind.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

pub struct AcpServer {
    shared: Shared,
    sessions: Mutex<HashMap<String, Arc<AcpSession>>>,
    client: Mutex<ClientCapabilities>,
    /// `agentInfo.version`.
    version: String,
    /// How the client re-runs this agent for the terminal login (`argv[0]`).
    program: String,
}

impl AcpServer {
    pub fn new(shared: Shared, version: String, program: String) -> Self {
        Self { shared, sessions: Mutex::default(), client: Mutex::new(ClientCapabilities::new()), version, program }
    }

    pub async fn serve(self: &Arc<Self>, inbound: Inbound, stop: CancellationToken) {
        inbound.serve(&stop, |item| self.dispatch(item)).await;
        self.shutdown().await;
    }

    async fn dispatch(self: &Arc<Self>, item: Incoming) {
        let out = &self.shared.outbound;
        match item {
            Incoming::Request { id, method, params } => {
                let params = params.unwrap_or(Value::Null);
                if let Err(e) = self.handle(&id, &method, params).await {
                    out.error(Some(&id), &e).await;
                }
            }
            Incoming::Notification { method, params } => match method.as_str() {
                "session/cancel" => match parse::<CancelNotification>(params.unwrap_or(Value::Null)) {
                    Ok(n) => match self.session(&n.session_id.0) {
                        Ok(session) => {
                            if let Some(driver) = session.driver() {
                                driver.cancel();
                            }
                        }
                        Err(_) => tracing::info!("session/cancel for unknown session {}", n.session_id.0),
                    },
                    Err(e) => tracing::info!("unreadable session/cancel: {}", e.message),
                },
                // The only requests a client could abandon are prompts, which `session/cancel`
                // stops; everything else is answered at once.
                "$/cancel_request" => tracing::debug!("ignoring $/cancel_request"),
                other => tracing::debug!("ignoring the notification `{other}`"),
            },
            Incoming::Response { id, outcome } => {
                if !self.shared.pending.resolve(&id, outcome) {
                    tracing::info!("ignoring a response to unknown request {id}");
                }
            }
            Incoming::Reject { id, error } => out.error(id.as_ref(), &error).await,
            Incoming::Ignore => {}
        }
    }

    async fn handle(self: &Arc<Self>, id: &RequestId, method: &str, params: Value) -> Result<(), ErrorObject> {
        let out = &self.shared.outbound;
        match method {
            "initialize" => {
                let response = self.initialize(parse(params)?);
                out.respond(id, &response).await;
            }
            "authenticate" => {
                let request: AuthenticateRequest = parse(params)?;
                if &*request.method_id.0 != "login" {
                    return Err(errors::invalid_params(format!("unknown auth method `{}`", request.method_id.0)));
                }
                // `login` runs in the client's terminal (`kiwi login`); here kiwi only says
                // whether a model is usable now.
                if let Some(reason) = self.shared.setup.diagnostics().no_model {
                    return Err(errors::auth_required(Some(&reason)));
                }
                out.respond(id, &AuthenticateResponse::new()).await;
            }
            "session/new" => {
                let request: NewSessionRequest = parse(params)?;
                let cwd = absolute_dir(&request.cwd)?;
                let session = self.open(&cwd, SessionChoice::New, &request.mcp_servers)?;
                let (modes, options) = session_modes(&self.shared, &session);
                let response = NewSessionResponse::new(session.id.clone()).modes(modes).config_options(options);
                out.respond(id, &with_models(&self.shared, &session, response)).await;
                self.announce_commands(&session).await;
            }
            "session/load" => {
                let request: LoadSessionRequest = parse(params)?;
                let cwd = absolute_dir(&request.cwd)?;
                let session = self.reopen(&request.session_id.0, &cwd, &request.mcp_servers)?;
                let Some(driver) = session.driver() else { return Err(errors::session_not_found()) };
                let claim = driver.claim().map_err(|_| errors::internal("a prompt is running in this session"))?;
                driver.sink().flush_record();
                let server = self.clone();
                let id = id.clone();
                // On its own task: a long history must not hold up the dispatcher.
                tokio::spawn(async move {
                    let out = &server.shared.outbound;
                    let replayed = match session.wire_path() {
                        Some(path) => history::replay(&path, &session.cwd, &session.id, out).await,
                        None => Ok(()),
                    };
                    drop(claim);
                    match replayed {
                        Ok(()) => {
                            let (modes, options) = session_modes(&server.shared, &session);
                            let response = LoadSessionResponse::new().modes(modes).config_options(options);
                            out.respond(&id, &with_models(&server.shared, &session, response)).await;
                            server.announce_commands(&session).await;
                        }
                        Err(e) => {
                            tracing::error!("session/load replay failed: {e}");
                            out.error(Some(&id), &errors::internal(format!("cannot replay the session: {e}"))).await;
                        }
                    }
                });
            }
            "session/resume" => {
                let request: ResumeSessionRequest = parse(params)?;
                let cwd = absolute_dir(&request.cwd)?;
                let session = self.reopen(&request.session_id.0, &cwd, &request.mcp_servers)?;
                let (modes, options) = session_modes(&self.shared, &session);
                let response = ResumeSessionResponse::new().modes(modes).config_options(options);
                out.respond(id, &with_models(&self.shared, &session, response)).await;
                self.announce_commands(&session).await;
            }
            "session/list" => {
                let request: ListSessionsRequest = parse(params)?;
                // Without a work dir there is nothing to look in (as the reference).
                let sessions = match request.cwd {
                    Some(cwd) => history::list(&self.shared.setup.share_dir, &absolute(&cwd)?),
                    None => Vec::new(),
                };
                out.respond(id, &ListSessionsResponse::new(sessions)).await;
            }
            "session/close" => {
                let request: CloseSessionRequest = parse(params)?;
                let session = lock(&self.sessions).remove(&*request.session_id.0);
                let Some(session) = session else { return Err(errors::session_not_found()) };
                session.close().await;
                out.respond(id, &CloseSessionResponse::new()).await;
            }
            "session/prompt" => {
                let request: PromptRequest = parse(params)?;
                let session = self.session(&request.session_id.0)?;
                let input = prompt_input::user_input(&request.prompt).map_err(errors::invalid_params)?;
                let Some(driver) = session.driver() else { return Err(errors::session_not_found()) };
                if driver.start(input, TurnTag::new(id.clone())).is_err() {
                    return Err(errors::internal("a prompt is already running for this session"));
                }
            }
            "session/set_mode" => {
                let request: SetSessionModeRequest = parse(params)?;
                let session = self.session(&request.session_id.0)?;
                let Some(plan) = modes::parse_mode(&request.mode_id.0) else {
                    return Err(errors::invalid_params(format!("unknown mode `{}`", request.mode_id.0)));
                };
                let Some(driver) = session.driver() else { return Err(errors::session_not_found()) };
                let view = driver.agent().state.set_plan_mode(plan);
                // Recorded like the wire's `set_plan_mode`; the client sees `current_mode_update`.
                driver.sink().emit(Event::StatusUpdate(StatusUpdate::plan_mode(view.active))).await;
                out.respond(id, &SetSessionModeResponse::new()).await;
            }
            "session/set_config_option" => {
                let request: SetSessionConfigOptionRequest = parse(params)?;
                let session = self.session(&request.session_id.0)?;
                let Some(value) = request.value.as_value_id() else {
                    return Err(errors::invalid_params("kiwi's config options are selects"));
                };
                let config = &self.shared.setup.config;
                let next = modes::apply(config, &session.model_choice(), &request.config_id.0, &value.0)
                    .map_err(errors::invalid_params)?;
                if next != session.model_choice() {
                    session.change_model(&self.shared, next)?;
                }
                let options = modes::config_options(config, &session.model_choice());
                out.respond(id, &SetSessionConfigOptionResponse::new(options)).await;
            }
            // Legacy (removed from the schema; older clients' model picker).
            "session/set_model" => {
                let request: modes::SetModelRequest = parse(params)?;
                let session = self.session(&request.session_id)?;
                let Some(next) = modes::parse_legacy_model(&self.shared.setup.config, &request.model_id) else {
                    return Err(errors::model_not_found());
                };
                if next != session.model_choice() {
                    session.change_model(&self.shared, next)?;
                }
                out.respond(id, &json!({})).await;
            }
            other => return Err(errors::method_not_found(other)),
        }
        Ok(())
    }

    fn initialize(&self, request: InitializeRequest) -> InitializeResponse {
        let terminal_auth = request.client_capabilities.auth.terminal;
        let caps = &request.client_capabilities;
        let seq = std::sync::atomic::Ordering::SeqCst;
        self.shared.client_terminal.store(caps.terminal, seq);
        self.shared.client_read.store(caps.fs.read_text_file, seq);
        self.shared.client_write.store(caps.fs.write_text_file, seq);
        *lock(&self.client) = request.client_capabilities;
        let version = if request.protocol_version.as_u16() >= 1 { ProtocolVersion::V1 } else { ProtocolVersion::V0 };
        let capabilities = AgentCapabilities::new()
            .load_session(true)
            .prompt_capabilities(PromptCapabilities::new().image(true).audio(false).embedded_context(true))
            .mcp_capabilities(McpCapabilities::new().http(true).sse(false))
            .session_capabilities(
                SessionCapabilities::new()
                    .list(SessionListCapabilities::new())
                    .resume(SessionResumeCapabilities::new())
                    .close(SessionCloseCapabilities::new()),
            );
        const NAME: &str = "Log in to your Kimi account";
        const DESCRIPTION: &str = "Runs `kiwi login` in a terminal; follow its instructions, then start a session.";
        // Older Zed builds read `_meta["terminal-auth"]`; clients that announce terminal auth
        // get the standard terminal method instead.
        let login = if terminal_auth {
            AuthMethod::Terminal(
                AuthMethodTerminal::new("login", NAME).args(vec!["login".into()]).description(DESCRIPTION.to_string()),
            )
        } else {
            let meta = json!({"terminal-auth": {"command": self.program, "args": ["login"], "label": "Kimi Login"}});
            AuthMethod::Agent(
                AuthMethodAgent::new("login", NAME)
                    .description(DESCRIPTION.to_string())
                    .meta(meta.as_object().cloned()),
            )
        };
        InitializeResponse::new(version)
            .agent_capabilities(capabilities)
            .auth_methods(vec![login])
            .agent_info(Implementation::new("kiwi", self.version.clone()))
    }

    fn session(&self, id: &str) -> Result<Arc<AcpSession>, ErrorObject> {
        lock(&self.sessions).get(id).cloned().ok_or_else(errors::session_not_found)
    }

    fn open(&self, cwd: &Path, choice: SessionChoice, servers: &[McpServer]) -> Result<Arc<AcpSession>, ErrorObject> {
        let mcp = mcp_servers::config_document(servers).map_err(errors::invalid_params)?;
        let session = AcpSession::open(&self.shared, cwd, choice, mcp.into_iter().collect())?;
        lock(&self.sessions).insert(session.id.clone(), session.clone());
        Ok(session)
    }

    /// An open session by id, or the stored one opened now (`-32602` when there is none).
    fn reopen(&self, id: &str, cwd: &Path, servers: &[McpServer]) -> Result<Arc<AcpSession>, ErrorObject> {
        if let Ok(session) = self.session(id) {
            return Ok(session);
        }
        if !history::exists(&self.shared.setup.share_dir, cwd, id) {
            return Err(errors::session_not_found());
        }
        self.open(cwd, SessionChoice::Id(id.to_string()), servers)
    }

    /// `available_commands_update`: the slash commands and skills the core offers.
    async fn announce_commands(&self, session: &AcpSession) {
        let Some(driver) = session.driver() else { return };
        let commands: Vec<AvailableCommand> = driver
            .agent()
            .slash_commands
            .iter()
            .map(|c| AvailableCommand::new(c.name.clone(), c.description.clone()))
            .collect();
        let update = SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands));
        send_update(&self.shared.outbound, &session.id, update).await;
        session.start_hooks().await;
    }

    async fn shutdown(&self) {
        let sessions: Vec<Arc<AcpSession>> = lock(&self.sessions).drain().map(|(_, s)| s).collect();
        for session in &sessions {
            if let Some(driver) = session.driver() {
                driver.cancel();
            }
        }
        for session in sessions {
            let _ = tokio::time::timeout(SHUTDOWN_GRACE * 2, session.close()).await;
        }
        self.shared.pending.fail_all();
    }
}

fn session_modes(
    shared: &Shared,
    session: &AcpSession,
) -> (agent_client_protocol::v1::schema::SessionModeState, Vec<agent_client_protocol::v1::schema::SessionConfigOption>)
{
    let plan = session.driver().is_some_and(|d| d.agent().state.plan_mode());
    (modes::mode_state(plan), modes::config_options(&shared.setup.config, &session.model_choice()))
}

/// A session answer with the legacy `models` member beside the schema's members.
#[derive(serde::Serialize)]
struct WithModels<T: serde::Serialize> {
    #[serde(flatten)]
    response: T,
    #[serde(skip_serializing_if = "Option::is_none")]
    models: Option<modes::LegacyModels>,
}

fn with_models<T: serde::Serialize>(shared: &Shared, session: &AcpSession, response: T) -> WithModels<T> {
    WithModels { response, models: modes::legacy_models(&shared.setup.config, &session.model_choice()) }
}

fn parse<T: DeserializeOwned>(params: Value) -> Result<T, ErrorObject> {
    serde_json::from_value(params).map_err(|e| errors::invalid_params(e.to_string()))
}

fn absolute(path: &Path) -> Result<PathBuf, ErrorObject> {
    if !path.is_absolute() {
        return Err(errors::invalid_params(format!("cwd must be an absolute path, not `{}`", path.display())));
    }
    Ok(crate::session::store::normalize(path, Path::new("/")))
}

fn absolute_dir(path: &Path) -> Result<PathBuf, ErrorObject> {
    let path = absolute(path)?;
    if !path.is_dir() {
        return Err(errors::invalid_params(format!("cwd `{}` is not a directory", path.display())));
    }
    Ok(path)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
