//! The session's live state (`docs/protocol-1.10.md` §10.2): approval flags and session approvals, plan
//! mode, added directories, title and todos, shared by the main agent, its tools and the front end.
//!
//! Invariants: every change goes through one lock and, when the spec says it is persisted, is
//! written to `state.json` before the change is visible to anyone else — except the todo list,
//! which `SetTodoList` may change on every step: it is written behind the turn
//! (`super::state_writer`) and is on disk before the turn ends; nothing is written until
//! something changes (a session whose only prompt failed has no `state.json`); a session without
//! a folder (tests, the nested `/init` agent) keeps its state in memory only.
//!
//! Approvals: `state.json` holds only what the user chose inside the session (`/yolo`, `/afk`,
//! approve-for-session). What the invocation grants (`--yolo`, the yolo print mode implies)
//! lives in memory for this run and is never written, so one `--yolo` run cannot make every
//! later resume yolo. A front end with approval rules of its own (the Claude dialect) counts only
//! this run's grants: what earlier runs saved is set aside for it (see `docs/approvals.md`).

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use super::state_writer::StateWriter;
use crate::config::prices::round_usd;
use crate::protocol::{StepCost, TodoItem};
use crate::session::state::{self as file, CostRecord, SessionStateFile};
pub use crate::tools::PlanView;

/// Approval grants made in this process: the invocation's flags, then what the user chose since.
#[derive(Debug, Clone, Default)]
struct RunGrants {
    yolo: bool,
    afk: bool,
    /// Actions approved for the session in this run.
    actions: Vec<String>,
}

struct Inner {
    /// What `state.json` holds.
    file: SessionStateFile,
    run: RunGrants,
    /// Whether the grants `state.json` carries from earlier runs count (false for a front end
    /// with its own approval rules).
    saved_grants: bool,
    /// Tokens the session's model calls used in this process (every agent of the session),
    /// counted against `loop_control.max_session_tokens`.
    tokens_used: u64,
    /// A model call without a price happened before the session's first priced one (in this
    /// process, or in the history it resumed): the cost sum starts incomplete.
    unpriced_before: bool,
    /// The session's cost when the running turn began (the turn's cost is the difference).
    turn_start_usd: f64,
}

impl Inner {
    fn new(file: SessionStateFile, yolo: bool) -> Self {
        let turn_start_usd = file.cost.map_or(0.0, |c| c.usd);
        Self {
            file,
            run: RunGrants { yolo, ..RunGrants::default() },
            saved_grants: true,
            tokens_used: 0,
            unpriced_before: false,
            turn_start_usd,
        }
    }
}

pub struct SessionState {
    /// Writes `state.json` in the session folder; `None` keeps everything in memory.
    writer: Option<Arc<StateWriter>>,
    inner: Mutex<Inner>,
}

impl SessionState {
    /// The state saved in `session_dir` (defaults when there is none); `yolo` is the invocation's
    /// flag, for this run only.
    pub fn load(session_dir: &Path, yolo: bool) -> Self {
        let state = file::load(session_dir);
        if state.approval.yolo || state.approval.afk {
            // Older kiwi versions also saved `--yolo` (and print mode's implied yolo) here; such a
            // flag cannot be told from a `/yolo` the user chose, so it is honoured, and said.
            tracing::warn!(
                "{} has {} on, saved by an earlier run: approvals are skipped unless the front end has rules \
                 of its own (/yolo or /afk turns it off)",
                file::state_path(session_dir).display(),
                if state.approval.yolo { "yolo" } else { "afk" }
            );
        }
        Self { writer: Some(StateWriter::new(session_dir.to_path_buf())), inner: Mutex::new(Inner::new(state, yolo)) }
    }

    pub fn in_memory(yolo: bool) -> Self {
        Self { writer: None, inner: Mutex::new(Inner::new(SessionStateFile::default(), yolo)) }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads a snapshot of what `state.json` holds.
    pub fn read<T>(&self, f: impl FnOnce(&SessionStateFile) -> T) -> T {
        f(&self.lock().file)
    }

    /// Changes what `state.json` holds and persists it.
    pub fn update<T>(&self, f: impl FnOnce(&mut SessionStateFile) -> T) -> T {
        let mut guard = self.lock();
        let out = f(&mut guard.file);
        self.save(&guard);
        out
    }

    /// Persists what `inner` holds before returning (the caller holds the lock).
    fn save(&self, inner: &Inner) {
        if let Some(writer) = &self.writer {
            writer.save(inner.file.clone());
        }
    }

    /// Waits until every change is on disk (the end of a turn, the end of a session).
    pub fn flush(&self) {
        if let Some(writer) = &self.writer {
            writer.flush();
        }
    }

    /// Sets aside the grants earlier runs saved (a front end with approval rules of its own
    /// calls this before the first turn): from now on only this run's grants count.
    pub fn count_only_this_runs_grants(&self) {
        self.lock().saved_grants = false;
    }

    /// Whether yolo is on for this run.
    pub fn yolo(&self) -> bool {
        let s = self.lock();
        s.run.yolo || (s.saved_grants && s.file.approval.yolo)
    }

    /// Whether afk is on for this run.
    pub fn afk(&self) -> bool {
        let s = self.lock();
        s.run.afk || (s.saved_grants && s.file.approval.afk)
    }

    /// Approvals are skipped (yolo or afk).
    pub fn bypass_approvals(&self) -> bool {
        self.yolo() || self.afk()
    }

    /// The user's `/yolo`: on or off for this run, and saved.
    pub fn set_yolo(&self, on: bool) {
        let mut s = self.lock();
        s.run.yolo = on;
        s.file.approval.yolo = on;
        self.save(&s);
    }

    /// A front end's mode (ACP's `yolo` mode): yolo on or off for this run only, never saved as
    /// if the user had typed `/yolo`. Turning it off also turns off a yolo saved by earlier
    /// runs (off is what the user chose), and that off is saved.
    pub fn set_yolo_for_run(&self, on: bool) {
        let mut s = self.lock();
        s.run.yolo = on;
        if !on && s.file.approval.yolo {
            s.file.approval.yolo = false;
            self.save(&s);
        }
    }

    /// Counts the tokens of one model call (input, cached input and output) against the
    /// session's budget; the new total.
    pub fn count_tokens(&self, n: u64) -> u64 {
        let mut s = self.lock();
        s.tokens_used = s.tokens_used.saturating_add(n);
        s.tokens_used
    }

    /// Tokens the session's model calls used in this process.
    pub fn tokens_used(&self) -> u64 {
        self.lock().tokens_used
    }

    /// Counts one model call's dollars (`None`: its model has no price) into the session's
    /// running cost, persisted with the session; the call's cost with the turn's and the
    /// session's sums, or `None` when the session's cost is not known (an unpriced call).
    pub fn count_cost(&self, usd: Option<f64>) -> Option<StepCost> {
        let mut s = self.lock();
        let record = match (usd, s.file.cost) {
            (Some(usd), Some(c)) => CostRecord { usd: round_usd(c.usd + usd), complete: c.complete },
            (Some(usd), None) => CostRecord { usd, complete: !s.unpriced_before },
            (None, Some(c)) if c.complete => CostRecord { complete: false, ..c },
            (None, Some(_)) => return None,
            (None, None) => {
                s.unpriced_before = true;
                return None;
            }
        };
        s.file.cost = Some(record);
        self.save(&s);
        let usd = usd?;
        record.complete.then(|| StepCost {
            step_usd: usd,
            turn_usd: round_usd(record.usd - s.turn_start_usd),
            session_usd: record.usd,
        })
    }

    /// The session's cost in dollars: `Some` only while every model call of the session had a
    /// price (0 before the first call).
    pub fn cost_usd(&self) -> Option<f64> {
        let s = self.lock();
        match s.file.cost {
            Some(c) => c.complete.then_some(c.usd),
            None => (!s.unpriced_before).then_some(0.0),
        }
    }

    /// The session resumed a history whose model calls were not priced (no cost record): its
    /// cost sum can only be a lower bound.
    pub fn note_unpriced_history(&self) {
        let mut s = self.lock();
        if s.file.cost.is_none() {
            s.unpriced_before = true;
        }
    }

    /// A turn begins: its cost counts from here.
    pub fn begin_turn_cost(&self) {
        let mut s = self.lock();
        s.turn_start_usd = s.file.cost.map_or(0.0, |c| c.usd);
    }

    /// The invocation's `--afk` (and the afk kimi's `--print` implies): on for this run only,
    /// never saved.
    pub fn grant_afk_for_run(&self) {
        self.lock().run.afk = true;
    }

    /// The user's `/afk`: on or off for this run, and saved.
    pub fn set_afk(&self, on: bool) {
        let mut s = self.lock();
        s.run.afk = on;
        s.file.approval.afk = on;
        self.save(&s);
    }

    pub fn is_session_approved(&self, action: &str) -> bool {
        let s = self.lock();
        s.run.actions.iter().any(|a| a == action)
            || (s.saved_grants && s.file.approval.auto_approve_actions.iter().any(|a| a == action))
    }

    /// Whether the session's grants that count (see [`Self::count_only_this_runs_grants`])
    /// approve `action` without asking: yolo, afk, or the action approved for the session.
    pub fn grants(&self, action: &str) -> bool {
        self.bypass_approvals() || self.is_session_approved(action)
    }

    /// The user's approve-for-session: for this run, and saved.
    pub fn approve_for_session(&self, action: &str) {
        let mut s = self.lock();
        if !s.run.actions.iter().any(|a| a == action) {
            s.run.actions.push(action.to_string());
        }
        if !s.file.approval.auto_approve_actions.iter().any(|a| a == action) {
            s.file.approval.auto_approve_actions.push(action.to_string());
            self.save(&s);
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

    /// Switches plan mode (`docs/protocol-1.10.md` §6.1): on allocates a plan id and slug unless they are
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

    /// Replaces the todo list; written behind the caller (see the module's invariants).
    pub fn set_todos(&self, todos: Vec<TodoItem>) {
        let mut guard = self.lock();
        guard.file.todos = todos;
        if let Some(writer) = &self.writer {
            writer.save_later(guard.file.clone());
        }
    }

    pub fn additional_dirs(&self) -> Vec<String> {
        self.read(|s| s.additional_dirs.clone())
    }

    pub fn add_dir(&self, dir: String) {
        self.update(|s| s.additional_dirs.push(dir));
    }

    /// Sets the title from the first completed prompt, once (`docs/protocol-1.10.md` §10.2).
    /// Sets the title from the first completed prompt, once (`docs/protocol-1.10.md` §10.2). The
    /// title on disk counts: one the web server set meanwhile is kept (the write keeps the
    /// web-owned members as the disk has them; `docs/web-api.md` §2.2).
    pub fn title_from_first_prompt(&self, text: &str) {
        if self.read(|s| s.custom_title.is_some()) {
            return;
        }
        let title = title_of(text);
        if !title.is_empty() {
            self.update(|s| s.custom_title = Some(title));
        }
    }

    /// Puts back the state a turn began with (an undo, `docs/sessions.md` §9): all of it but the
    /// title and the web layer's members; this run's yolo and afk follow the saved flags where
    /// those change. Approvals granted for the session in this run stay for the run.
    pub fn restore(&self, mut saved: SessionStateFile) {
        let mut s = self.lock();
        saved.custom_title.clone_from(&s.file.custom_title);
        saved.title_generated = s.file.title_generated;
        saved.title_generate_attempts = s.file.title_generate_attempts;
        saved.archived = s.file.archived;
        saved.archived_at = s.file.archived_at;
        saved.auto_archive_exempt = s.file.auto_archive_exempt;
        saved.wire_mtime = s.file.wire_mtime;
        // An undo gives no money back: the running cost stays.
        saved.cost = s.file.cost;
        if saved.approval.yolo != s.file.approval.yolo {
            s.run.yolo = saved.approval.yolo;
        }
        if saved.approval.afk != s.file.approval.afk {
            s.run.afk = saved.approval.afk;
        }
        s.file = saved;
        self.save(&s);
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

impl Drop for SessionState {
    /// A session's last changes reach the disk whichever way it ends.
    fn drop(&mut self) {
        self.flush();
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
    fn the_running_cost_is_saved_and_a_resume_continues_it() {
        let dir = tempfile::tempdir().unwrap();
        let state = SessionState::load(dir.path(), false);
        assert_eq!(state.cost_usd(), Some(0.0));
        state.begin_turn_cost();
        let first = state.count_cost(Some(0.009)).unwrap();
        assert_eq!(first, StepCost { step_usd: 0.009, turn_usd: 0.009, session_usd: 0.009 });
        state.begin_turn_cost();
        state.count_cost(Some(0.006));
        let second = state.count_cost(Some(0.01)).unwrap();
        assert_eq!(second, StepCost { step_usd: 0.01, turn_usd: 0.016, session_usd: 0.025 });
        state.flush();
        let record = crate::session::state::load(dir.path()).cost.unwrap();
        assert_eq!((record.usd, record.complete), (0.025, true));
        // The next process of the session continues the sum.
        let again = SessionState::load(dir.path(), false);
        assert_eq!(again.cost_usd(), Some(0.025));
        again.begin_turn_cost();
        let next = again.count_cost(Some(0.005)).unwrap();
        assert_eq!(next, StepCost { step_usd: 0.005, turn_usd: 0.005, session_usd: 0.03 });
    }

    #[test]
    fn one_unpriced_call_makes_the_cost_unknown_for_good() {
        let dir = tempfile::tempdir().unwrap();
        let state = SessionState::load(dir.path(), false);
        state.count_cost(Some(0.5));
        assert_eq!(state.count_cost(None), None);
        assert_eq!(state.count_cost(Some(0.5)), None, "a later priced call shows no sum that is not known");
        assert_eq!(state.cost_usd(), None);
        state.flush();
        assert_eq!(SessionState::load(dir.path(), false).cost_usd(), None, "saved as not known");
        // Unpriced calls first: the first priced one starts an incomplete sum.
        let state = SessionState::in_memory(false);
        assert_eq!(state.count_cost(None), None);
        assert_eq!(state.count_cost(Some(1.0)), None);
        assert_eq!(state.cost_usd(), None);
        // So does a resumed history that had no prices.
        let state = SessionState::in_memory(false);
        state.note_unpriced_history();
        assert_eq!(state.count_cost(Some(1.0)), None);
    }

    #[test]
    fn a_session_without_prices_writes_no_cost() {
        let dir = tempfile::tempdir().unwrap();
        let state = SessionState::load(dir.path(), false);
        state.count_cost(None);
        state.set_todos(Vec::new());
        state.flush();
        let text = std::fs::read_to_string(dir.path().join("state.json")).unwrap();
        assert!(!text.contains("cost"), "{text}");
    }

    #[test]
    fn an_undo_gives_no_money_back() {
        let state = SessionState::in_memory(false);
        let before = state.read(Clone::clone);
        state.count_cost(Some(0.25));
        state.restore(before);
        assert_eq!(state.cost_usd(), Some(0.25));
    }

    #[test]
    fn nothing_is_written_until_something_changes() {
        let dir = tempfile::tempdir().unwrap();
        let state = SessionState::load(dir.path(), false);
        assert!(!state.yolo());
        assert!(!dir.path().join("state.json").exists());
        state.approve_for_session("run command");
        let saved = crate::session::state::load(dir.path());
        assert_eq!(saved.approval.auto_approve_actions, ["run command"]);
        let again = SessionState::load(dir.path(), false);
        assert!(again.is_session_approved("run command"), "approve-for-session outlives the process");
    }

    #[test]
    fn what_the_web_server_wrote_meanwhile_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let state = SessionState::load(dir.path(), false);
        state.set_todos(Vec::new());
        state.flush();
        // The web server renames and archives the session while the agent runs.
        crate::session::state::update_file(dir.path(), |s| {
            s.custom_title = Some("mine".into());
            s.title_generated = true;
            s.archived = true;
        })
        .unwrap();
        state.title_from_first_prompt("the first prompt");
        state.approve_for_session("run command");
        state.flush();
        let saved = crate::session::state::load(dir.path());
        assert_eq!(saved.custom_title.as_deref(), Some("mine"));
        assert!(saved.title_generated && saved.archived);
        assert_eq!(saved.approval.auto_approve_actions, ["run command"]);
        // Without a web title, the first prompt names the session.
        let fresh = tempfile::tempdir().unwrap();
        let state = SessionState::load(fresh.path(), false);
        state.set_todos(Vec::new());
        state.title_from_first_prompt("the first prompt");
        state.flush();
        assert_eq!(crate::session::state::load(fresh.path()).custom_title.as_deref(), Some("the first prompt"));
    }

    #[test]
    fn an_invocation_flag_is_never_saved() {
        let dir = tempfile::tempdir().unwrap();
        let state = SessionState::load(dir.path(), true);
        assert!(state.yolo() && state.bypass_approvals());
        assert!(!dir.path().join("state.json").exists(), "--yolo alone writes nothing");
        // Any later write persists only what the user chose inside the session.
        state.approve_for_session("run command");
        state.set_todos(Vec::new());
        state.title_from_first_prompt("hello");
        let saved = crate::session::state::load(dir.path());
        assert!(!saved.approval.yolo, "the flag stays in memory");
        assert_eq!(saved.approval.auto_approve_actions, ["run command"]);
        let again = SessionState::load(dir.path(), false);
        assert!(!again.yolo(), "the next run without --yolo asks again");
    }

    #[test]
    fn slash_yolo_is_the_users_choice_and_is_saved() {
        let dir = tempfile::tempdir().unwrap();
        // `--yolo` then `/yolo`: off for this run, and off is what is saved.
        let state = SessionState::load(dir.path(), true);
        state.set_yolo(!state.yolo());
        assert!(!state.yolo());
        assert!(!crate::session::state::load(dir.path()).approval.yolo);
        // `--afk` is for its run only.
        let flagged = SessionState::load(dir.path(), false);
        flagged.grant_afk_for_run();
        assert!(flagged.afk() && flagged.bypass_approvals());
        flagged.set_todos(Vec::new());
        assert!(!file::load(dir.path()).approval.afk, "the flag stays in memory");
        assert!(!SessionState::load(dir.path(), false).afk());
        // `/yolo` and `/afk` turned on inside the session are saved and come back.
        state.set_yolo(true);
        state.set_afk(true);
        let again = SessionState::load(dir.path(), false);
        assert!(again.yolo() && again.afk());
    }

    #[test]
    fn a_front_end_with_its_own_rules_counts_only_this_runs_grants() {
        let dir = tempfile::tempdir().unwrap();
        let earlier = SessionState::load(dir.path(), false);
        earlier.set_yolo(true);
        earlier.set_afk(true);
        earlier.approve_for_session("run command");
        let state = SessionState::load(dir.path(), false);
        assert!(state.grants("run command") && state.grants("edit file"));
        state.count_only_this_runs_grants();
        assert!(!state.yolo() && !state.afk() && !state.bypass_approvals());
        assert!(!state.is_session_approved("run command") && !state.grants("run command"));
        state.approve_for_session("run command");
        assert!(state.grants("run command"), "granted in this run");
        assert!(!state.grants("edit file"));
        let saved = crate::session::state::load(dir.path());
        assert!(saved.approval.yolo && saved.approval.afk, "what earlier runs saved is kept on disk");
        assert_eq!(saved.approval.auto_approve_actions, ["run command"]);
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
