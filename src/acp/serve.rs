//! The ACP front end on a pair of byte streams: writer, reader, the dispatcher with its sessions,
//! and shutdown. Serving ends on EOF, on a signal, or when stdout closes; nothing a tool started
//! outlives the server.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::errors::OutgoingIds;
use super::server::AcpServer;
use super::session::Shared;
use crate::builder::AgentSetup;
use crate::rpc::pending::PendingRequests;
use crate::rpc::reader::spawn_reader;
use crate::rpc::writer::spawn_writer;

pub struct AcpOptions {
    pub max_line_bytes: usize,
    /// `agentInfo.version`.
    pub version: String,
    /// The command a client runs for the terminal login (`argv[0]`).
    pub program: String,
}

pub fn serve_streams<R, W>(
    setup: AgentSetup,
    options: AcpOptions,
    input: R,
    output: W,
    stop: impl FnOnce() -> CancellationToken,
) -> ExitCode
where
    R: std::io::Read + Send + 'static,
    W: std::io::Write + Send + 'static,
{
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let stop = {
        let _context = runtime.enter();
        stop()
    };
    let (outbound, writer) = spawn_writer(output);
    runtime.block_on(async move {
        let shared = Shared {
            setup,
            outbound,
            pending: Arc::new(PendingRequests::default()),
            ids: Arc::new(OutgoingIds::default()),
            client_terminal: Default::default(),
            client_read: Default::default(),
            client_write: Default::default(),
        };
        let server = Arc::new(AcpServer::new(shared, options.version, options.program));
        let inbound = spawn_reader(input, options.max_line_bytes);
        let stdout_closed = writer.closed.clone();
        tokio::select! {
            () = server.serve(inbound, stop.clone()) => {}
            () = stdout_closed.cancelled() => {
                tracing::info!("stdout closed; exiting");
                stop.cancel();
            }
        }
        drop(server);
        writer.join_while_read(Duration::from_secs(1)).await;
        crate::tools::process::kill_all_process_groups();
    });
    runtime.shutdown_timeout(Duration::from_millis(100));
    ExitCode::SUCCESS
}
