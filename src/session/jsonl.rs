//! Append-only JSONL files with one writer each.
//!
//! Invariants: every record is one `write_all` of a complete line; a file whose last line was
//! torn (a crash mid-write) gets a newline before the next record, so records never glue onto
//! the fragment; readers skip a torn or unparsable line with a log line instead of failing.
//!
//! A write that fails midway (disk full, file size limit) does not poison the file (`docs/sessions.md`
//! §7.2): the appender remembers the offset after the last complete record and truncates back
//! to it, with a WARN naming the file and the cause, so the next record starts clean and a resume
//! loses at most the failed record. If even the truncation fails, it is retried before the next
//! record, and as a last resort the fragment is closed with a newline (which readers skip).

use std::fs::{File, OpenOptions};
use std::io::{BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

/// Where an appender writes: a file opened for appending (or a test double).
pub trait AppendTarget {
    /// Appends all of `bytes` at the end; on failure part of them may have been written.
    fn append_all(&mut self, bytes: &[u8]) -> std::io::Result<()>;
    /// Cuts the file back to `len` bytes.
    fn truncate(&mut self, len: u64) -> std::io::Result<()>;
    /// The current length.
    fn current_len(&mut self) -> std::io::Result<u64>;
}

impl AppendTarget for File {
    fn append_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.write_all(bytes)
    }

    fn truncate(&mut self, len: u64) -> std::io::Result<()> {
        // The file is in append mode: the next write goes to the new end whatever the offset.
        self.set_len(len)
    }

    fn current_len(&mut self) -> std::io::Result<u64> {
        Ok(self.metadata()?.len())
    }
}

pub struct JsonlAppender<T: AppendTarget = File> {
    path: PathBuf,
    target: T,
    /// Length of the file up to the end of the last complete record.
    good_len: u64,
    /// A failed write may have left a fragment after `good_len` that is not cut yet.
    torn: bool,
}

impl JsonlAppender<File> {
    /// Opens (creating if needed) for appending; repairs a missing final newline.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let mut file = OpenOptions::new().create(true).read(true).append(true).open(path)?;
        let mut len = file.metadata()?.len();
        if len > 0 {
            file.seek(SeekFrom::Start(len - 1))?;
            let mut last = [0u8; 1];
            file.read_exact(&mut last)?;
            if last[0] != b'\n' {
                tracing::warn!("{}: last line was torn; starting the next record on a fresh line", path.display());
                file.write_all(b"\n")?;
                len += 1;
            }
        }
        Ok(Self::with_target(path, file, len))
    }
}

impl<T: AppendTarget> JsonlAppender<T> {
    /// An appender over `target`, whose first `len` bytes are complete records.
    pub fn with_target(path: &Path, target: T, len: u64) -> Self {
        Self { path: path.to_path_buf(), target, good_len: len, torn: false }
    }

    /// Appends one complete line (which must end with `\n`). On failure the file is cut back to
    /// its last complete record (see the module doc) and the error is returned; it has already
    /// been logged.
    pub fn append(&mut self, line: &[u8]) -> std::io::Result<()> {
        if self.torn {
            self.repair()?;
        }
        match self.target.append_all(line) {
            Ok(()) => {
                self.good_len += line.len() as u64;
                Ok(())
            }
            Err(e) => {
                self.torn = true;
                match self.cut_back() {
                    Ok(()) => tracing::warn!(
                        "{}: writing a record failed ({e}); cut back to the last complete record ({} bytes)",
                        self.path.display(),
                        self.good_len
                    ),
                    Err(cut) => tracing::warn!(
                        "{}: writing a record failed ({e}) and cutting back failed too ({cut}); retrying before the next record",
                        self.path.display()
                    ),
                }
                Err(e)
            }
        }
    }

    fn cut_back(&mut self) -> std::io::Result<()> {
        self.target.truncate(self.good_len)?;
        self.torn = false;
        Ok(())
    }

    /// Before the next record after a failed write: cut back, or at least close the fragment
    /// with a newline so the next record is a line of its own.
    fn repair(&mut self) -> std::io::Result<()> {
        let Err(cut) = self.cut_back() else { return Ok(()) };
        let len = self.target.current_len()?;
        if len > self.good_len {
            self.target.append_all(b"\n").map_err(|e| {
                tracing::warn!("{}: cannot close a torn record ({cut}; {e})", self.path.display());
                e
            })?;
            self.good_len = len + 1;
        }
        self.torn = false;
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.good_len == 0
    }

    /// The length of the complete records written so far.
    pub fn len(&self) -> u64 {
        self.good_len
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Reads the lines of a JSONL file, skipping blank ones. A missing file has no lines.
pub fn read_lines(path: &Path) -> std::io::Result<Vec<String>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(String::from_utf8_lossy(&bytes)
            .split('\n')
            .map(|l| l.trim_end_matches('\r'))
            .filter(|l| !l.trim().is_empty())
            .map(str::to_string)
            .collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Whether some record of the file at `path` matches, read as a stream that stops at the first
/// match: memory stays flat whatever the file's size, as long as `T` names only small fields (the
/// fields it does not name are skipped byte by byte, never kept). A missing file has no records;
/// whitespace between records is skipped; a record that does not parse (a torn line, junk)
/// counts as a match, so a caller deciding whether a file holds anything errs on the side of
/// keeping it.
pub fn any_record<T: DeserializeOwned>(path: &Path, matches: impl Fn(&T) -> bool) -> std::io::Result<bool> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let records = serde_json::Deserializer::from_reader(BufReader::with_capacity(64 * 1024, file)).into_iter::<T>();
    for record in records {
        match record {
            Ok(record) if matches(&record) => return Ok(true),
            Ok(_) => {}
            Err(e) if e.is_io() => return Err(e.into()),
            Err(e) => {
                tracing::debug!("{}: an unreadable record ({e}) counts as content", path.display());
                return Ok(true);
            }
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize)]
    struct Kind {
        kind: Option<String>,
    }

    #[test]
    fn any_record_streams_and_counts_junk_as_a_match() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.jsonl");
        let is_b = |r: &Kind| r.kind.as_deref() == Some("b");
        assert!(!any_record(&path, is_b).unwrap(), "a missing file has no records");
        std::fs::write(&path, "{\"kind\":\"a\",\"big\":[1,{\"x\":\"y\"}]}\r\n\n  {\"kind\":\"a\"}\n").unwrap();
        assert!(!any_record(&path, is_b).unwrap());
        std::fs::write(&path, "{\"kind\":\"a\"}\n{\"kind\":\"b\"}\nnot json").unwrap();
        assert!(any_record(&path, is_b).unwrap());
        for junk in ["{\"kind\":\"a\"}\n{\"kind\":", "{\"kind\":\"a\"}\n\0\0", "[1]", "{\"kind\":3}"] {
            std::fs::write(&path, junk).unwrap();
            assert!(any_record(&path, is_b).unwrap(), "{junk:?}");
        }
    }

    #[test]
    fn torn_tail_gets_a_fresh_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.jsonl");
        std::fs::write(&path, "{\"a\":1}\n{\"b\":").unwrap();
        let mut w = JsonlAppender::open(&path).unwrap();
        w.append(b"{\"c\":3}\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":1}\n{\"b\":\n{\"c\":3}\n");
        assert_eq!(read_lines(&path).unwrap().len(), 3);
    }

    /// A real file whose writes fail once `budget` bytes have been written (a disk that fills
    /// up): the failing write still lands its first bytes, as a short write would.
    struct FillingDisk {
        file: File,
        budget: usize,
        fail_truncate: bool,
    }

    impl AppendTarget for FillingDisk {
        fn append_all(&mut self, bytes: &[u8]) -> std::io::Result<()> {
            let n = bytes.len().min(self.budget);
            self.file.write_all(&bytes[..n])?;
            self.budget -= n;
            if n < bytes.len() {
                return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
            }
            Ok(())
        }

        fn truncate(&mut self, len: u64) -> std::io::Result<()> {
            if self.fail_truncate {
                return Err(std::io::Error::from_raw_os_error(libc::EIO));
            }
            self.file.set_len(len)
        }

        fn current_len(&mut self) -> std::io::Result<u64> {
            Ok(self.file.metadata()?.len())
        }
    }

    fn filling(path: &Path, budget: usize, fail_truncate: bool) -> JsonlAppender<FillingDisk> {
        let file = OpenOptions::new().create(true).append(true).open(path).unwrap();
        let len = file.metadata().unwrap().len();
        JsonlAppender::with_target(path, FillingDisk { file, budget, fail_truncate }, len)
    }

    #[test]
    fn a_write_that_fails_midway_is_cut_back_and_the_next_record_is_clean() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.jsonl");
        std::fs::write(&path, "{\"a\":1}\n").unwrap();
        let mut w = filling(&path, 12, false);
        w.append(b"{\"b\":2}\n").unwrap();
        let e = w.append(b"{\"c\":\"a long record\"}\n").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        // Nothing of the failed record is left.
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":1}\n{\"b\":2}\n");
        // Space is freed: the next record starts clean.
        w.target.budget = 100;
        w.append(b"{\"d\":4}\n").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":1}\n{\"b\":2}\n{\"d\":4}\n");
    }

    #[test]
    fn when_cutting_back_fails_the_fragment_is_closed_before_the_next_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.jsonl");
        let mut w = filling(&path, 10, true);
        w.append(b"{\"b\":2}\n").unwrap();
        assert!(w.append(b"{\"c\":3333}\n").is_err());
        w.target.budget = 100;
        w.append(b"{\"d\":4}\n").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, "{\"b\":2}\n{\"\n{\"d\":4}\n");
        // Readers skip the fragment; every other record is whole.
        let lines = read_lines(&path).unwrap();
        assert_eq!(lines.iter().filter(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()).count(), 2);
    }

    /// The real thing: a file-size limit (`RLIMIT_FSIZE`) in a child process makes the kernel
    /// cut a write short. The child is this test binary re-run with a filter, so the limit never
    /// touches the other tests.
    #[test]
    fn a_real_short_write_is_cut_back() {
        const CHILD: &str = "KIWI_JSONL_FSIZE_CHILD";
        if let Some(path) = std::env::var_os(CHILD) {
            let path = PathBuf::from(path);
            crate::session::file_limit::limit_file_size(20);
            let mut w = JsonlAppender::open(&path).unwrap();
            w.append(b"{\"a\":1}\n").unwrap();
            let e = w.append(b"{\"b\":\"too long for the limit\"}\n").unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EFBIG), "{e}");
            w.append(b"{\"c\":3}\n").unwrap();
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.jsonl");
        crate::session::file_limit::run_child("session::jsonl::tests::a_real_short_write_is_cut_back", CHILD, &path);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "{\"a\":1}\n{\"c\":3}\n");
    }
}
