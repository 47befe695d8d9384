//! The Claude dialect's run loop: user messages queue and run one turn at a time, control
//! requests are answered at once (also while a turn runs), and the end of input is not a cancel
//! (`docs/print-mode.md` B.2, C.1).
//!
//! Invariants: every started turn ends with exactly one `result` (the projection writes it;
//! the loop waits for it before starting the next turn or exiting); every control request gets
//! exactly one control response; at EOF the running turn and the messages already read run to
//! their end, and open `can_use_tool` questions are denied; a signal cancels the running turn
//! (its `result` says so) and ends the run; the exit status is 1 when the last `result` was an
//! error, else 0.

use std::collections::VecDeque;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::args::PermissionMode;
use super::input::{Input, InputLines};
use super::lines::{
    CommandInfo, ControlRequestIn, ControlResponse, ControlResponseLine, HostRequest, InitializeResponse, ModelInfo,
    OutLine, ResultLine, ResultSubtype, UserLine,
};
use super::permission::Policy;
use super::projection::{ClaudeProjection, host_error, unsupported};
use super::turn::fresh_uuid;
use crate::agent_env::Model;
use crate::builder::AgentSetup;
use crate::live::SHUTDOWN_GRACE;
use crate::print::common::{TurnWaiter, stderr_line, turn_tag};
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
    pub policy: Arc<Policy>,
    pub peer: Arc<crate::rpc::Peer>,
    pub session_id: String,
    /// What the session was built from; `set_model` builds the new model through it.
    pub setup: AgentSetup,
    /// A model chosen by `set_model`, installed when the next turn starts.
    pub next_model: std::sync::Mutex<Option<Model>>,
    pub replay: bool,
    pub streaming: bool,
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
        loop {
            if running.is_none() && !stopping {
                if let Some(next) = queue.pop_front() {
                    running = self.start(next);
                    if running.is_none() {
                        last_failed = true;
                    }
                    continue;
                }
                if lines.is_none() {
                    break;
                }
            }
            if running.is_none() && stopping {
                break;
            }
            tokio::select! {
                line = recv(&mut lines) => match line {
                    Some(line) => self.take(line, &mut queue, &mut last_failed).await,
                    None => {
                        // End of input: not a cancel. Questions nobody can answer now are denied.
                        lines = None;
                        self.peer.fail_all();
                    }
                },
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
        self.driver.shutdown(SHUTDOWN_GRACE).await;
        self.peer.fail_all();
        u8::from(last_failed)
    }

    fn start(&self, next: Queued) -> Option<TurnWaiter> {
        self.projection.set_replay(if self.replay { next.echo.map(|e| self.stamped(e)) } else { None });
        self.projection.set_cancel_reason("Interrupted by user");
        if let Some(model) = self.next_model.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() {
            self.driver.agent().env.model.set(model);
        }
        let (tag, waiter) = turn_tag();
        match self.driver.start(next.input, tag) {
            Ok(()) => Some(waiter),
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

    async fn take(&self, input: Input, queue: &mut VecDeque<Queued>, last_failed: &mut bool) {
        match input {
            Input::User { input, echo } => queue.push_back(Queued { input, echo: Some(echo) }),
            Input::BadUser(why) => {
                // The host waits for a result for every user message: give it one.
                stderr_line(&format!("kiwi: {why}"));
                self.bad_user_result(&why).await;
                *last_failed = true;
            }
            Input::Control(request) => self.control(request).await,
            Input::Answer(answer) => {
                let (id, outcome) = match answer {
                    ControlResponse::Success { request_id, response } => (request_id, Ok(response)),
                    ControlResponse::Error { request_id, error } => (request_id, Err(host_error(&error))),
                };
                if !self.peer.answered(&RequestId::Str(id.clone()), outcome) {
                    tracing::info!("ignoring a control response to unknown request {id}");
                }
            }
            Input::Ignore => {}
            Input::Bad(why) => {
                tracing::warn!("{why}");
                stderr_line(&format!("kiwi: ignoring input: {why}"));
            }
        }
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
            total_cost_usd: 0,
            usage: Default::default(),
            model_usage: Default::default(),
            permission_denials: Vec::new(),
            uuid: fresh_uuid(),
            errors: Some(vec![why.to_string()]),
            api_error_status: None,
        };
        if self.streaming {
            self.write(&OutLine::Result(line)).await;
        }
    }

    async fn control(&self, request: ControlRequestIn) {
        let subtype = request.request.get("subtype").and_then(Value::as_str).unwrap_or("").to_string();
        let id = request.request_id;
        let parsed = serde_json::from_value::<HostRequest>(request.request);
        let result = match parsed {
            Ok(HostRequest::Initialize {}) => to_value(&self.initialize()),
            Ok(HostRequest::Interrupt {}) => {
                // The answer goes out first; the turn's error result follows.
                self.respond(id, Ok(Value::Object(Default::default()))).await;
                self.projection.set_cancel_reason("Interrupted by user");
                self.driver.cancel();
                return;
            }
            Ok(HostRequest::SetPermissionMode { mode }) => match PermissionMode::parse(&mode) {
                Some(mode) => {
                    self.policy.set_mode(mode);
                    Ok(Value::Object(Default::default()))
                }
                None => Err(format!("Unknown permission mode {mode:?}")),
            },
            Ok(HostRequest::SetModel { model }) => self.set_model(model.as_deref()),
            Ok(HostRequest::SetMaxThinkingTokens {}) => {
                tracing::debug!("set_max_thinking_tokens has no effect in kiwi");
                Ok(Value::Object(Default::default()))
            }
            Err(e) if ["initialize", "interrupt", "set_permission_mode", "set_model"].contains(&subtype.as_str()) => {
                Err(format!("Invalid {subtype} request: {e}"))
            }
            Err(_) => Err(unsupported(&subtype)),
        };
        self.respond(id, result).await;
    }

    /// `set_model`: `null` or `"default"` is the session's starting choice; another key of the
    /// config's `models` applies from the next turn on (the running turn keeps its model).
    fn set_model(&self, model: Option<&str>) -> Result<Value, String> {
        let wanted = model.filter(|m| *m != "default");
        let model = self.setup.model_switch(self.driver.agent(), wanted, None)?;
        *self.next_model.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(model);
        Ok(Value::Object(Default::default()))
    }

    fn initialize(&self) -> InitializeResponse {
        let agent = self.driver.agent();
        InitializeResponse {
            commands: agent
                .slash_commands
                .iter()
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

fn to_value<T: Serialize>(value: &T) -> Result<Value, String> {
    serde_json::to_value(value).map_err(|e| format!("cannot encode the answer: {e}"))
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
