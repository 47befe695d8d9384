//! The notification of a task that reached its end (`docs/protocol-1.10.md` §9.3): the `Notification`
//! the client gets and the message the model reads at its next step.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde_json::{Map, Value, json};

use super::{TaskInfo, TaskStatus, epoch_seconds, kind_name};
use crate::protocol::Notification;

/// How much of the output the model is shown with the notification.
const TAIL_BYTES: u64 = 4 * 1024;

/// A notification waiting for the main agent's next step.
#[derive(Debug, Clone)]
pub struct PendingNotice {
    pub notification: Notification,
    /// The user message the model reads.
    pub model_text: String,
}

/// The last `TAIL_BYTES` of a task's output (lossy UTF-8; "" when there is none).
pub fn output_tail(path: &Path) -> String {
    tail(path, TAIL_BYTES).map(|(text, _)| text).unwrap_or_default()
}

/// The last `limit` bytes of `path` and the file's size.
pub fn tail(path: &Path, limit: u64) -> std::io::Result<(String, u64)> {
    let mut file = std::fs::File::open(path)?;
    let size = file.metadata()?.len();
    file.seek(SeekFrom::Start(size.saturating_sub(limit)))?;
    let mut bytes = Vec::new();
    file.take(limit).read_to_end(&mut bytes)?;
    Ok((String::from_utf8_lossy(&bytes).into_owned(), size))
}

/// The end reason's word: `completed`, `failed`, `killed`, `lost` or `timed_out`.
fn reason_word(info: &TaskInfo) -> &'static str {
    match info.status {
        _ if info.timed_out => "timed_out",
        TaskStatus::Completed => "completed",
        TaskStatus::Failed => "failed",
        TaskStatus::Killed => "killed",
        _ => "lost",
    }
}

pub fn notice(info: &TaskInfo, output_tail: String) -> PendingNotice {
    notice_with_note(info, output_tail, None)
}

/// [`notice`] with a sandbox denial note (spec sandbox.md §7) after the failure reason.
pub fn notice_with_note(info: &TaskInfo, output_tail: String, denial_note: Option<&str>) -> PendingNotice {
    let word = reason_word(info);
    let (title_word, severity) = match word {
        "completed" => ("completed", "success"),
        "failed" => ("failed", "error"),
        "killed" => ("stopped", "warning"),
        "timed_out" => ("timed out", "warning"),
        _ => ("lost", "error"),
    };
    let (finished_at, duration) = match info.finished {
        Some((instant, wall)) => (wall, instant.duration_since(info.started).as_secs_f64()),
        None => (std::time::SystemTime::now(), info.started.elapsed().as_secs_f64()),
    };
    let local: chrono::DateTime<chrono::Local> = finished_at.into();
    let at = if word == "completed" { "Completed at" } else { "Finished at" };
    let mut body = vec![
        format!("Task ID: {}", info.id),
        format!(
            "Status: {} ({at}: {}, Duration: {duration:.1}s)",
            info.status.as_str(),
            local.format("%Y-%m-%d %H:%M:%S")
        ),
        format!("Description: {}", info.description),
    ];
    if let Some(code) = info.exit_code {
        body.push(format!("Exit code: {code}"));
    }
    let failure = (info.status != TaskStatus::Completed).then(|| info.reason.clone()).flatten();
    if let Some(reason) = &failure {
        body.push(format!("Failure reason: {reason}"));
    }
    if let Some(note) = denial_note {
        body.push(note.trim_start().to_string());
    }
    let body = body.join("\n");
    let payload = json!({
        "task_id": info.id,
        "task_kind": kind_name(info.kind),
        "status": info.status.as_str(),
        "description": info.description,
        "exit_code": info.exit_code,
        "interrupted": info.status == TaskStatus::Killed && !info.timed_out,
        "timed_out": info.timed_out,
        "terminal_reason": word,
        "failure_reason": failure,
        "finished_at": epoch_seconds(finished_at),
        "duration_s": duration,
    });
    let notification = Notification {
        id: format!("n{}", &uuid::Uuid::new_v4().simple().to_string()[..8]),
        category: "task".into(),
        kind: format!("task.{word}"),
        source_kind: "background_task".into(),
        source_id: info.id.clone(),
        title: format!("Background task {title_word}: {}", info.description),
        body,
        severity: severity.into(),
        created_at: epoch_seconds(std::time::SystemTime::now()),
        payload: match payload {
            Value::Object(map) => map,
            _ => Map::new(),
        },
    };
    let model_text = format!(
        "<notification id=\"{}\" category=\"{}\" type=\"{}\" source_kind=\"{}\" source_id=\"{}\">\nTitle: {}\nSeverity: {}\n{}\n<task-notification>\n{}\n</task-notification>\n</notification>",
        notification.id,
        notification.category,
        notification.kind,
        notification.source_kind,
        notification.source_id,
        notification.title,
        notification.severity,
        notification.body,
        output_tail.trim_end(),
    );
    PendingNotice { notification, model_text }
}
