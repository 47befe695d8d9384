//! The sessions `kiwi web` hosts (`docs/web.md` §3): each opened once per process on a
//! [`LiveSession`] built from the default config, with the status the sockets and the REST API
//! see (`session_status`: stopped, idle, busy, restarting, error, with a strictly increasing
//! `seq`), the sockets attached to it, the prompt in flight, and the last `initialize` a client
//! sent (applied again to a restarted session). Each open session is also served on its
//! folder's `live.sock` (`wire::host`, `docs/host.md`) for the kiwi processes that attach to it,
//! with the same `session_status` frames; a session whose lock another process holds is not
//! opened here but reached through that process's socket (`web::relay`).
//!
//! Invariants: a session is started, stopped and restarted under its own lifecycle lock, so two
//! sockets connecting at once open it once; a status is only produced when something changed
//! and each new one is sent to every attached socket; a session stays open after its last
//! socket left (until it is deleted, restarted or the server exits), as the reference's worker
//! does; a restart keeps the sockets attached (they move to the new live session).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::Instant;

use serde_json::json;

use super::projection::{FrameCache, Hub, SocketProjection};
use super::queue::{CLOSE_SESSION_GONE, Outgoing, SESSION_GONE_REASON};
use crate::builder::{AgentSetup, SessionRequest};
use crate::live::{CloseReason, History, LiveSession, Sessions, SubscriberId};
use crate::protocol::ContentPart;
use crate::rpc::RequestId;
use crate::session::store::{Metadata, SessionChoice, lock_folder, stored_session};
use crate::soul::{TurnResult, TurnTag};
use crate::wire::params::InitializeParams;
use crate::wire::status::StatusBoard;

pub use crate::wire::status::{SessionStatus, State, timestamp};

/// Where a stored session lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionPlace {
    pub id: String,
    pub work_dir: PathBuf,
    pub session_dir: PathBuf,
}

/// Delivers a session's uploads with its next prompt (`docs/web.md` §6.1): the content parts of
/// the files not sent yet, placed before the prompt's own parts, and marks them sent. Installed
/// by the REST layer ([`Hosting::set_upload_hook`]); without one, prompts carry only their own
/// parts. Runs on a blocking thread.
pub trait UploadHook: Send + Sync {
    fn take_unsent(&self, session: &SessionPlace) -> Vec<ContentPart>;
}

/// What a config restart did (`PATCH /api/config/`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Restarted {
    pub restarted: Vec<String>,
    /// Busy sessions left alone (no `force`).
    pub skipped_busy: Vec<String>,
}

/// The hosted sessions of the server. Cheap to clone.
#[derive(Clone)]
pub struct Hosting {
    inner: Arc<Inner>,
}

struct Inner {
    share_dir: PathBuf,
    /// What sessions are built from: the default config file; replaced by a config restart.
    setup: RwLock<AgentSetup>,
    /// The process's live sessions (the shell closes those still open at exit).
    sessions: Sessions,
    hosted: Mutex<HashMap<String, Arc<Hosted>>>,
    /// Sessions being deleted or deleted (taken under the `hosted` lock): a socket that races
    /// the deletion finds them gone, never opens them again from files about to disappear.
    deleted: Mutex<HashSet<String>>,
    uploads: RwLock<Option<Arc<dyn UploadHook>>>,
    /// `server.version` in `initialize`.
    version: String,
    /// Cancelled at shutdown: the sockets that are not attached to one session (`/api/acp`)
    /// close with the others.
    closing: tokio_util::sync::CancellationToken,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn read<T>(m: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    m.read().unwrap_or_else(|p| p.into_inner())
}

impl Hosting {
    pub fn new(setup: AgentSetup, sessions: Sessions, version: String) -> Self {
        Self {
            inner: Arc::new(Inner {
                share_dir: setup.share_dir.clone(),
                setup: RwLock::new(setup),
                sessions,
                hosted: Mutex::default(),
                deleted: Mutex::default(),
                uploads: RwLock::default(),
                version,
                closing: Default::default(),
            }),
        }
    }

    pub fn share_dir(&self) -> &Path {
        &self.inner.share_dir
    }

    pub fn version(&self) -> &str {
        &self.inner.version
    }

    /// The setup new sessions are built from.
    pub fn setup(&self) -> AgentSetup {
        read(&self.inner.setup).clone()
    }

    /// Builds later sessions (and restarted ones) from `setup` (a config that changed).
    pub fn replace_setup(&self, setup: AgentSetup) {
        *self.inner.setup.write().unwrap_or_else(|p| p.into_inner()) = setup;
    }

    pub fn set_upload_hook(&self, hook: Arc<dyn UploadHook>) {
        *self.inner.uploads.write().unwrap_or_else(|p| p.into_inner()) = Some(hook);
    }

    fn upload_hook(&self) -> Option<Arc<dyn UploadHook>> {
        read(&self.inner.uploads).clone()
    }

    /// Finds a stored session by id in every work dir of `kimi.json` (a folder holding a
    /// `context.jsonl`); hosted sessions are found without touching the disk.
    pub fn locate(&self, id: &str) -> Option<SessionPlace> {
        if let Some(hosted) = self.get(id) {
            return Some(hosted.place.clone());
        }
        let meta = Metadata::load(&self.inner.share_dir);
        meta.work_dirs.iter().find_map(|entry| {
            let work_dir = PathBuf::from(&entry.path);
            let dir = stored_session(&self.inner.share_dir, &work_dir, id)?;
            Some(SessionPlace { id: id.to_string(), work_dir, session_dir: dir })
        })
    }

    /// Cancelled when every socket is to close (shutdown).
    pub fn closing(&self) -> tokio_util::sync::CancellationToken {
        self.inner.closing.clone()
    }

    /// Hosts a session another front end built (ACP over `/api/acp` creating one): it is
    /// running from now on, with the hub as its first subscriber, like one a socket started.
    pub fn host_built(&self, built: crate::builder::BuiltSession) -> Arc<Hosted> {
        let version = self.version().to_string();
        let session = &built.session;
        let place = SessionPlace {
            id: session.id.clone(),
            work_dir: session.work_dir.clone(),
            session_dir: session.dir.clone(),
        };
        let hosted = Hosted::new(place);
        lock(&self.inner.hosted).insert(hosted.place.id.clone(), hosted.clone());
        let hub = Arc::new(Hub { hosted: Arc::downgrade(&hosted) });
        let live = LiveSession::open(built, hub, &self.inner.sessions);
        *lock(&hosted.worker) = Some(hosted.worker_for(live.clone(), uuid::Uuid::new_v4().to_string(), version));
        hosted.set_status(State::Idle, Some("start"), None);
        tokio::spawn(tracing::Instrument::in_current_span(async move { live.start().await }));
        hosted
    }

    /// The hosted session `id`, if the server hosts it (running or not).
    pub fn get(&self, id: &str) -> Option<Arc<Hosted>> {
        lock(&self.inner.hosted).get(id).cloned()
    }

    /// Every hosted session.
    pub fn all(&self) -> Vec<Arc<Hosted>> {
        lock(&self.inner.hosted).values().cloned().collect()
    }

    /// The hosted session `id`, taken in (not started) when it is stored on disk.
    pub fn entry(&self, id: &str) -> Option<Arc<Hosted>> {
        if let Some(hosted) = self.get(id) {
            return Some(hosted);
        }
        let place = self.locate(id)?;
        let mut map = lock(&self.inner.hosted);
        if lock(&self.inner.deleted).contains(id) {
            return None;
        }
        Some(map.entry(id.to_string()).or_insert_with(|| Hosted::new(place)).clone())
    }

    /// The live status of `id`, if the server has run it.
    pub fn status(&self, id: &str) -> Option<SessionStatus> {
        self.get(id).map(|h| h.status()).filter(|s| s.seq > 0)
    }

    /// A live session is open for `id` (the reference: its worker process is alive).
    pub fn is_running(&self, id: &str) -> bool {
        self.get(id).is_some_and(|h| h.is_running())
    }

    /// A prompt of `id` is in flight.
    pub fn is_busy(&self, id: &str) -> bool {
        self.get(id).is_some_and(|h| h.is_busy())
    }

    /// How many other kiwi processes are attached to `id` through its `live.sock`.
    pub fn attached_elsewhere(&self, id: &str) -> usize {
        self.get(id).map_or(0, |h| h.attached())
    }

    /// Another process holds `id`'s lock (it hosts the session; this server does not).
    pub async fn hosted_elsewhere(&self, id: &str) -> bool {
        match self.entry(id) {
            Some(hosted) => hosted.held_elsewhere().await,
            None => false,
        }
    }

    /// Stops the session before it is deleted: its sockets hear `stopped` and are closed with
    /// 1001; the server forgets it, and a socket that connects from now on (or was connecting)
    /// is closed with 4004 (`docs/web.md` §3.1) until [`Self::undelete`].
    pub async fn stop(&self, id: &str) {
        let hosted = {
            let mut map = lock(&self.inner.hosted);
            lock(&self.inner.deleted).insert(id.to_string());
            map.remove(id)
        };
        if let Some(hosted) = hosted {
            hosted.stop().await;
        }
    }

    /// The deletion after [`Self::stop`] failed: the session may be opened again.
    pub fn undelete(&self, id: &str) {
        lock(&self.inner.deleted).remove(id);
    }

    /// A prompt is in flight that waits for an answer no client can give: no socket is attached
    /// and a request (approval, question, …) is pending. Such a session may be deleted (its turn
    /// is cancelled first); it must not stay pinned by a client that left mid-approval.
    pub fn is_abandoned(&self, id: &str) -> bool {
        self.get(id).is_some_and(|h| h.is_abandoned())
    }

    /// A restart of the running sessions (busy ones only with `force`) would close one that
    /// other kiwi processes are attached to.
    pub fn restart_would_detach(&self, force: bool) -> bool {
        self.all().iter().any(|h| h.is_running() && (force || !h.is_busy()) && h.attached() > 0)
    }

    /// Restarts every running session with the current setup (a config change); busy ones
    /// only with `force` (their prompt is lost).
    pub async fn restart_running(&self, force: bool) -> Restarted {
        let mut outcome = Restarted::default();
        let mut running: Vec<Arc<Hosted>> = self.all().into_iter().filter(|h| h.is_running()).collect();
        running.sort_by(|a, b| a.place.id.cmp(&b.place.id));
        for hosted in running {
            if hosted.is_busy() && !force {
                outcome.skipped_busy.push(hosted.place.id.clone());
                continue;
            }
            hosted.restart(self).await;
            outcome.restarted.push(hosted.place.id.clone());
        }
        outcome
    }

    /// Closes every socket with `code` (server shutdown: 1012) and stops serving every session
    /// on its `live.sock`. The sessions themselves are closed by the process shell with every
    /// other live session.
    pub fn close_all_sockets(&self, code: u16, reason: &str) {
        self.inner.closing.cancel();
        for hosted in self.all() {
            // Attached processes see their stream end; the `live.sock` files go.
            if let Some(worker) = lock(&hosted.worker).as_mut() {
                drop(worker.socket.take());
            }
            for client in hosted.clients() {
                client.out.close(code, reason);
            }
        }
    }
}

/// One open live session and the run that hosts it.
struct Worker {
    live: Arc<LiveSession>,
    id: String,
    /// The session served on its `live.sock` (`None` when the socket cannot be served; then no
    /// other process can attach). Dropped before the session closes: attachers' streams end.
    socket: Option<crate::wire::host::Hosting>,
}

/// How a socket reaches a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Open in this server (`started`: by this call).
    Local { started: bool },
    /// Another process holds it: relay to its `live.sock`.
    Elsewhere,
}

/// A session the server hosts.
pub struct Hosted {
    pub place: SessionPlace,
    worker: Mutex<Option<Worker>>,
    /// Start, stop and restart one at a time.
    lifecycle: tokio::sync::Mutex<()>,
    /// Stopped for deletion: never started or attached to again.
    gone: AtomicBool,
    status: Mutex<SessionStatus>,
    clients: Mutex<Vec<Arc<Client>>>,
    /// The `prompt` in flight.
    inflight: Mutex<Option<RequestId>>,
    /// The prompt that ended last and the status its end produced, for the sockets to send
    /// after its answer.
    finished: Mutex<(Option<RequestId>, Option<String>)>,
    /// The last `initialize` a client sent, applied again to a restarted session.
    initialize: Mutex<Option<InitializeParams>>,
    pub(super) frames: FrameCache,
    /// The status as `live.sock` connections get it (every status the sockets get).
    board: Arc<StatusBoard>,
}

/// One socket attached to a hosted session.
pub struct Client {
    pub projection: Arc<SocketProjection>,
    subscriber: Mutex<Option<SubscriberId>>,
}

impl Client {
    pub fn out(&self) -> &Outgoing {
        &self.projection.out
    }

    /// Its subscriber id on the session's live stream (while attached).
    pub fn subscriber(&self) -> Option<SubscriberId> {
        *lock(&self.subscriber)
    }
}

impl std::ops::Deref for Client {
    type Target = SocketProjection;
    fn deref(&self) -> &SocketProjection {
        &self.projection
    }
}

impl Hosted {
    fn new(place: SessionPlace) -> Arc<Self> {
        let status = SessionStatus::stopped(&place.id);
        Arc::new(Self {
            place,
            worker: Mutex::new(None),
            lifecycle: tokio::sync::Mutex::new(()),
            gone: AtomicBool::new(false),
            status: Mutex::new(status),
            clients: Mutex::default(),
            inflight: Mutex::new(None),
            finished: Mutex::new((None, None)),
            initialize: Mutex::new(None),
            frames: FrameCache::default(),
            board: Arc::default(),
        })
    }

    /// A worker for `live`, serving it on its `live.sock` with this session's status.
    fn worker_for(&self, live: Arc<LiveSession>, id: String, version: String) -> Worker {
        let socket = crate::wire::host::serve_with(live.clone(), version, self.board.clone(), None)
            .inspect_err(|e| tracing::warn!("cannot serve session {} on its socket: {e}", self.place.id))
            .ok();
        Worker { live, id, socket }
    }

    /// How many other kiwi processes are attached through `live.sock`.
    pub fn attached(&self) -> usize {
        lock(&self.worker).as_ref().and_then(|w| w.socket.as_ref()).map_or(0, |s| s.attached())
    }

    /// Not open here while another process holds the session's lock. Checked under the
    /// lifecycle lock, so it never races this server's own opening of the session.
    pub async fn held_elsewhere(&self) -> bool {
        let _one = self.lifecycle.lock().await;
        self.held_elsewhere_now()
    }

    fn held_elsewhere_now(&self) -> bool {
        !self.is_running() && matches!(lock_folder(&self.place.session_dir), Ok(None))
    }

    pub fn id(&self) -> &str {
        &self.place.id
    }

    pub fn status(&self) -> SessionStatus {
        lock(&self.status).clone()
    }

    pub fn is_running(&self) -> bool {
        lock(&self.worker).is_some()
    }

    pub fn is_busy(&self) -> bool {
        lock(&self.inflight).is_some()
    }

    /// Stopped because it is being deleted.
    pub fn is_gone(&self) -> bool {
        self.gone.load(Ordering::SeqCst)
    }

    /// Busy, with no socket attached and a request waiting for an answer.
    pub fn is_abandoned(&self) -> bool {
        self.is_busy() && lock(&self.clients).is_empty() && self.live().is_some_and(|l| l.waiting_requests() > 0)
    }

    /// The open live session, if any.
    pub fn live(&self) -> Option<Arc<LiveSession>> {
        lock(&self.worker).as_ref().map(|w| w.live.clone())
    }

    pub fn clients(&self) -> Vec<Arc<Client>> {
        lock(&self.clients).clone()
    }

    /// A new status, if it differs from the current one in state, reason, detail or worker;
    /// returns its frame (not yet sent).
    fn change(&self, state: State, reason: Option<&str>, detail: Option<String>) -> Option<String> {
        let worker_id = lock(&self.worker).as_ref().map(|w| w.id.clone());
        let mut status = lock(&self.status);
        let same = status.state == state
            && status.reason.as_deref() == reason
            && status.detail == detail
            && status.worker_id == worker_id;
        if same {
            return None;
        }
        status.state = state;
        status.reason = reason.map(str::to_string);
        status.detail = detail;
        status.worker_id = worker_id;
        status.seq += 1;
        status.updated_at = timestamp(chrono::Utc::now());
        let frame = status.frame();
        self.board.publish(frame.clone());
        Some(frame)
    }

    /// Changes the status and sends it to every attached socket.
    pub fn set_status(&self, state: State, reason: Option<&str>, detail: Option<String>) {
        if let Some(frame) = self.change(state, reason, detail) {
            self.broadcast(&frame);
        }
    }

    /// Sends a frame to every attached socket.
    pub fn broadcast(&self, frame: &str) {
        for client in self.clients() {
            client.push(frame);
        }
    }

    /// Starts the live session unless one is open; `Ok(true)` when this call started it.
    pub async fn ensure_started(self: &Arc<Self>, hosting: &Hosting) -> Result<bool, String> {
        self.ensure_started_from(hosting, None).await
    }

    /// [`Self::ensure_started`], building the session from `setup` instead of the server's (an
    /// ACP client's choices: its model, its MCP servers).
    pub async fn ensure_started_from(
        self: &Arc<Self>,
        hosting: &Hosting,
        setup: Option<AgentSetup>,
    ) -> Result<bool, String> {
        let _one = self.lifecycle.lock().await;
        if self.is_gone() {
            return Err(super::queue::NOT_FOUND_REASON.to_string());
        }
        if self.is_running() {
            return Ok(false);
        }
        self.start_locked(hosting, setup).await?;
        Ok(true)
    }

    /// For a browser socket: the session open here (started if need be), or
    /// [`Reach::Elsewhere`] when another process holds its lock.
    pub async fn reach(self: &Arc<Self>, hosting: &Hosting) -> Result<Reach, String> {
        let _one = self.lifecycle.lock().await;
        if self.is_gone() {
            return Err(super::queue::NOT_FOUND_REASON.to_string());
        }
        if self.is_running() {
            return Ok(Reach::Local { started: false });
        }
        if self.held_elsewhere_now() {
            return Ok(Reach::Elsewhere);
        }
        self.start_locked(hosting, None).await?;
        Ok(Reach::Local { started: true })
    }

    /// Opens the live session (the lifecycle lock held).
    async fn start_locked(self: &Arc<Self>, hosting: &Hosting, setup: Option<AgentSetup>) -> Result<(), String> {
        let (live, worker_id) = self.open_live(hosting, setup).await?;
        *lock(&self.worker) = Some(self.worker_for(live.clone(), worker_id, hosting.version().to_string()));
        self.set_status(State::Idle, Some("start"), None);
        // The SessionStart hooks must not hold up the socket that opened the session.
        tokio::spawn(tracing::Instrument::in_current_span(async move { live.start().await }));
        Ok(())
    }

    /// Builds the session from `setup` (else the current one) and opens it with the hub as
    /// first subscriber.
    async fn open_live(
        self: &Arc<Self>,
        hosting: &Hosting,
        setup: Option<AgentSetup>,
    ) -> Result<(Arc<LiveSession>, String), String> {
        let setup: AgentSetup = setup.unwrap_or_else(|| hosting.setup());
        let place = self.place.clone();
        let built = tokio::task::spawn_blocking(move || {
            std::fs::create_dir_all(&place.work_dir)
                .map_err(|e| format!("Cannot create {}: {e}", place.work_dir.display()))?;
            setup
                .build(SessionRequest {
                    work_dir: place.work_dir.clone(),
                    session: SessionChoice::Hosted(place.id.clone()),
                    trace: None,
                })
                .map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| format!("opening the session failed: {e}"))??;
        let hub = Arc::new(Hub { hosted: Arc::downgrade(self) });
        let live = LiveSession::open(built, hub, &hosting.inner.sessions);
        Ok((live, uuid::Uuid::new_v4().to_string()))
    }

    /// Attaches a socket at the seam: its history is `wire.jsonl` up to the returned point and
    /// everything later reaches its queue. `None` when the session is not running.
    /// `None` too when the session was deleted meanwhile.
    pub async fn attach(self: &Arc<Self>, client: &Arc<Client>) -> Option<History> {
        let live = self.live()?;
        let (id, history) = live.attach(client.projection.clone()).await;
        // Checked under the lock `stop` takes the clients with: a socket is either closed by
        // the stop (1001) or sees the session gone here, never left attached to a closed one.
        let mut clients = lock(&self.clients);
        if self.is_gone() || live.is_closed() {
            drop(clients);
            live.detach(id);
            return None;
        }
        *lock(&client.subscriber) = Some(id);
        clients.push(client.clone());
        Some(history)
    }

    /// Detaches a socket that went away; the session goes on.
    pub fn detach(&self, client: &Arc<Client>) {
        lock(&self.clients).retain(|c| !Arc::ptr_eq(c, client));
        if let (Some(id), Some(live)) = (lock(&client.subscriber).take(), self.live()) {
            live.detach(id);
        }
    }

    /// A new socket for this session (not attached yet).
    pub fn client(self: &Arc<Self>, out: Outgoing) -> Arc<Client> {
        let projection = Arc::new(SocketProjection::new(out, Arc::downgrade(self)));
        Arc::new(Client { projection, subscriber: Mutex::new(None) })
    }

    /// Remembers a client's `initialize` for a restarted session.
    pub fn remember_initialize(&self, params: &InitializeParams) {
        *lock(&self.initialize) = Some(params.clone());
    }

    /// Puts `id` in flight and sends the `busy` status; false when another prompt is in flight
    /// (unless the session is in the `error` state, which clears it).
    pub fn begin_prompt(&self, id: &RequestId) -> bool {
        {
            let mut inflight = lock(&self.inflight);
            let errored = lock(&self.status).state == State::Error;
            if inflight.is_some() && !errored {
                return false;
            }
            *inflight = Some(id.clone());
        }
        self.set_status(State::Busy, Some("prompt"), None);
        true
    }

    /// Starts the prompt's turn for `client`; on failure the prompt is no longer in flight.
    pub fn start_turn(&self, client: &Client, input: crate::protocol::UserInput, id: RequestId) -> bool {
        let (Some(live), Some(subscriber)) = (self.live(), client.subscriber()) else {
            self.abandon_prompt();
            return false;
        };
        if live.start_turn_for(subscriber, input, TurnTag::new(id)).is_err() {
            self.abandon_prompt();
            return false;
        }
        true
    }

    /// Starts a turn for a subscriber that is not a socket (an `/api/acp` client), under the
    /// same busy rule as a socket's prompt: the sockets see it `busy` and hear its end. The
    /// sockets' `prompt` answer for it carries `id`, which must not be one a socket could use.
    pub fn start_turn_as(
        &self,
        subscriber: SubscriberId,
        input: crate::protocol::UserInput,
        id: &RequestId,
        tag: TurnTag,
    ) -> Result<(), crate::soul::Busy> {
        let Some(live) = self.live() else { return Err(crate::soul::Busy) };
        if !self.begin_prompt(id) {
            return Err(crate::soul::Busy);
        }
        live.start_turn_for(subscriber, input, tag).inspect_err(|_| self.abandon_prompt())
    }

    fn abandon_prompt(&self) {
        *lock(&self.inflight) = None;
        self.set_status(State::Idle, Some("prompt_error"), None);
    }

    /// The hub saw a turn end: the prompt is no longer in flight and the session is idle. The
    /// new status is sent by each socket after the prompt's answer.
    pub(super) fn prompt_finished(&self, result: &TurnResult) {
        let id = lock(&self.inflight).take();
        let reason = if result.is_ok() { "prompt_complete" } else { "prompt_error" };
        let frame = self.change(State::Idle, Some(reason), None);
        *lock(&self.finished) = (id, frame);
    }

    /// The prompt that ended last and its status frame.
    pub(super) fn finished(&self) -> (Option<RequestId>, Option<String>) {
        lock(&self.finished).clone()
    }

    /// Closes the live session for good (it is being deleted): the running turn is cancelled
    /// (also one waiting for an answer nobody will give), status `stopped`/`stop`, sockets
    /// closed with 1001.
    pub async fn stop(&self) {
        {
            let _clients = lock(&self.clients);
            self.gone.store(true, Ordering::SeqCst);
        }
        let _one = self.lifecycle.lock().await;
        let worker = lock(&self.worker).take();
        if let Some(mut worker) = worker {
            // Attached processes' streams end first: the session is going away.
            drop(worker.socket.take());
            worker.live.driver().cancel();
            for client in self.clients() {
                if let Some(id) = lock(&client.subscriber).take() {
                    worker.live.detach(id);
                }
            }
            worker.live.close(CloseReason::Closed).await;
        }
        *lock(&self.inflight) = None;
        self.set_status(State::Stopped, Some("stop"), None);
        for client in std::mem::take(&mut *lock(&self.clients)) {
            client.out().close(CLOSE_SESSION_GONE, SESSION_GONE_REASON);
        }
    }

    /// Closes the live session and opens it again from the current setup; the sockets stay and
    /// move to the new one, which gets the last `initialize` again (no external tools).
    pub async fn restart(self: &Arc<Self>, hosting: &Hosting) {
        let started = Instant::now();
        let _one = self.lifecycle.lock().await;
        let Some(mut old) = lock(&self.worker).take() else { return };
        // The old run's id stays on the `restarting` status.
        *lock(&self.worker) = Some(Worker { live: old.live.clone(), id: old.id.clone(), socket: None });
        self.set_status(State::Restarting, Some("config_update"), None);
        lock(&self.worker).take();
        // Attached processes' streams end: the session they joined closes.
        drop(old.socket.take());
        for client in self.clients() {
            if let Some(id) = lock(&client.subscriber).take() {
                old.live.detach(id);
            }
        }
        old.live.close(CloseReason::Closed).await;
        *lock(&self.inflight) = None;
        let (live, worker_id) = match self.open_live(hosting, None).await {
            Ok(opened) => opened,
            Err(e) => {
                tracing::warn!("restarting session {} failed: {e}", self.place.id);
                self.set_status(State::Error, Some("initialization_failed"), Some(e));
                return;
            }
        };
        *lock(&self.worker) = Some(self.worker_for(live.clone(), worker_id, hosting.version().to_string()));
        if let Some(mut params) = lock(&self.initialize).clone() {
            params.external_tools = None;
            crate::wire::server::initialize_agent(live.driver(), params, hosting.version());
        }
        for client in self.clients() {
            let (id, _) = live.attach(client.projection.clone()).await;
            *lock(&client.subscriber) = Some(id);
        }
        let ms = started.elapsed().as_millis();
        self.set_status(State::Idle, Some("config_update"), Some(format!("restart_ms={ms}")));
        let notice = json!({"jsonrpc": "2.0", "method": "event", "params": {"type": "SessionNotice", "payload": {
            "text": format!("Session restarted due to config update \u{b7} {ms}ms"),
            "kind": "restart", "reason": "config_update", "restart_ms": ms}}});
        self.broadcast(&notice.to_string());
        let started_live = live.clone();
        tokio::spawn(async move { started_live.start().await });
    }

    /// The parts that deliver this session's pending uploads (none without an upload hook).
    pub async fn take_uploads(&self, hosting: &Hosting) -> Vec<ContentPart> {
        let Some(hook) = hosting.upload_hook() else { return Vec::new() };
        let place = self.place.clone();
        tokio::task::spawn_blocking(move || hook.take_unsent(&place)).await.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_is_only_produced_when_it_changes() {
        let hosted = Hosted::new(SessionPlace { id: "s".into(), work_dir: "/w".into(), session_dir: "/d".into() });
        assert!(hosted.change(State::Idle, Some("start"), None).is_some());
        assert!(hosted.change(State::Idle, Some("start"), None).is_none());
        assert!(hosted.begin_prompt(&RequestId::Str("p".into())));
        assert!(!hosted.begin_prompt(&RequestId::Str("q".into())));
        assert_eq!((hosted.status().state, hosted.status().seq), (State::Busy, 2));
        hosted.prompt_finished(&Ok(crate::soul::TurnOutcome::Cancelled));
        let (id, frame) = hosted.finished();
        assert_eq!(id, Some(RequestId::Str("p".into())));
        assert!(frame.unwrap().contains(r#""state":"idle","seq":3,"worker_id":null,"reason":"prompt_complete""#));
        assert!(!hosted.is_busy());
    }
}
