//! `Shell`: runs one command line with bash (`docs/tools.md` §3), through a [`CommandRunner`]: kiwi's
//! own processes ([`local::LocalRunner`], the built-in) or the ACP client's terminal (in `acp`).
//!
//! Invariants:
//! * everything the model sees is decided here, once, for every runner: the parameters, the
//!   description, the validation (in the built-in's order: timeout range, empty command, then the
//!   background description), the timeout bounds ([`MAX_TIMEOUT`], [`MAX_BACKGROUND_TIMEOUT`]),
//!   the approval request with its display block, and the wording of every result;
//! * a runner only runs: it gets the call's own timeout, kills everything the command started
//!   when that passes or when its future is dropped (turn cancelled), and reports the output and
//!   how the command ended;
//! * `run_in_background` makes the command a `bash` task of the session's background tasks with
//!   the work the runner prepares, so TaskList, TaskOutput, TaskStop and the end notification
//!   work alike whatever runs the command.

pub mod local;
pub mod sandboxed;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use super::background::Work;
use super::background::tools::root_only;
use super::output::OutputBuilder;
use super::{ToolCallContext, TypedTool, check_range, invalid_arguments};
use crate::protocol::{DisplayBlock, ToolReturnValue};

pub use local::{LocalRunner, SECRET_ENV_VARS, secret_env_names};
use sandboxed::{Confinement, Escalation};
pub use sandboxed::{
    ESCALATION_ACTION, ESCALATION_BACKGROUND_ACTION, EscalatingShell, into_tool, is_escalation_action,
};

/// The longest a command may run in the foreground, in seconds (`docs/tools.md` §3).
pub const MAX_TIMEOUT: i64 = 300;
/// The longest a background command may run, in seconds (`docs/protocol-1.10.md` §9.1).
pub const MAX_BACKGROUND_TIMEOUT: i64 = 86_400;

fn default_timeout() -> i64 {
    60
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ShellParams {
    /// The command line to execute.
    pub command: String,
    /// Seconds to wait for the command before it is killed (1 to 300; up to 86400 in the
    /// background).
    #[serde(default = "default_timeout")]
    #[schemars(range(min = 1, max = 86400))]
    pub timeout: i64,
    /// Start the command as a background task and return at once with its task id.
    #[serde(default)]
    pub run_in_background: bool,
    /// A short description of the command; required in the background.
    #[serde(default)]
    pub description: Option<String>,
}

/// How a command that ran ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code. The local runner reports death by signal `n` as `-n`.
    Code(i32),
    /// It was ended by this signal, as the client's terminal names it.
    Signal(String),
    /// Its timeout passed and the runner killed it.
    TimedOut,
}

/// What a command run to its end left.
#[derive(Debug)]
pub struct Ran {
    /// What it printed, under the Shell's output limits.
    pub output: OutputBuilder,
    pub exit: Exit,
    /// A sentence the runner adds to the result's message (the client cut the output).
    pub note: Option<String>,
}

/// What runs Shell commands: the seam between the Shell tool and where its processes live.
pub trait CommandRunner: Send + Sync {
    /// Runs `command` until it ends or `timeout` passes (then kills all it started). Dropping the
    /// future kills what still runs. `Err` is a readable reason the command could not be run.
    fn run<'a>(
        &'a self,
        command: &'a str,
        timeout: Duration,
        ctx: &'a ToolCallContext,
    ) -> BoxFuture<'a, Result<Ran, String>>;

    /// Prepares `command` as the work of a background task limited to `timeout_s` seconds (the
    /// approval was given). `Err` is a readable reason it cannot start.
    fn background<'a>(
        &'a self,
        command: &'a str,
        timeout_s: u64,
        ctx: &'a ToolCallContext,
    ) -> BoxFuture<'a, Result<Work, String>>;
}

/// The Shell tool with its runner.
pub struct Shell {
    /// The interpreter the description names.
    shell_path: PathBuf,
    runner: Arc<dyn CommandRunner>,
    /// Runs sandboxed commands: a confined command always runs as kiwi's own process (an ACP
    /// client's terminal could be neither confined nor verified, spec sandbox.md §2.5).
    local: Arc<LocalRunner>,
    /// What the description tells the model about the sandbox (none when it is off).
    sandbox_note: Option<String>,
}

impl Shell {
    /// The built-in: commands run as kiwi's own processes.
    pub fn new() -> Self {
        let local = Arc::new(LocalRunner::new());
        Self { shell_path: local.shell_path().to_path_buf(), runner: local.clone(), local, sandbox_note: None }
    }

    /// The same tool with its commands run by `runner`.
    pub fn with_runner(runner: Arc<dyn CommandRunner>) -> Self {
        Self { shell_path: local::default_shell(), runner, local: Arc::new(LocalRunner::new()), sandbox_note: None }
    }

    /// Tells the model, in the description, how its commands are confined.
    pub fn with_sandbox_note(mut self, note: Option<String>) -> Self {
        self.sandbox_note = note;
        self
    }

    fn shell_name(&self) -> String {
        self.shell_path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "sh".into())
    }
}

impl Default for Shell {
    fn default() -> Self {
        Self::new()
    }
}

impl TypedTool for Shell {
    type Params = ShellParams;
    const NAME: &'static str = "Shell";

    fn description(&self) -> String {
        let text = include_str!("desc/shell.md")
            .trim()
            .replace("{shell}", &format!("{} (`{}`)", self.shell_name(), self.shell_path.display()));
        match &self.sandbox_note {
            Some(note) => format!("{text}\n\n{note}"),
            None => text,
        }
    }

    fn run<'a>(&'a self, params: ShellParams, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        Box::pin(self.execute(params, Escalation::default(), ctx))
    }
}

impl Shell {
    async fn execute(&self, params: ShellParams, escalation: Escalation, ctx: &ToolCallContext) -> ToolReturnValue {
        let max = if params.run_in_background { MAX_BACKGROUND_TIMEOUT } else { MAX_TIMEOUT };
        if let Some(invalid) = check_range("timeout", params.timeout, 1..=max) {
            return invalid;
        }
        if params.command.is_empty() {
            return ToolReturnValue::error("Command cannot be empty.", "Empty command");
        }
        if let Some(invalid) = escalation.check() {
            return invalid;
        }
        let confinement = Confinement::of(ctx, &escalation);
        if params.run_in_background {
            return self.start_background(params, confinement, ctx).await;
        }
        let display = vec![DisplayBlock::Shell { language: "bash".into(), command: params.command.clone() }];
        match confinement.approval(&params.command, false) {
            Err(refused) => return refused,
            Ok(None) => {}
            Ok(Some((action, description))) => {
                if !ctx.approve("Shell", action, description, display).await {
                    return ToolReturnValue::rejected();
                }
            }
        }
        let timeout = params.timeout as u64;
        let ran = match &confinement.policy {
            Some(policy) => {
                match self.local.run_confined(&params.command, Duration::from_secs(timeout), ctx, policy).await {
                    Ok(ran) => ran,
                    Err(local::ConfinedError::Setup(reason)) => return confinement.spawn_failed(reason),
                    Err(local::ConfinedError::Other(e)) => {
                        return ToolReturnValue::crashed(format!("Error running tool: {e}"));
                    }
                }
            }
            None => match self.runner.run(&params.command, Duration::from_secs(timeout), ctx).await {
                Ok(ran) => ran,
                Err(e) => return ToolReturnValue::crashed(format!("Error running tool: {e}")),
            },
        };
        let mut note = ran.note.map(|n| format!(" {n}")).unwrap_or_default();
        if let Some(denial) = confinement.denial_note(&ran.exit, ran.output.text()) {
            note.push_str(&denial);
        }
        match ran.exit {
            Exit::Code(0) => ran.output.ok(format!("Command executed successfully.{note}")),
            Exit::Code(code) => ran.output.error(
                format!("Command failed with exit code: {code}.{note}"),
                format!("Failed with exit code: {code}"),
            ),
            Exit::Signal(signal) => ran
                .output
                .error(format!("Command terminated by signal: {signal}.{note}"), format!("Terminated by {signal}")),
            Exit::TimedOut => ran.output.error(
                format!("Command killed by timeout ({timeout}s){note}"),
                format!("Killed by timeout ({timeout}s)"),
            ),
        }
    }

    /// `run_in_background`: approval, then a `bash` task; returns at once (`docs/protocol-1.10.md` §9.1).
    async fn start_background(
        &self,
        params: ShellParams,
        confinement: Confinement,
        ctx: &ToolCallContext,
    ) -> ToolReturnValue {
        let description = params.description.as_deref().map(str::trim).unwrap_or_default().to_string();
        if description.is_empty() {
            return invalid_arguments(
                "Error validating JSON arguments: description is required when run_in_background is true".into(),
            );
        }
        let Some(tasks) = ctx.host.background() else { return root_only() };
        let display = vec![DisplayBlock::Shell { language: "bash".into(), command: params.command.clone() }];
        match confinement.approval(&params.command, true) {
            Err(refused) => return refused,
            Ok(None) => {}
            Ok(Some((action, what))) => {
                if !ctx.approve("Shell", action, what, display).await {
                    return ToolReturnValue::rejected();
                }
            }
        }
        // Checked before the runner prepares anything (a client terminal would be opened for nothing).
        if let Err(message) = tasks.check_room() {
            return ToolReturnValue::error(message, "Start failed");
        }
        let work = match &confinement.policy {
            Some(policy) => Ok(self.local.background_confined(
                &params.command,
                params.timeout as u64,
                ctx,
                policy,
                confinement.note(),
            )),
            None => self.runner.background(&params.command, params.timeout as u64, ctx).await,
        };
        let work = match work {
            Ok(work) => work,
            Err(e) => return ToolReturnValue::error(format!("Failed to start background task: {e}"), "Start failed"),
        };
        let info = match tasks.start(work, &description) {
            Ok(info) => info,
            Err(message) => {
                return match confinement.policy.as_ref().and(message.split_once("sandbox set-up: ")) {
                    Some((_, reason)) => confinement.spawn_failed(reason.to_string()),
                    None => ToolReturnValue::error(message, "Start failed"),
                };
            }
        };
        let output = [
            format!("task_id: {}", info.id),
            "kind: bash".into(),
            format!("status: {}", info.status.as_str()),
            format!("description: {description}"),
            format!("command: {}", params.command),
            "automatic_notification: true".into(),
            "next_step: You will be notified when the command finishes; carry on with other work meanwhile.".into(),
            format!(
                "output_hint: Use TaskOutput with task_id {} to see its output so far, TaskStop to stop it.",
                info.id
            ),
        ];
        ToolReturnValue::ok(output.join("\n"), "Background task started")
            .with_display(vec![DisplayBlock::brief(format!("Started {}", info.id)), info.block()])
    }
}
