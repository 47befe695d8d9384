//! `Shell` through the client's terminal (`docs/acp.md` §12.5, §5.5), used when the client offers
//! `terminal`: the built-in Shell tool (its name, description, parameters, validation, timeout
//! bounds, approval and result wording all come from `tools::shell`) with a [`CommandRunner`]
//! that runs each command in a terminal the client creates and shows inside the tool call.
//!
//! Invariants:
//! * every terminal kiwi creates is released exactly once, however its call or task ends:
//!   dropping a [`ClientTerminal`] sends `terminal/release`, which also kills what still runs
//!   (a cancelled turn drops the call's future);
//! * a terminal is embedded in its tool call (an `in_progress` update) as soon as it exists, and
//!   the call is marked so that its final `tool_call_update` carries no content: the embedded
//!   terminal stays what the user sees;
//! * the time limit is the call's own `timeout` within the Shell's bounds; when it passes the
//!   command is ended with `terminal/kill` and its output read afterwards;
//! * `run_in_background` runs the command in a client terminal too: the terminal is created and
//!   embedded during the call, then a `bash` background task owns it: it copies the terminal's
//!   output into the task's `output.log` every [`SNAPSHOT_EVERY`] and at the end (so TaskOutput
//!   and the end notification read it like a local task's), ends it with `terminal/kill` on
//!   TaskStop or at its timeout, and releases it. `background.keep_alive_on_exit` cannot keep
//!   such a command: its terminal belongs to the client, which ends it with the connection;
//! * kill and output requests are bounded by [`CLIENT_BOUND`], so a client that stops answering
//!   cannot keep a call or a task from ending.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    CreateTerminalRequest, CreateTerminalResponse, KillTerminalRequest, KillTerminalResponse, ReleaseTerminalRequest,
    SessionUpdate, Terminal, TerminalExitStatus, TerminalId, TerminalOutputRequest, TerminalOutputResponse,
    ToolCallContent, ToolCallStatus, ToolCallUpdate, ToolCallUpdateFields, WaitForTerminalExitRequest,
    WaitForTerminalExitResponse,
};
use futures::future::BoxFuture;

use super::client_calls::ClientCalls;
use super::client_profile::Updates;
use super::mapping::EventMapper;
use crate::tools::ToolCallContext;
use crate::tools::background::{ExternalRun, ExternalTask, TaskEnd, TaskStatus, Work};
use crate::tools::output::OutputBuilder;
use crate::tools::shell::{CommandRunner, Exit, Ran};

/// The tail of the output the client keeps.
const OUTPUT_BYTE_LIMIT: u64 = 50_000;
/// How often a background command's output is copied into its task's `output.log`.
const SNAPSHOT_EVERY: Duration = Duration::from_secs(2);
/// The longest kiwi waits for the client to answer a kill or an output request.
const CLIENT_BOUND: Duration = Duration::from_secs(10);
/// Added to the result's message when the client cut the output (`docs/acp.md` §12.5).
const TRUNCATED_NOTE: &str = "Output was truncated by the client output limit.";

/// Runs Shell commands in the client's terminals.
pub struct TerminalRunner {
    session_id: String,
    calls: ClientCalls,
    updates: Updates,
    mapper: Arc<Mutex<EventMapper>>,
}

impl TerminalRunner {
    pub fn new(session_id: String, calls: ClientCalls, updates: Updates, mapper: Arc<Mutex<EventMapper>>) -> Self {
        Self { session_id, calls, updates, mapper }
    }

    /// Creates the terminal running `command` and shows it in the tool call.
    async fn open(&self, command: &str, ctx: &ToolCallContext) -> Result<ClientTerminal, String> {
        let create = CreateTerminalRequest::new(self.session_id.clone(), command.to_string())
            .cwd(ctx.env.work_dir.clone())
            .output_byte_limit(OUTPUT_BYTE_LIMIT);
        let created: CreateTerminalResponse = self.calls.call("terminal/create", &create).await?;
        let terminal =
            ClientTerminal { calls: self.calls.clone(), session_id: self.session_id.clone(), id: created.terminal_id };
        let acp_id = {
            let mut mapper = self.mapper.lock().unwrap_or_else(|p| p.into_inner());
            mapper.mark_terminal(&ctx.tool_call_id);
            mapper.acp_call_id(&ctx.tool_call_id)
        };
        let fields = ToolCallUpdateFields::new()
            .status(ToolCallStatus::InProgress)
            .content(vec![ToolCallContent::Terminal(Terminal::new(terminal.id.clone()))]);
        self.updates.send(&self.session_id, SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(acp_id, fields))).await;
        Ok(terminal)
    }
}

impl CommandRunner for TerminalRunner {
    fn run<'a>(
        &'a self,
        command: &'a str,
        timeout: Duration,
        ctx: &'a ToolCallContext,
    ) -> BoxFuture<'a, Result<Ran, String>> {
        Box::pin(async move {
            let terminal = self.open(command, ctx).await?;
            let exit = match tokio::time::timeout(timeout, terminal.wait()).await {
                Ok(status) => exit_of(&status?),
                Err(_) => {
                    terminal.kill().await;
                    Exit::TimedOut
                }
            };
            let shown = terminal.output().await?;
            // The client keeps a tail in bytes; the Shell's own limits (lines, characters) apply too.
            let mut output = OutputBuilder::new();
            output.write(&shown.output);
            Ok(Ran { output, exit, note: shown.truncated.then(|| TRUNCATED_NOTE.to_string()) })
        })
    }

    fn background<'a>(
        &'a self,
        command: &'a str,
        timeout_s: u64,
        ctx: &'a ToolCallContext,
    ) -> BoxFuture<'a, Result<Work, String>> {
        Box::pin(async move {
            let terminal = self.open(command, ctx).await?;
            let run: ExternalRun = Box::new(move |task| Box::pin(watch(terminal, task, timeout_s)));
            Ok(Work::External { command: command.to_string(), run })
        })
    }
}

/// How a command the client's terminal reports ended. A status with neither a code nor a signal
/// counts as success (as the reference reads it).
fn exit_of(status: &TerminalExitStatus) -> Exit {
    match (&status.signal, status.exit_code) {
        (Some(signal), _) => Exit::Signal(signal.clone()),
        (None, code) => Exit::Code(code.map_or(0, |c| i32::try_from(c).unwrap_or(i32::MAX))),
    }
}

/// A background command's life in its terminal, until it ends, is stopped or times out.
async fn watch(terminal: ClientTerminal, task: ExternalTask, timeout_s: u64) -> TaskEnd {
    let ExternalTask { output_path, mut stop } = task;
    let wait = terminal.wait();
    tokio::pin!(wait);
    let deadline = tokio::time::sleep(Duration::from_secs(timeout_s));
    tokio::pin!(deadline);
    let mut snapshots = tokio::time::interval(SNAPSHOT_EVERY);
    snapshots.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut written: Option<String> = None;
    let killed = |reason: String, timed_out: bool| TaskEnd {
        status: TaskStatus::Killed,
        exit_code: None,
        reason: Some(reason),
        timed_out,
    };
    let end = loop {
        tokio::select! {
            // In this order, so the wait is asked for before the first snapshot.
            biased;
            waited = &mut wait => break match waited {
                Ok(status) => task_end(&status),
                Err(reason) => TaskEnd { status: TaskStatus::Lost, exit_code: None, reason: Some(reason), timed_out: false },
            },
            () = &mut deadline => {
                terminal.kill().await;
                break killed(format!("Timed out after {timeout_s}s"), true);
            }
            reason = &mut stop => {
                terminal.kill().await;
                break killed(reason.unwrap_or_else(|_| "Stopped".into()), false);
            }
            _ = snapshots.tick() => snapshot(&terminal, &output_path, &mut written).await,
        }
    };
    snapshot(&terminal, &output_path, &mut written).await;
    end
}

/// A background task's end as the terminal reports it (worded like a local task's).
fn task_end(status: &TerminalExitStatus) -> TaskEnd {
    match exit_of(status) {
        Exit::Code(0) => TaskEnd { status: TaskStatus::Completed, exit_code: Some(0), reason: None, timed_out: false },
        Exit::Code(code) => TaskEnd {
            status: TaskStatus::Failed,
            exit_code: Some(code),
            reason: Some(format!("Exited with code {code}")),
            timed_out: false,
        },
        Exit::Signal(signal) => TaskEnd {
            status: TaskStatus::Failed,
            exit_code: None,
            reason: Some(format!("Terminated by signal {signal}")),
            timed_out: false,
        },
        Exit::TimedOut => TaskEnd { status: TaskStatus::Killed, exit_code: None, reason: None, timed_out: true },
    }
}

/// Copies what the terminal shows into `path` when it changed.
async fn snapshot(terminal: &ClientTerminal, path: &Path, written: &mut Option<String>) {
    let shown = match terminal.output().await {
        Ok(shown) => shown.output,
        Err(e) => {
            tracing::debug!("cannot read a background terminal's output: {e}");
            return;
        }
    };
    if written.as_ref() == Some(&shown) {
        return;
    }
    if let Err(e) = std::fs::write(path, &shown) {
        tracing::warn!("cannot write {}: {e}", path.display());
    }
    *written = Some(shown);
}

/// One terminal of the client, released when dropped.
struct ClientTerminal {
    calls: ClientCalls,
    session_id: String,
    id: TerminalId,
}

impl ClientTerminal {
    async fn wait(&self) -> Result<TerminalExitStatus, String> {
        let request = WaitForTerminalExitRequest::new(self.session_id.clone(), self.id.clone());
        let waited: WaitForTerminalExitResponse = self.calls.call("terminal/wait_for_exit", &request).await?;
        Ok(waited.exit_status)
    }

    /// Ends the command; the terminal (and its output) stays. Failures are only logged: the
    /// release that follows kills it too.
    async fn kill(&self) {
        let request = KillTerminalRequest::new(self.session_id.clone(), self.id.clone());
        let killed = self.calls.call::<_, KillTerminalResponse>("terminal/kill", &request);
        match tokio::time::timeout(CLIENT_BOUND, killed).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::debug!("terminal/kill: {e}"),
            Err(_) => tracing::debug!("terminal/kill: no answer in {CLIENT_BOUND:?}"),
        }
    }

    async fn output(&self) -> Result<TerminalOutputResponse, String> {
        let request = TerminalOutputRequest::new(self.session_id.clone(), self.id.clone());
        let shown = self.calls.call("terminal/output", &request);
        tokio::time::timeout(CLIENT_BOUND, shown)
            .await
            .unwrap_or_else(|_| Err(format!("no answer to terminal/output in {}s", CLIENT_BOUND.as_secs())))
    }
}

impl Drop for ClientTerminal {
    fn drop(&mut self) {
        // Without a runtime the process is ending and nothing can be sent any more; the client
        // ends its terminals with the connection.
        if tokio::runtime::Handle::try_current().is_err() {
            return;
        }
        let request = ReleaseTerminalRequest::new(self.session_id.clone(), self.id.clone());
        self.calls.fire("terminal/release", request);
    }
}
