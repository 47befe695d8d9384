//! Path handling shared by the file tools (`docs/tools.md` §1).
//!
//! Invariants: every path a tool touches is absolute; relative paths are resolved against the
//! runtime's work dir, never the process cwd; [`is_within`] is a purely lexical test on the
//! normalized path (symlinks not resolved, as in the reference), used for the "relative path
//! escaping the work dir" checks. The editing tools' approval action is decided on the resolved
//! path instead (`write_file::common::action_for`, `docs/tools.md` §19.6).

use std::path::{Component, Path, PathBuf};

/// Expands a leading `~` or `~/` to `$HOME` (other `~user` forms are left alone).
pub fn expand_home(path: &str) -> PathBuf {
    let home = || std::env::var_os("HOME").map(PathBuf::from);
    if path == "~" {
        if let Some(h) = home() {
            return h;
        }
    } else if let Some(rest) = path.strip_prefix("~/")
        && let Some(h) = home()
    {
        return h.join(rest);
    }
    PathBuf::from(path)
}

/// Lexically normalizes an absolute path: removes `.` components and resolves `..` against the
/// preceding component (`/..` stays `/`). Symlinks are not consulted.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for comp in path.components() {
        match comp {
            Component::Prefix(p) => out.push(p.as_os_str()),
            Component::RootDir => out.push(Component::RootDir.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => match out.components().next_back() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                // `/..` is `/`.
                Some(Component::RootDir | Component::Prefix(_)) => {}
                // A relative path climbing above its start keeps the `..`.
                _ => out.push(".."),
            },
            Component::Normal(c) => out.push(c),
        }
    }
    if out.as_os_str().is_empty() { PathBuf::from(".") } else { out }
}

/// Resolves a user-supplied path: `~` expansion, then relative paths against `work_dir`, then
/// lexical normalization. This is the reference's `KaosPath(p).expanduser().canonical()`.
pub fn resolve(work_dir: &Path, path: &str) -> PathBuf {
    let expanded = expand_home(path);
    let absolute = if expanded.is_absolute() { expanded } else { work_dir.join(expanded) };
    normalize(&absolute)
}

/// True when `path` (already normalized) is `dir` or below it, compared component-wise.
pub fn is_within(path: &Path, dir: &Path) -> bool {
    path.starts_with(normalize(dir))
}

/// Whether a failed `stat` means "the path does not exist" in the reference's sense: Python's
/// `Path.exists()` answers False for ENOENT, ENOTDIR (a file used as a directory), ELOOP (a
/// symlink loop) and a path it cannot even encode (an embedded NUL byte).
pub fn is_missing(err: &std::io::Error) -> bool {
    err.kind() == std::io::ErrorKind::NotFound
        || err.kind() == std::io::ErrorKind::InvalidInput
        || matches!(err.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR | libc::ELOOP))
}

/// Whether the user wrote an absolute path (after `~` expansion).
pub fn is_absolute_input(path: &str) -> bool {
    expand_home(path).is_absolute()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_lexically() {
        assert_eq!(normalize(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(normalize(Path::new("/../x")), PathBuf::from("/x"));
        assert_eq!(resolve(Path::new("/w"), "../etc/passwd"), PathBuf::from("/etc/passwd"));
        assert_eq!(resolve(Path::new("/w"), "a/b"), PathBuf::from("/w/a/b"));
    }

    #[test]
    fn within_is_component_wise() {
        assert!(is_within(Path::new("/w/a"), Path::new("/w")));
        assert!(is_within(Path::new("/w"), Path::new("/w")));
        assert!(!is_within(Path::new("/wx/a"), Path::new("/w")));
    }
}
