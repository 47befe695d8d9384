//! The conversation context: history, token count and checkpoints, mirrored line by line into
//! `context.jsonl` (`docs/sessions.md` §5).
//!
//! Invariants: memory and file change together, one line per change; a restore skips torn or
//! unparsable lines with a warning (it never fails the start and never silently empties the
//! history); rotation renames the file to `context_<N>.jsonl` before a new one is started.
//!
//! A failed append (disk full) keeps the change in memory, leaves the file at its last complete
//! record (see `session::jsonl`) and is remembered until the soul collects it with
//! [`Context::take_write_error`] and tells the client (`docs/sessions.md` §7.2).

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::llm::{Message, Role};
use crate::session::jsonl::{JsonlAppender, read_lines};
use crate::session::pyjson;

#[derive(Serialize)]
struct CheckpointLine {
    role: &'static str,
    id: u64,
}

#[derive(Serialize)]
struct UsageLine {
    role: &'static str,
    token_count: u64,
}

pub struct Context {
    path: PathBuf,
    file: Option<JsonlAppender>,
    history: Vec<Message>,
    token_count: u64,
    /// Id of the next checkpoint (= number of checkpoints taken).
    next_checkpoint: u64,
    /// The first write failure not yet reported to the client.
    write_error: Option<String>,
}

impl Context {
    /// A throw-away context that is never written to disk (the nested `/init` turn).
    pub fn in_memory() -> Self {
        Self {
            path: PathBuf::new(),
            file: None,
            history: Vec::new(),
            token_count: 0,
            next_checkpoint: 0,
            write_error: None,
        }
    }

    /// An empty context on a file that holds no history yet, already open for appending (a new
    /// session's, see `session::context_prompt::ensure`).
    pub fn fresh(path: &Path, file: JsonlAppender) -> Self {
        Self { path: path.to_path_buf(), file: Some(file), ..Self::in_memory() }
    }

    /// Restores from `path` (missing or empty file = empty context) and opens it for appending.
    pub fn restore(path: &Path) -> std::io::Result<Self> {
        let mut ctx = Self { path: path.to_path_buf(), ..Self::in_memory() };
        for (n, line) in read_lines(path)?.iter().enumerate() {
            ctx.apply_line(line, n + 1);
        }
        ctx.file = Some(JsonlAppender::open(path)?);
        Ok(ctx)
    }

    fn apply_line(&mut self, line: &str, n: usize) {
        /// `_checkpoint` / `_usage` bookkeeping lines.
        #[derive(serde::Deserialize)]
        struct Marker {
            role: String,
            id: Option<u64>,
            token_count: Option<u64>,
        }
        // The `_system_prompt` record is the builder's (`session::context_prompt`), not history.
        if line.starts_with("{\"role\": \"_system_prompt\"") {
            return;
        }
        // Messages are most lines; parse each line once, as what it most likely is.
        let is_marker = line.contains("\"_checkpoint\"") || line.contains("\"_usage\"");
        if is_marker && let Ok(marker) = serde_json::from_str::<Marker>(line) {
            match (marker.role.as_str(), marker.id, marker.token_count) {
                ("_checkpoint", Some(id), _) => self.next_checkpoint = id + 1,
                ("_usage", _, Some(t)) => self.token_count = t,
                _ => tracing::warn!("{}:{n}: skipping an unknown bookkeeping line", self.path.display()),
            }
            return;
        }
        match serde_json::from_str::<Message>(line) {
            Ok(m) => self.history.push(m),
            Err(e) => tracing::warn!("{}:{n}: skipping an unreadable line ({e})", self.path.display()),
        }
    }

    /// The file the context is mirrored to (empty for one kept in memory).
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn history(&self) -> &[Message] {
        &self.history
    }

    pub fn token_count(&self) -> u64 {
        self.token_count
    }

    pub fn checkpoints(&self) -> u64 {
        self.next_checkpoint
    }

    /// Where the file stands now (which rotation, how many bytes), for `session::fork`; `None`
    /// for a context kept only in memory.
    pub fn position(&self) -> Option<crate::session::fork::ContextMark> {
        let file = self.file.as_ref()?;
        let dir = self.path.parent()?;
        Some(crate::session::fork::ContextMark {
            rotation: crate::session::fork::highest_archive(dir),
            bytes: file.len(),
        })
    }

    /// Appends one line; a failure (already logged and cut back by the appender) is kept for
    /// [`Context::take_write_error`]. Later failures before it is taken add nothing new.
    fn write(&mut self, line: &[u8]) {
        if let Some(file) = &mut self.file
            && let Err(e) = file.append(line)
            && self.write_error.is_none()
        {
            self.write_error = Some(format!("Failed to write the session file {}: {e}", self.path.display()));
        }
    }

    /// The first failed write to `context.jsonl` since the last call, as a message for the
    /// client ("Failed to write the session file <path>: <cause>"). The history in memory is
    /// intact; the file lacks the failed records.
    pub fn take_write_error(&mut self) -> Option<String> {
        self.write_error.take()
    }

    /// Appends a bookkeeping line made elsewhere (the `_system_prompt` record after a rotation).
    pub fn write_record(&mut self, line: &[u8]) {
        self.write(line);
    }

    pub fn checkpoint(&mut self) -> u64 {
        let id = self.next_checkpoint;
        self.next_checkpoint += 1;
        if let Ok(line) = pyjson::to_line(&CheckpointLine { role: "_checkpoint", id }) {
            self.write(&line);
        }
        id
    }

    pub fn append(&mut self, message: Message) {
        match serde_json::to_vec(&message) {
            Ok(mut line) => {
                line.push(b'\n');
                self.write(&line);
            }
            Err(e) => tracing::error!("cannot serialize a context message: {e}"),
        }
        self.history.push(message);
    }

    pub fn set_token_count(&mut self, token_count: u64) {
        self.token_count = token_count;
        if let Ok(line) = pyjson::to_line(&UsageLine { role: "_usage", token_count }) {
            self.write(&line);
        }
    }

    /// Archives the file as `context_<N>.jsonl` and starts an empty context.
    pub fn clear(&mut self) -> std::io::Result<()> {
        self.rotate()?;
        self.history.clear();
        self.token_count = 0;
        self.next_checkpoint = 0;
        Ok(())
    }

    fn rotate(&mut self) -> std::io::Result<()> {
        if self.file.is_none() {
            return Ok(());
        }
        self.file = None;
        if self.path.exists() {
            let archive = next_archive_path(&self.path)?;
            std::fs::rename(&self.path, archive)?;
        }
        std::fs::File::create(&self.path)?;
        self.file = Some(JsonlAppender::open(&self.path)?);
        Ok(())
    }

    /// Rolls back to just before checkpoint `id`: the file is archived and the new one holds the
    /// lines that came before that checkpoint; memory is rebuilt from them.
    pub fn revert_to(&mut self, id: u64) -> std::io::Result<()> {
        let lines = read_lines(&self.path)?;
        let is_target = |line: &str| {
            serde_json::from_str::<serde_json::Value>(line).is_ok_and(|v| {
                v.get("role").and_then(|r| r.as_str()) == Some("_checkpoint")
                    && v.get("id").and_then(|i| i.as_u64()) == Some(id)
            })
        };
        let keep = lines.iter().position(|l| is_target(l)).unwrap_or(lines.len());
        self.rotate()?;
        self.history.clear();
        self.token_count = 0;
        self.next_checkpoint = 0;
        for (n, line) in lines[..keep].iter().enumerate() {
            let mut bytes = line.clone().into_bytes();
            bytes.push(b'\n');
            self.write(&bytes);
            self.apply_line(line, n + 1);
        }
        Ok(())
    }

    /// Number of `user`/`assistant` messages (compaction keeps the last two of them).
    pub fn is_empty(&self) -> bool {
        self.history.is_empty()
    }

    pub fn last_role(&self) -> Option<Role> {
        self.history.last().map(|m| m.role)
    }
}

/// `context_<N>.jsonl` with N one past the highest existing, reserved by creating it (mode 0600).
fn next_archive_path(path: &Path) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = path.parent().unwrap_or(Path::new("."));
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("context");
    let prefix = format!("{stem}_");
    let mut highest = 0u64;
    for entry in std::fs::read_dir(dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        if let Some(n) =
            name.strip_prefix(&prefix).and_then(|r| r.strip_suffix(".jsonl")).and_then(|n| n.parse::<u64>().ok())
        {
            highest = highest.max(n);
        }
    }
    let mut n = highest + 1;
    loop {
        let candidate = dir.join(format!("{prefix}{n}.jsonl"));
        match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&candidate) {
            Ok(_) => return Ok(candidate),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => n += 1,
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_match_the_reference_format_and_restore() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("context.jsonl");
        let mut c = Context::restore(&path).unwrap();
        c.checkpoint();
        c.append(Message::user_text("go"));
        c.checkpoint();
        c.set_token_count(60000);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "{\"role\": \"_checkpoint\", \"id\": 0}\n{\"role\":\"user\",\"content\":\"go\"}\n{\"role\": \"_checkpoint\", \"id\": 1}\n{\"role\": \"_usage\", \"token_count\": 60000}\n"
        );
        drop(c);
        let c = Context::restore(&path).unwrap();
        assert_eq!(c.history().len(), 1);
        assert_eq!(c.token_count(), 60000);
        assert_eq!(c.checkpoints(), 2);
    }

    #[test]
    fn torn_tail_is_skipped_and_next_line_is_fresh() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("context.jsonl");
        std::fs::write(&path, "{\"role\":\"user\",\"content\":\"a\"}\n{\"role\":\"assis").unwrap();
        let mut c = Context::restore(&path).unwrap();
        assert_eq!(c.history().len(), 1);
        c.append(Message::user_text("b"));
        drop(c);
        let c = Context::restore(&path).unwrap();
        assert_eq!(c.history().len(), 2);
    }

    #[test]
    fn clear_rotates() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("context.jsonl");
        let mut c = Context::restore(&path).unwrap();
        c.append(Message::user_text("a"));
        c.clear().unwrap();
        c.clear().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 0);
        assert!(dir.path().join("context_1.jsonl").exists());
        assert!(dir.path().join("context_2.jsonl").exists());
        assert!(c.is_empty());
    }

    /// A write cut short by a file-size limit (`RLIMIT_FSIZE`, in a child run of this test so the
    /// limit touches nothing else) is reported once, leaves the file at its last complete record,
    /// and the next record is written clean; a resume loses only the failed message.
    #[test]
    fn a_failed_write_is_reported_and_does_not_poison_the_file() {
        const CHILD: &str = "KIWI_CONTEXT_FSIZE_CHILD";
        if let Some(path) = std::env::var_os(CHILD) {
            let path = PathBuf::from(path);
            crate::session::file_limit::limit_file_size(200);
            let mut c = Context::restore(&path).unwrap();
            c.checkpoint();
            c.append(Message::user_text("small"));
            assert_eq!(c.take_write_error(), None);
            c.append(Message::user_text("x".repeat(300)));
            c.append(Message::user_text("y".repeat(300)));
            let e = c.take_write_error().expect("reported");
            assert!(e.starts_with(&format!("Failed to write the session file {}: ", path.display())), "{e}");
            assert!(e.contains("too large"), "{e}");
            assert_eq!(c.take_write_error(), None, "reported once");
            assert_eq!(c.history().len(), 3, "memory keeps every message");
            c.append(Message::user_text("after"));
            assert_eq!(c.take_write_error(), None);
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("context.jsonl");
        crate::session::file_limit::run_child(
            "soul::context::tests::a_failed_write_is_reported_and_does_not_poison_the_file",
            CHILD,
            &path,
        );
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "{\"role\": \"_checkpoint\", \"id\": 0}\n{\"role\":\"user\",\"content\":\"small\"}\n{\"role\":\"user\",\"content\":\"after\"}\n"
        );
        let c = Context::restore(&path).unwrap();
        assert_eq!(c.history().len(), 2);
    }
}
