//! `ReadFile`: numbered lines of a text file (`docs/tools.md` §4).
//!
//! Invariants: at most 1,000 lines and ~100 KiB of (truncated) text per call; lines longer than
//! 2,000 characters are cut with `...`; `\r\n` and lone `\r` count as line ends and come back as
//! `\n` (Python's universal newlines); invalid UTF-8 is replaced, never an error. The file is
//! streamed with bounded memory per line, so a huge or single-line file cannot blow up memory.

use std::io::{BufRead, BufReader};
use std::path::Path;

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use super::client_files::ClientFileAccess;
use super::file_type::{self, Kind};
use super::output::truncate_line;
use super::{ToolCallContext, TypedTool, invalid_arguments, paths};
use crate::protocol::ToolReturnValue;

pub const MAX_LINES: usize = 1000;
pub const MAX_LINE_CHARS: usize = 2000;
pub const MAX_BYTES: usize = 100 << 10;
/// Bytes of one line kept in memory: enough to hold more than 2,000 characters of any UTF-8.
const MAX_KEPT_LINE_BYTES: usize = 16 * 1024;

fn one() -> i64 {
    1
}
fn default_n_lines() -> i64 {
    MAX_LINES as i64
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadFileParams {
    /// Path of the file; absolute is recommended, relative paths are taken from the working
    /// directory.
    pub path: String,
    /// First line to return, counted from 1.
    #[serde(default = "one")]
    #[schemars(range(min = 1))]
    pub line_offset: i64,
    /// How many lines to return (at most 1000 are returned per call).
    #[serde(default = "default_n_lines")]
    #[schemars(range(min = 1))]
    pub n_lines: i64,
}

pub struct ReadFile;

impl TypedTool for ReadFile {
    type Params = ReadFileParams;
    const NAME: &'static str = "ReadFile";

    fn description(&self) -> String {
        include_str!("desc/read_file.md")
            .trim()
            .replace("{max_lines}", &MAX_LINES.to_string())
            .replace("{max_line_chars}", &MAX_LINE_CHARS.to_string())
            .replace("{max_bytes}", &MAX_BYTES.to_string())
    }

    fn run<'a>(&'a self, params: ReadFileParams, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        Box::pin(async move {
            if params.line_offset < 1 {
                return invalid_arguments(format!(
                    "Error validating JSON arguments: line_offset must be greater than or equal to 1, got {}",
                    params.line_offset
                ));
            }
            if params.n_lines < 1 {
                return invalid_arguments(format!(
                    "Error validating JSON arguments: n_lines must be greater than or equal to 1, got {}",
                    params.n_lines
                ));
            }
            let work_dir = ctx.env.work_dir.clone();
            if let Ok(path) = check_path(&work_dir, &params.path, "read a file")
                && let Some(refused) = super::sandbox_gate::read_refusal(ctx, &path)
            {
                return refused;
            }
            let client = ctx.host.client_files().map(ClientFileAccess::new).filter(|c| c.can_read());
            match tokio::task::spawn_blocking(move || read_file(&work_dir, &params, client.as_ref())).await {
                Ok(result) => result,
                Err(e) => ToolReturnValue::crashed(format!("Error running tool: {e}")),
            }
        })
    }
}

/// Shared by the path-taking file tools: empty path and relative-escape checks. `verb` is
/// "read a file", "write a file" or "edit a file".
// The error is the finished tool result, handed straight back to the model; it is cold.
#[allow(clippy::result_large_err)]
pub(crate) fn check_path(work_dir: &Path, path: &str, verb: &str) -> Result<std::path::PathBuf, ToolReturnValue> {
    if path.is_empty() {
        return Err(ToolReturnValue::error("File path cannot be empty.", "Empty file path"));
    }
    let resolved = paths::resolve(work_dir, path);
    if !paths::is_absolute_input(path) && !paths::is_within(&resolved, work_dir) {
        return Err(ToolReturnValue::error(
            format!(
                "`{path}` is not an absolute path. You must provide an absolute path to {verb} outside the working directory."
            ),
            "Invalid path",
        ));
    }
    Ok(resolved)
}

/// With `client`, the text comes from the client (its buffer, unsaved edits included); the local
/// file still decides whether it exists and is text.
fn read_file(work_dir: &Path, params: &ReadFileParams, client: Option<&ClientFileAccess>) -> ToolReturnValue {
    let given = params.path.as_str();
    let path = match check_path(work_dir, given, "read a file") {
        Ok(p) => p,
        Err(e) => return e,
    };
    let meta = match std::fs::metadata(&path) {
        Ok(m) => m,
        Err(e) if paths::is_missing(&e) => {
            return ToolReturnValue::error(format!("`{given}` does not exist."), "File not found");
        }
        Err(e) => return failed(given, e),
    };
    if !meta.is_file() {
        return ToolReturnValue::error(format!("`{given}` is not a file."), "Invalid path");
    }
    let header = match file_type::read_header(&path) {
        Ok(h) => h,
        Err(e) => return failed(given, e),
    };
    let ft = file_type::detect(&path, Some(&header));
    match ft.kind {
        Kind::Image | Kind::Video => {
            return ToolReturnValue::error(
                format!(
                    "`{given}` is a {} file. Use other appropriate tools to read image or video files.",
                    ft.kind.as_str()
                ),
                "Unsupported file type",
            );
        }
        Kind::Unknown => {
            return ToolReturnValue::error(
                format!(
                    "`{given}` seems not readable. You may need to read it with proper shell commands, Python tools \
                     or MCP tools if available. If you read/operate it with Python, you MUST ensure that any \
                     third-party packages are installed in a virtual environment (venv)."
                ),
                "File not readable",
            );
        }
        Kind::Text => {}
    }
    let source: Box<dyn BufRead> = match client {
        Some(client) => match client.read_text(&path) {
            Ok(text) => Box::new(std::io::Cursor::new(text.into_bytes())),
            Err(e) => return failed(given, e),
        },
        None => match file_type::open_regular(&path) {
            Ok(f) => Box::new(BufReader::new(f)),
            Err(e) => return failed(given, e),
        },
    };
    let offset = params.line_offset as usize;
    let n_lines = params.n_lines as usize;
    let mut reader = UniversalLines::new(source);
    let mut out = String::new();
    let mut count = 0usize;
    let mut n_bytes = 0usize;
    let mut truncated_lines: Vec<usize> = Vec::new();
    let (mut max_lines_reached, mut max_bytes_reached) = (false, false);
    let mut line_no = 0usize;
    loop {
        let line = match reader.next_line() {
            Ok(Some(l)) => l,
            Ok(None) => break,
            Err(e) => return failed(given, e),
        };
        line_no += 1;
        if line_no < offset {
            continue;
        }
        let text = String::from_utf8_lossy(&line.bytes);
        // An overlong line keeps 16 KiB, i.e. more than 2,000 characters, so it is always cut here.
        let cut = truncate_line(&text, MAX_LINE_CHARS, "...");
        if cut != text {
            truncated_lines.push(line_no);
        }
        n_bytes += cut.len();
        out.push_str(&format!("{line_no:6}\t{cut}"));
        count += 1;
        if count >= n_lines {
            break;
        }
        if count >= MAX_LINES {
            max_lines_reached = true;
            break;
        }
        if n_bytes >= MAX_BYTES {
            max_bytes_reached = true;
            break;
        }
    }
    let mut message = if count > 0 {
        format!("{count} lines read from file starting from line {offset}.")
    } else {
        "No lines read from file.".to_string()
    };
    if max_lines_reached {
        message.push_str(&format!(" Max {MAX_LINES} lines reached."));
    } else if max_bytes_reached {
        message.push_str(&format!(" Max {MAX_BYTES} bytes reached."));
    } else if count < n_lines {
        message.push_str(" End of file reached.");
    }
    if !truncated_lines.is_empty() {
        let list: Vec<String> = truncated_lines.iter().map(|n| n.to_string()).collect();
        message.push_str(&format!(" Lines [{}] were truncated.", list.join(", ")));
    }
    ToolReturnValue::ok(out, message)
}

fn failed(given: &str, e: std::io::Error) -> ToolReturnValue {
    ToolReturnValue::error(format!("Failed to read {given}. Error: {e}"), "Failed to read file")
}

/// One line as read: its bytes (ending normalized to `\n`) and whether bytes were dropped.
pub(crate) struct RawLine {
    pub bytes: Vec<u8>,
    pub overlong: bool,
}

/// Streams lines with universal newlines, keeping at most [`MAX_KEPT_LINE_BYTES`] per line.
pub(crate) struct UniversalLines<R: BufRead> {
    inner: R,
    /// A `\r` ended the previous line; a following `\n` belongs to it.
    after_cr: bool,
}

impl<R: BufRead> UniversalLines<R> {
    pub fn new(inner: R) -> Self {
        Self { inner, after_cr: false }
    }

    pub fn next_line(&mut self) -> std::io::Result<Option<RawLine>> {
        let mut line = RawLine { bytes: Vec::new(), overlong: false };
        let mut any = false;
        loop {
            let buf = match self.inner.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if buf.is_empty() {
                return Ok(if any { Some(line) } else { None });
            }
            if self.after_cr {
                self.after_cr = false;
                if buf[0] == b'\n' {
                    self.inner.consume(1);
                    continue;
                }
            }
            any = true;
            match buf.iter().position(|&b| b == b'\n' || b == b'\r') {
                Some(i) => {
                    let is_cr = buf[i] == b'\r';
                    push_capped(&mut line, &buf[..i]);
                    line.bytes.push(b'\n');
                    self.inner.consume(i + 1);
                    self.after_cr = is_cr;
                    return Ok(Some(line));
                }
                None => {
                    let n = buf.len();
                    push_capped(&mut line, buf);
                    self.inner.consume(n);
                }
            }
        }
    }
}

fn push_capped(line: &mut RawLine, data: &[u8]) {
    let room = MAX_KEPT_LINE_BYTES.saturating_sub(line.bytes.len());
    if data.len() > room {
        line.bytes.extend_from_slice(&data[..room]);
        line.overlong = true;
    } else {
        line.bytes.extend_from_slice(data);
    }
}
