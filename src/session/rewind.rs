//! Rewinding a session (`docs/sessions.md` §9): taking the conversation back to before a turn and
//! restoring the files kiwi's own edit tools changed in the turns undone.
//!
//! Three parts live here, below the soul:
//! * [`EditJournal`], the before-image store: `rewind/<offset>/` in the session folder for each
//!   turn, named by the byte offset of the turn's `TurnBegin` record in `wire.jsonl` (zero-padded
//!   so names sort like offsets). `manifest.json` holds the session state as the turn began and
//!   one entry per file the turn's edits changed: what it was before the turn's first edit
//!   (absent, a kept copy `<n>.bin`, or dropped) and a SHA-256 of what kiwi last wrote into it.
//!   Every file is written atomically (temp file, fsync, rename). The kept copies of the whole
//!   session stay under `undo.max_bytes`: the oldest turns' copies are dropped first, and a copy
//!   that alone would not fit is not kept; an undo reports such files as not restored.
//! * [`turn_starts`] and [`resolve`]: where each turn starts in `wire.jsonl` and which cut an
//!   undo target means. Turns are numbered as `fork` numbers them (`docs/sessions.md` §8).
//! * The cuts: [`cut_context`] (the context as it stood when the cut turn began, from the
//!   turn's `kiwi_context` mark), [`truncate_file`] (`wire.jsonl`), [`restore_local`] (a file).
//!
//! Invariants: nothing is changed before the whole target is checked (turn exists, its mark fits
//! the context file); a file is restored only when every change to it in the undone turns was
//! kiwi's own and it still holds what kiwi last wrote — otherwise it is left alone and reported.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use thiserror::Error;

use super::fork::{ContextMark, ends_a_line, highest_archive};
use super::state::SessionStateFile;

/// The folder of the before-images inside a session folder.
pub const REWIND_DIR: &str = "rewind";
/// `undo.max_bytes` when the config does not say.
pub const DEFAULT_MAX_BYTES: u64 = crate::config::schema::DEFAULT_UNDO_MAX_BYTES;
const MANIFEST: &str = "manifest.json";
/// An undo's intent, recorded in `rewind/` before it touches any file and removed when it is
/// complete; found at a session's start, the undo is finished then.
const PENDING_UNDO: &str = "undo.json";

/// What an interrupted undo still has to do.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct PendingUndo {
    /// The cut in `wire.jsonl`.
    offset: u64,
    /// The context position to cut back to.
    mark: ContextMark,
}
/// The hash of "no file" in the chain checks.
const ABSENT: &str = "";

#[derive(Debug, Error, PartialEq, Eq)]
pub enum RewindError {
    #[error("Nothing to undo: the session has no turns")]
    NothingToUndo,
    #[error("turn_index {turn} out of range (max turn: {max})")]
    OutOfRange { turn: u64, max: i64 },
    #[error("cannot undo {asked} turns: the session has {available}")]
    TooMany { asked: u64, available: u64 },
    #[error("the number of turns to undo must be at least 1")]
    Zero,
    #[error("turn {turn} was recorded without a context position (an older session); it cannot be undone")]
    Unmarked { turn: u64 },
    #[error("the context file does not match the position recorded for turn {turn}; nothing was undone")]
    MarkMismatch { turn: u64 },
    #[error("{0}")]
    Io(String),
}

fn io(e: impl std::fmt::Display) -> RewindError {
    RewindError::Io(e.to_string())
}

fn sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// What a file was before a turn's first edit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Before {
    /// The file did not exist: undoing deletes it.
    Absent,
    /// A copy is kept in `blob` (a file of the turn's folder).
    Kept { blob: String, sha256: String, len: u64 },
    /// No copy (over the size bound): the file cannot be restored.
    Dropped { sha256: String, len: u64, reason: String },
}

impl Before {
    /// The hash of what the file held (`""` for a file that did not exist).
    pub fn sha(&self) -> &str {
        match self {
            Before::Absent => ABSENT,
            Before::Kept { sha256, .. } | Before::Dropped { sha256, .. } => sha256,
        }
    }
}

/// One file a turn's edits changed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub path: PathBuf,
    pub before: Before,
    /// What kiwi last wrote into it during the turn.
    pub after_sha256: String,
    /// Someone else changed it between two of kiwi's edits in the turn.
    #[serde(default)]
    pub interleaved: bool,
}

/// A turn's `manifest.json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub wire_offset: u64,
    /// `state.json` as the turn began.
    #[serde(default)]
    pub state: Option<SessionStateFile>,
    #[serde(default)]
    pub files: Vec<Entry>,
}

struct Current {
    dir: PathBuf,
    manifest: Manifest,
}

#[derive(Default)]
struct Inner {
    current: Option<Current>,
    /// Bytes of kept copies in the whole store (`None`: not counted yet).
    total: Option<u64>,
}

/// The session's before-image store (see the module docs). Shared by every tool call of the
/// session; a session without a folder has none.
pub struct EditJournal {
    root: PathBuf,
    max_bytes: u64,
    inner: Mutex<Inner>,
}

impl EditJournal {
    pub fn new(session_dir: &Path, max_bytes: u64) -> Self {
        Self { root: session_dir.join(REWIND_DIR), max_bytes, inner: Mutex::default() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn turn_dir(&self, offset: u64) -> PathBuf {
        self.root.join(format!("{offset:020}"))
    }

    /// A turn began at byte `offset` of `wire.jsonl` with the session state `state`: the edits
    /// that follow are the turn's. Its folder is made only when the turn changes a file or the
    /// state (see [`EditJournal::end_turn`]), so a turn that changes neither leaves nothing.
    pub fn begin_turn(&self, offset: u64, state: Option<SessionStateFile>) -> std::io::Result<()> {
        let mut inner = self.lock();
        inner.current = None;
        let dir = self.turn_dir(offset);
        if dir.exists() {
            // Left by a turn that was cut from the file some other way: not this turn's.
            std::fs::remove_dir_all(&dir)?;
            inner.total = None;
        }
        let manifest = Manifest { wire_offset: offset, state, files: Vec::new() };
        inner.current = Some(Current { dir, manifest });
        Ok(())
    }

    /// The turn ended with the session state `now`: when it changed what an undo restores
    /// ([`same_undoable_state`]) and no file edit wrote the turn's folder yet, the folder is
    /// written for the state copy.
    pub fn end_turn(&self, now: &SessionStateFile) -> std::io::Result<()> {
        let inner = self.lock();
        let Some(current) = inner.current.as_ref() else { return Ok(()) };
        let unchanged = current.manifest.state.as_ref().is_none_or(|s| same_undoable_state(s, now));
        if unchanged || !current.manifest.files.is_empty() {
            return Ok(());
        }
        std::fs::create_dir_all(&current.dir)?;
        save_manifest(&current.dir, &current.manifest)
    }

    /// kiwi's edit tool replaced the file at `path` (resolved): it held `before` (`None`: it did
    /// not exist) and now holds `after`. A failure to keep the image is logged, never fatal.
    pub fn record(&self, path: &Path, before: Option<&[u8]>, after: &[u8]) {
        if let Err(e) = self.try_record(path, before, after) {
            tracing::warn!("cannot keep the before-image of {}: {e}", path.display());
        }
    }

    fn try_record(&self, path: &Path, before: Option<&[u8]>, after: &[u8]) -> std::io::Result<()> {
        let mut inner = self.lock();
        let Some(current) = inner.current.as_ref() else { return Ok(()) };
        let after_sha = sha256(after);
        let before_sha = before.map(sha256).unwrap_or_default();
        let dir = current.dir.clone();
        std::fs::create_dir_all(&dir)?;
        if let Some(at) = current.manifest.files.iter().position(|e| e.path == path) {
            let current = inner.current.as_mut().ok_or_else(|| std::io::Error::other("no turn"))?;
            let entry = &mut current.manifest.files[at];
            if entry.after_sha256 != before_sha {
                entry.interleaved = true;
            }
            entry.after_sha256 = after_sha;
            return save_manifest(&dir, &current.manifest);
        }
        let before = match before {
            None => Before::Absent,
            Some(bytes) => {
                let len = bytes.len() as u64;
                if self.make_room(&mut inner, len)? {
                    let n = inner.current.as_ref().map_or(0, |c| c.manifest.files.len());
                    let blob = format!("{n}.bin");
                    write_atomic(&dir.join(&blob), bytes, None)?;
                    inner.total = inner.total.map(|t| t + len);
                    Before::Kept { blob, sha256: before_sha, len }
                } else {
                    Before::Dropped {
                        sha256: before_sha,
                        len,
                        reason: format!("its before-image ({len} bytes) is larger than undo.max_bytes"),
                    }
                }
            }
        };
        let current = inner.current.as_mut().ok_or_else(|| std::io::Error::other("no turn"))?;
        current.manifest.files.push(Entry {
            path: path.to_path_buf(),
            before,
            after_sha256: after_sha,
            interleaved: false,
        });
        save_manifest(&dir, &current.manifest)
    }

    /// Frees room for `len` more bytes by dropping the oldest other turns' copies; false when
    /// even that is not enough.
    fn make_room(&self, inner: &mut Inner, len: u64) -> std::io::Result<bool> {
        if len > self.max_bytes {
            return Ok(false);
        }
        let total = match inner.total {
            Some(t) => t,
            None => {
                let t = self.kept_bytes();
                inner.total = Some(t);
                t
            }
        };
        if total + len <= self.max_bytes {
            return Ok(true);
        }
        let current_dir = inner.current.as_ref().map(|c| c.dir.clone());
        let mut total = total;
        for (_, dir) in self.turn_dirs()? {
            if total + len <= self.max_bytes {
                break;
            }
            if Some(&dir) == current_dir.as_ref() {
                continue;
            }
            let Some(mut manifest) = load_manifest(&dir) else { continue };
            let mut changed = false;
            for entry in &mut manifest.files {
                if let Before::Kept { blob, sha256, len } = &entry.before {
                    let _ = std::fs::remove_file(dir.join(blob));
                    total = total.saturating_sub(*len);
                    entry.before = Before::Dropped {
                        sha256: sha256.clone(),
                        len: *len,
                        reason: "its before-image was dropped to keep the store under undo.max_bytes".into(),
                    };
                    changed = true;
                }
            }
            if changed {
                save_manifest(&dir, &manifest)?;
            }
        }
        inner.total = Some(total);
        Ok(total + len <= self.max_bytes)
    }

    /// Bytes of every kept copy in the store.
    fn kept_bytes(&self) -> u64 {
        let Ok(dirs) = self.turn_dirs() else { return 0 };
        dirs.iter()
            .filter_map(|(_, dir)| load_manifest(dir))
            .flat_map(|m| m.files)
            .map(|e| match e.before {
                Before::Kept { len, .. } => len,
                _ => 0,
            })
            .sum()
    }

    /// The turn folders, by offset.
    fn turn_dirs(&self) -> std::io::Result<Vec<(u64, PathBuf)>> {
        let entries = match std::fs::read_dir(&self.root) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut dirs: Vec<(u64, PathBuf)> =
            entries.flatten().filter_map(|e| Some((e.file_name().to_str()?.parse::<u64>().ok()?, e.path()))).collect();
        dirs.sort();
        Ok(dirs)
    }

    /// What undoing every turn from byte `offset` on must do: each file's change over those
    /// turns (by path), and the state the first of them began with (`None`: none of them
    /// changed it).
    pub fn plan_from(&self, offset: u64) -> std::io::Result<UndoPlan> {
        let mut changes: BTreeMap<PathBuf, FileChange> = BTreeMap::new();
        let mut state = None;
        for (at, dir) in self.turn_dirs()? {
            if at < offset {
                continue;
            }
            let Some(manifest) = load_manifest(&dir) else {
                tracing::warn!("{}: no readable manifest; its files cannot be restored", dir.display());
                continue;
            };
            // The first turn with a folder from the cut on began with the state the cut turn
            // began with: the turns before it changed no state (or they would have a folder).
            if state.is_none() {
                state = manifest.state.clone();
            }
            for entry in manifest.files {
                match changes.get_mut(&entry.path) {
                    Some(change) => {
                        if change.expected_sha256 != entry.before.sha() || entry.interleaved {
                            change.interleaved = true;
                        }
                        change.expected_sha256 = entry.after_sha256;
                    }
                    None => {
                        // A kept copy is a plain file of the turn's own folder: a name that
                        // reaches elsewhere (a tampered manifest) has no copy.
                        let blob = match &entry.before {
                            Before::Kept { blob, .. } if plain_name(blob) => Some(dir.join(blob)),
                            _ => None,
                        };
                        changes.insert(
                            entry.path.clone(),
                            FileChange {
                                path: entry.path,
                                before: entry.before,
                                blob,
                                expected_sha256: entry.after_sha256,
                                interleaved: entry.interleaved,
                            },
                        );
                    }
                }
            }
        }
        Ok(UndoPlan { files: changes.into_values().collect(), state })
    }

    /// Files of the turns from byte `offset` on were put back without cutting those turns
    /// (Claude's `rewind_files`): `restored` holds each one's path and the hash it holds now. The
    /// last edit of each in those turns now counts as having left it so, so that a later undo or
    /// rewind finds it as kiwi left it.
    pub fn note_restored(&self, offset: u64, restored: &[(PathBuf, String)]) -> std::io::Result<()> {
        let mut inner = self.lock();
        let mut last: BTreeMap<&Path, PathBuf> = BTreeMap::new();
        for (at, dir) in self.turn_dirs()? {
            if at < offset {
                continue;
            }
            let Some(manifest) = load_manifest(&dir) else { continue };
            for (path, _) in restored {
                if manifest.files.iter().any(|e| e.path == *path) {
                    last.insert(path, dir.clone());
                }
            }
        }
        for (path, sha) in restored {
            let Some(dir) = last.get(path.as_path()) else { continue };
            let Some(mut manifest) = load_manifest(dir) else { continue };
            for entry in manifest.files.iter_mut().filter(|e| e.path == *path) {
                entry.after_sha256 = sha.clone();
            }
            save_manifest(dir, &manifest)?;
            if let Some(current) = inner.current.as_mut().filter(|c| c.dir == *dir) {
                current.manifest = manifest;
            }
        }
        Ok(())
    }

    /// Records that an undo to `offset`/`mark` begins (before any file is touched).
    pub fn begin_undo(&self, offset: u64, mark: ContextMark) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.root)?;
        let text = serde_json::to_vec(&PendingUndo { offset, mark }).map_err(std::io::Error::other)?;
        write_atomic(&self.root.join(PENDING_UNDO), &text, None)
    }

    /// The undo is complete: its intent is removed.
    pub fn end_undo(&self) -> std::io::Result<()> {
        match std::fs::remove_file(self.root.join(PENDING_UNDO)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// Removes the folders of every turn from byte `offset` on (they were undone).
    pub fn discard_from(&self, offset: u64) -> std::io::Result<()> {
        let mut inner = self.lock();
        if inner.current.as_ref().is_some_and(|c| c.manifest.wire_offset >= offset) {
            inner.current = None;
        }
        for (at, dir) in self.turn_dirs()? {
            if at >= offset {
                std::fs::remove_dir_all(&dir)?;
            }
        }
        inner.total = None;
        Ok(())
    }
}

/// Whether two states agree on everything an undo puts back: all but the title and the web
/// layer's members (`custom_title`, `title_generated`, `title_generate_attempts`, `archived`,
/// `archived_at`, `auto_archive_exempt`, `wire_mtime`), which an undo keeps as they are.
pub fn same_undoable_state(a: &SessionStateFile, b: &SessionStateFile) -> bool {
    let kept = |s: &SessionStateFile| SessionStateFile {
        custom_title: None,
        title_generated: false,
        title_generate_attempts: 0,
        archived: false,
        archived_at: None,
        auto_archive_exempt: false,
        wire_mtime: None,
        // Money spent stays spent: an undo never gives it back.
        cost: None,
        ..s.clone()
    };
    kept(a) == kept(b)
}

/// One file's change over the undone turns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileChange {
    pub path: PathBuf,
    /// Before the first undone edit.
    pub before: Before,
    /// The kept copy, when there is one.
    pub blob: Option<PathBuf>,
    /// What kiwi last wrote: the file must still hold it to be restored.
    pub expected_sha256: String,
    /// Someone else changed it between kiwi's edits.
    pub interleaved: bool,
}

/// What an undo restores.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UndoPlan {
    pub files: Vec<FileChange>,
    pub state: Option<SessionStateFile>,
}

/// How a file was put back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restored {
    /// Its earlier content is back.
    Content,
    /// It did not exist before: deleted.
    Deleted,
}

/// A file that already holds its before-image (absent for one kiwi created) counts as restored:
/// a repeated undo, after one interrupted between the files and the conversation, must not
/// report it as changed by someone else (issue 30 item 9).
pub fn already_restored(change: &FileChange, current: Option<&[u8]>) -> Option<Restored> {
    match (&change.before, current) {
        (Before::Absent, None) => Some(Restored::Deleted),
        (Before::Kept { sha256: sha, .. } | Before::Dropped { sha256: sha, .. }, Some(bytes))
            if sha256(bytes) == *sha =>
        {
            Some(Restored::Content)
        }
        _ => None,
    }
}

/// Why a file was left as it is (`Err` of the checks and restores).
pub fn check_current(change: &FileChange, current: Option<&[u8]>) -> Result<(), String> {
    if change.interleaved {
        return Err("it was changed by someone else between kiwi's edits; left as it is".into());
    }
    let now = current.map(sha256).unwrap_or_default();
    if now != change.expected_sha256 {
        return Err("it was changed after kiwi's last edit; left as it is".into());
    }
    if let Before::Dropped { reason, .. } = &change.before {
        return Err(format!("{reason}; left as it is"));
    }
    Ok(())
}

/// The kept copy of `change`, checked against its hash.
pub fn before_bytes(change: &FileChange) -> Result<Vec<u8>, String> {
    let (Some(blob), Before::Kept { sha256: sha, .. }) = (&change.blob, &change.before) else {
        return Err("no before-image was kept; left as it is".into());
    };
    let bytes = std::fs::read(blob).map_err(|e| format!("its before-image cannot be read ({e}); left as it is"))?;
    if sha256(&bytes) != *sha {
        return Err("its before-image is damaged; left as it is".into());
    }
    Ok(bytes)
}

/// Restores one file on disk: checks it still holds what kiwi last wrote, then puts the
/// before-image back atomically (owner and mode kept) or deletes a file kiwi created.
pub fn restore_local(change: &FileChange) -> Result<Restored, String> {
    let current = match std::fs::read(&change.path) {
        Ok(bytes) => Some(bytes),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(format!("it cannot be read ({e}); left as it is")),
    };
    if let Some(done) = already_restored(change, current.as_deref()) {
        return Ok(done);
    }
    check_current(change, current.as_deref())?;
    match &change.before {
        Before::Absent => match std::fs::remove_file(&change.path) {
            Ok(()) => Ok(Restored::Deleted),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Restored::Deleted),
            Err(e) => Err(format!("it cannot be deleted ({e})")),
        },
        Before::Kept { .. } => {
            let bytes = before_bytes(change)?;
            let like = std::fs::metadata(&change.path).ok();
            write_atomic(&change.path, &bytes, like.as_ref()).map_err(|e| format!("it cannot be written ({e})"))?;
            Ok(Restored::Content)
        }
        Before::Dropped { reason, .. } => Err(reason.clone()),
    }
}

/// At a session's start, before its context and record are read: an undo that was interrupted
/// (its intent still in `rewind/`) is finished — its files restored (those already holding
/// their before-image count as restored; only inside `roots`), the context and `wire.jsonl`
/// cut, the state put back, the undone turns' records removed. The line to log, or `None` when
/// nothing was pending.
pub fn finish_pending_undo(session_dir: &Path, roots: &[PathBuf]) -> Option<String> {
    let journal = EditJournal::new(session_dir, DEFAULT_MAX_BYTES);
    let text = std::fs::read(journal.root.join(PENDING_UNDO)).ok()?;
    let Ok(pending) = serde_json::from_slice::<PendingUndo>(&text) else {
        let _ = journal.end_undo();
        return Some("an interrupted undo left an unreadable record; it was dropped".into());
    };
    let outcome = (|| -> std::io::Result<(usize, Vec<String>)> {
        let plan = journal.plan_from(pending.offset)?;
        let (mut restored, mut left) = (0, Vec::new());
        for change in &plan.files {
            let done = if within_roots(&change.path, roots) {
                restore_local(change)
            } else {
                Err("it is outside the session's folders; left as it is".into())
            };
            match done {
                Ok(_) => restored += 1,
                Err(why) => left.push(format!("{} ({why})", change.path.display())),
            }
        }
        if mark_fits(session_dir, pending.mark) {
            cut_context(session_dir, pending.mark)?;
        }
        truncate_file(&session_dir.join("wire.jsonl"), pending.offset)?;
        if let Some(mut state) = plan.state {
            // The running cost stays what it is (an undo gives no money back).
            state.cost = super::state::load(session_dir).cost;
            super::state::save_keeping_web_members(session_dir, &mut state)?;
        }
        journal.discard_from(pending.offset)?;
        journal.end_undo()?;
        Ok((restored, left))
    })();
    Some(match outcome {
        Ok((restored, left)) if left.is_empty() => {
            format!("finished an interrupted undo: {restored} file(s) restored, the conversation cut")
        }
        Ok((restored, left)) => format!(
            "finished an interrupted undo: {restored} file(s) restored, the conversation cut; not restored: {}",
            left.join(", ")
        ),
        Err(e) => format!("an interrupted undo could not be finished ({e}); it is tried again at the next start"),
    })
}

/// Cuts the stored session in `session_dir` back to before its turn `index` (a top-level turn):
/// the context, `wire.jsonl`, the session state as that turn began and the undo records of the
/// turns cut. Files are left as they are: this is a resume at an earlier point of the
/// conversation (Claude's `--resume-session-at`), not an undo. The folder's lock is held
/// meanwhile, so a session another kiwi runs is refused. No turn `index`: nothing to cut.
pub fn cut_history(session_dir: &Path, index: u64) -> Result<(), RewindError> {
    use std::os::fd::AsRawFd;
    let folder = std::fs::File::open(session_dir).map_err(io)?;
    // SAFETY: flock on a file descriptor we own; no memory is touched.
    if unsafe { libc::flock(folder.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        return Err(RewindError::Io("the session is in use by another kiwi process".into()));
    }
    let starts = turn_starts(&session_dir.join("wire.jsonl"))?;
    let Some(start) = starts.iter().find(|s| s.index == index) else { return Ok(()) };
    let mark = start.mark.ok_or(RewindError::Unmarked { turn: index })?;
    if !mark_fits(session_dir, mark) {
        return Err(RewindError::MarkMismatch { turn: index });
    }
    let journal = EditJournal::new(session_dir, DEFAULT_MAX_BYTES);
    let plan = journal.plan_from(start.offset).map_err(io)?;
    cut_context(session_dir, mark).map_err(io)?;
    truncate_file(&session_dir.join("wire.jsonl"), start.offset).map_err(io)?;
    if let Some(mut state) = plan.state {
        super::state::save_keeping_web_members(session_dir, &mut state).map_err(io)?;
    }
    journal.discard_from(start.offset).map_err(io)?;
    Ok(())
}

/// A file name with no folder part (`<n>.bin`), not `.` or `..`.
fn plain_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

/// Whether an undo may touch `path`: an absolute path without `.`/`..` parts inside one of the
/// session's `roots` (the work dir and its additional dirs, as given and resolved). A manifest
/// is a file in the session folder; one edited by someone else must not make an undo write or
/// delete files elsewhere.
pub fn within_roots(path: &Path, roots: &[PathBuf]) -> bool {
    use std::path::Component;
    path.is_absolute()
        && path.components().all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
        && roots
            .iter()
            .any(|root| path.starts_with(root) || std::fs::canonicalize(root).is_ok_and(|real| path.starts_with(real)))
}

fn load_manifest(dir: &Path) -> Option<Manifest> {
    let text = std::fs::read(dir.join(MANIFEST)).ok()?;
    serde_json::from_slice(&text).ok()
}

fn save_manifest(dir: &Path, manifest: &Manifest) -> std::io::Result<()> {
    let text = serde_json::to_vec(manifest).map_err(std::io::Error::other)?;
    write_atomic(&dir.join(MANIFEST), &text, None)
}

/// Replaces `path` by `bytes` atomically (temp file in the same folder, fsync, rename); `like`:
/// the replaced file's metadata, whose mode is kept.
pub fn write_atomic(path: &Path, bytes: &[u8], like: Option<&std::fs::Metadata>) -> std::io::Result<()> {
    write_file(path, bytes, like, true)
}

/// [`write_atomic`], the fsync before the rename only when `durable`.
fn write_file(path: &Path, bytes: &[u8], like: Option<&std::fs::Metadata>, durable: bool) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path.parent().ok_or_else(|| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let name = path.file_name().ok_or_else(|| std::io::Error::from(std::io::ErrorKind::InvalidInput))?;
    let temp = dir.join(format!(".{}.undo-{}.tmp", name.to_string_lossy(), uuid::Uuid::new_v4().simple()));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new().write(true).create_new(true).open(&temp)?;
        file.write_all(bytes)?;
        if let Some(meta) = like {
            file.set_permissions(std::fs::Permissions::from_mode(meta.permissions().mode() & 0o7777))?;
        }
        if durable {
            file.sync_all()?;
        }
        std::fs::rename(&temp, path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

/// Where one turn starts in `wire.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnStart {
    /// The turn's number (every `TurnBegin` counts, as for `fork`).
    pub index: u64,
    /// Byte offset of its `TurnBegin` record.
    pub offset: u64,
    pub mark: Option<ContextMark>,
    /// Not inside another turn (a nested `/init` turn is not).
    pub top: bool,
}

/// The starts of every turn recorded in the `wire.jsonl` at `path` (none when it is missing).
pub fn turn_starts(path: &Path) -> Result<Vec<TurnStart>, RewindError> {
    #[derive(Deserialize)]
    struct Probe {
        message: Option<Kind>,
        kiwi_context: Option<ContextMark>,
    }
    #[derive(Deserialize)]
    struct Kind {
        #[serde(rename = "type")]
        kind: String,
    }
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(e)),
    };
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let mut starts = Vec::new();
    let (mut offset, mut depth) = (0u64, 0u64);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let n = reader.read_until(b'\n', &mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        let at = offset;
        offset += n as u64;
        let is_begin = buf.windows(11).any(|w| w == b"\"TurnBegin\"");
        let is_end = buf.windows(9).any(|w| w == b"\"TurnEnd\"");
        if !is_begin && !is_end {
            continue;
        }
        let Ok(probe) = serde_json::from_slice::<Probe>(&buf) else { continue };
        match probe.message.as_ref().map(|m| m.kind.as_str()) {
            Some("TurnBegin") => {
                starts.push(TurnStart {
                    index: starts.len() as u64,
                    offset: at,
                    mark: probe.kiwi_context,
                    top: depth == 0,
                });
                depth += 1;
            }
            Some("TurnEnd") => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(starts)
}

/// What an undo takes back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UndoTarget {
    /// The last `n` turns.
    Last(u64),
    /// Turn `k` (numbered as `fork` does) and every turn after it.
    From(u64),
}

/// The cut an undo makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// The number of the first turn undone.
    pub index: u64,
    /// Where its `TurnBegin` starts in `wire.jsonl`.
    pub offset: u64,
    /// The context position when it began.
    pub mark: ContextMark,
    /// How many (top-level) turns are undone.
    pub turns: u64,
}

/// The cut `target` means among `starts`; the turn starting at `own` (the running `/undo`) and
/// after it is neither counted nor a target, but is cut too.
pub fn resolve(starts: &[TurnStart], target: UndoTarget, own: Option<u64>) -> Result<Cut, RewindError> {
    let counted: Vec<&TurnStart> = starts.iter().filter(|s| own.is_none_or(|o| s.offset < o)).collect();
    let tops: Vec<&TurnStart> = counted.iter().copied().filter(|s| s.top).collect();
    if tops.is_empty() {
        return Err(RewindError::NothingToUndo);
    }
    let first = match target {
        UndoTarget::Last(0) => return Err(RewindError::Zero),
        UndoTarget::Last(n) => {
            let available = tops.len() as u64;
            if n > available {
                return Err(RewindError::TooMany { asked: n, available });
            }
            tops[(available - n) as usize]
        }
        UndoTarget::From(k) => {
            let Some(start) = counted.iter().find(|s| s.index == k) else {
                return Err(RewindError::OutOfRange { turn: k, max: counted.len() as i64 - 1 });
            };
            // A nested turn is undone with the turn around it.
            tops.iter().rev().find(|t| t.offset <= start.offset).copied().unwrap_or(start)
        }
    };
    let mark = first.mark.ok_or(RewindError::Unmarked { turn: first.index })?;
    let turns = tops.iter().filter(|t| t.offset >= first.offset).count() as u64;
    Ok(Cut { index: first.index, offset: first.offset, mark, turns })
}

/// The context file `mark` names and whether the mark fits it.
pub fn mark_fits(session_dir: &Path, mark: ContextMark) -> bool {
    let highest = highest_archive(session_dir);
    match mark.rotation.cmp(&highest) {
        std::cmp::Ordering::Equal => ends_a_line(&session_dir.join("context.jsonl"), mark.bytes),
        std::cmp::Ordering::Less => {
            ends_a_line(&session_dir.join(format!("context_{}.jsonl", mark.rotation + 1)), mark.bytes)
        }
        std::cmp::Ordering::Greater => false,
    }
}

/// Puts `context.jsonl` back where `mark` says the context stood: the live file is cut (nothing
/// written), or, when a rotation (`/clear`, compaction's, D-Mail's) came after, the archive the
/// mark names is cut and made the live file again and the later archives are removed. Returns
/// the bytes written.
pub fn cut_context(session_dir: &Path, mark: ContextMark) -> std::io::Result<u64> {
    let live = session_dir.join("context.jsonl");
    let highest = highest_archive(session_dir);
    if mark.rotation == highest {
        truncate_file(&live, mark.bytes)?;
        return Ok(0);
    }
    if mark.rotation > highest {
        return Err(std::io::Error::other("the context position names a file that does not exist"));
    }
    let archive = session_dir.join(format!("context_{}.jsonl", mark.rotation + 1));
    let mut prefix = Vec::with_capacity(mark.bytes as usize);
    std::fs::File::open(&archive)?.take(mark.bytes).read_to_end(&mut prefix)?;
    write_atomic(&live, &prefix, std::fs::metadata(&live).ok().as_ref())?;
    for n in mark.rotation + 1..=highest {
        let path = session_dir.join(format!("context_{n}.jsonl"));
        if let Err(e) = std::fs::remove_file(&path)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            return Err(e);
        }
    }
    Ok(prefix.len() as u64)
}

/// Cuts the file at `path` to its first `len` bytes, durably.
pub fn truncate_file(path: &Path, len: u64) -> std::io::Result<()> {
    let file = std::fs::OpenOptions::new().write(true).open(path)?;
    if file.metadata()?.len() > len {
        file.set_len(len)?;
        file.sync_all()?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_already_holding_its_before_image_counts_as_restored() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.txt");
        let blob = dir.path().join("0.bin");
        std::fs::write(&blob, "before").unwrap();
        let change = FileChange {
            path: file.clone(),
            before: Before::Kept { blob: "0.bin".into(), sha256: sha256(b"before"), len: 6 },
            blob: Some(blob),
            expected_sha256: sha256(b"after"),
            interleaved: false,
        };
        // An undo that put the file back and was killed before the conversation was cut: the
        // file holds its before-image, not what kiwi last wrote.
        std::fs::write(&file, "before").unwrap();
        assert_eq!(restore_local(&change), Ok(Restored::Content));
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "before");
        std::fs::write(&file, "someone else's").unwrap();
        assert!(restore_local(&change).unwrap_err().contains("changed after kiwi's last edit"));
        let created = FileChange { before: Before::Absent, blob: None, ..change };
        std::fs::remove_file(&file).unwrap();
        assert_eq!(restore_local(&created), Ok(Restored::Deleted));
    }

    #[test]
    fn an_interrupted_undo_is_finished_at_the_next_start() {
        let session = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let file = work.path().join("a.txt");
        std::fs::write(session.path().join("context.jsonl"), "{\"role\":\"user\"}\n{\"role\":\"assistant\"}\n")
            .unwrap();
        std::fs::write(session.path().join("wire.jsonl"), "{\"type\":\"metadata\"}\n{\"turn\":1}\n").unwrap();
        let journal = EditJournal::new(session.path(), DEFAULT_MAX_BYTES);
        let offset = "{\"type\":\"metadata\"}\n".len() as u64;
        journal.begin_turn(offset, None).unwrap();
        std::fs::write(&file, "kiwi's").unwrap();
        journal.record(&file, Some(b"before"), b"kiwi's");
        journal.end_turn(&SessionStateFile::default()).unwrap();
        let mark = ContextMark { rotation: 0, bytes: "{\"role\":\"user\"}\n".len() as u64 };
        // The undo recorded its intent, put the file back and was killed before the cut.
        journal.begin_undo(offset, mark).unwrap();
        std::fs::write(&file, "before").unwrap();
        assert_eq!(
            finish_pending_undo(session.path(), &[work.path().to_path_buf()]),
            Some("finished an interrupted undo: 1 file(s) restored, the conversation cut".to_string())
        );
        assert_eq!(std::fs::read_to_string(session.path().join("context.jsonl")).unwrap(), "{\"role\":\"user\"}\n");
        assert_eq!(std::fs::read_to_string(session.path().join("wire.jsonl")).unwrap(), "{\"type\":\"metadata\"}\n");
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "before");
        assert!(!session.path().join(REWIND_DIR).join(PENDING_UNDO).exists());
        assert_eq!(finish_pending_undo(session.path(), &[work.path().to_path_buf()]), None, "done once");
    }

    #[test]
    fn tampered_manifests_reach_nothing_outside() {
        let roots = [PathBuf::from("/w/project")];
        assert!(within_roots(Path::new("/w/project/src/a.rs"), &roots));
        for outside in ["/etc/passwd", "/w/project/../secret", "relative.txt", "/w/projectile/x"] {
            assert!(!within_roots(Path::new(outside), &roots), "{outside}");
        }
        let dir = tempfile::tempdir().unwrap();
        let journal = EditJournal::new(dir.path(), DEFAULT_MAX_BYTES);
        let turn = dir.path().join(REWIND_DIR).join(format!("{:020}", 0));
        std::fs::create_dir_all(&turn).unwrap();
        let manifest = Manifest {
            wire_offset: 0,
            state: None,
            files: vec![Entry {
                path: "/w/project/a".into(),
                before: Before::Kept { blob: "../../../../etc/hostname".into(), sha256: String::new(), len: 1 },
                after_sha256: String::new(),
                interleaved: false,
            }],
        };
        save_manifest(&turn, &manifest).unwrap();
        let plan = journal.plan_from(0).unwrap();
        assert_eq!(plan.files[0].blob, None, "the copy may only be a file of the turn's folder");
        assert!(before_bytes(&plan.files[0]).is_err());
    }

    fn read_manifest(dir: &Path) -> Manifest {
        load_manifest(dir).expect("a manifest")
    }

    #[test]
    fn images_are_kept_per_turn_and_merged_per_file() {
        let session = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let (a, b) = (work.path().join("a.txt"), work.path().join("b.txt"));
        let journal = EditJournal::new(session.path(), DEFAULT_MAX_BYTES);
        // Not in a turn: nothing is kept.
        journal.record(&a, None, b"x");
        assert!(!session.path().join(REWIND_DIR).exists());
        let state = SessionStateFile { plan_mode: true, ..Default::default() };
        journal.begin_turn(100, Some(state.clone())).unwrap();
        journal.record(&a, Some(b"one"), b"two");
        journal.record(&a, Some(b"two"), b"three");
        journal.record(&b, None, b"new");
        let dir = session.path().join(REWIND_DIR).join(format!("{:020}", 100));
        let m = read_manifest(&dir);
        assert_eq!(m.wire_offset, 100);
        assert_eq!(m.state, Some(state.clone()));
        assert_eq!(m.files.len(), 2);
        assert_eq!(m.files[0].before, Before::Kept { blob: "0.bin".into(), sha256: sha256(b"one"), len: 3 });
        assert_eq!(m.files[0].after_sha256, sha256(b"three"));
        assert!(!m.files[0].interleaved);
        assert_eq!(std::fs::read(dir.join("0.bin")).unwrap(), b"one");
        assert_eq!(m.files[1].before, Before::Absent);
        journal.begin_turn(200, None).unwrap();
        // Someone else wrote "four!" between kiwi's edits of the next turn.
        journal.record(&a, Some(b"three"), b"four");
        journal.record(&a, Some(b"four!"), b"five");
        let plan = journal.plan_from(200).unwrap();
        assert_eq!(plan.files.len(), 1);
        assert!(plan.files[0].interleaved);
        assert_eq!(plan.state, None);
        let plan = journal.plan_from(100).unwrap();
        assert_eq!(plan.state, Some(state.clone()));
        let a_change = plan.files.iter().find(|c| c.path == a).unwrap();
        assert_eq!(a_change.before.sha(), sha256(b"one"));
        assert_eq!(a_change.expected_sha256, sha256(b"five"));
        assert!(a_change.interleaved);
        let b_change = plan.files.iter().find(|c| c.path == b).unwrap();
        assert_eq!((b_change.before.clone(), b_change.interleaved), (Before::Absent, false));
        // A turn that changes neither a file nor the state leaves no folder; one that changes
        // the state keeps its copy.
        journal.begin_turn(300, Some(state.clone())).unwrap();
        journal
            .end_turn(&SessionStateFile { custom_title: Some("titles do not count".into()), ..state.clone() })
            .unwrap();
        assert!(!session.path().join(REWIND_DIR).join(format!("{:020}", 300)).exists());
        journal.end_turn(&SessionStateFile { plan_mode: false, ..state.clone() }).unwrap();
        assert_eq!(
            read_manifest(&session.path().join(REWIND_DIR).join(format!("{:020}", 300))).state,
            Some(state.clone())
        );
        // Discarding from 200 keeps 100, and ends the running turn.
        journal.discard_from(200).unwrap();
        journal.record(&b, Some(b"new"), b"ignored");
        assert_eq!(journal.turn_dirs().unwrap().len(), 1);
        assert_eq!(journal.plan_from(100).unwrap().files.len(), 2);
    }

    #[test]
    fn the_store_stays_under_its_bound_oldest_first() {
        let session = tempfile::tempdir().unwrap();
        let journal = EditJournal::new(session.path(), 10);
        let f = |n: &str| PathBuf::from(format!("/w/{n}"));
        journal.begin_turn(0, None).unwrap();
        journal.record(&f("a"), Some(b"123456"), b"x");
        journal.begin_turn(10, None).unwrap();
        journal.record(&f("b"), Some(b"1234"), b"x");
        // Too big for the bound on its own: not kept.
        journal.record(&f("big"), Some(b"12345678901"), b"x");
        // Needs the oldest turn's copy to go.
        journal.begin_turn(20, None).unwrap();
        journal.record(&f("c"), Some(b"12345"), b"x");
        let plan = journal.plan_from(0).unwrap();
        let before = |n: &str| plan.files.iter().find(|c| c.path == f(n)).unwrap().before.clone();
        assert!(matches!(before("a"), Before::Dropped { reason, .. } if reason.contains("dropped to keep")));
        assert!(matches!(before("b"), Before::Kept { .. }));
        assert!(
            matches!(before("big"), Before::Dropped { reason, .. } if reason.contains("larger than undo.max_bytes"))
        );
        assert!(matches!(before("c"), Before::Kept { .. }));
        assert!(!session.path().join(REWIND_DIR).join(format!("{:020}", 0)).join("0.bin").exists());
        assert_eq!(journal.kept_bytes(), 9);
        // A restore of a dropped one says why.
        let change = plan.files.iter().find(|c| c.path == f("big")).unwrap();
        let e = check_current(change, Some(b"x")).unwrap_err();
        assert!(e.contains("larger than undo.max_bytes"), "{e}");
    }

    #[test]
    fn files_are_restored_only_when_kiwi_wrote_them_last() {
        let session = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let (edited, created, touched) =
            (work.path().join("edited.txt"), work.path().join("created.txt"), work.path().join("touched.txt"));
        let journal = EditJournal::new(session.path(), DEFAULT_MAX_BYTES);
        journal.begin_turn(0, None).unwrap();
        for (path, before, after) in
            [(&edited, Some(&b"old"[..]), &b"new"[..]), (&created, None, b"made"), (&touched, Some(b"t0"), b"t1")]
        {
            std::fs::write(path, after).unwrap();
            journal.record(path, before, after);
        }
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&edited, std::fs::Permissions::from_mode(0o640)).unwrap();
        }
        std::fs::write(&touched, "the user's").unwrap();
        let plan = journal.plan_from(0).unwrap();
        let by = |p: &Path| plan.files.iter().find(|c| c.path == p).unwrap();
        assert_eq!(restore_local(by(&edited)), Ok(Restored::Content));
        assert_eq!(std::fs::read(&edited).unwrap(), b"old");
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(std::fs::metadata(&edited).unwrap().permissions().mode() & 0o777, 0o640);
        }
        assert_eq!(restore_local(by(&created)), Ok(Restored::Deleted));
        assert!(!created.exists());
        let e = restore_local(by(&touched)).unwrap_err();
        assert!(e.contains("changed after kiwi's last edit"), "{e}");
        assert_eq!(std::fs::read(&touched).unwrap(), b"the user's");
        // A damaged copy is not written back.
        std::fs::write(&edited, "new").unwrap();
        let blob = by(&edited).blob.clone().unwrap();
        std::fs::write(&blob, "tampered").unwrap();
        assert!(restore_local(by(&edited)).unwrap_err().contains("damaged"));
        assert_eq!(std::fs::read(&edited).unwrap(), b"new");
        // No temp files are left next to restored files.
        let names: Vec<String> =
            std::fs::read_dir(work.path()).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    }

    fn record(kind: &str, mark: Option<(u64, u64)>) -> String {
        let mark =
            mark.map(|(r, b)| format!(", \"kiwi_context\": {{\"rotation\": {r}, \"bytes\": {b}}}")).unwrap_or_default();
        format!("{{\"timestamp\": 1.0, \"message\": {{\"type\": \"{kind}\", \"payload\": {{}}}}{mark}}}\n")
    }

    #[test]
    fn targets_resolve_to_cuts() {
        let dir = tempfile::tempdir().unwrap();
        let wire = dir.path().join("wire.jsonl");
        assert_eq!(turn_starts(&wire).unwrap(), Vec::new());
        let mut text = "{\"type\": \"metadata\", \"protocol_version\": \"1.10\"}\n".to_string();
        let mut offsets = Vec::new();
        // Turn 0 (unmarked), turn 1, turn 2 = /init with nested turn 3, turn 4.
        for (kind, mark) in [
            ("TurnBegin", None),
            ("TurnEnd", None),
            ("TurnBegin", Some((0, 10))),
            ("ContentPart", None),
            ("TurnEnd", None),
            ("TurnBegin", Some((0, 20))),
            ("TurnBegin", None),
            ("TurnEnd", None),
            ("TurnEnd", None),
            ("TurnBegin", Some((1, 0))),
            ("TurnEnd", None),
        ] {
            if kind == "TurnBegin" {
                offsets.push(text.len() as u64);
            }
            text.push_str(&record(kind, mark));
        }
        std::fs::write(&wire, &text).unwrap();
        let starts = turn_starts(&wire).unwrap();
        assert_eq!(starts.iter().map(|s| s.offset).collect::<Vec<_>>(), offsets);
        assert_eq!(starts.iter().map(|s| s.top).collect::<Vec<_>>(), [true, true, true, false, true]);
        let cut = |t, own| resolve(&starts, t, own);
        assert_eq!(
            cut(UndoTarget::Last(1), None),
            Ok(Cut { index: 4, offset: offsets[4], mark: ContextMark { rotation: 1, bytes: 0 }, turns: 1 })
        );
        // The running /undo (turn 4 here) is not counted.
        assert_eq!(cut(UndoTarget::Last(1), Some(offsets[4])).map(|c| (c.index, c.turns)), Ok((2, 1)));
        assert_eq!(cut(UndoTarget::Last(3), None).map(|c| (c.index, c.turns)), Ok((1, 3)));
        assert_eq!(cut(UndoTarget::Last(4), None), Err(RewindError::Unmarked { turn: 0 }));
        assert_eq!(cut(UndoTarget::Last(5), None), Err(RewindError::TooMany { asked: 5, available: 4 }));
        assert_eq!(cut(UndoTarget::Last(0), None), Err(RewindError::Zero));
        // A nested turn goes with the one around it.
        assert_eq!(cut(UndoTarget::From(3), None).map(|c| (c.index, c.turns)), Ok((2, 2)));
        assert_eq!(cut(UndoTarget::From(1), None).map(|c| (c.index, c.turns)), Ok((1, 3)));
        let e = cut(UndoTarget::From(5), None).unwrap_err();
        assert_eq!(e.to_string(), "turn_index 5 out of range (max turn: 4)");
        assert_eq!(
            cut(UndoTarget::From(4), Some(offsets[4])).unwrap_err().to_string(),
            "turn_index 4 out of range (max turn: 3)"
        );
        assert_eq!(resolve(&[], UndoTarget::Last(1), None), Err(RewindError::NothingToUndo));
        assert_eq!(RewindError::NothingToUndo.to_string(), "Nothing to undo: the session has no turns");
    }

    #[test]
    fn the_context_is_cut_in_place_or_from_an_archive() {
        let dir = tempfile::tempdir().unwrap();
        let live = dir.path().join("context.jsonl");
        std::fs::write(&live, "a\nb\nc\n").unwrap();
        assert!(mark_fits(dir.path(), ContextMark { rotation: 0, bytes: 4 }));
        assert!(!mark_fits(dir.path(), ContextMark { rotation: 0, bytes: 3 }));
        assert!(!mark_fits(dir.path(), ContextMark { rotation: 0, bytes: 99 }));
        assert!(!mark_fits(dir.path(), ContextMark { rotation: 1, bytes: 0 }));
        assert_eq!(cut_context(dir.path(), ContextMark { rotation: 0, bytes: 4 }).unwrap(), 0);
        assert_eq!(std::fs::read_to_string(&live).unwrap(), "a\nb\n");
        // Two rotations later, the cut names the first archive.
        std::fs::rename(&live, dir.path().join("context_1.jsonl")).unwrap();
        std::fs::write(dir.path().join("context_2.jsonl"), "x\n").unwrap();
        std::fs::write(&live, "y\n").unwrap();
        let mark = ContextMark { rotation: 0, bytes: 2 };
        assert!(mark_fits(dir.path(), mark));
        assert_eq!(cut_context(dir.path(), mark).unwrap(), 2);
        assert_eq!(std::fs::read_to_string(&live).unwrap(), "a\n");
        assert!(!dir.path().join("context_1.jsonl").exists() && !dir.path().join("context_2.jsonl").exists());
        assert_eq!(highest_archive(dir.path()), 0);
    }
}
