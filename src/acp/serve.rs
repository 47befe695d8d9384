//! The ACP front end on a pair of byte streams: inside the process shell (two worker threads:
//! many sessions share the process), the dispatcher with its sessions until the end. The same
//! dispatcher serves any message transport ([`serve_messages`]: `kiwi web`'s `/api/acp`). Serving
//! ends on EOF, on a signal, or when stdout closes; the shell closes whatever session is still
//! open and sweeps what tools left behind.

use std::process::ExitCode;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::client_profile::Updates;
use super::host::{OwnSessions, SessionHost};
use super::server::AcpServer;
use super::session::Shared;
use crate::builder::AgentSetup;
use crate::live::{Runtime, shell};
use crate::rpc::reader::{Inbound, spawn_reader};
use crate::rpc::{Outbound, Peer};

pub struct AcpOptions {
    pub max_line_bytes: usize,
    /// `agentInfo.version`.
    pub version: String,
    /// The command a client runs for the terminal login (`argv[0]`).
    pub program: String,
}

/// Worker threads of the ACP runtime: turns of different sessions run side by side.
const WORKERS: usize = 2;

pub fn serve_streams<R, W>(setup: AgentSetup, options: AcpOptions, input: R, output: W) -> ExitCode
where
    R: std::io::Read + Send + 'static,
    W: std::io::Write + Send + 'static,
{
    let served = shell::run(Runtime::MultiThread(WORKERS), output, |process| async move {
        let host = Arc::new(OwnSessions { sessions: process.sessions, version: options.version.clone() });
        let inbound = spawn_reader(input, options.max_line_bytes);
        serve_messages(setup, host, options, inbound, process.outbound, process.stop).await;
    });
    match served {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{}", e.0);
            ExitCode::FAILURE
        }
    }
}

/// The ACP agent on any transport that carries whole JSON-RPC messages: `inbound` (stdin's
/// lines, a WebSocket's text frames) until it ends or `stop`, answers and notifications into
/// `outbound`, sessions opened through `host`.
pub async fn serve_messages(
    setup: AgentSetup,
    host: Arc<dyn SessionHost>,
    options: AcpOptions,
    inbound: Inbound,
    outbound: Outbound,
    stop: CancellationToken,
) {
    let shared = Shared {
        setup,
        peer: Peer::new(outbound.clone(), "kiwi"),
        updates: Updates::new(outbound.clone()),
        outbound,
        host,
        client_terminal: Default::default(),
        client_read: Default::default(),
        client_write: Default::default(),
        client_elicitation: Default::default(),
    };
    let server = Arc::new(AcpServer::new(shared, options.version, options.program));
    server.serve(inbound, stop).await;
}
