//! What WriteFile and StrReplaceFile share around the disk layer: the size limit, the approval
//! action decided on the resolved path, text decoding, the refusal messages, and running the
//! blocking work off the async thread so that it stops when the call is dropped.
//!
//! Invariants:
//! - No file above [`MAX_EDIT_BYTES`] is read, and no text above it is built or written.
//! - "Inside the work dir" compares the resolved target with the canonical work dir. This leaves
//!   `docs/tools.md` §1, which decides it lexically without resolving links: kiwi's rule (`docs/tools.md` §19.6) wins,
//!   so a session-wide approval of `edit file` never writes outside the work dir through a link.
//! - Blocking work runs on the blocking pool; when the tool call's future is dropped (the turn
//!   was cancelled) the shared stop flag is raised, and long loops (the diff) poll it.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::disk::DiskError;
use crate::protocol::ToolReturnValue;
use crate::tools::paths;

/// Largest file an edit reads and largest text it writes (also the largest `content`).
pub const MAX_EDIT_BYTES: u64 = 10 << 20;
/// [`MAX_EDIT_BYTES`] as the messages and tool descriptions spell it.
pub const MAX_EDIT_LABEL: &str = "10 MiB";

pub(crate) const EDIT: &str = "edit file";
pub(crate) const EDIT_OUTSIDE: &str = "edit file outside of working directory";

/// A failed step of an edit: the finished tool result (boxed, it is large and cold).
pub type Step<T> = Result<T, Box<ToolReturnValue>>;

/// Which tool is speaking: the two word their failures differently (`docs/tools.md` §6, §7).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Editor {
    Write,
    Replace,
}

impl Editor {
    /// The tool's own failure message for an I/O error.
    pub fn failed(self, given: &str, e: &std::io::Error) -> Box<ToolReturnValue> {
        Box::new(match self {
            Editor::Write => {
                ToolReturnValue::error(format!("Failed to write to {given}. Error: {e}"), "Failed to write file")
            }
            Editor::Replace => ToolReturnValue::error(format!("Failed to edit. Error: {e}"), "Failed to edit file"),
        })
    }

    /// A failed replace: as [`Editor::failed`], saying that nothing changed on disk (the write is
    /// atomic, so that is always true when this is reported).
    pub fn write_failed(self, given: &str, e: &std::io::Error, existed: bool) -> Box<ToolReturnValue> {
        let mut r = self.failed(given, e);
        r.message.push_str(if existed { ". The file was left unchanged." } else { ". No file was created." });
        r
    }

    /// The answer for a path the disk layer refused.
    pub fn refusal(self, e: DiskError, given: &str) -> Box<ToolReturnValue> {
        match e {
            DiskError::Missing if self == Editor::Replace => {
                Box::new(ToolReturnValue::error(format!("`{given}` does not exist."), "File not found"))
            }
            DiskError::Missing | DiskError::ParentMissing => Box::new(ToolReturnValue::error(
                format!("`{given}` parent directory does not exist."),
                "Parent directory not found",
            )),
            // Same words as ReadFile for a non-file (`docs/tools.md` §4 step 3).
            DiskError::NotAFile => {
                Box::new(ToolReturnValue::error(format!("`{given}` is not a file."), "Invalid path"))
            }
            DiskError::TooLarge(size) => too_large(format!("`{given}` is {size} bytes")),
            DiskError::Io(e) => self.failed(given, &e),
        }
    }
}

/// Refusal of a file, content or result above the limit; `what` says what is too large.
pub fn too_large(what: String) -> Box<ToolReturnValue> {
    Box::new(ToolReturnValue::error(
        format!(
            "{what}, which exceeds the max {MAX_EDIT_LABEL} ({MAX_EDIT_BYTES} bytes) for editing files. \
             Nothing was changed; use shell commands for files this large."
        ),
        "File too large",
    ))
}

/// Refusal of a file whose bytes are not UTF-8: decoding would replace them and the write would
/// destroy them (this leaves `docs/tools.md` §6/§7, which decode with replacement; `docs/tools.md` §19.6).
pub fn not_utf8(given: &str) -> Box<ToolReturnValue> {
    Box::new(ToolReturnValue::error(
        format!(
            "`{given}` is not valid UTF-8 text, so it cannot be edited without corrupting it. Nothing was changed; \
             use shell commands to edit files in other encodings."
        ),
        "File not editable",
    ))
}

/// Refusal when the file changed during the approval in a way the edit cannot follow.
pub fn changed(given: &str, what: &str) -> Box<ToolReturnValue> {
    Box::new(ToolReturnValue::error(
        format!(
            "`{given}` was changed while the {what} was waiting for approval, and the {what} no longer applies \
             to its current content. Nothing was written, so that change is kept. Read the file again and redo \
             the {what}."
        ),
        "File changed",
    ))
}

/// The approval action for a resolved target: inside the canonical work dir or not.
pub fn action_for(real: &Path, work_dir: &Path) -> &'static str {
    let work = std::fs::canonicalize(work_dir).unwrap_or_else(|_| paths::normalize(work_dir));
    if real.starts_with(work) { EDIT } else { EDIT_OUTSIDE }
}

/// Text as the reference reads it (`docs/tools.md` §6 step 3): UTF-8 with replacement, universal
/// newlines. Only for display and for overwriting, where no byte of the old text survives.
pub fn lossy_text(bytes: &[u8]) -> String {
    universal_newlines(String::from_utf8_lossy(bytes).into_owned())
}

/// Strict UTF-8 with universal newlines; `None` when the bytes are not UTF-8.
pub fn utf8_text(bytes: &[u8]) -> Option<String> {
    std::str::from_utf8(bytes).ok().map(|s| universal_newlines(s.to_string()))
}

fn universal_newlines(text: String) -> String {
    if text.contains('\r') { text.replace("\r\n", "\n").replace('\r', "\n") } else { text }
}

/// Raises the stop flag when dropped, i.e. when the future awaiting the work goes away.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Runs `work` on the blocking pool. Dropping the returned future raises the flag `work` is
/// given; the work itself is not interrupted, so it must poll the flag in its long loops.
pub async fn off_thread<T: Send + 'static>(work: impl FnOnce(&AtomicBool) -> Step<T> + Send + 'static) -> Step<T> {
    let stop = Arc::new(AtomicBool::new(false));
    let _guard = StopOnDrop(Arc::clone(&stop));
    match tokio::task::spawn_blocking(move || work(&stop)).await {
        Ok(result) => result,
        Err(e) => Err(Box::new(ToolReturnValue::crashed(format!("Error running tool: {e}")))),
    }
}

/// The (never delivered) result of work that saw the stop flag: its caller is gone.
pub fn stopped() -> Box<ToolReturnValue> {
    Box::new(ToolReturnValue::error("The tool call was cancelled.", "Cancelled"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding() {
        assert_eq!(utf8_text(b"a\r\nb\rc"), Some("a\nb\nc".to_string()));
        assert_eq!(utf8_text(b"caf\xe9"), None);
        assert_eq!(lossy_text(b"caf\xe9\r\n"), "caf\u{FFFD}\n");
    }

    #[tokio::test]
    async fn dropping_the_future_raises_the_flag() {
        let (tx, rx) = std::sync::mpsc::channel();
        let call = off_thread(move |stop| {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            let _ = tx.send(());
            Ok(())
        });
        let _ = tokio::time::timeout(std::time::Duration::from_millis(20), call).await;
        assert!(rx.recv_timeout(std::time::Duration::from_secs(5)).is_ok());
    }
}
