//! One command hook of the config file (`docs/protocol-1.10.md` §5.3): `/bin/sh -c <command>` in the work
//! dir with the input JSON on stdin, decided by its exit code and stdout.
//!
//! Invariants: a hook never blocks by accident — anything but exit 2, or exit 0 with a `deny`
//! decision on stdout, allows (other codes, a signal, a failure to start, a timeout); the hook
//! runs as the leader of its own process group, which is killed when its time is up or the
//! waiting future is dropped (a cancelled turn, the server exiting); what it prints is read up to
//! a cap, so a chatty hook cannot grow our memory.
//!
//! The hook's own exit decides: once the shell has exited, its output is read
//! as far as it goes — the tree it left behind (which may hold the pipes open) is killed first,
//! and the reading stops after a short grace even if something still holds them — so a hook that
//! exits 2 while a background child keeps its stdout blocks, and is never mistaken for a timeout.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

use crate::tools::process::CallGuard;

/// Bytes kept of a hook's stdout and of its stderr.
const OUTPUT_CAP: u64 = 1024 * 1024;

/// After the hook's shell has exited and its leftovers were killed, how long its output may
/// still take to reach end of file (what was written before the exit is already in the pipe).
const DRAIN_GRACE: Duration = Duration::from_millis(250);

/// What one hook decided.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Verdict {
    pub block: bool,
    pub reason: String,
}

impl Verdict {
    pub fn allow() -> Self {
        Self::default()
    }

    fn block(reason: impl Into<String>) -> Self {
        Self { block: true, reason: reason.into() }
    }
}

/// Everything the hook writes is read (so it never blocks on a full pipe); the first
/// `OUTPUT_CAP` bytes are kept in `out`, which holds what was read even if this is dropped midway.
async fn read_capped<R: AsyncRead + Unpin>(stream: Option<R>, out: &mut Vec<u8>) {
    if let Some(mut stream) = stream {
        let _ = (&mut stream).take(OUTPUT_CAP).read_to_end(out).await;
        let _ = tokio::io::copy(&mut stream, &mut tokio::io::sink()).await;
    }
}

/// Runs `command` with `input` on stdin for at most `timeout`.
pub async fn run(command: &str, input: &[u8], cwd: &Path, timeout: Duration) -> Verdict {
    let mut cmd = tokio::process::Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // The guard owns the hook's whole process tree (as for a Shell call): a dropped future, a
    // timeout or the server's exit kills it.
    let mut guard = match CallGuard::spawn(&mut cmd) {
        Ok(guard) => guard,
        Err(e) => {
            tracing::warn!("hook `{command}` did not start ({e}); allowing");
            return Verdict::allow();
        }
    };
    let Some(child) = guard.child() else { return Verdict::allow() };
    let stdin = child.stdin.take();
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let feed = async move {
        if let Some(mut stdin) = stdin {
            // A hook that does not read its input may close the pipe early; that is its choice.
            let _ = stdin.write_all(input).await;
            let _ = stdin.shutdown().await;
        }
    };
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let finished = tokio::time::timeout(timeout, async {
        let reads = async { futures::join!(feed, read_capped(stdout, &mut out), read_capped(stderr, &mut err)) };
        tokio::pin!(reads);
        let gone = || Err(std::io::Error::other("the hook's process is gone"));
        let exited_first = {
            let Some(child) = guard.child() else { return gone() };
            tokio::select! {
                biased;
                _ = &mut reads => None,
                status = child.wait() => Some(status),
            }
        };
        match exited_first {
            None => match guard.child() {
                Some(child) => child.wait().await,
                None => gone(),
            },
            Some(status) => {
                // The shell is gone and what it left holds the pipes open: kill that, then take
                // what the pipes still have.
                guard.kill();
                let _ = tokio::time::timeout(DRAIN_GRACE, &mut reads).await;
                status
            }
        }
    })
    .await;
    let status = match finished {
        Ok(Ok(status)) => status,
        Ok(Err(e)) => {
            tracing::warn!("hook `{command}` could not be waited for ({e}); allowing");
            guard.kill();
            return Verdict::allow();
        }
        Err(_) => {
            tracing::info!("hook `{command}` timed out after {timeout:?}; killed, allowing");
            guard.kill();
            return Verdict::allow();
        }
    };
    guard.finished();
    decide(status.code(), &out, &err)
}

/// The decision of §5.3 from an exit code (None: killed by a signal) and the captured output.
fn decide(code: Option<i32>, stdout: &[u8], stderr: &[u8]) -> Verdict {
    match code {
        Some(2) => Verdict::block(String::from_utf8_lossy(stderr).trim()),
        Some(0) => {
            let Ok(Value::Object(out)) = serde_json::from_slice::<Value>(stdout) else { return Verdict::allow() };
            let specific = out.get("hookSpecificOutput");
            if specific.and_then(|s| s.get("permissionDecision")).and_then(Value::as_str) != Some("deny") {
                return Verdict::allow();
            }
            let reason = match specific.and_then(|s| s.get("permissionDecisionReason")) {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(other) => other.to_string(),
            };
            Verdict::block(reason)
        }
        _ => Verdict::allow(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_follow_exit_codes_and_stdout() {
        assert_eq!(decide(Some(2), b"", b"  no way \n"), Verdict::block("no way"));
        let deny = br#"{"hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":"use rg"}}"#;
        assert_eq!(decide(Some(0), deny, b""), Verdict::block("use rg"));
        assert_eq!(
            decide(Some(0), br#"{"hookSpecificOutput":{"permissionDecision":"deny"}}"#, b""),
            Verdict::block("")
        );
        assert_eq!(
            decide(
                Some(0),
                br#"{"hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":5}}"#,
                b""
            ),
            Verdict::block("5")
        );
        for (code, out) in [
            (Some(0), &b"not json"[..]),
            (Some(0), br#"{"hookSpecificOutput":{"permissionDecision":"allow"}}"#),
            (Some(0), br#"["deny"]"#),
            (Some(1), deny),
            (None, b""),
        ] {
            assert_eq!(decide(code, out, b"reason"), Verdict::allow(), "{code:?}");
        }
    }

    #[tokio::test]
    async fn a_real_hook_reads_its_input_and_a_slow_one_is_killed() {
        let dir = tempfile::tempdir().unwrap();
        let v = run(
            "grep -q '\"x\": 1' && echo blocked >&2 && exit 2",
            br#"{"x": 1}"#,
            dir.path(),
            Duration::from_secs(10),
        )
        .await;
        assert_eq!(v, Verdict::block("blocked"));
        let v = run("sleep 30", b"{}", dir.path(), Duration::from_millis(200)).await;
        assert_eq!(v, Verdict::allow());
        let v = run("exit 2", b"", Path::new("/definitely/not/here"), Duration::from_secs(5)).await;
        assert_eq!(v, Verdict::allow(), "a hook that cannot start allows");
    }

    /// The hook's exit decides, not the end of its output. A background child
    /// that keeps the pipes open outlives the timeout; the block still holds, the reason written
    /// before the exit is kept, and the child is killed.
    #[tokio::test]
    async fn a_hook_that_exits_2_blocks_even_if_a_child_holds_its_output() {
        let dir = tempfile::tempdir().unwrap();
        let pid_file = dir.path().join("child.pid");
        let command =
            format!("sleep 30 & echo $! > {}; echo out; echo 'blocked anyway' >&2; exit 2", pid_file.display());
        let v = run(&command, b"{}", dir.path(), Duration::from_secs(3)).await;
        assert_eq!(v, Verdict::block("blocked anyway"));
        let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
        // SAFETY: signal 0 only asks whether the process exists.
        let alive = unsafe { libc::kill(pid, 0) } == 0
            && !std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default().contains(") Z ");
        assert!(!alive, "the hook's background child was left running");

        // A deny on stdout counts the same way.
        let deny = r#"{"hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":"held"}}"#;
        let v = run(&format!("sleep 30 & echo '{deny}'"), b"{}", dir.path(), Duration::from_secs(3)).await;
        assert_eq!(v, Verdict::block("held"));
    }
}
