//! The session's live state (`wire-1.10.md` §10.2): approval flags and session approvals, plan
//! mode, added directories, title and todos, shared by the main agent, its tools and the front end.
//!
//! Invariants: every change goes through one lock and, when the spec says it is persisted, is
//! written to `state.json` before the change is visible to anyone else; nothing is written until
//! something changes (a session whose only prompt failed has no `state.json`); a session without
//! a folder (tests, the nested `/init` agent) keeps its state in memory only.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use crate::protocol::TodoItem;
use crate::session::state::{self as file, SessionStateFile};
pub use crate::tools::PlanView;

pub struct SessionState {
    /// The session folder `state.json` lives in; `None` keeps everything in memory.
    dir: Option<PathBuf>,
    inner: Mutex<SessionStateFile>,
}

impl SessionState {
    /// The state saved in `session_dir` (defaults when there is none), with `--yolo` applied.
    pub fn load(session_dir: &Path, yolo: bool) -> Self {
        let mut state = file::load(session_dir);
        state.approval.yolo |= yolo;
        Self { dir: Some(session_dir.to_path_buf()), inner: Mutex::new(state) }
    }

    pub fn in_memory(yolo: bool) -> Self {
        let mut state = SessionStateFile::default();
        state.approval.yolo = yolo;
        Self { dir: None, inner: Mutex::new(state) }
    }

    fn lock(&self) -> MutexGuard<'_, SessionStateFile> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads a snapshot.
    pub fn read<T>(&self, f: impl FnOnce(&SessionStateFile) -> T) -> T {
        f(&self.lock())
    }

    /// Changes the state and persists it.
    pub fn update<T>(&self, f: impl FnOnce(&mut SessionStateFile) -> T) -> T {
        let mut guard = self.lock();
        let out = f(&mut guard);
        if let Some(dir) = &self.dir
            && let Err(e) = file::save(dir, &guard)
        {
            tracing::warn!("cannot save {}: {e}", file::state_path(dir).display());
        }
        out
    }

    pub fn yolo(&self) -> bool {
        self.read(|s| s.approval.yolo)
    }

    pub fn afk(&self) -> bool {
        self.read(|s| s.approval.afk)
    }

    /// Approvals are skipped (yolo or afk).
    pub fn bypass_approvals(&self) -> bool {
        self.read(|s| s.approval.yolo || s.approval.afk)
    }

    pub fn set_yolo(&self, on: bool) {
        self.update(|s| s.approval.yolo = on);
    }

    pub fn set_afk(&self, on: bool) {
        self.update(|s| s.approval.afk = on);
    }

    pub fn is_session_approved(&self, action: &str) -> bool {
        self.read(|s| s.approval.auto_approve_actions.iter().any(|a| a == action))
    }

    pub fn approve_for_session(&self, action: &str) {
        if !self.is_session_approved(action) {
            self.update(|s| s.approval.auto_approve_actions.push(action.to_string()));
        }
    }

    pub fn plan_mode(&self) -> bool {
        self.read(|s| s.plan_mode)
    }

    pub fn plan(&self) -> PlanView {
        self.read(|s| PlanView {
            active: s.plan_mode,
            file: s.plan_slug.as_deref().filter(|_| s.plan_mode).map(super::plan::plan_file),
        })
    }

    /// Switches plan mode (`wire-1.10.md` §6.1): on allocates a plan id and slug unless they are
    /// kept from before, off clears them. Persisted even when unchanged.
    pub fn set_plan_mode(&self, on: bool) -> PlanView {
        self.update(|s| {
            s.plan_mode = on;
            if on {
                if s.plan_session_id.is_none() || s.plan_slug.is_none() {
                    let id = uuid::Uuid::new_v4().simple().to_string();
                    s.plan_slug = Some(super::plan::new_slug(&id));
                    s.plan_session_id = Some(id);
                }
            } else {
                s.plan_session_id = None;
                s.plan_slug = None;
            }
        });
        // The plans folder is made when it is first needed, so the plan file can be written.
        if on && let Err(e) = std::fs::create_dir_all(super::plan::plans_dir()) {
            tracing::warn!("cannot create {}: {e}", super::plan::plans_dir().display());
        }
        self.plan()
    }

    pub fn todos(&self) -> Vec<TodoItem> {
        self.read(|s| s.todos.clone())
    }

    pub fn set_todos(&self, todos: Vec<TodoItem>) {
        self.update(|s| s.todos = todos);
    }

    pub fn additional_dirs(&self) -> Vec<String> {
        self.read(|s| s.additional_dirs.clone())
    }

    pub fn add_dir(&self, dir: String) {
        self.update(|s| s.additional_dirs.push(dir));
    }

    /// Sets the title from the first completed prompt, once (`wire-1.10.md` §10.2).
    pub fn title_from_first_prompt(&self, text: &str) {
        if self.read(|s| s.custom_title.is_some()) {
            return;
        }
        let title = title_of(text);
        if !title.is_empty() {
            self.update(|s| s.custom_title = Some(title));
        }
    }

    /// Drops added directories that no longer exist (on resume).
    pub fn prune_missing_dirs(&self) {
        let dirs = self.additional_dirs();
        let kept: Vec<String> = dirs.iter().filter(|d| Path::new(d).is_dir()).cloned().collect();
        if kept.len() != dirs.len() {
            self.update(|s| s.additional_dirs = kept);
        }
    }
}

/// Whitespace normalized, cut to 50 characters at a word boundary with `…`. Reads only as much
/// of `text` as the title needs (a prompt may be tens of megabytes).
fn title_of(text: &str) -> String {
    const MAX: usize = 50;
    let mut normalized = String::new();
    let mut count = 0;
    let mut pending_space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            pending_space = count > 0;
            continue;
        }
        if pending_space {
            normalized.push(' ');
            count += 1;
            pending_space = false;
        }
        normalized.push(c);
        count += 1;
        if count > MAX {
            break;
        }
    }
    if count <= MAX {
        return normalized;
    }
    let cut: String = normalized.chars().take(MAX - 1).collect();
    let at_word = match cut.rfind(' ') {
        Some(i) if i > 0 => cut[..i].to_string(),
        _ => cut,
    };
    format!("{}…", at_word.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_written_until_something_changes() {
        let dir = tempfile::tempdir().unwrap();
        let state = SessionState::load(dir.path(), true);
        assert!(state.yolo());
        assert!(!dir.path().join("state.json").exists(), "--yolo alone writes nothing");
        state.approve_for_session("run command");
        let saved = crate::session::state::load(dir.path());
        assert!(saved.approval.yolo, "the whole approval object is persisted, --yolo included");
        assert_eq!(saved.approval.auto_approve_actions, ["run command"]);
        let again = SessionState::load(dir.path(), false);
        assert!(again.is_session_approved("run command"));
    }

    #[test]
    fn plan_mode_allocates_and_clears_its_file() {
        let state = SessionState::in_memory(false);
        assert_eq!(state.plan(), PlanView { active: false, file: None });
        let on = state.set_plan_mode(true);
        let file = on.file.clone().unwrap();
        assert!(file.to_string_lossy().ends_with(".md"));
        assert_eq!(state.set_plan_mode(true).file, Some(file.clone()), "kept while it stays on");
        assert_eq!(state.set_plan_mode(false), PlanView { active: false, file: None });
        assert!(state.read(|s| s.plan_slug.is_none() && s.plan_session_id.is_none()));
    }

    #[test]
    fn titles_are_normalized_and_cut_at_a_word() {
        assert_eq!(title_of("  run   the\nshell "), "run the shell");
        let long = "word ".repeat(20);
        let t = title_of(&long);
        assert!(t.ends_with('…') && t.chars().count() <= 50, "{t}");
        assert!(!t.contains("wor…"));
        assert_eq!(title_of("   "), "");
        assert_eq!(title_of(&"x".repeat(50)), "x".repeat(50));
        assert_eq!(title_of(&"x".repeat(51)).chars().count(), 50);
    }
}
