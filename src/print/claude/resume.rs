//! The session a Claude run resumes (`docs/print-mode.md`, "Session APIs"): `--fork-session`
//! copies the resumed (or continued) session into a new one first (named by `--session-id`
//! when given); `--resume-session-at UUID` keeps the history up to the turn that message ends
//! (found through `super::ledger`), in the fork or, without one, by cutting the session itself;
//! `--resume-drops-turn PROMPT` lets that cut discard only the turn of that prompt.
//!
//! Choices where Claude Code differs by design: kiwi's history is cut at turn boundaries, so a
//! uuid must name the last message of its turn (or its `result`); a prompt or a message inside
//! a turn is refused with a line that names the turn's last message. Without `--fork-session`
//! the cut turns are gone from the session (Claude Code keeps them as a side branch of its
//! transcript that no later resume shows); files are never touched (that is `rewind_files`).
//!
//! Invariants: nothing is written before every check passed; a source that does not exist is
//! left for the caller to report (`No conversation found with session ID: …`).

use std::path::Path;

use super::args::ClaudeArgs;
use super::ledger::{self, Point};
use crate::session::fork::{fork_as, turn_count};
use crate::session::rewind::{cut_history, turn_starts};
use crate::session::store::{Metadata, SessionChoice, stored_session};

/// The session to open, or the text of the error `result` that ends the run.
pub fn choose(args: &ClaudeArgs, share: &Path, work_dir: &Path) -> Result<SessionChoice, String> {
    let plain = match (&args.resume, &args.session_id, args.continue_) {
        (Some(id), _, _) => SessionChoice::Id(id.trim().to_string()),
        (None, Some(id), false) => SessionChoice::Id(id.trim().to_string()),
        (None, _, true) => SessionChoice::Continue,
        (None, None, false) => SessionChoice::New,
    };
    let source_id = match (&args.resume, args.continue_) {
        (Some(id), _) => Some(id.trim().to_string()),
        (None, true) => {
            let work = work_dir.to_string_lossy().to_string();
            Metadata::load(share).entry(&work).and_then(|e| e.last_session_id.clone())
        }
        (None, false) => None,
    };
    let Some(source) = source_id.as_deref().and_then(|id| stored_session(share, work_dir, id)) else {
        // Nothing to fork or cut: a new session, or a resume that fails as usual.
        return Ok(plain);
    };
    let cut = match &args.resume_session_at {
        Some(at) => Some(cut_at(&source, at.trim(), args.resume_drops_turn.as_deref().map(str::trim))?),
        None => None,
    };
    if args.fork_session {
        // A fork keeps turns 0..=k; a cut point is always after a turn (`kept` ≥ 1).
        let turn = cut.flatten().map(|kept| kept.saturating_sub(1));
        let forked = fork_as(share, work_dir, &source, turn, args.session_id.as_deref())
            .map_err(|e| format!("Cannot fork session {}: {e}", source_id.unwrap_or_default()))?;
        let kept = turn_count(&forked.dir.join("wire.jsonl"));
        if let Err(e) = ledger::copy(&source, &forked.dir, kept) {
            tracing::warn!("cannot copy the message uuids into the fork: {e}");
        }
        return Ok(SessionChoice::Id(forked.id));
    }
    if let Some(Some(kept)) = cut {
        // Cutting writes the session: not while another process hosts it (fork it instead).
        if crate::wire::attach::held_elsewhere(share, work_dir, &plain).is_some() {
            return Err(format!(
                "Cannot resume at that message: session {} is hosted by another process (add --fork-session)",
                source_id.unwrap_or_default()
            ));
        }
        cut_history(&source, kept).map_err(|e| format!("Cannot resume at that message: {e}"))?;
    }
    Ok(plain)
}

/// The number of turns `--resume-session-at at` keeps (`None`: all of them), checked against
/// `--resume-drops-turn`.
fn cut_at(source: &Path, at: &str, drops: Option<&str>) -> Result<Option<u64>, String> {
    let starts = turn_starts(&source.join("wire.jsonl")).map_err(|e| e.to_string())?;
    let records = ledger::load(source, starts.len() as u64);
    let not_found = || format!("No message found with message.uuid of: {at}");
    let (record, point) = ledger::find(&records, at).ok_or_else(not_found)?;
    if point != Point::End {
        let last = record.lines.last().unwrap_or(&record.result);
        return Err(format!(
            "kiwi resumes a session only at the end of a turn: {at} is inside turn {} (its last message is {last})",
            record.turn
        ));
    }
    // The next top-level turn is the first one cut (nested turns go with their turn).
    let dropped: Vec<u64> = starts.iter().filter(|s| s.top && s.index > record.turn).map(|s| s.index).collect();
    if let Some(drops) = drops {
        check_drops(&records, &dropped, at, drops)?;
    }
    Ok(dropped.first().copied())
}

/// `--resume-drops-turn`: what is cut must be exactly the turn of prompt `drops` (or nothing).
fn check_drops(records: &[ledger::TurnRecord], dropped: &[u64], at: &str, drops: &str) -> Result<(), String> {
    let rejected = |reason: String| {
        Err(format!(
            "Resume rejected by --resume-drops-turn: resuming at {at} would discard entries not attributable to \
             turn {drops}: {reason}"
        ))
    };
    if uuid::Uuid::parse_str(drops).is_err() {
        return rejected(format!("declared turn id is not a UUID: {drops}"));
    }
    let Some(&first) = dropped.first() else { return Ok(()) };
    let prompt = records.iter().find(|r| r.turn == first).map(|r| r.prompt.as_str());
    if prompt != Some(drops) {
        let shown = prompt.unwrap_or("unknown");
        return rejected(format!(
            "range does not start with the declared turn prompt; first discarded is turn {first} (prompt {shown})"
        ));
    }
    if dropped.len() > 1 {
        return rejected(format!("range contains {} more turn(s) after the declared one", dropped.len() - 1));
    }
    Ok(())
}
