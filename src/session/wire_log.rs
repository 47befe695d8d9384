//! `wire.jsonl`: every wire message of the main agent, fragments merged (`sessions.md` §6).
//!
//! Invariants: the metadata header is written only into an empty file; consecutive text (or
//! think) fragments become one record, a `ToolCall` absorbs its `ToolCallPart`s, and any other
//! message flushes the pending merged record first, so record order equals wire order.
//!
//! A failed write (disk full) is cut back to the last complete record by the appender (issue 14,
//! item 8) and kept for [`WireLog::take_write_error`]; a header that could not be written is
//! retried before the next record, so no record ever lands in a file without its header.

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
    /// The first failed write not yet collected.
    write_error: Option<String>,
}

impl WireLog {
    /// The file is created lazily, at the first record.
    pub fn new(path: &Path) -> Self {
        Self { file: None, path: path.to_path_buf(), pending: None, write_error: None }
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
            match self.open() {
                Ok(file) => self.file = Some(file),
                Err(e) => {
                    tracing::warn!("cannot open {}: {e}", self.path.display());
                    self.failed(&e);
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
                    self.failed(&e);
                }
            }
            Err(e) => tracing::warn!("cannot serialize a wire record: {e}"),
        }
    }

    /// Opens the file and writes the header into an empty one.
    fn open(&self) -> std::io::Result<JsonlAppender> {
        let mut file = JsonlAppender::open(&self.path)?;
        if file.is_empty() {
            let header = Header { kind: "metadata", protocol_version: WIRE_PROTOCOL_VERSION };
            let line = pyjson::to_line(&header).map_err(std::io::Error::other)?;
            file.append(&line)?;
        }
        Ok(file)
    }

    /// Keeps the first failure for the client (the appender has already logged it).
    fn failed(&mut self, e: &std::io::Error) {
        if self.write_error.is_none() {
            self.write_error = Some(format!("Failed to write the session file {}: {e}", self.path.display()));
        }
    }

    /// The first failed write to `wire.jsonl` since the last call, as a message for the client.
    pub fn take_write_error(&mut self) -> Option<String> {
        self.write_error.take()
    }
}

/// Folds `next` into `pending` when they are fragments of the same thing (also used to merge a
/// subagent's stream before it is wrapped).
pub fn merge(pending: &mut WireMessage, next: &WireMessage) -> bool {
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

    /// Failed writes (a file-size limit, in a child run of this test) are reported, cut back, and
    /// the header is retried so the first record that lands has its header.
    #[test]
    fn failed_writes_are_reported_and_cut_back() {
        const CHILD: &str = "KIWI_WIRE_FSIZE_CHILD";
        let ev = |e| WireMessage::Event(e);
        let set_limit = crate::session::file_limit::limit_file_size;
        if let Some(path) = std::env::var_os(CHILD) {
            let path = std::path::PathBuf::from(path);
            set_limit(10);
            let mut log = WireLog::new(&path);
            log.record(ev(Event::TurnEnd {}));
            let e = log.take_write_error().expect("reported");
            assert!(e.starts_with(&format!("Failed to write the session file {}: ", path.display())), "{e}");
            assert_eq!(std::fs::metadata(&path).unwrap().len(), 0, "the torn header is cut");
            set_limit(300);
            let big = crate::protocol::UserInput::Text("x".repeat(300));
            log.record(ev(Event::TurnBegin { user_input: big }));
            assert!(log.take_write_error().is_some());
            log.record(ev(Event::TurnEnd {}));
            assert_eq!(log.take_write_error(), None);
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wire.jsonl");
        crate::session::file_limit::run_child(
            "session::wire_log::tests::failed_writes_are_reported_and_cut_back",
            CHILD,
            &path,
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[0], r#"{"type": "metadata", "protocol_version": "1.10"}"#);
        assert!(lines[1].ends_with(r#""message": {"type": "TurnEnd", "payload": {}}}"#), "{text}");
    }
}
