//! The top-level directory listing used for `KIMI_WORK_DIR_LS` (`soul.md` §12) and for the Glob
//! tool's unsafe-pattern error.
//!
//! Invariants: entries appear in directory (readdir) order; `stat` follows symlinks, so a broken
//! link is reported as a stat failure; one line per entry, no trailing newline.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

/// Lists `dir` like `ls -l` lite: `<mode> <size:>10> <name>` per entry.
pub fn list_directory(dir: &Path) -> String {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return String::new();
    };
    let mut lines = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        match std::fs::metadata(entry.path()) {
            Ok(meta) => {
                let mode = meta.permissions().mode();
                let mut s = String::with_capacity(10);
                s.push(if meta.is_dir() { 'd' } else { '-' });
                for (bit, ch) in [
                    (0o400, 'r'),
                    (0o200, 'w'),
                    (0o100, 'x'),
                    (0o040, 'r'),
                    (0o020, 'w'),
                    (0o010, 'x'),
                    (0o004, 'r'),
                    (0o002, 'w'),
                    (0o001, 'x'),
                ] {
                    s.push(if mode & bit != 0 { ch } else { '-' });
                }
                lines.push(format!("{s} {:>10} {name}", meta.len()));
            }
            Err(_) => lines.push(format!("?--------- {:>10} {name} [stat failed]", "?")),
        }
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_files_dirs_and_broken_links() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "hello").unwrap();
        std::fs::set_permissions(dir.path().join("a.txt"), std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::set_permissions(dir.path().join("sub"), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("/nonexistent/x", dir.path().join("broken")).unwrap();
        let out = list_directory(dir.path());
        let mut lines: Vec<&str> = out.lines().collect();
        lines.sort();
        assert_eq!(lines[0], "-rw-r--r--          5 a.txt");
        assert_eq!(lines[1], "?---------          ? broken [stat failed]");
        assert!(lines[2].starts_with("drwxr-xr-x "));
        assert!(lines[2].ends_with(" sub"));
    }
}
