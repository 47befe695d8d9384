//! `/add-dir [path]` (`docs/protocol-1.10.md` §4.5): directories added to the workspace, persisted in the
//! session state, announced to the model with a listing.
//!
//! Invariants: a directory is stored canonical (symlinks resolved) and only once; nothing inside
//! the work dir or inside an added directory is added again; every refusal is one text naming the
//! reason, and nothing changes for it.

use std::path::{Path, PathBuf};

use super::Soul;
use super::commands::say;
use super::sink::EventSink;
use crate::llm::Message;
use crate::tools::paths;

/// Entries of a new directory shown to the model.
const LISTING_ENTRIES: usize = 100;

fn strip_quotes(s: &str) -> &str {
    let s = s.trim();
    for q in ['"', '\''] {
        if s.len() >= 2 && s.starts_with(q) && s.ends_with(q) {
            return &s[1..s.len() - 1];
        }
    }
    s
}

/// What `/add-dir <arg>` decides, before anything changes.
enum Decision {
    Refused(String),
    Add { dir: PathBuf, listing: String },
}

fn decide(arg: &str, work_dir: &Path, added: &[String]) -> Decision {
    let given = paths::resolve(work_dir, strip_quotes(arg));
    let shown = given.display().to_string();
    let meta = match std::fs::metadata(&given) {
        Ok(m) => m,
        Err(_) => return Decision::Refused(format!("Directory does not exist: {shown}")),
    };
    if !meta.is_dir() {
        return Decision::Refused(format!("Not a directory: {shown}"));
    }
    let dir = std::fs::canonicalize(&given).unwrap_or(given);
    let shown = dir.display().to_string();
    if added.iter().any(|a| Path::new(a) == dir) {
        return Decision::Refused(format!("Directory already in workspace: {shown}"));
    }
    let work = std::fs::canonicalize(work_dir).unwrap_or_else(|_| work_dir.to_path_buf());
    if dir.starts_with(&work) {
        return Decision::Refused(format!("Directory is already within the working directory: {shown}"));
    }
    if let Some(parent) = added.iter().find(|a| dir.starts_with(a)) {
        return Decision::Refused(format!("Directory is already within an added directory `{parent}`: {shown}"));
    }
    match listing(&dir) {
        Ok(listing) => Decision::Add { dir, listing },
        Err(e) => Decision::Refused(format!("Cannot read directory: {shown} ({e})")),
    }
}

/// What the model is told about a directory added to the workspace.
fn added_note(shown: &str, listing: &str) -> String {
    format!(
        "<system>The user added the directory `{shown}` to the workspace. You may read and edit files \
         in it like files in the working directory. Its top-level entries:\n{listing}</system>"
    )
}

/// Top-level entries, sorted, directories with a trailing `/`.
fn listing(dir: &Path) -> std::io::Result<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)?
        .flatten()
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.file_type().is_ok_and(|t| t.is_dir()) { format!("{name}/") } else { name }
        })
        .collect();
    names.sort();
    let more = names.len().saturating_sub(LISTING_ENTRIES);
    names.truncate(LISTING_ENTRIES);
    let mut text = names.join("\n");
    if more > 0 {
        text.push_str(&format!("\n… and {more} more"));
    }
    Ok(text)
}

impl Soul {
    /// `--add-dir DIR` at start-up: the same as `/add-dir DIR` without its answer text (the
    /// directory is saved with the session and the model gets the same note). A directory the
    /// workspace already holds is left alone (`Ok(false)`); other refusals are the error.
    pub fn add_dir_at_start(&mut self, dir: &Path) -> Result<bool, String> {
        let added = self.agent.state.additional_dirs();
        match decide(&dir.display().to_string(), &self.agent.env.work_dir, &added) {
            Decision::Refused(text) if text.starts_with("Directory already in workspace") => Ok(false),
            Decision::Refused(text) if text.starts_with("Directory is already within") => {
                tracing::info!("--add-dir: {text}");
                Ok(false)
            }
            Decision::Refused(text) => Err(text),
            Decision::Add { dir, listing } => {
                let shown = dir.display().to_string();
                self.agent.state.add_dir(shown.clone());
                self.context.append(Message::user_text(added_note(&shown, &listing)));
                Ok(true)
            }
        }
    }

    pub(super) async fn add_dir_command(&mut self, args: &str, sink: &EventSink) {
        let state = self.agent.state.clone();
        let added = state.additional_dirs();
        if args.trim().is_empty() {
            let text = if added.is_empty() {
                "No additional directories. Usage: /add-dir <path>".to_string()
            } else {
                let mut t = String::from("Additional directories:");
                for d in &added {
                    t.push_str(&format!("\n  - {d}"));
                }
                t
            };
            say(sink, &text).await;
            return;
        }
        match decide(args, &self.agent.env.work_dir, &added) {
            Decision::Refused(text) => say(sink, &text).await,
            Decision::Add { dir, listing } => {
                let shown = dir.display().to_string();
                state.add_dir(shown.clone());
                self.context.append(Message::user_text(added_note(&shown, &listing)));
                say(sink, &format!("Added directory to workspace: {shown}")).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(d: Decision) -> String {
        match d {
            Decision::Refused(t) => t,
            Decision::Add { dir, .. } => panic!("added {}", dir.display()),
        }
    }

    #[test]
    fn refusals_name_the_reason() {
        let root = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(root.path()).unwrap();
        let work = root.join("work");
        let other = root.join("other");
        std::fs::create_dir_all(work.join("sub")).unwrap();
        std::fs::create_dir_all(other.join("inner")).unwrap();
        std::fs::write(root.join("file.txt"), "x").unwrap();
        let show = |p: &Path| p.display().to_string();
        assert_eq!(
            refused(decide("../missing", &work, &[])),
            format!("Directory does not exist: {}", show(&root.join("missing")))
        );
        assert_eq!(
            refused(decide("'../file.txt'", &work, &[])),
            format!("Not a directory: {}", show(&root.join("file.txt")))
        );
        assert_eq!(
            refused(decide("sub", &work, &[])),
            format!("Directory is already within the working directory: {}", show(&work.join("sub")))
        );
        let added = vec![show(&other)];
        assert_eq!(
            refused(decide(&show(&other), &work, &added)),
            format!("Directory already in workspace: {}", show(&other))
        );
        assert_eq!(
            refused(decide("\"../other/inner\"", &work, &added)),
            format!(
                "Directory is already within an added directory `{}`: {}",
                show(&other),
                show(&other.join("inner"))
            )
        );
        let Decision::Add { dir, listing } = decide("../other", &work, &[]) else { panic!("refused") };
        assert_eq!((dir, listing), (other, "inner/".to_string()));
    }
}
