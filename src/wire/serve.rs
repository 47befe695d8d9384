//! The wire front end on a pair of byte streams: inside the process shell, one live session
//! built through the session builder, its `SessionStart` hooks, then the dispatcher until the
//! end. Closing the session (`SessionEnd`, background tasks, bookkeeping), draining stdout and
//! the exit sweep are the live session's and the shell's.
//!
//! Serving ends on EOF, on a signal (SIGTERM/SIGINT; exit 0 after the queue is flushed) or when
//! stdout closes. Nothing a tool started outlives the server.

use std::process::ExitCode;
use std::sync::Arc;

use super::projection::WireProjection;
use super::server::{Local, WireHandler};
use crate::builder::{AgentSetup, BuildError, SessionRequest};
use crate::live::{LiveSession, Runtime, SHUTDOWN_GRACE, shell};
use crate::llm::build::TraceSink;
use crate::rpc::reader::spawn_reader;
use crate::rpc::{Outbound, Peer};

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
) -> Result<ExitCode, BuildError>
where
    R: std::io::Read + Send + 'static,
    W: std::io::Write + Send + 'static,
{
    let served = shell::run(Runtime::CurrentThread, output, |process| async move {
        // Reading starts first, on its own thread, while the session is built: the client's
        // first line (usually `initialize`) is waiting when the dispatcher starts.
        let lines = spawn_reader(input, options.max_line_bytes);
        let request = SessionRequest { trace: Some(trace_to(process.outbound.clone())), ..request };
        // Built inside the shell: a signal during a long load already ends the server cleanly.
        let built = setup.build(request)?;
        // The wire's requests carry their own ids (the approval's, the tool call's); no prefix.
        let peer = Peer::new(process.outbound, "kiwi");
        let projection = Arc::new(WireProjection::new(peer.clone()));
        let granted = projection.granted();
        let live = LiveSession::open(built, projection, &process.sessions);
        live.start().await;
        // Other kiwi processes of this user attach through the session's socket
        // (`docs/host.md`); serving stops and the file goes when this is dropped.
        let hosting = super::host::serve(live.clone(), options.version.clone())
            .inspect_err(|e| tracing::warn!("cannot serve the session on its socket: {e}"))
            .ok();
        let handler = WireHandler::new(Local { live: live.clone(), attached: None }, peer.clone(), options.version)
            .with_grant(granted);
        handler.serve(lines, process.stop).await;
        // EOF or a signal: cancel the turn, let it answer, fail what is still pending.
        live.driver().shutdown(SHUTDOWN_GRACE).await;
        peer.fail_all();
        drop(hosting);
        Ok(ExitCode::SUCCESS)
    });
    served.map_err(|e| BuildError::Fatal(e.0))?
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
