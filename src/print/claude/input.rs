//! Reading the host's lines in the Claude dialect (`docs/print-mode.md` B.2): a reader thread frames
//! stdin, and each line is classified here into a user message, a control request, a control
//! response, or something to ignore with a clear error.
//!
//! Invariants: a user message that cannot be run is an [`Input::BadUser`] (the run loop answers
//! it with an error `result`, so a host waiting for that turn is never left hanging); any other
//! bad line is [`Input::Bad`] (one stderr line, the run goes on); kimi-shaped `{"role":"user"}`
//! lines are user messages too (C.4).
//!
//! Bounds: stdin is framed and queued by the wire's reader with its limits — a line
//! longer than the limit is an [`Input::Bad`] in the wire's words, and the lines read ahead are
//! bounded in bytes as well as in number.

use std::io::Read;

use serde_json::Value;

use super::lines::{ControlRequestIn, ControlResponse, InLine, UserContent, UserInLine, UserLine, UserMessage};
use crate::llm::{Message, Role};
use crate::protocol::{ContentPart, MediaUrl, UserInput};
use crate::rpc::reader::{BoundedLines, Line, spawn_framed, too_long_text};

/// Lines read ahead of the run loop (user messages queue behind a running turn here).
const LINES_AHEAD: usize = 256;

/// One classified input line.
#[derive(Debug)]
pub enum Input {
    User { input: UserInput, echo: UserLine },
    BadUser(String),
    Control(ControlRequestIn),
    Answer(ControlResponse),
    Ignore,
    Bad(String),
}

/// The host's lines, framed on a thread and classified as they are taken.
pub struct InputLines {
    lines: BoundedLines<Option<Vec<u8>>>,
    max_line: usize,
}

impl InputLines {
    /// The next line, classified; `None` at the end of input.
    pub async fn recv(&mut self) -> Option<Input> {
        Some(match self.lines.recv().await? {
            Some(line) => classify(&line),
            None => Input::Bad(too_long_text(self.max_line)),
        })
    }
}

/// Frames `input` on a thread (lines longer than `max_line` are skipped and reported).
pub fn spawn_reader<R: Read + Send + 'static>(input: R, max_line: usize) -> InputLines {
    let lines = spawn_framed(input, max_line, LINES_AHEAD, |line| match line {
        Line::Complete(bytes) => Some((Some(bytes.to_vec()), bytes.len())),
        Line::TooLong => Some((None, 0)),
    });
    InputLines { lines, max_line }
}

/// Classifies one line.
pub fn classify(line: &[u8]) -> Input {
    let text = String::from_utf8_lossy(line);
    if text.trim().is_empty() {
        return Input::Ignore;
    }
    let value: Value = match serde_json::from_str(&text) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => return Input::Bad("an input line must be a JSON object".into()),
        Err(e) => return Input::Bad(format!("an input line is not JSON ({e})")),
    };
    if value.get("type").is_none() && value.get("role").is_some() {
        return kimi_message(value);
    }
    let kind = value.get("type").and_then(Value::as_str).unwrap_or("").to_string();
    match serde_json::from_value::<InLine>(value) {
        Ok(InLine::User(line)) => user(line),
        Ok(InLine::ControlRequest(request)) => Input::Control(request),
        Ok(InLine::ControlResponse(line)) => Input::Answer(line.response),
        Ok(InLine::KeepAlive {}) => Input::Ignore,
        Err(e) if kind == "user" => Input::BadUser(format!("a user message could not be read: {e}")),
        Err(e) if kind.is_empty() => Input::Bad(format!("an input line has no \"type\" ({e})")),
        Err(e) => Input::Bad(format!("an input line of type {kind:?} could not be read: {e}")),
    }
}

fn kimi_message(value: Value) -> Input {
    match serde_json::from_value::<Message>(value) {
        Ok(m) if m.role == Role::User => {
            let parts = m.content;
            let echo = UserLine {
                message: UserMessage {
                    role: "user".into(),
                    content: UserContent::Blocks(
                        parts
                            .iter()
                            .filter_map(|p| p.as_text())
                            .map(|t| serde_json::json!({"type":"text","text":t}))
                            .collect(),
                    ),
                },
                parent_tool_use_id: None,
                session_id: String::new(),
                uuid: String::new(),
                tool_use_result: None,
                is_replay: Some(true),
                agent_id: None,
                subagent_type: None,
            };
            if parts.iter().all(|p| p.as_text().is_some_and(|t| t.trim().is_empty())) {
                return Input::BadUser("the user message is empty".into());
            }
            Input::User { input: UserInput::Parts(parts), echo }
        }
        Ok(m) => Input::Bad(format!("only user messages are run, not {:?}", m.role)),
        Err(e) => Input::BadUser(format!("a user message could not be read: {e}")),
    }
}

fn user(line: UserInLine) -> Input {
    if line.message.role != "user" {
        return Input::BadUser(format!("a user line must carry a user message, not {:?}", line.message.role));
    }
    let input = match &line.message.content {
        UserContent::Text(text) => {
            if text.trim().is_empty() {
                return Input::BadUser("the user message is empty".into());
            }
            UserInput::Text(text.clone())
        }
        UserContent::Blocks(blocks) => {
            let mut parts = Vec::new();
            for block in blocks {
                match content_part(block) {
                    Ok(Some(part)) => parts.push(part),
                    Ok(None) => {}
                    Err(e) => return Input::BadUser(e),
                }
            }
            if parts.iter().all(|p| p.as_text().is_some_and(|t| t.trim().is_empty())) {
                return Input::BadUser("the user message has no text or image to run".into());
            }
            UserInput::Parts(parts)
        }
    };
    let echo = UserLine {
        message: line.message,
        parent_tool_use_id: None,
        session_id: String::new(),
        uuid: line.uuid.unwrap_or_default(),
        tool_use_result: None,
        is_replay: Some(true),
        agent_id: None,
        subagent_type: None,
    };
    Input::User { input, echo }
}

/// One Anthropic content block as a kiwi content part (`None`: nothing to run, e.g. a
/// `tool_result` the host sends back for a tool kiwi does not know).
pub fn content_part(block: &Value) -> Result<Option<ContentPart>, String> {
    let kind = block.get("type").and_then(Value::as_str).unwrap_or("");
    let str_of = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
    match kind {
        "text" => {
            str_of(block, "text").map(|t| Some(ContentPart::text(t))).ok_or_else(|| "a text block has no text".into())
        }
        "image" => {
            let source = block.get("source").cloned().unwrap_or(Value::Null);
            let url = match source.get("type").and_then(Value::as_str) {
                Some("base64") => match (str_of(&source, "media_type"), str_of(&source, "data")) {
                    (Some(media), Some(data)) => format!("data:{media};base64,{data}"),
                    _ => return Err("a base64 image needs media_type and data".into()),
                },
                Some("url") => str_of(&source, "url").ok_or("an image URL source has no url")?,
                other => return Err(format!("image sources of type {other:?} are not supported")),
            };
            Ok(Some(ContentPart::ImageUrl { image_url: MediaUrl::new(url) }))
        }
        "document" => {
            let source = block.get("source").cloned().unwrap_or(Value::Null);
            match (source.get("type").and_then(Value::as_str), str_of(&source, "data")) {
                (Some("text"), Some(data)) => Ok(Some(ContentPart::text(data))),
                (other, _) => Err(format!("documents of source type {other:?} are not supported (only text)")),
            }
        }
        "tool_result" => {
            tracing::warn!("ignoring a tool_result block in a user message: kiwi's tools report their own results");
            Ok(None)
        }
        other => Err(format!("content blocks of type {other:?} are not supported")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_classified() {
        let c = |s: &str| classify(s.as_bytes());
        assert!(matches!(c(r#"{"type":"user","message":{"role":"user","content":"hi"},"session_id":""}"#),
            Input::User { input: UserInput::Text(t), .. } if t == "hi"));
        assert!(matches!(c(r#"{"role":"user","content":"kimi style"}"#), Input::User { .. }));
        assert!(matches!(c(r#"{"type":"keep_alive"}"#), Input::Ignore));
        assert!(matches!(c("  "), Input::Ignore));
        assert!(matches!(
            c(r#"{"type":"control_request","request_id":"1","request":{"subtype":"interrupt"}}"#),
            Input::Control(_)
        ));
        assert!(matches!(
            c(r#"{"type":"control_response","response":{"subtype":"error","request_id":"1","error":"x"}}"#),
            Input::Answer(_)
        ));
        for bad in ["nope", "[]", r#"{"type":"weird"}"#, r#"{"x":1}"#, r#"{"role":"assistant","content":"x"}"#] {
            assert!(matches!(c(bad), Input::Bad(_)), "{bad}");
        }
        for bad_user in [
            r#"{"type":"user"}"#,
            r#"{"type":"user","message":{"role":"user","content":""}}"#,
            r#"{"type":"user","message":{"role":"assistant","content":"x"}}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"audio"}]}}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"image","source":{"type":"file","file_id":"f"}}]}}"#,
        ] {
            assert!(matches!(c(bad_user), Input::BadUser(_)), "{bad_user}");
        }
    }

    #[test]
    fn blocks_become_parts() {
        let line = r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"look"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}},{"type":"document","source":{"type":"text","media_type":"text/plain","data":"doc"}}]}}"#;
        let Input::User { input: UserInput::Parts(parts), echo } = classify(line.as_bytes()) else { panic!() };
        assert_eq!(
            parts,
            vec![
                ContentPart::text("look"),
                ContentPart::ImageUrl { image_url: MediaUrl::new("data:image/png;base64,AAAA") },
                ContentPart::text("doc"),
            ]
        );
        assert_eq!(echo.is_replay, Some(true));
    }

    /// A line over the limit is bad input in the wire reader's words; the next line is read.
    #[tokio::test]
    async fn an_over_long_line_is_bad_input_and_the_next_is_read() {
        let input = format!("{}\n{{\"type\":\"keep_alive\"}}\n", "x".repeat(40)).into_bytes();
        let mut lines = spawn_reader(std::io::Cursor::new(input), 30);
        let first = lines.recv().await;
        assert!(
            matches!(&first, Some(Input::Bad(why)) if why == "line exceeds the maximum length of 30 bytes and was skipped"),
            "{first:?}"
        );
        assert!(matches!(lines.recv().await, Some(Input::Ignore)));
        assert!(lines.recv().await.is_none());
    }

    /// The lines read ahead are bounded in bytes, not only in number (64 lines of up
    /// to the line limit each used to wait in memory).
    #[test]
    fn lines_read_ahead_are_bounded_in_bytes() {
        use crate::rpc::reader::{INBOUND_BYTES, MadeUpLines, assert_reads_ahead_at_most};
        const LINE: usize = 4 << 20;
        let pulled = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let input = MadeUpLines { len: LINE, count: 40, at: 0, pulled: pulled.clone() };
        let _lines = spawn_reader(input, 2 * LINE);
        assert_reads_ahead_at_most(&pulled, INBOUND_BYTES + 2 * LINE);
    }
}
