//! The wire front end on a pair of byte streams: writer, reader, projection, one session built
//! through the session builder, the dispatcher, and shutdown.
//!
//! Serving ends on EOF, on `stop` (SIGTERM/SIGINT; exit 0 after the queue is flushed) or when
//! stdout closes (at once). Nothing a tool started outlives the server.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::projection::WireProjection;
use super::server::WireServer;
use crate::builder::{AgentSetup, BuildError, BuiltSession, SessionRequest};
use crate::llm::build::TraceSink;
use crate::protocol::HookEvent;
use crate::rpc::Outbound;
use crate::rpc::pending::PendingRequests;
use crate::rpc::reader::spawn_reader;
use crate::rpc::writer::spawn_writer;
use crate::soul::hooks::{self, HookRunner};
use crate::soul::{EventSink, TurnDriver};

/// The longest the `SessionEnd` hooks may delay the exit.
const SESSION_END_BOUND: Duration = Duration::from_secs(5);

/// What the wire server needs besides its session.
pub struct WireOptions {
    /// Longest accepted input line.
    pub max_line_bytes: usize,
    /// `server.version` in `initialize`.
    pub version: String,
}

/// Builds the session and serves it until the end; `Err` when the session cannot be built (then
/// nothing was written to `output`).
pub fn serve_streams<R, W>(
    setup: &AgentSetup,
    request: SessionRequest,
    options: WireOptions,
    input: R,
    output: W,
    stop: impl FnOnce() -> CancellationToken,
) -> Result<ExitCode, BuildError>
where
    R: std::io::Read + Send + 'static,
    W: std::io::Write + Send + 'static,
{
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return Err(BuildError::Fatal(format!("Cannot start the async runtime: {e}"))),
    };
    // Signals are ours before the session is built (a big session or script file can take a
    // while to load): a SIGTERM then ends the server cleanly instead of killing it.
    let stop = {
        let _context = runtime.enter();
        stop()
    };
    let (outbound, writer) = spawn_writer(output);
    let request = SessionRequest { trace: Some(trace_to(outbound.clone())), ..request };
    let built = setup.build(request)?;
    let code = runtime.block_on(async move {
        let pending = Arc::new(PendingRequests::default());
        let BuiltSession { session, soul, recorder } = built;
        let projection = Arc::new(WireProjection::new(outbound.clone(), pending.clone()));
        let driver = TurnDriver::new(soul, EventSink::new(projection, Some(recorder)));
        // Session hooks are never visible on the wire (`wire-1.10.md` §5.1).
        let session_hooks =
            HookRunner::new(driver.agent().hooks.clone(), driver.sink().clone(), &session.id, session.work_dir.clone())
                .hidden();
        let source = if session.resumed { "resume" } else { "startup" };
        session_hooks.run(HookEvent::SessionStart, source, hooks::input([("source", Value::from(source))])).await;
        let server = WireServer::new(outbound, pending, driver, options.version, session.wire_path());
        let inbound = spawn_reader(input, options.max_line_bytes);
        let stdout_closed = writer.closed.clone();
        tokio::select! {
            () = server.serve(inbound, stop) => {}
            () = stdout_closed.cancelled() => {
                // Nobody reads us any more: end now, keeping the session consistent.
                tracing::info!("stdout closed; exiting");
                session_end(&session_hooks).await;
                crate::tools::process::kill_all_process_groups();
                session.finish();
                return ExitCode::SUCCESS;
            }
        }
        session_end(&session_hooks).await;
        // The writer ends once every handle on it is gone (the trace sink lives in the model).
        drop(server);
        drop(session_hooks);
        writer.join_while_read(Duration::from_secs(1)).await;
        crate::tools::process::kill_all_process_groups();
        session.finish();
        ExitCode::SUCCESS
    });
    // A writer stuck on a client that stopped reading stdout must not keep the process alive:
    // dropping the runtime would wait for its blocking join forever.
    runtime.shutdown_timeout(Duration::from_millis(100));
    Ok(code)
}

/// The `SessionEnd` hooks, bounded: a hook never keeps the server from exiting.
async fn session_end(hooks: &HookRunner) {
    let run = hooks.run(HookEvent::SessionEnd, "exit", hooks::input([("reason", Value::from("exit"))]));
    if tokio::time::timeout(SESSION_END_BOUND, run).await.is_err() {
        tracing::info!("SessionEnd hooks did not finish in {SESSION_END_BOUND:?}; exiting anyway");
    }
}

/// Trace lines go straight to the writer. Events are projected inline by the turn that emits
/// them, so every earlier event is already queued: the line keeps its place by construction.
/// Dropped when the queue is full (it is diagnostics, not protocol).
fn trace_to(outbound: Outbound) -> TraceSink {
    Box::new(move |line: String| {
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        outbound.try_send_raw(bytes);
    })
}

/// Installs SIGTERM/SIGINT handlers (before the first line is read, so a signal that arrives
/// right after start-up is already ours) and returns the token they cancel.
pub fn signal_token() -> CancellationToken {
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
