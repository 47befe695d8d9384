//! Every stored session of every work dir, as `kiwi sessions` and `kiwi web` see them
//! (`docs/web-api.md` §2): listing across the work dirs of `kimi.json`, titles, creating
//! a session for a work dir, renaming and archiving, deleting, and the work-dir suggestions.
//!
//! Invariants: the session store is the only state (no index of our own); a folder is a session
//! when its name is a UUID and it holds a `context.jsonl` (a legacy flat `<uuid>.jsonl` counts
//! when its folder form does not exist); the web-owned members of `state.json` are written only
//! through [`super::state::update_file`]; nothing here reads a whole `wire.jsonl` (titles stop at
//! the first `TurnBegin`).

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::Value;

use super::state::{self, SessionStateFile};
use super::store::{self, Metadata};

/// The longest title a listing shows (`docs/web-api.md` §2).
pub const LIST_TITLE_CHARS: usize = 300;
/// Sessions untouched this long are archived by the listing (unless exempt).
pub const AUTO_ARCHIVE_AFTER: Duration = Duration::from_secs(15 * 24 * 60 * 60);
/// Work dirs suggested at most.
const MAX_WORK_DIRS: usize = 20;

/// One stored session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionInfo {
    pub id: String,
    pub title: String,
    pub work_dir: String,
    pub session_dir: PathBuf,
    /// Modification time of `context.jsonl`.
    pub last_updated: SystemTime,
    pub archived: bool,
    /// A legacy flat `<id>.jsonl` without a folder.
    pub legacy: bool,
}

/// The folder holding the sessions of a `kimi.json` entry (`<kaos>_` prefix for non-local ones).
fn entry_sessions_dir(share: &Path, path: &str, kaos: &str) -> PathBuf {
    let key = store::work_dir_key(Path::new(path));
    let key = if kaos == "local" { key } else { format!("{kaos}_{key}") };
    share.join("sessions").join(key)
}

fn is_uuid(text: &str) -> bool {
    uuid::Uuid::parse_str(text).is_ok_and(|u| u.hyphenated().to_string() == text)
}

/// Every session of every work dir in `kimi.json` (file order; a work dir listed twice is read
/// once), most recently updated first, ties by id descending.
pub fn list_all(share: &Path) -> Vec<SessionInfo> {
    let meta = Metadata::load(share);
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for entry in &meta.work_dirs {
        let dir = entry_sessions_dir(share, &entry.path, &entry.kaos);
        if !seen.insert(dir.clone()) {
            continue;
        }
        out.extend(sessions_in(&dir, &entry.path));
    }
    sort_newest_first(&mut out);
    out
}

fn sort_newest_first(list: &mut [SessionInfo]) {
    list.sort_by(|a, b| b.last_updated.cmp(&a.last_updated).then_with(|| b.id.cmp(&a.id)));
}

/// The sessions stored in one work dir's folder.
fn sessions_in(dir: &Path, work_dir: &str) -> Vec<SessionInfo> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().to_string();
        let path = entry.path();
        if is_uuid(&name) && path.is_dir() {
            if let Some(info) = read_session(&path, &name, work_dir) {
                out.push(info);
            }
        } else if let Some(id) = name.strip_suffix(".jsonl")
            && is_uuid(id)
            && !dir.join(id).join("context.jsonl").exists()
        {
            let Ok(modified) = entry.metadata().and_then(|m| m.modified()) else { continue };
            out.push(SessionInfo {
                id: id.to_string(),
                title: "Untitled".into(),
                work_dir: work_dir.to_string(),
                session_dir: dir.join(id),
                last_updated: modified,
                archived: false,
                legacy: true,
            });
        }
    }
    out
}

fn read_session(session_dir: &Path, id: &str, work_dir: &str) -> Option<SessionInfo> {
    let modified = std::fs::metadata(session_dir.join("context.jsonl")).and_then(|m| m.modified()).ok()?;
    let state = state::load(session_dir);
    Some(SessionInfo {
        id: id.to_string(),
        title: title(session_dir, &state, LIST_TITLE_CHARS),
        work_dir: work_dir.to_string(),
        session_dir: session_dir.to_path_buf(),
        last_updated: modified,
        archived: state.archived,
        legacy: false,
    })
}

/// The session `id`, searched in every work dir of `kimi.json`.
pub fn find(share: &Path, id: &str) -> Option<SessionInfo> {
    if !is_uuid(id) {
        return None;
    }
    let meta = Metadata::load(share);
    meta.work_dirs.iter().find_map(|entry| {
        let dir = entry_sessions_dir(share, &entry.path, &entry.kaos).join(id);
        read_session(&dir, id, &entry.path)
    })
}

/// The session's title: `custom_title` from `state.json`, else the first prompt's text
/// shortened to `max` characters, else `Untitled`.
pub fn title(session_dir: &Path, state: &SessionStateFile, max: usize) -> String {
    if let Some(t) = state.custom_title.as_deref().filter(|t| !t.is_empty()) {
        return t.to_string();
    }
    match first_prompt_text(&session_dir.join("wire.jsonl")) {
        Some(text) if !text.trim().is_empty() => shorten(&text, max),
        _ => "Untitled".into(),
    }
}

/// The text of the first `TurnBegin` of a `wire.jsonl` (text parts joined with spaces).
pub fn first_prompt_text(wire: &Path) -> Option<String> {
    let file = std::fs::File::open(wire).ok()?;
    for line in std::io::BufReader::new(file).lines() {
        let Ok(line) = line else { continue };
        let Ok(record) = serde_json::from_str::<Value>(&line) else { continue };
        let Some(message) = record.get("message") else { continue };
        if message.get("type").and_then(Value::as_str) != Some("TurnBegin") {
            continue;
        }
        return Some(user_input_text(message.pointer("/payload/user_input")?));
    }
    None
}

/// The text of a `user_input` (a string, or content parts whose text parts are joined with spaces).
pub fn user_input_text(input: &Value) -> String {
    match input {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter(|p| p.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" "),
        _ => String::new(),
    }
}

/// Whitespace collapsed; longer than `max` characters → cut to fit with `…` appended, at the last
/// space when there is one, else hard.
pub fn shorten(text: &str, max: usize) -> String {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.chars().count() <= max {
        return collapsed;
    }
    let cut: String = collapsed.chars().take(max.saturating_sub(1)).collect();
    let at_word = match cut.rfind(' ') {
        Some(i) if i > 0 => &cut[..i],
        _ => &cut[..],
    };
    format!("{}…", at_word.trim_end())
}

/// A listing query (`GET /api/sessions/`): paging, search, archived or not.
#[derive(Debug, Clone, Default)]
pub struct Query {
    pub limit: Option<i64>,
    pub offset: Option<i64>,
    pub q: Option<String>,
    pub archived: bool,
}

/// The page `query` selects from a listing.
pub fn select(list: Vec<SessionInfo>, query: &Query) -> Vec<SessionInfo> {
    let limit = match query.limit.unwrap_or(100) {
        n if n <= 0 => 100,
        n => n.min(500),
    };
    let offset = query.offset.unwrap_or(0).max(0);
    let needle = query.q.as_deref().map(|q| q.trim().to_lowercase()).filter(|q| !q.is_empty());
    list.into_iter()
        .filter(|s| s.archived == query.archived)
        .filter(|s| match &needle {
            Some(n) => s.title.to_lowercase().contains(n) || s.work_dir.to_lowercase().contains(n),
            None => true,
        })
        .skip(usize::try_from(offset).unwrap_or(usize::MAX))
        .take(usize::try_from(limit).unwrap_or(100))
        .collect()
}

/// Archives every listed session not touched for [`AUTO_ARCHIVE_AFTER`] (unless exempt); the
/// listing is updated in place. Returns how many were archived.
pub fn auto_archive(list: &mut [SessionInfo], now: SystemTime) -> usize {
    let mut n = 0;
    for s in list.iter_mut().filter(|s| !s.archived && !s.legacy) {
        let old = now.duration_since(s.last_updated).is_ok_and(|age| age >= AUTO_ARCHIVE_AFTER);
        if !old || state::load(&s.session_dir).auto_archive_exempt {
            continue;
        }
        let at = epoch_seconds(now);
        match state::update_file(&s.session_dir, |st| {
            st.archived = true;
            st.archived_at = Some(at);
        }) {
            Ok(()) => {
                s.archived = true;
                n += 1;
            }
            Err(e) => tracing::warn!("cannot archive {}: {e}", s.session_dir.display()),
        }
    }
    n
}

/// Seconds since the epoch as a float (`archived_at`, `wire_mtime`).
pub fn epoch_seconds(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs_f64()).unwrap_or(0.0)
}

/// RFC 3339 in UTC with `Z`, microseconds when non-zero (`2026-11-27T02:18:22.182242Z`).
pub fn rfc3339(t: SystemTime) -> String {
    let utc: chrono::DateTime<chrono::Utc> = t.into();
    let micros = utc.timestamp_subsec_micros();
    if micros == 0 {
        utc.format("%Y-%m-%dT%H:%M:%SZ").to_string()
    } else {
        format!("{}.{micros:06}Z", utc.format("%Y-%m-%dT%H:%M:%S"))
    }
}

/// Why a work dir for a new session was refused; `detail` is the message clients see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WorkDirError {
    /// 404: missing and not to be created.
    Missing(String),
    /// 403: could not be created for lack of permission.
    PermissionDenied(String),
    /// 400: could not be created, or is not a directory.
    Invalid(String),
}

impl WorkDirError {
    pub fn detail(&self) -> &str {
        match self {
            WorkDirError::Missing(d) | WorkDirError::PermissionDenied(d) | WorkDirError::Invalid(d) => d,
        }
    }
}

/// The work dir a new session gets: the home dir when none is given; otherwise `~` expanded,
/// made absolute against `cwd`, created when asked, and symlinks resolved.
pub fn resolve_new_work_dir(raw: Option<&str>, create_dir: bool, cwd: &Path) -> Result<PathBuf, WorkDirError> {
    let raw = raw.filter(|r| !r.is_empty());
    let Some(sent) = raw else {
        let home = store::home_dir();
        return Ok(std::fs::canonicalize(&home).unwrap_or(home));
    };
    let expanded = expand_tilde(sent);
    let path = if expanded.is_absolute() { expanded } else { cwd.join(expanded) };
    if !path.exists() {
        if !create_dir {
            return Err(WorkDirError::Missing(format!("Directory does not exist: {sent}")));
        }
        if let Err(e) = std::fs::create_dir_all(&path) {
            return Err(if e.kind() == std::io::ErrorKind::PermissionDenied {
                WorkDirError::PermissionDenied(format!("Permission denied: cannot create directory {sent}"))
            } else {
                WorkDirError::Invalid(format!("Failed to create directory: {e}"))
            });
        }
    }
    if !path.is_dir() {
        return Err(WorkDirError::Invalid(format!("Path is not a directory: {sent}")));
    }
    std::fs::canonicalize(&path).map_err(|e| WorkDirError::Invalid(format!("Failed to create directory: {e}")))
}

/// `~` and `~/…` expanded to the home dir.
pub fn expand_tilde(path: &str) -> PathBuf {
    if path == "~" {
        store::home_dir()
    } else if let Some(rest) = path.strip_prefix("~/") {
        store::home_dir().join(rest)
    } else {
        PathBuf::from(path)
    }
}

/// Creates a new empty session of `work_dir` as the CLI would: a fresh id, its folder with an
/// empty `context.jsonl`, and the work dir's `kimi.json` entry (added when new). No `state.json`,
/// no `wire.jsonl`.
pub fn create(share: &Path, work_dir: &Path) -> std::io::Result<SessionInfo> {
    let id = uuid::Uuid::new_v4().to_string();
    let work = work_dir.to_string_lossy().to_string();
    let dir = store::sessions_dir(share, work_dir).join(&id);
    std::fs::create_dir_all(&dir)?;
    std::fs::File::create(dir.join("context.jsonl"))?;
    Metadata::update(share, |meta| {
        if meta.entry(&work).is_some() {
            return false;
        }
        meta.entry_mut(&work);
        true
    })
    .map_err(|e| std::io::Error::other(e.to_string()))?;
    read_session(&dir, &id, &work).ok_or_else(|| std::io::Error::other("the new session folder vanished"))
}

/// A rename and/or archive change (`PATCH /api/sessions/{id}`); `None` leaves a member alone.
#[derive(Debug, Clone, Default)]
pub struct Update {
    pub title: Option<String>,
    pub archived: Option<bool>,
}

/// Applies `update` to the session's `state.json` (written even when nothing changes).
pub fn apply_update(session_dir: &Path, update: &Update, now: SystemTime) -> std::io::Result<()> {
    state::update_file(session_dir, |s| {
        if let Some(t) = &update.title {
            s.custom_title = Some(t.clone());
            s.title_generated = true;
        }
        match update.archived {
            Some(true) => {
                s.archived = true;
                s.archived_at = Some(epoch_seconds(now));
                s.auto_archive_exempt = false;
            }
            Some(false) => {
                s.archived = false;
                s.archived_at = None;
                s.auto_archive_exempt = true;
            }
            None => {}
        }
    })
}

/// Deletes a stored session: clears its work dir's `last_session_id` when it names it, then
/// removes the folder (or the legacy file).
pub fn delete(share: &Path, info: &SessionInfo) -> std::io::Result<()> {
    Metadata::update(share, |meta| {
        let mut changed = false;
        for e in meta.work_dirs.iter_mut().filter(|e| e.path == info.work_dir) {
            if e.last_session_id.as_deref() == Some(info.id.as_str()) {
                e.last_session_id = None;
                changed = true;
            }
        }
        changed
    })
    .map_err(|e| std::io::Error::other(e.to_string()))?;
    if info.legacy {
        let file = info.session_dir.with_extension("jsonl");
        return std::fs::remove_file(file);
    }
    std::fs::remove_dir_all(&info.session_dir)
}

/// Sets the work dir's `last_session_id` (a web client's first prompt on a connection).
pub fn set_last_session(share: &Path, work_dir: &str, id: &str) -> Result<(), super::SessionError> {
    Metadata::update(share, |meta| {
        let entry = meta.entry_mut(work_dir);
        if entry.last_session_id.as_deref() == Some(id) {
            return false;
        }
        entry.last_session_id = Some(id.to_string());
        true
    })
}

/// Work dirs to suggest: `kimi.json` entries in file order that exist, skipping temporary-looking
/// paths (any containing `/tmp`, `/var/folders` or `/.cache/`), at most 20.
pub fn work_dirs(share: &Path) -> Vec<String> {
    let meta = Metadata::load(share);
    let mut out: Vec<String> = Vec::new();
    for e in &meta.work_dirs {
        let p = &e.path;
        if p.contains("/tmp") || p.contains("/var/folders") || p.contains("/.cache/") {
            continue;
        }
        if out.contains(p) || !Path::new(p).exists() {
            continue;
        }
        out.push(p.clone());
        if out.len() == MAX_WORK_DIRS {
            break;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wire_with_prompt(dir: &Path, prompt: &str) {
        let line = serde_json::json!({"timestamp": 1.0, "message": {"type": "TurnBegin", "payload": {"user_input": [{"type": "text", "text": prompt}, {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "tail"}]}}});
        std::fs::write(
            dir.join("wire.jsonl"),
            format!("{{\"type\": \"metadata\", \"protocol_version\": \"1.10\"}}\n{line}\n"),
        )
        .unwrap();
    }

    #[test]
    fn titles_come_from_state_then_the_first_prompt() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(title(dir.path(), &SessionStateFile::default(), 300), "Untitled");
        wire_with_prompt(dir.path(), "  fix\n the   tests ");
        assert_eq!(title(dir.path(), &SessionStateFile::default(), 300), "fix the tests tail");
        let named = SessionStateFile { custom_title: Some("mine".into()), ..Default::default() };
        assert_eq!(title(dir.path(), &named, 300), "mine");
    }

    #[test]
    fn shortening_cuts_at_a_word_or_hard() {
        assert_eq!(shorten("a  b\tc", 10), "a b c");
        assert_eq!(shorten("hello world again", 12), "hello…");
        assert_eq!(shorten("abcdefghijklmnop", 5), "abcd…");
        let long = "word ".repeat(100);
        let t = shorten(&long, 300);
        assert!(t.chars().count() <= 300 && t.ends_with("word…"), "{t}");
    }

    #[test]
    fn timestamps_are_utc_with_micros_when_nonzero() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(rfc3339(t), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339(t + Duration::from_micros(182_242)), "2023-11-14T22:13:20.182242Z");
    }

    #[test]
    fn list_create_find_update_delete() {
        let share = tempfile::tempdir().unwrap();
        let wd1 = tempfile::tempdir().unwrap();
        let wd2 = tempfile::tempdir().unwrap();
        let a = create(share.path(), wd1.path()).unwrap();
        let b = create(share.path(), wd2.path()).unwrap();
        let c = create(share.path(), wd1.path()).unwrap();
        assert_eq!(a.title, "Untitled");
        // Not a session: a non-UUID folder.
        std::fs::create_dir_all(a.session_dir.parent().unwrap().join("my-id")).unwrap();
        std::fs::write(a.session_dir.parent().unwrap().join("my-id/context.jsonl"), "").unwrap();
        let meta = Metadata::load(share.path());
        assert_eq!(meta.work_dirs.len(), 2, "one entry per work dir");
        // Make the order known: a newest, then b, then c.
        let now = SystemTime::now();
        for (s, age) in [(&a, 0), (&b, 10), (&c, 20)] {
            let f = std::fs::File::options().write(true).open(s.session_dir.join("context.jsonl")).unwrap();
            f.set_modified(now - Duration::from_secs(age)).unwrap();
        }
        let ids: Vec<String> = list_all(share.path()).into_iter().map(|s| s.id).collect();
        assert_eq!(ids, [a.id.clone(), b.id.clone(), c.id.clone()]);
        assert_eq!(find(share.path(), &b.id).unwrap().work_dir, wd2.path().to_string_lossy());
        assert!(find(share.path(), "my-id").is_none());
        assert!(find(share.path(), &uuid::Uuid::new_v4().to_string()).is_none());

        wire_with_prompt(&b.session_dir, "Deploy the thing");
        apply_update(&a.session_dir, &Update { title: Some("Renamed".into()), archived: Some(true) }, now).unwrap();
        let st = state::load(&a.session_dir);
        assert!(st.title_generated && st.archived && !st.auto_archive_exempt && st.archived_at.is_some());
        let all = list_all(share.path());
        let page = select(all.clone(), &Query::default());
        assert_eq!(page.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), [b.id.as_str(), c.id.as_str()]);
        let archived = select(all.clone(), &Query { archived: true, ..Default::default() });
        assert_eq!(archived[0].title, "Renamed");
        let q = select(all.clone(), &Query { q: Some("  DEPLOY ".into()), ..Default::default() });
        assert_eq!(q.len(), 1);
        assert_eq!(q[0].title, "Deploy the thing tail");
        let paged = select(all.clone(), &Query { limit: Some(1), offset: Some(1), ..Default::default() });
        assert_eq!(paged[0].id, c.id);
        assert_eq!(select(all, &Query { limit: Some(0), offset: Some(-3), ..Default::default() }).len(), 2);

        apply_update(&a.session_dir, &Update { archived: Some(false), ..Default::default() }, now).unwrap();
        let st = state::load(&a.session_dir);
        assert!(!st.archived && st.auto_archive_exempt && st.archived_at.is_none());

        set_last_session(share.path(), &c.work_dir, &c.id).unwrap();
        delete(share.path(), &c).unwrap();
        assert!(!c.session_dir.exists());
        let meta = Metadata::load(share.path());
        assert!(meta.entry(&c.work_dir).unwrap().last_session_id.is_none());
        assert!(find(share.path(), &c.id).is_none());
    }

    #[test]
    fn old_sessions_are_archived_unless_exempt() {
        let share = tempfile::tempdir().unwrap();
        let wd = tempfile::tempdir().unwrap();
        let old = create(share.path(), wd.path()).unwrap();
        let exempt = create(share.path(), wd.path()).unwrap();
        let fresh = create(share.path(), wd.path()).unwrap();
        state::update_file(&exempt.session_dir, |s| s.auto_archive_exempt = true).unwrap();
        let later = SystemTime::now() + AUTO_ARCHIVE_AFTER + Duration::from_secs(60);
        let mut list = list_all(share.path());
        for s in list.iter_mut().filter(|s| s.id == fresh.id) {
            s.last_updated = later;
        }
        assert_eq!(auto_archive(&mut list, later), 1);
        assert!(state::load(&old.session_dir).archived);
        assert!(!state::load(&exempt.session_dir).archived);
        assert!(!state::load(&fresh.session_dir).archived);
    }

    #[test]
    fn new_work_dirs_are_checked_created_and_resolved() {
        let base = tempfile::tempdir().unwrap();
        let cwd = base.path();
        let missing = resolve_new_work_dir(Some("nope"), false, cwd).unwrap_err();
        assert_eq!(missing, WorkDirError::Missing("Directory does not exist: nope".into()));
        let made = resolve_new_work_dir(Some("a/b"), true, cwd).unwrap();
        assert!(made.is_dir() && made.is_absolute());
        std::fs::write(cwd.join("f"), "x").unwrap();
        assert_eq!(
            resolve_new_work_dir(Some("f"), false, cwd).unwrap_err(),
            WorkDirError::Invalid("Path is not a directory: f".into())
        );
        std::os::unix::fs::symlink(cwd.join("a"), cwd.join("link")).unwrap();
        let resolved = resolve_new_work_dir(Some("link/b"), false, cwd).unwrap();
        assert_eq!(resolved, std::fs::canonicalize(cwd.join("a/b")).unwrap());
        assert!(resolve_new_work_dir(None, false, cwd).unwrap().is_absolute());
    }

    #[test]
    fn suggested_work_dirs_skip_temporary_and_missing_paths() {
        let share = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(store::home_dir()).unwrap();
        Metadata::update(share.path(), |m| {
            m.entry_mut("/tmp/wd1");
            m.entry_mut(&home.to_string_lossy());
            m.entry_mut("/definitely/not/here");
            m.entry_mut(&home.to_string_lossy());
            true
        })
        .unwrap();
        let dirs = work_dirs(share.path());
        assert!(!dirs.iter().any(|d| d.contains("/tmp") || d.contains("not/here")));
        assert!(dirs.len() <= 1);
    }
}
