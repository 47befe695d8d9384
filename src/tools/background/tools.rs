//! `TaskList`, `TaskOutput`, `TaskStop` (`docs/protocol-1.10.md` §9.2): the main agent's view of its
//! background tasks. Subagents get an error: only the root agent manages tasks.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use super::notify::tail;
use super::{BackgroundTasks, TaskInfo, kind_name};
use crate::protocol::ToolReturnValue;
use crate::tools::{ToolCallContext, TypedTool, check_range};

pub const ROOT_ONLY: &str = "Background tasks can only be managed by the root agent.";

/// Output shown by `TaskOutput`.
const OUTPUT_TAIL_BYTES: u64 = 32 * 1024;

/// The session's tasks, or `None` for a subagent (see [`root_only`]).
fn manager(ctx: &ToolCallContext) -> Option<Arc<BackgroundTasks>> {
    ctx.host.background()
}

pub fn root_only() -> ToolReturnValue {
    ToolReturnValue::error(ROOT_ONLY, "Root agent only")
}

fn not_found(id: &str) -> ToolReturnValue {
    ToolReturnValue::error(format!("Task not found: {id}"), "Task not found")
}

/// The lines describing one task.
fn describe(info: &TaskInfo) -> Vec<String> {
    let mut lines = vec![
        format!("task_id: {}", info.id),
        format!("kind: {}", kind_name(info.kind)),
        format!("status: {}", info.status.as_str()),
        format!("description: {}", info.description),
    ];
    if let (Some(agent_id), Some(t)) = (&info.agent_id, &info.subagent_type) {
        lines.push(format!("agent_id: {agent_id}"));
        lines.push(format!("subagent_type: {t}"));
    }
    if let Some(command) = &info.command {
        lines.push(format!("command: {command}"));
    }
    if let Some(code) = info.exit_code {
        lines.push(format!("exit_code: {code}"));
    }
    if let Some(reason) = &info.reason {
        lines.push(format!("reason: {reason}"));
    }
    lines
}

pub struct TaskList;

fn default_true() -> bool {
    true
}

fn default_limit() -> i64 {
    20
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TaskListParams {
    /// List only tasks that are still running.
    #[serde(default = "default_true")]
    pub active_only: bool,
    /// At most this many tasks, newest first (1 to 100).
    #[serde(default = "default_limit")]
    #[schemars(range(min = 1, max = 100))]
    pub limit: i64,
}

impl TypedTool for TaskList {
    type Params = TaskListParams;
    const NAME: &'static str = "TaskList";

    fn description(&self) -> String {
        "List the background tasks of this session (shell commands and subagents started with `run_in_background`), with their status.".into()
    }

    fn run<'a>(&'a self, params: TaskListParams, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        Box::pin(async move {
            if let Some(invalid) = check_range("limit", params.limit, 1..=100) {
                return invalid;
            }
            let tasks = match manager(ctx) {
                Some(m) => m.list(params.active_only, params.limit as usize),
                None => return root_only(),
            };
            let header = if params.active_only { "active_background_tasks" } else { "background_tasks" };
            let mut lines = vec![format!("{header}: {}", tasks.len())];
            if tasks.is_empty() {
                lines.push("[no tasks]".into());
            }
            for (i, info) in tasks.iter().enumerate() {
                lines.push(format!("[{}]", i + 1));
                lines.extend(describe(info));
            }
            ToolReturnValue::ok(lines.join("\n"), "Task list retrieved.")
                .with_display(tasks.iter().map(TaskInfo::block).collect())
        })
    }
}

pub struct TaskOutput;

fn default_wait() -> i64 {
    30
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TaskOutputParams {
    /// The task's id (`bash-…` or `agent-…`).
    pub task_id: String,
    /// Wait until the task has finished (up to `timeout` seconds).
    #[serde(default)]
    pub block: bool,
    /// Seconds to wait when blocking (0 to 3600).
    #[serde(default = "default_wait")]
    #[schemars(range(min = 0, max = 3600))]
    pub timeout: i64,
}

impl TypedTool for TaskOutput {
    type Params = TaskOutputParams;
    const NAME: &'static str = "TaskOutput";

    fn description(&self) -> String {
        "Show a background task's status and the end of its output; with `block`, wait for it to finish first.".into()
    }

    fn run<'a>(&'a self, params: TaskOutputParams, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        Box::pin(async move {
            if let Some(invalid) = check_range("timeout", params.timeout, 0..=3600) {
                return invalid;
            }
            let Some(tasks) = manager(ctx) else { return root_only() };
            let info = if params.block {
                tasks.wait(&params.task_id, Duration::from_secs(params.timeout as u64)).await
            } else {
                tasks.get(&params.task_id)
            };
            let Some(info) = info else { return not_found(&params.task_id) };
            let finished = info.status.is_terminal();
            let retrieval = match (finished, params.block) {
                (true, _) => "success",
                (false, true) => "timeout",
                (false, false) => "not_ready",
            };
            let (text, size) = tail(&info.output_path, OUTPUT_TAIL_BYTES).unwrap_or_default();
            let mut lines = describe(&info);
            lines.push(format!("retrieval_status: {retrieval}"));
            lines.push(format!("output_path: {}", info.output_path.display()));
            lines.push(format!("output_size_bytes: {size}"));
            lines.push(format!("output_shown_bytes: {}", size.min(OUTPUT_TAIL_BYTES)));
            lines.push(String::new());
            lines.push("[output]".into());
            lines.push(text);
            let message = if finished { "Task output retrieved." } else { "Task snapshot retrieved." };
            ToolReturnValue::ok(lines.join("\n"), message).with_display(vec![info.block()])
        })
    }
}

pub struct TaskStop;

fn default_reason() -> String {
    "Stopped by TaskStop".into()
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct TaskStopParams {
    /// The task's id.
    pub task_id: String,
    /// Why it is stopped (kept with the task).
    #[serde(default = "default_reason")]
    pub reason: String,
}

impl TypedTool for TaskStop {
    type Params = TaskStopParams;
    const NAME: &'static str = "TaskStop";

    fn description(&self) -> String {
        "Stop a running background task (its processes are killed). Needs the user's approval.".into()
    }

    fn run<'a>(&'a self, params: TaskStopParams, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        Box::pin(async move {
            let Some(tasks) = manager(ctx) else { return root_only() };
            let Some(info) = tasks.get(&params.task_id) else { return not_found(&params.task_id) };
            let description = format!("Stop background task `{}`", info.id);
            if !ctx.approve("TaskStop", "stop background task", description, vec![info.block()]).await {
                return ToolReturnValue::rejected();
            }
            let info = tasks.stop(&info.id, &params.reason).await.unwrap_or(info);
            ToolReturnValue::ok(describe(&info).join("\n"), "Task stop requested.").with_display(vec![info.block()])
        })
    }
}
