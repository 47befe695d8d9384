//! Where the Claude dialect's message uuids sit in a session's history (`docs/print-mode.md`,
//! "Session APIs"): the SDK names points of a conversation by the `uuid` of its lines —
//! `--resume-session-at` an assistant line, `rewind_files` a user prompt, `--resume-drops-turn`
//! a prompt — in this run or in a later one. The uuids stay random (UUID v4, or the host's own
//! on its user lines); each turn appends one record to `claude_uuids.jsonl` in the session
//! folder naming its turn number (counted as `session::fork` counts them), its prompt's uuid
//! and the uuids of its lines.
//!
//! Invariants: one append per turn (at its `result`), never a rewrite; a record is believed only
//! while its turn is still in `wire.jsonl` (a later record for the same or an earlier turn
//! number means the turns from there were cut, by an undo or a resume at an earlier point, and
//! replaces them); a file kiwi cannot read or a line it cannot parse costs only those records.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::lines::OutLine;

/// The record file in a session folder.
pub const FILE: &str = "claude_uuids.jsonl";

/// One turn's record.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnRecord {
    /// The turn's number in `wire.jsonl` (from 0, every `TurnBegin` counts).
    pub turn: u64,
    /// The uuid of its user message (the host's, or the one kiwi gave it).
    pub prompt: String,
    /// The uuids of its main-agent `assistant` and `user` lines, in order.
    pub lines: Vec<String>,
    /// The uuid of its `result` line.
    pub result: String,
}

/// Where a uuid points.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// The user message that began the turn.
    Prompt,
    /// A line before the turn's last one.
    Inside,
    /// The turn's last message line or its `result`: the turn is complete up to there.
    End,
}

/// The records still true of the session in `dir`, whose `wire.jsonl` holds `turns` turns.
pub fn load(dir: &Path, turns: u64) -> Vec<TurnRecord> {
    let Ok(file) = std::fs::File::open(dir.join(FILE)) else { return Vec::new() };
    let mut records: Vec<TurnRecord> = Vec::new();
    for line in std::io::BufReader::new(file).lines().map_while(Result::ok) {
        let Ok(record) = serde_json::from_str::<TurnRecord>(&line) else { continue };
        // Turns from this number on were cut before this record was written.
        records.retain(|r| r.turn < record.turn);
        records.push(record);
    }
    records.retain(|r| r.turn < turns);
    records
}

/// The record holding `uuid`, and where in its turn it points.
pub fn find<'a>(records: &'a [TurnRecord], uuid: &str) -> Option<(&'a TurnRecord, Point)> {
    records.iter().rev().find_map(|r| {
        if r.prompt == uuid {
            return Some((r, Point::Prompt));
        }
        if r.result == uuid || r.lines.last().is_some_and(|l| l == uuid) {
            return Some((r, Point::End));
        }
        r.lines.iter().any(|l| l == uuid).then_some((r, Point::Inside))
    })
}

/// Copies the records of turns `0..turns` into the session folder `into` (a fork of `from`).
pub fn copy(from: &Path, into: &Path, turns: u64) -> std::io::Result<()> {
    let records = load(from, turns);
    if records.is_empty() {
        return Ok(());
    }
    let mut text = String::new();
    for record in &records {
        text.push_str(&serde_json::to_string(record).map_err(std::io::Error::other)?);
        text.push('\n');
    }
    std::fs::write(into.join(FILE), text)
}

/// The running turn's record, filled as its lines are written.
#[derive(Default)]
struct Open {
    record: TurnRecord,
    slash: bool,
}

/// Keeps the records of one run's turns.
pub struct Ledger {
    dir: PathBuf,
    /// The number the next turn gets.
    next_turn: Mutex<u64>,
    /// The uuid the next turn's prompt gets (set by the run loop before it starts the turn).
    next_prompt: Mutex<Option<String>>,
    open: Mutex<Option<Open>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Ledger {
    /// The ledger of the session folder `dir` (its `wire.jsonl` read once for the turn count).
    pub fn new(dir: &Path) -> Self {
        let turns = crate::session::fork::turn_count(&dir.join("wire.jsonl"));
        Self {
            dir: dir.to_path_buf(),
            next_turn: Mutex::new(turns),
            next_prompt: Mutex::default(),
            open: Mutex::default(),
        }
    }

    /// The session folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The prompt of the turn about to start has this uuid.
    pub fn set_next_prompt(&self, uuid: String) {
        *lock(&self.next_prompt) = Some(uuid);
    }

    /// A `TurnBegin` (nested ones count too, as in `wire.jsonl`): the top-level one opens a record.
    pub fn begin(&self, prompt_text: &str) {
        let mut next = lock(&self.next_turn);
        let turn = *next;
        *next += 1;
        let mut open = lock(&self.open);
        if open.is_some() {
            return;
        }
        let prompt = lock(&self.next_prompt).take().unwrap_or_else(super::turn::fresh_uuid);
        let slash = prompt_text.trim_start().starts_with('/');
        *open = Some(Open { record: TurnRecord { turn, prompt, ..TurnRecord::default() }, slash });
    }

    /// Lines written for the running turn: its main agent's messages are noted.
    pub fn note(&self, lines: &[OutLine]) {
        let mut open = lock(&self.open);
        let Some(open) = open.as_mut() else { return };
        for line in lines {
            match line {
                OutLine::Assistant(a) if a.parent_tool_use_id.is_none() => open.record.lines.push(a.uuid.clone()),
                OutLine::User(u) if u.parent_tool_use_id.is_none() => open.record.lines.push(u.uuid.clone()),
                _ => {}
            }
        }
    }

    /// The turn's `result` (uuid `result`): the record is appended. A slash command may have cut
    /// the history (`/undo`), so after one the turn count is read again.
    pub fn end(&self, result: &str) {
        let Some(mut open) = lock(&self.open).take() else { return };
        open.record.result = result.to_string();
        if let Err(e) = self.append(&open.record) {
            tracing::warn!("cannot record the uuids of turn {}: {e}", open.record.turn);
        }
        if open.slash {
            self.resync();
        }
    }

    /// Another client's turn ended (a process attached to the session this run hosts): the turn
    /// count is read again from `wire.jsonl`, complete by then.
    pub fn resync(&self) {
        *lock(&self.next_turn) = crate::session::fork::turn_count(&self.dir.join("wire.jsonl"));
    }

    fn append(&self, record: &TurnRecord) -> std::io::Result<()> {
        let mut text = serde_json::to_vec(record).map_err(std::io::Error::other)?;
        text.push(b'\n');
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(self.dir.join(FILE))?;
        file.write_all(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(turn: u64, prompt: &str, lines: &[&str], result: &str) -> TurnRecord {
        TurnRecord {
            turn,
            prompt: prompt.into(),
            lines: lines.iter().map(|l| l.to_string()).collect(),
            result: result.into(),
        }
    }

    fn write(dir: &Path, records: &[TurnRecord]) {
        let text: String = records.iter().map(|r| serde_json::to_string(r).unwrap() + "\n").collect();
        std::fs::write(dir.join(FILE), text).unwrap();
    }

    #[test]
    fn uuids_are_found_with_their_place_in_the_turn() {
        let records = [record(0, "p0", &["a", "b"], "r0"), record(1, "p1", &["c"], "r1")];
        assert_eq!(find(&records, "p1").map(|(r, p)| (r.turn, p)), Some((1, Point::Prompt)));
        assert_eq!(find(&records, "a").map(|(r, p)| (r.turn, p)), Some((0, Point::Inside)));
        assert_eq!(find(&records, "b").map(|(r, p)| (r.turn, p)), Some((0, Point::End)));
        assert_eq!(find(&records, "r1").map(|(r, p)| (r.turn, p)), Some((1, Point::End)));
        assert!(find(&records, "zzz").is_none());
    }

    #[test]
    fn cut_turns_are_forgotten() {
        let dir = tempfile::tempdir().unwrap();
        // Turns 1 and 2 were undone, then a new turn 1 ran; one line is damaged.
        write(dir.path(), &[record(0, "p0", &[], "r0"), record(1, "p1", &[], "r1"), record(2, "p2", &[], "r2")]);
        let mut file = std::fs::OpenOptions::new().append(true).open(dir.path().join(FILE)).unwrap();
        file.write_all(b"{not json\n").unwrap();
        file.write_all((serde_json::to_string(&record(1, "q1", &[], "s1")).unwrap() + "\n").as_bytes()).unwrap();
        let prompts: Vec<String> = load(dir.path(), 2).into_iter().map(|r| r.prompt).collect();
        assert_eq!(prompts, ["p0", "q1"]);
        // The history holds one turn only now (cut without a new turn).
        assert_eq!(load(dir.path(), 1).len(), 1);
        let fork = tempfile::tempdir().unwrap();
        copy(dir.path(), fork.path(), 1).unwrap();
        assert_eq!(load(fork.path(), 5).len(), 1);
    }

    #[test]
    fn a_run_records_each_turn_once() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("wire.jsonl"), "").unwrap();
        let ledger = Ledger::new(dir.path());
        ledger.set_next_prompt("host-uuid".into());
        ledger.begin("hello");
        ledger.end("res");
        ledger.begin("again");
        ledger.end("res2");
        let records = load(dir.path(), 2);
        assert_eq!(records.len(), 2);
        assert_eq!((records[0].turn, records[0].prompt.as_str()), (0, "host-uuid"));
        assert_eq!(records[1].turn, 1);
        assert!(!records[1].prompt.is_empty() && records[1].prompt != "host-uuid");
    }
}
