//! `origin.json` *(kiwi)*: which kind of run created a session, so a person's session list can
//! tell print runs (scripts, CI, Claude SDK programs) from the sessions they opened themselves
//! (`docs/sessions.md` §1, `docs/web-ui.md`).
//!
//! Invariants: written once, by the run that created the folder, never by one that resumed it;
//! a missing or unreadable file means "not known" (every session made before this file existed,
//! and every session the reference made); nothing the reference reads changes.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The marker's file name inside the session folder.
pub const ORIGIN_FILE: &str = "origin.json";

/// What created a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    /// `"print"`: a print-mode run (`--print`, either dialect).
    pub origin: String,
    /// The print dialect: `"kimi"` or `"claude"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialect: Option<String>,
}

impl Origin {
    pub fn is_print(&self) -> bool {
        self.origin == "print"
    }
}

/// Marks the session folder `dir` as created by a print run of `dialect`.
pub fn mark_print(dir: &Path, dialect: &str) -> std::io::Result<()> {
    let origin = Origin { origin: "print".into(), dialect: Some(dialect.into()) };
    let text = serde_json::to_string(&origin).map_err(std::io::Error::other)?;
    std::fs::write(dir.join(ORIGIN_FILE), text)
}

/// The origin recorded in `dir`, if any.
pub fn read(dir: &Path) -> Option<Origin> {
    let text = std::fs::read(dir.join(ORIGIN_FILE)).ok()?;
    serde_json::from_slice(&text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marked_folder_reads_back_and_others_are_unknown() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()), None);
        mark_print(dir.path(), "claude").unwrap();
        let origin = read(dir.path()).unwrap();
        assert!(origin.is_print());
        assert_eq!(origin.dialect.as_deref(), Some("claude"));
        assert_eq!(
            std::fs::read_to_string(dir.path().join(ORIGIN_FILE)).unwrap(),
            r#"{"origin":"print","dialect":"claude"}"#
        );
        std::fs::write(dir.path().join(ORIGIN_FILE), "not json").unwrap();
        assert_eq!(read(dir.path()), None, "unreadable means unknown");
    }
}
