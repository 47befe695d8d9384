//! `kiwi export [SESSION_ID] [-o PATH] [-y]` (`docs/subcommands.md` §7): a session as a ZIP
//! archive (see `session::export`), by id (the work dir's session first, then any work dir's), or
//! the work dir's previous session after a confirmation.
//!
//! Invariants: stdout carries the archive's path (and the confirmation dialogue); errors go to
//! stderr with exit 1; the archive appears whole or not at all.

use std::io::BufRead as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::session::store::{self, Metadata};

#[allow(clippy::print_stderr)]
fn fail(message: &str) -> ExitCode {
    eprintln!("Error: {message}");
    ExitCode::FAILURE
}

/// The folder of session `id`: the work dir's own first, then any work dir's.
pub fn find_session_dir(share: &Path, work_dir: &Path, id: &str) -> Option<PathBuf> {
    crate::session::id::check_session_id(id).ok()?;
    if let Some(dir) = store::stored_session(share, work_dir, id) {
        return Some(dir);
    }
    let mut roots: Vec<PathBuf> = std::fs::read_dir(share.join("sessions")).ok()?.flatten().map(|e| e.path()).collect();
    roots.sort();
    roots.into_iter().map(|r| r.join(id)).find(|d| d.is_dir())
}

/// Asks on stdout, reads one answer from stdin; `None` at end of input.
fn confirm(question: &str) -> Option<bool> {
    super::print_prompt(&format!("{question} [y/N]: "));
    let mut answer = String::new();
    match std::io::stdin().lock().read_line(&mut answer) {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(matches!(answer.trim().to_lowercase().as_str(), "y" | "yes")),
    }
}

#[allow(clippy::print_stderr)]
pub(super) fn run(share: &Path, work_dir: &Path, id: Option<&str>, output: Option<&Path>, yes: bool) -> ExitCode {
    let (id, session_dir) = match id {
        Some(id) => match find_session_dir(share, work_dir, id) {
            Some(dir) => (id.to_string(), dir),
            None => return fail(&format!("session '{id}' not found.")),
        },
        None => {
            let work = work_dir.to_string_lossy().to_string();
            let last = Metadata::load(share).entry(&work).and_then(|e| e.last_session_id.clone());
            let found = last.and_then(|id| store::stored_session(share, work_dir, &id).map(|dir| (id, dir)));
            let Some((id, dir)) = found else {
                return fail("no previous session found for the working directory.");
            };
            if !yes {
                let state = crate::session::state::load(&dir);
                let title = crate::session::catalog::title(&dir, &state, crate::session::catalog::LIST_TITLE_CHARS);
                super::print_line("About to export the previous session for this working directory:");
                super::print_line("");
                super::print_line(&format!("Work dir: {work}"));
                super::print_line(&format!("Session ID: {id}"));
                super::print_line(&format!("Title: {title}"));
                super::print_line("");
                match confirm("Export this session?") {
                    Some(true) => {}
                    Some(false) => {
                        super::print_line("Export cancelled.");
                        return ExitCode::SUCCESS;
                    }
                    None => {
                        super::print_line("");
                        eprintln!("Aborted!");
                        return ExitCode::FAILURE;
                    }
                }
            }
            (id, dir)
        }
    };
    match crate::session::export::session_files(&session_dir) {
        Ok(files) if !files.is_empty() => {}
        _ => return fail(&format!("session '{id}' has no files.")),
    }
    let target = match output {
        Some(p) => p.to_path_buf(),
        None => std::env::current_dir().unwrap_or_default().join(format!("session-{id}.zip")),
    };
    let logs = crate::session::export::recent_logs(share, &session_dir, std::time::SystemTime::now());
    match crate::session::export::export_to(&session_dir, &logs, &target) {
        Ok(exported) => {
            super::print_line(&target.display().to_string());
            if !exported.logs.is_empty() {
                eprintln!(
                    "\nNote: This archive includes recent diagnostic logs that may contain file paths, commands, \
                     or configuration from other sessions. Please review the contents before sharing."
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(&format!("cannot write {}: {e}", target.display())),
    }
}
