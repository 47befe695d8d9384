//! The ACP dispatcher: routes each inbound message and never awaits a turn or the client. A
//! prompt starts a turn on the session's driver and returns; `session/cancel` cancels it (the
//! prompt then answers `cancelled`); answers to kiwi's own requests resolve the pending map;
//! `session/load` replays on its own task.
//!
//! Invariants: every request gets exactly one answer; unknown sessions are `-32602` with
//! `{"session_id":"Session not found"}` (`-32002` for `session/delete`, as the SDKs expect); sessions are ordinary kiwi sessions of the share dir.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    AgentAuthCapabilities, AgentCapabilities, AuthMethod, AuthMethodAgent, AuthMethodTerminal, AuthenticateResponse,
    AvailableCommand, AvailableCommandsUpdate, ClientCapabilities, CloseSessionResponse, DeleteSessionResponse,
    Implementation, InitializeRequest, InitializeResponse, ListSessionsResponse, LoadSessionResponse,
    LogoutCapabilities, LogoutResponse, McpCapabilities, McpServer, NewSessionResponse, PromptCapabilities,
    PromptResponse, ResumeSessionResponse, SessionAdditionalDirectoriesCapabilities, SessionCapabilities,
    SessionCloseCapabilities, SessionDeleteCapabilities, SessionInfoUpdate, SessionListCapabilities,
    SessionResumeCapabilities, SessionUpdate, SetSessionConfigOptionResponse, SetSessionModeResponse, StopReason,
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::client_profile::ClientProfile;
use super::errors;
use super::history;
use super::mcp_servers;
use super::methods::{AcpNotification, AcpRequest, ForkSessionRequest};
use super::modes;
use super::prompt_input;
use super::session::{AcpSession, Shared};
use crate::live::OpError;
use crate::rpc::reader::Inbound;
use crate::rpc::{ErrorObject, Incoming, RequestId};
use crate::session::fork::ForkError;
use crate::session::rewind::UndoTarget;
use crate::session::store::SessionChoice;

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
                let handled = match AcpRequest::parse(&method, params) {
                    Ok(request) => self.handle(&id, request).await,
                    Err(e) => Err(e),
                };
                if let Err(e) = handled {
                    out.error(Some(&id), &e).await;
                }
            }
            Incoming::Notification { method, params } => match AcpNotification::parse(&method, params) {
                Some(Ok(AcpNotification::Cancel(n))) => match self.session(&n.session_id.0) {
                    Ok(session) => {
                        // Queued prompts never start: each is answered `cancelled`.
                        for id in session.take_queued() {
                            out.respond(&id, &PromptResponse::new(StopReason::Cancelled)).await;
                        }
                        session.cancel();
                    }
                    Err(_) => tracing::info!("session/cancel for unknown session {}", n.session_id.0),
                },
                Some(Ok(AcpNotification::CancelRequest)) => tracing::debug!("ignoring $/cancel_request"),
                Some(Err(e)) => tracing::info!("unreadable `{method}`: {}", e.message),
                None => tracing::debug!("ignoring the notification `{method}`"),
            },
            Incoming::Response { id, outcome } => {
                if !self.shared.peer.answered(&id, outcome) {
                    tracing::info!("ignoring a response to unknown request {id}");
                }
            }
            Incoming::Reject { id, error } => out.error(id.as_ref(), &error).await,
            Incoming::Ignore => {}
        }
    }

    async fn handle(self: &Arc<Self>, id: &RequestId, request: AcpRequest) -> Result<(), ErrorObject> {
        let out = &self.shared.outbound;
        match request {
            AcpRequest::Initialize(request, profile) => {
                self.shared.updates.set_profile(profile);
                let response = self.initialize(*request, profile);
                out.respond(id, &response).await;
            }
            AcpRequest::Authenticate(request) => {
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
            // What `kiwi logout` does; the sessions open here stop sending the login's token.
            AcpRequest::Logout(_) => {
                let share = self.shared.setup.share_dir.clone();
                self.off_dispatcher(id, move |server, id| async move {
                    tokio::task::spawn_blocking(move || crate::auth::logout::log_out(&share))
                        .await
                        .map_err(|e| errors::internal(format!("Logout failed: {e}")))?
                        .map_err(|e| errors::internal(format!("Logout failed: {e}")))?;
                    server.shared.outbound.respond(&id, &LogoutResponse::new()).await;
                    Ok(())
                });
            }
            // Opening a session (building it, replaying its history) runs on a task of its own:
            // a slow one never holds up the other sessions' prompts, answers and cancels.
            AcpRequest::NewSession(request) => {
                let cwd = absolute_dir(&request.cwd)?;
                let dirs = additional_dirs(&request.additional_directories)?;
                self.off_dispatcher(id, move |server, id| async move {
                    let session = server.open(&cwd, SessionChoice::New, &request.mcp_servers, &dirs).await?;
                    let (modes, options) = session_modes(&server.shared, &session);
                    let response = NewSessionResponse::new(session.id.clone()).modes(modes).config_options(options);
                    session.options_sent();
                    server.shared.outbound.respond(&id, &with_models(&server.shared, &session, response)).await;
                    server.announce_commands(&session).await;
                    Ok(())
                });
            }
            AcpRequest::LoadSession(request) => {
                let cwd = absolute_dir(&request.cwd)?;
                let dirs = additional_dirs(&request.additional_directories)?;
                self.off_dispatcher(id, move |server, id| async move {
                    let session = server.reopen(&request.session_id.0, &cwd, &request.mcp_servers, &dirs).await?;
                    session.replay().await?;
                    let (modes, options) = session_modes(&server.shared, &session);
                    let response = LoadSessionResponse::new().modes(modes).config_options(options);
                    session.options_sent();
                    server.shared.outbound.respond(&id, &with_models(&server.shared, &session, response)).await;
                    session.answered();
                    server.announce_commands(&session).await;
                    Ok(())
                });
            }
            AcpRequest::ResumeSession(request) => {
                let cwd = absolute_dir(&request.cwd)?;
                let dirs = additional_dirs(&request.additional_directories)?;
                self.off_dispatcher(id, move |server, id| async move {
                    let session = server.reopen(&request.session_id.0, &cwd, &request.mcp_servers, &dirs).await?;
                    let (modes, options) = session_modes(&server.shared, &session);
                    let response = ResumeSessionResponse::new().modes(modes).config_options(options);
                    session.options_sent();
                    server.shared.outbound.respond(&id, &with_models(&server.shared, &session, response)).await;
                    session.answered();
                    server.announce_commands(&session).await;
                    Ok(())
                });
            }
            AcpRequest::ListSessions(request) => {
                // Without a work dir: the sessions of every work dir (the reference lists none).
                let cwd = request.cwd.as_deref().map(absolute).transpose()?;
                let (mut sessions, next) =
                    history::list_page(&self.shared.setup.share_dir, cwd.as_deref(), request.cursor.as_deref())
                        .map_err(errors::invalid_params)?;
                // A session's added directories, for a client offered `additionalDirectories`.
                if !self.shared.updates.profile().newer_schema {
                    sessions.iter_mut().for_each(|s| s.additional_directories.clear());
                }
                out.respond(id, &ListSessionsResponse::new(sessions).next_cursor(next)).await;
            }
            AcpRequest::Fork(request) => {
                let cwd = absolute_dir(&request.cwd)?;
                self.off_dispatcher(id, move |server, id| async move { server.fork(id, cwd, request).await });
            }
            AcpRequest::Undo(request) => {
                let session = self.session(&request.session_id)?;
                session.local_only()?;
                let Some(live) = session.live() else { return Err(errors::session_not_found()) };
                self.off_dispatcher(id, move |server, id| async move {
                    let target = match (request.turn_index, request.turns) {
                        (Some(k), _) => UndoTarget::From(k),
                        (None, Some(n)) => UndoTarget::Last(n),
                        (None, None) => UndoTarget::Last(1),
                    };
                    // The live session's undo; only its outcome is ACP's to word.
                    let report = match live.undo(target).await {
                        Err(OpError::Busy) => {
                            return Err(errors::internal("a prompt is running in this session; undo after the turn"));
                        }
                        Err(OpError::Failed(e)) => return Err(errors::internal(format!("Undo failed: {e}"))),
                        Err(OpError::Invalid(e)) => return Err(errors::invalid_params(e)),
                        Ok(report) => report,
                    };
                    let answer = json!({
                        "turnIndex": report.turn_index,
                        "turnsUndone": report.turns_undone,
                        "restored": report.restored,
                        "deleted": report.deleted,
                        "notRestored": report.not_restored,
                        "stateRestored": report.state_restored,
                        "message": report.message(),
                    });
                    server.shared.outbound.respond(&id, &answer).await;
                    Ok(())
                });
            }
            AcpRequest::CloseSession(request) => {
                let session = lock(&self.sessions).remove(&*request.session_id.0);
                let Some(session) = session else { return Err(errors::session_not_found()) };
                // Closing waits for the turn to unwind and for SessionEnd hooks: not here.
                self.off_dispatcher(id, move |server, id| async move {
                    session.close().await;
                    server.shared.outbound.respond(&id, &CloseSessionResponse::new()).await;
                    Ok(())
                });
            }
            AcpRequest::DeleteSession(request) => {
                let sid = request.session_id.0.to_string();
                // Taken out of the table here, on the dispatcher, so no prompt starts in between.
                let open = {
                    let mut sessions = lock(&self.sessions);
                    if sessions.get(&sid).is_some_and(|s| s.is_running()) {
                        return Err(errors::internal("a prompt is running in this session; delete it after the turn"));
                    }
                    sessions.remove(&sid)
                };
                self.off_dispatcher(id, move |server, id| async move {
                    if let Some(open) = open {
                        open.close().await;
                    }
                    let share = server.shared.setup.share_dir.clone();
                    tokio::task::spawn_blocking(move || delete_stored(&share, &sid))
                        .await
                        .map_err(|e| errors::internal(format!("deleting the session failed: {e}")))??;
                    server.shared.outbound.respond(&id, &DeleteSessionResponse::new()).await;
                    Ok(())
                });
            }
            AcpRequest::Prompt(request) => {
                let session = self.session(&request.session_id.0)?;
                let input = prompt_input::user_input(&request.prompt).map_err(errors::invalid_params)?;
                session.after_commands().await;
                // While a turn runs the prompt waits its turn (`docs/acp.md` §4.12).
                session.prompt(input, id.clone())?;
            }
            AcpRequest::SetMode(request) => {
                let session = self.session(&request.session_id.0)?;
                session.local_only()?;
                let Some(mode) = modes::parse_mode(&request.mode_id.0) else {
                    return Err(errors::invalid_params(format!("unknown mode `{}`", request.mode_id.0)));
                };
                session.set_mode(mode).await?;
                out.respond(id, &SetSessionModeResponse::new()).await;
            }
            AcpRequest::SetConfigOption(request) => {
                let session = self.session(&request.session_id.0)?;
                session.local_only()?;
                let Some(value) = modes::OptionValue::of(&request.value) else {
                    return Err(errors::invalid_params("a config option's value is a value id or a boolean"));
                };
                let config = &self.shared.setup.config;
                let option = &*request.config_id.0;
                if option == modes::MODE_OPTION {
                    let value = value.id(option).map_err(errors::invalid_params)?;
                    let Some(mode) = modes::parse_mode(value) else {
                        return Err(errors::invalid_params(format!("unknown mode `{value}`")));
                    };
                    session.set_mode(mode).await?;
                } else if option == modes::SANDBOX_OPTION {
                    session.set_sandbox(value.id(option).map_err(errors::invalid_params)?).await?;
                } else {
                    let next =
                        modes::apply(config, &session.model_choice(), option, value).map_err(errors::invalid_params)?;
                    if next != session.model_choice() {
                        session.change_model(&self.shared, next)?;
                    }
                    session.announce_changes().await;
                }
                out.respond(id, &SetSessionConfigOptionResponse::new(session.config_options())).await;
            }
            // Legacy (removed from the schema; older clients' model picker).
            AcpRequest::SetModel(request) => {
                let session = self.session(&request.session_id)?;
                session.local_only()?;
                let Some(next) = modes::parse_legacy_model(&self.shared.setup.config, &request.model_id) else {
                    return Err(errors::model_not_found());
                };
                if next != session.model_choice() {
                    session.change_model(&self.shared, next)?;
                }
                session.announce_changes().await;
                out.respond(id, &json!({})).await;
            }
        }
        Ok(())
    }

    /// `session/fork`: forks the session after all its turns (or after `_meta.turnIndex`) into a
    /// new session of the same work dir, opened here (`docs/acp.md` §4.16). A session open here
    /// is forked by its live session (one busy rule with the other front ends); a stored one
    /// from its folder.
    async fn fork(
        self: Arc<Self>,
        id: RequestId,
        cwd: PathBuf,
        request: ForkSessionRequest,
    ) -> Result<(), ErrorObject> {
        let share = self.shared.setup.share_dir.clone();
        let turn = request.meta.as_ref().and_then(|m| m.turn_index);
        let open = self.session(&request.session_id).ok().filter(|open| !open.is_attached() || open.is_running());
        let (work_dir, forked) = match open {
            Some(open) => {
                let Some(live) = open.live() else {
                    if !open.is_attached() {
                        return Err(errors::session_not_found());
                    }
                    // Attached, and a turn runs on its host.
                    return Err(errors::internal("a prompt is running in this session; fork it after the turn"));
                };
                let forked = live.fork(turn).await.map_err(|e| match e {
                    OpError::Busy => errors::internal("a prompt is running in this session; fork it after the turn"),
                    OpError::Failed(m) => errors::internal(m),
                    OpError::Invalid(m) => errors::invalid_params(m),
                })?;
                (open.cwd.clone(), forked)
            }
            // Stored, or hosted by another process and idle: forked from its folder.
            None => {
                let Some(source) = crate::session::store::stored_session(&share, &cwd, &request.session_id) else {
                    return Err(errors::session_not_found());
                };
                let forked = {
                    let (share, work_dir) = (share.clone(), cwd.clone());
                    tokio::task::spawn_blocking(move || crate::session::fork::fork(&share, &work_dir, &source, turn))
                        .await
                        .map_err(|e| errors::internal(format!("forking the session failed: {e}")))?
                };
                let forked = forked.map_err(|e| match e {
                    ForkError::Io(m) => errors::internal(m),
                    other => errors::invalid_params(other.to_string()),
                })?;
                (cwd, forked)
            }
        };
        let title = forked.title.clone();
        let session = self.open(&work_dir, SessionChoice::Id(forked.id), &request.mcp_servers, &[]).await?;
        let (modes, options) = session_modes(&self.shared, &session);
        let response = ForkSessionResponse { session_id: session.id.clone(), modes, config_options: options };
        session.options_sent();
        self.shared.outbound.respond(&id, &with_models(&self.shared, &session, response)).await;
        self.announce_commands(&session).await;
        // The fork's title (`Fork: …`) for clients that show one.
        let update = SessionUpdate::SessionInfoUpdate(SessionInfoUpdate::new().title(title));
        self.shared.updates.send(&session.id, update).await;
        Ok(())
    }

    fn initialize(&self, request: InitializeRequest, profile: ClientProfile) -> serde_json::Value {
        let terminal_auth = request.client_capabilities.auth.terminal;
        let caps = &request.client_capabilities;
        let seq = std::sync::atomic::Ordering::SeqCst;
        self.shared.client_terminal.store(caps.terminal, seq);
        self.shared.client_read.store(caps.fs.read_text_file, seq);
        self.shared.client_write.store(caps.fs.write_text_file, seq);
        let form = caps.elicitation.as_ref().is_some_and(|e| e.supports_form());
        self.shared.client_elicitation.store(form, seq);
        *lock(&self.client) = request.client_capabilities;
        let version = if request.protocol_version.as_u16() >= 1 { ProtocolVersion::V1 } else { ProtocolVersion::V0 };
        let mut sessions = SessionCapabilities::new()
            .list(SessionListCapabilities::new())
            .resume(SessionResumeCapabilities::new())
            .close(SessionCloseCapabilities::new());
        let mut auth = AgentAuthCapabilities::new();
        // ACP's newer stable surface, for a client whose schema is newer than the 0.4 SDK's
        // (`docs/compatibility.md`); the methods themselves answer everyone.
        if profile.newer_schema {
            sessions = sessions
                .delete(SessionDeleteCapabilities::new())
                .additional_directories(SessionAdditionalDirectoriesCapabilities::new());
            auth = auth.logout(LogoutCapabilities::new());
        }
        let capabilities = AgentCapabilities::new()
            .load_session(true)
            .prompt_capabilities(PromptCapabilities::new().image(true).audio(false).embedded_context(true))
            .mcp_capabilities(McpCapabilities::new().http(true).sse(true))
            .session_capabilities(sessions)
            .auth(auth);
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
        let response = InitializeResponse::new(version)
            .agent_capabilities(capabilities)
            .auth_methods(vec![login])
            .agent_info(Implementation::new("kiwi", self.version.clone()));
        let mut value = serde_json::to_value(response).unwrap_or_default();
        // `session/fork` is unstable in the schema: its capability is added by hand.
        if let Some(session) =
            value.pointer_mut("/agentCapabilities/sessionCapabilities").and_then(|v| v.as_object_mut())
        {
            session.insert("fork".into(), json!({}));
        }
        // kiwi's extension method, named where ACP puts custom capabilities (`docs/acp.md` §4.17),
        // for a client that asked for it (`docs/compatibility.md`).
        if profile.undo
            && let Some(caps) = value.pointer_mut("/agentCapabilities").and_then(|v| v.as_object_mut())
        {
            caps.insert("_meta".into(), json!({"kiwi": {"undo": {"method": super::methods::UNDO_METHOD}}}));
        }
        value
    }

    /// Runs a request's work on its own task; its error (if any) answers the request.
    fn off_dispatcher<F, Fut>(self: &Arc<Self>, id: &RequestId, work: F)
    where
        F: FnOnce(Arc<Self>, RequestId) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Result<(), ErrorObject>> + Send + 'static,
    {
        let server = self.clone();
        let id = id.clone();
        tokio::spawn(async move {
            let out = server.shared.outbound.clone();
            if let Err(e) = work(server, id.clone()).await {
                out.error(Some(&id), &e).await;
            }
        });
    }

    fn session(&self, id: &str) -> Result<Arc<AcpSession>, ErrorObject> {
        lock(&self.sessions).get(id).cloned().ok_or_else(errors::session_not_found)
    }

    /// Opens (or, where the host has it open, joins) a session and registers it.
    async fn open(
        self: &Arc<Self>,
        cwd: &Path,
        choice: SessionChoice,
        servers: &[McpServer],
        dirs: &[PathBuf],
    ) -> Result<Arc<AcpSession>, ErrorObject> {
        let mcp = mcp_servers::config_document(servers).map_err(errors::invalid_params)?;
        let session = AcpSession::open(&self.shared, cwd, choice, mcp.into_iter().collect(), dirs.to_vec()).await?;
        lock(&self.sessions).insert(session.id.clone(), session.clone());
        self.watch_host(&session);
        Ok(session)
    }

    /// When the host of an attached session goes away, this process takes the session over
    /// (`docs/host.md` §3): it opens it again, which hosts it here once the lock is free, or
    /// attaches to whichever process took it first. The client keeps its session id; prompts
    /// queued meanwhile run there. Nothing happens for a session the client closed.
    fn watch_host(self: &Arc<Self>, session: &Arc<AcpSession>) {
        if !session.is_attached() {
            return;
        }
        let (server, watched) = (Arc::downgrade(self), session.clone());
        tokio::spawn(async move {
            if !watched.host_went().await {
                return;
            }
            match server.upgrade() {
                Some(server) => server.take_over(watched).await,
                None => watched.give_up().await,
            }
        });
    }

    async fn take_over(self: &Arc<Self>, old: Arc<AcpSession>) {
        let current = lock(&self.sessions).get(&old.id).is_some_and(|s| Arc::ptr_eq(s, &old));
        if !current {
            old.give_up().await;
            return;
        }
        // As a wire attacher does: until the old host released the lock or a new host serves.
        if let Some(dir) = old.hosted_dir() {
            let next = tokio::task::spawn_blocking(move || crate::wire::attach::handoff::next_host(&dir)).await;
            if matches!(next, Ok(crate::wire::attach::handoff::Next::GaveUp) | Err(_)) {
                tracing::warn!("cannot take session {} over: neither its lock nor a new host came", old.id);
                old.give_up().await;
                return;
            }
        }
        // The client's MCP servers were not used while attached; the session's config's are.
        match self.open(&old.cwd, SessionChoice::Id(old.id.clone()), &[], &[]).await {
            Ok(new) => {
                tracing::info!("took session {} over from its host", new.id);
                new.options_sent();
                new.answered();
                new.adopt_queue(&old);
                self.announce_commands(&new).await;
                new.pump();
            }
            Err(e) => {
                tracing::warn!("cannot take session {} over: {}", old.id, e.message);
                old.give_up().await;
            }
        }
    }

    /// An open session by id, or the stored one opened now (`-32602` when there is none).
    async fn reopen(
        self: &Arc<Self>,
        id: &str,
        cwd: &Path,
        servers: &[McpServer],
        dirs: &[PathBuf],
    ) -> Result<Arc<AcpSession>, ErrorObject> {
        // A session the host closed meanwhile (the web server deleted or restarted it) is
        // opened again.
        if let Ok(session) = self.session(id)
            && session.is_open()
        {
            // Open already: its workspace is what it is (`/add-dir` still adds to it).
            if let Some(missing) = session.missing_dir(dirs) {
                return Err(errors::invalid_params(format!(
                    "the session is open already and `{}` is not in its workspace; add it with /add-dir",
                    missing.display()
                )));
            }
            return Ok(session);
        }
        if !history::exists(&self.shared.setup.share_dir, cwd, id) {
            return Err(errors::session_not_found());
        }
        self.open(cwd, SessionChoice::Id(id.to_string()), servers, dirs).await
    }

    /// `available_commands_update`: the slash commands and skills the core offers.
    async fn announce_commands(&self, session: &Arc<AcpSession>) {
        let Some(driver) = session.driver() else {
            session.commands_sent();
            return;
        };
        let commands: Vec<AvailableCommand> = driver
            .agent()
            .slash_commands
            .iter()
            .filter(|c| c.listed_for(&self.shared.updates.profile().extensions()))
            .map(|c| AvailableCommand::new(c.name.clone(), c.description.clone()))
            .collect();
        let update = SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands));
        self.shared.updates.send(&session.id, update).await;
        session.commands_sent();
        // A slow SessionStart hook must not hold up anything else.
        let session = session.clone();
        tokio::spawn(async move { session.start_hooks().await });
    }

    /// EOF or a signal (or the socket closed): every turn of a session of its own is cancelled
    /// and what waits for the client fails; the process shell then closes those sessions
    /// (SessionEnd hooks, tasks, bookkeeping). A shared session only loses this client.
    async fn shutdown(&self) {
        let sessions: Vec<Arc<AcpSession>> = lock(&self.sessions).drain().map(|(_, s)| s).collect();
        for session in &sessions {
            session.disconnect();
        }
        self.shared.peer.fail_all();
    }
}

fn session_modes(
    _shared: &Shared,
    session: &AcpSession,
) -> (agent_client_protocol::v1::schema::SessionModeState, Vec<agent_client_protocol::v1::schema::SessionConfigOption>)
{
    (modes::mode_state(session.mode()), session.config_options())
}

/// The answer to `session/fork` (the schema's `ForkSessionResponse`).
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct ForkSessionResponse {
    session_id: String,
    modes: agent_client_protocol::v1::schema::SessionModeState,
    config_options: Vec<agent_client_protocol::v1::schema::SessionConfigOption>,
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
    // An attached session's model is the host's: none is offered here.
    let models = (!session.is_attached()).then(|| modes::legacy_models(&shared.setup.config, &session.model_choice()));
    WithModels { response, models: models.flatten() }
}

/// Removes a stored session of any work dir (`session/delete`): unknown → `-32002`; one that a
/// server (another process) has open → refused.
fn delete_stored(share: &Path, id: &str) -> Result<(), ErrorObject> {
    let Some(info) = crate::session::catalog::find(share, id) else { return Err(errors::no_session_to_delete()) };
    let _held = if info.legacy {
        None
    } else {
        match crate::session::store::lock_folder(&info.session_dir) {
            Ok(Some(held)) => Some(held),
            Ok(None) => return Err(errors::internal("the session is open in another process; close it there first")),
            Err(e) => return Err(errors::internal(format!("cannot delete the session: {e}"))),
        }
    };
    crate::session::catalog::delete(share, &info)
        .map_err(|e| errors::internal(format!("cannot delete the session: {e}")))
}

fn absolute(path: &Path) -> Result<PathBuf, ErrorObject> {
    if !path.is_absolute() {
        return Err(errors::invalid_params(format!("cwd must be an absolute path, not `{}`", path.display())));
    }
    Ok(crate::session::store::normalize(path, Path::new("/")))
}

/// `additionalDirectories` (`docs/acp.md` §4.4): absolute paths of directories, added to the
/// session's workspace as `--add-dir` adds them.
fn additional_dirs(dirs: &[PathBuf]) -> Result<Vec<PathBuf>, ErrorObject> {
    dirs.iter()
        .map(|dir| {
            if !dir.is_absolute() {
                return Err(errors::invalid_params(format!(
                    "additionalDirectories must be absolute paths, not `{}`",
                    dir.display()
                )));
            }
            let dir = crate::session::store::normalize(dir, Path::new("/"));
            if !dir.is_dir() {
                return Err(errors::invalid_params(format!(
                    "additional directory `{}` is not a directory",
                    dir.display()
                )));
            }
            Ok(dir)
        })
        .collect()
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
