//! A session as a ZIP archive (`kiwi export`, and the web API's download; `docs/subcommands.md`
//! §export): every file at the top of the session folder under its own name, plus kiwi's recent
//! log files under `logs/`.
//!
//! Invariants: the archive is written to a temporary file beside the target and renamed into
//! place, so a failed or interrupted export never leaves half an archive under the target name;
//! files are streamed into it (memory stays flat for any session size); sub-folders of the session
//! (`uploads/`, subagents) are not included, as in the reference; links are never followed: a
//! symbolic link (or anything else that is not a regular file) in the session folder or among
//! the logs is left out, and every file is opened without following a link, so a link planted
//! there cannot export its target (issue 30 item 12).

use std::io::{BufRead, Seek, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Logs modified this close to the export, or to the session's active period, are included.
pub const LOG_WINDOW: Duration = Duration::from_secs(2 * 24 * 60 * 60);

/// What went into an archive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    /// Archive names of the session files, in order.
    pub files: Vec<String>,
    /// Archive names of the log files.
    pub logs: Vec<String>,
}

/// The regular files at the top of a session folder (links left out), sorted by name.
pub fn session_files(session_dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(session_dir)?
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.path())
        .collect();
    files.sort();
    Ok(files)
}

/// Opens `path` for reading only if it is a regular file and not a link (a link swapped in
/// after the listing fails here; a FIFO does not block the open).
fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK).open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::other(format!("{} is not a regular file", path.display())));
    }
    Ok(file)
}

/// First and last record timestamps of the session's `wire.jsonl`.
fn time_range(session_dir: &Path) -> Option<(f64, f64)> {
    let file = std::fs::File::open(session_dir.join("wire.jsonl")).ok()?;
    let mut range: Option<(f64, f64)> = None;
    for line in std::io::BufReader::new(file).lines() {
        let Ok(line) = line else { continue };
        let Ok(value) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
        if value.get("message").is_none() {
            continue;
        }
        let Some(ts) = value.get("timestamp").and_then(serde_json::Value::as_f64) else { continue };
        range = Some(match range {
            None => (ts, ts),
            Some((first, _)) => (first, ts),
        });
    }
    range
}

/// kiwi's log files (`<share>/logs/kiwi*.log*`) modified within [`LOG_WINDOW`] of `now` or of
/// the session's active period, oldest first.
pub fn recent_logs(share: &Path, session_dir: &Path, now: SystemTime) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(share.join("logs")) else { return Vec::new() };
    let now_s = super::catalog::epoch_seconds(now);
    let window = LOG_WINDOW.as_secs_f64();
    let active = time_range(session_dir).map(|(first, last)| (first - window, last + window));
    let mut found: Vec<(f64, PathBuf)> = entries
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            name.starts_with("kiwi") && name.contains(".log") && e.file_type().is_ok_and(|t| t.is_file())
        })
        .filter_map(|e| {
            let mtime = super::catalog::epoch_seconds(e.metadata().ok()?.modified().ok()?);
            let near_now = mtime >= now_s - window;
            let near_session = active.is_some_and(|(lo, hi)| mtime >= lo && mtime <= hi);
            (near_now || near_session).then(|| (mtime, e.path()))
        })
        .collect();
    found.sort_by(|a, b| a.0.total_cmp(&b.0));
    found.into_iter().map(|(_, p)| p).collect()
}

/// Writes the archive of `session_dir` into `out`.
pub fn write_zip<W: Write + Seek>(session_dir: &Path, logs: &[PathBuf], out: W) -> std::io::Result<Exported> {
    let mut zip = zip::ZipWriter::new(out);
    let options =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated).large_file(true);
    let mut exported = Exported { files: Vec::new(), logs: Vec::new() };
    for path in session_files(session_dir)? {
        let name = path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        // Swapped for a link or something else since the listing: left out.
        let Ok(mut file) = open_regular(&path) else { continue };
        zip.start_file(name.as_str(), options).map_err(std::io::Error::other)?;
        std::io::copy(&mut file, &mut zip)?;
        exported.files.push(name);
    }
    for path in logs {
        // A log that vanished or cannot be read is left out (the archive is still useful).
        let Ok(mut file) = open_regular(path) else { continue };
        let name = format!("logs/{}", path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default());
        zip.start_file(name.as_str(), options).map_err(std::io::Error::other)?;
        std::io::copy(&mut file, &mut zip)?;
        exported.logs.push(name);
    }
    zip.finish().map_err(std::io::Error::other)?;
    Ok(exported)
}

/// Writes the archive of `session_dir` to `target` (its folder created as needed) through a
/// temporary file renamed into place.
pub fn export_to(session_dir: &Path, logs: &[PathBuf], target: &Path) -> std::io::Result<Exported> {
    let parent = target.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent)?;
    let name = target.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let tmp = parent.join(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple()));
    let result = std::fs::File::create(&tmp).and_then(|file| {
        let mut out = std::io::BufWriter::new(file);
        let exported = write_zip(session_dir, logs, &mut out)?;
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        std::fs::rename(&tmp, target)?;
        Ok(exported)
    });
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn archive_holds_the_top_level_files_and_recent_logs() {
        let share = tempfile::tempdir().unwrap();
        let session = share.path().join("sessions/k/s");
        std::fs::create_dir_all(session.join("uploads")).unwrap();
        std::fs::write(session.join("context.jsonl"), "{\"role\":\"user\"}\n").unwrap();
        std::fs::write(session.join("wire.jsonl"), "{\"type\":\"metadata\"}\n{\"timestamp\":1.0,\"message\":{}}\n")
            .unwrap();
        std::fs::write(session.join("uploads/big.bin"), "not included").unwrap();
        std::fs::create_dir_all(share.path().join("logs")).unwrap();
        std::fs::write(share.path().join("logs/kiwi.log"), "log line\n").unwrap();
        std::fs::write(share.path().join("logs/other.txt"), "no").unwrap();
        let old = std::fs::File::create(share.path().join("logs/kiwi.old.log")).unwrap();
        old.set_modified(SystemTime::now() - Duration::from_secs(30 * 24 * 3600)).unwrap();
        let logs = recent_logs(share.path(), &session, SystemTime::now());
        assert_eq!(logs, [share.path().join("logs/kiwi.log")]);

        let target = share.path().join("out/dir/session.zip");
        let exported = export_to(&session, &logs, &target).unwrap();
        assert_eq!(exported.files, ["context.jsonl", "wire.jsonl"]);
        assert_eq!(exported.logs, ["logs/kiwi.log"]);
        let mut zip = zip::ZipArchive::new(std::fs::File::open(&target).unwrap()).unwrap();
        let mut names: Vec<String> = zip.file_names().map(|n| n.unwrap().to_string()).collect();
        names.sort();
        assert_eq!(names, ["context.jsonl", "logs/kiwi.log", "wire.jsonl"]);
        let mut text = String::new();
        zip.by_name("context.jsonl").unwrap().read_to_string(&mut text).unwrap();
        assert_eq!(text, "{\"role\":\"user\"}\n");
        let leftovers: Vec<_> = std::fs::read_dir(target.parent().unwrap()).unwrap().flatten().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file is left behind");
    }

    #[test]
    fn links_are_never_followed() {
        let share = tempfile::tempdir().unwrap();
        let outside = share.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("id_rsa"), "PRIVATE KEY").unwrap();
        let session = share.path().join("sessions/k/s");
        std::fs::create_dir_all(&session).unwrap();
        std::fs::write(session.join("context.jsonl"), "{}\n").unwrap();
        std::os::unix::fs::symlink(outside.join("id_rsa"), session.join("notes.md")).unwrap();
        std::fs::create_dir_all(share.path().join("logs")).unwrap();
        std::os::unix::fs::symlink(outside.join("id_rsa"), share.path().join("logs/kiwi.log")).unwrap();
        let logs = recent_logs(share.path(), &session, SystemTime::now());
        assert!(logs.is_empty(), "{logs:?}");
        let target = share.path().join("s.zip");
        let linked = [share.path().join("logs/kiwi.log")];
        let exported = export_to(&session, &linked, &target).unwrap();
        assert_eq!((exported.files, exported.logs), (vec!["context.jsonl".to_string()], vec![]));
        let zip = zip::ZipArchive::new(std::fs::File::open(&target).unwrap()).unwrap();
        let names: Vec<String> = zip.file_names().map(|n| n.unwrap().to_string()).collect();
        assert_eq!(names, ["context.jsonl"]);
        assert!(open_regular(&session.join("notes.md")).is_err());
    }

    #[test]
    fn a_failed_export_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("x.zip");
        assert!(export_to(&dir.path().join("missing"), &[], &target).is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
