//! The wire dispatcher: routes each inbound message, never awaiting the client or a turn.
//!
//! Invariants: every request gets exactly one response; the turn's lifecycle belongs to the
//! soul's driver, and a `prompt`'s response is written by the projection after every event of its
//! turn; the `cancel` response precedes the cancelled `prompt`'s (or `replay`'s) response;
//! answers to our own requests are routed by their typed id, unknown ids dropped. The busy table
//! of `docs/protocol-1.10.md` §2.1: a turn and a replay share one busy slot (`prompt`, `initialize` and
//! `replay` are refused while it is taken); `steer` needs a running agent loop; `cancel` stops
//! either; `set_plan_mode` always runs.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use std::path::PathBuf;

use serde_json::{Map, Value};

use super::errors::WireError;
use super::extensions;
use super::methods::{ClientNotification, ClientRequest};
use super::params::{
    CostInfo, Empty, ExternalToolsOutcome, ForkResult, HooksInfo, InitializeParams, InitializeResult, InterruptResult,
    OkStatus, PROTOCOL_VERSION, RejectedTool, SERVER_NAME, ServerCapabilities, ServerInfo, SetPlanModeResult,
    SlashCommandInfo, SteerResult, UndoParams, UndoResult, UndoSkippedFile,
};
use super::replay::replay;
use crate::live::{LiveSession, SHUTDOWN_GRACE};
use crate::llm::ClientIdentity;
use crate::protocol::{Event, HookEvent, StatusUpdate, UserInput};
use crate::rpc::reader::Inbound;
use crate::rpc::{ErrorCode, ErrorObject, Incoming, Outbound, Peer, RequestId};
use crate::session::fork::ForkError;
use crate::session::rewind::{RewindError, UndoTarget};
use crate::soul::hooks::Subscription;
use crate::soul::{TurnDriver, TurnTag};
use crate::tools::external::ExternalTool;

pub struct WireServer {
    outbound: Outbound,
    /// Routes the client's answers to our requests.
    peer: Arc<Peer>,
    driver: Arc<TurnDriver>,
    /// `server.version` in `initialize`.
    version: String,
    /// The session's `wire.jsonl`, for `replay`.
    wire_path: PathBuf,
    /// What the client's `initialize` was granted, read by the projection.
    granted: Arc<extensions::Granted>,
}

impl WireServer {
    pub fn new(peer: Arc<Peer>, live: &LiveSession, version: String) -> Self {
        let outbound = peer.outbound().clone();
        let granted = Arc::default();
        Self { outbound, peer, driver: live.driver().clone(), version, wire_path: live.wire_path(), granted }
    }

    /// Shares the client's grant with the projection that sends it kiwi-only events.
    pub fn with_grant(mut self, granted: Arc<extensions::Granted>) -> Self {
        self.granted = granted;
        self
    }

    /// Serves until the inbound channel closes (EOF) or `stop` fires.
    pub async fn serve(&self, inbound: Inbound, stop: CancellationToken) {
        inbound.serve(&stop, |item| self.dispatch(item)).await;
        self.shutdown().await;
    }

    async fn dispatch(&self, item: Incoming) {
        match item {
            Incoming::Request { id, method, params } => match ClientRequest::parse(&method, params) {
                Ok(request) => self.handle(id, request).await,
                Err(e) => self.outbound.error(Some(&id), &e).await,
            },
            Incoming::Notification { method, .. } => match ClientNotification::parse(&method) {
                Some(ClientNotification::Interrupt) => {
                    self.driver.cancel();
                }
                None => tracing::debug!("ignoring `{method}` sent as a notification"),
            },
            Incoming::Response { id, outcome } => {
                if !self.peer.answered(&id, outcome) {
                    tracing::info!("ignoring a response to unknown request {id}");
                }
            }
            Incoming::Reject { id, error } => self.outbound.error(id.as_ref(), &error).await,
            Incoming::Ignore => {}
        }
    }

    async fn handle(&self, id: RequestId, request: ClientRequest) {
        match request {
            ClientRequest::Initialize(params) => self.initialize(id, params).await,
            ClientRequest::Prompt(params) => self.prompt(id, params.user_input).await,
            ClientRequest::Run(input) => self.prompt(id, input).await,
            ClientRequest::Steer(params) => match self.driver.steer(params.user_input) {
                Ok(()) => self.outbound.respond(&id, &SteerResult::Steered).await,
                Err(_) => self.outbound.error(Some(&id), &idle()).await,
            },
            ClientRequest::SetPlanMode(params) => self.set_plan_mode(id, params.enabled).await,
            ClientRequest::Replay => self.replay(id),
            ClientRequest::Cancel => match self.driver.cancel_handle() {
                Some(token) => {
                    // The answer goes out before the cancelled prompt's.
                    self.outbound.respond(&id, &Empty {}).await;
                    token.cancel();
                }
                None => self.outbound.error(Some(&id), &idle()).await,
            },
            ClientRequest::Fork(params) => self.fork(id, params.turn_index).await,
            ClientRequest::Undo(params) => match undo_session(&self.driver, params).await {
                Ok(result) => self.outbound.respond(&id, &result).await,
                Err(error) => self.outbound.error(Some(&id), &error).await,
            },
            ClientRequest::Interrupt => {
                let result = if self.driver.cancel() { InterruptResult::Ok } else { InterruptResult::Idle };
                self.outbound.respond(&id, &result).await;
            }
        }
    }

    async fn initialize(&self, id: RequestId, params: InitializeParams) {
        if self.driver.is_busy() {
            self.outbound.error(Some(&id), &busy()).await;
            return;
        }
        let result = initialize_agent(&self.driver, params, &self.version);
        self.granted.set(result.extensions.as_deref());
        self.outbound.respond(&id, &result).await;
    }

    /// `set_plan_mode` (`docs/protocol-1.10.md` §2.5): allowed in every state; the status update goes
    /// out (and into `wire.jsonl`) before the answer.
    async fn set_plan_mode(&self, id: RequestId, enabled: bool) {
        let view = self.driver.agent().state.set_plan_mode(enabled);
        self.driver.sink().emit(Event::StatusUpdate(StatusUpdate::plan_mode(view.active))).await;
        self.outbound.respond(&id, &SetPlanModeResult { status: OkStatus::Ok, plan_mode: view.active }).await;
    }

    /// `replay` (`docs/protocol-1.10.md` §2.6) on its own task, holding the busy slot until it answered.
    fn replay(&self, id: RequestId) {
        let claim = match self.driver.claim() {
            Ok(claim) => claim,
            Err(_) => {
                let outbound = self.outbound.clone();
                tokio::spawn(async move { outbound.error(Some(&id), &busy()).await });
                return;
            }
        };
        self.driver.sink().flush_record();
        let outbound = self.outbound.clone();
        let path = self.wire_path.clone();
        tokio::spawn(async move {
            match replay(&path, &outbound, &claim.cancel).await {
                Ok(result) => outbound.respond(&id, &result).await,
                Err(e) => {
                    tracing::error!("replay failed: {e}");
                    outbound.error(Some(&id), &ErrorCode::InternalError.with_message("Replay failed")).await;
                }
            }
            // Busy until the answer is queued, so a turn cannot slip in before it.
            drop(claim);
        });
    }

    /// `fork` (`docs/protocol-1.10.md` §2.8): a new session of the same work dir with this one's
    /// history (`docs/sessions.md` §8); refused while a turn runs. This session goes on as it was.
    async fn fork(&self, id: RequestId, turn: Option<u64>) {
        match fork_session(&self.driver, turn).await {
            Ok(result) => self.outbound.respond(&id, &result).await,
            Err(error) => self.outbound.error(Some(&id), &error).await,
        }
    }

    async fn prompt(&self, id: RequestId, input: UserInput) {
        if self.driver.start(input, TurnTag::new(id.clone())).is_err() {
            self.outbound.error(Some(&id), &busy()).await;
        }
    }

    /// EOF or a signal: cancel the turn, let it answer, fail what is still pending.
    async fn shutdown(&self) {
        self.driver.shutdown(SHUTDOWN_GRACE).await;
        self.peer.fail_all();
    }
}

/// `initialize` applied to a session's agent (external tools, hook subscriptions, the client's
/// identity and capabilities) and its result; the caller refuses it while a turn runs. The web
/// server applies a client's `initialize` through this too, so both answer alike.
/// The `fork` extension (`docs/protocol-1.10.md` §2.8): the session up to now, or up to turn
/// `turn`, copied into a new session of the same work dir. Refused during a turn.
pub async fn fork_session(driver: &TurnDriver, turn: Option<u64>) -> Result<ForkResult, ErrorObject> {
    if driver.is_busy() {
        return Err(busy());
    }
    driver.sink().flush_record();
    let env = driver.agent().env.clone();
    let forked = tokio::task::spawn_blocking(move || {
        crate::session::fork::fork(&env.share_dir, &env.work_dir, &env.session_dir, turn)
    })
    .await;
    match forked {
        Ok(Ok(forked)) => Ok(ForkResult { session_id: forked.id, title: forked.title }),
        Ok(Err(ForkError::Io(e))) => {
            tracing::error!("fork failed: {e}");
            Err(ErrorCode::InternalError.with_message(format!("Fork failed: {e}")))
        }
        Ok(Err(e)) => Err(ErrorCode::InvalidParams.with_message(e.to_string())),
        Err(e) => Err(ErrorCode::InternalError.with_message(format!("Fork failed: {e}"))),
    }
}

/// The `undo` extension (`docs/protocol-1.10.md` §2.9): the session back to before a turn, with
/// kiwi's file edits restored. Refused during a turn (the busy error of `prompt`).
pub async fn undo_session(driver: &Arc<TurnDriver>, params: UndoParams) -> Result<UndoResult, ErrorObject> {
    let target = match (params.turn_index, params.turns) {
        (Some(k), _) => UndoTarget::From(k),
        (None, Some(n)) => UndoTarget::Last(n),
        (None, None) => UndoTarget::Last(1),
    };
    match driver.undo(target).await {
        Err(_) => Err(busy()),
        Ok(Ok(report)) => Ok(UndoResult {
            message: report.message(),
            turn_index: report.turn_index,
            turns_undone: report.turns_undone,
            restored: report.restored,
            deleted: report.deleted,
            not_restored: report
                .not_restored
                .into_iter()
                .map(|n| UndoSkippedFile { path: n.path, reason: n.reason })
                .collect(),
            state_restored: report.state_restored,
        }),
        Ok(Err(RewindError::Io(e))) => {
            tracing::error!("undo failed: {e}");
            Err(ErrorCode::InternalError.with_message(format!("Undo failed: {e}")))
        }
        Ok(Err(e)) => Err(ErrorCode::InvalidParams.with_message(e.to_string())),
    }
}

pub fn initialize_agent(driver: &TurnDriver, params: InitializeParams, version: &str) -> InitializeResult {
    let agent = driver.agent();
    let mut outcome = ExternalToolsOutcome::default();
    let tools = params.external_tools.unwrap_or_default();
    let mut accepted = Vec::new();
    let current = agent.toolset();
    for spec in &tools {
        let conflicts = current.get(&spec.name).is_some_and(|t| !t.is_external());
        if conflicts {
            outcome
                .rejected
                .push(RejectedTool { name: spec.name.clone(), reason: "conflicts with builtin tool".into() });
            continue;
        }
        match ExternalTool::new(&spec.name, &spec.description, spec.parameters.clone()) {
            Ok(tool) => {
                outcome.accepted.push(spec.name.clone());
                accepted.push(tool.into_tool());
            }
            Err(reason) => outcome.rejected.push(RejectedTool { name: spec.name.clone(), reason }),
        }
    }
    if !accepted.is_empty() {
        agent.update_toolset(|set| set.extend(accepted));
    }
    // Entries naming an event we do not know are skipped; the rest are added for good.
    let subscriptions = params
        .hooks
        .unwrap_or_default()
        .into_iter()
        .filter_map(|h| {
            let event = HookEvent::parse(&h.event)?;
            Some(Subscription { id: h.id, event, matcher: h.matcher, timeout: h.timeout })
        })
        .collect();
    agent.hooks.connect(subscriptions);
    if let Some(llm) = agent.llm() {
        llm.set_client(params.client.map(|c| ClientIdentity { name: c.name, version: c.version }));
    }
    agent.client.handshake(params.capabilities.map(|c| (c.supports_question, c.supports_plan_mode)));
    // Approvals are forwarded whether or not the client initialized (kiwi never drops them,
    // `docs/protocol-1.10.md` §12.1), so no pending approval is left to re-send here.
    let configured: Map<String, Value> =
        agent.hooks.configured().into_iter().map(|(e, n)| (e.as_str().to_string(), Value::from(n))).collect();
    let granted = params.extensions.as_deref().map(extensions::grant);
    let listed = granted.as_deref().unwrap_or_default();
    InitializeResult {
        protocol_version: PROTOCOL_VERSION.into(),
        server: ServerInfo { name: SERVER_NAME.into(), version: version.to_string() },
        slash_commands: agent
            .slash_commands
            .iter()
            .filter(|c| c.listed_for(listed))
            .map(|c| SlashCommandInfo {
                name: c.name.clone(),
                description: c.description.clone(),
                aliases: c.aliases.clone(),
            })
            .collect(),
        external_tools: (!tools.is_empty()).then_some(outcome),
        hooks: HooksInfo {
            supported_events: HookEvent::ALL.iter().map(|e| e.as_str().to_string()).collect(),
            configured,
        },
        capabilities: ServerCapabilities { supports_question: true },
        sandbox: sandbox_info(agent),
        cost: listed.contains(&extensions::COST).then(|| CostInfo {
            session_usd: agent.state.cost_usd().filter(|_| agent.prices().is_some()),
            max_budget_usd: agent.loop_control.max_budget_usd,
        }),
        extensions: granted.map(|g| g.iter().map(|e| e.to_string()).collect()),
    }
}

/// `initialize`'s `sandbox` member: absent when the sandbox is off.
fn sandbox_info(agent: &crate::soul::Agent) -> Option<super::params::SandboxInfo> {
    let sandbox = agent.env.sandbox.current();
    if !sandbox.is_on() {
        return None;
    }
    let added: Vec<std::path::PathBuf> = agent.state.additional_dirs().into_iter().map(Into::into).collect();
    let roots = sandbox.paths_for(&agent.env.work_dir, &added).writable_roots;
    let escalation = sandbox.settings().allow_escalation
        && !agent.state.yolo()
        && !agent.state.afk()
        && !agent.env.sandbox.nobody_to_ask();
    Some(super::params::SandboxInfo {
        mode: sandbox.mode().as_str().into(),
        network: sandbox.network_allowed(),
        writable_roots: roots.iter().map(|r| r.display().to_string()).collect(),
        escalation,
    })
}

/// -32000 `An agent turn is already in progress`.
pub fn busy() -> ErrorObject {
    WireError::InvalidState.with_message("An agent turn is already in progress")
}

/// -32000 `No agent turn is in progress`.
pub fn idle() -> ErrorObject {
    WireError::InvalidState.with_message("No agent turn is in progress")
}
