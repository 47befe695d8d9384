//! What both dialects share: how a turn's end reaches the run loop, stderr lines, and the
//! scripted-echo trace (which must not reach stdout in print mode).
//!
//! Invariants: a [`TurnWaiter`] resolves exactly once per started turn (the projection's
//! `turn_ended` sends through the tag, after every line of the turn is queued); a tag that
//! carries no waiter is logged, never a panic.

use std::io::Write;

use tokio::sync::oneshot;

use crate::llm::build::TraceSink;
use crate::soul::TurnTag;

/// How a turn ended, as the run loop needs it (the lines are already written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnReport {
    pub failed: bool,
    /// Exit status the dialect gives this outcome when it ends the run.
    pub exit_code: u8,
}

/// The run loop's end of a started turn.
pub type TurnWaiter = oneshot::Receiver<TurnReport>;

/// A tag for `TurnDriver::start` and the waiter that resolves when the projection ends it.
pub fn turn_tag() -> (TurnTag, TurnWaiter) {
    let (tx, rx) = oneshot::channel();
    (TurnTag::new(tx), rx)
}

/// Hands the report to the run loop waiting on the tag.
pub fn report_turn(tag: TurnTag, report: TurnReport) {
    match tag.take::<oneshot::Sender<TurnReport>>() {
        Some(tx) => {
            let _ = tx.send(report);
        }
        None => tracing::error!("a print-mode turn ended without its waiter"),
    }
}

/// One line on stderr (progress, warnings, errors). Write errors are ignored: stderr is ours
/// to lose, never a reason to fail a run.
pub fn stderr_line(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    let _ = err.write_all(b"\n");
    let _ = err.flush();
}

/// A print dialect's `--version` or `--help`: printed to stdout, and the run ends there
/// (`Some(exit code)`); `None` when neither was asked.
pub fn version_or_help(version: bool, help: bool, help_text: &str) -> Option<std::process::ExitCode> {
    use std::io::Write as _;
    if version {
        crate::cli::print_version(crate::VERSION);
        return Some(std::process::ExitCode::SUCCESS);
    }
    if help {
        let _ = std::io::stdout().lock().write_all(help_text.as_bytes());
        return Some(std::process::ExitCode::SUCCESS);
    }
    None
}

/// The scripted-echo trace goes to stderr: stdout carries only the dialect's lines.
pub fn trace_to_stderr() -> TraceSink {
    Box::new(|line: String| stderr_line(&line))
}

/// Marks a session this print run created (not one it resumed) as a print run's
/// (`session::origin`), so the web UI can set it apart from the user's own. A failure to write
/// the marker only loses that mark: it is logged and the run goes on.
pub fn mark_created_session(session: &crate::session::Session, dialect: &str) {
    if session.resumed {
        return;
    }
    if let Err(e) = crate::session::origin::mark_print(&session.dir, dialect) {
        tracing::warn!("cannot mark {} as a print run's session: {e}", session.dir.display());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_reaches_its_waiter() {
        let (tag, mut waiter) = turn_tag();
        report_turn(tag, TurnReport { failed: true, exit_code: 1 });
        assert_eq!(waiter.try_recv().unwrap(), TurnReport { failed: true, exit_code: 1 });
        report_turn(TurnTag::new(5u8), TurnReport { failed: false, exit_code: 0 });
    }
}
