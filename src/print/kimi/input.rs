//! Where kimi's print-mode prompts come from (`docs/print-mode.md` A.2): `-p` first, then all of
//! stdin as one prompt (text input), or one kosong `Message` per line (stream-json input).
//!
//! Invariants: lines are taken only between turns (the run loop asks for the next prompt when
//! the previous turn is over); a line that is not a user message, or whose text is empty, is
//! skipped with a warning and never ends the run; EOF ends the prompts.
//!
//! Bounds: stdin is framed and queued by the wire's reader, with its
//! limits — a line longer than the line limit is skipped with one stderr line in the wire's
//! words, and the lines read ahead are bounded in bytes as well as in number. Text input is read
//! up to the same limit: a longer prompt is refused with one stderr line (exit 1, a failure in
//! `docs/print-mode.md` A.6's terms), never read whole.

use std::io::Read;

use super::options::{Format, KimiOptions};
use crate::llm::{Message, Role};
use crate::print::common::stderr_line;
use crate::protocol::{ContentPart, UserInput};
use crate::rpc::reader::{BoundedLines, Line, spawn_framed, too_long_text};

/// Lines read ahead of the run loop; the reader thread waits when they are not taken.
const LINES_AHEAD: usize = 64;

enum Source {
    Nothing,
    /// All of stdin, read once.
    Whole(Option<Box<dyn Read + Send>>),
    /// Framed lines; `None` stands for a line that was too long.
    Lines(BoundedLines<Option<Vec<u8>>>),
}

pub struct Prompts {
    first: Option<String>,
    rest: Source,
    max_line: usize,
}

impl Prompts {
    pub fn new<R: Read + Send + 'static>(options: &KimiOptions, input: R, max_line: usize) -> Self {
        let rest = match options.input {
            Format::StreamJson => Source::Lines(spawn_lines(input, max_line)),
            Format::Text if options.prompt.is_some() || options.stdin_is_tty => Source::Nothing,
            Format::Text => Source::Whole(Some(Box::new(input))),
        };
        Self { first: options.prompt.clone(), rest, max_line }
    }

    /// The next prompt, `None` when there are no more, or why the input cannot be run (the run
    /// then ends as failed).
    pub async fn next(&mut self) -> Result<Option<UserInput>, String> {
        if let Some(first) = self.first.take() {
            return Ok(Some(UserInput::Text(first)));
        }
        match &mut self.rest {
            Source::Nothing => Ok(None),
            Source::Whole(input) => {
                let Some(input) = input.take() else { return Ok(None) };
                let max = self.max_line;
                let text = tokio::task::spawn_blocking(move || read_prompt(input, max)).await.unwrap_or_else(|e| {
                    tracing::warn!("the stdin reader failed: {e}");
                    Ok(String::new())
                })?;
                Ok((!text.is_empty()).then_some(UserInput::Text(text)))
            }
            Source::Lines(lines) => loop {
                let Some(line) = lines.recv().await else { return Ok(None) };
                let Some(line) = line else {
                    warn(&format!("ignoring input: {}", too_long_text(self.max_line)));
                    continue;
                };
                if let Some(prompt) = prompt_of_line(&line) {
                    return Ok(Some(prompt));
                }
            },
        }
    }
}

/// All of `input` as one trimmed prompt, read no further than `max` bytes (one more tells a
/// prompt that is too long). A stdin that cannot be read is an empty prompt, as it always was.
fn read_prompt(input: Box<dyn Read + Send>, max: usize) -> Result<String, String> {
    let mut bytes = Vec::new();
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    if let Err(e) = input.take(limit).read_to_end(&mut bytes) {
        tracing::warn!("cannot read the prompt from stdin: {e}");
        return Ok(String::new());
    }
    if bytes.len() > max {
        return Err(format!("the prompt on stdin exceeds the maximum length of {max} bytes and was not run"));
    }
    Ok(String::from_utf8_lossy(&bytes).trim().to_string())
}

fn spawn_lines<R: Read + Send + 'static>(input: R, max_line: usize) -> BoundedLines<Option<Vec<u8>>> {
    spawn_framed(input, max_line, LINES_AHEAD, |line| match line {
        Line::Complete(bytes) => Some((Some(bytes.to_vec()), bytes.len())),
        Line::TooLong => Some((None, 0)),
    })
}

fn warn(text: &str) {
    tracing::warn!("{text}");
    stderr_line(&format!("kiwi: {text}"));
}

/// A user message line as a prompt: its text parts joined with `\n` (media dropped), or `None`
/// (with a warning) for anything else. Claude-shaped user lines are read too (C.4).
pub fn prompt_of_line(line: &[u8]) -> Option<UserInput> {
    let text = String::from_utf8_lossy(line);
    if text.trim().is_empty() {
        return None;
    }
    let value: serde_json::Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            warn(&format!("skipping an input line that is not JSON: {e}"));
            return None;
        }
    };
    let message = if value.get("type").is_some() {
        value.get("message").cloned().unwrap_or(serde_json::Value::Null)
    } else {
        value
    };
    let message: Message = match serde_json::from_value(message) {
        Ok(m) => m,
        Err(e) => {
            warn(&format!("skipping an input line that is not a message: {e}"));
            return None;
        }
    };
    if message.role != Role::User {
        warn(&format!("skipping a {:?} message: only user messages are run", message.role));
        return None;
    }
    let prompt =
        message.content.iter().filter_map(ContentPart::as_text).collect::<Vec<_>>().join("\n").trim().to_string();
    if prompt.is_empty() {
        warn("skipping an empty user message");
        return None;
    }
    Some(UserInput::Text(prompt))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_become_prompts() {
        let p = |s: &str| prompt_of_line(s.as_bytes());
        assert_eq!(p(r#"{"role":"user","content":"hi"}"#), Some(UserInput::Text("hi".into())));
        assert_eq!(
            p(
                r#"{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"u"}},{"type":"text","text":"b"}]}"#
            ),
            Some(UserInput::Text("a\nb".into()))
        );
        assert_eq!(
            p(r#"{"type":"user","message":{"role":"user","content":"claude"}}"#),
            Some(UserInput::Text("claude".into()))
        );
        for bad in [
            "",
            "not json",
            r#"{"role":"assistant","content":"x"}"#,
            r#"{"role":"user","content":null}"#,
            r#"{"role":"user","content":"   "}"#,
            r#"{"content":"x"}"#,
            "[1,2]",
        ] {
            assert_eq!(p(bad), None, "{bad}");
        }
    }

    /// The lines read ahead are bounded in bytes, not only in number (64 lines of up
    /// to the line limit each used to wait in memory).
    #[test]
    fn lines_read_ahead_are_bounded_in_bytes() {
        use crate::rpc::reader::{INBOUND_BYTES, MadeUpLines, assert_reads_ahead_at_most};
        const LINE: usize = 4 << 20;
        let pulled = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let input = MadeUpLines { len: LINE, count: 40, at: 0, pulled: pulled.clone() };
        let _lines = spawn_lines(input, 2 * LINE);
        assert_reads_ahead_at_most(&pulled, INBOUND_BYTES + 2 * LINE);
    }
}
