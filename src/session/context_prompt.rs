//! The `_system_prompt` record that opens `context.jsonl` (`docs/protocol-1.10.md` §10.3), and what makes a
//! session worth keeping (§10.4).
//!
//! Invariants: the record is `{"role": "_system_prompt", "content": "…"}` with Python's
//! separators and every non-ASCII character `\u`-escaped, on the first line of a context file; a
//! session resumes with the prompt it recorded, and a file written before the record existed gets
//! it prepended (atomically, by rewriting through a temp file and a rename), so the prompt a
//! session started with stays the prompt it runs with.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::jsonl::JsonlAppender;

pub const ROLE: &str = "_system_prompt";

#[derive(Serialize, Deserialize)]
struct Record<'a> {
    role: &'a str,
    content: String,
}

/// The record's line, `\n` included.
pub fn record_line(prompt: &str) -> Vec<u8> {
    let mut buf = super::pyjson_ascii::to_vec(&Record { role: ROLE, content: prompt.to_string() });
    buf.push(b'\n');
    buf
}

/// The prompt of a `_system_prompt` line, if `line` is one.
pub fn parse_record(line: &str) -> Option<String> {
    if !line.contains(ROLE) {
        return None;
    }
    let record: Record = serde_json::from_str(line).ok()?;
    (record.role == ROLE).then_some(record.content)
}

/// What [`ensure`] found in a context file.
pub struct Ensured {
    /// The prompt the session runs with: the recorded one, or the rendered one when there was none.
    pub prompt: String,
    /// A file that held nothing (a new session) now holds only the record and is open here for
    /// appending: its context is empty, with no need to read the file back.
    pub fresh: Option<JsonlAppender>,
}

/// Makes the context file at `path` start with a `_system_prompt` record; see [`Ensured`].
pub fn ensure(path: &Path, rendered: &str) -> std::io::Result<Ensured> {
    let existing = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e),
    };
    let first_line = existing.split(|&b| b == b'\n').find(|l| !l.iter().all(u8::is_ascii_whitespace));
    if let Some(prompt) = first_line.and_then(|l| parse_record(&String::from_utf8_lossy(l))) {
        return Ok(Ensured { prompt, fresh: None });
    }
    if existing.iter().all(u8::is_ascii_whitespace) {
        let file = start(path, rendered, !existing.is_empty())?;
        return Ok(Ensured { prompt: rendered.to_string(), fresh: Some(file) });
    }
    let mut text = record_line(rendered);
    text.extend_from_slice(&existing);
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".context.{}.{}.tmp", std::process::id(), uuid::Uuid::new_v4().simple()));
    let written = std::fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(&text)?;
        f.sync_all()
    });
    match written.and_then(|()| std::fs::rename(&tmp, path)) {
        Ok(()) => Ok(Ensured { prompt: rendered.to_string(), fresh: None }),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Starts a new session's context file at `path` (created, or emptied when `clear`) with the
/// record, open for appending what follows. Nothing to keep safe, so no temp file and no fsync
/// (start-up waits on both): a record torn by a crash is a malformed line, which readers skip,
/// and the session then gets the record prepended on its next start, like a file written before
/// the record existed.
pub fn start(path: &Path, prompt: &str, clear: bool) -> std::io::Result<JsonlAppender> {
    let file = std::fs::OpenOptions::new().create(true).read(true).append(true).open(path)?;
    if clear {
        file.set_len(0)?;
    }
    let mut appender = JsonlAppender::with_target(path, file, 0);
    appender.append(&record_line(prompt))?;
    Ok(appender)
}

/// Whether the context file holds anything but bookkeeping (records whose role starts with `_`).
/// Read as a stream up to the first conversation record, so a big file costs neither memory nor
/// time at exit; unreadable records are kept on the safe side (the session is not deleted).
pub fn has_conversation(path: &Path) -> bool {
    #[derive(Deserialize)]
    struct Role {
        role: Option<String>,
    }
    super::jsonl::any_record(path, |r: &Role| r.role.as_ref().is_none_or(|role| !role.starts_with('_'))).unwrap_or(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_is_python_json_ascii_escaped() {
        assert_eq!(
            String::from_utf8(record_line("Hi \"there\"\nπ 😀\u{1}")).unwrap(),
            "{\"role\": \"_system_prompt\", \"content\": \"Hi \\\"there\\\"\\n\\u03c0 \\ud83d\\ude00\\u0001\"}\n"
        );
        let line = String::from_utf8(record_line("Hi π 😀")).unwrap();
        assert_eq!(parse_record(line.trim()), Some("Hi π 😀".to_string()));
        assert_eq!(parse_record(r#"{"role":"user","content":"_system_prompt"}"#), None);
    }

    #[test]
    fn ensure_writes_keeps_or_prepends() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("context.jsonl");
        assert_eq!(ensure(&path, "first").unwrap().prompt, "first");
        assert_eq!(std::fs::read(&path).unwrap(), record_line("first"));
        assert_eq!(ensure(&path, "second").unwrap().prompt, "first", "a resumed session keeps its prompt");
        let old = dir.path().join("old.jsonl");
        std::fs::write(&old, "{\"role\": \"_checkpoint\", \"id\": 0}\n{\"role\":\"user\",\"content\":\"hi\"}\n")
            .unwrap();
        assert_eq!(ensure(&old, "now").unwrap().prompt, "now");
        let text = std::fs::read_to_string(&old).unwrap();
        assert!(text.starts_with("{\"role\": \"_system_prompt\", \"content\": \"now\"}\n{\"role\": \"_checkpoint\""));
        assert_eq!(text.lines().count(), 3);
    }

    #[test]
    fn a_new_file_is_started_and_left_open_for_what_follows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("context.jsonl");
        std::fs::write(&path, "\n  \n").unwrap();
        let ensured = ensure(&path, "fresh").unwrap();
        let mut file = ensured.fresh.expect("an empty file is a new session's");
        file.append(b"{\"role\": \"user\", \"content\": \"hi\"}\n").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "{\"role\": \"_system_prompt\", \"content\": \"fresh\"}\n{\"role\": \"user\", \"content\": \"hi\"}\n"
        );
        assert!(ensure(&path, "other").unwrap().fresh.is_none(), "a file with a record is not new");
    }

    #[test]
    fn a_record_torn_by_a_crash_gets_a_whole_one_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("context.jsonl");
        std::fs::write(&path, "{\"role\": \"_system_pro").unwrap();
        assert_eq!(ensure(&path, "again").unwrap().prompt, "again");
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "{\"role\": \"_system_prompt\", \"content\": \"again\"}\n{\"role\": \"_system_pro");
        assert_eq!(ensure(&path, "later").unwrap().prompt, "again");
    }

    #[test]
    fn bookkeeping_alone_is_no_conversation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("context.jsonl");
        assert!(!has_conversation(&path));
        std::fs::write(&path, record_line("p")).unwrap();
        assert!(!has_conversation(&path));
        std::fs::write(
            &path,
            "{\"role\": \"_system_prompt\", \"content\": \"p\"}\n{\"role\":\"user\",\"content\":\"x\"}\n",
        )
        .unwrap();
        assert!(has_conversation(&path));
    }
}
