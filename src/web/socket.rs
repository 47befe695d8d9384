//! The WebSocket `/api/sessions/{session_id}/stream` (`docs/web.md` §4): one client of one
//! hosted session, speaking the Kimi Wire protocol 1.10 as a stdio client would, plus the
//! server's `history_complete` and `session_status` messages.
//!
//! A connection: the handshake checks (LAN-only, Origin, the `token` query parameter, a UUID
//! id; each refused with HTTP 403 before the upgrade); the session is started if it is not
//! running; the socket attaches at the seam; the writer sends `wire.jsonl` up to the seam as it
//! is stored, then `history_complete`, then everything queued since (the live stream, any
//! request still waiting for an answer, the status snapshot); then the client's frames are
//! handled one by one.
//!
//! Invariants: each message of the session reaches the socket exactly once (history or live);
//! answers to a socket's own requests go to that socket only, while a `prompt`'s answer and an
//! idle `cancel`'s answer go to every socket; a frame that is not a valid message is answered
//! with the JSON-RPC error the stdio server would give (to this socket only) and the socket
//! stays open; nothing here waits on another socket.

use std::collections::HashMap;
use std::io::{BufRead as _, Read as _};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::{SinkExt as _, StreamExt as _};
use serde_json::json;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::guard::token_matches;
use super::hosted::{Client, Hosted, Hosting, SessionStatus, State as Status};
use super::queue::{CLOSE_NOT_FOUND, Frames, NOT_FOUND_REASON, Outgoing, QUEUE_BYTES, QUEUE_FRAMES};
use super::settings::is_private;
use super::state::AppState;
use crate::live::History;
use crate::protocol::{ContentPart, StatusUpdate, UserInput, WireMessage};
use crate::rpc::message::classify;
use crate::rpc::writer::encode;
use crate::rpc::{ErrorCode, ErrorObject, Incoming, RequestId};
use crate::session::store::Metadata;
use crate::wire::errors::WireError;
use crate::wire::frames::{event_frame, request_frame, request_id};
use crate::wire::methods::{ClientNotification, ClientRequest};
use crate::wire::params::{
    Empty, InterruptResult, OkStatus, ReplayResult, ReplayStatus, SetPlanModeResult, SteerResult,
};
use crate::wire::server::{busy, idle, initialize_agent};

/// The prompt text the reference UI sends with attachments and no message of its own.
pub const UPLOAD_ONLY_MARKER: &str = "KIMI_FILE_UPLOAD_WITHOUT_MESSAGE";
/// The largest frame a client may send.
const MAX_CLIENT_FRAME: usize = 16 * 1024 * 1024;
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
    if let Some(why) = refusal(&state, peer, &headers, query.get("token").map(String::as_str)) {
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
    ws.max_message_size(MAX_CLIENT_FRAME)
        .max_frame_size(MAX_CLIENT_FRAME)
        .read_buffer_size(READ_BUFFER)
        .write_buffer_size(WRITE_BUFFER)
        .on_upgrade(move |socket| {
            // The connection's place under the cap stays taken while the socket lives.
            let slot = slot;
            async move {
                serve(state, id, socket).await;
                drop(slot);
            }
            .instrument(span)
        })
}

/// Why a handshake is refused: a client outside the LAN (LAN-only), an Origin the CORS rule
/// does not allow (checked in every mode; no Origin passes), a missing or wrong token (only the
/// query parameter counts).
fn refusal(state: &AppState, peer: SocketAddr, headers: &HeaderMap, token: Option<&str>) -> Option<&'static str> {
    let settings = &state.settings;
    if settings.lan_only && !is_private(peer.ip()) {
        return Some("not on the local network");
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let allowed = origin.to_str().is_ok_and(|o| settings.origin_allowed(o));
        if !allowed {
            return Some("origin not allowed");
        }
    }
    if let Some(expected) = &settings.token
        && !token.is_some_and(|t| token_matches(t.trim(), expected))
    {
        return Some("missing or wrong token");
    }
    None
}

async fn serve(state: AppState, id: String, socket: WebSocket) {
    let (mut sink, mut stream) = socket.split();
    let hosting = state.hosting.clone();
    let not_found = CloseFrame { code: CLOSE_NOT_FOUND, reason: Utf8Bytes::from_static(NOT_FOUND_REASON) };
    let Some(hosted) = hosting.entry(&id) else {
        let _ = sink.send(Message::Close(Some(not_found))).await;
        return;
    };
    let (out, frames) = Outgoing::new(QUEUE_FRAMES, QUEUE_BYTES);
    let client = hosted.client(out);
    let opened = match hosted.ensure_started(&hosting).await {
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
    let mut connection = Connection { hosting, hosted: hosted.clone(), client: client.clone(), prompted: false };
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
            Some(Ok(Message::Text(text))) => connection.dispatch(text.as_str()).await,
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
    tracing::info!("a client left");
    client.out().close(1000, "");
    let _ = writer.await;
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
            batch = batches.recv() => batch,
            () = closing.cancelled() => break,
        };
        let Some(batch) = batch else { break };
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

/// Reads `wire.jsonl` up to the seam on a blocking thread, in batches of frames.
fn read_history(history: History) -> mpsc::Receiver<Vec<String>> {
    let (tx, rx) = mpsc::channel(4);
    tokio::task::spawn_blocking(move || {
        let Ok(file) = std::fs::File::open(&history.path) else { return };
        let mut lines = std::io::BufReader::with_capacity(256 * 1024, file.take(history.len));
        let mut batch = Vec::with_capacity(HISTORY_BATCH);
        let mut line = String::new();
        loop {
            line.clear();
            match lines.read_line(&mut line) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!("cannot read {}: {e}", history.path.display());
                    break;
                }
            }
            if let Some(frame) = history_frame(&line) {
                batch.push(frame);
                if batch.len() == HISTORY_BATCH && tx.blocking_send(std::mem::take(&mut batch)).is_err() {
                    return;
                }
            }
        }
        if !batch.is_empty() {
            let _ = tx.blocking_send(batch);
        }
    });
    rx
}

/// The `type`s a `wire.jsonl` record's message may have (`docs/web.md` §4.3.1): the events
/// (with the legacy `ApprovalRequestResolved`) and the requests of the wire protocol.
const EVENT_TYPES: &[&str] = &[
    "TurnBegin",
    "TurnEnd",
    "StepBegin",
    "StepInterrupted",
    "StepRetry",
    "SteerInput",
    "CompactionBegin",
    "CompactionEnd",
    "StatusUpdate",
    "ContentPart",
    "ToolCall",
    "ToolCallPart",
    "ToolResult",
    "ApprovalResponse",
    "ApprovalRequestResolved",
    "PlanDisplay",
    "HookTriggered",
    "HookResolved",
    "MCPLoadingBegin",
    "MCPLoadingEnd",
    "Notification",
    "SubagentEvent",
    "BtwBegin",
    "BtwEnd",
];
const REQUEST_TYPES: &[&str] = &["ApprovalRequest", "ToolCallRequest", "QuestionRequest", "HookRequest"];

/// A `wire.jsonl` record, its message kept as the bytes it was stored as.
#[derive(serde::Deserialize)]
struct StoredRecord<'a> {
    #[serde(borrow)]
    message: &'a serde_json::value::RawValue,
}

/// What the replay needs of a stored message: its type, and a request's payload id.
#[derive(serde::Deserialize)]
struct StoredMessage<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    payload: Option<&'a serde_json::value::RawValue>,
}

#[derive(serde::Deserialize)]
struct StoredRequest<'a> {
    #[serde(borrow)]
    id: std::borrow::Cow<'a, str>,
}

/// One `wire.jsonl` record as the socket's replay sends it (`docs/web.md` §4.3.1): the stored
/// message as it is (not upgraded, its bytes spliced in, never parsed into a tree) as an
/// `event`, or as a `request` with its payload's id; `None` for the header, blank lines and
/// records whose message has no wire message `type`.
pub fn history_frame(line: &str) -> Option<String> {
    let line = line.trim();
    if line.is_empty() {
        return None;
    }
    let record: StoredRecord = serde_json::from_str(line).ok()?;
    let raw = record.message.get();
    let message: StoredMessage = serde_json::from_str(raw).ok()?;
    let mut frame = String::with_capacity(raw.len() + 64);
    if EVENT_TYPES.contains(&message.kind.as_ref()) {
        frame.push_str(r#"{"jsonrpc":"2.0","method":"event","params":"#);
    } else if REQUEST_TYPES.contains(&message.kind.as_ref()) {
        let request: StoredRequest = serde_json::from_str(message.payload?.get()).ok()?;
        frame.push_str(r#"{"jsonrpc":"2.0","method":"request","id":"#);
        frame.push_str(&serde_json::to_string(&request.id).ok()?);
        frame.push_str(r#","params":"#);
    } else {
        return None;
    }
    frame.push_str(raw);
    frame.push('}');
    Some(frame)
}

/// The busy answer to a second `prompt` (`docs/web.md` §4.4).
fn busy_prompt() -> ErrorObject {
    WireError::InvalidState.with_message("Session is busy; wait for completion before sending a new prompt.")
}

/// One socket's handling of its client's frames.
struct Connection {
    hosting: Hosting,
    hosted: Arc<Hosted>,
    client: Arc<Client>,
    /// This connection sent a prompt already (the first one marks the session as the work
    /// dir's last).
    prompted: bool,
}

impl Connection {
    async fn dispatch(&mut self, text: &str) {
        match classify(text.as_bytes()) {
            Incoming::Request { id, method, params } => match ClientRequest::parse(&method, params) {
                Ok(request) => self.handle(id, request).await,
                Err(e) => {
                    tracing::info!("refusing a `{method}` frame: {}", e.message);
                    self.error(Some(&id), &e);
                }
            },
            Incoming::Notification { method, .. } => match ClientNotification::parse(&method) {
                Some(ClientNotification::Interrupt) => {
                    if let Some(live) = self.hosted.live() {
                        live.driver().cancel();
                    }
                }
                None => tracing::info!("dropping `{method}` sent as a notification"),
            },
            Incoming::Response { id, outcome } => {
                if !self.client.answered(&id, outcome) {
                    tracing::info!("ignoring a response to unknown or answered request {id}");
                }
            }
            Incoming::Reject { id, error } => {
                tracing::info!("malformed WebSocket frame: {}", error.message);
                self.error(id.as_ref(), &error);
            }
            Incoming::Ignore => {}
        }
    }

    fn respond<T: serde::Serialize>(&self, id: &RequestId, result: &T) {
        #[derive(serde::Serialize)]
        struct Frame<'a, T> {
            jsonrpc: &'static str,
            id: &'a RequestId,
            result: &'a T,
        }
        if let Some(line) = encode(&Frame { jsonrpc: "2.0", id, result }) {
            self.client.out().push_line(line);
        }
    }

    fn error(&self, id: Option<&RequestId>, error: &ErrorObject) {
        #[derive(serde::Serialize)]
        struct Frame<'a> {
            jsonrpc: &'static str,
            id: Option<&'a RequestId>,
            error: &'a ErrorObject,
        }
        if let Some(line) = encode(&Frame { jsonrpc: "2.0", id, error }) {
            self.client.out().push_line(line);
        }
    }

    async fn handle(&mut self, id: RequestId, request: ClientRequest) {
        // A session that is not running (a restart failed) is started by the next message.
        if !self.hosted.is_running()
            && let Err(e) = self.hosted.ensure_started(&self.hosting).await
        {
            self.error(Some(&id), &ErrorCode::InternalError.with_message(e));
            return;
        }
        if self.client.subscriber().is_none() {
            self.hosted.attach(&self.client).await;
        }
        let Some(live) = self.hosted.live() else {
            self.error(Some(&id), &ErrorCode::InternalError.with_message("The session is not running"));
            return;
        };
        let driver = live.driver().clone();
        match request {
            ClientRequest::Initialize(params) => {
                if driver.is_busy() {
                    self.error(Some(&id), &busy());
                    return;
                }
                self.hosted.remember_initialize(&params);
                let result = initialize_agent(&driver, params, self.hosting.version());
                self.client.granted.set(result.extensions.as_deref());
                self.respond(&id, &result);
            }
            ClientRequest::Prompt(params) => self.prompt(id, params.user_input).await,
            ClientRequest::Run(input) => self.prompt(id, input).await,
            ClientRequest::Steer(params) => match driver.steer(params.user_input) {
                Ok(()) => self.respond(&id, &SteerResult::Steered),
                Err(_) => self.error(Some(&id), &idle()),
            },
            ClientRequest::SetPlanMode(params) => {
                let view = driver.agent().state.set_plan_mode(params.enabled);
                driver.sink().emit(crate::protocol::Event::StatusUpdate(StatusUpdate::plan_mode(view.active))).await;
                self.respond(&id, &SetPlanModeResult { status: OkStatus::Ok, plan_mode: view.active });
            }
            ClientRequest::Replay => self.replay(id, &driver, live.wire_path()),
            ClientRequest::Fork(params) => match crate::wire::server::fork_session(&driver, params.turn_index).await {
                Ok(result) => self.respond(&id, &result),
                Err(error) => self.error(Some(&id), &error),
            },
            ClientRequest::Undo(params) => match crate::wire::server::undo_session(&driver, params).await {
                Ok(result) => self.respond(&id, &result),
                Err(error) => self.error(Some(&id), &error),
            },
            ClientRequest::Cancel => {
                if !self.hosted.is_busy() {
                    // The server answers an idle cancel itself, to every socket.
                    if let Some(line) = encode(&json!({"jsonrpc": "2.0", "id": id, "result": {}})) {
                        let text = String::from_utf8_lossy(line.strip_suffix(b"\n").unwrap_or(&line)).into_owned();
                        self.hosted.broadcast(&text);
                    }
                    return;
                }
                match driver.cancel_handle() {
                    Some(token) => {
                        // The answer goes out before the cancelled prompt's.
                        self.respond(&id, &Empty {});
                        token.cancel();
                    }
                    None => self.error(Some(&id), &idle()),
                }
            }
            ClientRequest::Interrupt => {
                let result = if driver.cancel() { InterruptResult::Ok } else { InterruptResult::Idle };
                self.respond(&id, &result);
            }
        }
    }

    /// `prompt` (`docs/web.md` §4.4): refused while another is in flight; the first of this
    /// connection marks the session as its work dir's last; the input always becomes a list of
    /// parts, pending uploads first.
    async fn prompt(&mut self, id: RequestId, input: UserInput) {
        if !self.hosted.begin_prompt(&id) {
            self.error(Some(&id), &busy_prompt());
            return;
        }
        if !self.prompted {
            self.prompted = true;
            remember_last_session(self.hosting.share_dir().to_path_buf(), &self.hosted).await;
        }
        let uploads = self.hosted.take_uploads(&self.hosting).await;
        let input = rewrite_input(input, uploads);
        if !self.hosted.start_turn(&self.client, input, id.clone()) {
            self.error(Some(&id), &busy());
        }
    }

    /// `replay`, answered to this socket only: the session's record in the current schema.
    fn replay(&self, id: RequestId, driver: &Arc<crate::soul::TurnDriver>, path: PathBuf) {
        let Ok(claim) = driver.claim() else {
            self.error(Some(&id), &busy());
            return;
        };
        driver.sink().flush_record();
        let client = self.client.clone();
        tokio::spawn(async move {
            let mut result = ReplayResult { status: ReplayStatus::Finished, events: 0, requests: 0 };
            let records = tokio::task::spawn_blocking(move || -> Result<Vec<Vec<u8>>, String> {
                let Some(records) = crate::session::wire_read::open(&path).map_err(|e| e.to_string())? else {
                    return Ok(Vec::new());
                };
                let mut frames = Vec::new();
                for record in records {
                    match record.map_err(|e| e.to_string())? {
                        WireMessage::Event(event) => frames.push(event_frame(&event)),
                        WireMessage::Request(request) => {
                            if let Some(frame) = request_frame(&request_id(&request), &request) {
                                frames.push(frame);
                            }
                        }
                    }
                }
                Ok(frames)
            })
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r);
            let connection_out = client.out();
            match records {
                Ok(frames) => {
                    for frame in frames {
                        if claim.cancel.is_cancelled() {
                            result.status = ReplayStatus::Cancelled;
                            break;
                        }
                        if frame.starts_with(b"{\"jsonrpc\":\"2.0\",\"method\":\"request\"") {
                            result.requests += 1;
                        } else {
                            result.events += 1;
                        }
                        if !connection_out.push_line(frame) {
                            return;
                        }
                    }
                    if let Some(line) = encode(&json!({"jsonrpc": "2.0", "id": id, "result": result})) {
                        connection_out.push_line(line);
                    }
                }
                Err(e) => {
                    tracing::error!("replay failed: {e}");
                    let error = ErrorCode::InternalError.with_message("Replay failed");
                    if let Some(line) = encode(&json!({"jsonrpc": "2.0", "id": id, "error": error})) {
                        connection_out.push_line(line);
                    }
                }
            }
            drop(claim);
        });
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
    use serde_json::Value;

    use super::*;

    #[test]
    fn history_records_are_sent_as_stored() {
        let header = r#"{"type":"metadata","protocol_version":"1.10"}"#;
        assert_eq!(history_frame(header), None);
        assert_eq!(history_frame("  \n"), None);
        assert_eq!(history_frame("not json"), None);
        assert_eq!(history_frame(r#"{"timestamp":1,"message":{"type":"Nope","payload":{}}}"#), None);
        let event =
            r#"{"timestamp":1.5,"message":{"type":"ContentPart","payload":{"type":"text","text":"Hello web"}}}"#;
        assert_eq!(
            history_frame(event).unwrap(),
            r#"{"jsonrpc":"2.0","method":"event","params":{"type":"ContentPart","payload":{"type":"text","text":"Hello web"}}}"#
        );
        let question = r#"{"timestamp":2,"message":{"type":"QuestionRequest","payload":{"id":"q\"1","tool_call_id":"t","questions":[]}}}"#;
        assert_eq!(
            history_frame(question).unwrap(),
            r#"{"jsonrpc":"2.0","method":"request","id":"q\"1","params":{"type":"QuestionRequest","payload":{"id":"q\"1","tool_call_id":"t","questions":[]}}}"#
        );
        // The stored bytes go out as they are, spaces and member order included.
        let spaced =
            r#"{"timestamp": 1.5, "message": {"payload": {"type": "text", "text": "a\u00e9"}, "type": "ContentPart"}}"#;
        let frame = history_frame(spaced).unwrap();
        assert_eq!(
            frame,
            r#"{"jsonrpc":"2.0","method":"event","params":{"payload": {"type": "text", "text": "a\u00e9"}, "type": "ContentPart"}}"#
        );
        let value: Value = serde_json::from_str(&frame).unwrap();
        assert_eq!(value["params"]["payload"]["text"], "a\u{e9}");
        // A request without an id, a message that is not an object, a record without one.
        assert_eq!(history_frame(r#"{"message":{"type":"ApprovalRequest","payload":{}}}"#), None);
        assert_eq!(history_frame(r#"{"message":"ContentPart"}"#), None);
        assert_eq!(history_frame(r#"{"timestamp":1}"#), None);
        assert_eq!(history_frame(r#"{"message":{"type":"TurnEnd","payload":{}}"#), None, "cut short");
    }

    /// Every message type of the protocol's schema is known to the replay, as an event or a
    /// request, and nothing else is.
    #[test]
    fn the_replay_knows_every_message_type() {
        fn names(schema: &Value, out: &mut Vec<String>) {
            for key in ["oneOf", "anyOf"] {
                for variant in schema[key].as_array().into_iter().flatten() {
                    let kind = &variant["properties"]["type"];
                    if let Some(name) = kind["const"].as_str() {
                        out.push(name.to_string());
                    }
                    for name in kind["enum"].as_array().into_iter().flatten() {
                        out.push(name.as_str().unwrap().to_string());
                    }
                }
            }
        }
        let mut events = Vec::new();
        names(&serde_json::to_value(schemars::schema_for!(crate::protocol::Event)).unwrap(), &mut events);
        let mut requests = Vec::new();
        names(&serde_json::to_value(schemars::schema_for!(crate::protocol::Request)).unwrap(), &mut requests);
        assert!(events.len() > 10 && requests.len() == 4, "{events:?} {requests:?}");
        let known: Vec<&str> = EVENT_TYPES.iter().copied().filter(|n| *n != "ApprovalRequestResolved").collect();
        events.sort();
        let mut known: Vec<String> = known.iter().map(|n| n.to_string()).collect();
        known.sort();
        assert_eq!(events, known);
        requests.sort();
        let mut known_requests: Vec<String> = REQUEST_TYPES.iter().map(|n| n.to_string()).collect();
        known_requests.sort();
        assert_eq!(requests, known_requests);
    }

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
