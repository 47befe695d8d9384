//! Where kimi's print-mode prompts come from (`print-mode.md` A.2): `-p` first, then all of
//! stdin as one prompt (text input), or one kosong `Message` per line (stream-json input).
//!
//! Invariants: lines are taken only between turns (the run loop asks for the next prompt when
//! the previous turn is over); a line that is not a user message, or whose text is empty, is
//! skipped with a warning and never ends the run; EOF ends the prompts.

use std::io::Read;

use tokio::sync::mpsc;

use super::options::{Format, KimiOptions};
use crate::llm::{Message, Role};
use crate::print::common::stderr_line;
use crate::protocol::{ContentPart, UserInput};
use crate::rpc::reader::{Line, frame_lines};

/// Lines read ahead of the run loop; the reader thread waits when they are not taken.
const LINES_AHEAD: usize = 64;

enum Source {
    Nothing,
    /// All of stdin, read once.
    Whole(Option<Box<dyn Read + Send>>),
    Lines(mpsc::Receiver<Option<Vec<u8>>>),
}

pub struct Prompts {
    first: Option<String>,
    rest: Source,
}

impl Prompts {
    pub fn new<R: Read + Send + 'static>(options: &KimiOptions, input: R, max_line: usize) -> Self {
        let rest = match options.input {
            Format::StreamJson => Source::Lines(spawn_lines(input, max_line)),
            Format::Text if options.prompt.is_some() || options.stdin_is_tty => Source::Nothing,
            Format::Text => Source::Whole(Some(Box::new(input))),
        };
        Self { first: options.prompt.clone(), rest }
    }

    /// The next prompt, or `None` when there are no more.
    pub async fn next(&mut self) -> Option<UserInput> {
        if let Some(first) = self.first.take() {
            return Some(UserInput::Text(first));
        }
        match &mut self.rest {
            Source::Nothing => None,
            Source::Whole(input) => {
                let mut input = input.take()?;
                let text = tokio::task::spawn_blocking(move || {
                    let mut bytes = Vec::new();
                    input.read_to_end(&mut bytes).map(|_| String::from_utf8_lossy(&bytes).trim().to_string())
                })
                .await
                .ok()
                .and_then(Result::ok)
                .unwrap_or_default();
                (!text.is_empty()).then_some(UserInput::Text(text))
            }
            Source::Lines(rx) => loop {
                let line = rx.recv().await.flatten()?;
                if let Some(prompt) = prompt_of_line(&line) {
                    return Some(prompt);
                }
            },
        }
    }
}

fn spawn_lines<R: Read + Send + 'static>(input: R, max_line: usize) -> mpsc::Receiver<Option<Vec<u8>>> {
    let (tx, rx) = mpsc::channel(LINES_AHEAD);
    let spawned = std::thread::Builder::new().name("kiwi-stdin".into()).spawn(move || {
        frame_lines(input, max_line, |line| {
            let item = match line {
                Line::Complete(bytes) => Some(bytes.to_vec()),
                Line::TooLong => {
                    warn(&format!("skipping an input line longer than {max_line} bytes"));
                    return true;
                }
            };
            tx.blocking_send(item).is_ok()
        });
    });
    if let Err(e) = spawned {
        tracing::error!("cannot start the stdin reader: {e}");
    }
    rx
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
}
