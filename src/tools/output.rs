//! The tool output builder (`docs/tools.md` §1.1) and the line truncation helper (§1.2).
//!
//! Invariants: lengths are counted in Unicode scalar values (the reference counts Python code
//! points); once the 50,000-character budget is spent nothing more is appended; any cut sets the
//! truncation flag, which appends the spec's note to the final message.

use crate::protocol::ToolReturnValue;

/// Total output budget in characters.
pub const MAX_OUTPUT_CHARS: usize = 50_000;
/// Per-line budget for Shell and Grep.
pub const MAX_LINE_CHARS: usize = 2_000;

const TRUNCATED_MARKER: &str = "[...truncated]";
const TRUNCATION_NOTE: &str = "Output is truncated to fit in the message.";

/// Splits like Python's `str.splitlines(keepends=True)`: every Unicode line boundary
/// (`\n`, `\r`, `\r\n`, `\v`, `\f`, `\x1c`-`\x1e`, `\u{85}`, `\u{2028}`, `\u{2029}`) ends a line.
pub fn split_lines_keep_ends(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut iter = text.char_indices().peekable();
    while let Some((i, c)) = iter.next() {
        let end = match c {
            '\r' => match iter.peek() {
                Some(&(j, '\n')) => {
                    iter.next();
                    j + 1
                }
                _ => i + 1,
            },
            '\n' | '\u{0b}' | '\u{0c}' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}' | '\u{2028}' | '\u{2029}' => {
                i + c.len_utf8()
            }
            _ => continue,
        };
        lines.push(&text[start..end]);
        start = end;
    }
    if start < text.len() {
        lines.push(&text[start..]);
    }
    lines
}

/// Python's `str.splitlines()` (no terminators).
pub fn split_lines(text: &str) -> Vec<&str> {
    split_lines_keep_ends(text)
        .into_iter()
        .map(|l| {
            let body = l.trim_end_matches(['\n', '\r']);
            if body.len() == l.len() {
                // A single non-CR/LF boundary character (e.g. `\u{2028}`) ends the line.
                l.strip_suffix(|c: char| {
                    matches!(
                        c,
                        '\u{0b}' | '\u{0c}' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}' | '\u{2028}' | '\u{2029}'
                    )
                })
                .unwrap_or(l)
            } else {
                body
            }
        })
        .collect()
}

/// Cuts `line` to at most `max_chars` characters (keeping its trailing CR/LF run) by replacing
/// the tail with `marker`. Returns the line unchanged when it fits.
pub fn truncate_line(line: &str, max_chars: usize, marker: &str) -> String {
    let n = line.chars().count();
    if n <= max_chars {
        return line.to_string();
    }
    let body = line.trim_end_matches(['\r', '\n']);
    let ending = &line[body.len()..];
    let end_len = marker.chars().count() + ending.chars().count();
    let keep = max_chars.max(end_len) - end_len;
    let cut = line.char_indices().nth(keep).map_or(line.len(), |(i, _)| i);
    format!("{}{marker}{ending}", &line[..cut])
}

/// Accumulates tool output under the character budgets and builds the final result.
#[derive(Debug)]
pub struct OutputBuilder {
    max_chars: usize,
    max_line: Option<usize>,
    buf: String,
    n_chars: usize,
    truncated: bool,
}

impl OutputBuilder {
    /// Builder for Shell and Grep: 50,000 chars total, 2,000 per line.
    pub fn new() -> Self {
        Self::with_limits(MAX_OUTPUT_CHARS, Some(MAX_LINE_CHARS))
    }

    /// Builder for the web tools: 50,000 chars total, no per-line cap.
    pub fn unlimited_lines() -> Self {
        Self::with_limits(MAX_OUTPUT_CHARS, None)
    }

    pub fn with_limits(max_chars: usize, max_line: Option<usize>) -> Self {
        Self { max_chars, max_line, buf: String::new(), n_chars: 0, truncated: false }
    }

    pub fn is_full(&self) -> bool {
        self.n_chars >= self.max_chars
    }

    pub fn truncated(&self) -> bool {
        self.truncated
    }

    pub fn text(&self) -> &str {
        &self.buf
    }

    /// Appends `text`, line by line, applying the line and total budgets.
    pub fn write(&mut self, text: &str) {
        for line in split_lines_keep_ends(text) {
            if self.is_full() {
                // As in the reference, only cut lines set the flag; a line that exactly fills the
                // budget has already been followed by a cut one in all but that edge case.
                break;
            }
            let remaining = self.max_chars - self.n_chars;
            let limit = self.max_line.map_or(remaining, |m| m.min(remaining));
            let cut = truncate_line(line, limit, TRUNCATED_MARKER);
            if cut != line {
                self.truncated = true;
            }
            self.n_chars += cut.chars().count();
            self.buf.push_str(&cut);
        }
    }

    fn final_message(&self, mut message: String) -> String {
        if self.truncated {
            if message.is_empty() {
                message = TRUNCATION_NOTE.to_string();
            } else {
                message.push(' ');
                message.push_str(TRUNCATION_NOTE);
            }
        }
        message
    }

    /// Success: a non-empty message gets a final `.`; the truncation note follows.
    pub fn ok(self, message: impl Into<String>) -> ToolReturnValue {
        let mut message = message.into();
        if !message.is_empty() && !message.ends_with('.') {
            message.push('.');
        }
        let message = self.final_message(message);
        ToolReturnValue::ok(self.buf, message)
    }

    /// Error with a brief; the message is only extended by the truncation note.
    pub fn error(self, message: impl Into<String>, brief: impl Into<String>) -> ToolReturnValue {
        let message = self.final_message(message.into());
        ToolReturnValue::error(message, brief).with_output(self.buf)
    }
}

impl Default for OutputBuilder {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncates_long_lines_keeping_endings() {
        let line = format!("{}\n", "x".repeat(30));
        let cut = truncate_line(&line, 20, "...");
        assert_eq!(cut, format!("{}...\n", "x".repeat(16)));
        assert_eq!(cut.chars().count(), 20);
        assert_eq!(truncate_line("short\n", 20, "..."), "short\n");
    }

    #[test]
    fn builder_caps_lines_and_total() {
        let mut b = OutputBuilder::with_limits(100, Some(20));
        b.write(&format!("{}\nok\n", "y".repeat(50)));
        assert!(b.truncated());
        assert_eq!(b.text(), format!("{}[...truncated]\nok\n", "y".repeat(5)));
        let r = b.ok("done");
        assert_eq!(r.message, "done. Output is truncated to fit in the message.");
        let mut b = OutputBuilder::with_limits(10, None);
        b.write("0123456789abc\nmore\n");
        assert!(b.is_full());
        assert_eq!(b.ok("").message, "Output is truncated to fit in the message.");
    }

    #[test]
    fn splitlines_matches_python() {
        assert_eq!(split_lines_keep_ends("a\r\nb\rc\nd"), vec!["a\r\n", "b\r", "c\n", "d"]);
        assert_eq!(split_lines("a\r\nb\u{2028}c\n"), vec!["a", "b", "c"]);
        assert!(split_lines("").is_empty());
    }
}
