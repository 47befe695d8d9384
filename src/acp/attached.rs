//! An ACP session hosted by another kiwi process (`docs/host.md`, `docs/acp.md` §4.18): `session/load`
//! or `session/resume` of a session whose lock another process holds attaches to that host's
//! `live.sock` through `wire::remote` instead of failing. The session's turns run in the host;
//! this process only translates: the host's history and live messages become `session/update`s
//! and permission requests through the session's own projection, a prompt runs as a turn of the
//! host, a cancel cancels the host's turn.
//!
//! Invariants: this process writes nothing to the session folder; nothing live reaches the
//! client before the answer that opened the session (the [`Gated`] projection holds it back), so
//! the client knows the session before its first update; at most one prompt of this client is on
//! its way to the host at a time (the others wait in the session's queue).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio::sync::{oneshot, watch};

use crate::protocol::{Event, Request, WireMessage};
use crate::soul::{ClientAnswer, Projection, TurnResult, TurnTag};
use crate::wire::remote::{Remote, RemoteHistory};

/// The link to the host of one attached session.
pub struct Attached {
    remote: Remote,
    /// The session folder (read only: its state for the workspace check).
    pub dir: PathBuf,
    /// The host's history up to the attach seam, until `session/load` replays it (or the
    /// session's answer drops it).
    history: Mutex<Option<RemoteHistory>>,
    /// Opened once the answer that opened the session is out.
    gate: watch::Sender<bool>,
    /// A prompt of this client is on its way to the host or running there.
    in_flight: AtomicBool,
    /// The host went away (or this client closed the session).
    gone: AtomicBool,
    /// Nothing more happens here: the session was closed, or taking it over failed.
    over: AtomicBool,
}

impl Attached {
    /// Attaches to the host of the session folder `dir`; `projection` (the session's ACP
    /// projection) gets the live messages once [`Attached::open_gate`] was called.
    pub async fn attach(dir: &Path, projection: Arc<dyn Projection>) -> std::io::Result<Self> {
        let gate = watch::Sender::new(false);
        let gated = Arc::new(Gated { inner: projection, open: gate.subscribe() });
        let (remote, history) = Remote::attach(dir, gated).await?;
        Ok(Self {
            remote,
            dir: dir.to_path_buf(),
            history: Mutex::new(Some(history)),
            gate,
            in_flight: AtomicBool::new(false),
            gone: AtomicBool::new(false),
            over: AtomicBool::new(false),
        })
    }

    pub fn remote(&self) -> &Remote {
        &self.remote
    }

    /// The history, taken once (`None` after that).
    pub fn take_history(&self) -> Option<RemoteHistory> {
        self.history.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// The client has the answer that opened the session: live messages may flow. A history
    /// nobody replayed is dropped first (the host then sends what is live).
    pub fn open_gate(&self) {
        drop(self.take_history());
        self.gate.send_replace(true);
    }

    /// A turn runs on the host, or a prompt of this client is on its way there.
    pub fn is_busy(&self) -> bool {
        self.in_flight.load(Ordering::SeqCst) || self.remote.is_busy()
    }

    /// Marks a prompt of this client as sent; `false` when one is already on its way.
    pub fn begin_prompt(&self) -> bool {
        !self.in_flight.swap(true, Ordering::SeqCst)
    }

    pub fn end_prompt(&self) {
        self.in_flight.store(false, Ordering::SeqCst);
    }

    /// Marks the session over; `false` when it already was.
    pub fn end(&self) -> bool {
        !self.gone.swap(true, Ordering::SeqCst)
    }

    /// `session/close` or the client went away: this process detaches; the host goes on.
    pub fn detach(&self) {
        self.end();
        self.give_up();
        self.remote.detach();
    }

    /// Waits until the host's stream ended; `true` when the host went away (not this client).
    pub async fn host_went(&self) -> bool {
        self.remote.closed().await;
        self.end()
    }

    /// The session is over here (closed, or not taken over): prompts are refused.
    pub fn give_up(&self) {
        self.over.store(true, Ordering::SeqCst);
    }

    pub fn is_over(&self) -> bool {
        self.over.load(Ordering::SeqCst)
    }

    pub fn is_gone(&self) -> bool {
        self.gone.load(Ordering::SeqCst)
    }
}

/// The events of a batch of the host's history (requests in it were answered then; their
/// outcome is in the events).
pub fn events(batch: Vec<WireMessage>) -> impl Iterator<Item = Event> {
    batch.into_iter().filter_map(|message| match message {
        WireMessage::Event(event) => Some(event),
        WireMessage::Request(_) => None,
    })
}

/// The session's projection behind a gate: every message waits until the gate opens, in order.
struct Gated {
    inner: Arc<dyn Projection>,
    open: watch::Receiver<bool>,
}

impl Gated {
    async fn opened(&self) {
        let mut open = self.open.clone();
        let _ = open.wait_for(|open| *open).await;
    }
}

impl Projection for Gated {
    fn event<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            self.opened().await;
            self.inner.event(event).await;
        })
    }

    #[allow(clippy::async_yields_async)]
    fn request(&self, request: Request) -> BoxFuture<'_, oneshot::Receiver<ClientAnswer>> {
        Box::pin(async move {
            self.opened().await;
            self.inner.request(request).await
        })
    }

    fn turn_ended(&self, tag: TurnTag, result: TurnResult) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            self.opened().await;
            self.inner.turn_ended(tag, result).await;
        })
    }

    fn turn_observed<'a>(&'a self, result: &'a TurnResult) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            self.opened().await;
            self.inner.turn_observed(result).await;
        })
    }

    fn tool_output<'a>(&'a self, tool_call_id: &'a str, text: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            self.opened().await;
            self.inner.tool_output(tool_call_id, text).await;
        })
    }

    fn resolved<'a>(&'a self, request: &'a Request) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            self.opened().await;
            self.inner.resolved(request).await;
        })
    }
}
