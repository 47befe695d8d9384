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
            let text = self.line.trim();
            if text.is_empty() {
                continue;
            }
            match serde_json::from_str::<Record>(text) {
                Ok(record) => return Some(Ok(record.message)),
                Err(e) => tracing::debug!("wire.jsonl: skipping a line ({e})"),
            }
        }
    }
}

/// What kiwi keeps beside the records for a person's view (`docs/sessions.md` §6): the answers
/// to approvals and the turns that were stopped, each by its turn's index (the number of
/// `TurnBegin` records before it).
#[derive(Debug, Default, PartialEq, serde::Serialize)]
pub struct Marks {
    pub approvals: Vec<ApprovalMark>,
    pub stopped: Vec<u64>,
}

#[derive(Debug, PartialEq, serde::Serialize)]
pub struct ApprovalMark {
    pub turn_index: u64,
    pub tool_call_id: String,
    pub response: crate::protocol::ApprovalDecision,
    pub feedback: String,
}

/// A record read only for its marks.
#[derive(Deserialize)]
struct Marked {
    message: Head,
    #[serde(default)]
    kiwi_approval: Option<super::wire_log::Decision>,
    #[serde(default)]
    kiwi_stopped: bool,
}

#[derive(Deserialize)]
struct Head {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    payload: serde_json::Value,
}

/// The marks of the file at `path` (none when it does not exist). Only lines that can hold a
/// turn or a mark are parsed.
pub fn marks(path: &Path) -> std::io::Result<Marks> {
    let mut marks = Marks::default();
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(marks),
        Err(e) => return Err(e),
    };
    let mut turns = 0u64;
    for line in BufReader::with_capacity(64 * 1024, file).split(b'\n') {
        let line = line?;
        let interesting = |needle: &[u8]| line.windows(needle.len()).any(|w| w == needle);
        if !interesting(b"\"TurnBegin\"") && !interesting(b"\"kiwi_") {
            continue;
        }
        let Ok(record) = serde_json::from_slice::<Marked>(&line) else { continue };
        let turn = turns.checked_sub(1);
        match (record.message.kind.as_str(), turn) {
            ("TurnBegin", _) => turns += 1,
            ("TurnEnd", Some(turn)) if record.kiwi_stopped => marks.stopped.push(turn),
            ("ToolResult", Some(turn_index)) => {
                let id = record.message.payload.get("tool_call_id").and_then(|v| v.as_str());
                if let (Some(decision), Some(id)) = (record.kiwi_approval, id) {
                    marks.approvals.push(ApprovalMark {
                        turn_index,
                        tool_call_id: id.to_string(),
                        response: decision.response,
                        feedback: decision.feedback,
                    });
                }
            }
            _ => {}
        }
    }
    Ok(marks)
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
    fn marks_name_their_turns() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wire.jsonl");
        assert_eq!(marks(&path).unwrap(), Marks::default());
        let text = [
            r#"{"type": "metadata", "protocol_version": "1.10"}"#,
            r#"{"timestamp": 1.0, "message": {"type": "TurnBegin", "payload": {"user_input": "go"}}}"#,
            r#"{"timestamp": 1.1, "message": {"type": "ToolResult", "payload": {"tool_call_id": "tc-1", "return_value": {}}}, "kiwi_approval": {"response": "approve", "feedback": ""}}"#,
            r#"{"timestamp": 1.2, "message": {"type": "ToolResult", "payload": {"tool_call_id": "tc-2", "return_value": {}}}}"#,
            r#"{"timestamp": 1.3, "message": {"type": "TurnEnd", "payload": {}}}"#,
            r#"{"timestamp": 2.0, "message": {"type": "ContentPart", "payload": {"type": "text", "text": "\"TurnBegin\""}}}"#,
            r#"{"timestamp": 2.1, "message": {"type": "TurnBegin", "payload": {"user_input": "again"}}}"#,
            r#"{"timestamp": 2.2, "message": {"type": "ToolResult", "payload": {"tool_call_id": "tc-1", "return_value": {}}}, "kiwi_approval": {"response": "reject", "feedback": "no"}}"#,
            r#"{"timestamp": 2.3, "message": {"type": "TurnEnd", "payload": {}}, "kiwi_stopped": true}"#,
            r#"{"timestamp": 2.4, "message": {"type": "TurnEnd", "pay"#,
        ]
        .join("\n");
        std::fs::write(&path, text).unwrap();
        let got = marks(&path).unwrap();
        assert_eq!(got.stopped, [1]);
        let approvals: Vec<_> = got
            .approvals
            .iter()
            .map(|a| (a.turn_index, a.tool_call_id.as_str(), a.response, a.feedback.as_str()))
            .collect();
        use crate::protocol::ApprovalDecision::{Approve, Reject};
        assert_eq!(approvals, [(0, "tc-1", Approve, ""), (1, "tc-1", Reject, "no")]);
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
