//! The Claude dialect's run loop: user messages queue and run one turn at a time, control
//! requests are answered at once (also while a turn runs), and the end of input is not a cancel
//! (`docs/print-mode.md` B.2, C.1).
//!
//! Invariants: every started turn ends with exactly one `result` (the projection writes it;
//! the loop waits for it before starting the next turn or exiting); every control request gets
//! exactly one control response; at EOF the running turn and the messages already read run to
//! their end, and open `can_use_tool` questions are denied; a signal cancels the running turn
//! (its `result` says so) and ends the run; the exit status is 1 when the last `result` was an
//! error, else 0. Background subagents (`docs/print-mode.md`, "Background tasks"): one that ends
//! while no turn runs starts a follow-up turn; at EOF the run waits for those still running
//! (bounded), and every background task still running when the run ends is stopped and its
//! terminal frames written before kiwi exits.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde::Serialize;
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::args::PermissionMode;
use super::input::{Input, InputLines};
use super::lines::{
    AgentDefinitionIn, CommandInfo, ControlRequestIn, ControlResponse, ControlResponseLine, HookMatcherIn, HostRequest,
    InitializeResponse, ModelInfo, OutLine, ResultLine, ResultSubtype, StatusLine, SystemLine, UserLine,
};
use super::permission::Policy;
use super::projection::{ClaudeProjection, host_error, unsupported};
use super::sdk::Extras;
use super::turn::fresh_uuid;
use crate::agent_env::Model;
use crate::builder::AgentSetup;
use crate::live::SHUTDOWN_GRACE;
use crate::print::common::{OwnTurns, TurnWaiter, stderr_line};
use crate::protocol::UserInput;
use crate::rpc::writer::encode;
use crate::rpc::{Outbound, RequestId};
use crate::soul::TurnDriver;

/// A user message waiting for its turn.
struct Queued {
    input: UserInput,
    echo: Option<UserLine>,
}

/// Everything the loop drives.
pub struct RunLoop {
    pub out: Outbound,
    pub driver: Arc<TurnDriver>,
    pub projection: Arc<ClaudeProjection>,
    /// The projection as the session sees it: only this run's turns reach the output.
    pub turns: Arc<OwnTurns>,
    pub policy: Arc<Policy>,
    pub peer: Arc<crate::rpc::Peer>,
    pub session_id: String,
    /// What the session was built from; `set_model` builds the new model through it.
    pub setup: AgentSetup,
    /// A model chosen by `set_model`, installed when the next turn starts.
    pub next_model: std::sync::Mutex<Option<Model>>,
    pub replay: bool,
    pub streaming: bool,
    /// The SDK's servers, hooks and agents (`initialize`).
    pub extras: Arc<Extras>,
    /// Where each turn's uuids are recorded (`--resume-session-at`, `rewind_files`).
    pub ledger: Arc<super::ledger::Ledger>,
}

impl RunLoop {
    async fn write<T: Serialize>(&self, line: &T) {
        if let Some(frame) = encode(line) {
            self.out.send_raw(frame).await;
        }
    }

    async fn respond(&self, request_id: String, result: Result<Value, String>) {
        let response = match result {
            Ok(response) => ControlResponse::Success { request_id, response },
            Err(error) => ControlResponse::Error { request_id, error },
        };
        self.write(&OutLine::ControlResponse(ControlResponseLine { response })).await;
    }

    /// Serves until the input ends (and the queue is drained) or a signal arrives; returns the
    /// exit status.
    pub async fn serve(&self, first: Option<UserInput>, mut lines: Option<InputLines>, stop: CancellationToken) -> u8 {
        let mut queue: VecDeque<Queued> = first.map(|input| Queued { input, echo: None }).into_iter().collect();
        let mut running: Option<TurnWaiter> = None;
        let mut last_failed = false;
        let mut stopping = false;
        // `initialize` is served on a task of its own: the host's answers to kiwi's questions
        // (its MCP servers') come back through this loop.
        let mut init: Option<JoinHandle<()>> = None;
        // After the input ended: when the wait for background subagents gives up.
        let mut give_up: Option<tokio::time::Instant> = None;
        let mut stop_reason = "Stopped at exit";
        loop {
            // No turn of this run runs, but the session is not free: another client's turn (a
            // process attached through the socket), or the end of the last turn still on its way
            // to the clients. This run's next message waits for it (`TurnDriver::idle`).
            let busy_elsewhere = running.is_none() && !self.driver.is_free();
            if running.is_none() && !stopping && init.is_none() && !busy_elsewhere {
                let next = queue.pop_front().or_else(|| self.follow_up());
                if let Some(next) = next {
                    running = self.start(next);
                    if running.is_none() {
                        last_failed = true;
                    }
                    continue;
                }
                self.projection.release_idle().await;
                if lines.is_none() {
                    let open = self.projection.open_tasks(true);
                    if open.is_empty() {
                        break;
                    }
                    if give_up.is_none() {
                        let ceiling = self.background_ceiling();
                        stderr_line(&format!(
                            "kiwi: waiting for {} background agent(s) to finish (at most {} s)",
                            open.len(),
                            ceiling.as_secs()
                        ));
                        give_up = Some(tokio::time::Instant::now() + ceiling);
                    }
                }
            }
            if running.is_none() && stopping {
                break;
            }
            tokio::select! {
                () = self.projection.task_ended() => {}
                () = self.driver.idle(), if busy_elsewhere => {}
                () = sleep_until(give_up), if running.is_none() && lines.is_none() => {
                    stop_reason = "Stopped: the run ended before the task";
                    break;
                }
                line = recv(&mut lines) => match line {
                    Some(line) => {
                        if let Some(task) = self.take(line, &mut queue, &mut last_failed).await {
                            init = Some(task);
                        }
                    }
                    None => {
                        // End of input: not a cancel. Questions nobody can answer now are denied.
                        lines = None;
                        self.peer.fail_all();
                    }
                },
                _ = joined(&mut init) => init = None,
                report = wait(&mut running) => {
                    running = None;
                    last_failed = report.is_none_or(|r| r.failed);
                }
                () = stop.cancelled(), if !stopping => {
                    stopping = true;
                    if running.is_some() {
                        self.projection.set_cancel_reason("Interrupted by a signal");
                        self.driver.cancel();
                    }
                }
            }
        }
        // Every task the host saw start gets its terminal frame.
        self.projection.stop_tasks(stop_reason).await;
        self.driver.shutdown(SHUTDOWN_GRACE).await;
        self.peer.fail_all();
        u8::from(last_failed)
    }

    /// A follow-up turn for the main agent after a background subagent ended while no turn ran:
    /// its input is the tasks' notifications (what the next step would have delivered).
    fn follow_up(&self) -> Option<Queued> {
        if !self.projection.take_agent_ended() {
            return None;
        }
        let notices = self.driver.agent().background.take_notices();
        if notices.is_empty() {
            // A running turn took them already.
            return None;
        }
        let text = notices.into_iter().map(|n| n.model_text).collect::<Vec<_>>().join("\n\n");
        Some(Queued { input: UserInput::Text(text), echo: None })
    }

    /// How long, after the input ended, the run waits for background subagents:
    /// `CLAUDE_CODE_PRINT_BG_WAIT_CEILING_MS` when set, else the config's
    /// `background.print_wait_ceiling_s`.
    fn background_ceiling(&self) -> std::time::Duration {
        let from_env =
            std::env::var("CLAUDE_CODE_PRINT_BG_WAIT_CEILING_MS").ok().and_then(|v| v.trim().parse::<u64>().ok());
        match from_env {
            Some(ms) => std::time::Duration::from_millis(ms),
            None => std::time::Duration::from_secs(self.driver.agent().background.settings().print_wait_ceiling_s),
        }
    }

    fn start(&self, next: Queued) -> Option<TurnWaiter> {
        for warning in self.extras.add_flag_agents(self.driver.agent()) {
            stderr_line(&format!("kiwi: {warning}"));
        }
        let echo = next.echo.map(|e| self.stamped(e));
        self.ledger.set_next_prompt(echo.as_ref().map_or_else(fresh_uuid, |e| e.uuid.clone()));
        self.projection.set_replay(if self.replay { echo } else { None });
        self.projection.set_cancel_reason("Interrupted by user");
        if let Some(model) = self.next_model.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() {
            self.driver.agent().env.model.set(model);
        }
        match self.turns.try_start(&self.driver, next.input) {
            Ok(waiter) => Some(waiter),
            Err(_) => {
                tracing::error!("a turn started while another ran");
                None
            }
        }
    }

    fn stamped(&self, mut echo: UserLine) -> UserLine {
        echo.session_id = self.session_id.clone();
        if echo.uuid.is_empty() {
            echo.uuid = fresh_uuid();
        }
        echo
    }

    /// Takes one input line; an `initialize` being served comes back as its task.
    async fn take(&self, input: Input, queue: &mut VecDeque<Queued>, last_failed: &mut bool) -> Option<JoinHandle<()>> {
        match input {
            Input::User { input, echo } => queue.push_back(Queued { input, echo: Some(echo) }),
            Input::BadUser(why) => {
                // The host waits for a result for every user message: give it one.
                stderr_line(&format!("kiwi: {why}"));
                self.bad_user_result(&why).await;
                *last_failed = true;
            }
            Input::Control(request) => return self.control(request).await,
            other => take_other(&self.peer, other),
        }
        None
    }

    async fn bad_user_result(&self, why: &str) {
        let line = ResultLine {
            subtype: ResultSubtype::ErrorDuringExecution,
            is_error: true,
            duration_ms: 0,
            duration_api_ms: 0,
            num_turns: 0,
            result: None,
            stop_reason: None,
            session_id: self.session_id.clone(),
            total_cost_usd: 0.0,
            usage: Default::default(),
            model_usage: Default::default(),
            permission_denials: Vec::new(),
            uuid: fresh_uuid(),
            errors: Some(vec![why.to_string()]),
            api_error_status: None,
            structured_output: None,
        };
        if self.streaming {
            self.write(&OutLine::Result(line)).await;
        }
    }

    async fn control(&self, request: ControlRequestIn) -> Option<JoinHandle<()>> {
        let subtype = request.request.get("subtype").and_then(Value::as_str).unwrap_or("").to_string();
        let id = request.request_id;
        if let Some(result) = self.session_request(&subtype, &request.request).await {
            self.respond(id, result).await;
            return None;
        }
        let parsed = serde_json::from_value::<HostRequest>(request.request);
        let result = match parsed {
            Ok(HostRequest::Initialize { hooks, agents }) => return Some(self.initialize(id, hooks, agents)),
            Ok(HostRequest::Interrupt {}) => {
                // The answer goes out first; the turn's error result follows.
                self.respond(id, Ok(Value::Object(Default::default()))).await;
                self.projection.set_cancel_reason("Interrupted by user");
                self.driver.cancel();
                return None;
            }
            Ok(HostRequest::SetPermissionMode { mode }) => match PermissionMode::parse(&mode) {
                Some(mode) => {
                    self.policy.set_mode(mode);
                    self.respond(id, Ok(json!({"mode": mode.as_str()}))).await;
                    if self.streaming {
                        self.write(&mode_status(&self.policy, &self.session_id)).await;
                    }
                    return None;
                }
                None => {
                    tracing::info!("set_permission_mode: unknown mode {mode:?}");
                    Err("Cannot set permission mode: must be one of acceptEdits, auto, bypassPermissions, default, \
                         dontAsk, plan"
                        .into())
                }
            },
            Ok(HostRequest::SetModel { model }) => self.set_model(model.as_deref()),
            Ok(HostRequest::SetMaxThinkingTokens {}) => {
                tracing::debug!("set_max_thinking_tokens has no effect in kiwi");
                Ok(Value::Object(Default::default()))
            }
            Ok(HostRequest::GetContextUsage {}) => Ok(self.context_usage()),
            Ok(HostRequest::McpStatus {}) => Ok(self.mcp_status()),
            Ok(HostRequest::StopTask { task_id }) => self.stop_task(&task_id).await,
            Err(e)
                if ["initialize", "interrupt", "set_permission_mode", "set_model", "stop_task"]
                    .contains(&subtype.as_str()) =>
            {
                Err(format!("Invalid {subtype} request: {e}"))
            }
            Err(_) => Err(unsupported(&subtype)),
        };
        self.respond(id, result).await;
        None
    }

    /// The session APIs (`super::mcp_control`, `super::rewind_files`); `None` for other subtypes.
    async fn session_request(&self, subtype: &str, request: &Value) -> Option<Result<Value, String>> {
        let agent = self.driver.agent();
        let host_servers = || self.extras.servers.iter().map(|s| s.name.clone()).collect::<Vec<_>>();
        Some(match subtype {
            "mcp_toggle" => super::mcp_control::toggle(agent, &host_servers(), request).await,
            "mcp_reconnect" => super::mcp_control::reconnect(agent, &host_servers(), request).await,
            "rewind_files" => super::rewind_files::rewind_files(&self.driver, &self.ledger, request).await,
            _ => return None,
        })
    }

    /// `initialize`: the host's servers connected, hooks subscribed and agents added, then the
    /// answer (on a task: the servers' answers come back through the run loop).
    fn initialize(
        &self,
        id: String,
        hooks: Option<BTreeMap<String, Vec<HookMatcherIn>>>,
        agents: Option<BTreeMap<String, AgentDefinitionIn>>,
    ) -> JoinHandle<()> {
        let mut answer = self.initialize_response();
        let extras = self.extras.clone();
        let agent = self.driver.agent().clone();
        let out = self.out.clone();
        tokio::spawn(async move {
            let result = match extras.initialize(&agent, hooks, agents).await {
                Ok(warnings) => {
                    for warning in warnings {
                        stderr_line(&format!("kiwi: {warning}"));
                    }
                    answer.agents = extras.agent_names().into_iter().map(|name| json!({"name": name})).collect();
                    to_value(&answer)
                }
                Err(e) => Err(e),
            };
            respond_on(&out, id, result).await;
        })
    }

    /// `stop_task`: the background task is stopped; its terminal frames follow (from the task's
    /// watcher, as for any end).
    async fn stop_task(&self, task_id: &str) -> Result<Value, String> {
        let background = self.driver.agent().background.clone();
        match background.get(task_id) {
            None => Err(format!("No task found with ID: {task_id}")),
            Some(info) if info.status.is_terminal() => {
                Err(format!("Task {task_id} is not running (status: {})", info.status.as_str()))
            }
            Some(_) => {
                background.stop(task_id, "Stopped by the host").await;
                Ok(Value::Object(Default::default()))
            }
        }
    }

    /// `get_context_usage`: what the context holds as of the last model call.
    fn context_usage(&self) -> Value {
        let agent = self.driver.agent();
        let max = agent.max_context_size();
        let used = self.projection.context_tokens().min(max);
        let percentage = if max == 0 { 0.0 } else { (used as f64 * 10000.0 / max as f64).round() / 100.0 };
        json!({
            "categories": [
                {"name": "Messages", "tokens": used},
                {"name": "Free space", "tokens": max - used},
            ],
            "totalTokens": used,
            "maxTokens": max,
            "rawMaxTokens": max,
            "percentage": percentage,
            "model": agent.model_name(),
            "memoryFiles": [],
            "mcpTools": [],
            "agents": [],
        })
    }

    /// `mcp_status`: kiwi's MCP servers, then the host's own.
    fn mcp_status(&self) -> Value {
        let mut servers: Vec<Value> = Vec::new();
        if let Some(manager) = &self.driver.agent().mcp {
            for (server, init) in manager.snapshot().servers.iter().zip(super::mcp::init_servers(Some(manager))) {
                let mut entry = json!({
                    "name": server.name,
                    "status": init.status,
                    "tools": server.tools.iter().map(|t| json!({"name": t})).collect::<Vec<_>>(),
                });
                if init.status == "failed"
                    && let Some(error) = manager.error_of(&server.name)
                {
                    entry["error"] = Value::from(error);
                }
                servers.push(entry);
            }
        }
        servers.extend(self.extras.servers.iter().map(|s| s.status_value()));
        json!({"mcpServers": servers})
    }

    /// `set_model`: `null` or `"default"` is the session's starting choice; another key of the
    /// config's `models` applies from the next turn on (the running turn keeps its model).
    fn set_model(&self, model: Option<&str>) -> Result<Value, String> {
        let wanted = model.filter(|m| *m != "default");
        let model = self.setup.model_switch(self.driver.agent(), wanted, None)?;
        *self.next_model.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(model);
        Ok(json!({"model": model_choice(wanted)}))
    }

    fn initialize_response(&self) -> InitializeResponse {
        let agent = self.driver.agent();
        InitializeResponse {
            // Claude hosts cannot ask for kiwi's extensions: its own commands stay unlisted.
            commands: agent
                .slash_commands
                .iter()
                .filter(|c| c.listed_for(&[]))
                .map(|c| CommandInfo {
                    name: c.name.clone(),
                    description: c.description.clone(),
                    argument_hint: String::new(),
                })
                .collect(),
            agents: Vec::new(),
            output_style: "default".into(),
            available_output_styles: vec!["default".into()],
            models: agent
                .env
                .config
                .models
                .iter()
                .map(|(key, m)| ModelInfo {
                    value: key.clone(),
                    display_name: key.clone(),
                    description: m.model.clone(),
                })
                .collect(),
            account: Default::default(),
        }
    }
}

/// An input line that is neither a user message nor a control request: the host's answer to one
/// of kiwi's questions (routed to its asker), or a line to skip.
pub(super) fn take_other(peer: &crate::rpc::Peer, input: Input) {
    match input {
        Input::Answer(answer) => {
            let (id, outcome) = match answer {
                ControlResponse::Success { request_id, response } => (request_id, Ok(response)),
                ControlResponse::Error { request_id, error } => (request_id, Err(host_error(&error))),
            };
            if !peer.answered(&RequestId::Str(id.clone()), outcome) {
                tracing::info!("ignoring a control response to unknown request {id}");
            }
        }
        Input::Bad(why) => {
            tracing::warn!("{why}");
            stderr_line(&format!("kiwi: ignoring input: {why}"));
        }
        Input::Ignore | Input::User { .. } | Input::BadUser(_) | Input::Control(_) => {}
    }
}

/// The `system/status` line that follows a `set_permission_mode`: the mode now in force.
pub(super) fn mode_status(policy: &Policy, session_id: &str) -> OutLine {
    OutLine::System(SystemLine::Status(StatusLine {
        status: None,
        permission_mode: policy.reported_mode().as_str().into(),
        session_id: session_id.to_string(),
        uuid: fresh_uuid(),
    }))
}

/// What `set_model` answers: the model chosen, `null` for the session's default.
fn model_choice(wanted: Option<&str>) -> Value {
    wanted.map_or(Value::Null, Value::from)
}

pub(super) async fn respond_on(out: &Outbound, request_id: String, result: Result<Value, String>) {
    let response = match result {
        Ok(response) => ControlResponse::Success { request_id, response },
        Err(error) => ControlResponse::Error { request_id, error },
    };
    if let Some(frame) = encode(&OutLine::ControlResponse(ControlResponseLine { response })) {
        out.send_raw(frame).await;
    }
}

async fn joined(task: &mut Option<JoinHandle<()>>) {
    match task {
        Some(task) => {
            if let Err(e) = task.await {
                tracing::error!("serving initialize failed: {e}");
            }
        }
        None => std::future::pending().await,
    }
}

fn to_value<T: Serialize>(value: &T) -> Result<Value, String> {
    serde_json::to_value(value).map_err(|e| format!("cannot encode the answer: {e}"))
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn recv(lines: &mut Option<InputLines>) -> Option<Input> {
    match lines {
        Some(lines) => lines.recv().await,
        None => std::future::pending().await,
    }
}

async fn wait(running: &mut Option<TurnWaiter>) -> Option<crate::print::common::TurnReport> {
    match running {
        Some(waiter) => waiter.await.ok(),
        None => std::future::pending().await,
    }
}
