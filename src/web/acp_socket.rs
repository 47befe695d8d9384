//! `GET /api/acp` (`docs/web.md` §6, spec host.md §4): the Agent Client Protocol over a
//! WebSocket. Each text frame is one ACP JSON-RPC 2.0 message, both ways; the agent is `kiwi
//! acp`'s own dispatcher (`acp::serve::serve_messages`), with the sessions of this server: a
//! session the client creates or loads is hosted here ([`WebHost`]), so the browser lists it and
//! its sockets watch its turns live, and the client watches theirs.
//!
//! Invariants: the handshake passes the session socket's checks (LAN-only, Origin, the `token`
//! query parameter; 403 before the upgrade) and the connection cap; a frame that is not JSON-RPC
//! gets the error `kiwi acp` gives for the same line and the socket stays open; when the socket
//! closes the client leaves its sessions, which go on (as when a browser tab closes); at
//! shutdown it is closed with 1012 like every socket.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use futures::{SinkExt as _, StreamExt as _};
use tracing::Instrument as _;

use super::guard::socket_refusal;
use super::hosted::{Hosted, Hosting};
use super::queue::CLOSE_SHUTDOWN;
use super::socket::{MAX_CLIENT_FRAME, sized};
use super::state::AppState;
use crate::acp::errors;
use crate::acp::host::{HostedSession, MakeProjection, SessionHost, build};
use crate::acp::serve::{AcpOptions, serve_messages};
use crate::builder::{AgentSetup, SessionRequest};
use crate::live::{LiveSession, SubscriberId};
use crate::protocol::UserInput;
use crate::rpc::reader::framed_channel;
use crate::rpc::{ErrorObject, Outbound, RequestId};
use crate::session::store::SessionChoice;
use crate::soul::{Busy, TurnTag};

/// Frames waiting for the socket; a client that stops reading slows its own sessions' output
/// down here (as stdout does for `kiwi acp`), never the server or the other clients.
const OUTBOUND_FRAMES: usize = 1024;

/// The upgrade, after the handshake checks of `docs/web.md` §3.1.
pub async fn upgrade(
    State(state): State<AppState>,
    Query(query): Query<HashMap<String, String>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    slot: Option<axum::Extension<super::listen::Slot>>,
    ws: WebSocketUpgrade,
) -> Response {
    if let Some(why) = socket_refusal(&state.settings, peer, &headers, query.get("token").map(String::as_str)) {
        tracing::info!("ACP WebSocket from {peer} refused: {why}");
        return StatusCode::FORBIDDEN.into_response();
    }
    let span = tracing::info_span!("acp_socket", peer = %peer);
    sized(ws).on_upgrade(move |socket| {
        // The connection's place under the cap stays taken while the socket lives.
        let slot = slot;
        async move {
            serve(state, socket).await;
            drop(slot);
        }
        .instrument(span)
    })
}

async fn serve(state: AppState, socket: WebSocket) {
    let (mut sink, mut stream) = socket.split();
    let hosting = state.hosting.clone();
    let (frames, inbound) = framed_channel();
    let (outbound, mut outgoing) = Outbound::channel(OUTBOUND_FRAMES);
    let stop = hosting.closing().child_token();
    let options =
        AcpOptions { max_line_bytes: MAX_CLIENT_FRAME, version: hosting.version().to_string(), program: "kiwi".into() };
    let host = Arc::new(WebHost { hosting: hosting.clone() });
    let agent =
        tokio::spawn(serve_messages(hosting.setup(), host, options, inbound, outbound, stop.clone()).in_current_span());
    let writer = tokio::spawn(
        async move {
            while let Some(mut frame) = outgoing.recv().await {
                if frame.last() == Some(&b'\n') {
                    frame.pop();
                }
                let Ok(text) = String::from_utf8(frame) else { continue };
                if sink.send(Message::Text(text.into())).await.is_err() {
                    return;
                }
            }
            // The agent ended: at shutdown the client hears why.
            let close = CloseFrame { code: CLOSE_SHUTDOWN, reason: Utf8Bytes::from_static("Server shutting down") };
            let _ = sink.send(Message::Close(Some(close))).await;
        }
        .in_current_span(),
    );
    tracing::info!("an ACP client connected");
    loop {
        let message = tokio::select! {
            message = stream.next() => message,
            () = stop.cancelled() => break,
        };
        match message {
            Some(Ok(Message::Text(text))) => {
                if !frames.send(text.as_bytes()).await {
                    break;
                }
            }
            Some(Ok(Message::Binary(_))) => tracing::info!("ignoring a binary WebSocket frame"),
            Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
            Some(Ok(Message::Close(_))) | None => break,
            Some(Err(e)) => {
                tracing::info!("ACP WebSocket read failed: {e}");
                break;
            }
        }
    }
    // The client's messages end: the dispatcher leaves the client's sessions and stops, which
    // drops the last sender of the socket's frames.
    drop(frames);
    stop.cancel();
    let _ = agent.await;
    let _ = writer.await;
    tracing::info!("an ACP client left");
}

/// The sessions of an `/api/acp` client: the server's hosted sessions.
struct WebHost {
    hosting: Hosting,
}

impl SessionHost for WebHost {
    fn open(
        &self,
        setup: AgentSetup,
        request: SessionRequest,
        make: MakeProjection,
    ) -> BoxFuture<'_, Result<Arc<dyn HostedSession>, ErrorObject>> {
        Box::pin(async move {
            let hosted = match &request.session {
                SessionChoice::Id(id) | SessionChoice::Hosted(id) => {
                    let Some(hosted) = self.hosting.entry(id) else { return Err(errors::session_not_found()) };
                    // Started from the client's setup unless it runs already (then it is joined
                    // as it is: one session, one agent).
                    hosted.ensure_started_from(&self.hosting, Some(setup)).await.map_err(errors::internal)?;
                    hosted
                }
                SessionChoice::New | SessionChoice::Continue => {
                    let built = build(setup, request).await?;
                    self.hosting.host_built(built)
                }
            };
            let Some(live) = hosted.live() else { return Err(errors::session_not_found()) };
            let (subscriber, _) = live.attach(make(hosted.id(), true)).await;
            if hosted.is_gone() || live.is_closed() {
                live.detach(subscriber);
                return Err(errors::session_not_found());
            }
            let session = WebSession { hosted, live, subscriber: Mutex::new(Some(subscriber)) };
            Ok(Arc::new(session) as Arc<dyn HostedSession>)
        })
    }
}

/// One hosted session as an `/api/acp` client holds it: one more subscriber of its stream.
struct WebSession {
    hosted: Arc<Hosted>,
    live: Arc<LiveSession>,
    /// Until the client leaves.
    subscriber: Mutex<Option<SubscriberId>>,
}

impl WebSession {
    fn leave(&self) {
        let subscriber = self.subscriber.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(subscriber) = subscriber {
            self.live.detach(subscriber);
        }
    }
}

impl HostedSession for WebSession {
    fn live(&self) -> &Arc<LiveSession> {
        &self.live
    }

    fn exclusive(&self) -> bool {
        false
    }

    fn start_turn(&self, input: UserInput, id: &RequestId) -> Result<(), Busy> {
        let Some(subscriber) = *self.subscriber.lock().unwrap_or_else(|p| p.into_inner()) else { return Err(Busy) };
        // The sockets' `prompt` answer for this turn carries an id no browser uses.
        let shown = RequestId::Str(format!("acp-{id}"));
        self.hosted.start_turn_as(subscriber, input, &shown, TurnTag::new(id.clone()))
    }

    /// The server started the session and ran its hooks.
    fn start_hooks(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        self.leave();
        Box::pin(async {})
    }

    fn disconnect(&self) {
        self.leave();
    }
}
