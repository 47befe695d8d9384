//! The wire front end on a pair of byte streams: inside the process shell, one live session
//! built through the session builder, its `SessionStart` hooks, then the dispatcher until the
//! end. Closing the session (`SessionEnd`, background tasks, bookkeeping), draining stdout and
//! the exit sweep are the live session's and the shell's.
//!
//! Serving ends on EOF, on a signal (SIGTERM/SIGINT; exit 0 after the queue is flushed) or when
//! stdout closes. Nothing a tool started outlives the server.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use super::params::InitializeParams;
use super::projection::WireProjection;
use super::server::{Local, WireHandler, initialize_agent};
use crate::builder::{AgentSetup, BuildError, SessionRequest};
use crate::live::{LiveSession, Runtime, SHUTDOWN_GRACE, shell};
use crate::llm::build::TraceSink;
use crate::rpc::reader::{Inbound, spawn_reader};
use crate::rpc::{Incoming, Outbound, Peer};

/// What the wire server needs besides its session.
#[derive(Debug, Clone)]
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
    // Reading starts first, on its own thread, while the session is built: the client's first
    // line (usually `initialize`) is waiting when the dispatcher starts.
    let client =
        Client { lines: spawn_reader(input, options.max_line_bytes), initialize: None, unanswered: Vec::new() };
    serve_client(setup, request, options, &Mutex::new(Some(client)), output)
}

/// A wire client's side of the stream: its lines, and what it already said to a host that went
/// away when this process takes the session over (`docs/host.md`, "When the host goes away").
pub struct Client {
    pub lines: Inbound,
    /// Its last `initialize`, applied to the session without an answer (it had one).
    pub initialize: Option<InitializeParams>,
    /// Its requests the old host never answered, served before its next lines.
    pub unanswered: Vec<Incoming>,
}

/// [`serve_streams`] for a client whose lines are already being read. The client is taken out of
/// `client` only once the session is built, so a caller whose build failed (another process
/// took the session first) still has it; `output` has then seen nothing.
pub fn serve_client<W>(
    setup: &AgentSetup,
    request: SessionRequest,
    options: WireOptions,
    client: &Mutex<Option<Client>>,
    output: W,
) -> Result<ExitCode, BuildError>
where
    W: std::io::Write + Send + 'static,
{
    let served = shell::run(Runtime::CurrentThread, output, |process| async move {
        let request = SessionRequest { trace: Some(trace_to(process.outbound.clone())), ..request };
        // Built inside the shell: a signal during a long load already ends the server cleanly.
        let built = setup.build(request)?;
        let Some(Client { lines, initialize, unanswered }) = client.lock().unwrap_or_else(|p| p.into_inner()).take()
        else {
            return Err(BuildError::Fatal("the wire client was already served".into()));
        };
        // The wire's requests carry their own ids (the approval's, the tool call's); no prefix.
        let peer = Peer::new(process.outbound, "kiwi");
        let projection = Arc::new(WireProjection::new(peer.clone()));
        let granted = projection.granted();
        let live = LiveSession::open(built, projection, &process.sessions);
        live.start().await;
        if let Some(params) = initialize {
            let result = initialize_agent(live.driver(), params, &options.version);
            granted.set(result.extensions.as_deref());
        }
        // Other kiwi processes of this user attach through the session's socket
        // (`docs/host.md`); serving stops and the file goes when this is dropped.
        let hosting = super::host::serve(live.clone(), options.version.clone())
            .inspect_err(|e| tracing::warn!("cannot serve the session on its socket: {e}"))
            .ok();
        let handler = WireHandler::new(Local { live: live.clone(), attached: None }, peer.clone(), options.version)
            .with_grant(granted);
        for item in unanswered {
            handler.dispatch(item).await;
        }
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
