//! A background shell command: the command in its own session and process group, output
//! appended to the task's `output.log`, its end reported once.
//!
//! Invariant: the process group is owned by a `CallGuard` inside the runtime's task, so a stop,
//! a timeout or the runtime going away kills the whole tree; with `keep_alive_on_exit` the guard
//! spares the tree when dropped and the exit sweep spares its session; a stop still kills it.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::sync::oneshot;

use super::{TaskEnd, TaskStatus};
use crate::tools::process::{CallGuard, forget_kept, keep_alive_on_exit};

pub struct Run {
    pub command: String,
    pub shell: PathBuf,
    pub work_dir: PathBuf,
    pub scrub: Vec<OsString>,
    pub timeout_s: u64,
    pub output_path: PathBuf,
    pub keep_alive: bool,
    /// The sandbox the command runs in, for its whole life.
    pub policy: Option<crate::sandbox::CommandPolicy>,
}

/// Spawns the command now and its waiter on the runtime; `done` gets its end once.
pub fn spawn(
    run: Run,
    stop: oneshot::Receiver<String>,
    done: impl FnOnce(TaskEnd) + Send + 'static,
) -> Result<(), String> {
    let log =
        std::fs::OpenOptions::new().create(true).append(true).open(&run.output_path).map_err(|e| e.to_string())?;
    let err = log.try_clone().map_err(|e| e.to_string())?;
    let mut cmd = tokio::process::Command::new(&run.shell);
    cmd.arg("-c").arg(&run.command).current_dir(&run.work_dir).stdin(Stdio::null()).stdout(log).stderr(err);
    for name in &run.scrub {
        cmd.env_remove(name);
    }
    let mut guard = CallGuard::spawn_confined(&mut cmd, run.policy.as_ref()).map_err(|e| {
        // Recognised by the Shell tool, which reports it as a sandbox failure.
        match crate::sandbox::setup_failure(&e) {
            Some(reason) => format!("sandbox set-up: {reason}"),
            None => e.to_string(),
        }
    })?;
    let pid = guard.pid();
    if run.keep_alive {
        keep_alive_on_exit(pid);
        guard.spare_on_drop();
    }
    tokio::spawn(async move {
        let limit = Duration::from_secs(run.timeout_s);
        let Some(child) = guard.child() else {
            done(TaskEnd {
                status: TaskStatus::Lost,
                exit_code: None,
                reason: Some("The process is gone".into()),
                timed_out: false,
            });
            return;
        };
        let outcome = tokio::select! {
            status = tokio::time::timeout(limit, child.wait()) => match status {
                Ok(Ok(status)) => Ok(status),
                Ok(Err(e)) => Err((TaskStatus::Lost, Some(e.to_string()), false)),
                Err(_) => Err((TaskStatus::Killed, Some(format!("Timed out after {}s", run.timeout_s)), true)),
            },
            reason = stop => Err((TaskStatus::Killed, Some(reason.unwrap_or_else(|_| "Stopped".into())), false)),
        };
        let end = match outcome {
            Ok(status) => {
                guard.finished();
                use std::os::unix::process::ExitStatusExt;
                let code = status.code().unwrap_or_else(|| -status.signal().unwrap_or(0));
                let status = if code == 0 { TaskStatus::Completed } else { TaskStatus::Failed };
                let reason = (code != 0).then(|| format!("Exited with code {code}"));
                TaskEnd { status, exit_code: Some(code), reason, timed_out: false }
            }
            Err((status, reason, timed_out)) => {
                guard.kill();
                if let Some(child) = guard.child()
                    && tokio::time::timeout(Duration::from_secs(5), child.wait()).await.is_ok()
                {
                    guard.finished();
                }
                TaskEnd { status, exit_code: None, reason, timed_out }
            }
        };
        forget_kept(pid);
        done(end);
    });
    Ok(())
}
