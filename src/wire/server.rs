//! The one wire session handler: every transport that speaks wire 1.10 to a client (stdio, a
//! browser socket of `kiwi web`) routes each inbound message through here, never awaiting the
//! client or a turn. A [`Transport`] supplies only its few rules: which live session a request
//! acts on (a hosted one is started first), how a `prompt` starts (the web's in-flight rule and
//! busy wording, its uploads), who answers an idle `cancel`.
//!
//! Invariants: every request gets exactly one response; the turn's lifecycle belongs to the
//! soul's driver, and a `prompt`'s response is written by the projection after every event of its
//! turn; the `cancel` response precedes the cancelled `prompt`'s (or `replay`'s) response;
//! answers to our own requests are routed by their typed id through the client's `rpc::Peer`,
//! unknown ids dropped. The busy table of `docs/protocol-1.10.md` §2.1: a turn and a replay share
//! one busy slot (`prompt`, `initialize` and `replay` are refused while it is taken); `steer`
//! needs a running agent loop; `cancel` stops either; `set_plan_mode` always runs. Fork, undo and
//! replay are the live session's operations (`live::ops`); here they are only translated.

use std::future::Future;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

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
use crate::live::{History, LiveSession, OpError, SubscriberId};
use crate::llm::ClientIdentity;
use crate::protocol::{Event, HookEvent, StatusUpdate, UserInput};
use crate::rpc::message::classify;
use crate::rpc::reader::Inbound;
use crate::rpc::{ErrorCode, ErrorObject, Incoming, Outbound, Peer, RequestId};
use crate::session::rewind::UndoTarget;
use crate::soul::TurnTag;
use crate::soul::hooks::Subscription;
use crate::tools::external::ExternalTool;

/// What a transport decides for the handler.
pub trait Transport: Send + Sync {
    /// The live session a request acts on (a hosted session not running is started first);
    /// `Err` is the request's answer.
    fn session(&self) -> impl Future<Output = Result<Arc<LiveSession>, ErrorObject>> + Send;

    /// The live session, if one is open (an `interrupt` notification starts nothing).
    fn running(&self) -> Option<Arc<LiveSession>>;

    /// Starts the turn of `prompt` `id`; `Err` is its answer (busy).
    fn prompt(
        &self,
        live: Arc<LiveSession>,
        id: RequestId,
        input: UserInput,
    ) -> impl Future<Output = Result<(), ErrorObject>> + Send;

    /// A `cancel` while no prompt is in flight as the transport counts them: true when the
    /// transport answered it itself.
    fn idle_cancel(&self, _id: &RequestId) -> bool {
        false
    }

    /// A client's `initialize`, accepted and about to be applied.
    fn initializing(&self, _params: &InitializeParams) {}

    /// The history as it stood when this client attached from another process, which its
    /// `replay` returns; `None`: `replay` returns the whole record, holding the busy slot.
    fn seam(&self) -> Option<History> {
        None
    }

    /// The client is another kiwi process attached to this session (`wire::host`): its
    /// `initialize` is answered even while a turn runs, changes nothing of the session's agent,
    /// and rejects its external tools (a call could not be routed to it).
    fn attached(&self) -> bool {
        false
    }
}

/// A client of a session this process holds, with the wire's own rules: the stdio client (the
/// session's first subscriber), or another kiwi process attached through the session's socket
/// (`wire::host`), whose turns' answers go back to it and whose `initialize` leaves the session
/// as the host's client set it.
pub struct Local {
    pub live: Arc<LiveSession>,
    /// The attached process; `None` for the stdio client.
    pub attached: Option<Attached>,
}

/// A process attached through the session's socket: its `live::Fanout` subscriber and the
/// history up to its seam.
pub struct Attached {
    pub subscriber: SubscriberId,
    pub history: History,
}

impl Transport for Local {
    fn session(&self) -> impl Future<Output = Result<Arc<LiveSession>, ErrorObject>> + Send {
        std::future::ready(Ok(self.live.clone()))
    }

    fn running(&self) -> Option<Arc<LiveSession>> {
        Some(self.live.clone())
    }

    fn prompt(
        &self,
        live: Arc<LiveSession>,
        id: RequestId,
        input: UserInput,
    ) -> impl Future<Output = Result<(), ErrorObject>> + Send {
        let tag = TurnTag::new(id);
        let started = match &self.attached {
            Some(me) => live.start_turn_for(me.subscriber, input, tag),
            None => live.driver().start(input, tag),
        };
        std::future::ready(started.map_err(|_| busy()))
    }

    fn attached(&self) -> bool {
        self.attached.is_some()
    }

    fn seam(&self) -> Option<History> {
        self.attached.as_ref().map(|a| a.history.clone())
    }
}

/// One client's wire traffic on one session.
pub struct WireHandler<T> {
    transport: T,
    /// The client: our requests to it, its answers, our frames to it.
    peer: Arc<Peer>,
    outbound: Outbound,
    /// `server.version` in `initialize`.
    version: String,
    /// What the client's `initialize` was granted, read by the projection.
    granted: Arc<extensions::Granted>,
}

impl<T: Transport> WireHandler<T> {
    pub fn new(transport: T, peer: Arc<Peer>, version: String) -> Self {
        let outbound = peer.outbound().clone();
        Self { transport, peer, outbound, version, granted: Arc::default() }
    }

    /// Shares the client's grant with the projection that sends it kiwi-only events.
    pub fn with_grant(mut self, granted: Arc<extensions::Granted>) -> Self {
        self.granted = granted;
        self
    }

    pub fn transport(&self) -> &T {
        &self.transport
    }

    /// Handles lines until the inbound channel closes (EOF) or `stop` fires.
    pub async fn serve(&self, inbound: Inbound, stop: CancellationToken) {
        inbound.serve(&stop, |item| self.dispatch(item)).await;
    }

    /// One text frame (a transport that frames messages itself).
    pub async fn dispatch_text(&self, text: &str) {
        self.dispatch(classify(text.as_bytes())).await;
    }

    pub async fn dispatch(&self, item: Incoming) {
        match item {
            Incoming::Request { id, method, params } => match ClientRequest::parse(&method, params) {
                Ok(request) => self.handle(id, request).await,
                Err(e) => {
                    tracing::info!("refusing a `{method}` request: {}", e.message);
                    self.outbound.error(Some(&id), &e).await;
                }
            },
            Incoming::Notification { method, .. } => match ClientNotification::parse(&method) {
                Some(ClientNotification::Interrupt) => {
                    if let Some(live) = self.transport.running() {
                        live.driver().cancel();
                    }
                }
                None => tracing::debug!("ignoring `{method}` sent as a notification"),
            },
            Incoming::Response { id, outcome } => {
                if !self.peer.answered(&id, outcome) {
                    tracing::info!("ignoring a response to unknown or answered request {id}");
                }
            }
            Incoming::Reject { id, error } => {
                tracing::info!("malformed frame: {}", error.message);
                self.outbound.error(id.as_ref(), &error).await;
            }
            Incoming::Ignore => {}
        }
    }

    async fn handle(&self, id: RequestId, request: ClientRequest) {
        let live = match self.transport.session().await {
            Ok(live) => live,
            Err(error) => return self.outbound.error(Some(&id), &error).await,
        };
        let driver = live.driver();
        match request {
            ClientRequest::Initialize(params) => self.initialize(id, &live, params).await,
            ClientRequest::Prompt(params) => self.prompt(id, live, params.user_input).await,
            ClientRequest::Run(input) => self.prompt(id, live, input).await,
            ClientRequest::Steer(params) => match driver.steer(params.user_input) {
                Ok(()) => self.outbound.respond(&id, &SteerResult::Steered).await,
                Err(_) => self.outbound.error(Some(&id), &idle()).await,
            },
            ClientRequest::SetPlanMode(params) => self.set_plan_mode(id, &live, params.enabled).await,
            ClientRequest::Replay => self.replay(id, &live).await,
            ClientRequest::Cancel => {
                if self.transport.idle_cancel(&id) {
                    return;
                }
                match driver.cancel_handle() {
                    Some(token) => {
                        // The answer goes out before the cancelled prompt's.
                        self.outbound.respond(&id, &Empty {}).await;
                        token.cancel();
                    }
                    None => self.outbound.error(Some(&id), &idle()).await,
                }
            }
            ClientRequest::Fork(params) => match live.fork(params.turn_index).await {
                Ok(forked) => {
                    self.outbound.respond(&id, &ForkResult { session_id: forked.id, title: forked.title }).await
                }
                Err(error) => self.outbound.error(Some(&id), &op_error(error, "Fork")).await,
            },
            ClientRequest::Undo(params) => match live.undo(undo_target(&params)).await {
                Ok(report) => self.outbound.respond(&id, &undo_result(report)).await,
                Err(error) => self.outbound.error(Some(&id), &op_error(error, "Undo")).await,
            },
            ClientRequest::Interrupt => {
                let result = if driver.cancel() { InterruptResult::Ok } else { InterruptResult::Idle };
                self.outbound.respond(&id, &result).await;
            }
        }
    }

    async fn initialize(&self, id: RequestId, live: &LiveSession, params: InitializeParams) {
        if self.transport.attached() {
            let result = initialize_attached(live.driver(), params, &self.version);
            self.granted.set(result.extensions.as_deref());
            return self.outbound.respond(&id, &result).await;
        }
        if live.driver().is_busy() {
            self.outbound.error(Some(&id), &busy()).await;
            return;
        }
        self.transport.initializing(&params);
        let result = initialize_agent(live.driver(), params, &self.version);
        self.granted.set(result.extensions.as_deref());
        self.outbound.respond(&id, &result).await;
    }

    /// `set_plan_mode` (`docs/protocol-1.10.md` §2.5): allowed in every state; the status update goes
    /// out (and into `wire.jsonl`) before the answer.
    async fn set_plan_mode(&self, id: RequestId, live: &LiveSession, enabled: bool) {
        let driver = live.driver();
        let view = driver.agent().state.set_plan_mode(enabled);
        driver.sink().emit(Event::StatusUpdate(StatusUpdate::plan_mode(view.active))).await;
        self.outbound.respond(&id, &SetPlanModeResult { status: OkStatus::Ok, plan_mode: view.active }).await;
    }

    /// `replay` (`docs/protocol-1.10.md` §2.6), answered to this client only, on its own task,
    /// holding the busy slot until it answered. An attached process's `replay` is the history as
    /// it stood when it attached (what came later reached it live): it needs no busy slot and
    /// works while a turn runs (`docs/host.md`).
    async fn replay(&self, id: RequestId, live: &LiveSession) {
        let (claim, history) = match self.transport.seam() {
            Some(history) => (None, history),
            None => match live.claim_replay() {
                Ok((claim, path)) => (Some(claim), History::whole(path)),
                Err(error) => return self.outbound.error(Some(&id), &op_error(error, "Replay")).await,
            },
        };
        let cancel = claim.as_ref().map(|c| c.cancel.clone()).unwrap_or_default();
        let outbound = self.outbound.clone();
        tokio::spawn(tracing::Instrument::in_current_span(async move {
            match replay(history, &outbound, &cancel).await {
                Ok(result) => outbound.respond(&id, &result).await,
                Err(e) => {
                    tracing::error!("replay failed: {e}");
                    outbound.error(Some(&id), &ErrorCode::InternalError.with_message("Replay failed")).await;
                }
            }
            // Busy until the answer is queued, so a turn cannot slip in before it.
            drop(claim);
        }));
    }

    async fn prompt(&self, id: RequestId, live: Arc<LiveSession>, input: UserInput) {
        if let Err(error) = self.transport.prompt(live, id.clone(), input).await {
            self.outbound.error(Some(&id), &error).await;
        }
    }
}

/// A live session operation's refusal as the wire says it: busy as `prompt`'s busy error, a bad
/// request as invalid params, a failure as `<what> failed: <why>`.
fn op_error(error: OpError, what: &str) -> ErrorObject {
    match error {
        OpError::Busy => busy(),
        OpError::Invalid(message) => ErrorCode::InvalidParams.with_message(message),
        OpError::Failed(why) => ErrorCode::InternalError.with_message(format!("{what} failed: {why}")),
    }
}

/// The `undo` extension's target (`docs/protocol-1.10.md` §2.9): from a turn, or the last turns.
fn undo_target(params: &UndoParams) -> UndoTarget {
    match (params.turn_index, params.turns) {
        (Some(k), _) => UndoTarget::From(k),
        (None, Some(n)) => UndoTarget::Last(n),
        (None, None) => UndoTarget::Last(1),
    }
}

fn undo_result(report: crate::soul::undo::UndoReport) -> UndoResult {
    UndoResult {
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
    }
}

/// The reason an attached process's external tools are rejected (`docs/host.md`).
pub const HOSTED_ELSEWHERE: &str = "session is hosted by another process";

/// `initialize` of a client attached from another process: the session's agent is left as it
/// is (its tools, hooks, client identity and capabilities belong to the host's client); every
/// external tool is rejected with [`HOSTED_ELSEWHERE`].
fn initialize_attached(driver: &crate::soul::TurnDriver, params: InitializeParams, version: &str) -> InitializeResult {
    initialize_with(driver, params, version, true)
}

/// `initialize` applied to a session's agent (external tools, hook subscriptions, the client's
/// identity and capabilities) and its result; the caller refuses it while a turn runs. A
/// restarted web session gets its last `initialize` again through this.
pub fn initialize_agent(driver: &crate::soul::TurnDriver, params: InitializeParams, version: &str) -> InitializeResult {
    initialize_with(driver, params, version, false)
}

fn initialize_with(
    driver: &crate::soul::TurnDriver,
    params: InitializeParams,
    version: &str,
    attached: bool,
) -> InitializeResult {
    let agent = driver.agent();
    let mut outcome = ExternalToolsOutcome::default();
    let tools = params.external_tools.unwrap_or_default();
    let mut accepted = Vec::new();
    let current = agent.toolset();
    for spec in &tools {
        if attached {
            outcome.rejected.push(RejectedTool { name: spec.name.clone(), reason: HOSTED_ELSEWHERE.into() });
            continue;
        }
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
    if !attached {
        agent.hooks.connect(subscriptions(params.hooks));
        if let Some(llm) = agent.llm() {
            llm.set_client(params.client.map(|c| ClientIdentity { name: c.name, version: c.version }));
        }
        agent.client.handshake(params.capabilities.map(|c| (c.supports_question, c.supports_plan_mode)));
    }
    // Approvals are forwarded whether or not the client initialized (kiwi never drops them,
    // `docs/protocol-1.10.md` §12.1), so no pending approval is left to re-send here.
    let someone_to_ask = !agent.state.yolo() && !agent.state.afk() && !agent.env.sandbox.nobody_to_ask();
    let added: Vec<std::path::PathBuf> = agent.state.additional_dirs().into_iter().map(Into::into).collect();
    let view = AgentView {
        commands: &agent.slash_commands,
        configured: agent.hooks.configured(),
        sandbox: sandbox_view(&agent.env.sandbox.current(), &agent.env.work_dir, &added, someone_to_ask),
        cost: CostInfo {
            session_usd: agent.state.cost_usd().filter(|_| agent.prices().is_some()),
            max_budget_usd: agent.loop_control.max_budget_usd,
        },
    };
    initialize_result(view, version, (!tools.is_empty()).then_some(outcome), params.extensions.as_deref())
}

/// The hook subscriptions of an `initialize`; entries naming an event we do not know are
/// skipped.
pub fn subscriptions(hooks: Option<Vec<super::params::HookSubscriptionSpec>>) -> Vec<Subscription> {
    hooks
        .unwrap_or_default()
        .into_iter()
        .filter_map(|h| {
            let event = HookEvent::parse(&h.event)?;
            Some(Subscription { id: h.id, event, matcher: h.matcher, timeout: h.timeout })
        })
        .collect()
}

/// What an `initialize` answer says about the agent that serves the client: a session's own
/// agent, or the one a process attached to another's session runs with its own config
/// (`wire::attach`), so both answers have one shape.
pub struct AgentView<'a> {
    /// Built-in, `skill:` and `flow:` commands (kiwi-only ones are listed when granted).
    pub commands: &'a [crate::soul::slash::CommandInfo],
    /// Config hooks and the client's subscriptions, counted per event.
    pub configured: Vec<(HookEvent, usize)>,
    pub sandbox: Option<super::params::SandboxInfo>,
    /// Sent only to a client granted the `cost` extension.
    pub cost: CostInfo,
}

/// The `initialize` answer for `view`: kiwi-only members only for a client that asked for them.
pub fn initialize_result(
    view: AgentView<'_>,
    version: &str,
    external_tools: Option<ExternalToolsOutcome>,
    asked: Option<&[String]>,
) -> InitializeResult {
    let configured: Map<String, Value> =
        view.configured.into_iter().map(|(e, n)| (e.as_str().to_string(), Value::from(n))).collect();
    let granted = asked.map(extensions::grant);
    let listed = granted.as_deref().unwrap_or_default();
    InitializeResult {
        protocol_version: PROTOCOL_VERSION.into(),
        server: ServerInfo { name: SERVER_NAME.into(), version: version.to_string() },
        slash_commands: view
            .commands
            .iter()
            .filter(|c| c.listed_for(listed))
            .map(|c| SlashCommandInfo {
                name: c.name.clone(),
                description: c.description.clone(),
                aliases: c.aliases.clone(),
            })
            .collect(),
        external_tools,
        hooks: HooksInfo {
            supported_events: HookEvent::ALL.iter().map(|e| e.as_str().to_string()).collect(),
            configured,
        },
        capabilities: ServerCapabilities { supports_question: true },
        sandbox: view.sandbox,
        cost: listed.contains(&extensions::COST).then_some(view.cost),
        extensions: granted.map(|g| g.iter().map(|e| e.to_string()).collect()),
    }
}

/// `initialize`'s `sandbox` member: absent when the sandbox is off. Escalation is offered when
/// the sandbox allows it and somebody can be asked (no yolo, no afk, a mode with prompts).
pub fn sandbox_view(
    sandbox: &crate::sandbox::Sandbox,
    work_dir: &std::path::Path,
    added: &[std::path::PathBuf],
    someone_to_ask: bool,
) -> Option<super::params::SandboxInfo> {
    if !sandbox.is_on() {
        return None;
    }
    let roots = sandbox.paths_for(work_dir, added).writable_roots;
    Some(super::params::SandboxInfo {
        mode: sandbox.mode().as_str().into(),
        network: sandbox.network_allowed(),
        writable_roots: roots.iter().map(|r| r.display().to_string()).collect(),
        escalation: sandbox.settings().allow_escalation && someone_to_ask,
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
