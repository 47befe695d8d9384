//! The Claude dialect's projection: soul events become the lines of [`super::turn`], approvals
//! are decided by [`super::permission`] or asked over stdio as `can_use_tool`, and each turn's
//! outcome becomes its one `result` (or, for `text`/`json` output, its text or result object).
//!
//! Invariants: lines of one turn are written in event order; a question to the host never
//! blocks later events (its answer is awaited on its own task); a question whose turn was
//! cancelled is withdrawn with `control_cancel_request`; a deny is recorded before the call's
//! result can arrive, so its `tool_result` shows the deny message.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::Value;
use tokio::sync::oneshot;

use super::args::OutputFormat;
use super::lines::{
    CanUseTool, ControlCancelLine, ControlRequestLine, InitLine, McpServerStatus, OutLine, PermissionAnswer,
    PermissionDeniedLine, ResultSubtype, SessionState, SessionStateLine, SystemLine, UserLine,
};
use super::permission::{Decision, Policy, denied_by_host, host_gone};
use super::sdk::{Extras, HookVerdict};
use super::structured::StructuredSlot;
use super::turn::{BackgroundRef, Identity, TaskEnding, TurnLines, fresh_uuid};
use crate::print::common::{TurnReport, report_turn, stderr_line};
use crate::protocol::{ApprovalDecision, ApprovalRequest, Event, HookRequest, Request, ToolReturnValue};
use crate::rpc::Outbound;
use crate::rpc::peer::{IdTaken, Settled};
use crate::rpc::writer::encode;
use crate::rpc::{ErrorCode, Peer, RequestId};
use crate::soul::{Agent, ClientAnswer, Projection, TurnDriver, TurnResult, TurnTag};
use crate::tools::background::{TaskKind, TaskStatus};

/// The Claude Code release whose headless protocol this dialect follows (what `docs/print-mode.md`
/// describes was recorded from it).
pub const PROTOCOL_LEVEL: &str = "2.1.330";

/// What the projection writes, fixed at start-up.
pub struct Settings {
    pub format: OutputFormat,
    pub partial: bool,
    /// `system/session_state_changed` frames (the host asked for them).
    pub state_frames: bool,
    pub cwd: String,
    /// The `StructuredOutput` tool's accepted answer of the running turn (`--json-schema`).
    pub structured: Option<StructuredSlot>,
}

struct Inner {
    out: Outbound,
    settings: Settings,
    /// The session's agent in this process; `None` for a run attached to a session another
    /// process hosts (`super::attached`): its tools, servers, background tasks and cost are
    /// the host's, and `system/init` lists none of them.
    agent: Option<Arc<Agent>>,
    policy: Arc<Policy>,
    /// Asks the host (`can_use_tool`) and routes its `control_response`s.
    peer: Arc<Peer>,
    /// Set once the driver exists (a deny with `interrupt: true` cancels the turn).
    driver: OnceLock<Weak<TurnDriver>>,
    /// Cancels the running turn where there is no driver (an attached run: the host's turn).
    interrupt: OnceLock<Box<dyn Fn() + Send + Sync>>,
    turn: Mutex<TurnLines>,
    /// The user line to echo at the next turn's start (`--replay-user-messages`).
    replay: Mutex<Option<UserLine>>,
    /// The `errors` text of a cancelled turn (a control interrupt or a signal).
    cancel_reason: Mutex<String>,
    /// The SDK's servers, hooks and agents.
    extras: Arc<Extras>,
    /// The context's size as of the last model call (`get_context_usage`).
    context_tokens: AtomicU64,
    /// Hook callbacks asked and not yet answered: a turn's `result` waits for them (each is
    /// bounded by its timeout), so none is left open when the host ends the run.
    hooks_in_flight: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// One per background task announced: writes its terminal frames when it ends.
    task_waiters: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// Signalled when a background task's terminal frames are out.
    task_ended: tokio::sync::Notify,
    /// A background subagent ended since the run loop last looked (the main agent may owe it a
    /// follow-up turn).
    agent_ended: AtomicBool,
    /// A turn ended with a background subagent still running: `idle` is owed once none is.
    idle_withheld: AtomicBool,
    /// Where each turn's uuids are recorded (a session with a folder).
    ledger: OnceLock<Arc<super::ledger::Ledger>>,
}

pub struct ClaudeProjection {
    inner: Arc<Inner>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl ClaudeProjection {
    pub fn new(
        out: Outbound,
        settings: Settings,
        agent: Option<Arc<Agent>>,
        identity: Identity,
        policy: Arc<Policy>,
        peer: Arc<Peer>,
        extras: Arc<Extras>,
    ) -> Self {
        let partial = settings.partial;
        if let Some(agent) = &agent {
            policy.attach(agent);
        }
        Self {
            inner: Arc::new(Inner {
                out,
                settings,
                agent,
                policy,
                peer,
                driver: OnceLock::new(),
                interrupt: OnceLock::new(),
                turn: Mutex::new(TurnLines::new(identity, partial)),
                replay: Mutex::new(None),
                cancel_reason: Mutex::new("Interrupted by user".into()),
                extras,
                context_tokens: AtomicU64::new(0),
                hooks_in_flight: Mutex::default(),
                task_waiters: Mutex::default(),
                task_ended: tokio::sync::Notify::new(),
                agent_ended: AtomicBool::new(false),
                idle_withheld: AtomicBool::new(false),
                ledger: OnceLock::new(),
            }),
        }
    }

    /// What shows background subagent runs' events (`Subagents::show_background`).
    pub fn background_view(&self) -> Arc<dyn Projection> {
        Arc::new(BackgroundView { inner: Arc::downgrade(&self.inner) })
    }

    /// The background tasks announced and still running; `agents_only`: subagents only.
    pub fn open_tasks(&self, agents_only: bool) -> Vec<String> {
        lock(&self.inner.turn).open_background(agents_only)
    }

    /// Completes when a background task's terminal frames were written (at once if one was
    /// since the last wait).
    pub async fn task_ended(&self) {
        self.inner.task_ended.notified().await;
    }

    /// Whether a background subagent ended since the last call.
    pub fn take_agent_ended(&self) -> bool {
        self.inner.agent_ended.swap(false, Ordering::SeqCst)
    }

    /// Writes the `idle` a turn held back, once no background subagent runs.
    pub async fn release_idle(&self) {
        if self.open_tasks(true).is_empty() && self.inner.idle_withheld.swap(false, Ordering::SeqCst) {
            self.inner.state(SessionState::Idle).await;
        }
    }

    /// Stops every background task still running (`reason`), and waits until each one's
    /// terminal frames are out.
    pub async fn stop_tasks(&self, reason: &str) {
        let Some(agent) = &self.inner.agent else { return };
        let background = agent.background.clone();
        for task_id in self.open_tasks(false) {
            background.stop(&task_id, reason).await;
        }
        let waiters = std::mem::take(&mut *lock(&self.inner.task_waiters));
        for waiter in waiters {
            let _ = waiter.await;
        }
        self.release_idle().await;
    }

    /// Records each turn's uuids from now on.
    pub fn set_ledger(&self, ledger: Arc<super::ledger::Ledger>) {
        let _ = self.inner.ledger.set(ledger);
    }

    pub fn set_driver(&self, driver: &Arc<TurnDriver>) {
        let _ = self.inner.driver.set(Arc::downgrade(driver));
    }

    /// How a deny with `interrupt: true` cancels the turn of a run without a driver.
    pub fn set_interrupt(&self, interrupt: impl Fn() + Send + Sync + 'static) {
        let _ = self.inner.interrupt.set(Box::new(interrupt));
    }

    /// The line echoed when the next turn starts.
    pub fn set_replay(&self, line: Option<UserLine>) {
        *lock(&self.inner.replay) = line;
    }

    /// The context's size in tokens as of the last model call of the main agent.
    pub fn context_tokens(&self) -> u64 {
        self.inner.context_tokens.load(Ordering::Relaxed)
    }

    /// Why the next cancelled turn was cancelled (its `errors` entry).
    pub fn set_cancel_reason(&self, reason: &str) {
        *lock(&self.inner.cancel_reason) = reason.to_string();
    }
}

impl Inner {
    /// Watches the background tasks just announced: each one's end writes its terminal frames.
    fn watch(self: &Arc<Self>, started: Vec<(String, String)>) {
        let Some(agent) = &self.agent else { return };
        for (_, task_id) in started {
            let background = agent.background.clone();
            let me = self.clone();
            let waiter = tokio::spawn(async move {
                let info = loop {
                    match background.wait(&task_id, Duration::from_secs(3600)).await {
                        Some(info) if !info.status.is_terminal() => continue,
                        found => break found,
                    }
                };
                let agent = info.as_ref().is_some_and(|i| i.kind == TaskKind::Agent);
                let (updated, notified) = match info.as_ref().map(|i| i.status) {
                    Some(TaskStatus::Completed) => ("completed", "completed"),
                    Some(TaskStatus::Failed) => ("failed", "failed"),
                    _ => ("killed", "stopped"),
                };
                let output_file = info.map(|i| i.output_path.to_string_lossy().into_owned()).unwrap_or_default();
                let mut lines = Vec::new();
                lock(&me.turn).end_background(&task_id, &TaskEnding { updated, notified, output_file }, &mut lines);
                me.write_all(lines).await;
                if agent {
                    me.agent_ended.store(true, Ordering::SeqCst);
                }
                me.task_ended.notify_one();
            });
            let mut waiters = lock(&self.task_waiters);
            waiters.retain(|w| !w.is_finished());
            waiters.push(waiter);
        }
    }

    /// An event of a background subagent run, wrapped (`SubagentEvent`).
    async fn background_event(self: &Arc<Self>, event: &Event) {
        let Event::SubagentEvent(inner) = event else { return };
        let Some(agent_id) = inner.agent_id.as_deref() else { return };
        let Some(agent) = &self.agent else { return };
        // The newest task of that instance (an instance may be resumed in a later task).
        let task =
            agent.background.list(false, usize::MAX).into_iter().find(|t| t.agent_id.as_deref() == Some(agent_id));
        let Some(task) = task else {
            tracing::warn!("no background task runs the subagent {agent_id}; its line is dropped");
            return;
        };
        let ended = task.status.is_terminal();
        let task = BackgroundRef { task_id: task.id, description: task.description };
        let mut lines = Vec::new();
        let started = {
            let mut turn = lock(&self.turn);
            // What a run's fire-and-forget hooks report after its end has no line.
            if ended && !turn.open_background(false).contains(&task.task_id) {
                return;
            }
            turn.background_subagent(inner, task, &mut lines);
            turn.take_started_background()
        };
        self.write_all(lines).await;
        self.watch(started);
    }

    fn streaming(&self) -> bool {
        self.settings.format == OutputFormat::StreamJson
    }

    async fn write(&self, line: &OutLine) {
        if let Some(frame) = encode(line) {
            self.out.send_raw(frame).await;
        }
    }

    async fn write_all(&self, lines: Vec<OutLine>) {
        self.note(&lines);
        if self.streaming() {
            for line in &lines {
                self.write(line).await;
            }
        }
    }

    /// The running turn's lines, for its uuid record.
    fn note(&self, lines: &[OutLine]) {
        if let Some(ledger) = self.ledger.get() {
            ledger.note(lines);
        }
    }

    async fn state(&self, state: SessionState) {
        if self.settings.state_frames && self.streaming() {
            let session_id = lock(&self.turn).identity().session_id.clone();
            self.write(&OutLine::System(SystemLine::SessionStateChanged(SessionStateLine {
                state,
                sdk_host_only: true,
                session_id,
                uuid: fresh_uuid(),
            })))
            .await;
        }
    }

    /// `system/init`'s servers: kiwi's MCP client's, then the host's own.
    fn mcp_servers(&self) -> Vec<McpServerStatus> {
        let mut servers = super::mcp::init_servers(self.agent.as_ref().and_then(|a| a.mcp.as_deref()));
        servers.extend(self.extras.servers.iter().map(|s| s.init_status()));
        servers
    }

    /// Every subagent type the `Agent` tool offers.
    fn agent_names(&self) -> Vec<String> {
        let mut names: Vec<String> = match &self.agent {
            Some(agent) if agent.toolset().get("Agent").is_some() => {
                agent.subagents.defs().unwrap_or_default().iter().map(|d| d.name.clone()).collect()
            }
            _ => Vec::new(),
        };
        for name in self.extras.agent_names() {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        names
    }

    fn init_line(&self) -> OutLine {
        let identity = lock(&self.turn).identity().clone();
        OutLine::System(SystemLine::Init(Box::new(InitLine {
            cwd: self.settings.cwd.clone(),
            session_id: identity.session_id,
            tools: self.agent.as_ref().map(|a| a.toolset().names().map(str::to_string).collect()).unwrap_or_default(),
            mcp_servers: self.mcp_servers(),
            model: identity.model,
            permission_mode: self.policy.reported_mode().as_str().into(),
            // Claude hosts cannot ask for kiwi's extensions: its own commands stay unlisted.
            slash_commands: self
                .agent
                .iter()
                .flat_map(|a| a.slash_commands.iter())
                .filter(|c| c.listed_for(&[]))
                .map(|c| c.name.clone())
                .collect(),
            api_key_source: "none".into(),
            claude_code_version: Some(PROTOCOL_LEVEL.into()),
            output_style: "default".into(),
            agents: self.agent_names(),
            skills: self.agent.iter().flat_map(|a| a.skills.iter()).map(|s| s.name.clone()).collect(),
            plugins: Vec::new(),
            uuid: fresh_uuid(),
        })))
    }

    async fn approval(self: &Arc<Self>, request: ApprovalRequest) -> oneshot::Receiver<ClientAnswer> {
        let (reply, answer) = oneshot::channel();
        let mut lines = Vec::new();
        lock(&self.turn).flush(&mut lines);
        self.write_all(lines).await;
        let tool = request.sender.clone();
        let decision = if self.extras.take_hook_allowance(&request.tool_call_id, &tool, request.arguments.as_ref()) {
            Decision::Approve
        } else {
            self.policy.decide(&request)
        };
        match decision {
            Decision::Approve => {
                let _ =
                    reply.send(ClientAnswer::Approval { decision: ApprovalDecision::Approve, feedback: String::new() });
            }
            Decision::Deny(message) => {
                lock(&self.turn).deny(&tool, &request.tool_call_id, &message);
                let _ = reply.send(ClientAnswer::Denial(message));
            }
            Decision::DeniedByMode(message) => {
                lock(&self.turn).deny(&tool, &request.tool_call_id, &message);
                if self.streaming() {
                    let session_id = lock(&self.turn).identity().session_id.clone();
                    self.write(&OutLine::System(SystemLine::PermissionDenied(PermissionDeniedLine {
                        tool_name: tool.clone(),
                        tool_use_id: request.tool_call_id.clone(),
                        decision_reason_type: "mode".into(),
                        message: message.clone(),
                        session_id,
                        uuid: fresh_uuid(),
                    })))
                    .await;
                }
                let _ = reply.send(ClientAnswer::Denial(message));
            }
            Decision::Ask => self.ask(request, reply).await,
        }
        answer
    }

    /// Sends `can_use_tool` and answers the soul when the host does.
    async fn ask(self: &Arc<Self>, request: ApprovalRequest, reply: oneshot::Sender<ClientAnswer>) {
        let request_id = format!("perm-{}", uuid::Uuid::new_v4());
        // The asking call's own arguments (ids can repeat; a subagent's calls are not in the turn).
        let input = request.arguments.clone().unwrap_or_else(|| Value::Object(Default::default()));
        let line = OutLine::ControlRequest(ControlRequestLine {
            request_id: request_id.clone(),
            request: CanUseTool {
                subtype: "can_use_tool".into(),
                tool_name: request.sender.clone(),
                input: input.clone(),
                tool_use_id: request.tool_call_id.clone(),
                permission_suggestions: Vec::new(),
                description: if crate::tools::shell::is_escalation_action(&request.action) {
                    "Run command outside the sandbox".into()
                } else {
                    request.description.clone()
                },
                agent_id: request.agent_id.clone(),
            },
        });
        let tool = request.sender.clone();
        // The answer is settled only after `requires_action` is out, so `running` follows it.
        let (shown, on_show) = oneshot::channel::<()>();
        let me = self.clone();
        let id = RequestId::Str(request_id.clone());
        let settle = move |settled| async move {
            let _ = on_show.await;
            me.settle(settled, request, request_id, input).await
        };
        // The soul hears the answer first; a deny with `interrupt` then cancels the turn.
        let (settled, heard) = oneshot::channel::<(ClientAnswer, bool)>();
        match self.peer.ask(id, encode(&line), settled, settle).await {
            Ok(()) => {
                self.state(SessionState::RequiresAction).await;
                let _ = shown.send(());
                tokio::spawn(self.clone().hand_on(heard, reply));
            }
            Err(IdTaken(_)) => {
                let _ = reply.send(ClientAnswer::Denial(host_gone(&tool)));
            }
        }
    }

    /// Hands the settled answer to the soul, then interrupts the turn if the host asked to; a
    /// soul that stops waiting lets the peer know (the question is withdrawn).
    async fn hand_on(
        self: Arc<Self>,
        heard: oneshot::Receiver<(ClientAnswer, bool)>,
        mut reply: oneshot::Sender<ClientAnswer>,
    ) {
        let settled = tokio::select! {
            settled = heard => settled,
            () = reply.closed() => return,
        };
        let Ok((answer, interrupt)) = settled else { return };
        let _ = reply.send(answer);
        if interrupt {
            if let Some(driver) = self.driver.get().and_then(Weak::upgrade) {
                driver.cancel();
            } else if let Some(interrupt) = self.interrupt.get() {
                interrupt();
            }
        }
    }

    /// What the soul hears of a `can_use_tool` question.
    async fn settle(
        self: Arc<Self>,
        settled: Settled,
        request: ApprovalRequest,
        request_id: String,
        input: Value,
    ) -> Option<(ClientAnswer, bool)> {
        let raw = match settled {
            Settled::Answer(raw) => Some(raw),
            Settled::Unsent => Settled::Unsent.answer(),
            Settled::PeerGone => None,
            // The turn was cancelled first: withdraw the question.
            Settled::AskerGone => {
                self.write(&OutLine::ControlCancelRequest(ControlCancelLine { request_id })).await;
                self.state(SessionState::Running).await;
                return None;
            }
        };
        let tool = &request.sender;
        let (answer, interrupt) = match raw {
            None => (ClientAnswer::Denial(host_gone(tool)), false),
            Some(Err(error)) => (
                ClientAnswer::Denial(format!(
                    "Permission to use {tool} was denied: the host answered with an error: {}",
                    error.message
                )),
                false,
            ),
            Some(Ok(value)) => match serde_json::from_value::<PermissionAnswer>(value) {
                Ok(PermissionAnswer::Allow { updated_input, updated_permissions }) => {
                    let decision = if updated_permissions.is_some_and(|p| !p.is_empty()) {
                        ApprovalDecision::ApproveForSession
                    } else {
                        ApprovalDecision::Approve
                    };
                    match updated_input.filter(|u| *u != input) {
                        Some(edited) => (ClientAnswer::ApprovalWithArguments(decision, edited.to_string()), false),
                        None => (ClientAnswer::Approval { decision, feedback: String::new() }, false),
                    }
                }
                Ok(PermissionAnswer::Deny { message, interrupt }) => {
                    (ClientAnswer::Denial(denied_by_host(tool, &message)), interrupt)
                }
                Err(e) => (
                    ClientAnswer::Denial(format!(
                        "Permission to use {tool} was denied: the host's answer was not understood ({e})."
                    )),
                    false,
                ),
            },
        };
        if let ClientAnswer::Denial(message) = &answer {
            lock(&self.turn).deny(tool, &request.tool_call_id, message);
        }
        self.state(SessionState::Running).await;
        Some((answer, interrupt))
    }
}

impl Inner {
    /// The session's `context.jsonl` (hook callbacks' `transcript_path`).
    fn transcript(&self) -> String {
        self.agent
            .as_ref()
            .map(|a| a.env.session_dir.join("context.jsonl").to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// A hook point the host subscribed to: its callback is asked on a task of its own.
    fn hook(self: Arc<Self>, request: HookRequest) -> oneshot::Receiver<ClientAnswer> {
        let (reply, answer) = oneshot::channel();
        let me = self.clone();
        let task = tokio::spawn(async move {
            let this = me;
            let mode = this.policy.reported_mode().as_str();
            let transcript = this.transcript();
            let mut reply = reply;
            // A hook point that stops waiting (out of time, or its turn was cancelled) withdraws
            // the question.
            let verdict = this.extras.hook_callback(&request, mode, &transcript, reply.closed()).await;
            if reply.is_closed() {
                return;
            }
            let tool_call_id = request.input_data.get("tool_call_id").and_then(Value::as_str).unwrap_or_default();
            match &verdict {
                HookVerdict::AllowCall => {
                    this.extras.allow_call(tool_call_id, &request.target, request.input_data.get("tool_input"))
                }
                HookVerdict::Block(reason) if request.event == "PreToolUse" => {
                    lock(&this.turn).deny(&request.target, tool_call_id, reason);
                }
                _ => {}
            }
            let (action, reason) = verdict.action();
            let _ = reply.send(ClientAnswer::Hook { action, reason });
        });
        let mut in_flight = lock(&self.hooks_in_flight);
        in_flight.retain(|t| !t.is_finished());
        in_flight.push(task);
        answer
    }

    /// Waits for the hook callbacks still being asked (fire-and-forget points such as
    /// `PostToolUse`).
    async fn settle_hooks(&self) {
        let tasks = std::mem::take(&mut *lock(&self.hooks_in_flight));
        for task in tasks {
            let _ = task.await;
        }
    }
}

impl Projection for ClaudeProjection {
    fn event<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let inner = &self.inner;
            if let Event::TurnBegin { user_input } = event {
                {
                    // The model may have been switched (`set_model`) since the last turn.
                    let mut turn = lock(&inner.turn);
                    if let Some(agent) = &inner.agent {
                        turn.set_model(agent.model_name(), agent.max_context_size());
                    }
                    turn.begin(&user_input.text_input());
                }
                if let Some(ledger) = inner.ledger.get() {
                    ledger.begin(&user_input.text_input());
                }
                if inner.streaming() {
                    inner.write(&inner.init_line()).await;
                }
                inner.state(SessionState::Running).await;
                let replay = lock(&inner.replay).take();
                if let Some(line) = replay {
                    inner.write_all(vec![OutLine::User(line)]).await;
                }
                return;
            }
            if let Event::ToolResult(result) = event {
                // A hook's `allow` is for that one call (issue 30 item 6).
                inner.extras.call_ended(&result.tool_call_id);
            }
            if let Event::StatusUpdate(status) = event
                && let Some(tokens) = status.context_tokens
            {
                inner.context_tokens.store(tokens, Ordering::Relaxed);
            }
            let mut lines = Vec::new();
            let started = {
                let mut turn = lock(&inner.turn);
                turn.event(event, &mut lines);
                turn.take_started_background()
            };
            inner.write_all(lines).await;
            inner.watch(started);
        })
    }

    // The receiver is the answer, awaited by the soul later; the future is only the asking.
    #[allow(clippy::async_yields_async)]
    fn request(&self, request: Request) -> BoxFuture<'_, oneshot::Receiver<ClientAnswer>> {
        Box::pin(async move {
            match request {
                Request::ApprovalRequest(request) => self.inner.approval(request).await,
                Request::ToolCallRequest(call) => {
                    let (reply, answer) = oneshot::channel();
                    let _ = reply.send(ClientAnswer::ToolResult(ToolReturnValue::error(
                        format!("The tool `{}` belongs to a client, and print mode has none.", call.name),
                        "No client",
                    )));
                    answer
                }
                Request::HookRequest(hook) if self.inner.agent.is_some() => self.inner.clone().hook(hook),
                // An attached run subscribed to no hook point of the host's session: not its to answer.
                Request::HookRequest(_) => oneshot::channel().1,
                // No one to ask a question: the closed answer channel is "client gone"
                // (questions dismissed).
                Request::QuestionRequest(_) => oneshot::channel().1,
            }
        })
    }

    fn turn_ended(&self, tag: TurnTag, result: TurnResult) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let inner = &self.inner;
            inner.settle_hooks().await;
            let reason = lock(&inner.cancel_reason).clone();
            let mut lines = Vec::new();
            let mut line = lock(&inner.turn).finish(&result, &reason, &mut lines);
            // The session's running cost (every agent, earlier runs of a resumed session too).
            // An attached run does not know what the host's model calls cost: 0.
            line.total_cost_usd = inner.agent.as_ref().and_then(|a| a.state.cost_usd()).unwrap_or(0.0);
            if let Some(answer) = inner.settings.structured.as_ref().and_then(|slot| lock(slot).take())
                && line.subtype == ResultSubtype::Success
                && !line.is_error
            {
                line.result = Some(answer.to_string());
                line.stop_reason = Some("tool_use".into());
                line.structured_output = Some(answer);
            }
            let failed = line.is_error;
            // The turn's uuid record is written before its result goes out, so a client that
            // read the result finds it (`--resume-session-at`, `rewind_files`).
            inner.note(&lines);
            if let Some(ledger) = inner.ledger.get() {
                ledger.end(&line.uuid);
            }
            match inner.settings.format {
                OutputFormat::StreamJson => {
                    lines.push(OutLine::Result(line));
                    if inner.streaming() {
                        for line in &lines {
                            inner.write(line).await;
                        }
                    }
                }
                OutputFormat::Json => inner.write(&OutLine::Result(line)).await,
                OutputFormat::Text => {
                    if failed {
                        let text = line.errors.map(|e| e.join("; ")).or(line.result).unwrap_or_default();
                        stderr_line(&text);
                    } else {
                        let mut text = line.result.unwrap_or_default();
                        text.push('\n');
                        inner.out.send_raw(text.into_bytes()).await;
                    }
                }
            }
            // A background subagent still running will wake the main agent: the session is not
            // idle until it ended (the SDK keeps its input open meanwhile).
            if lock(&inner.turn).open_background(true).is_empty() {
                inner.state(SessionState::Idle).await;
            } else {
                inner.idle_withheld.store(true, Ordering::SeqCst);
            }
            report_turn(tag, TurnReport { failed, exit_code: u8::from(failed) });
        })
    }

    /// Another client's turn ended: its turns count in the session's numbering of the ledger.
    fn turn_observed<'a>(&'a self, _result: &'a TurnResult) -> BoxFuture<'a, ()> {
        if let Some(ledger) = self.inner.ledger.get() {
            ledger.resync();
        }
        Box::pin(async {})
    }
}

/// The session's view of its background subagent runs: their wrapped events become lines (with
/// the `Agent` call's id) at once, whatever turn runs.
struct BackgroundView {
    inner: Weak<Inner>,
}

impl Projection for BackgroundView {
    fn event<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Some(inner) = self.inner.upgrade() {
                inner.background_event(event).await;
            }
        })
    }

    // Questions of a background run go to the session's own projection, never here.
    #[allow(clippy::async_yields_async)]
    fn request(&self, _request: Request) -> BoxFuture<'_, oneshot::Receiver<ClientAnswer>> {
        Box::pin(async { oneshot::channel().1 })
    }

    fn turn_ended(&self, _tag: TurnTag, _result: TurnResult) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// An error response for a control request kiwi does not serve.
pub fn unsupported(subtype: &str) -> String {
    format!("Unsupported control request subtype: {subtype}")
}

/// An `ErrorObject` for a host's error `control_response` (the pending map's error type).
pub fn host_error(text: &str) -> crate::rpc::ErrorObject {
    ErrorCode::InternalError.with_message(text)
}
