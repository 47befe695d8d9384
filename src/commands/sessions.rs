//! `kiwi sessions [--json] [--archived]` (`docs/subcommands.md` §6): the stored sessions of
//! every work dir in `kimi.json`, most recently updated first.
//!
//! Invariants: reads only (no file is created or changed, the share dir included); text mode
//! prints one line per session, `--json` one JSON array on one line.

use std::process::ExitCode;

use serde_json::{Value, json};

use crate::session::catalog::{self, SessionInfo};

/// The lines `kiwi sessions` prints for `sessions`.
pub fn lines(sessions: &[SessionInfo], json: bool) -> Vec<String> {
    if json {
        let list: Vec<Value> = sessions
            .iter()
            .map(|s| {
                json!({
                    "session_id": s.id,
                    "title": s.title,
                    "work_dir": s.work_dir,
                    "session_dir": s.session_dir.to_string_lossy(),
                    "updated_at": catalog::rfc3339(s.last_updated),
                    "archived": s.archived,
                })
            })
            .collect();
        return vec![Value::Array(list).to_string()];
    }
    if sessions.is_empty() {
        return vec!["No sessions found.".into()];
    }
    sessions
        .iter()
        .map(|s| {
            let updated: chrono::DateTime<chrono::Local> = s.last_updated.into();
            let archived = if s.archived { " (archived)" } else { "" };
            format!("{}  {}  {}  {}{archived}", s.id, updated.format("%Y-%m-%d %H:%M"), s.work_dir, s.title)
        })
        .collect()
}

pub(super) fn run(share: &std::path::Path, json: bool, archived_only: bool) -> ExitCode {
    let mut sessions = catalog::list_all(share);
    if archived_only {
        sessions.retain(|s| s.archived);
    }
    for line in lines(&sessions, json) {
        super::print_line(&line);
    }
    ExitCode::SUCCESS
}
