//! Disk access for the editing tools (WriteFile, StrReplaceFile): where an edit really lands, a
//! bounded non-blocking read of the current file, and an atomic replace.
//!
//! Invariants:
//! - Nothing here blocks on a FIFO or a device: types are checked with `stat` (which never
//!   blocks) and files are opened `O_NONBLOCK | O_NOFOLLOW`, then checked again with `fstat`, so
//!   only a regular file is ever read, and never more than the caller's limit + 1 bytes.
//! - An edit lands on the resolved path (parent canonicalized, symlinks of the target followed),
//!   so the path shown for approval is the path written, and a link keeps pointing where it did.
//! - A replace writes a temp file next to the target, fsyncs it, gives it the target's owner and
//!   mode, and renames it over the target: a failure at any step leaves the target as it was
//!   and removes the temp file. Trade-offs of the rename: a hard-linked target is detached from
//!   its other names, and extended attributes/ACLs are not copied.
//! - These functions block; callers run them off the async thread.

use std::ffi::OsString;
use std::fs::{File, Metadata, OpenOptions};

use crate::tools::client_files::ClientFileAccess;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::tools::paths;

/// Symlink hops followed when resolving a target that does not exist yet (Linux's `MAXSYMLINKS`).
const MAX_HOPS: usize = 40;

/// Why a path cannot be edited.
#[derive(Debug)]
pub enum DiskError {
    /// Missing (or unreachable: ENOTDIR, ELOOP, NUL byte), in `Path::exists()`'s sense.
    Missing,
    /// The parent of a file to create is not an existing directory.
    ParentMissing,
    /// Exists but is not a regular file (directory, FIFO, device, socket).
    NotAFile,
    /// The file holds more than the limit; the size seen.
    TooLarge(u64),
    Io(std::io::Error),
}

impl From<std::io::Error> for DiskError {
    fn from(e: std::io::Error) -> Self {
        if paths::is_missing(&e) { DiskError::Missing } else { DiskError::Io(e) }
    }
}

/// A regular file as read: its bytes and the metadata its replacement inherits.
#[derive(Debug)]
pub struct Snapshot {
    pub bytes: Vec<u8>,
    pub meta: Metadata,
}

/// Where an edit of the existing file at `path` (absolute, normalized) lands: the canonical
/// path. Not regular files are refused here, before anything is opened.
pub fn resolve_existing(path: &Path) -> Result<PathBuf, DiskError> {
    // `stat` follows links (also /proc's magic ones, e.g. /dev/stdout) and never blocks.
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(DiskError::NotAFile);
    }
    Ok(std::fs::canonicalize(path)?)
}

/// Where a write to `path` (absolute, normalized) lands, whether or not the file exists: an
/// existing file resolves as in [`resolve_existing`]; otherwise the parent is canonicalized and
/// a dangling symlink is followed to the file it would create.
pub fn resolve_for_write(path: &Path) -> Result<PathBuf, DiskError> {
    match resolve_existing(path) {
        Err(DiskError::Missing) => {}
        other => return other,
    }
    let mut current = path.to_path_buf();
    for _ in 0..MAX_HOPS {
        let (Some(parent), Some(name)) = (current.parent(), current.file_name()) else {
            return Err(DiskError::NotAFile);
        };
        let parent = match std::fs::canonicalize(parent) {
            Ok(p) if p.is_dir() => p,
            Ok(_) => return Err(DiskError::ParentMissing),
            Err(e) if paths::is_missing(&e) => return Err(DiskError::ParentMissing),
            Err(e) => return Err(DiskError::Io(e)),
        };
        let candidate = parent.join(name);
        match std::fs::symlink_metadata(&candidate) {
            Ok(m) if m.file_type().is_symlink() => {
                // A relative link target is taken from the link's directory; `..` is left to the
                // next round's canonicalization, which knows about symlinked directories.
                current = parent.join(std::fs::read_link(&candidate)?);
            }
            Ok(m) if !m.is_file() => return Err(DiskError::NotAFile),
            _ => return Ok(candidate),
        }
    }
    Err(DiskError::Io(std::io::Error::from_raw_os_error(libc::ELOOP)))
}

/// Reads the regular file at `path` (already resolved) without following a link and without
/// blocking; `Ok(None)` when it does not exist. More than `limit` bytes is [`DiskError::TooLarge`].
pub fn read_regular(path: &Path, limit: u64) -> Result<Option<Snapshot>, DiskError> {
    let file = match open_nonblocking(path) {
        Ok(f) => f,
        Err(e) if paths::is_missing(&e) => return Ok(None),
        Err(e) => return Err(DiskError::Io(e)),
    };
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(DiskError::NotAFile);
    }
    if meta.len() > limit {
        return Err(DiskError::TooLarge(meta.len()));
    }
    // The file may grow between `fstat` and the read: never take more than limit + 1 bytes.
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(DiskError::TooLarge(bytes.len() as u64));
    }
    Ok(Some(Snapshot { bytes, meta }))
}

/// [`read_regular`], with the text from the client when it serves files (`docs/acp.md` §12.4): the
/// local file still decides existence, type and size, the client what it holds (unsaved edits).
pub fn read_through(path: &Path, limit: u64, client: Option<&ClientFileAccess>) -> Result<Option<Snapshot>, DiskError> {
    let snapshot = read_regular(path, limit)?;
    match (client.filter(|c| c.can_read()), snapshot) {
        (Some(client), Some(mut snapshot)) => {
            let text = client.read_text(path)?;
            if text.len() as u64 > limit {
                return Err(DiskError::TooLarge(text.len() as u64));
            }
            snapshot.bytes = text.into_bytes();
            Ok(Some(snapshot))
        }
        (_, snapshot) => Ok(snapshot),
    }
}

/// [`write_atomic`], or a write into the client's buffer when it takes writes (text only).
pub fn write_through(
    path: &Path,
    bytes: &[u8],
    like: Option<&Metadata>,
    client: Option<&ClientFileAccess>,
) -> std::io::Result<()> {
    match client.filter(|c| c.can_write()) {
        Some(client) => {
            let text = String::from_utf8(bytes.to_vec()).map_err(|_| std::io::Error::from(ErrorKind::InvalidData))?;
            client.write_text(path, text)
        }
        None => write_atomic(path, bytes, like),
    }
}

/// Opens `path` read-only with `O_NONBLOCK` (a FIFO or device does not block the open) and
/// `O_NOFOLLOW` (a link swapped in after resolution is refused).
pub fn open_nonblocking(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_CLOEXEC).open(path)
}

/// Whether this process may write the existing file at `path` (a read-only file stays
/// read-only, although the rename would only need the directory to be writable).
pub fn check_writable(path: &Path) -> std::io::Result<()> {
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from(ErrorKind::InvalidInput))?;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

/// Replaces the file at `path` (resolved) by `bytes` atomically; `like` is the metadata of the
/// file being replaced (owner and mode are kept), `None` for a new file (default mode, umask).
pub fn write_atomic(path: &Path, bytes: &[u8], like: Option<&Metadata>) -> std::io::Result<()> {
    let dir = path.parent().ok_or_else(|| std::io::Error::from(ErrorKind::InvalidInput))?;
    let name = path.file_name().ok_or_else(|| std::io::Error::from(ErrorKind::InvalidInput))?;
    let (temp_path, mut temp) = create_temp(dir, name.as_bytes())?;
    let written = (|| {
        temp.write_all(bytes)?;
        if let Some(meta) = like {
            // Owner first: chown may clear set-id bits that the chmod below restores. Changing
            // the owner needs privileges; an unprivileged process keeps its own (as `cp` does).
            if meta.uid() != euid() || meta.gid() != egid() {
                let _ = std::os::unix::fs::fchown(&temp, Some(meta.uid()), Some(meta.gid()));
            }
            temp.set_permissions(std::fs::Permissions::from_mode(meta.mode() & 0o7777))?;
        }
        temp.sync_all()?;
        std::fs::rename(&temp_path, path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp_path);
        return Err(e);
    }
    // Make the rename itself durable; the data is already safe, so a failure here is only logged.
    if let Err(e) = File::open(dir).and_then(|d| d.sync_all()) {
        tracing::warn!("fsync of {} after an edit failed: {e}", dir.display());
    }
    Ok(())
}

/// A new, exclusive temp file in `dir`: `.<name>.kiwi-<random>.tmp`, the name cut so the whole
/// stays under `NAME_MAX`.
fn create_temp(dir: &Path, name: &[u8]) -> std::io::Result<(PathBuf, File)> {
    let stem = &name[..name.len().min(200)];
    let mut last = std::io::Error::from(ErrorKind::AlreadyExists);
    for _ in 0..8 {
        let mut temp_name = b".".to_vec();
        temp_name.extend_from_slice(stem);
        temp_name.extend_from_slice(format!(".kiwi-{:016x}.tmp", rand::random::<u64>()).as_bytes());
        let temp_path = dir.join(OsString::from_vec(temp_name));
        match OpenOptions::new().write(true).create_new(true).custom_flags(libc::O_CLOEXEC).open(&temp_path) {
            Ok(f) => return Ok((temp_path, f)),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => last = e,
            Err(e) => return Err(e),
        }
    }
    Err(last)
}

fn euid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

fn egid() -> u32 {
    // SAFETY: getegid has no preconditions and cannot fail.
    unsafe { libc::getegid() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_keeps_mode_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f.sh");
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o750)).unwrap();
        let meta = std::fs::metadata(&p).unwrap();
        write_atomic(&p, b"new", Some(&meta)).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
        assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o7777, 0o750);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn long_names_still_get_a_temp_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("n".repeat(250));
        write_atomic(&p, b"x", None).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"x");
    }

    #[test]
    fn reads_are_bounded_and_only_of_regular_files() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, "12345").unwrap();
        assert!(matches!(read_regular(&p, 4), Err(DiskError::TooLarge(5))));
        assert_eq!(read_regular(&p, 5).unwrap().unwrap().bytes, b"12345");
        assert!(read_regular(&dir.path().join("none"), 5).unwrap().is_none());
        assert!(matches!(read_regular(dir.path(), 5), Err(DiskError::NotAFile)));
        assert!(matches!(read_regular(Path::new("/dev/zero"), 5), Err(DiskError::NotAFile)));
        assert!(matches!(resolve_existing(Path::new("/dev/zero")), Err(DiskError::NotAFile)));
    }

    #[test]
    fn dangling_links_resolve_to_the_file_they_would_create() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::create_dir(base.join("real")).unwrap();
        std::os::unix::fs::symlink("real", base.join("dirlink")).unwrap();
        std::os::unix::fs::symlink("dirlink/../real/t.txt", base.join("dangling")).unwrap();
        assert_eq!(resolve_for_write(&base.join("dangling")).unwrap(), base.join("real/t.txt"));
        assert_eq!(resolve_for_write(&base.join("dirlink/n.txt")).unwrap(), base.join("real/n.txt"));
        std::os::unix::fs::symlink("loop", base.join("loop")).unwrap();
        assert!(matches!(resolve_for_write(&base.join("loop")), Err(DiskError::Io(_))));
        assert!(matches!(resolve_for_write(&base.join("none/x")), Err(DiskError::ParentMissing)));
    }
}
