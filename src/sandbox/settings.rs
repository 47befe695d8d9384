//! The `[sandbox]` table of the config file (spec sandbox.md §2.2), as plain data. The config
//! layer parses it (lenient scalars like the rest of the file) and calls [`check_path`] on every
//! path, so a relative one makes the config invalid.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::SandboxMode;

/// Every key of `[sandbox]` with its default. Paths are kept as written (`~/…` included) so the
/// table round-trips; [`expand`] resolves `~` when a policy is computed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxSettings {
    /// The mode when no flag says otherwise.
    pub mode: SandboxMode,
    /// Sandboxed commands may use the network (no effect with `off`).
    pub network: bool,
    /// Extra writable roots in `workspace-write`.
    pub writable_roots: Vec<PathBuf>,
    /// Extra read-only paths inside writable roots (as `.git`).
    pub read_only_paths: Vec<PathBuf>,
    /// Paths commands may not read.
    pub deny_read: Vec<PathBuf>,
    /// `/tmp` (and `/dev/shm`) are not writable roots.
    pub exclude_slash_tmp: bool,
    /// `$TMPDIR` is not a writable root.
    pub exclude_tmpdir_env_var: bool,
    /// A sandboxed Shell call runs without an approval request.
    pub auto_approve: bool,
    /// The model may ask to run one command outside the sandbox.
    pub allow_escalation: bool,
    /// Where user namespaces are unusable, run with Landlock and seccomp only instead of
    /// refusing to start.
    pub allow_landlock_only: bool,
}

impl Default for SandboxSettings {
    fn default() -> Self {
        Self {
            mode: SandboxMode::Off,
            network: false,
            writable_roots: Vec::new(),
            read_only_paths: Vec::new(),
            deny_read: Vec::new(),
            exclude_slash_tmp: false,
            exclude_tmpdir_env_var: false,
            auto_approve: true,
            allow_escalation: true,
            allow_landlock_only: false,
        }
    }
}

impl SandboxSettings {
    /// True when every key has its default (the table is then left out when the config is
    /// written back).
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// One line per configured writable root that does not exist (it is left out of every
    /// policy); the front ends print them as `kiwi: warning:` lines.
    pub fn warnings(&self) -> Vec<String> {
        self.writable_roots
            .iter()
            .filter(|root| !expand(root).exists())
            .map(|root| format!("sandbox.writable_roots: '{}' does not exist and is left out", root.display()))
            .collect()
    }
}

/// A path of `[sandbox]` (`key` names the list for the message): absolute, or `~`/`~/…`.
pub fn check_path(key: &str, text: &str) -> Result<PathBuf, String> {
    let path = Path::new(text);
    if path.is_absolute() || text == "~" || text.starts_with("~/") {
        Ok(path.to_path_buf())
    } else {
        Err(format!("sandbox.{key}: relative path '{text}' is not allowed (use an absolute path or ~/...)"))
    }
}

/// `~` and `~/…` against `$HOME`; other paths as they are.
pub fn expand(path: &Path) -> PathBuf {
    let home = || std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from);
    match path.strip_prefix("~") {
        Ok(rest) if path.as_os_str().to_string_lossy().starts_with('~') => match home() {
            Some(home) => home.join(rest),
            None => path.to_path_buf(),
        },
        _ => path.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_absolute_or_home_relative() {
        assert!(check_path("writable_roots", "/abs").is_ok());
        assert!(check_path("writable_roots", "~/x").is_ok());
        assert_eq!(
            check_path("writable_roots", "rel/x").unwrap_err(),
            "sandbox.writable_roots: relative path 'rel/x' is not allowed (use an absolute path or ~/...)"
        );
        assert!(check_path("deny_read", "~user/x").is_err());
        assert_eq!(expand(Path::new("/a/b")), PathBuf::from("/a/b"));
        if let Some(home) = std::env::var_os("HOME") {
            assert_eq!(expand(Path::new("~/x")), PathBuf::from(home).join("x"));
        }
    }

    #[test]
    fn missing_roots_warn() {
        let s = SandboxSettings { writable_roots: vec!["/no/such/root/here".into(), "/".into()], ..Default::default() };
        assert_eq!(s.warnings(), ["sandbox.writable_roots: '/no/such/root/here' does not exist and is left out"]);
        assert!(SandboxSettings::default().is_default());
    }
}
