//! `wire.jsonl`: every wire message of the main agent, fragments merged (`sessions.md` §6).
//!
//! Invariants: the metadata header is written only into an empty file; consecutive text (or
//! think) fragments become one record, a `ToolCall` absorbs its `ToolCallPart`s, and any other
//! message flushes the pending merged record first, so record order equals wire order.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::jsonl::JsonlAppender;
use super::pyjson;
use crate::protocol::{ContentPart, Event, ToolCallPart, WireMessage};

/// The protocol version the records follow, written in the header of a new file.
pub const WIRE_PROTOCOL_VERSION: &str = "1.10";

#[derive(Serialize)]
struct Header {
    #[serde(rename = "type")]
    kind: &'static str,
    protocol_version: &'static str,
}

#[derive(Serialize)]
struct Record<'a> {
    timestamp: f64,
    message: &'a WireMessage,
}

pub struct WireLog {
    file: Option<JsonlAppender>,
    path: std::path::PathBuf,
    pending: Option<WireMessage>,
}

impl WireLog {
    /// The file is created lazily, at the first record.
    pub fn new(path: &Path) -> Self {
        Self { file: None, path: path.to_path_buf(), pending: None }
    }

    pub fn record(&mut self, message: WireMessage) {
        if let Some(pending) = &mut self.pending
            && merge(pending, &message)
        {
            return;
        }
        let mergeable =
            matches!(message, WireMessage::Event(Event::ContentPart(_) | Event::ToolCall(_) | Event::ToolCallPart(_)));
        self.flush();
        if mergeable {
            self.pending = Some(message);
        } else {
            self.write(&message);
        }
    }

    /// Writes the pending merged record, if any.
    pub fn flush(&mut self) {
        if let Some(pending) = self.pending.take() {
            self.write(&pending);
        }
    }

    fn write(&mut self, message: &WireMessage) {
        if self.file.is_none() {
            match JsonlAppender::open(&self.path) {
                Ok(mut file) => {
                    if file.is_empty() {
                        let header = Header { kind: "metadata", protocol_version: WIRE_PROTOCOL_VERSION };
                        if let Ok(line) = pyjson::to_line(&header) {
                            let _ = file.append(&line);
                        }
                    }
                    self.file = Some(file);
                }
                Err(e) => {
                    tracing::warn!("cannot open {}: {e}", self.path.display());
                    return;
                }
            }
        }
        let timestamp = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0);
        match pyjson::to_line(&Record { timestamp, message }) {
            Ok(line) => {
                if let Some(file) = &mut self.file
                    && let Err(e) = file.append(&line)
                {
                    tracing::warn!("cannot write {}: {e}", self.path.display());
                }
            }
            Err(e) => tracing::warn!("cannot serialize a wire record: {e}"),
        }
    }
}

/// Folds `next` into `pending` when they are fragments of the same thing.
fn merge(pending: &mut WireMessage, next: &WireMessage) -> bool {
    let (WireMessage::Event(pending), WireMessage::Event(next)) = (pending, next) else { return false };
    match (pending, next) {
        (Event::ContentPart(p), Event::ContentPart(n)) => match (p, n) {
            (ContentPart::Text { text }, ContentPart::Text { text: more }) => {
                text.push_str(more);
                true
            }
            (ContentPart::Think { think, encrypted: slot @ None }, ContentPart::Think { think: more, encrypted }) => {
                think.push_str(more);
                slot.clone_from(encrypted);
                true
            }
            _ => false,
        },
        (Event::ToolCall(call), Event::ToolCallPart(part)) => {
            call.append_arguments(part.arguments_part.as_deref());
            true
        }
        (Event::ToolCallPart(ToolCallPart { arguments_part: slot }), Event::ToolCallPart(part)) => {
            if let Some(more) = &part.arguments_part {
                slot.get_or_insert_with(String::new).push_str(more);
            }
            true
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::ToolCall;

    #[test]
    fn fragments_merge_into_one_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wire.jsonl");
        let mut log = WireLog::new(&path);
        let ev = |e| WireMessage::Event(e);
        log.record(ev(Event::TurnBegin { user_input: crate::protocol::UserInput::Text("go".into()) }));
        log.record(ev(Event::ContentPart(ContentPart::text("a"))));
        log.record(ev(Event::ContentPart(ContentPart::text("b"))));
        log.record(ev(Event::ToolCall(ToolCall::new("x", "T", None))));
        log.record(ev(Event::ToolCallPart(ToolCallPart { arguments_part: Some("{".into()) })));
        log.record(ev(Event::ToolCallPart(ToolCallPart { arguments_part: None })));
        log.record(ev(Event::ToolCallPart(ToolCallPart { arguments_part: Some("}".into()) })));
        log.record(ev(Event::TurnEnd {}));
        log.flush();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5);
        assert_eq!(lines[0], r#"{"type": "metadata", "protocol_version": "1.10"}"#);
        assert!(
            lines[2].ends_with(r#""message": {"type": "ContentPart", "payload": {"type": "text", "text": "ab"}}}"#)
        );
        assert!(lines[3].contains(r#""arguments": "{}""#), "{}", lines[3]);
        // Reopening appends without a second header.
        let mut log = WireLog::new(&path);
        log.record(ev(Event::TurnEnd {}));
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 6);
    }
}
