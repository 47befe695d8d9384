//! Hosting a session on `<session dir>/live.sock` (`docs/host.md`): while a process holds a
//! session's lock, other kiwi processes of the same user attach to it here instead of failing.
//! Each line is one frame of the session WebSocket protocol as newline-delimited JSON: the
//! history up to the attach seam (as stored, `wire::replay::history_frame`), `history_complete`,
//! then the live stream, the requests still waiting and `session_status` (the current one, then
//! each change, `wire::status`); the attacher sends wire 1.10 messages, handled by the one wire
//! handler (`wire::server::WireHandler`) as a `wire::server::Local` client that is attached.
//!
//! Invariants: the folder is `0700` and the socket `0600` before anyone can connect; a peer of
//! another uid is closed without a byte; a file left by a crashed host is replaced (the lock,
//! not the file, says who hosts); the file is removed when the host stops serving. Each
//! connection is one `live::Fanout` subscriber with its own `rpc::Peer`, so request ids are
//! per connection and a response reaches only the connection that asked.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;

use serde_json::json;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader, BufWriter};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::projection::WireProjection;
use super::replay::history_frame;
use super::server::{Attached, Local, WireHandler};
use super::status::{SessionStatus, State, StatusBoard};
use crate::live::LiveSession;
use crate::protocol::{Event, Request};
use crate::rpc::queue::{Frames, Outgoing, QUEUE_BYTES, QUEUE_FRAMES};
use crate::rpc::{Outbound, Peer};
use crate::soul::{ClientAnswer, Projection, TurnResult, TurnTag};

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

/// The longest socket path the kernel takes (`sun_path`, 108 bytes on Linux, with its NUL).
const SUN_PATH: usize = 107;

/// A session's socket as an address to bind or connect to. A session folder can be deeper than
/// `sun_path` allows (a long home, a UUID session id: `…/sessions/<md5>/<uuid>/live.sock`);
/// such a socket is reached through `/proc/self/fd/<the folder>/live.sock`, the folder held
/// open while the address lives.
pub struct Address {
    path: PathBuf,
    _folder: Option<std::fs::File>,
}

impl Address {
    pub fn of(dir: &Path) -> std::io::Result<Self> {
        let path = socket_path(dir);
        if path.as_os_str().len() <= SUN_PATH || !Path::new("/proc/self/fd").is_dir() {
            return Ok(Self { path, _folder: None });
        }
        let folder = std::fs::File::open(dir)?;
        let path =
            PathBuf::from(format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&folder))).join(SOCKET_NAME);
        Ok(Self { path, _folder: Some(folder) })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// A session served on its socket; the file goes when this is dropped.
pub struct Hosting {
    path: PathBuf,
    stop: CancellationToken,
    attached: Arc<AtomicUsize>,
}

impl Hosting {
    /// How many processes are attached now (open connections on the socket).
    pub fn attached(&self) -> usize {
        self.attached.load(Ordering::SeqCst)
    }
}

impl Drop for Hosting {
    fn drop(&mut self) {
        self.stop.cancel();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Starts serving `live` on its folder's socket (on the current runtime), with the status
/// `idle`/`busy` as the turn driver runs turns ([`TurnWatch`]). The caller holds the session's
/// lock, so a file already there is stale and is replaced.
pub fn serve(live: Arc<LiveSession>, version: String) -> std::io::Result<Hosting> {
    let board = Arc::new(StatusBoard::default());
    let watch = Arc::new(TurnWatch::new(live.id(), board.clone()));
    serve_with(live, version, board, Some(watch))
}

/// [`serve`] with the status a front end publishes itself on `board` (`kiwi web`, whose
/// sessions have their own status machine), and optionally a watcher subscribed for the
/// serving's duration.
pub fn serve_with(
    live: Arc<LiveSession>,
    version: String,
    board: Arc<StatusBoard>,
    watch: Option<Arc<TurnWatch>>,
) -> std::io::Result<Hosting> {
    let wire = live.wire_path();
    let dir = wire.parent().ok_or_else(|| std::io::Error::other("the session has no folder"))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    let path = socket_path(dir);
    match std::fs::remove_file(&path) {
        Ok(()) => tracing::info!("replaced a stale {SOCKET_NAME}"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = UnixListener::bind(Address::of(dir)?.path())?;
    // The folder is already owner-only, so no one else can reach the file before this.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    let stop = CancellationToken::new();
    let attached = Arc::new(AtomicUsize::new(0));
    let shared = Shared { live, version, board, stop: stop.clone(), attached: attached.clone() };
    tokio::spawn(accept(listener, shared, watch).in_current_span());
    Ok(Hosting { path, stop, attached })
}

/// What every connection of one hosting shares.
#[derive(Clone)]
struct Shared {
    live: Arc<LiveSession>,
    version: String,
    board: Arc<StatusBoard>,
    stop: CancellationToken,
    attached: Arc<AtomicUsize>,
}

async fn accept(listener: UnixListener, shared: Shared, watch: Option<Arc<TurnWatch>>) {
    let watcher = match watch {
        Some(watch) => Some(shared.live.attach(watch).await.0),
        None => None,
    };
    accept_until_stopped(&listener, &shared).await;
    if let Some(id) = watcher {
        shared.live.detach(id);
    }
}

async fn accept_until_stopped(listener: &UnixListener, shared: &Shared) {
    // SAFETY: geteuid has no preconditions and touches no memory.
    let uid = unsafe { libc::geteuid() };
    let stop = &shared.stop;
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
        tokio::spawn(connection(stream, shared.clone()).in_current_span());
    }
}

/// Counts a connection while it lives.
struct Counted(Arc<AtomicUsize>);

impl Counted {
    fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        Self(count.clone())
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One attached process: joined at the seam, its history and the live stream written by
/// [`write`], its lines handled by the wire handler until it leaves or the host stops.
async fn connection(stream: UnixStream, shared: Shared) {
    let Shared { live, version, board, stop, attached } = shared;
    let _counted = Counted::new(&attached);
    let (read, write_half) = stream.into_split();
    let (out, frames) = Outgoing::new(QUEUE_FRAMES, QUEUE_BYTES);
    let out = Arc::new(out);
    let peer = Peer::new(Outbound::queue(out.clone()), "kiwi");
    let projection = Arc::new(WireProjection::new(peer.clone()));
    let granted = projection.granted();
    let (subscriber, history) = live.attach(projection).await;
    // Behind what arrived live since the seam: sent after `history_complete`.
    board.join(&out);
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

/// The status of a session whose front end has no status machine of its own (`kiwi --wire`):
/// `idle` (`start`) when serving starts, `busy` (`prompt`) when a turn begins, `idle`
/// (`prompt_complete` / `prompt_error`) when it ends. Subscribed to the session like a client
/// that never answers.
pub struct TurnWatch {
    status: Mutex<SessionStatus>,
    board: Arc<StatusBoard>,
}

impl TurnWatch {
    pub fn new(session_id: &str, board: Arc<StatusBoard>) -> Self {
        let start =
            SessionStatus { worker_id: Some(uuid::Uuid::new_v4().to_string()), ..SessionStatus::stopped(session_id) }
                .next(State::Idle, "start", None);
        board.publish(start.frame());
        Self { status: Mutex::new(start), board }
    }

    fn set(&self, state: State, reason: &str) {
        let mut status = self.status.lock().unwrap_or_else(|p| p.into_inner());
        if status.state == state && status.reason.as_deref() == Some(reason) {
            return;
        }
        *status = status.next(state, reason, None);
        self.board.publish(status.frame());
    }

    fn ended(&self, result: &TurnResult) {
        self.set(State::Idle, if result.is_ok() { "prompt_complete" } else { "prompt_error" });
    }
}

impl Projection for TurnWatch {
    fn event<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, ()> {
        if matches!(event, Event::TurnBegin { .. }) {
            self.set(State::Busy, "prompt");
        }
        Box::pin(async {})
    }

    // Never answers: the clients do.
    fn request(&self, _request: Request) -> BoxFuture<'_, oneshot::Receiver<ClientAnswer>> {
        unanswered()
    }

    fn turn_ended(&self, _tag: TurnTag, result: TurnResult) -> BoxFuture<'_, ()> {
        self.ended(&result);
        Box::pin(async {})
    }

    fn turn_observed<'a>(&'a self, result: &'a TurnResult) -> BoxFuture<'a, ()> {
        self.ended(result);
        Box::pin(async {})
    }
}

/// The answer of a subscriber that only watches (never answers a request): the sender is
/// dropped at once, which tells the fan-out so, and the other clients answer.
#[allow(clippy::async_yields_async)]
pub fn unanswered() -> BoxFuture<'static, oneshot::Receiver<ClientAnswer>> {
    let (_, answer) = oneshot::channel();
    Box::pin(async move { answer })
}

async fn line(out: &mut BufWriter<tokio::net::unix::OwnedWriteHalf>, frame: &str) -> std::io::Result<()> {
    out.write_all(frame.as_bytes()).await?;
    out.write_all(b"\n").await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deep_folder_is_reached_through_its_descriptor() {
        let root = tempfile::tempdir().unwrap();
        let deep = root.path().join("d".repeat(100)).join("e".repeat(40));
        std::fs::create_dir_all(&deep).unwrap();
        let address = Address::of(&deep).unwrap();
        assert!(address.path().as_os_str().len() <= SUN_PATH, "{}", address.path().display());
        let listener = std::os::unix::net::UnixListener::bind(address.path()).unwrap();
        assert!(socket_path(&deep).exists(), "the socket is made in the folder itself");
        let _client = std::os::unix::net::UnixStream::connect(Address::of(&deep).unwrap().path()).unwrap();
        assert!(listener.accept().is_ok());
        let short = Address::of(root.path()).unwrap();
        assert_eq!(short.path(), socket_path(root.path()));
    }
}
