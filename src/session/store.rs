//! The share dir, the `kimi.json` index and session folders (`docs/sessions.md` §1-§4).
//!
//! Invariants: a session folder is `<share>/sessions/<md5(work dir)>/<id>/`; a running server
//! holds an exclusive advisory lock on its `context.jsonl` so two servers never write the same
//! session; `kimi.json` is rewritten whole (2-space indent) and unknown top-level keys are
//! dropped, but a `work_dirs` entry kiwi cannot read is written back untouched.
//!
//! Safety (`docs/sessions.md` §7.1): opening a session never truncates
//! an existing `context.jsonl` (a folder holding one is resumed even without a kimi.json entry),
//! and an unreadable `kimi.json` is moved aside to `kimi.json.bad-<unix time>`, never replaced.
//!
//! Many processes share one index: `kimi.json` changes only through
//! [`Metadata::update`], a read-modify-write under an exclusive `flock` on `kimi.json.lock`, which
//! writes a temporary file of its own (a unique name) and renames it into place. A reader
//! therefore always sees one whole version; a file that does not parse is read again under the
//! lock (where no kiwi writer can be midway) before it is declared unreadable and moved aside.
//!
//! Exit reads nothing big: whether a session holds anything is decided by
//! streaming its files up to the first record that counts, never by reading them whole.

use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

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

/// The folder holding the stored sessions of `work_dir`.
pub fn sessions_dir(share: &Path, work_dir: &Path) -> PathBuf {
    share.join("sessions").join(work_dir_key(work_dir))
}

/// The folder of the stored session `id` of `work_dir`, if there is one (a folder holding a
/// `context.jsonl`); a legacy flat `<id>.jsonl` is moved into its folder first. An id that
/// names a path is never looked up.
pub fn stored_session(share: &Path, work_dir: &Path, id: &str) -> Option<PathBuf> {
    super::id::check_session_id(id).ok()?;
    let base = sessions_dir(share, work_dir);
    let dir = base.join(id);
    let legacy = base.join(format!("{id}.jsonl"));
    if legacy.is_file() && !dir.join("context.jsonl").exists() {
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::rename(&legacy, dir.join("context.jsonl"));
    }
    dir.join("context.jsonl").is_file().then_some(dir)
}

/// `kimi.json`. Entries are read one by one: an entry kiwi cannot read is kept verbatim in
/// `unreadable` and written back, so one odd entry never costs the others.
#[derive(Debug, Clone, Default)]
pub struct Metadata {
    pub work_dirs: Vec<WorkDirEntry>,
    /// `work_dirs` entries of a shape kiwi does not understand, preserved as they were.
    unreadable: Vec<serde_json::Value>,
    /// Set when an unreadable file could not be moved aside: saving would then destroy it.
    save_blocked: bool,
}

/// What is written back: the entries kiwi read (fields in the reference's order), then the ones
/// it could not, untouched.
#[derive(Serialize)]
struct MetadataOut<'a> {
    work_dirs: Vec<EntryOut<'a>>,
}

#[derive(Serialize)]
#[serde(untagged)]
enum EntryOut<'a> {
    Known(&'a WorkDirEntry),
    Unreadable(&'a serde_json::Value),
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

/// The index file, its lock, and how long a writer waits for the lock before it goes ahead
/// without it (a holder only reads and writes one small file; a stopped or hung holder must not
/// keep every other process from starting).
const INDEX_FILE: &str = "kimi.json";
const INDEX_LOCK_FILE: &str = "kimi.json.lock";
const INDEX_LOCK_WAIT: Duration = Duration::from_secs(10);

/// An exclusive `flock` on `<share>/kimi.json.lock`, released when dropped (the file closes).
struct IndexLock {
    _file: Option<std::fs::File>,
}

impl IndexLock {
    /// Takes the index lock, waiting up to [`INDEX_LOCK_WAIT`]; past that (or when the lock file
    /// cannot be opened) it warns and goes on unlocked: the write stays atomic, only a concurrent
    /// change could then be lost.
    fn take(share: &Path) -> IndexLock {
        let path = share.join(INDEX_LOCK_FILE);
        let opened = std::fs::create_dir_all(share).and_then(|()| {
            std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).mode(0o600).open(&path)
        });
        let file = match opened {
            Ok(file) => file,
            Err(e) => {
                tracing::warn!("cannot open {} ({e}); updating kimi.json without the lock", path.display());
                return IndexLock { _file: None };
            }
        };
        match flock(&file, libc::LOCK_NB) {
            Ok(()) => return IndexLock { _file: Some(file) },
            Err(e) if e.raw_os_error() == Some(libc::EWOULDBLOCK) => {}
            Err(e) => {
                tracing::warn!("cannot lock {} ({e}); updating kimi.json without the lock", path.display());
                return IndexLock { _file: None };
            }
        }
        // Held by another process: wait in the kernel's queue (woken the moment it is free), on a
        // thread of its own so that the wait can end. A thread left waiting takes the lock and
        // drops it at once, since nobody receives it.
        let (tx, rx) = std::sync::mpsc::channel();
        let waiter = std::thread::Builder::new().name("kiwi-index-lock".into()).spawn(move || {
            let locked = flock(&file, 0).map(|()| file);
            let _ = tx.send(locked);
        });
        if let Err(e) = waiter {
            tracing::warn!("cannot wait for {} ({e}); updating kimi.json without the lock", path.display());
            return IndexLock { _file: None };
        }
        match rx.recv_timeout(INDEX_LOCK_WAIT) {
            Ok(Ok(file)) => IndexLock { _file: Some(file) },
            Ok(Err(e)) => {
                tracing::warn!("cannot lock {} ({e}); updating kimi.json without the lock", path.display());
                IndexLock { _file: None }
            }
            Err(_) => {
                tracing::warn!("{} stays locked; updating kimi.json without the lock", path.display());
                IndexLock { _file: None }
            }
        }
    }
}

/// An exclusive `flock` (with `LOCK_NB` or not), retried when a signal interrupts it.
fn flock(file: &std::fs::File, flags: i32) -> std::io::Result<()> {
    loop {
        // SAFETY: `flock` on a descriptor we own; it does not touch memory.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | flags) } == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != std::io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Why `kimi.json` could not be read.
enum ReadError {
    /// Not there: empty metadata.
    Missing,
    /// There but not readable as an index.
    Unreadable(String),
}

impl Metadata {
    /// Reads `<share>/kimi.json`. A missing file is empty metadata. A file that cannot be read
    /// or parsed is read again under the index lock, and if it still cannot, it is moved aside to
    /// `kimi.json.bad-<unix time>` with a warning, so the next update does not silently replace
    /// what the user had (`docs/sessions.md` §7.1).
    pub fn load(share: &Path) -> Metadata {
        match Self::read(share) {
            Ok(meta) => meta,
            Err(ReadError::Missing) => Metadata::default(),
            Err(ReadError::Unreadable(_)) => {
                let _lock = IndexLock::take(share);
                Self::load_locked(share)
            }
        }
    }

    /// [`Metadata::load`] for a caller holding the index lock.
    fn load_locked(share: &Path) -> Metadata {
        // A writer that does not take the lock (another program sharing the dir) may be midway:
        // a short second look before anything is moved aside.
        let mut cause = String::new();
        for attempt in 0..3 {
            match Self::read(share) {
                Ok(meta) => return meta,
                Err(ReadError::Missing) => return Metadata::default(),
                Err(ReadError::Unreadable(why)) => cause = why,
            }
            if attempt < 2 {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Metadata { save_blocked: !move_aside(&share.join(INDEX_FILE), &cause), ..Metadata::default() }
    }

    fn read(share: &Path) -> Result<Metadata, ReadError> {
        let path = share.join(INDEX_FILE);
        let text = match std::fs::read(&path) {
            Ok(bytes) => String::from_utf8(bytes).map_err(|e| e.to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(ReadError::Missing),
            Err(e) => Err(e.to_string()),
        };
        let parsed = text.and_then(|t| serde_json::from_str::<serde_json::Value>(&t).map_err(|e| e.to_string()));
        let work_dirs = parsed.and_then(|v| match v {
            serde_json::Value::Object(mut top) => match top.remove("work_dirs") {
                None | Some(serde_json::Value::Null) => Ok(Vec::new()),
                Some(serde_json::Value::Array(entries)) => Ok(entries),
                Some(_) => Err("\"work_dirs\" is not a list".to_string()),
            },
            _ => Err("not a JSON object".to_string()),
        });
        work_dirs.map(|entries| Self::from_entries(&path, entries)).map_err(ReadError::Unreadable)
    }

    fn from_entries(path: &Path, entries: Vec<serde_json::Value>) -> Metadata {
        let mut meta = Metadata::default();
        for (i, entry) in entries.into_iter().enumerate() {
            match serde_json::from_value::<WorkDirEntry>(entry.clone()) {
                Ok(e) => meta.work_dirs.push(e),
                Err(e) => {
                    tracing::warn!("{}: work_dirs[{i}] is unreadable ({e}); keeping it as it is", path.display());
                    meta.unreadable.push(entry);
                }
            }
        }
        meta
    }

    /// The one way to change `kimi.json`: under the index lock, reads the current file, lets
    /// `change` edit it, and writes it back when `change` says it changed something.
    pub fn update(share: &Path, change: impl FnOnce(&mut Metadata) -> bool) -> Result<(), SessionError> {
        let _lock = IndexLock::take(share);
        let mut meta = Self::load_locked(share);
        if change(&mut meta) { meta.write(share) } else { Ok(()) }
    }

    /// Writes the whole file through a temporary file of this process's own, renamed into place,
    /// so no reader ever sees half of it. Only under the lock. Not synced: an fsync held under the
    /// lock would serialize every exit of every process on the disk's flush (tens of ms each), and
    /// what a power cut could cost is the last-session pointers, never a session.
    fn write(&self, share: &Path) -> Result<(), SessionError> {
        if self.save_blocked {
            return Err(SessionError::Io(format!(
                "{} is unreadable and could not be moved aside; not overwriting it",
                share.join(INDEX_FILE).display()
            )));
        }
        let work_dirs =
            self.work_dirs.iter().map(EntryOut::Known).chain(self.unreadable.iter().map(EntryOut::Unreadable));
        let text = serde_json::to_string_pretty(&MetadataOut { work_dirs: work_dirs.collect() }).map_err(io)?;
        let tmp = share.join(format!(".{INDEX_FILE}.{}.{}.tmp", std::process::id(), uuid::Uuid::new_v4().simple()));
        let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, share.join(INDEX_FILE)));
        if written.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        written.map_err(io)
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

/// Renames an unreadable `kimi.json` to `kimi.json.bad-<unix time>[-n]`; false when it could
/// not be moved (the caller must then leave it alone).
fn move_aside(path: &Path, cause: &str) -> bool {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let base = format!("{}.bad-{secs}", path.display());
    let mut target = PathBuf::from(&base);
    let mut n = 1;
    while target.exists() {
        target = PathBuf::from(format!("{base}-{n}"));
        n += 1;
    }
    match std::fs::rename(path, &target) {
        Ok(()) => {
            tracing::warn!("{} is unreadable ({cause}); moved it to {}", path.display(), target.display());
            true
        }
        Err(e) => {
            tracing::warn!("{} is unreadable ({cause}) and cannot be moved aside ({e}); leaving it", path.display());
            false
        }
    }
}

/// How the session was chosen on the command line.
#[derive(Debug, Clone, PartialEq)]
pub enum SessionChoice {
    New,
    Id(String),
    Continue,
    /// A stored session `kiwi web` opens (`docs/web.md` §3): resumed only when its `state.json`
    /// exists, so a session made by `POST /api/sessions/` (an empty `context.jsonl`) starts as
    /// a new one (`default_plan_mode`, `SessionStart` with `startup`).
    Hosted(String),
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
    /// The locked session folder, held until [`Session::finish`] (or the last clone is dropped).
    lock: std::fs::File,
}

impl Session {
    pub fn open(share: &Path, work_dir: &Path, choice: &SessionChoice) -> Result<Session, SessionError> {
        let work = work_dir.to_string_lossy().to_string();
        let base = sessions_dir(share, work_dir);
        let meta = Metadata::load(share);
        // The reference (`docs/sessions.md` §3) requires a kimi.json entry for the work dir before a
        // session can be found, and otherwise re-creates (truncates) it. kiwi's rule (`docs/sessions.md` §7.1) wins:
        // a folder that holds a context.jsonl is resumed whatever kimi.json says.
        let found = |id: &str| stored_session(share, work_dir, id).is_some();
        let (id, resumed) = match choice {
            SessionChoice::New => (uuid::Uuid::new_v4().to_string(), false),
            SessionChoice::Id(id) => {
                // Checked before the id touches the file system (the lookup may migrate files).
                super::id::check_session_id(id).map_err(SessionError::InvalidId)?;
                (id.clone(), found(id))
            }
            SessionChoice::Hosted(id) => {
                super::id::check_session_id(id).map_err(SessionError::InvalidId)?;
                let stateful = base.join(id).join(super::state::STATE_FILE).is_file();
                (id.clone(), found(id) && stateful)
            }
            SessionChoice::Continue => {
                let last = meta.entry(&work).and_then(|e| e.last_session_id.clone()).ok_or(SessionError::NoPrevious)?;
                super::id::check_session_id(&last).map_err(SessionError::InvalidId)?;
                if !found(&last) {
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
            // Never truncate: a context.jsonl that appeared since the lookup is kept.
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(false)
                .open(dir.join("context.jsonl"))
                .map_err(io)?;
        }
        if meta.entry(&work).is_none() {
            Metadata::update(share, |meta| {
                let known = meta.entry(&work).is_some();
                meta.entry_mut(&work);
                !known
            })?;
        }
        Ok(Session {
            id,
            dir,
            work_dir: work_dir.to_path_buf(),
            share_dir: share.to_path_buf(),
            resumed,
            created_dir,
            lock,
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
        for name in ["context.jsonl", "wire.jsonl", super::state::STATE_FILE, super::origin::ORIGIN_FILE] {
            let _ = std::fs::remove_file(self.dir.join(name));
        }
        if let Err(e) = std::fs::remove_dir(&self.dir) {
            tracing::info!("keeping the empty session folder {}: {e}", self.dir.display());
        }
    }

    /// Exit bookkeeping: delete an empty session, remember a non-empty one as the last, then
    /// unlock the folder. The unlock is explicit: tasks winding down may still hold clones of the
    /// session for a moment, and the folder must open again as soon as the session is closed.
    pub fn finish(&self) {
        // Only the first records are read: the header, then the first record that is not one.
        let wire_empty = !super::jsonl::any_record(&self.wire_path(), |r: &WireProbe| !r.is_header()).unwrap_or(true);
        // Bookkeeping records (`_system_prompt`, checkpoints) and an untitled state are not content
        // (`docs/protocol-1.10.md` §10.4).
        let context_empty = !super::context_prompt::has_conversation(&self.context_path())
            && super::state::load(&self.dir).custom_title.is_none();
        let empty = wire_empty && context_empty;
        if empty {
            self.remove_empty_folder();
        }
        let work = self.work_dir.to_string_lossy().to_string();
        // Written only when this changes it (a rewrite is a rename that the file system flushes).
        let updated = Metadata::update(&self.share_dir, |meta| {
            let known = meta.entry(&work).is_some();
            let entry = meta.entry_mut(&work);
            let before = entry.last_session_id.clone();
            if !empty {
                entry.last_session_id = Some(self.id.clone());
            } else if before.as_deref() == Some(self.id.as_str()) {
                entry.last_session_id = None;
            }
            !known || entry.last_session_id != before
        });
        if let Err(e) = updated {
            tracing::warn!("cannot save kimi.json: {e}");
        }
        // SAFETY: flock on a file descriptor we own; no memory is touched.
        unsafe { libc::flock(self.lock.as_raw_fd(), libc::LOCK_UN) };
    }
}

/// Just enough of a `wire.jsonl` line to tell the metadata header from a record (the header is
/// `{"type": "metadata", "protocol_version": …}`; records are `{"timestamp", "message"}`, whose
/// message is skipped, not kept).
#[derive(Deserialize)]
struct WireProbe {
    #[serde(rename = "type")]
    kind: Option<String>,
    protocol_version: Option<serde::de::IgnoredAny>,
}

impl WireProbe {
    fn is_header(&self) -> bool {
        self.kind.as_deref() == Some("metadata") && self.protocol_version.is_some()
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
        // Finished is unlocked, even while something still holds the old session.
        let again = Session::open(share.path(), work, &SessionChoice::Id("my-id".into())).unwrap();
        assert!(again.resumed);
        drop(again);
        drop(s);
        let meta = Metadata::load(share.path());
        assert_eq!(meta.entry("/tmp/some/work").unwrap().last_session_id.as_deref(), Some("my-id"));
        let s = Session::open(share.path(), work, &SessionChoice::Continue).unwrap();
        assert!(s.resumed);
        assert_eq!(s.id, "my-id");
        drop(s);
        let empty = Session::open(share.path(), work, &SessionChoice::New).unwrap();
        let inode = || std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(share.path().join(INDEX_FILE)).unwrap());
        let before = inode();
        empty.finish();
        assert!(!empty.dir.exists());
        assert_eq!(inode(), before, "an exit that changes nothing leaves kimi.json alone");
        let meta = Metadata::load(share.path());
        assert_eq!(meta.entry("/tmp/some/work").unwrap().last_session_id.as_deref(), Some("my-id"));
    }

    #[test]
    fn a_hosted_session_is_resumed_only_with_its_state_file() {
        let share = tempfile::tempdir().unwrap();
        let work = Path::new("/tmp/some/work");
        let hosted = || SessionChoice::Hosted("web-1".into());
        let s = Session::open(share.path(), work, &hosted()).unwrap();
        assert!(!s.resumed, "a folder nothing knows of is new");
        let dir = s.dir.clone();
        drop(s);
        // As `POST /api/sessions/` leaves it: an empty context.jsonl, no state.json.
        assert!(dir.join("context.jsonl").is_file());
        let s = Session::open(share.path(), work, &hosted()).unwrap();
        assert!(!s.resumed);
        drop(s);
        std::fs::write(dir.join(super::super::state::STATE_FILE), "{}").unwrap();
        assert!(Session::open(share.path(), work, &hosted()).unwrap().resumed);
        let r = Session::open(share.path(), work, &SessionChoice::Hosted("../x".into()));
        assert!(matches!(r, Err(SessionError::InvalidId(_))));
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
    fn resume_needs_no_kimi_json_entry() {
        let share = tempfile::tempdir().unwrap();
        let work = Path::new("/tmp/some/work");
        let s = Session::open(share.path(), work, &SessionChoice::Id("old".into())).unwrap();
        std::fs::write(s.context_path(), "{\"role\":\"user\",\"content\":\"x\"}\n").unwrap();
        drop(s);
        std::fs::remove_file(share.path().join("kimi.json")).unwrap();
        let s = Session::open(share.path(), work, &SessionChoice::Id("old".into())).unwrap();
        assert!(s.resumed);
        assert_eq!(std::fs::read_to_string(s.context_path()).unwrap(), "{\"role\":\"user\",\"content\":\"x\"}\n");
        assert!(Metadata::load(share.path()).entry("/tmp/some/work").is_some());
    }

    #[test]
    fn unreadable_metadata_is_moved_aside_and_bad_entries_are_kept() {
        let share = tempfile::tempdir().unwrap();
        let path = share.path().join("kimi.json");
        for broken in ["{", "[1, 2]", "{\"work_dirs\": 3}", "\u{0}\u{ff}"] {
            std::fs::write(&path, broken).unwrap();
            let meta = Metadata::load(share.path());
            assert!(meta.work_dirs.is_empty());
            assert!(!path.exists(), "{broken:?} was not moved aside");
            Metadata::update(share.path(), |_| true).unwrap();
        }
        let aside: Vec<String> = std::fs::read_dir(share.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("kimi.json.bad-"))
            .collect();
        assert_eq!(aside.len(), 4, "{aside:?}");

        std::fs::write(
            &path,
            r#"{"work_dirs": [{"path": "/a", "last_session_id": "s"}, {"path": null}, {"path": "/b", "kaos": "local"}]}"#,
        )
        .unwrap();
        assert_eq!(Metadata::load(share.path()).work_dirs.len(), 2);
        Metadata::update(share.path(), |meta| {
            meta.entry_mut("/c").last_session_id = Some("t".into());
            true
        })
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(
            v["work_dirs"],
            serde_json::json!([
                {"path": "/a", "kaos": "local", "last_session_id": "s"},
                {"path": "/b", "kaos": "local", "last_session_id": null},
                {"path": "/c", "kaos": "local", "last_session_id": "t"},
                {"path": null}
            ])
        );
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

    /// Processes (children of this test binary), each with threads, each
    /// thread a work dir of its own, open and finish sessions as fast as they can. Every update
    /// must survive (no lost update, checked after each exit), nothing may fail, and the index
    /// must never be taken for corrupt.
    #[test]
    fn many_processes_share_one_index() {
        const CHILD: &str = "KIWI_INDEX_HAMMER_CHILD";
        const PROCESSES: usize = 4;
        const THREADS: usize = 4;
        const ROUNDS: usize = 12;
        if let Some(share) = std::env::var_os(CHILD) {
            let share = PathBuf::from(share);
            let threads: Vec<_> = (0..THREADS)
                .map(|t| {
                    let share = share.clone();
                    std::thread::spawn(move || {
                        let work = PathBuf::from(format!("/w/{}/{t}", std::process::id()));
                        let mut last = String::new();
                        for _ in 0..ROUNDS {
                            let s = Session::open(&share, &work, &SessionChoice::New).unwrap();
                            std::fs::write(s.context_path(), "{\"role\":\"user\",\"content\":\"x\"}\n").unwrap();
                            s.finish();
                            let meta = Metadata::load(&share);
                            let entry = meta.entry(&work.to_string_lossy()).map(|e| e.last_session_id.clone());
                            assert_eq!(entry, Some(Some(s.id.clone())), "an update was lost");
                            last = s.id.clone();
                        }
                        (work.to_string_lossy().into_owned(), last)
                    })
                })
                .collect();
            let mut expected = String::new();
            for t in threads {
                let (work, last) = t.join().unwrap();
                expected.push_str(&format!("{work} {last}\n"));
            }
            std::fs::write(share.join(format!("expected-{}", std::process::id())), expected).unwrap();
            return;
        }
        let share = tempfile::tempdir().unwrap();
        let exe = std::env::current_exe().unwrap();
        let children: Vec<_> = (0..PROCESSES)
            .map(|_| {
                std::process::Command::new(&exe)
                    .args(["--exact", "session::store::tests::many_processes_share_one_index", "--nocapture"])
                    .env(CHILD, share.path())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let names: Vec<String> = std::fs::read_dir(share.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!names.iter().any(|n| n.starts_with("kimi.json.bad-")), "the index was taken for corrupt: {names:?}");
        assert!(!names.iter().any(|n| n.ends_with(".tmp")), "temporary files were left: {names:?}");
        let meta = Metadata::load(share.path());
        let mut checked = 0;
        for name in names.iter().filter(|n| n.starts_with("expected-")) {
            for line in std::fs::read_to_string(share.path().join(name)).unwrap().lines() {
                let (work, id) = line.split_once(' ').unwrap();
                assert_eq!(meta.entry(work).and_then(|e| e.last_session_id.as_deref()), Some(id), "{work}");
                checked += 1;
            }
        }
        assert_eq!(checked, PROCESSES * THREADS);
        assert_eq!(meta.work_dirs.len(), PROCESSES * THREADS);
    }

    /// Exit reads only the first records of the session's files. The child
    /// limits its address space to 1.5 times the (sparse) files' size: reading one whole and
    /// copying its lines does not fit, and nothing may fail quietly either.
    #[test]
    fn exit_reads_only_the_first_records() {
        const CHILD: &str = "KIWI_FINISH_BIG_FILES_CHILD";
        const HUGE: u64 = 256 << 20;
        if let Some(share) = std::env::var_os(CHILD) {
            let share = PathBuf::from(share);
            let work = Path::new("/tmp/some/work");
            let s = Session::open(&share, work, &SessionChoice::Id("big".into())).unwrap();
            let sparse = |path: PathBuf, head: &str| {
                let f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).open(path).unwrap();
                f.set_len(HUGE).unwrap();
                std::os::unix::fs::FileExt::write_all_at(&f, head.as_bytes(), 0).unwrap();
            };
            let system = format!("{{\"role\": \"_system_prompt\", \"content\": \"{}\"}}\n", "p".repeat(100_000));
            sparse(s.context_path(), &format!("{system}{{\"role\":\"user\",\"content\":\"x\"}}\n"));
            sparse(
                s.wire_path(),
                "{\"type\": \"metadata\", \"protocol_version\": \"1.10\"}\n{\"timestamp\": 1.0, \"message\": {\"type\": \"TurnBegin\", \"payload\": {\"user_input\": \"x\"}}}\n",
            );
            let status = std::fs::read_to_string("/proc/self/status").unwrap();
            let vm_kb: u64 = status
                .lines()
                .find_map(|l| l.strip_prefix("VmSize:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
                .unwrap();
            let limit = vm_kb * 1024 + HUGE * 3 / 2;
            // SAFETY: a plain syscall in a single-purpose child process.
            unsafe {
                let rl = libc::rlimit { rlim_cur: limit, rlim_max: libc::RLIM_INFINITY };
                assert_eq!(libc::setrlimit(libc::RLIMIT_AS, &rl), 0);
            }
            s.finish();
            assert_eq!(
                Metadata::load(&share).entry("/tmp/some/work").and_then(|e| e.last_session_id.clone()).as_deref(),
                Some("big")
            );
            return;
        }
        let share = tempfile::tempdir().unwrap();
        crate::session::file_limit::run_child(
            "session::store::tests::exit_reads_only_the_first_records",
            CHILD,
            share.path(),
        );
    }
}
