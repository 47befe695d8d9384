//! The session's task and notification files (`docs/protocol-1.10.md` §10.4), so that a resumed session
//! still knows its tasks and hears about the ones that ended while nobody listened:
//! `tasks/<id>/spec.json` (what the task is), `tasks/<id>/runtime.json` (where it stands),
//! `notifications/<id>/event.json` (a notification) and `notifications/<id>/delivery.json`
//! (written once the model was given it).
//!
//! Invariants: the files only mirror the manager's memory, so a write that fails is logged and
//! nothing else changes; a file that cannot be read is skipped, never fatal; ids read back are
//! checked to be plain names before they become paths.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::{PendingNotice, TaskInfo, TaskKind, TaskStatus, epoch_seconds, kind_name};
use crate::protocol::Notification;

/// Why a task that was active when an earlier kiwi process ended is now `lost`.
pub const LOST_REASON: &str = "kiwi exited while the task was running; its output so far is in output.log";

/// `spec.json`: what the task is (written once).
#[derive(Debug, Serialize, Deserialize)]
struct Spec {
    id: String,
    kind: String,
    description: String,
    command: Option<String>,
    agent_id: Option<String>,
    subagent_type: Option<String>,
}

/// `runtime.json`: where the task stands (rewritten at each change of status).
#[derive(Debug, Serialize, Deserialize)]
struct Runtime {
    status: String,
    exit_code: Option<i32>,
    reason: Option<String>,
    timed_out: bool,
    started_at: f64,
    finished_at: Option<f64>,
}

/// `event.json` of a notification: the event and the model's text of it.
#[derive(Debug, Serialize, Deserialize)]
struct Event {
    notification: Notification,
    model_text: String,
}

pub struct Store {
    tasks: PathBuf,
    notifications: PathBuf,
}

impl Store {
    pub fn new(session_dir: &Path) -> Self {
        Self { tasks: session_dir.join("tasks"), notifications: session_dir.join("notifications") }
    }

    pub fn task_dir(&self, id: &str) -> PathBuf {
        self.tasks.join(id)
    }

    pub fn write_spec(&self, info: &TaskInfo) {
        let spec = Spec {
            id: info.id.clone(),
            kind: kind_name(info.kind).into(),
            description: info.description.clone(),
            command: info.command.clone(),
            agent_id: info.agent_id.clone(),
            subagent_type: info.subagent_type.clone(),
        };
        write_json(&self.task_dir(&info.id).join("spec.json"), &spec);
    }

    pub fn write_runtime(&self, info: &TaskInfo) {
        let now = Instant::now();
        let wall = |at: Instant| epoch_seconds(SystemTime::now()) - now.saturating_duration_since(at).as_secs_f64();
        let runtime = Runtime {
            status: info.status.as_str().into(),
            exit_code: info.exit_code,
            reason: info.reason.clone(),
            timed_out: info.timed_out,
            started_at: wall(info.started),
            finished_at: info.finished.map(|(_, at)| epoch_seconds(at)),
        };
        write_json(&self.task_dir(&info.id).join("runtime.json"), &runtime);
    }

    pub fn write_notice(&self, notice: &PendingNotice) {
        let dir = self.notifications.join(&notice.notification.id);
        let event = Event { notification: notice.notification.clone(), model_text: notice.model_text.clone() };
        write_json(&dir.join("event.json"), &event);
    }

    pub fn mark_delivered(&self, notice: &PendingNotice) {
        let dir = self.notifications.join(&notice.notification.id);
        write_json(&dir.join("delivery.json"), &serde_json::json!({"delivered_at": epoch_seconds(SystemTime::now())}));
    }

    /// The tasks of earlier processes, oldest first. Those still active then are returned as
    /// `lost` (the process that watched them is gone) with their runtime rewritten.
    pub fn load_tasks(&self) -> Vec<(TaskInfo, bool)> {
        let mut found: Vec<(f64, TaskInfo, bool)> = Vec::new();
        for dir in sub_dirs(&self.tasks) {
            let Some((spec, runtime)) =
                read_json::<Spec>(&dir.join("spec.json")).zip(read_json(&dir.join("runtime.json")))
            else {
                continue;
            };
            if !is_task_id(&spec.id) || dir.file_name().and_then(|n| n.to_str()) != Some(spec.id.as_str()) {
                continue;
            }
            let Some((info, was_lost)) = info_of(spec, &runtime, &dir) else { continue };
            if was_lost {
                self.write_runtime(&info);
            }
            found.push((runtime.started_at, info, was_lost));
        }
        found.sort_by(|a, b| a.0.total_cmp(&b.0));
        found.into_iter().map(|(_, info, lost)| (info, lost)).collect()
    }

    /// Notifications written but never given to the model, oldest first.
    pub fn load_undelivered(&self) -> Vec<PendingNotice> {
        let mut found: Vec<PendingNotice> = sub_dirs(&self.notifications)
            .into_iter()
            .filter(|dir| !dir.join("delivery.json").exists())
            .filter_map(|dir| {
                let event = read_json::<Event>(&dir.join("event.json"))?;
                // The id names the folder `mark_delivered` writes to: it must be this one.
                let name = dir.file_name().and_then(|n| n.to_str());
                (is_notice_id(&event.notification.id) && name == Some(event.notification.id.as_str())).then_some(event)
            })
            .map(|e| PendingNotice { notification: e.notification, model_text: e.model_text })
            .collect();
        found.sort_by(|a, b| a.notification.created_at.total_cmp(&b.notification.created_at));
        found
    }
}

/// A task as its files describe it; `true` when it was active and is now lost.
fn info_of(spec: Spec, runtime: &Runtime, dir: &Path) -> Option<(TaskInfo, bool)> {
    let kind = match spec.kind.as_str() {
        "bash" => TaskKind::Bash,
        "agent" => TaskKind::Agent,
        _ => return None,
    };
    let status = match runtime.status.as_str() {
        "completed" => TaskStatus::Completed,
        "failed" => TaskStatus::Failed,
        "killed" => TaskStatus::Killed,
        "lost" => TaskStatus::Lost,
        "starting" | "running" => TaskStatus::Running,
        _ => return None,
    };
    let now = SystemTime::now();
    let ago = |epoch: f64| {
        let at = UNIX_EPOCH + Duration::try_from_secs_f64(epoch.max(0.0)).unwrap_or_default();
        let elapsed = now.duration_since(at).unwrap_or_default();
        (Instant::now().checked_sub(elapsed).unwrap_or_else(Instant::now), at)
    };
    let (started, _) = ago(runtime.started_at);
    let lost = !status.is_terminal();
    let mut info = TaskInfo {
        id: spec.id,
        kind,
        description: spec.description,
        command: spec.command,
        agent_id: spec.agent_id,
        subagent_type: spec.subagent_type,
        status,
        exit_code: runtime.exit_code,
        reason: runtime.reason.clone(),
        timed_out: runtime.timed_out,
        output_path: dir.join("output.log"),
        started,
        finished: runtime.finished_at.map(ago),
    };
    if lost {
        info.status = TaskStatus::Lost;
        info.reason = Some(LOST_REASON.into());
        info.finished = Some((Instant::now(), now));
    }
    Some((info, lost))
}

/// `bash-`/`agent-` and 8 characters of `[0-9a-z]`: a name, never a path.
fn is_task_id(id: &str) -> bool {
    let Some((kind, tail)) = id.split_once('-') else { return false };
    matches!(kind, "bash" | "agent")
        && tail.len() == 8
        && tail.bytes().all(|b| b.is_ascii_digit() || b.is_ascii_lowercase())
}

/// `n` and 8 lowercase hex digits.
fn is_notice_id(id: &str) -> bool {
    id.len() == 9 && id.starts_with('n') && id[1..].bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn sub_dirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()).collect()
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Option<T> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

fn write_json(path: &Path, value: &impl Serialize) {
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(path, serde_json::to_vec_pretty(value).unwrap_or_default()));
    if let Err(e) = written {
        tracing::warn!("cannot write {}: {e}", path.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(id: &str, status: TaskStatus, dir: &Path) -> TaskInfo {
        TaskInfo {
            id: id.into(),
            kind: TaskKind::Bash,
            description: "d".into(),
            command: Some("sleep 1".into()),
            agent_id: None,
            subagent_type: None,
            status,
            exit_code: None,
            reason: None,
            timed_out: false,
            output_path: dir.join("tasks").join(id).join("output.log"),
            started: Instant::now(),
            finished: status.is_terminal().then(|| (Instant::now(), SystemTime::now())),
        }
    }

    #[test]
    fn tasks_come_back_and_active_ones_as_lost() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let mut done = info("bash-00000001", TaskStatus::Completed, dir.path());
        done.exit_code = Some(0);
        let running = info("bash-00000002", TaskStatus::Running, dir.path());
        for t in [&done, &running] {
            store.write_spec(t);
            store.write_runtime(t);
        }
        let loaded = Store::new(dir.path()).load_tasks();
        assert_eq!(loaded.len(), 2);
        let (first, first_lost) = &loaded[0];
        assert_eq!(
            (first.id.as_str(), first.status, first.exit_code, *first_lost),
            ("bash-00000001", TaskStatus::Completed, Some(0), false)
        );
        let (second, second_lost) = &loaded[1];
        assert_eq!((second.status, *second_lost), (TaskStatus::Lost, true));
        assert_eq!(second.reason.as_deref(), Some(LOST_REASON));
        assert_eq!(second.command.as_deref(), Some("sleep 1"));
        // Rewritten as lost: a second load does not lose it again.
        assert!(Store::new(dir.path()).load_tasks().iter().all(|(_, lost)| !lost));
    }

    #[test]
    fn broken_and_foreign_files_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let tasks = dir.path().join("tasks");
        for name in ["bash-0000000x", "../evil", "bash-00000003"] {
            let _ = std::fs::create_dir_all(tasks.join(name));
        }
        std::fs::write(tasks.join("bash-0000000x/spec.json"), "not json").unwrap();
        std::fs::write(tasks.join("bash-0000000x/runtime.json"), "{}").unwrap();
        // A spec whose id is not its folder's name.
        let store = Store::new(dir.path());
        let other = info("bash-00000004", TaskStatus::Completed, dir.path());
        store.write_spec(&other);
        store.write_runtime(&other);
        std::fs::rename(tasks.join("bash-00000004"), tasks.join("bash-00000003")).unwrap();
        assert!(store.load_tasks().is_empty());
        assert!(!is_task_id("../x-12345678") && !is_task_id("bash-1234567") && is_task_id("agent-abc12345"));
    }

    #[test]
    fn notifications_wait_until_delivered() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let t = info("bash-00000005", TaskStatus::Completed, dir.path());
        let first = super::super::notify::notice(&t, "tail".into());
        let second = super::super::notify::notice(&t, "tail".into());
        store.write_notice(&first);
        store.write_notice(&second);
        store.mark_delivered(&first);
        let pending = Store::new(dir.path()).load_undelivered();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].notification, second.notification);
        assert_eq!(pending[0].model_text, second.model_text);
    }
}
