//! The process shell every front end runs in: the async runtime, SIGTERM/SIGINT, the stdout
//! writer, noticing that stdout is gone, draining the writer, and the exit sweep.
//!
//! Invariants: signal handlers are installed before the body runs (a session that is slow to
//! load can still be stopped cleanly); `Process::stop` fires on a signal *and* when stdout is
//! gone, so every front end ends the same way in both cases; after the body returns, every live
//! session still registered is closed for exit, the one background-task notice goes to stderr,
//! the writer is drained while the client reads, and every process a tool started and left
//! behind is killed. Nothing here knows a protocol.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::session::Sessions;
use crate::rpc::Outbound;
use crate::rpc::writer::spawn_writer;

/// How long the writer may go without the client reading before queued output is abandoned.
const DRAIN_PATIENCE: Duration = Duration::from_secs(1);
/// How long the runtime waits for stray tasks after the body ended.
const RUNTIME_GRACE: Duration = Duration::from_millis(100);

/// Which runtime a front end needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Runtime {
    /// One thread: one session, turns and the dispatcher interleave (wire, print).
    CurrentThread,
    /// Worker threads: many sessions in one process (ACP).
    MultiThread(usize),
}

/// What a front end's body gets from the shell.
pub struct Process {
    /// The only way to stdout.
    pub outbound: Outbound,
    /// Cancelled by SIGTERM/SIGINT or when stdout is gone.
    pub stop: CancellationToken,
    /// Cancelled only when stdout is gone.
    pub stdout_closed: CancellationToken,
    /// The live sessions of this process; any still open when the body returns are closed.
    pub sessions: Sessions,
}

/// The runtime could not be started.
#[derive(Debug)]
pub struct NoRuntime(pub String);

/// Runs `body` inside the shell: runtime, signals and writer before it; closing what is left,
/// draining and the exit sweep after it.
pub fn run<W, F, Fut, T>(runtime: Runtime, output: W, body: F) -> Result<T, NoRuntime>
where
    W: std::io::Write + Send + 'static,
    F: FnOnce(Process) -> Fut,
    Fut: Future<Output = T>,
{
    let built = match runtime {
        Runtime::CurrentThread => tokio::runtime::Builder::new_current_thread().enable_all().build(),
        Runtime::MultiThread(workers) => {
            tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build()
        }
    };
    let rt = built.map_err(|e| NoRuntime(format!("Cannot start the async runtime: {e}")))?;
    let signalled = {
        let _context = rt.enter();
        signal_token()
    };
    let (outbound, writer) = spawn_writer(output);
    let value = rt.block_on(async move {
        let stdout_closed = writer.closed.clone();
        let stop = either(signalled, stdout_closed.clone());
        let sessions = Sessions::default();
        let value = body(Process { outbound, stop, stdout_closed, sessions: sessions.clone() }).await;
        let tally = sessions.close_all_for_exit().await;
        if let Some(notice) = tally.notice() {
            // The one stderr line about background tasks at exit; stdout belongs to the protocol.
            #[allow(clippy::print_stderr)]
            {
                eprintln!("{notice}");
            }
        }
        writer.join_while_read(DRAIN_PATIENCE).await;
        crate::tools::process::kill_all_process_groups();
        value
    });
    // A writer stuck on a client that stopped reading stdout must not keep the process alive:
    // dropping the runtime would wait for its blocking join forever.
    rt.shutdown_timeout(RUNTIME_GRACE);
    Ok(value)
}

/// A token cancelled when either `a` or `b` is.
fn either(a: CancellationToken, b: CancellationToken) -> CancellationToken {
    let both = CancellationToken::new();
    let token = both.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = a.cancelled() => {}
            () = b.cancelled() => {}
        }
        token.cancel();
    });
    both
}

/// Installs SIGTERM/SIGINT handlers and returns the token they cancel.
fn signal_token() -> CancellationToken {
    use tokio::signal::unix::{SignalKind, signal};
    let stop = CancellationToken::new();
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        tracing::warn!("cannot install signal handlers");
        return stop;
    };
    let token = stop.clone();
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        tracing::info!("signal received; shutting down");
        token.cancel();
    });
    stop
}
