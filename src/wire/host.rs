//! Hosting a session on `<session dir>/live.sock` (`docs/host.md`): while a process holds a
//! session's lock, other kiwi processes of the same user attach to it here instead of failing.
//! Each line is one frame of the session WebSocket protocol as newline-delimited JSON: the
//! history up to the attach seam (as stored, `wire::replay::history_frame`), `history_complete`,
//! then the live stream and the requests still waiting; the attacher sends wire 1.10 messages,
//! handled by the one wire handler (`wire::server::WireHandler`) as a `wire::server::Local`
//! client that is attached.
//!
//! Invariants: the folder is `0700` and the socket `0600` before anyone can connect; a peer of
//! another uid is closed without a byte; a file left by a crashed host is replaced (the lock,
//! not the file, says who hosts); the file is removed when the host stops serving. Each
//! connection is one `live::Fanout` subscriber with its own `rpc::Peer`, so request ids are
//! per connection and a response reaches only the connection that asked.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader, BufWriter};
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::projection::WireProjection;
use super::replay::history_frame;
use super::server::{Attached, Local, WireHandler};
use crate::live::LiveSession;
use crate::rpc::queue::{Frames, Outgoing, QUEUE_BYTES, QUEUE_FRAMES};
use crate::rpc::{Outbound, Peer};

/// The socket's file name inside the session folder.
pub const SOCKET_NAME: &str = "live.sock";
/// History frames read ahead of a connection.
const HISTORY_BATCH: usize = 512;
/// The longest line an attacher may send.
const MAX_LINE: usize = 16 * 1024 * 1024;

/// The socket path of a session folder.
pub fn socket_path(dir: &Path) -> PathBuf {
    dir.join(SOCKET_NAME)
}

/// A session served on its socket; the file goes when this is dropped.
pub struct Hosting {
    path: PathBuf,
    stop: CancellationToken,
}

impl Drop for Hosting {
    fn drop(&mut self) {
        self.stop.cancel();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Starts serving `live` on its folder's socket (on the current runtime). The caller holds the
/// session's lock, so a file already there is stale and is replaced.
pub fn serve(live: Arc<LiveSession>, version: String) -> std::io::Result<Hosting> {
    let wire = live.wire_path();
    let dir = wire.parent().ok_or_else(|| std::io::Error::other("the session has no folder"))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    let path = socket_path(dir);
    match std::fs::remove_file(&path) {
        Ok(()) => tracing::info!("replaced a stale {SOCKET_NAME}"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = UnixListener::bind(&path)?;
    // The folder is already owner-only, so no one else can reach the file before this.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    let stop = CancellationToken::new();
    tokio::spawn(accept(listener, live, version, stop.clone()).in_current_span());
    Ok(Hosting { path, stop })
}

async fn accept(listener: UnixListener, live: Arc<LiveSession>, version: String, stop: CancellationToken) {
    // SAFETY: geteuid has no preconditions and touches no memory.
    let uid = unsafe { libc::geteuid() };
    loop {
        let stream = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!("{SOCKET_NAME}: accept failed: {e}");
                    return;
                }
            },
        };
        match stream.peer_cred() {
            Ok(cred) if cred.uid() == uid => {}
            Ok(cred) => {
                tracing::warn!("{SOCKET_NAME}: refused a peer running as uid {}", cred.uid());
                continue;
            }
            Err(e) => {
                tracing::warn!("{SOCKET_NAME}: refused a peer whose uid cannot be read: {e}");
                continue;
            }
        }
        tokio::spawn(connection(stream, live.clone(), version.clone(), stop.clone()).in_current_span());
    }
}

/// One attached process: joined at the seam, its history and the live stream written by
/// [`write`], its lines handled by the wire handler until it leaves or the host stops.
async fn connection(stream: UnixStream, live: Arc<LiveSession>, version: String, stop: CancellationToken) {
    let (read, write_half) = stream.into_split();
    let (out, frames) = Outgoing::new(QUEUE_FRAMES, QUEUE_BYTES);
    let out = Arc::new(out);
    let peer = Peer::new(Outbound::queue(out.clone()), "kiwi");
    let projection = Arc::new(WireProjection::new(peer.clone()));
    let granted = projection.granted();
    let (subscriber, history) = live.attach(projection).await;
    tracing::info!("a process attached");
    let writer = tokio::spawn(write(write_half, history.clone(), frames).in_current_span());
    let transport = Local { live: live.clone(), attached: Some(Attached { subscriber, history }) };
    let handler = WireHandler::new(transport, peer.clone(), version).with_grant(granted);
    let closing = out.closing_token();
    let mut lines = BufReader::new(read);
    let mut line = Vec::new();
    loop {
        line.clear();
        let mut limited = (&mut lines).take(MAX_LINE as u64 + 1);
        let read = tokio::select! {
            () = stop.cancelled() => break,
            () = closing.cancelled() => break,
            read = limited.read_until(b'\n', &mut line) => read,
        };
        match read {
            Ok(0) | Err(_) => break,
            Ok(_) if line.len() > MAX_LINE => {
                tracing::warn!("{SOCKET_NAME}: a line longer than {MAX_LINE} bytes; closing the connection");
                break;
            }
            Ok(_) => handler.dispatch_text(&String::from_utf8_lossy(&line)).await,
        }
    }
    live.detach(subscriber);
    // What this process was asked and did not answer is left to the other clients.
    peer.fail_all();
    out.close(1000, "");
    let _ = writer.await;
    tracing::info!("a process detached");
}

/// The history up to the seam, `history_complete`, then the queue until the connection closes.
async fn write(half: tokio::net::unix::OwnedWriteHalf, history: crate::live::History, mut frames: Frames) {
    let closing = frames.closing.clone();
    let mut out = BufWriter::new(half);
    let mut batches = history.stream(HISTORY_BATCH, history_frame);
    loop {
        let batch = tokio::select! {
            batch = batches.next() => batch,
            () = closing.cancelled() => return,
        };
        match batch {
            Some(Ok(batch)) => {
                for frame in batch {
                    if line(&mut out, &frame).await.is_err() {
                        return;
                    }
                }
            }
            Some(Err(e)) => {
                tracing::warn!("{e}");
                return;
            }
            None => break,
        }
    }
    let marker = json!({"jsonrpc": "2.0", "method": "history_complete", "id": uuid::Uuid::new_v4().to_string()});
    if line(&mut out, &marker.to_string()).await.is_err() || out.flush().await.is_err() {
        return;
    }
    loop {
        let frame = tokio::select! {
            biased;
            () = closing.cancelled() => break,
            frame = frames.recv() => frame,
        };
        let Some(frame) = frame else { break };
        if line(&mut out, &frame).await.is_err() {
            return;
        }
        while let Some(more) = frames.try_recv() {
            if line(&mut out, &more).await.is_err() {
                return;
            }
        }
        if out.flush().await.is_err() {
            return;
        }
    }
    let _ = out.shutdown().await;
}

async fn line(out: &mut BufWriter<tokio::net::unix::OwnedWriteHalf>, frame: &str) -> std::io::Result<()> {
    out.write_all(frame.as_bytes()).await?;
    out.write_all(b"\n").await
}
