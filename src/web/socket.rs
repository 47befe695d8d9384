//! The WebSocket `/api/sessions/{session_id}/stream` (`docs/web.md` §4): one client of one
//! hosted session, speaking the Kimi Wire protocol 1.10 as a stdio client would, plus the
//! server's `history_complete` and `session_status` messages. This is a transport only: its
//! frames go through the one wire handler (`wire::server`), with the web's rules ([`Socket`]);
//! its history comes from the one history replay (`live::history`).
//!
//! A connection: the handshake checks (LAN-only, Origin, the `token` query parameter, a UUID
//! id; each refused with HTTP 403 before the upgrade); the session is started if it is not
//! running; the socket attaches at the seam; the writer sends `wire.jsonl` up to the seam as it
//! is stored, then `history_complete`, then everything queued since (the live stream, any
//! request still waiting for an answer, the status snapshot); then the client's frames are
//! handed to the wire handler one by one.
//!
//! Invariants: each message of the session reaches the socket exactly once (history or live);
//! answers to a socket's own requests go to that socket only, while a `prompt`'s answer and an
//! idle `cancel`'s answer go to every socket; a frame that is not a valid message is answered
//! with the JSON-RPC error the stdio server would give (to this socket only) and the socket
//! stays open; nothing here waits on another socket.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt as _, StreamExt as _};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::guard::socket_refusal;
use super::hosted::{Client, Hosted, Hosting, Reach, SessionStatus, State as Status};
use super::queue::{CLOSE_NOT_FOUND, Frames, NOT_FOUND_REASON, Outgoing, QUEUE_BYTES, QUEUE_FRAMES};
use super::state::AppState;
use crate::live::history::Batches;
use crate::live::{History, LiveSession};
use crate::protocol::{ContentPart, UserInput};
use crate::rpc::writer::encode;
use crate::rpc::{ErrorCode, ErrorObject, RequestId};
use crate::session::store::Metadata;
use crate::wire::errors::WireError;
use crate::wire::params::InitializeParams;
use crate::wire::replay::history_frame;
use crate::wire::server::{Transport, WireHandler, busy};

/// The prompt text the reference UI sends with attachments and no message of its own.
pub const UPLOAD_ONLY_MARKER: &str = "KIMI_FILE_UPLOAD_WITHOUT_MESSAGE";
/// The largest frame a client may send.
pub(super) const MAX_CLIENT_FRAME: usize = 16 * 1024 * 1024;
/// The socket's read buffer. Clients send small frames (a prompt, an answer); a larger one
/// grows the buffer while it is read. tungstenite's default, 128 KiB per socket allocated up
/// front, was most of what a connected browser cost (`docs/web.md` §4.1).
const READ_BUFFER: usize = 4 * 1024;
/// Bytes gathered before a write to the connection (a flush writes at once whatever waits): a
/// history batch goes out in writes of about this size instead of one per frame, and the
/// buffer does not grow to a whole batch.
const WRITE_BUFFER: usize = 8 * 1024;
/// History frames read ahead of the socket.
const HISTORY_BATCH: usize = 512;

/// A socket's frame limits and buffers, the same for every WebSocket of the server (the
/// session socket and `/api/acp`).
pub(super) fn sized(ws: WebSocketUpgrade) -> WebSocketUpgrade {
    ws.max_message_size(MAX_CLIENT_FRAME)
        .max_frame_size(MAX_CLIENT_FRAME)
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(WRITE_BUFFER)
}

/// The upgrade, after the handshake checks of `docs/web.md` §4.1 and §8 item 3.
pub async fn upgrade(
    State(state): State<AppState>,
    Path(session_id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    slot: Option<axum::Extension<super::listen::Slot>>,
    ws: WebSocketUpgrade,
) -> Response {
    if let Some(why) = socket_refusal(&state.settings, peer, &headers, query.get("token").map(String::as_str)) {
        tracing::info!("WebSocket from {peer} refused: {why}");
        return StatusCode::FORBIDDEN.into_response();
    }
    let Ok(id) = uuid::Uuid::parse_str(&session_id) else {
        tracing::info!("WebSocket for a session id that is not a UUID refused");
        return StatusCode::FORBIDDEN.into_response();
    };
    let id = id.hyphenated().to_string();
    // Everything logged for this socket, and for the turns it starts, carries the session id.
    let span = tracing::info_span!("session", id = %id);
    sized(ws).on_upgrade(move |socket| {
        // The connection's place under the cap stays taken while the socket lives.
        let slot = slot;
        async move {
            serve(state, id, socket).await;
            drop(slot);
        }
        .instrument(span)
    })
}

async fn serve(state: AppState, id: String, socket: WebSocket) {
    let (mut sink, mut stream) = socket.split();
    let hosting = state.hosting.clone();
    let hosting_version = hosting.version().to_string();
    let not_found = CloseFrame { code: CLOSE_NOT_FOUND, reason: Utf8Bytes::from_static(NOT_FOUND_REASON) };
    let Some(hosted) = hosting.entry(&id) else {
        let _ = sink.send(Message::Close(Some(not_found))).await;
        return;
    };
    let reached = match reach(&hosting, &hosted).await {
        Ok(Reached::Elsewhere(host)) => {
            super::relay::run(host, sink, stream, &id, hosting.closing()).await;
            return;
        }
        Ok(Reached::Local(started)) => Ok(started),
        Err(e) => Err(e),
    };
    let (out, frames) = Outgoing::new(QUEUE_FRAMES, QUEUE_BYTES);
    let client = hosted.client(out);
    let opened = match reached {
        Ok(started) => hosted
            .attach(&client)
            .await
            .map(|history| (started, history))
            .ok_or_else(|| "the session closed while the client joined".to_string()),
        Err(e) => Err(e),
    };
    let (started, history) = match opened {
        Ok(opened) => opened,
        // Deleted while this socket connected: as if it had never been there.
        Err(_) if hosted.is_gone() => {
            let _ = sink.send(Message::Close(Some(not_found))).await;
            return;
        }
        Err(e) => {
            tracing::warn!("session {id} could not be started: {e}");
            let status = SessionStatus {
                state: Status::Error,
                reason: Some("initialization_failed".into()),
                detail: Some(e),
                ..SessionStatus::stopped(&id)
            };
            let _ = sink.send(Message::Text(status.frame().into())).await;
            let _ = sink.send(Message::Close(None)).await;
            return;
        }
    };
    let status = hosted.status().frame();
    if started {
        // What every socket heard when the session started; this one was not attached yet.
        client.push(&status);
    }
    client.push(&status);
    let answered = Arc::new(AtomicBool::new(true));
    tracing::info!("a client joined");
    let writer = tokio::spawn(write(sink, history, frames, client.clone(), answered.clone()).in_current_span());
    let socket = Socket { hosting, hosted: hosted.clone(), client: client.clone(), prompted: AtomicBool::new(false) };
    let handler = WireHandler::new(socket, client.peer.clone(), hosting_version).with_grant(client.granted.clone());
    let closing = client.out().closing_token();
    loop {
        let message = tokio::select! {
            message = stream.next() => message,
            () = closing.cancelled() => break,
        };
        if matches!(message, Some(Ok(_))) {
            answered.store(true, Ordering::Relaxed);
        }
        match message {
            Some(Ok(Message::Text(text))) => handler.dispatch_text(text.as_str()).await,
            Some(Ok(Message::Binary(_))) => tracing::info!("ignoring a binary WebSocket frame"),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            Some(Ok(Message::Close(_))) | None => break,
            Some(Err(e)) => {
                tracing::info!("WebSocket read failed: {e}");
                break;
            }
        }
    }
    hosted.detach(&client);
    // What this socket was asked and did not answer is left to the other clients.
    client.peer.fail_all();
    tracing::info!("a client left");
    client.out().close(1000, "");
    let _ = writer.await;
}

/// How a socket reaches its session.
enum Reached {
    /// Open here (`true`: started for this socket).
    Local(bool),
    /// Hosted by another process: relayed to its `live.sock`.
    Elsewhere(super::relay::Host),
}

/// The session open here, or its host's socket when another process holds it. A host that
/// cannot be reached is waited for as `docs/host.md` says: up to 2 s for its lock, then the
/// session is opened here, or the socket hears today's error.
async fn reach(hosting: &Hosting, hosted: &Arc<Hosted>) -> Result<Reached, String> {
    let dir = &hosted.place.session_dir;
    let mut waited = false;
    loop {
        match hosted.reach(hosting).await? {
            Reach::Local { started } => return Ok(Reached::Local(started)),
            Reach::Elsewhere => match super::relay::connect(dir).await {
                Ok(host) => return Ok(Reached::Elsewhere(host)),
                Err(e) if !waited => {
                    tracing::warn!("cannot reach the process that hosts the session: {e}; waiting for its lock");
                    super::relay::wait_for_lock(dir).await;
                    waited = true;
                }
                Err(e) => {
                    tracing::warn!("cannot reach the process that hosts the session: {e}");
                    return Err(format!("Session {} is in use by another process", hosted.id()));
                }
            },
        }
    }
}

/// How long one write to a socket may take: a peer that stops reading is dropped then (its
/// frames would otherwise wait in memory for ever; issue 30 item 7).
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the close frame may take to leave (a peer too slow for its frames is not waited for).
const CLOSE_TIMEOUT: Duration = Duration::from_secs(1);
/// A socket with nothing to send is pinged this often; one that has not answered (any frame
/// counts) since the previous ping is closed.
const PING_INTERVAL: Duration = Duration::from_secs(30);

/// One write, bounded by [`WRITE_TIMEOUT`] and given up as soon as the socket is to be closed
/// (so a close asked for on overflow does not queue behind the backlog); whether it went out.
async fn bounded<E>(closing: &CancellationToken, write: impl Future<Output = Result<(), E>>) -> bool {
    tokio::select! {
        biased;
        () = closing.cancelled() => false,
        done = tokio::time::timeout(WRITE_TIMEOUT, write) => matches!(done, Ok(Ok(()))),
    }
}

/// The history up to the seam, `history_complete`, then the queue until the socket closes; pings
/// when idle. `answered` is set by the reader whenever the peer sends anything.
async fn write(
    mut sink: futures::stream::SplitSink<WebSocket, Message>,
    history: History,
    mut frames: Frames,
    client: Arc<Client>,
    answered: Arc<AtomicBool>,
) {
    let closing = frames.closing.clone();
    let mut batches = read_history(history);
    let mut open = true;
    while open {
        let batch = tokio::select! {
            batch = batches.next() => batch,
            () = closing.cancelled() => break,
        };
        let batch = match batch {
            Some(Ok(batch)) => batch,
            Some(Err(e)) => {
                tracing::warn!("{e}");
                break;
            }
            None => break,
        };
        for frame in batch {
            open = open && bounded(&closing, sink.feed(Message::Text(frame.into()))).await;
        }
        open = open && bounded(&closing, sink.flush()).await;
    }
    if open && !closing.is_cancelled() {
        let marker = json!({"jsonrpc": "2.0", "method": "history_complete", "id": uuid::Uuid::new_v4().to_string()});
        open = bounded(&closing, sink.send(Message::Text(marker.to_string().into()))).await;
    }
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + PING_INTERVAL, PING_INTERVAL);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while open {
        tokio::select! {
            biased;
            () = closing.cancelled() => break,
            frame = frames.recv() => {
                let Some(frame) = frame else { break };
                open = bounded(&closing, sink.feed(Message::Text(frame.into()))).await;
                while open && let Some(more) = frames.try_recv() {
                    open = bounded(&closing, sink.feed(Message::Text(more.into()))).await;
                }
                open = open && bounded(&closing, sink.flush()).await;
                ping.reset();
            }
            _ = ping.tick() => {
                open = answered.swap(false, Ordering::Relaxed)
                    && bounded(&closing, sink.send(Message::Ping(Default::default()))).await;
                if !open {
                    tracing::info!("a WebSocket client stopped answering; closing it");
                }
            }
        }
    }
    if !closing.is_cancelled() {
        // A write failed or timed out, or a ping went unanswered: the connection is dropped.
        client.out().close(1000, "");
        return;
    }
    // The backlog is dropped with the queue; the close frame gets a moment to leave (behind what
    // the socket already holds), and a peer that does not read meanwhile is dropped without it.
    if let Some(close) = client.out().close_reason() {
        let frame = CloseFrame { code: close.code, reason: close.reason.into() };
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, sink.send(Message::Close(Some(frame)))).await;
    }
}

/// The history up to the seam, as stored (`docs/web.md` §4.3.1), in batches read ahead of the
/// socket by the one history replay.
fn read_history(history: History) -> Batches<String> {
    history.stream(HISTORY_BATCH, history_frame)
}

/// The busy answer to a second `prompt` (`docs/web.md` §4.4).
fn busy_prompt() -> ErrorObject {
    WireError::InvalidState.with_message("Session is busy; wait for completion before sending a new prompt.")
}

/// The browser socket's rules for the one wire handler (`docs/web.md` §4.4): the session is
/// started by the first message that needs it; a `prompt` needs no other prompt in flight (the
/// web's busy wording), carries the session's pending uploads, and the connection's first marks
/// the session as its work dir's last; an idle `cancel` is answered by the server, to every
/// socket; the last `initialize` is kept for a restarted session.
struct Socket {
    hosting: Hosting,
    hosted: Arc<Hosted>,
    client: Arc<Client>,
    /// This connection sent a prompt already.
    prompted: AtomicBool,
}

impl Transport for Socket {
    async fn session(&self) -> Result<Arc<LiveSession>, ErrorObject> {
        // A session that is not running (a restart failed) is started by the next message.
        if !self.hosted.is_running()
            && let Err(e) = self.hosted.ensure_started(&self.hosting).await
        {
            return Err(ErrorCode::InternalError.with_message(e));
        }
        if self.client.subscriber().is_none() {
            self.hosted.attach(&self.client).await;
        }
        self.hosted.live().ok_or_else(|| ErrorCode::InternalError.with_message("The session is not running"))
    }

    fn running(&self) -> Option<Arc<LiveSession>> {
        self.hosted.live()
    }

    async fn prompt(&self, _live: Arc<LiveSession>, id: RequestId, input: UserInput) -> Result<(), ErrorObject> {
        if !self.hosted.begin_prompt(&id) {
            return Err(busy_prompt());
        }
        if !self.prompted.swap(true, Ordering::Relaxed) {
            remember_last_session(self.hosting.share_dir().to_path_buf(), &self.hosted).await;
        }
        let uploads = self.hosted.take_uploads(&self.hosting).await;
        let input = rewrite_input(input, uploads);
        if !self.hosted.start_turn(&self.client, input, id) {
            return Err(busy());
        }
        Ok(())
    }

    fn idle_cancel(&self, id: &RequestId) -> bool {
        if self.hosted.is_busy() {
            return false;
        }
        if let Some(line) = encode(&json!({"jsonrpc": "2.0", "id": id, "result": {}})) {
            let text = String::from_utf8_lossy(line.strip_suffix(b"\n").unwrap_or(&line)).into_owned();
            self.hosted.broadcast(&text);
        }
        true
    }

    fn initializing(&self, params: &InitializeParams) {
        self.hosted.remember_initialize(params);
    }
}

/// The prompt's input as the session gets it: `pending` (uploads) first, then a string as one
/// text part (the upload-only marker as none) or the parts as they are.
pub fn rewrite_input(input: UserInput, mut pending: Vec<ContentPart>) -> UserInput {
    match input {
        UserInput::Text(text) if text == UPLOAD_ONLY_MARKER => {}
        UserInput::Text(text) => pending.push(ContentPart::Text { text }),
        UserInput::Parts(parts) => pending.extend(parts),
    }
    UserInput::Parts(pending)
}

/// `kimi.json`: the session becomes its work dir's `last_session_id`.
async fn remember_last_session(share: PathBuf, hosted: &Hosted) {
    let work = hosted.place.work_dir.to_string_lossy().to_string();
    let id = hosted.place.id.clone();
    let updated = tokio::task::spawn_blocking(move || {
        Metadata::update(&share, |meta| {
            let entry = meta.entry_mut(&work);
            if entry.last_session_id.as_deref() == Some(id.as_str()) {
                return false;
            }
            entry.last_session_id = Some(id);
            true
        })
    })
    .await;
    if let Ok(Err(e)) = updated {
        tracing::warn!("cannot update kimi.json: {e}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_become_parts_after_the_uploads() {
        let text = |t: &str| ContentPart::Text { text: t.into() };
        assert_eq!(rewrite_input(UserInput::Text("hello".into()), vec![]), UserInput::Parts(vec![text("hello")]));
        assert_eq!(
            rewrite_input(UserInput::Text(UPLOAD_ONLY_MARKER.into()), vec![text("<uploaded_files>")]),
            UserInput::Parts(vec![text("<uploaded_files>")])
        );
        assert_eq!(
            rewrite_input(UserInput::Parts(vec![text("a")]), vec![text("u")]),
            UserInput::Parts(vec![text("u"), text("a")])
        );
    }
}
