//! Forking a stored session (`docs/sessions.md` §8): a new session of the same work dir holding the
//! history of the source up to the end of one turn (or all of it), independent afterwards.
//!
//! Turns are numbered from 0 by counting the `TurnBegin` records of `wire.jsonl` (slash-command
//! turns count). The fork gets:
//! * `wire.jsonl`: the metadata header and every record before the `TurnBegin` of turn k+1 (so
//!   the `TurnEnd` of turn k and whatever followed it before the next turn), each line trimmed;
//! * `context.jsonl`: the context as it stood when turn k+1 began. kiwi records that position
//!   in the `TurnBegin` record itself (a record-level `kiwi_context` member: which rotation of
//!   the context file was live and how many bytes of it were written), so steers, notifications,
//!   `/clear`, compaction and D-Mail never move the cut. A session written without the marker
//!   (by kimi) is cut by the reference's rule: before the (k+1)-th real user message;
//! * video uploads referenced by the copied records, copied into `uploads/` and listed in
//!   `uploads/.sent`;
//! * `state.json` with the title `Fork: <source title>` and everything else at its default.
//!
//! Invariants: the source is only read; a failure leaves no half-made session behind (the new
//! folder is removed); the files are streamed line by line, never read whole into memory.

use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::store::{Metadata, sessions_dir};

/// Where the context stood when a turn began: the live file was the one that the next rotation
/// archives as `context_<rotation + 1>.jsonl`, and `bytes` of it had been written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextMark {
    pub rotation: u64,
    pub bytes: u64,
}

/// The record-level member of a `TurnBegin` line that carries its [`ContextMark`].
pub const MARK_KEY: &str = "kiwi_context";

#[derive(Debug, Error, PartialEq, Eq)]
pub enum ForkError {
    #[error("wire.jsonl not found")]
    WireNotFound,
    /// `max` is the last turn index (-1 for a session without turns).
    #[error("turn_index {turn} out of range (max turn: {max})")]
    OutOfRange { turn: u64, max: i64 },
    #[error("{0}")]
    Io(String),
}

fn io(e: impl std::fmt::Display) -> ForkError {
    ForkError::Io(e.to_string())
}

/// The new session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forked {
    pub id: String,
    pub dir: PathBuf,
    pub title: String,
}

/// The highest `N` among the `context_<N>.jsonl` archives in `session_dir` (0 when none).
pub fn highest_archive(session_dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(session_dir) else { return 0 };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let name = name.to_str()?;
            name.strip_prefix("context_")?.strip_suffix(".jsonl")?.parse::<u64>().ok()
        })
        .max()
        .unwrap_or(0)
}

/// The number of `TurnBegin` records in the `wire.jsonl` at `path` (0 when there is none).
pub fn turn_count(path: &Path) -> u64 {
    let Ok(file) = std::fs::File::open(path) else { return 0 };
    let mut turns = 0;
    for line in BufReader::with_capacity(64 * 1024, file).split(b'\n').map_while(Result::ok) {
        if line.windows(11).any(|w| w == b"\"TurnBegin\"")
            && serde_json::from_slice::<LineProbe>(&line)
                .is_ok_and(|p| p.message.is_some_and(|m| m.kind == "TurnBegin"))
        {
            turns += 1;
        }
    }
    turns
}

/// Forks the session in `source` (a session folder of `work_dir` under `share`) after turn
/// `turn`, or after everything recorded when `turn` is `None`.
pub fn fork(share: &Path, work_dir: &Path, source: &Path, turn: Option<u64>) -> Result<Forked, ForkError> {
    fork_as(share, work_dir, source, turn, None)
}

/// [`fork`] into the session `id` when given (a checked id no session of `work_dir` uses yet),
/// else into a fresh UUID.
pub fn fork_as(
    share: &Path,
    work_dir: &Path,
    source: &Path,
    turn: Option<u64>,
    id: Option<&str>,
) -> Result<Forked, ForkError> {
    let wire = source.join("wire.jsonl");
    if !wire.is_file() {
        return Err(ForkError::WireNotFound);
    }
    let title = format!("Fork: {}", session_title(source));
    let id = match id {
        Some(id) => {
            super::id::check_session_id(id).map_err(ForkError::Io)?;
            id.to_string()
        }
        None => uuid::Uuid::new_v4().to_string(),
    };
    let dir = sessions_dir(share, work_dir).join(&id);
    if dir.exists() {
        return Err(ForkError::Io(format!("Session ID {id} is already in use.")));
    }
    std::fs::create_dir_all(&dir).map_err(io)?;
    match fill(source, &dir, turn, &title) {
        Ok(()) => {}
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
    }
    let work = work_dir.to_string_lossy().to_string();
    let registered = Metadata::update(share, |meta| {
        let known = meta.entry(&work).is_some();
        meta.entry_mut(&work);
        !known
    });
    if let Err(e) = registered {
        tracing::warn!("cannot register {} in kimi.json: {e}", work_dir.display());
    }
    Ok(Forked { id, dir, title })
}

/// The file in a fork's folder that says how many of its turns it was forked with (`{"turns":
/// n}`): those turns' file changes were made in the source session, whose before-images the fork
/// does not have, so undo says so (`docs/sessions.md` §9).
pub const FORKED_FILE: &str = "forked.json";

/// How many turns the session in `dir` was forked with; 0 for a session that is not a fork.
pub fn forked_turns(dir: &Path) -> u64 {
    let Ok(text) = std::fs::read(dir.join(FORKED_FILE)) else { return 0 };
    serde_json::from_slice::<serde_json::Value>(&text).ok().and_then(|v| v["turns"].as_u64()).unwrap_or(0)
}

/// Writes the fork's files into `dir`.
fn fill(source: &Path, dir: &Path, turn: Option<u64>, title: &str) -> Result<(), ForkError> {
    let cut = copy_wire(source, dir, turn)?;
    let turns = turn_count(&dir.join("wire.jsonl"));
    std::fs::write(dir.join(FORKED_FILE), serde_json::json!({"turns": turns}).to_string()).map_err(io)?;
    copy_context(source, dir, turn, &cut)?;
    copy_videos(source, dir, &cut.uploads)?;
    let wire_mtime = std::fs::metadata(dir.join("wire.jsonl"))
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs_f64());
    // The fork's own spending starts at $0; it is known as long as the source's was (the copied
    // history was priced), so a fork of a priced session keeps showing its cost.
    let cost = super::state::load(source).cost.map(|c| super::state::CostRecord { usd: 0.0, complete: c.complete });
    let state = super::state::SessionStateFile {
        custom_title: Some(title.to_string()),
        title_generated: true,
        wire_mtime,
        cost,
        ..Default::default()
    };
    super::state::save(dir, &state).map_err(io)
}

/// What copying the wire learned.
#[derive(Default)]
struct WireCut {
    /// The marker of the first turn left out (`None`: none left out, or it had no marker).
    next_mark: Option<ContextMark>,
    /// A turn was left out.
    cut: bool,
    /// `uploads/<name>` names of videos the copied records mention.
    uploads: Vec<String>,
}

#[derive(Deserialize)]
struct LineProbe {
    #[serde(rename = "type")]
    kind: Option<String>,
    message: Option<MessageProbe>,
    kiwi_context: Option<ContextMark>,
}

#[derive(Deserialize)]
struct MessageProbe {
    #[serde(rename = "type")]
    kind: String,
}

/// Copies the records before the `TurnBegin` of turn `turn + 1`.
fn copy_wire(source: &Path, dir: &Path, turn: Option<u64>) -> Result<WireCut, ForkError> {
    let input = std::fs::File::open(source.join("wire.jsonl")).map_err(io)?;
    let mut lines = BufReader::with_capacity(64 * 1024, input);
    let mut out = BufWriter::with_capacity(64 * 1024, std::fs::File::create(dir.join("wire.jsonl")).map_err(io)?);
    let header =
        format!("{{\"type\": \"metadata\", \"protocol_version\": \"{}\"}}\n", super::wire_log::WIRE_PROTOCOL_VERSION);
    let mut wrote_header = false;
    let mut turns: u64 = 0;
    let mut result = WireCut::default();
    // The marker rotation the fork's context keeps: the one its context was cut from.
    let keep_rotation = cut_rotation(source, turn)?;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        if lines.read_until(b'\n', &mut buf).map_err(io)? == 0 {
            break;
        }
        let Ok(text) = std::str::from_utf8(&buf) else { continue };
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        let Ok(probe) = serde_json::from_str::<LineProbe>(text) else { continue };
        if probe.kind.as_deref() == Some("metadata") {
            if !wrote_header {
                out.write_all(text.as_bytes()).and_then(|()| out.write_all(b"\n")).map_err(io)?;
                wrote_header = true;
            }
            continue;
        }
        let Some(message) = probe.message else { continue };
        if !wrote_header {
            out.write_all(header.as_bytes()).map_err(io)?;
            wrote_header = true;
        }
        let mut line = std::borrow::Cow::Borrowed(text);
        if message.kind == "TurnBegin" {
            if turn.is_some_and(|k| turns == k + 1) {
                result.cut = true;
                result.next_mark = probe.kiwi_context;
                break;
            }
            turns += 1;
            if let Some(mark) = probe.kiwi_context {
                // The fork's context is one fresh file (rotation 0) holding a prefix of the
                // file this turn's mark names only when it is the one cut from.
                let kept = keep_rotation.filter(|r| *r == mark.rotation).map(|_| ContextMark { rotation: 0, ..mark });
                line = std::borrow::Cow::Owned(remark(text, kept));
            }
        }
        find_videos(&line, &mut result.uploads);
        out.write_all(line.as_bytes()).and_then(|()| out.write_all(b"\n")).map_err(io)?;
    }
    if let Some(k) = turn
        && !result.cut
        && turns <= k
    {
        return Err(ForkError::OutOfRange { turn: k, max: turns as i64 - 1 });
    }
    if !wrote_header {
        out.write_all(header.as_bytes()).map_err(io)?;
    }
    out.flush().map_err(io)?;
    out.get_ref().sync_all().map_err(io)?;
    Ok(result)
}

/// The rotation the fork's context is taken from: that of turn `turn + 1`'s mark, or the live
/// file's when everything is copied. `None`: no marked cut (the fork's markers are dropped).
fn cut_rotation(source: &Path, turn: Option<u64>) -> Result<Option<u64>, ForkError> {
    let Some(k) = turn else { return Ok(Some(highest_archive(source))) };
    let input = std::fs::File::open(source.join("wire.jsonl")).map_err(io)?;
    let mut turns = 0u64;
    for line in BufReader::with_capacity(64 * 1024, input).split(b'\n') {
        let line = line.map_err(io)?;
        // Only `TurnBegin` lines matter; the others are not parsed.
        if !line.windows(11).any(|w| w == b"\"TurnBegin\"") {
            continue;
        }
        let Ok(probe) = serde_json::from_slice::<LineProbe>(&line) else { continue };
        if probe.message.is_some_and(|m| m.kind == "TurnBegin") {
            if turns == k + 1 {
                return Ok(probe.kiwi_context.map(|m| m.rotation));
            }
            turns += 1;
        }
    }
    Ok(None)
}

/// `text` (a record kiwi wrote, its mark last) with the mark replaced by `mark` or removed.
fn remark(text: &str, mark: Option<ContextMark>) -> String {
    let key = format!(", \"{MARK_KEY}\": ");
    let Some(at) = text.rfind(&key) else { return text.to_string() };
    let mut out = text[..at].to_string();
    if let Some(mark) = mark {
        out.push_str(&format!("{key}{{\"rotation\": {}, \"bytes\": {}}}", mark.rotation, mark.bytes));
    }
    out.push('}');
    out
}

/// Collects `uploads/<name>` references to video files in `line`.
fn find_videos(line: &str, names: &mut Vec<String>) {
    const VIDEO: [&str; 12] = ["mp4", "m4v", "mov", "webm", "mkv", "avi", "mpeg", "mpg", "ogv", "3gp", "wmv", "flv"];
    for (at, _) in line.match_indices("uploads/") {
        let rest = &line[at + "uploads/".len()..];
        let end = rest.find(['"', '\\', '/', '<', '>', '\n']).unwrap_or(rest.len());
        let name = &rest[..end];
        let is_video = name
            .rsplit_once('.')
            .is_some_and(|(stem, ext)| !stem.is_empty() && VIDEO.contains(&ext.to_ascii_lowercase().as_str()));
        if is_video && !names.iter().any(|n| n == name) {
            names.push(name.to_string());
        }
    }
}

/// Copies the mentioned videos that exist in the source's `uploads/` and lists them in `.sent`.
fn copy_videos(source: &Path, dir: &Path, names: &[String]) -> Result<(), ForkError> {
    let mut sent = Vec::new();
    for name in names {
        let from = source.join("uploads").join(name);
        if !from.is_file() {
            continue;
        }
        std::fs::create_dir_all(dir.join("uploads")).map_err(io)?;
        std::fs::copy(&from, dir.join("uploads").join(name)).map_err(io)?;
        sent.push(name.clone());
    }
    if !sent.is_empty() {
        let text = serde_json::to_string(&sent).map_err(io)?;
        std::fs::write(dir.join("uploads").join(".sent"), text).map_err(io)?;
    }
    Ok(())
}

/// Writes the fork's `context.jsonl`.
fn copy_context(source: &Path, dir: &Path, turn: Option<u64>, cut: &WireCut) -> Result<(), ForkError> {
    let target = dir.join("context.jsonl");
    let live = source.join("context.jsonl");
    if !cut.cut {
        // Everything: the live file's complete lines.
        return copy_prefix(&live, &target, u64::MAX);
    }
    if let Some(mark) = cut.next_mark {
        let file = if mark.rotation == highest_archive(source) {
            live.clone()
        } else {
            source.join(format!("context_{}.jsonl", mark.rotation + 1))
        };
        if ends_a_line(&file, mark.bytes) {
            return copy_prefix(&file, &target, mark.bytes);
        }
        tracing::warn!("{}: the recorded context position does not fit; cutting by user messages", file.display());
    }
    let k = turn.unwrap_or(0);
    copy_before_user_message(&live, &target, k + 1)
}

/// True when `path` holds at least `bytes` bytes and they end a line (or are none).
pub(crate) fn ends_a_line(path: &Path, bytes: u64) -> bool {
    use std::io::{Seek, SeekFrom};
    let Ok(mut file) = std::fs::File::open(path) else { return false };
    let Ok(len) = file.metadata().map(|m| m.len()) else { return false };
    if bytes == 0 {
        return true;
    }
    if len < bytes || file.seek(SeekFrom::Start(bytes - 1)).is_err() {
        return false;
    }
    let mut last = [0u8; 1];
    file.read_exact(&mut last).is_ok() && last[0] == b'\n'
}

/// Copies the complete lines among the first `limit` bytes of `from` (a missing file: empty).
fn copy_prefix(from: &Path, to: &Path, limit: u64) -> Result<(), ForkError> {
    let mut out = BufWriter::with_capacity(64 * 1024, std::fs::File::create(to).map_err(io)?);
    match std::fs::File::open(from) {
        Ok(file) => {
            let mut lines = BufReader::with_capacity(64 * 1024, file.take(limit));
            let mut buf = Vec::new();
            loop {
                buf.clear();
                if lines.read_until(b'\n', &mut buf).map_err(io)? == 0 {
                    break;
                }
                // A torn last line (a writer midway) is left out.
                if buf.ends_with(b"\n") {
                    out.write_all(&buf).map_err(io)?;
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    out.flush().map_err(io)?;
    out.get_ref().sync_all().map_err(io)
}

/// The reference's rule: every line before the `n`-th (0-based) real user message, where a
/// real one is not a `<system>CHECKPOINT N</system>` note; fewer such messages: the whole file.
fn copy_before_user_message(from: &Path, to: &Path, n: u64) -> Result<(), ForkError> {
    #[derive(Deserialize)]
    struct Probe {
        role: Option<String>,
        content: Option<serde_json::Value>,
    }
    let mut out = BufWriter::with_capacity(64 * 1024, std::fs::File::create(to).map_err(io)?);
    let file = match std::fs::File::open(from) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io(e)),
    };
    let mut lines = BufReader::with_capacity(64 * 1024, file);
    let mut seen = 0u64;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        if lines.read_until(b'\n', &mut buf).map_err(io)? == 0 {
            break;
        }
        if !buf.ends_with(b"\n") {
            break;
        }
        // Only lines that may be user messages are parsed.
        if buf.windows(6).any(|w| w == b"\"user\"")
            && let Ok(probe) = serde_json::from_slice::<Probe>(&buf)
            && probe.role.as_deref() == Some("user")
            && !probe.content.as_ref().is_some_and(is_checkpoint_note)
        {
            if seen == n {
                break;
            }
            seen += 1;
        }
        out.write_all(&buf).map_err(io)?;
    }
    out.flush().map_err(io)?;
    out.get_ref().sync_all().map_err(io)
}

/// `<system>CHECKPOINT <digits></system>` (trimmed), as a string or a single text part.
fn is_checkpoint_note(content: &serde_json::Value) -> bool {
    let text = match content {
        serde_json::Value::String(s) => s.as_str(),
        serde_json::Value::Array(parts) if parts.len() == 1 => {
            match (parts[0].get("type").and_then(|t| t.as_str()), parts[0].get("text").and_then(|t| t.as_str())) {
                (Some("text"), Some(t)) => t,
                _ => return false,
            }
        }
        _ => return false,
    };
    text.trim()
        .strip_prefix("<system>CHECKPOINT ")
        .and_then(|r| r.strip_suffix("</system>"))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// A session's display title: `custom_title` from `state.json`, else the text of the first
/// `TurnBegin` (text parts joined with spaces, whitespace collapsed, at most 300 characters),
/// else `Untitled`.
pub fn session_title(session_dir: &Path) -> String {
    if let Some(title) = super::state::load(session_dir).custom_title {
        return title;
    }
    let first = super::wire_read::open(&session_dir.join("wire.jsonl")).ok().flatten().and_then(|records| {
        records.filter_map(Result::ok).find_map(|m| match m {
            crate::protocol::WireMessage::Event(crate::protocol::Event::TurnBegin { user_input }) => Some(user_input),
            _ => None,
        })
    });
    let text = match first {
        Some(crate::protocol::UserInput::Text(t)) => t,
        Some(crate::protocol::UserInput::Parts(parts)) => parts
            .iter()
            .filter_map(|p| match p {
                crate::protocol::ContentPart::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join(" "),
        None => return "Untitled".into(),
    };
    let title = shorten(&text.split_whitespace().collect::<Vec<_>>().join(" "), 300);
    if title.is_empty() { "Untitled".into() } else { title }
}

/// Cut to `max` characters at the last space before the limit (hard when there is none), `…`
/// appended.
fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let cut: String = text.chars().take(max).collect();
    let kept = match cut.rfind(' ') {
        Some(at) if at > 0 => &cut[..at],
        _ => cut.as_str(),
    };
    format!("{}…", kept.trim_end())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = r#"{"type": "metadata", "protocol_version": "1.10"}"#;

    fn rec(kind: &str, payload: &str, mark: Option<(u64, u64)>) -> String {
        let mark =
            mark.map(|(r, b)| format!(", \"kiwi_context\": {{\"rotation\": {r}, \"bytes\": {b}}}")).unwrap_or_default();
        format!("{{\"timestamp\": 1.5, \"message\": {{\"type\": \"{kind}\", \"payload\": {payload}}}{mark}}}")
    }

    fn turn(text: &str, mark: Option<(u64, u64)>) -> Vec<String> {
        vec![
            rec("TurnBegin", &format!("{{\"user_input\": \"{text}\"}}"), mark),
            rec("StepBegin", "{\"n\": 1}", None),
            rec("ContentPart", &format!("{{\"type\": \"text\", \"text\": \"re {text}\"}}"), None),
            rec("TurnEnd", "{}", None),
        ]
    }

    struct Fixture {
        share: tempfile::TempDir,
        work: PathBuf,
        source: PathBuf,
    }

    fn fixture() -> Fixture {
        let share = tempfile::tempdir().unwrap();
        let work = PathBuf::from("/tmp/fork/work");
        let source = sessions_dir(share.path(), &work).join("5b2d3a52-7a8e-4a3c-9d51-0e6f1c2a9b10");
        std::fs::create_dir_all(&source).unwrap();
        Fixture { share, work, source }
    }

    fn write_lines(path: &Path, lines: &[String]) {
        std::fs::write(path, lines.iter().map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    }

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap()
    }

    fn ctx_user(text: &str) -> String {
        format!("{{\"role\":\"user\",\"content\":\"{text}\"}}")
    }

    fn ctx_assistant(text: &str) -> String {
        format!("{{\"role\":\"assistant\",\"content\":\"{text}\"}}")
    }

    fn checkpoint(id: u64) -> String {
        format!("{{\"role\": \"_checkpoint\", \"id\": {id}}}")
    }

    #[test]
    fn errors_are_typed_with_the_reference_wording() {
        let f = fixture();
        let e = fork(f.share.path(), &f.work, &f.source, None).unwrap_err();
        assert_eq!(e, ForkError::WireNotFound);
        assert_eq!(e.to_string(), "wire.jsonl not found");
        let mut wire = vec![HEADER.to_string()];
        for t in ["a", "b", "c", "d", "e", "f"] {
            wire.extend(turn(t, None));
        }
        write_lines(&f.source.join("wire.jsonl"), &wire);
        let e = fork(f.share.path(), &f.work, &f.source, Some(99)).unwrap_err();
        assert_eq!(e.to_string(), "turn_index 99 out of range (max turn: 5)");
        assert_eq!(e, ForkError::OutOfRange { turn: 99, max: 5 });
        // Nothing was left behind.
        let base = sessions_dir(f.share.path(), &f.work);
        assert_eq!(std::fs::read_dir(&base).unwrap().count(), 1);
        write_lines(&f.source.join("wire.jsonl"), &[HEADER.to_string()]);
        let e = fork(f.share.path(), &f.work, &f.source, Some(0)).unwrap_err();
        assert_eq!(e.to_string(), "turn_index 0 out of range (max turn: -1)");
    }

    /// A session kimi wrote (no marks): the context is cut before the (k+1)-th real user
    /// message; CHECKPOINT notes are not real ones.
    #[test]
    fn unmarked_sessions_are_cut_by_the_reference_rule() {
        let f = fixture();
        let mut wire = vec![HEADER.to_string()];
        wire.extend(turn("one", None));
        wire.push(rec("StatusUpdate", "{\"plan_mode\": false}", None));
        wire.extend(turn("two", None));
        wire.extend(turn("three", None));
        write_lines(&f.source.join("wire.jsonl"), &wire);
        let ctx = vec![
            "{\"role\": \"_system_prompt\", \"content\": \"sys\"}".to_string(),
            checkpoint(0),
            ctx_user("one"),
            checkpoint(1),
            r#"{"role":"user","content":[{"type":"text","text":" <system>CHECKPOINT 1</system> "}]}"#.to_string(),
            ctx_assistant("re one"),
            checkpoint(2),
            ctx_user("two"),
            ctx_assistant("re two"),
            checkpoint(3),
            ctx_user("three"),
            ctx_assistant("re three"),
        ];
        write_lines(&f.source.join("context.jsonl"), &ctx);
        let forked = fork(f.share.path(), &f.work, &f.source, Some(1)).unwrap();
        assert_eq!(forked.dir, sessions_dir(f.share.path(), &f.work).join(&forked.id));
        let wire_out = read(&forked.dir.join("wire.jsonl"));
        let expected: Vec<String> = wire[..10].to_vec();
        assert_eq!(wire_out, expected.iter().map(|l| format!("{l}\n")).collect::<String>());
        assert_eq!(
            read(&forked.dir.join("context.jsonl")),
            ctx[..10].iter().map(|l| format!("{l}\n")).collect::<String>()
        );
        // Turn 0 keeps the status update that followed it.
        let forked = fork(f.share.path(), &f.work, &f.source, Some(0)).unwrap();
        assert_eq!(read(&forked.dir.join("wire.jsonl")).lines().count(), 6);
        assert_eq!(read(&forked.dir.join("context.jsonl")).lines().count(), 7);
        // The last turn: everything.
        let forked = fork(f.share.path(), &f.work, &f.source, Some(2)).unwrap();
        assert_eq!(read(&forked.dir.join("context.jsonl")).lines().count(), ctx.len());
    }

    /// kiwi's marks cut at the recorded position, across a rotation (`/clear`) and whatever
    /// user messages (steers, notifications) the turns added.
    #[test]
    fn marked_sessions_are_cut_where_the_next_turn_began() {
        let f = fixture();
        // Turn 0 and 1 wrote the file that `/clear` (turn 2) archived as context_1.jsonl.
        let old = [
            checkpoint(0),
            ctx_user("one"),
            ctx_user("a steer"),
            ctx_assistant("re one"),
            checkpoint(1),
            ctx_user("two"),
            ctx_assistant("re two"),
        ];
        write_lines(&f.source.join("context_1.jsonl"), &old);
        let first_len = old[..4].iter().map(|l| l.len() as u64 + 1).sum::<u64>();
        let all_len = old.iter().map(|l| l.len() as u64 + 1).sum::<u64>();
        let live = [checkpoint(0), ctx_user("four"), ctx_assistant("re four")];
        write_lines(&f.source.join("context.jsonl"), &live);
        let mut wire = vec![HEADER.to_string()];
        wire.extend(turn("one", Some((0, 0))));
        wire.extend(turn("two", Some((0, first_len))));
        wire.extend(turn("/clear", Some((0, all_len))));
        wire.extend(turn("four", Some((1, 0))));
        write_lines(&f.source.join("wire.jsonl"), &wire);

        let at = |k| fork(f.share.path(), &f.work, &f.source, Some(k)).unwrap();
        let forked = at(0);
        assert_eq!(
            read(&forked.dir.join("context.jsonl")),
            old[..4].iter().map(|l| format!("{l}\n")).collect::<String>()
        );
        let forked = at(1);
        assert_eq!(read(&forked.dir.join("context.jsonl")), old.iter().map(|l| format!("{l}\n")).collect::<String>());
        // The fork's own marks now name its single context file (rotation 0).
        let lines: Vec<String> = read(&forked.dir.join("wire.jsonl")).lines().map(String::from).collect();
        assert!(lines[1].ends_with("\"kiwi_context\": {\"rotation\": 0, \"bytes\": 0}}"), "{}", lines[1]);
        assert!(lines[5].ends_with(&format!("\"kiwi_context\": {{\"rotation\": 0, \"bytes\": {first_len}}}}}")));
        // ...so a fork of the fork cuts right too.
        let again = fork(f.share.path(), &f.work, &forked.dir, Some(0)).unwrap();
        assert_eq!(
            read(&again.dir.join("context.jsonl")),
            old[..4].iter().map(|l| format!("{l}\n")).collect::<String>()
        );
        // After the clear: the live file was empty when turn 3 began.
        assert_eq!(read(&at(2).dir.join("context.jsonl")), "");
        // Marks from another rotation than the one cut from are dropped in the fork.
        let lines: Vec<String> = read(&at(2).dir.join("wire.jsonl")).lines().map(String::from).collect();
        assert!(!lines[1].contains("kiwi_context"), "{}", lines[1]);
        assert!(lines[1].ends_with("\"payload\": {\"user_input\": \"one\"}}}"), "{}", lines[1]);
        // A mark that does not fit the file falls back to the reference rule.
        let mut bad = vec![HEADER.to_string()];
        bad.extend(turn("four", Some((0, 0))));
        bad.extend(turn("five", Some((0, 5))));
        write_lines(&f.source.join("wire.jsonl"), &bad);
        // (the live file holds one real user message: all of it is kept)
        assert_eq!(read(&at(0).dir.join("context.jsonl")), live.iter().map(|l| format!("{l}\n")).collect::<String>());
    }

    #[test]
    fn forking_everything_titles_and_state() {
        let f = fixture();
        let mut wire = vec![HEADER.to_string()];
        wire.extend(turn("first   prompt\\nhere", Some((0, 0))));
        wire.push(rec("TurnBegin", "{\"user_input\": \"running\"}", Some((0, 3))));
        write_lines(&f.source.join("wire.jsonl"), &wire);
        std::fs::write(f.source.join("context.jsonl"), "{\"role\":\"user\",\"content\":\"x\"}\n{\"role\":\"assi")
            .unwrap();
        let forked = fork(f.share.path(), &f.work, &f.source, None).unwrap();
        assert_eq!(forked.title, "Fork: first prompt here");
        assert_eq!(read(&forked.dir.join("wire.jsonl")).lines().count(), wire.len());
        // The torn tail of a context being written is left out.
        assert_eq!(read(&forked.dir.join("context.jsonl")), "{\"role\":\"user\",\"content\":\"x\"}\n");
        let state = crate::session::state::load(&forked.dir);
        assert_eq!(state.custom_title.as_deref(), Some("Fork: first prompt here"));
        assert!(state.title_generated);
        assert!(state.wire_mtime.is_some());
        assert!(!state.approval.yolo && !state.plan_mode && state.todos.is_empty());
        // A custom title wins; the work dir is in kimi.json.
        crate::session::state::save(
            &f.source,
            &crate::session::state::SessionStateFile {
                custom_title: Some("Mine".into()),
                approval: crate::session::state::ApprovalRecord { yolo: true, ..Default::default() },
                ..Default::default()
            },
        )
        .unwrap();
        let forked = fork(f.share.path(), &f.work, &f.source, None).unwrap();
        assert_eq!(forked.title, "Fork: Mine");
        assert!(!crate::session::state::load(&forked.dir).approval.yolo, "approvals are not copied");
        assert!(Metadata::load(f.share.path()).entry("/tmp/fork/work").is_some());
        // No header in the source: the fork gets one.
        write_lines(&f.source.join("wire.jsonl"), &turn("x", None));
        let forked = fork(f.share.path(), &f.work, &f.source, Some(0)).unwrap();
        assert_eq!(read(&forked.dir.join("wire.jsonl")).lines().next(), Some(HEADER));
    }

    #[test]
    fn titles_follow_the_listing_rule() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(session_title(dir.path()), "Untitled");
        let long = "word ".repeat(100);
        write_lines(
            &dir.path().join("wire.jsonl"),
            &[
                HEADER.to_string(),
                rec(
                    "TurnBegin",
                    &format!(
                        "{{\"user_input\": [{{\"type\": \"text\", \"text\": \"{long}\"}}, {{\"type\": \"text\", \"text\": \"b\"}}]}}"
                    ),
                    None,
                ),
            ],
        );
        let title = session_title(dir.path());
        assert_eq!(title.chars().count(), 300);
        assert!(title.ends_with("word…"), "{title}");
        assert_eq!(shorten(&"x".repeat(400), 300), format!("{}…", "x".repeat(300)));
    }

    #[test]
    fn videos_mentioned_are_copied_and_marked_sent() {
        let f = fixture();
        let uploads = f.source.join("uploads");
        std::fs::create_dir_all(&uploads).unwrap();
        for name in ["clip 1_abc123.mp4", "pic_abc123.png", "later_abc123.webm"] {
            std::fs::write(uploads.join(name), name).unwrap();
        }
        let video =
            format!("<video path=\\\"{}/clip 1_abc123.mp4\\\" content_type=\\\"video/mp4\\\">", uploads.display());
        let image = format!("<image path=\\\"{}/pic_abc123.png\\\">", uploads.display());
        let later = format!("{}/later_abc123.webm", uploads.display());
        let mut wire = vec![HEADER.to_string()];
        wire.extend(turn(&format!("{video} {image}"), None));
        wire.extend(turn(&later, None));
        write_lines(&f.source.join("wire.jsonl"), &wire);
        let forked = fork(f.share.path(), &f.work, &f.source, Some(0)).unwrap();
        let names: Vec<String> = std::fs::read_dir(forked.dir.join("uploads"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        assert_eq!(read(&forked.dir.join("uploads/clip 1_abc123.mp4")), "clip 1_abc123.mp4");
        assert_eq!(read(&forked.dir.join("uploads/.sent")), r#"["clip 1_abc123.mp4"]"#);
    }

    /// Not a check: run with `--ignored --nocapture` to time a fork of a 10,000-event session.
    #[test]
    #[ignore]
    #[allow(clippy::print_stderr)]
    fn measure_a_ten_thousand_event_fork() {
        let f = fixture();
        let mut wire = vec![HEADER.to_string()];
        let mut ctx = Vec::new();
        let mut bytes = 0u64;
        for t in 0..2500 {
            wire.extend(turn(&format!("prompt number {t} with some text to make it longer"), Some((0, bytes))));
            for line in [checkpoint(t), ctx_user(&format!("prompt number {t}")), ctx_assistant(&"answer ".repeat(20))] {
                bytes += line.len() as u64 + 1;
                ctx.push(line);
            }
        }
        write_lines(&f.source.join("wire.jsonl"), &wire);
        write_lines(&f.source.join("context.jsonl"), &ctx);
        for k in [Some(1249), None] {
            let start = std::time::Instant::now();
            let forked = fork(f.share.path(), &f.work, &f.source, k).unwrap();
            let took = start.elapsed();
            let written: u64 =
                std::fs::read_dir(&forked.dir).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
            let source = std::fs::metadata(f.source.join("wire.jsonl")).unwrap().len()
                + std::fs::metadata(f.source.join("context.jsonl")).unwrap().len();
            eprintln!("fork at {k:?}: {took:?}, {written} bytes written (source {source} bytes)");
        }
    }
}
