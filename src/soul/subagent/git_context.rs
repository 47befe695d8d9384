//! The git context an `explore` subagent starts with (`docs/protocol-1.10.md` §8.2): where the repository
//! is, its branch, its last commits and what is changed, put before the prompt so the subagent
//! does not spend its first steps asking git.
//!
//! Invariants: outside a repository no process is started (a walk up the folders finds no
//! `.git`); every git command has a short limit and its output is capped, so a huge or stuck
//! repository costs the run at most [`GIT_LIMIT`]; a failing command only leaves its part out.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long each git command may take (they run at the same time).
const GIT_LIMIT: Duration = Duration::from_secs(3);
/// Commits listed.
const COMMITS: &str = "5";
/// Changed paths listed; the rest is counted.
const MAX_CHANGES: usize = 30;

/// The subagent type that gets the block.
const EXPLORE: &str = "explore";

/// `prompt` as the subagent of `subagent_type` working in `work_dir` receives it.
pub async fn prompt_with_context(subagent_type: &str, work_dir: &Path, prompt: &str) -> String {
    if subagent_type != EXPLORE {
        return prompt.to_string();
    }
    match git_context(work_dir).await {
        Some(block) => format!("{block}\n\n{prompt}"),
        None => prompt.to_string(),
    }
}

/// The block, or `None` outside a git repository (or when git cannot tell anything).
async fn git_context(work_dir: &Path) -> Option<String> {
    repository_of(work_dir)?;
    let (root, branch, log, status) = tokio::join!(
        git(work_dir, &["rev-parse", "--show-toplevel"]),
        git(work_dir, &["rev-parse", "--abbrev-ref", "HEAD"]),
        git(work_dir, &["log", "--oneline", "--no-decorate", "-n", COMMITS]),
        git(work_dir, &["status", "--porcelain=v1", "--untracked-files=normal"]),
    );
    let root = root?;
    Some(render(root.trim(), branch.as_deref().map(str::trim), log.as_deref(), status.as_deref()))
}

fn render(root: &str, branch: Option<&str>, log: Option<&str>, status: Option<&str>) -> String {
    let mut out = vec!["<git-context>".to_string(), format!("Repository root: {root}")];
    if let Some(branch) = branch.filter(|b| !b.is_empty()) {
        out.push(format!("Current branch: {}", if branch == "HEAD" { "(detached HEAD)" } else { branch }));
    }
    match log.map(str::trim).filter(|l| !l.is_empty()) {
        Some(log) => {
            out.push("Recent commits:".into());
            out.extend(log.lines().map(|l| format!("  {l}")));
        }
        None if log.is_some() => out.push("Recent commits: none yet".into()),
        None => {}
    }
    if let Some(status) = status {
        let changes: Vec<&str> = status.lines().filter(|l| !l.trim().is_empty()).collect();
        if changes.is_empty() {
            out.push("Working tree: clean".into());
        } else {
            out.push("Changed files (git status --porcelain):".into());
            out.extend(changes.iter().take(MAX_CHANGES).map(|l| format!("  {l}")));
            if changes.len() > MAX_CHANGES {
                out.push(format!("  … and {} more", changes.len() - MAX_CHANGES));
            }
        }
    }
    out.push("</git-context>".into());
    out.join("\n")
}

/// The folder holding `.git` (a directory, or a file for worktrees and submodules) at or above
/// `dir`.
fn repository_of(dir: &Path) -> Option<PathBuf> {
    dir.ancestors().find(|d| d.join(".git").exists()).map(Path::to_path_buf)
}

/// One git command's stdout, or `None` when it fails, is missing or takes too long.
async fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let mut cmd = tokio::process::Command::new("git");
    cmd.arg("-C").arg(dir).args(args);
    // Reading must never take the index lock a user's own git command may be waiting for.
    cmd.env("GIT_OPTIONAL_LOCKS", "0").env("GIT_TERMINAL_PROMPT", "0");
    cmd.stdin(std::process::Stdio::null()).stderr(std::process::Stdio::null()).kill_on_drop(true);
    let output = tokio::time::timeout(GIT_LIMIT, cmd.output()).await.ok()?.ok()?;
    output.status.success().then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_block_names_root_branch_commits_and_changes() {
        let block = render("/r", Some("main"), Some("abc123 first\n"), Some(" M src/a.rs\n?? new.txt\n"));
        assert_eq!(
            block,
            "<git-context>\nRepository root: /r\nCurrent branch: main\nRecent commits:\n  abc123 first\n\
             Changed files (git status --porcelain):\n   M src/a.rs\n  ?? new.txt\n</git-context>"
        );
        let clean = render("/r", Some("HEAD"), Some(""), Some(""));
        assert!(clean.contains("Current branch: (detached HEAD)\nRecent commits: none yet\nWorking tree: clean"));
        let many: String = (0..40).map(|i| format!("?? f{i}\n")).collect();
        let capped = render("/r", None, None, Some(&many));
        assert!(capped.contains("  ?? f29\n  … and 10 more\n</git-context>"), "{capped}");
        assert!(!capped.contains("f30"));
    }

    #[tokio::test]
    async fn other_types_and_folders_outside_a_repository_get_the_prompt_as_is() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(prompt_with_context("coder", dir.path(), "p").await, "p");
        if repository_of(dir.path()).is_none() {
            assert_eq!(prompt_with_context("explore", dir.path(), "p").await, "p");
        }
    }

    #[tokio::test]
    async fn explore_in_a_repository_gets_the_block_first() {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            std::process::Command::new("git")
                .arg("-C")
                .arg(dir.path())
                .args(args)
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@example.com")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@example.com")
                .output()
                .map(|o| o.status.success())
                .unwrap_or(false)
        };
        // A checkout of kiwi comes with git.
        assert!(git(&["init", "-q", "-b", "trunk"]), "git init failed");
        std::fs::write(dir.path().join("a.txt"), "a").unwrap();
        assert!(git(&["add", "a.txt"]) && git(&["commit", "-q", "-m", "add a"]));
        std::fs::write(dir.path().join("b.txt"), "b").unwrap();
        let prompt = prompt_with_context("explore", dir.path(), "look around").await;
        assert!(prompt.starts_with("<git-context>\nRepository root: "), "{prompt}");
        assert!(prompt.contains("Current branch: trunk\nRecent commits:\n  "), "{prompt}");
        assert!(prompt.contains(" add a\nChanged files (git status --porcelain):\n  ?? b.txt\n"), "{prompt}");
        assert!(prompt.ends_with("</git-context>\n\nlook around"), "{prompt}");
    }
}
