//! Background tasks (`docs/protocol-1.10.md` §9): shell commands and subagents that outlive the tool call
//! that started them, but never kiwi (unless `background.keep_alive_on_exit`).
//!
//! Invariants:
//! - a task's work runs in a tokio task owned by the runtime: a shell's process group is owned
//!   by a `CallGuard` there, so when the runtime goes away (exit) or the task is stopped, the
//!   whole tree is killed; a subagent's future is dropped the same way; an external command
//!   (the ACP client's terminal) is ended by its own run on a stop, and released when dropped;
//! - a task reaches a terminal status exactly once, and that creates exactly one notification,
//!   queued until the main agent's next step takes it;
//! - at most `background.max_running_tasks` tasks are active at once.

pub mod notify;
pub mod shell_task;
pub mod store;
pub mod tools;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use rand::Rng;
use tokio::sync::{oneshot, watch};

use crate::config::schema::BackgroundSettings;
use crate::protocol::DisplayBlock;
pub use crate::protocol::display::TaskKind;

pub use notify::PendingNotice;

/// Where a task stands (`docs/protocol-1.10.md` §9.1); the last four are terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskStatus {
    Starting,
    Running,
    Completed,
    Failed,
    Killed,
    Lost,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Starting => "starting",
            TaskStatus::Running => "running",
            TaskStatus::Completed => "completed",
            TaskStatus::Failed => "failed",
            TaskStatus::Killed => "killed",
            TaskStatus::Lost => "lost",
        }
    }

    pub fn is_terminal(self) -> bool {
        !matches!(self, TaskStatus::Starting | TaskStatus::Running)
    }
}

/// How a task's work ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskEnd {
    pub status: TaskStatus,
    pub exit_code: Option<i32>,
    /// Why it failed or was stopped, in words.
    pub reason: Option<String>,
    pub timed_out: bool,
}

/// A snapshot of one task.
#[derive(Debug, Clone)]
pub struct TaskInfo {
    pub id: String,
    pub kind: TaskKind,
    pub description: String,
    pub command: Option<String>,
    pub agent_id: Option<String>,
    pub subagent_type: Option<String>,
    pub status: TaskStatus,
    pub exit_code: Option<i32>,
    pub reason: Option<String>,
    pub timed_out: bool,
    pub output_path: PathBuf,
    pub started: Instant,
    pub finished: Option<(Instant, SystemTime)>,
}

impl TaskInfo {
    /// The `background_task` display block.
    pub fn block(&self) -> DisplayBlock {
        DisplayBlock::BackgroundTask {
            task_id: self.id.clone(),
            kind: self.kind,
            status: self.status.as_str().into(),
            description: self.description.clone(),
        }
    }
}

/// What the manager keeps per task.
struct Entry {
    info: Mutex<TaskInfo>,
    /// Sends `true` once the task is terminal.
    done: watch::Sender<bool>,
    /// Asks the work to stop (with the reason); taken by the first stop.
    stop: Mutex<Option<oneshot::Sender<String>>>,
    /// A sandboxed command's denial note (spec sandbox.md §7).
    denial_note: Option<String>,
}

/// The session's background tasks.
pub struct BackgroundTasks {
    settings: BackgroundSettings,
    store: store::Store,
    tasks: Mutex<Vec<Arc<Entry>>>,
    notices: Mutex<VecDeque<PendingNotice>>,
}

/// What a task's work is.
pub enum Work {
    /// Run by `shell_task` (its process group in its own session).
    Shell {
        command: String,
        shell: PathBuf,
        work_dir: PathBuf,
        scrub: Vec<std::ffi::OsString>,
        timeout_s: u64,
        /// The sandbox of the command (spec sandbox.md §4: confined for its whole life).
        policy: Option<crate::sandbox::CommandPolicy>,
        /// Added to the end notification when the sandbox may have blocked it (§7).
        denial_note: Option<String>,
    },
    /// A `bash` task run outside kiwi's processes (the ACP client's terminal): `run` owns the
    /// command from its start to its end, keeps the output file current, ends the command when
    /// stopped or at its own time limit, and says how it ended.
    External { command: String, run: ExternalRun },
    /// A subagent's run; it ends with its status and the output to keep.
    Agent { agent_id: String, subagent_type: String, run: BoxFuture<'static, (TaskEnd, String)>, timeout_s: u64 },
}

/// The work of a [`Work::External`] task.
pub type ExternalRun = Box<dyn FnOnce(ExternalTask) -> BoxFuture<'static, TaskEnd> + Send>;

/// What the manager hands an external task's run.
pub struct ExternalTask {
    /// The task's `output.log`: what the command printed so far (TaskOutput and the notice read it).
    pub output_path: PathBuf,
    /// Fires (with the reason) when the task is stopped; a dropped sender counts as a stop.
    pub stop: oneshot::Receiver<String>,
}

/// The reason of a task killed because kiwi exits.
const STOPPED_AT_EXIT: &str = "Stopped at exit";
/// The reason of a task killed because its session was closed (the process goes on).
const STOPPED_AT_CLOSE: &str = "Stopped when the session closed";

/// What closing a session did to its background tasks.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct TaskTally {
    /// Tasks killed.
    pub stopped: usize,
    /// Tasks left running (`background.keep_alive_on_exit`).
    pub kept: usize,
}

impl TaskTally {
    pub fn add(&mut self, other: TaskTally) {
        self.stopped += other.stopped;
        self.kept += other.kept;
    }

    /// The one stderr line at exit, if any task was stopped or is left running.
    pub fn notice(&self) -> Option<String> {
        match (self.stopped, self.kept) {
            (0, 0) => None,
            (n, 0) => Some(format!("kiwi: killed {n} background task(s) still running at exit.")),
            (0, k) => Some(format!("kiwi: left {k} background task(s) running (background.keep_alive_on_exit).")),
            (n, k) => {
                Some(format!("kiwi: killed {n} background task(s) at exit; left {k} running (keep_alive_on_exit)."))
            }
        }
    }
}

/// Why a task could not start.
pub const TOO_MANY: &str = "Failed to start background task: Too many background tasks are already running.";

impl BackgroundTasks {
    pub fn new(settings: BackgroundSettings, session_dir: PathBuf) -> Arc<Self> {
        let store = store::Store::new(&session_dir);
        // A resumed session knows its earlier tasks; those its last process left active are
        // lost, and the model hears of them with what was never delivered.
        let mut notices: VecDeque<PendingNotice> = store.load_undelivered().into();
        let mut tasks = Vec::new();
        for (info, lost) in store.load_tasks() {
            if lost {
                let notice = notify::notice(&info, notify::output_tail(&info.output_path));
                store.write_notice(&notice);
                notices.push_back(notice);
            }
            tasks.push(Arc::new(Entry {
                info: Mutex::new(info),
                done: watch::channel(true).0,
                stop: Mutex::new(None),
                denial_note: None,
            }));
        }
        Arc::new(Self { settings, store, tasks: Mutex::new(tasks), notices: Mutex::new(notices) })
    }

    pub fn settings(&self) -> &BackgroundSettings {
        &self.settings
    }

    fn entries(&self) -> Vec<Arc<Entry>> {
        self.tasks.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn active_count(&self) -> usize {
        self.entries().iter().filter(|e| !lock(&e.info).status.is_terminal()).count()
    }

    /// Whether another task may start now; `Err` is the message for the model.
    pub fn check_room(&self) -> Result<(), String> {
        if self.active_count() as u64 >= self.settings.max_running_tasks {
            return Err(TOO_MANY.into());
        }
        Ok(())
    }

    /// Starts `work` as a task; `Err` is the message for the model.
    pub fn start(self: &Arc<Self>, work: Work, description: &str) -> Result<TaskInfo, String> {
        let kind = match work {
            Work::Shell { .. } | Work::External { .. } => TaskKind::Bash,
            Work::Agent { .. } => TaskKind::Agent,
        };
        self.start_as(new_task_id(kind), work, description)
    }

    /// Starts `work` as the task `id` (made with [`new_task_id`] by a caller that needed the id
    /// before the work existed).
    pub fn start_as(self: &Arc<Self>, id: String, work: Work, description: &str) -> Result<TaskInfo, String> {
        self.check_room()?;
        let kind = match work {
            Work::Shell { .. } | Work::External { .. } => TaskKind::Bash,
            Work::Agent { .. } => TaskKind::Agent,
        };
        let task_dir = self.store.task_dir(&id);
        std::fs::create_dir_all(&task_dir).map_err(|e| format!("Failed to start background task: {e}"))?;
        let output_path = task_dir.join("output.log");
        let (command, agent_id, subagent_type) = match &work {
            Work::Shell { command, .. } | Work::External { command, .. } => (Some(command.clone()), None, None),
            Work::Agent { agent_id, subagent_type, .. } => (None, Some(agent_id.clone()), Some(subagent_type.clone())),
        };
        let info = TaskInfo {
            id: id.clone(),
            kind,
            description: description.to_string(),
            command,
            agent_id,
            subagent_type,
            status: TaskStatus::Starting,
            exit_code: None,
            reason: None,
            timed_out: false,
            output_path: output_path.clone(),
            started: Instant::now(),
            finished: None,
        };
        self.store.write_spec(&info);
        self.store.write_runtime(&info);
        let (stop_tx, stop_rx) = oneshot::channel();
        let denial_note = match &work {
            Work::Shell { denial_note, .. } => denial_note.clone(),
            _ => None,
        };
        let entry = Arc::new(Entry {
            info: Mutex::new(info.clone()),
            done: watch::channel(false).0,
            stop: Mutex::new(Some(stop_tx)),
            denial_note,
        });
        self.tasks.lock().unwrap_or_else(|p| p.into_inner()).push(entry.clone());
        let manager = self.clone();
        let keep_alive = self.settings.keep_alive_on_exit;
        let started = match work {
            Work::Shell { command, shell, work_dir, scrub, timeout_s, policy, .. } => {
                let run =
                    shell_task::Run { command, shell, work_dir, scrub, timeout_s, output_path, keep_alive, policy };
                shell_task::spawn(run, stop_rx, move |end| manager.finish(&entry, end))
            }
            Work::External { run, .. } => {
                let task = ExternalTask { output_path, stop: stop_rx };
                tokio::spawn(async move {
                    let end = run(task).await;
                    manager.finish(&entry, end);
                });
                Ok(())
            }
            Work::Agent { run, timeout_s, .. } => {
                let output = output_path.clone();
                tokio::spawn(async move {
                    let limit = std::time::Duration::from_secs(timeout_s);
                    let end = tokio::select! {
                        ended = tokio::time::timeout(limit, run) => match ended {
                            Ok((end, text)) => {
                                let _ = std::fs::write(&output, text);
                                end
                            }
                            Err(_) => TaskEnd { status: TaskStatus::Killed, exit_code: None, reason: Some(format!("Timed out after {timeout_s}s")), timed_out: true },
                        },
                        reason = stop_rx => TaskEnd { status: TaskStatus::Killed, exit_code: None, reason: reason.ok(), timed_out: false },
                    };
                    manager.finish(&entry, end);
                });
                Ok(())
            }
        };
        if let Err(e) = started {
            let entry = self.entries().into_iter().find(|e| lock(&e.info).id == id);
            if let Some(entry) = entry {
                self.finish(
                    &entry,
                    TaskEnd { status: TaskStatus::Failed, exit_code: None, reason: Some(e.clone()), timed_out: false },
                );
            }
            return Err(format!("Failed to start background task: {e}"));
        }
        self.mark_running(&id);
        // As the caller saw it start (`status: starting`).
        Ok(info)
    }

    fn mark_running(&self, id: &str) {
        if let Some(entry) = self.entries().into_iter().find(|e| lock(&e.info).id == id) {
            let mut info = lock(&entry.info);
            if info.status == TaskStatus::Starting {
                info.status = TaskStatus::Running;
                self.store.write_runtime(&info);
            }
        }
    }

    /// Records the end of a task (once) and queues its notification.
    fn finish(&self, entry: &Entry, end: TaskEnd) {
        let info = {
            let mut info = lock(&entry.info);
            if info.status.is_terminal() {
                return;
            }
            info.status = end.status;
            info.exit_code = end.exit_code;
            info.reason = end.reason;
            info.timed_out = end.timed_out;
            info.finished = Some((Instant::now(), SystemTime::now()));
            info.clone()
        };
        self.store.write_runtime(&info);
        let tail = notify::output_tail(&info.output_path);
        let denied = entry
            .denial_note
            .as_deref()
            .filter(|_| info.status == TaskStatus::Failed && crate::sandbox::looks_denied(info.exit_code, None, &tail));
        let notice = notify::notice_with_note(&info, tail, denied);
        self.store.write_notice(&notice);
        self.notices.lock().unwrap_or_else(|p| p.into_inner()).push_back(notice);
        entry.done.send_replace(true);
    }

    pub fn get(&self, id: &str) -> Option<TaskInfo> {
        self.entries().iter().map(|e| lock(&e.info).clone()).find(|i| i.id == id)
    }

    /// Newest first; only active ones when `active_only`.
    pub fn list(&self, active_only: bool, limit: usize) -> Vec<TaskInfo> {
        let mut all: Vec<TaskInfo> = self.entries().iter().map(|e| lock(&e.info).clone()).collect();
        all.retain(|i| !active_only || !i.status.is_terminal());
        all.reverse();
        all.truncate(limit);
        all
    }

    /// Waits until the task is terminal or `limit` passed; the snapshot then.
    pub async fn wait(&self, id: &str, limit: std::time::Duration) -> Option<TaskInfo> {
        let entry = self.entries().into_iter().find(|e| lock(&e.info).id == id)?;
        let mut done = entry.done.subscribe();
        let _ = tokio::time::timeout(limit, done.wait_for(|d| *d)).await;
        let info = lock(&entry.info).clone();
        Some(info)
    }

    /// Asks the task to stop; waits (bounded) until it is terminal. `None`: no such task.
    pub async fn stop(&self, id: &str, reason: &str) -> Option<TaskInfo> {
        let entry = self.entries().into_iter().find(|e| lock(&e.info).id == id)?;
        let stop = entry.stop.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(stop) = stop {
            let _ = stop.send(reason.to_string());
        }
        self.wait(id, std::time::Duration::from_secs(5)).await
    }

    /// Notifications not yet given to the model, oldest first.
    pub fn take_notices(&self) -> Vec<PendingNotice> {
        let taken: Vec<PendingNotice> = self.notices.lock().unwrap_or_else(|p| p.into_inner()).drain(..).collect();
        for notice in &taken {
            self.store.mark_delivered(notice);
        }
        taken
    }

    /// The process exits: stops every active task now, unless tasks are to be kept alive.
    pub fn stop_all_for_exit(&self) -> TaskTally {
        if self.settings.keep_alive_on_exit {
            return TaskTally { stopped: 0, kept: self.active_count() };
        }
        TaskTally { stopped: self.stop_all(STOPPED_AT_EXIT), kept: 0 }
    }

    /// The session closes while the process goes on: its tasks end with it, kept alive or not,
    /// so a session reopened later never finds a task of its own still running unmanaged.
    pub fn stop_all_for_close(&self) -> TaskTally {
        TaskTally { stopped: self.stop_all(STOPPED_AT_CLOSE), kept: 0 }
    }

    fn stop_all(&self, reason: &str) -> usize {
        let mut stopped = 0;
        for entry in self.entries() {
            if lock(&entry.info).status.is_terminal() {
                continue;
            }
            if let Some(stop) = entry.stop.lock().unwrap_or_else(|p| p.into_inner()).take() {
                let _ = stop.send(reason.into());
                // Recorded now: the runtime may be gone before the task's own end is.
                let end = TaskEnd {
                    status: TaskStatus::Killed,
                    exit_code: None,
                    reason: Some(reason.into()),
                    timed_out: false,
                };
                self.finish(&entry, end);
                stopped += 1;
            }
        }
        stopped
    }
}

fn lock(info: &Mutex<TaskInfo>) -> std::sync::MutexGuard<'_, TaskInfo> {
    info.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn kind_name(kind: TaskKind) -> &'static str {
    match kind {
        TaskKind::Bash => "bash",
        TaskKind::Agent => "agent",
    }
}

/// `bash-`/`agent-` + 8 characters of `[0-9a-z]`.
pub fn new_task_id(kind: TaskKind) -> String {
    const ALPHABET: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";
    let mut rng = rand::rng();
    let tail: String = (0..8).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char).collect();
    format!("{}-{tail}", kind_name(kind))
}

/// Epoch seconds, as notifications carry them.
pub fn epoch_seconds(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_have_the_spec_form() {
        for kind in [TaskKind::Bash, TaskKind::Agent] {
            let id = new_task_id(kind);
            let (prefix, tail) = id.split_once('-').unwrap();
            assert_eq!(prefix, kind_name(kind));
            assert_eq!(tail.len(), 8);
            assert!(tail.chars().all(|c| c.is_ascii_digit() || c.is_ascii_lowercase()));
        }
    }
}
