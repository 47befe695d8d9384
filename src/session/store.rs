//! The share dir, the `kimi.json` index and session folders (`sessions.md` §1-§4).
//!
//! Invariants: a session folder is `<share>/sessions/<md5(work dir)>/<id>/`; a running server
//! holds an exclusive advisory lock on its `context.jsonl` so two servers never write the same
//! session; `kimi.json` is rewritten whole (2-space indent) and unknown keys are dropped.

use std::os::fd::AsRawFd;
use std::path::{Component, Path, PathBuf};

use md5::{Digest, Md5};
use serde::{Deserialize, Serialize};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum SessionError {
    #[error("No previous session found for the working directory")]
    NoPrevious,
    #[error("Session {0} is in use by another process")]
    Locked(String),
    /// The id names a path, not a session (a usage error).
    #[error("{0}")]
    InvalidId(String),
    #[error("{0}")]
    Io(String),
}

fn io(e: impl std::fmt::Display) -> SessionError {
    SessionError::Io(e.to_string())
}

/// `$KIMI_SHARE_DIR` (non-empty) or `$HOME/.kimi`.
pub fn share_dir() -> PathBuf {
    match std::env::var("KIMI_SHARE_DIR") {
        Ok(v) if !v.is_empty() => PathBuf::from(v),
        _ => home_dir().join(".kimi"),
    }
}

pub fn home_dir() -> PathBuf {
    std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/"))
}

/// Absolute and `.`/`..`-normalized without resolving symlinks.
pub fn normalize(path: &Path, base: &Path) -> PathBuf {
    let joined = if path.is_absolute() { path.to_path_buf() } else { base.join(path) };
    let mut out = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

pub fn work_dir_key(work_dir: &Path) -> String {
    let digest = Md5::digest(work_dir.to_string_lossy().as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Metadata {
    #[serde(default)]
    pub work_dirs: Vec<WorkDirEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkDirEntry {
    pub path: String,
    #[serde(default = "local")]
    pub kaos: String,
    #[serde(default)]
    pub last_session_id: Option<String>,
}

fn local() -> String {
    "local".into()
}

impl Metadata {
    pub fn load(share: &Path) -> Metadata {
        let path = share.join("kimi.json");
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).unwrap_or_else(|e| {
                tracing::warn!("{}: unreadable ({e}); starting from empty metadata", path.display());
                Metadata::default()
            }),
            Err(_) => Metadata::default(),
        }
    }

    pub fn save(&self, share: &Path) -> Result<(), SessionError> {
        let text = serde_json::to_string_pretty(self).map_err(io)?;
        let tmp = share.join("kimi.json.tmp");
        std::fs::write(&tmp, text).map_err(io)?;
        std::fs::rename(&tmp, share.join("kimi.json")).map_err(io)
    }

    pub fn entry(&self, work_dir: &str) -> Option<&WorkDirEntry> {
        self.work_dirs.iter().find(|e| e.path == work_dir && e.kaos == "local")
    }

    pub fn entry_mut(&mut self, work_dir: &str) -> &mut WorkDirEntry {
        let i = match self.work_dirs.iter().position(|e| e.path == work_dir && e.kaos == "local") {
            Some(i) => i,
            None => {
                self.work_dirs.push(WorkDirEntry { path: work_dir.into(), kaos: local(), last_session_id: None });
                self.work_dirs.len() - 1
            }
        };
        &mut self.work_dirs[i]
    }
}

/// How the session was chosen on the command line.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionChoice {
    New,
    Id(String),
    Continue,
}

/// An open session: its folder and the lock that keeps other servers out.
#[derive(Debug)]
pub struct Session {
    pub id: String,
    pub dir: PathBuf,
    pub work_dir: PathBuf,
    pub share_dir: PathBuf,
    /// True when an existing session was resumed.
    pub resumed: bool,
    /// True when this process created the session folder; only such a folder may be removed
    /// at exit.
    created_dir: bool,
    /// The locked session folder, held for the life of the process.
    _lock: std::fs::File,
}

impl Session {
    pub fn open(share: &Path, work_dir: &Path, choice: &SessionChoice) -> Result<Session, SessionError> {
        let work = work_dir.to_string_lossy().to_string();
        let base = share.join("sessions").join(work_dir_key(work_dir));
        let mut meta = Metadata::load(share);
        let found = |id: &str, meta: &Metadata| -> bool {
            if meta.entry(&work).is_none() {
                return false;
            }
            let dir = base.join(id);
            let legacy = base.join(format!("{id}.jsonl"));
            if legacy.is_file() && !dir.join("context.jsonl").exists() {
                let _ = std::fs::create_dir_all(&dir);
                let _ = std::fs::rename(&legacy, dir.join("context.jsonl"));
            }
            dir.join("context.jsonl").is_file()
        };
        let (id, resumed) = match choice {
            SessionChoice::New => (uuid::Uuid::new_v4().to_string(), false),
            SessionChoice::Id(id) => (id.clone(), found(id, &meta)),
            SessionChoice::Continue => {
                let last = meta.entry(&work).and_then(|e| e.last_session_id.clone()).ok_or(SessionError::NoPrevious)?;
                if !found(&last, &meta) {
                    return Err(SessionError::NoPrevious);
                }
                (last, true)
            }
        };
        super::id::check_session_id(&id).map_err(SessionError::InvalidId)?;
        let dir = base.join(&id);
        let created_dir = !dir.exists();
        std::fs::create_dir_all(&dir).map_err(io)?;
        // The lock is on the folder, which survives context rotation (the file is renamed).
        let lock = std::fs::File::open(&dir).map_err(io)?;
        // SAFETY: flock on a file descriptor we own; no memory is touched.
        let rc = unsafe { libc::flock(lock.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc != 0 {
            return Err(SessionError::Locked(id));
        }
        if !resumed {
            std::fs::File::create(dir.join("context.jsonl")).map_err(io)?;
            meta.entry_mut(&work);
            std::fs::create_dir_all(share).map_err(io)?;
            meta.save(share)?;
        }
        Ok(Session {
            id,
            dir,
            work_dir: work_dir.to_path_buf(),
            share_dir: share.to_path_buf(),
            resumed,
            created_dir,
            _lock: lock,
        })
    }

    pub fn context_path(&self) -> PathBuf {
        self.dir.join("context.jsonl")
    }

    pub fn wire_path(&self) -> PathBuf {
        self.dir.join("wire.jsonl")
    }

    /// Removes the files this session writes and then the folder, but only a folder this process
    /// created, and never recursively: anything else found inside keeps it (and is logged).
    fn remove_empty_folder(&self) {
        if !self.created_dir {
            return;
        }
        for name in ["context.jsonl", "wire.jsonl", super::state::STATE_FILE] {
            let _ = std::fs::remove_file(self.dir.join(name));
        }
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            tracing::info!("keeping the empty session folder {}: {e}", self.dir.display());
        }
    }

    /// Exit bookkeeping: delete an empty session, remember a non-empty one as the last.
    pub fn finish(&self) {
        let wire_empty = super::jsonl::read_lines(&self.wire_path())
            .map(|lines| lines.iter().all(|l| l.contains("\"metadata\"") && l.contains("protocol_version")))
            .unwrap_or(true);
        // Bookkeeping records (`_system_prompt`, checkpoints) and an untitled state are not content
        // (`wire-1.10.md` §10.4).
        let context_empty = !super::context_prompt::has_conversation(&self.context_path())
            && super::state::load(&self.dir).custom_title.is_none();
        let work = self.work_dir.to_string_lossy().to_string();
        let mut meta = Metadata::load(&self.share_dir);
        let entry = meta.entry_mut(&work);
        if wire_empty && context_empty {
            self.remove_empty_folder();
            if entry.last_session_id.as_deref() == Some(self.id.as_str()) {
                entry.last_session_id = None;
            }
        } else {
            entry.last_session_id = Some(self.id.clone());
        }
        if let Err(e) = meta.save(&self.share_dir) {
            tracing::warn!("cannot save kimi.json: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalize_is_lexical() {
        assert_eq!(normalize(Path::new("a/../b/./c"), Path::new("/w")), PathBuf::from("/w/b/c"));
        assert_eq!(normalize(Path::new("/x/y/.."), Path::new("/w")), PathBuf::from("/x"));
    }

    #[test]
    fn key_is_md5_hex() {
        assert_eq!(work_dir_key(Path::new("")), "d41d8cd98f00b204e9800998ecf8427e");
    }

    #[test]
    fn create_resume_continue_and_lock() {
        let share = tempfile::tempdir().unwrap();
        let work = Path::new("/tmp/some/work");
        assert!(matches!(Session::open(share.path(), work, &SessionChoice::Continue), Err(SessionError::NoPrevious)));
        let s = Session::open(share.path(), work, &SessionChoice::Id("my-id".into())).unwrap();
        assert!(!s.resumed);
        assert!(matches!(
            Session::open(share.path(), work, &SessionChoice::Id("my-id".into())),
            Err(SessionError::Locked(_))
        ));
        std::fs::write(s.context_path(), "{\"role\":\"user\",\"content\":\"x\"}\n").unwrap();
        s.finish();
        drop(s);
        let meta = Metadata::load(share.path());
        assert_eq!(meta.entry("/tmp/some/work").unwrap().last_session_id.as_deref(), Some("my-id"));
        let s = Session::open(share.path(), work, &SessionChoice::Continue).unwrap();
        assert!(s.resumed);
        assert_eq!(s.id, "my-id");
        drop(s);
        let empty = Session::open(share.path(), work, &SessionChoice::New).unwrap();
        empty.finish();
        assert!(!empty.dir.exists());
    }

    #[test]
    fn path_like_ids_are_refused_and_touch_nothing() {
        let share = tempfile::tempdir().unwrap();
        let victim = tempfile::tempdir().unwrap();
        std::fs::write(victim.path().join("precious"), "x").unwrap();
        let work = Path::new("/tmp/some/work");
        for id in ["..", ".", "../..", &victim.path().display().to_string(), "a/b", "a\\b", "a\0b"] {
            let r = Session::open(share.path(), work, &SessionChoice::Id(id.to_string()));
            assert!(matches!(r, Err(SessionError::InvalidId(_))), "{id:?}");
        }
        assert!(victim.path().join("precious").exists());
    }

    #[test]
    fn an_existing_folder_is_never_removed() {
        let share = tempfile::tempdir().unwrap();
        let work = Path::new("/tmp/some/work");
        let dir = share.path().join("sessions").join(work_dir_key(work)).join("kept");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("notes.txt"), "mine").unwrap();
        let s = Session::open(share.path(), work, &SessionChoice::Id("kept".into())).unwrap();
        s.finish();
        assert!(dir.join("notes.txt").exists());
        // A folder created by this run, with a stranger file in it, is not removed either.
        let s = Session::open(share.path(), work, &SessionChoice::New).unwrap();
        std::fs::write(s.dir.join("other"), "x").unwrap();
        s.finish();
        assert!(s.dir.join("other").exists());
    }
}
