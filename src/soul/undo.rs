//! Undo (`docs/sessions.md` §9): `/undo [N]` and the front ends' undo methods take the session
//! back to before a turn — the context, `wire.jsonl` and the session state as if the undone turns
//! never happened — and restore the files kiwi's edit tools (`WriteFile`, `StrReplaceFile`)
//! changed in them, from the before-images `session::rewind` keeps per turn.
//!
//! Invariants: the target is checked whole before anything changes; a file is restored only when
//! it still holds what kiwi last wrote (otherwise it is left alone and reported); files are
//! restored first, then the context, the record and the state; `/undo`'s own turn goes with the
//! turns it undoes (nothing of it stays in `wire.jsonl`). What Shell commands (or other tools)
//! did is not undone, and the answer says so.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::Soul;
use super::context::Context;
use super::sink::EventSink;
use crate::session::rewind::{self, FileChange, Restored, RewindError, UndoPlan, UndoTarget};
use crate::tools::client_files::ClientFiles;

/// A file an undo left as it is, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NotRestored {
    pub path: String,
    pub reason: String,
}

/// What an undo did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UndoReport {
    /// The number of the first turn undone (numbered as `fork` numbers them).
    pub turn_index: u64,
    pub turns_undone: u64,
    /// Files whose earlier content is back.
    pub restored: Vec<String>,
    /// Files kiwi had created, deleted.
    pub deleted: Vec<String>,
    pub not_restored: Vec<NotRestored>,
    /// The session state (plan mode, approvals, todos, added dirs) is back as the turn began;
    /// false when the undone turns had not changed it.
    pub state_restored: bool,
    /// In a fork: the number of turns it was forked with, when the undo reaches into them (their
    /// file changes were made before the fork, in the source session, and are not restored).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_turns: Option<u64>,
}

/// Said with every undo: only kiwi's own edits are taken back.
pub const SHELL_NOTE: &str = "Only files changed by kiwi's WriteFile and StrReplaceFile tools are restored; \
what Shell commands (or any other tool or program) changed is not undone.";

impl UndoReport {
    /// The answer shown to the user.
    pub fn message(&self) -> String {
        let turns = if self.turns_undone == 1 { "1 turn".to_string() } else { format!("{} turns", self.turns_undone) };
        let mut text = format!("Undid {turns} (from turn {}): the conversation is back to before it.", self.turn_index);
        if !self.restored.is_empty() {
            text.push_str(&format!(" Restored {}: {}.", files(self.restored.len()), self.restored.join(", ")));
        }
        if !self.deleted.is_empty() {
            text.push_str(&format!(
                " Deleted {} kiwi had created: {}.",
                files(self.deleted.len()),
                self.deleted.join(", ")
            ));
        }
        if self.restored.is_empty() && self.deleted.is_empty() && self.not_restored.is_empty() {
            text.push_str(" No file had been changed by kiwi's edit tools.");
        }
        for n in &self.not_restored {
            text.push_str(&format!(" Not restored: {} ({}).", n.path, n.reason));
        }
        if self.state_restored {
            text.push_str(" The session state (plan mode, approvals, todos, added directories) is back as it was.");
        }
        if let Some(forked) = self.forked_turns {
            text.push_str(&format!(
                " Turns 0 to {} were made before the fork, in the session this one was forked from: the files \
                 they changed are not restored here.",
                forked.saturating_sub(1)
            ));
        }
        text.push(' ');
        text.push_str(SHELL_NOTE);
        text
    }
}

fn files(n: usize) -> String {
    if n == 1 { "1 file".into() } else { format!("{n} files") }
}

fn io(e: impl std::fmt::Display) -> RewindError {
    RewindError::Io(e.to_string())
}

impl Soul {
    /// A turn's `TurnBegin` was recorded: its before-images go under its offset, with the state
    /// as it began (the main agent only; a session without a record keeps none).
    pub(crate) fn begin_undo_record(&mut self, sink: &EventSink) {
        self.turn_start = None;
        if self.subagent.is_some() {
            return;
        }
        let Some(offset) = sink.take_turn_begin() else { return };
        self.turn_start = Some(offset);
        let Some(journal) = &self.agent.journal else { return };
        let state = self.agent.state.read(Clone::clone);
        if let Err(e) = journal.begin_turn(offset, Some(state)) {
            tracing::warn!("cannot start the undo record of this turn: {e}");
        }
    }

    /// The turn is over: its undo record keeps the state copy if the turn changed the state.
    pub(crate) fn end_undo_record(&self) {
        if self.subagent.is_some() {
            return;
        }
        if let Some(journal) = &self.agent.journal
            && let Err(e) = journal.end_turn(&self.agent.state.read(Clone::clone))
        {
            tracing::warn!("cannot keep this turn's state for undo: {e}");
        }
    }

    /// Undoes `target` (see the module docs). `in_turn`: called by `/undo`, whose own turn is
    /// neither counted nor kept. The caller holds the soul, so no turn runs meanwhile.
    pub async fn undo(
        &mut self,
        target: UndoTarget,
        sink: &EventSink,
        in_turn: bool,
    ) -> Result<UndoReport, RewindError> {
        sink.flush_record();
        let dir = self.agent.env.session_dir.clone();
        let context_path = self.context.path().to_path_buf();
        if context_path.as_os_str().is_empty() || context_path != dir.join("context.jsonl") {
            return Err(RewindError::Io("this session's context is not kept in a file".into()));
        }
        let own = if in_turn { self.turn_start } else { None };
        let journal = self.agent.journal.clone();
        let checked = {
            let dir = dir.clone();
            tokio::task::spawn_blocking(move || -> Result<_, RewindError> {
                let starts = rewind::turn_starts(&dir.join("wire.jsonl"))?;
                let cut = rewind::resolve(&starts, target, own)?;
                if !rewind::mark_fits(&dir, cut.mark) {
                    return Err(RewindError::MarkMismatch { turn: cut.index });
                }
                let plan = match &journal {
                    Some(j) => j.plan_from(cut.offset).map_err(io)?,
                    None => UndoPlan::default(),
                };
                Ok((cut, plan))
            })
            .await
            .map_err(io)?
        };
        let (cut, plan) = checked?;
        let forked = crate::session::fork::forked_turns(&dir);
        let mut report = UndoReport {
            turn_index: cut.index,
            turns_undone: cut.turns,
            forked_turns: (cut.index < forked).then_some(forked),
            ..Default::default()
        };
        // The intent first: a kill from here on is finished at the next start.
        if let Some(journal) = &self.agent.journal {
            journal.begin_undo(cut.offset, cut.mark).map_err(io)?;
        }
        self.restore_files(&plan.files, &mut report).await;
        let mark = cut.mark;
        let cut_dir = dir.clone();
        tokio::task::spawn_blocking(move || rewind::cut_context(&cut_dir, mark)).await.map_err(io)?.map_err(io)?;
        self.context = Context::restore(&context_path).map_err(io)?;
        self.sync_dmail_checkpoints();
        self.plan_reminders = None;
        self.repeats = Default::default();
        sink.cut_record(cut.offset, in_turn).await.map_err(io)?;
        if let Some(state) = plan.state {
            self.agent.state.restore(state);
            self.agent.state.flush();
            report.state_restored = true;
        }
        if let Some(journal) = &self.agent.journal {
            if let Err(e) = journal.discard_from(cut.offset) {
                tracing::warn!("cannot remove the undone turns' before-images: {e}");
            }
            if let Err(e) = journal.end_undo() {
                tracing::warn!("cannot remove the undo's record of intent: {e}");
            }
        }
        if in_turn {
            self.turn_start = None;
        }
        tracing::info!("undid {} turn(s) from turn {}", cut.turns, cut.index);
        Ok(report)
    }

    /// Puts back the files kiwi's edit tools changed in the turns from byte `offset` of
    /// `wire.jsonl` on, leaving the conversation as it is (Claude's `rewind_files`). The caller
    /// holds the soul, so no turn runs meanwhile.
    pub async fn rewind_files(&mut self, offset: u64, sink: &EventSink) -> Result<UndoReport, RewindError> {
        sink.flush_record();
        let mut report = UndoReport::default();
        let Some(journal) = self.agent.journal.clone() else { return Ok(report) };
        let planner = journal.clone();
        let plan = tokio::task::spawn_blocking(move || planner.plan_from(offset)).await.map_err(io)?.map_err(io)?;
        self.restore_files(&plan.files, &mut report).await;
        let done: Vec<(PathBuf, String)> = plan
            .files
            .iter()
            .filter(|c| {
                let shown = c.path.display().to_string();
                report.restored.contains(&shown) || report.deleted.contains(&shown)
            })
            .map(|c| (c.path.clone(), c.before.sha().to_string()))
            .collect();
        tokio::task::spawn_blocking(move || journal.note_restored(offset, &done)).await.map_err(io)?.map_err(io)?;
        Ok(report)
    }

    /// Puts back each file of `changes` that still holds what kiwi last wrote (only inside the
    /// session's folders), through the client's buffers when it has them; `report` says what was
    /// restored, deleted and left.
    pub(super) async fn restore_files(&self, changes: &[FileChange], report: &mut UndoReport) {
        let client = self.agent.client.files().filter(|c| c.can_read() && c.can_write());
        let mut roots = vec![self.agent.env.work_dir.clone()];
        roots.extend(self.agent.state.additional_dirs().into_iter().map(PathBuf::from));
        for change in changes {
            if !rewind::within_roots(&change.path, &roots) {
                let reason = "it is outside the session's folders; left as it is".to_string();
                report.not_restored.push(NotRestored { path: change.path.display().to_string(), reason });
                continue;
            }
            let outcome = match &client {
                Some(files) => restore_through_client(files.as_ref(), change).await,
                None => {
                    let change = change.clone();
                    tokio::task::spawn_blocking(move || rewind::restore_local(&change))
                        .await
                        .unwrap_or_else(|e| Err(e.to_string()))
                }
            };
            let path = change.path.display().to_string();
            match outcome {
                Ok(Restored::Content) => report.restored.push(path),
                Ok(Restored::Deleted) => report.deleted.push(path),
                Err(reason) => report.not_restored.push(NotRestored { path, reason }),
            }
        }
    }

    /// `/undo [N]`: undoes the last N turns before this command (1 when not given).
    pub(super) async fn undo_command(&mut self, args: &str, sink: &EventSink) {
        let n = match args.trim() {
            "" => Some(1),
            text => text.parse::<u64>().ok(),
        };
        let text = match n {
            None => Err(format!(
                "Usage: /undo [N] — N, the number of turns to undo, is a whole number (got \"{}\").",
                args.trim()
            )),
            Some(n) => match self.undo(UndoTarget::Last(n), sink, true).await {
                Ok(report) => Ok(report.message()),
                Err(e) => Err(format!("Nothing was undone: {e}")),
            },
        };
        // A `/undo` that undid nothing leaves no turn behind either, so it never counts.
        if text.is_err()
            && let Some(own) = self.turn_start.take()
        {
            if let Err(e) = sink.cut_record(own, true).await {
                tracing::warn!("cannot take the failed /undo out of wire.jsonl: {e}");
            }
            if let Some(journal) = &self.agent.journal
                && let Err(e) = journal.discard_from(own)
            {
                tracing::warn!("cannot remove the failed /undo's record: {e}");
            }
        }
        let (Ok(text) | Err(text)) = text;
        super::commands::say(sink, &text).await;
        self.emit_context_usage(sink).await;
    }
}

/// Restores one file through the client's buffers (ACP): read there, checked, written there; a
/// file kiwi created is deleted on disk (the client has no delete).
async fn restore_through_client(files: &dyn ClientFiles, change: &FileChange) -> Result<Restored, String> {
    let current = match files.read_text(&change.path).await {
        Ok(text) => Some(text.into_bytes()),
        Err(_) if !Path::new(&change.path).exists() => None,
        Err(e) => return Err(format!("it cannot be read ({e}); left as it is")),
    };
    if let Some(done) = rewind::already_restored(change, current.as_deref()) {
        return Ok(done);
    }
    rewind::check_current(change, current.as_deref())?;
    match &change.before {
        rewind::Before::Absent => match std::fs::remove_file(&change.path) {
            Ok(()) => Ok(Restored::Deleted),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Restored::Deleted),
            Err(e) => Err(format!("it cannot be deleted ({e})")),
        },
        rewind::Before::Kept { .. } => {
            let bytes = rewind::before_bytes(change)?;
            match String::from_utf8(bytes) {
                Ok(text) => {
                    files.write_text(&change.path, text).await.map_err(|e| format!("it cannot be written ({e})"))?
                }
                // The client takes text only: the bytes go to the disk.
                Err(e) => {
                    let like = std::fs::metadata(&change.path).ok();
                    rewind::write_atomic(&change.path, e.as_bytes(), like.as_ref())
                        .map_err(|e| format!("it cannot be written ({e})"))?
                }
            }
            Ok(Restored::Content)
        }
        rewind::Before::Dropped { reason, .. } => Err(reason.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_answer_says_what_was_restored_and_what_not() {
        let report = UndoReport {
            turn_index: 3,
            turns_undone: 2,
            restored: vec!["/w/a.txt".into()],
            deleted: vec!["/w/new.txt".into()],
            not_restored: vec![NotRestored { path: "/w/b.txt".into(), reason: "it was changed".into() }],
            state_restored: true,
            forked_turns: None,
        };
        let text = report.message();
        assert!(text.starts_with("Undid 2 turns (from turn 3): the conversation is back to before it."), "{text}");
        assert!(text.contains(" Restored 1 file: /w/a.txt."), "{text}");
        assert!(text.contains(" Deleted 1 file kiwi had created: /w/new.txt."), "{text}");
        assert!(text.contains(" Not restored: /w/b.txt (it was changed)."), "{text}");
        assert!(text.ends_with(SHELL_NOTE), "{text}");
        let empty = UndoReport { turn_index: 0, turns_undone: 1, ..Default::default() };
        let text = empty.message();
        assert!(text.contains("Undid 1 turn (from turn 0)"), "{text}");
        assert!(text.contains("No file had been changed by kiwi's edit tools."), "{text}");
        assert!(!text.contains("The session state"), "{text}");
        assert!(report.message().contains("The session state (plan mode"), "{}", report.message());
        let into_fork = UndoReport { turn_index: 1, turns_undone: 2, forked_turns: Some(3), ..Default::default() };
        assert!(into_fork.message().contains(" Turns 0 to 2 were made before the fork"), "{}", into_fork.message());
    }
}
