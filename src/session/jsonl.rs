//! Append-only JSONL files with one writer each.
//!
//! Invariants: every record is one `write_all` of a complete line; a file whose last line was
//! torn (a crash mid-write) gets a newline before the next record, so records never glue onto
//! the fragment; readers skip a torn or unparsable line with a log line instead of failing.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

pub struct JsonlAppender {
    path: PathBuf,
    file: File,
    /// False until something was written or the file was found non-empty.
    nonempty: bool,
}

impl JsonlAppender {
    /// Opens (creating if needed) for appending; repairs a missing final newline.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        let mut file = OpenOptions::new().create(true).read(true).append(true).open(path)?;
        let len = file.metadata()?.len();
        if len > 0 {
            file.seek(SeekFrom::Start(len - 1))?;
            let mut last = [0u8; 1];
            file.read_exact(&mut last)?;
            if last[0] != b'\n' {
                tracing::warn!("{}: last line was torn; starting the next record on a fresh line", path.display());
                file.write_all(b"\n")?;
            }
        }
        Ok(Self { path: path.to_path_buf(), file, nonempty: len > 0 })
    }

    /// Appends one complete line (which must end with `\n`).
    pub fn append(&mut self, line: &[u8]) -> std::io::Result<()> {
        self.nonempty = true;
        self.file.write_all(line)
    }

    pub fn is_empty(&self) -> bool {
        !self.nonempty
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
