//! `state.json`: what a session remembers besides its context (`docs/protocol-1.10.md` §10.2): approval
//! state, added directories, title, plan mode, todos, and kiwi's running cost.
//!
//! Invariants: the file is written whole and atomically (a temp file in the same folder, then a
//! rename), as 2-space-indented JSON with non-ASCII characters unescaped and no trailing newline,
//! members in the reference's order; a missing, unreadable or corrupt file reads as the defaults
//! (never an error: the session still opens); members this version does not know are dropped.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::protocol::TodoItem;

pub const STATE_FILE: &str = "state.json";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ApprovalRecord {
    pub yolo: bool,
    pub afk: bool,
    /// Actions approved for the session (`approve_for_session`), in approval order.
    pub auto_approve_actions: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SessionStateFile {
    pub version: u32,
    pub approval: ApprovalRecord,
    pub additional_dirs: Vec<String>,
    pub custom_title: Option<String>,
    pub title_generated: bool,
    pub title_generate_attempts: u32,
    pub plan_mode: bool,
    pub plan_session_id: Option<String>,
    pub plan_slug: Option<String>,
    pub wire_mtime: Option<f64>,
    pub archived: bool,
    pub archived_at: Option<f64>,
    pub auto_archive_exempt: bool,
    pub todos: Vec<TodoItem>,
    /// kiwi: what the session's model calls cost, from its first priced call on (absent until
    /// then, so a session without prices writes the reference's members only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<CostRecord>,
}

/// The session's running cost in US dollars (`docs/configuration.md` §2.4 "Cost").
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CostRecord {
    /// The sum over the priced model calls.
    pub usd: f64,
    /// Whether every model call of the session had a price: false once one did not (or the
    /// session had calls before its first priced one), and `usd` is then only a lower bound.
    pub complete: bool,
}

impl Default for SessionStateFile {
    fn default() -> Self {
        Self {
            version: 1,
            approval: ApprovalRecord::default(),
            additional_dirs: Vec::new(),
            custom_title: None,
            title_generated: false,
            title_generate_attempts: 0,
            plan_mode: false,
            plan_session_id: None,
            plan_slug: None,
            wire_mtime: None,
            archived: false,
            archived_at: None,
            auto_archive_exempt: false,
            todos: Vec::new(),
            cost: None,
        }
    }
}

pub fn state_path(session_dir: &Path) -> PathBuf {
    session_dir.join(STATE_FILE)
}

/// The state saved in `session_dir`, or the defaults.
pub fn load(session_dir: &Path) -> SessionStateFile {
    let path = state_path(session_dir);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return SessionStateFile::default(),
        Err(e) => {
            tracing::warn!("cannot read {}: {e}; using defaults", path.display());
            return SessionStateFile::default();
        }
    };
    serde_json::from_str(&text).unwrap_or_else(|e| {
        tracing::warn!("{} is not a valid state file ({e}); using defaults", path.display());
        SessionStateFile::default()
    })
}

/// Writes `state` atomically into `session_dir`.
pub fn save(session_dir: &Path, state: &SessionStateFile) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(state).map_err(std::io::Error::other)?;
    // A unique name in the same folder, so the rename is atomic and two writers never share it.
    let tmp = session_dir.join(format!(".{STATE_FILE}.{}.{}.tmp", std::process::id(), uuid::Uuid::new_v4().simple()));
    let written = std::fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(text.as_bytes())?;
        f.sync_all()
    });
    match written.and_then(|()| std::fs::rename(&tmp, state_path(session_dir))) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Copies the members the web layer owns (`docs/sessions.md`: `custom_title`, `title_generated`,
/// `title_generate_attempts`, `archived`, `archived_at`, `auto_archive_exempt`, `wire_mtime`) from
/// `from` into `into`.
pub fn copy_web_members(from: &SessionStateFile, into: &mut SessionStateFile) {
    into.custom_title.clone_from(&from.custom_title);
    into.title_generated = from.title_generated;
    into.title_generate_attempts = from.title_generate_attempts;
    into.archived = from.archived;
    into.archived_at = from.archived_at;
    into.auto_archive_exempt = from.auto_archive_exempt;
    into.wire_mtime = from.wire_mtime;
}

/// The agent's save (`docs/web-api.md` §2.2): the web-owned members are taken from the file on
/// disk (the web server may have changed them since the agent read the file), everything else
/// from `state`; the one exception is the agent's automatic title, kept when the disk has no
/// title. `state` is updated to what was written. A missing file keeps `state`'s own values.
pub fn save_keeping_web_members(session_dir: &Path, state: &mut SessionStateFile) -> std::io::Result<()> {
    let _turn = one_writer(session_dir);
    if state_path(session_dir).is_file() {
        let disk = load(session_dir);
        let own_title = state.custom_title.take();
        copy_web_members(&disk, state);
        if state.custom_title.is_none() {
            state.custom_title = own_title;
        }
    }
    save(session_dir, state)
}

/// Holds off every other read-modify-write of the same folder's state file in this process (the
/// agent's [`save_keeping_web_members`], the web layer's [`update_file`]) until dropped, so
/// neither loses what the other wrote between its read and its rename. `kiwi web` runs both in
/// one process, which is where they meet. Another process writing the same session's file (a
/// CLI run of a session the web server renames) is not held off: an advisory lock would need a
/// lock file in the session folder, which the reference's folders do not have, and the folder's
/// own lock is held by whoever runs the session (`docs/sessions.md`).
fn one_writer(session_dir: &Path) -> std::sync::MutexGuard<'static, ()> {
    use std::hash::{Hash as _, Hasher as _};
    const STRIPES: usize = 64;
    static LOCKS: [std::sync::Mutex<()>; STRIPES] = [const { std::sync::Mutex::new(()) }; STRIPES];
    // The folder's name is the session id: the same however the path to it was spelled.
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    session_dir.file_name().unwrap_or(session_dir.as_os_str()).hash(&mut hasher);
    LOCKS[(hasher.finish() % STRIPES as u64) as usize].lock().unwrap_or_else(|p| p.into_inner())
}

/// Reads the file, lets `change` edit it, and writes it back (the web layer's writes: it owns
/// the web members and leaves the agent's as they are on disk).
pub fn update_file<T>(session_dir: &Path, change: impl FnOnce(&mut SessionStateFile) -> T) -> std::io::Result<T> {
    let _turn = one_writer(session_dir);
    let mut state = load(session_dir);
    let out = change(&mut state);
    save(session_dir, &state)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::TodoStatus;

    #[test]
    fn web_and_agent_writes_never_lose_each_other() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let web: Vec<_> = (0..2)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || {
                    for _ in 0..25 {
                        update_file(&path, |s| s.title_generate_attempts += 1).unwrap();
                    }
                })
            })
            .collect();
        // The agent's own member grows with each of its saves, from what it holds in memory.
        let agent = {
            let path = path.clone();
            std::thread::spawn(move || {
                let mut held = SessionStateFile::default();
                for n in 0..25 {
                    held.todos.push(TodoItem { title: format!("t{n}"), status: TodoStatus::Pending });
                    save_keeping_web_members(&path, &mut held).unwrap();
                }
            })
        };
        for t in web {
            t.join().unwrap();
        }
        agent.join().unwrap();
        let disk = load(&path);
        assert_eq!(disk.title_generate_attempts, 50, "no web write was lost");
        assert_eq!(disk.todos.len(), 25, "the agent's last write is on disk");
    }

    #[test]
    fn the_agent_never_clobbers_web_members() {
        let dir = tempfile::tempdir().unwrap();
        // What the agent holds in memory (read before the web layer wrote).
        let mut agent = SessionStateFile { plan_mode: true, custom_title: Some("agent".into()), ..Default::default() };
        save(dir.path(), &agent).unwrap();
        update_file(dir.path(), |s| {
            s.custom_title = Some("renamed".into());
            s.title_generated = true;
            s.archived = true;
            s.archived_at = Some(12.5);
            s.wire_mtime = Some(3.0);
        })
        .unwrap();
        agent.todos = vec![TodoItem { title: "t".into(), status: TodoStatus::Done }];
        save_keeping_web_members(dir.path(), &mut agent).unwrap();
        let disk = load(dir.path());
        assert_eq!(disk.custom_title.as_deref(), Some("renamed"));
        assert!(disk.title_generated && disk.archived && disk.plan_mode);
        assert_eq!(disk.archived_at, Some(12.5));
        assert_eq!(disk.wire_mtime, Some(3.0));
        assert_eq!(disk.todos.len(), 1);
        assert_eq!(agent, disk);
    }

    #[test]
    fn defaults_are_written_in_the_reference_layout() {
        let dir = tempfile::tempdir().unwrap();
        let state = SessionStateFile {
            custom_title: Some("héllo".into()),
            todos: vec![TodoItem { title: "a".into(), status: TodoStatus::Pending }],
            ..SessionStateFile::default()
        };
        save(dir.path(), &state).unwrap();
        let text = std::fs::read_to_string(dir.path().join("state.json")).unwrap();
        assert_eq!(
            text,
            "{\n  \"version\": 1,\n  \"approval\": {\n    \"yolo\": false,\n    \"afk\": false,\n    \"auto_approve_actions\": []\n  },\n  \"additional_dirs\": [],\n  \"custom_title\": \"héllo\",\n  \"title_generated\": false,\n  \"title_generate_attempts\": 0,\n  \"plan_mode\": false,\n  \"plan_session_id\": null,\n  \"plan_slug\": null,\n  \"wire_mtime\": null,\n  \"archived\": false,\n  \"archived_at\": null,\n  \"auto_archive_exempt\": false,\n  \"todos\": [\n    {\n      \"title\": \"a\",\n      \"status\": \"pending\"\n    }\n  ]\n}"
        );
        assert_eq!(load(dir.path()), state);
    }

    #[test]
    fn missing_corrupt_and_partial_files_read_as_defaults() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()), SessionStateFile::default());
        std::fs::write(dir.path().join("state.json"), "{not json").unwrap();
        assert_eq!(load(dir.path()), SessionStateFile::default());
        std::fs::write(dir.path().join("state.json"), r#"{"approval":{"yolo":true},"extra":1}"#).unwrap();
        let s = load(dir.path());
        assert!(s.approval.yolo);
        assert_eq!(s.version, 1);
        std::fs::write(dir.path().join("state.json"), r#"{"plan_mode":"maybe"}"#).unwrap();
        assert_eq!(load(dir.path()), SessionStateFile::default());
    }
}
