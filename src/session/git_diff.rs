//! A work dir's changes against `HEAD`, as the web API's git-diff stats report them
//! (`docs/web-api.md` §3.3): per-file added/deleted line counts, then untracked files.
//!
//! Invariants: only a work dir holding `.git` itself counts as a repository; each git command is
//! bounded by [`GIT_TIMEOUT`] and killed when it runs over; a failure is reported in `error`,
//! never as a failed request.

use std::path::Path;
use std::time::Duration;

use serde::Serialize;

/// How long one git command may run.
pub const GIT_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GitDiffStats {
    pub is_git_repo: bool,
    pub has_changes: bool,
    pub total_additions: u64,
    pub total_deletions: u64,
    pub files: Vec<GitFileDiff>,
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GitFileDiff {
    pub path: String,
    pub additions: u64,
    pub deletions: u64,
    pub status: &'static str,
}

enum GitError {
    TimedOut,
    Failed(String),
}

async fn git(work_dir: &Path, args: &[&str]) -> Result<std::process::Output, GitError> {
    let child = tokio::process::Command::new("git")
        .args(args)
        .current_dir(work_dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| GitError::Failed(e.to_string()))?;
    match tokio::time::timeout(GIT_TIMEOUT, child.wait_with_output()).await {
        Ok(Ok(out)) => Ok(out),
        Ok(Err(e)) => Err(GitError::Failed(e.to_string())),
        Err(_) => Err(GitError::TimedOut),
    }
}

/// The stats of `work_dir` (see the module doc).
pub async fn stats(work_dir: &Path) -> GitDiffStats {
    if !work_dir.join(".git").exists() {
        return GitDiffStats::default();
    }
    let repo = GitDiffStats { is_git_repo: true, ..GitDiffStats::default() };
    match collect(work_dir).await {
        Ok(files) => {
            let total_additions = files.iter().map(|f| f.additions).sum();
            let total_deletions = files.iter().map(|f| f.deletions).sum();
            GitDiffStats { has_changes: !files.is_empty(), total_additions, total_deletions, files, ..repo }
        }
        Err(GitError::TimedOut) => GitDiffStats { error: Some("Git command timed out".into()), ..repo },
        Err(GitError::Failed(e)) => GitDiffStats { error: Some(e), ..repo },
    }
}

async fn collect(work_dir: &Path) -> Result<Vec<GitFileDiff>, GitError> {
    let mut files = Vec::new();
    let head = git(work_dir, &["rev-parse", "--verify", "HEAD"]).await?;
    if head.status.success() {
        let out = checked(git(work_dir, &["diff", "--numstat", "HEAD"]).await?)?;
        files.extend(out.lines().filter_map(numstat_line));
    }
    let out = checked(git(work_dir, &["ls-files", "--others", "--exclude-standard"]).await?)?;
    files.extend(out.lines().filter(|l| !l.is_empty()).map(|path| GitFileDiff {
        path: path.to_string(),
        additions: 0,
        deletions: 0,
        status: "added",
    }));
    Ok(files)
}

fn checked(out: std::process::Output) -> Result<String, GitError> {
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        Err(GitError::Failed(if err.is_empty() { format!("git exited with {}", out.status) } else { err }))
    }
}

/// `add<TAB>del<TAB>path`; `-` (binary) counts 0.
fn numstat_line(line: &str) -> Option<GitFileDiff> {
    let mut cols = line.splitn(3, '\t');
    let additions = cols.next()?.parse().unwrap_or(0);
    let deletions = cols.next()?.parse().unwrap_or(0);
    let path = cols.next()?.to_string();
    let status = match (additions, deletions) {
        (a, 0) if a > 0 => "added",
        (0, d) if d > 0 => "deleted",
        _ => "modified",
    };
    Some(GitFileDiff { path, additions, deletions, status })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(dir: &Path, args: &[&str]) {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .unwrap();
        assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
    }

    #[test]
    fn numstat_lines() {
        assert_eq!(numstat_line("3\t0\ta.txt").unwrap().status, "added");
        assert_eq!(numstat_line("0\t2\ta.txt").unwrap().status, "deleted");
        assert_eq!(numstat_line("1\t1\ta.txt").unwrap().status, "modified");
        let bin = numstat_line("-\t-\tpic.png").unwrap();
        assert_eq!((bin.additions, bin.deletions, bin.status), (0, 0, "modified"));
        assert!(numstat_line("garbage").is_none());
    }

    #[tokio::test]
    async fn stats_of_a_repository() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(stats(dir.path()).await, GitDiffStats::default());
        run(dir.path(), &["init", "-q"]);
        std::fs::write(dir.path().join("new.txt"), "x\n").unwrap();
        let before_head = stats(dir.path()).await;
        assert!(before_head.is_git_repo && before_head.has_changes && before_head.error.is_none());
        assert_eq!(before_head.files[0].path, "new.txt");
        assert_eq!(before_head.total_additions, 0);
        std::fs::write(dir.path().join("a.txt"), "1\n2\n3\n").unwrap();
        run(dir.path(), &["add", "a.txt"]);
        run(dir.path(), &["commit", "-q", "-m", "init"]);
        std::fs::write(dir.path().join("a.txt"), "1\nTWO\n3\n4\n").unwrap();
        let s = stats(dir.path()).await;
        assert_eq!(s.total_additions, 2);
        assert_eq!(s.total_deletions, 1);
        assert_eq!(
            s.files.iter().map(|f| (f.path.as_str(), f.status)).collect::<Vec<_>>(),
            [("a.txt", "modified"), ("new.txt", "added")]
        );
        // A subfolder of a repository is not a repository here.
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        assert!(!stats(&dir.path().join("sub")).await.is_git_repo);
    }
}
