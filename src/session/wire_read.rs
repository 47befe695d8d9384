//! Reading `wire.jsonl` back (`docs/protocol-1.10.md` §2.6): the records a session recorded, in order, in
//! the current shape, for any front end that replays or loads a session.
//!
//! Invariants: the file is read line by line (memory stays flat for any size); blank lines, the
//! metadata header, lines that do not parse (a torn last line), records of unknown types and
//! records whose payload does not validate are skipped, never an error; a record of an older
//! protocol is read in the current shape (see `protocol::event`).

use std::io::{BufRead, BufReader};
use std::path::Path;

use serde::Deserialize;

use crate::protocol::WireMessage;

#[derive(Deserialize)]
struct Record {
    message: WireMessage,
}

/// The records of the file at `path`; `Ok(None)` when the file does not exist.
pub fn open(path: &Path) -> std::io::Result<Option<WireRecords>> {
    match std::fs::File::open(path) {
        Ok(file) => Ok(Some(WireRecords { lines: BufReader::with_capacity(64 * 1024, file), line: String::new() })),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// An iterator over the readable records of one file.
pub struct WireRecords {
    lines: BufReader<std::fs::File>,
    line: String,
}

impl Iterator for WireRecords {
    type Item = std::io::Result<WireMessage>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            self.line.clear();
            match self.lines.read_line(&mut self.line) {
                Ok(0) => return None,
                Ok(_) => {}
                // A line that is not UTF-8 is skipped like any unreadable line.
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => continue,
                Err(e) => return Some(Err(e)),
            }
            if let Some(message) = parse(&self.line) {
                return Some(Ok(message));
            }
        }
    }
}

/// One line of the file as a record in the current shape; `None` for what is skipped (blank
/// lines, the header, unreadable records).
pub fn parse(line: &str) -> Option<WireMessage> {
    let text = line.trim();
    if text.is_empty() {
        return None;
    }
    match serde_json::from_str::<Record>(text) {
        Ok(record) => Some(record.message),
        Err(e) => {
            tracing::debug!("wire.jsonl: skipping a line ({e})");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{Event, Request};

    #[test]
    fn readable_records_in_order_bad_ones_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wire.jsonl");
        assert!(open(&path).unwrap().is_none());
        let text = [
            r#"{"type": "metadata", "protocol_version": "1.2"}"#,
            "",
            r#"{"timestamp": 1.0, "message": {"type": "TurnBegin", "payload": {"user_input": "go"}}}"#,
            r#"{"timestamp": 1.1, "message": {"type": "Bogus", "payload": {}}}"#,
            r#"{"timestamp": 1.2, "message": {"type": "StepBegin", "payload": {"n": "x"}}}"#,
            "not json at all",
            r#"{"timestamp": 1.3, "message": {"type": "ApprovalRequest", "payload": {"id": "a", "tool_call_id": "t", "sender": "Shell", "action": "run command", "description": "d", "display": []}}}"#,
            r#"{"timestamp": 1.4, "message": {"type": "StatusUpdate", "payload": {"context_usage": null, "token_usage": null, "message_id": null}}}"#,
            r#"{"timestamp": 1.5, "message": {"type": "TurnEnd", "pay"#,
        ]
        .join("\n");
        std::fs::write(&path, text).unwrap();
        let records: Vec<WireMessage> = open(&path).unwrap().unwrap().map(Result::unwrap).collect();
        assert_eq!(records.len(), 3);
        assert!(matches!(records[0], WireMessage::Event(Event::TurnBegin { .. })));
        assert!(matches!(records[1], WireMessage::Request(Request::ApprovalRequest(_))));
        assert!(matches!(&records[2], WireMessage::Event(Event::StatusUpdate(s)) if s.plan_mode.is_none()));
    }

    #[test]
    fn invalid_utf8_lines_are_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wire.jsonl");
        let mut bytes = b"\xff\xfe\n".to_vec();
        bytes.extend_from_slice(br#"{"timestamp": 1, "message": {"type": "TurnEnd", "payload": {}}}"#);
        std::fs::write(&path, bytes).unwrap();
        assert_eq!(open(&path).unwrap().unwrap().count(), 1);
    }
}
