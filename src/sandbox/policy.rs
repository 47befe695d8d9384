//! What one command may touch (spec sandbox.md §3.2, §3.3): the writable roots, the read-only
//! paths inside them and the `deny_read` paths, computed afresh for every command (an added dir
//! or a `.git` that appeared counts from the next one), and the file tools' verdict (§6.3).
//! Pure path logic: no system call but `stat`, `readlink` and reading a `.git` pointer file.

use std::path::{Component, Path, PathBuf};

use super::settings::expand;
use super::{Sandbox, SandboxMode};

/// Folders at the top of each writable root that stay read-only when they exist: things run or
/// obeyed later outside the sandbox (git hooks and config, agent skills and settings).
const PROTECTED_AT_ROOT: [&str; 5] = [".git", ".kimi", ".agents", ".claude", ".codex"];

/// The paths of one command's policy, all resolved (symlinks followed) and existing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Paths {
    pub writable_roots: Vec<PathBuf>,
    pub read_only: Vec<PathBuf>,
    pub deny_read: Vec<PathBuf>,
}

/// The file tools' answer for one target (spec §6.3), on the resolved path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteVerdict {
    Allowed,
    /// Outside every writable root.
    OutsideRoots,
    /// Inside a read-only path (`.git`, …).
    ReadOnlyPath,
    /// The sandbox is `read-only`.
    ReadOnlyMode,
}

impl WriteVerdict {
    /// The error a file tool returns (brief `Blocked by sandbox`); `None` when allowed.
    pub fn message(self, path: &Path) -> Option<String> {
        let path = path.display();
        match self {
            Self::Allowed => None,
            Self::OutsideRoots => Some(format!("Cannot write `{path}`: it is outside the sandbox's writable roots.")),
            Self::ReadOnlyPath => Some(format!("Cannot write `{path}`: it is read-only in the sandbox.")),
            Self::ReadOnlyMode => Some(format!("Cannot write `{path}`: the sandbox is read-only.")),
        }
    }
}

/// The brief of a file tool's refusal.
pub const BLOCKED_BRIEF: &str = "Blocked by sandbox";

/// A read refused by `deny_read` (spec §4), for ReadFile and ReadMediaFile.
pub fn read_denied_message(path: &Path) -> String {
    format!("Cannot read `{}`: reading it is denied by the sandbox.", path.display())
}

impl Sandbox {
    /// The writable roots, read-only paths and denied paths of a command started in `work_dir`
    /// with these added dirs. In `read-only` there are no roots; with the sandbox off, nothing.
    pub fn paths_for(&self, work_dir: &Path, added_dirs: &[PathBuf]) -> Paths {
        if !self.mode.is_sandboxed() {
            return Paths::default();
        }
        let mut paths =
            Paths { deny_read: existing(self.settings.deny_read.iter().map(|p| expand(p))), ..Paths::default() };
        if self.mode == SandboxMode::ReadOnly {
            return paths;
        }
        let s = &self.settings;
        let mut wanted: Vec<PathBuf> = vec![work_dir.to_path_buf()];
        wanted.extend(added_dirs.iter().cloned());
        wanted.extend(s.writable_roots.iter().map(|p| expand(p)));
        if !s.exclude_slash_tmp {
            wanted.push("/tmp".into());
        }
        if !s.exclude_tmpdir_env_var
            && let Some(tmp) = &self.tmpdir
        {
            wanted.push(tmp.clone());
        }
        if !s.exclude_slash_tmp {
            wanted.push("/dev/shm".into());
        }
        paths.writable_roots = existing(wanted.into_iter());
        let roots = paths.writable_roots.clone();
        let inside_a_root = |p: &Path| roots.iter().any(|r| p.starts_with(r));
        let mut read_only = Vec::new();
        for root in &roots {
            for name in PROTECTED_AT_ROOT {
                let path = root.join(name);
                let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
                if name == ".git" && meta.is_file() {
                    // A worktree or submodule: the pointer file and the directory it names.
                    if let Some(gitdir) = pointed_gitdir(&path, root) {
                        read_only.push(gitdir);
                    }
                }
                read_only.push(path);
            }
        }
        read_only.push(self.share_dir.clone());
        read_only.extend(self.protected_files.iter().cloned());
        read_only.extend(s.read_only_paths.iter().map(|p| expand(p)));
        paths.read_only = existing(read_only.into_iter()).into_iter().filter(|p| inside_a_root(p)).collect();
        paths
    }

    /// Whether a file tool may write `path` (resolved first, as the tool will), spec §6.3.
    pub fn check_write(&self, path: &Path, work_dir: &Path, added_dirs: &[PathBuf]) -> WriteVerdict {
        match self.mode {
            SandboxMode::Off => return WriteVerdict::Allowed,
            SandboxMode::ReadOnly => return WriteVerdict::ReadOnlyMode,
            SandboxMode::WorkspaceWrite => {}
        }
        let target = resolve_lenient(&work_dir.join(path));
        let paths = self.paths_for(work_dir, added_dirs);
        if !paths.writable_roots.iter().any(|r| target.starts_with(r)) {
            WriteVerdict::OutsideRoots
        } else if paths.read_only.iter().any(|p| target.starts_with(p)) {
            WriteVerdict::ReadOnlyPath
        } else {
            WriteVerdict::Allowed
        }
    }

    /// Whether reading `path` (resolved) is denied by `deny_read`; always false with the
    /// sandbox off.
    pub fn read_denied(&self, path: &Path) -> bool {
        if !self.mode.is_sandboxed() || self.settings.deny_read.is_empty() {
            return false;
        }
        let target = resolve_lenient(path);
        self.settings.deny_read.iter().map(|p| resolve_lenient(&expand(p))).any(|d| target.starts_with(d))
    }
}

/// The paths that exist, resolved, without duplicates (first one wins).
fn existing(paths: impl Iterator<Item = PathBuf>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for path in paths {
        if let Ok(real) = std::fs::canonicalize(&path)
            && !out.contains(&real)
        {
            out.push(real);
        }
    }
    out
}

/// The directory a `.git` pointer file (`gitdir: <path>`) names, resolved against the root.
fn pointed_gitdir(pointer: &Path, root: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(pointer).ok()?;
    let target = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    if target.is_empty() {
        return None;
    }
    std::fs::canonicalize(root.join(target)).ok()
}

/// A path resolved as far as it exists: the longest existing ancestor canonicalized, the rest
/// appended (a new file's parent decides where it would land). `..` after a missing component
/// is applied lexically.
pub fn resolve_lenient(path: &Path) -> PathBuf {
    let mut missing: Vec<std::ffi::OsString> = Vec::new();
    let mut cur = path.to_path_buf();
    loop {
        if let Ok(real) = std::fs::canonicalize(&cur) {
            let mut out = real;
            for part in missing.iter().rev() {
                if part == ".." {
                    out.pop();
                } else if part != "." {
                    out.push(part);
                }
            }
            return out;
        }
        match cur.components().next_back() {
            Some(Component::Normal(name)) => missing.push(name.to_os_string()),
            Some(Component::ParentDir) => missing.push("..".into()),
            Some(Component::CurDir) => {}
            _ => return path.to_path_buf(),
        }
        if !cur.pop() {
            return path.to_path_buf();
        }
    }
}
