//! `wire.jsonl`: every wire message of the main agent, fragments merged (`docs/sessions.md` §6).
//!
//! Invariants: the metadata header is written only into an empty file; fragments are merged by
//! the step assembler (`protocol::assembly`: one record per run — text or think run, a
//! `ToolCall` with its `ToolCallPart`s), and any other message flushes the open run first, so
//! record order equals wire order.
//!
//! A failed write (disk full) is cut back to the last complete record by the appender (`docs/sessions.md`
//! §7.2) and kept for [`WireLog::take_write_error`]; a header that could not be written is
//! retried before the next record, so no record ever lands in a file without its header.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::fork::ContextMark;
use super::jsonl::JsonlAppender;
use super::pyjson;
use crate::protocol::{ApprovalDecision, Event, Fed, Run, RunAssembler, Sorted, WireMessage};

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
    /// Where the context stood when a turn began (`TurnBegin` records only; see `session::fork`).
    #[serde(skip_serializing_if = "Option::is_none")]
    kiwi_context: Option<ContextMark>,
    /// The client's answer to the call's approval (`ToolResult` records of asked calls only).
    #[serde(skip_serializing_if = "Option::is_none")]
    kiwi_approval: Option<Decision>,
    /// The turn was stopped (its `TurnEnd` record only).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    kiwi_stopped: bool,
}

/// An approval answer as `wire.jsonl` keeps it beside the call's result.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct Decision {
    pub response: ApprovalDecision,
    pub feedback: String,
}

pub struct WireLog {
    file: Option<JsonlAppender>,
    path: std::path::PathBuf,
    /// The fragment run being merged.
    runs: RunAssembler,
    /// The first failed write not yet collected.
    write_error: Option<String>,
    /// The context position to attach to the next `TurnBegin` record.
    next_mark: Option<ContextMark>,
    /// Where the last `TurnBegin` record written starts (the undo store names turns by it).
    last_turn_begin: Option<u64>,
    /// Records are dropped until the next `TurnEnd` (the rest of a turn an undo cut away).
    muted: bool,
    /// Approval answers of this turn's calls whose `ToolResult` is not written yet.
    decisions: Vec<(String, Decision)>,
    /// The next `TurnEnd` ends a stopped turn.
    stopped: bool,
}

impl WireLog {
    /// The file is created lazily, at the first record.
    pub fn new(path: &Path) -> Self {
        Self {
            file: None,
            path: path.to_path_buf(),
            runs: RunAssembler::default(),
            write_error: None,
            next_mark: None,
            last_turn_begin: None,
            muted: false,
            decisions: Vec::new(),
            stopped: false,
        }
    }

    /// Keeps `decision` for the `ToolResult` record of `tool_call_id` in this turn.
    pub fn note_decision(&mut self, tool_call_id: &str, response: ApprovalDecision, feedback: &str) {
        self.decisions.retain(|(id, _)| id != tool_call_id);
        self.decisions.push((tool_call_id.to_string(), Decision { response, feedback: feedback.to_string() }));
    }

    /// Marks the next `TurnEnd` record as the end of a stopped turn.
    pub fn note_stopped(&mut self) {
        self.stopped = true;
    }

    pub fn record(&mut self, message: WireMessage) {
        if self.muted {
            if matches!(message, WireMessage::Event(crate::protocol::Event::TurnEnd {})) {
                self.muted = false;
            }
            return;
        }
        let message = match message {
            WireMessage::Event(event) => match Sorted::from(event) {
                Sorted::Fragment(fragment) => {
                    if let Fed::Opened(Some(done)) = self.runs.push_run(fragment) {
                        self.write_run(done);
                    }
                    return;
                }
                Sorted::Other(event) => WireMessage::Event(event),
            },
            request => request,
        };
        self.flush();
        self.write(&message);
    }

    /// Attaches `mark` to the next `TurnBegin` record written.
    pub fn mark_next_turn(&mut self, mark: ContextMark) {
        self.next_mark = Some(mark);
    }

    /// Where the last `TurnBegin` record written starts in the file; taken once.
    pub fn take_turn_begin(&mut self) -> Option<u64> {
        self.last_turn_begin.take()
    }

    /// Cuts the file back to its first `len` bytes (an undo, `docs/sessions.md` §9); with
    /// `mute_turn`, the rest of the running turn (up to its `TurnEnd`) is not recorded either.
    pub fn cut(&mut self, len: u64, mute_turn: bool) -> std::io::Result<()> {
        self.flush();
        self.file = None;
        self.last_turn_begin = None;
        super::rewind::truncate_file(&self.path, len)?;
        self.muted = mute_turn;
        Ok(())
    }

    /// Writes the open merged run, if any.
    pub fn flush(&mut self) {
        if let Some(done) = self.runs.close() {
            self.write_run(done);
        }
    }

    fn write_run(&mut self, run: Run) {
        self.write(&WireMessage::Event(run.into_event()));
    }

    fn write(&mut self, message: &WireMessage) {
        let is_begin = matches!(message, WireMessage::Event(crate::protocol::Event::TurnBegin { .. }));
        if is_begin {
            // A begin that fails to land must not leave an earlier one's offset behind.
            self.last_turn_begin = None;
            // Answers that came after the last turn ended (its cancel rejects) belong to no call.
            self.decisions.clear();
        }
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
        let kiwi_context = if is_begin { self.next_mark.take() } else { None };
        let (kiwi_approval, kiwi_stopped) = match message {
            WireMessage::Event(Event::ToolResult(result)) => {
                let at = self.decisions.iter().position(|(id, _)| *id == result.tool_call_id);
                (at.map(|i| self.decisions.remove(i).1), false)
            }
            WireMessage::Event(Event::TurnEnd {}) => {
                // Answers whose call never got a result (a stopped turn) end with their turn.
                self.decisions.clear();
                (None, std::mem::take(&mut self.stopped))
            }
            _ => (None, false),
        };
        match pyjson::to_line(&Record { timestamp, message, kiwi_context, kiwi_approval, kiwi_stopped }) {
            Ok(line) => {
                if let Some(file) = &mut self.file {
                    let at = file.len();
                    match file.append(&line) {
                        Ok(()) if is_begin => self.last_turn_begin = Some(at),
                        Ok(()) => {}
                        Err(e) => self.failed(&e),
                    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{ContentPart, Event, ToolCall, ToolCallPart};

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

    /// Each `TurnBegin`'s offset is taken once; a cut truncates the file and, for an undo inside
    /// a turn, keeps the rest of that turn out of it.
    #[test]
    fn turn_begins_are_located_and_a_cut_mutes_the_rest_of_the_turn() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wire.jsonl");
        let mut log = WireLog::new(&path);
        let ev = |e| WireMessage::Event(e);
        let begin = |t: &str| ev(Event::TurnBegin { user_input: crate::protocol::UserInput::Text(t.into()) });
        log.record(begin("a"));
        let first = log.take_turn_begin().expect("located");
        assert_eq!(log.take_turn_begin(), None);
        assert_eq!(first, r#"{"type": "metadata", "protocol_version": "1.10"}"#.len() as u64 + 1);
        log.record(ev(Event::TurnEnd {}));
        log.record(begin("/undo"));
        let second = log.take_turn_begin().expect("located");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text[second as usize..].contains("/undo"));
        log.record(ev(Event::ContentPart(ContentPart::text("partial"))));
        log.cut(second, true).unwrap();
        log.record(ev(Event::ContentPart(ContentPart::text("muted"))));
        log.record(ev(Event::TurnEnd {}));
        log.record(begin("c"));
        log.flush();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 4, "{text}");
        assert!(!text.contains("muted") && !text.contains("/undo") && !text.contains("partial"), "{text}");
        assert!(text.lines().last().unwrap().contains("\"c\""), "{text}");
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
