//! The Claude dialect on a session another kiwi process hosts (`docs/print-mode.md`, "One
//! session, many clients"; `docs/host.md` §2): `--resume ID` (or `-c`) on a session whose lock
//! another process holds runs each prompt as one turn of the hosted session through
//! `wire::remote`, projected by the dialect's own projection as for a session of its own.
//!
//! Choices: `system/init` names the hosted session's id and lists no tools, servers, commands,
//! agents or skills, with an empty `model` (they are the host's, and the host does not say);
//! `total_cost_usd` is 0 (the host's model calls are priced there). Approvals of this run's
//! turns are decided as always in this dialect (`super::permission`, `can_use_tool` when the run
//! has `--permission-prompt-tool stdio`); a prompt while another client's turn runs gets the
//! dialect's error result (`An agent turn is already in progress: …`), and the run goes on with
//! its next message. Control requests that need the session's agent in this process
//! (`set_model`, `mcp_*`, `rewind_files`, `stop_task`, context usage) are refused with an error
//! response naming the reason. Nothing is written to the session folder (no message ledger:
//! `--resume-session-at` does not know this run's messages).
//!
//! Invariants: one turn at a time, each user message ends with exactly one `result`; only this
//! run's turns reach its output (`OwnTurns`, strict); at the end of input open `can_use_tool`
//! questions are denied and the turns already queued run; a signal cancels the running turn
//! and ends the run; when the host goes away the run ends after the turn in flight (which
//! ends cancelled).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::args::{ClaudeArgs, InputFormat, OutputFormat, PermissionMode};
use super::control::HostAsk;
use super::input::{Input, InputLines, spawn_reader};
use super::lines::{HostRequest, InitializeResponse, OutLine, UserLine};
use super::permission::Policy;
use super::projection::{ClaudeProjection, Settings};
use super::sdk::Extras;
use super::start::fail_early;
use super::turn::{Identity, fresh_uuid};
use crate::print::common::{OwnTurns, stderr_line, turn_tag};
use crate::protocol::UserInput;
use crate::rpc::reader::DEFAULT_MAX_LINE_BYTES;
use crate::rpc::writer::encode;
use crate::rpc::{Outbound, Peer};
use crate::session::store::SessionChoice;
use crate::soul::TurnResult;
use crate::wire::attach::{held_elsewhere, wait_for_lock};
use crate::wire::remote::{Remote, RemoteError};

/// The session `choice` names when the run resumes it (`--resume`, `-c`; a fork is made from
/// disk and never attaches) and another process holds it: its id and folder.
pub fn hosted_session(
    args: &ClaudeArgs,
    share: &Path,
    work_dir: &Path,
    choice: &SessionChoice,
) -> Option<(String, PathBuf)> {
    if args.fork_session || (args.resume.is_none() && !args.continue_) {
        return None;
    }
    held_elsewhere(share, work_dir, choice)
}

/// What the run's options change that an attached run cannot apply (the session's agent is the
/// host's); each named on stderr.
fn not_applied(args: &ClaudeArgs) -> Vec<&'static str> {
    let mut names = Vec::new();
    let mut name = |set: bool, option: &'static str| {
        if set {
            names.push(option);
        }
    };
    name(args.model.is_some(), "--model");
    name(args.tools.is_some(), "--tools");
    name(args.system_prompt.as_ref().is_some_and(|p| !p.trim().is_empty()), "--system-prompt");
    name(args.system_prompt_file.is_some(), "--system-prompt-file");
    name(args.append_system_prompt.is_some(), "--append-system-prompt");
    name(!args.mcp_config.is_empty(), "--mcp-config");
    name(args.json_schema.is_some(), "--json-schema");
    name(args.agents.is_some(), "--agents");
    name(args.max_turns.is_some(), "--max-turns");
    name(args.max_budget_usd.is_some(), "--max-budget-usd");
    names
}

/// A user message waiting for its turn.
struct Queued {
    input: UserInput,
    echo: Option<UserLine>,
}

/// The run's end: the exit status, or `None` when the host could not be reached (the caller
/// then opens the session itself if its lock came free, or fails as before).
pub async fn run(
    args: &ClaudeArgs,
    (id, dir): (String, PathBuf),
    work_dir: &Path,
    out: Outbound,
    first: Option<UserInput>,
    stop: CancellationToken,
) -> Option<u8> {
    let streaming = args.output_format == OutputFormat::StreamJson;
    let policy = Arc::new(Policy::of(args));
    policy.attach_hosted(work_dir.to_path_buf());
    let peer = Peer::new(out.clone(), "perm");
    let extras = Arc::new(Extras::new(HostAsk::new(peer.clone(), out.clone()), Vec::new()));
    let identity = Identity { session_id: id.clone(), model: String::new(), context_window: 0 };
    let settings = Settings {
        format: args.output_format,
        partial: args.include_partial_messages,
        state_frames: false,
        cwd: work_dir.display().to_string(),
        structured: None,
    };
    let projection =
        Arc::new(ClaudeProjection::new(out.clone(), settings, None, identity, policy.clone(), peer.clone(), extras));
    let turns = OwnTurns::new(projection.clone(), true);
    let (remote, history) = match Remote::attach(&dir, turns.clone()).await {
        Ok(attached) => attached,
        Err(e) => {
            let freed = tokio::task::spawn_blocking(move || wait_for_lock(&dir)).await.unwrap_or(false);
            if !freed {
                tracing::warn!("cannot attach to session {id}: {e}");
                stderr_line(&format!("Cannot attach to session {id}: {e}"));
            }
            return None;
        }
    };
    // A resumed Claude run shows no history: the live stream flows at once.
    drop(history);
    tracing::info!("attached to session {id}, hosted by another process");
    for option in not_applied(args) {
        stderr_line(&format!("kiwi: ignoring {option}: session {id} is hosted by another process, with its own"));
    }
    let canceller = remote.clone();
    projection.set_interrupt(move || {
        let remote = canceller.clone();
        tokio::spawn(async move { remote.cancel().await });
    });
    let lines =
        (args.input_format == InputFormat::StreamJson).then(|| spawn_reader(std::io::stdin(), DEFAULT_MAX_LINE_BYTES));
    let run = Attached { args, out, remote, turns, projection, policy, peer, session_id: id, streaming };
    Some(run.serve(first, lines, stop).await)
}

struct Attached<'a> {
    args: &'a ClaudeArgs,
    out: Outbound,
    remote: Remote,
    turns: Arc<OwnTurns>,
    projection: Arc<ClaudeProjection>,
    policy: Arc<Policy>,
    peer: Arc<Peer>,
    session_id: String,
    streaming: bool,
}

type Prompted = JoinHandle<Result<TurnResult, RemoteError>>;

impl Attached<'_> {
    async fn serve(&self, first: Option<UserInput>, mut lines: Option<InputLines>, stop: CancellationToken) -> u8 {
        let mut queue: VecDeque<Queued> = first.map(|input| Queued { input, echo: None }).into_iter().collect();
        let mut running: Option<Prompted> = None;
        let mut last_failed = false;
        let mut stopping = false;
        loop {
            if running.is_none() {
                if stopping || self.remote.is_closed() {
                    break;
                }
                if let Some(next) = queue.pop_front() {
                    running = Some(self.start(next));
                    continue;
                }
                if lines.is_none() {
                    break;
                }
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
                ended = wait(&mut running) => {
                    running = None;
                    last_failed = self.ended(ended).await;
                }
                () = stop.cancelled(), if !stopping => {
                    stopping = true;
                    if running.is_some() {
                        self.projection.set_cancel_reason("Interrupted by a signal");
                        let _ = self.remote.cancel().await;
                    }
                }
                () = self.remote.closed(), if running.is_none() && !self.remote.is_closed() => {}
            }
        }
        if self.remote.is_closed() && !stopping {
            stderr_line(&format!("kiwi: the host of session {} went away", self.session_id));
        }
        self.peer.fail_all();
        u8::from(last_failed)
    }

    /// Sends the next message to the host as a prompt; its answer comes back on the task.
    fn start(&self, next: Queued) -> Prompted {
        let echo = next.echo.map(|mut echo| {
            echo.session_id = self.session_id.clone();
            if echo.uuid.is_empty() {
                echo.uuid = fresh_uuid();
            }
            echo
        });
        self.projection.set_replay(if self.args.replay_user_messages { echo } else { None });
        self.projection.set_cancel_reason("Interrupted by user");
        self.turns.expect(&next.input);
        let remote = self.remote.clone();
        tokio::spawn(async move { remote.prompt(next.input).await })
    }

    /// A prompt answered: the turn's result line, or the error result of a prompt the host
    /// did not run. Whether it failed.
    async fn ended(&self, ended: Result<TurnResult, RemoteError>) -> bool {
        match ended {
            Ok(result) => {
                let (tag, waiter) = turn_tag();
                crate::soul::Projection::turn_ended(&*self.turns, tag, result).await;
                waiter.await.map_or(true, |report| report.failed)
            }
            Err(e) => {
                self.turns.not_started();
                self.projection.set_replay(None);
                let why = match e {
                    RemoteError::Busy => format!("{e}: another client's turn runs on session {}", self.session_id),
                    RemoteError::Gone => format!("Session {}: {e}", self.session_id),
                    RemoteError::Rpc { .. } => format!("Session {} refused the prompt: {e}", self.session_id),
                };
                fail_early(&self.out, self.args, &self.session_id, &why).await;
                true
            }
        }
    }

    async fn take(&self, input: Input, queue: &mut VecDeque<Queued>, last_failed: &mut bool) {
        match input {
            Input::User { input, echo } => queue.push_back(Queued { input, echo: Some(echo) }),
            Input::BadUser(why) => {
                // The host waits for a result for every user message: give it one.
                if self.streaming {
                    fail_early(&self.out, self.args, &self.session_id, &format!("kiwi: {why}")).await;
                } else {
                    stderr_line(&format!("kiwi: {why}"));
                }
                *last_failed = true;
            }
            Input::Control(request) => {
                let subtype = request.request.get("subtype").and_then(Value::as_str).unwrap_or("").to_string();
                let result = self.control(&subtype, request.request).await;
                let mode_set = subtype == "set_permission_mode" && result.is_ok();
                super::run::respond_on(&self.out, request.request_id, result).await;
                if mode_set && self.streaming {
                    self.write(&super::run::mode_status(&self.policy, &self.session_id)).await;
                }
            }
            other => super::run::take_other(&self.peer, other),
        }
    }

    /// The control requests an attached run serves; the others need the session's agent.
    async fn control(&self, subtype: &str, request: Value) -> Result<Value, String> {
        match serde_json::from_value::<HostRequest>(request) {
            Ok(HostRequest::Initialize { hooks, agents }) => {
                if hooks.is_some_and(|h| !h.is_empty()) || agents.is_some_and(|a| !a.is_empty()) {
                    stderr_line(&format!(
                        "kiwi: ignoring initialize's hooks and agents: session {} is hosted by another process",
                        self.session_id
                    ));
                }
                let answer = InitializeResponse {
                    commands: Vec::new(),
                    agents: Vec::new(),
                    output_style: "default".into(),
                    available_output_styles: vec!["default".into()],
                    models: Vec::new(),
                    account: Default::default(),
                };
                serde_json::to_value(answer).map_err(|e| format!("cannot encode the answer: {e}"))
            }
            Ok(HostRequest::Interrupt {}) => {
                self.projection.set_cancel_reason("Interrupted by user");
                match self.remote.cancel().await {
                    Ok(()) => Ok(json!({})),
                    Err(e) => Err(format!("Cannot interrupt: {e}")),
                }
            }
            Ok(HostRequest::SetPermissionMode { mode }) => match PermissionMode::parse(&mode) {
                Some(mode) => {
                    self.policy.set_mode(mode);
                    Ok(json!({"mode": mode.as_str()}))
                }
                None => Err("Cannot set permission mode: must be one of acceptEdits, auto, bypassPermissions, \
                             default, dontAsk, plan"
                    .into()),
            },
            _ => Err(format!(
                "Unsupported control request subtype: {subtype} (session {} is hosted by another process)",
                self.session_id
            )),
        }
    }

    async fn write(&self, line: &OutLine) {
        if let Some(frame) = encode(line) {
            self.out.send_raw(frame).await;
        }
    }
}

async fn recv(lines: &mut Option<InputLines>) -> Option<Input> {
    match lines {
        Some(lines) => lines.recv().await,
        None => std::future::pending().await,
    }
}

async fn wait(running: &mut Option<Prompted>) -> Result<TurnResult, RemoteError> {
    match running {
        Some(task) => task.await.unwrap_or(Err(RemoteError::Gone)),
        None => std::future::pending().await,
    }
}
