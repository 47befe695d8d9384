//! The live session: one open session and everything that happens around its turns, the same for
//! every front end. Opening wires the built soul to a fan-out of projections (the opener's first,
//! more may attach) and the session's recorder; `start` runs the `SessionStart` hooks; `close`
//! cancels what runs, stops the session's background tasks, runs the `SessionEnd` hooks (bounded)
//! and does the session folder's exit bookkeeping.
//!
//! Invariants: `close` runs once, whoever calls it first (a front end, or the process shell at
//! exit); session hooks are never shown to clients (the wire keeps them out of its stream); a
//! client that attaches gets the history up to a seam and every later message live, each message
//! exactly once.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;

use super::fanout::{Fanout, SubscriberId};
use super::history::History;
use crate::builder::BuiltSession;
use crate::protocol::{HookEvent, UserInput};
use crate::session::store::Session;
use crate::soul::hooks::{self, HookRunner};
use crate::soul::{Busy, EventSink, Projection, TurnDriver, TurnTag};
use crate::tools::background::TaskTally;

/// How long closing waits for a cancelled turn to unwind (its outcome to be out).
pub const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);
/// The longest the `SessionEnd` hooks may delay a close.
pub const SESSION_END_BOUND: Duration = Duration::from_secs(5);

/// Why a session closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// The process exits: background tasks are stopped unless configured to outlive it.
    Exit,
    /// The client closed this session while the process goes on (ACP `session/close`).
    Closed,
}

pub struct LiveSession {
    id: String,
    work_dir: PathBuf,
    wire_path: PathBuf,
    resumed: bool,
    /// The session folder, locked while the session is open; released by `close`.
    session: Mutex<Option<Session>>,
    /// The process's open sessions; `close` takes this one out.
    registry: Sessions,
    driver: Arc<TurnDriver>,
    /// `SessionStart` / `SessionEnd`, hidden from clients.
    hooks: HookRunner,
    fanout: Arc<Fanout>,
    closed: AtomicBool,
}

/// The open live sessions of one process, so that the process shell can close what a front end
/// left open. Cheap to clone.
#[derive(Clone, Default)]
pub struct Sessions {
    open: Arc<Mutex<Vec<Arc<LiveSession>>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Sessions {
    fn register(&self, session: &Arc<LiveSession>) {
        lock(&self.open).push(session.clone());
    }

    fn forget(&self, session: &LiveSession) {
        lock(&self.open).retain(|s| !std::ptr::eq(Arc::as_ptr(s), session));
    }

    /// How many sessions are open.
    pub fn len(&self) -> usize {
        lock(&self.open).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Closes every session still open, for exit; what happened to their background tasks.
    pub async fn close_all_for_exit(&self) -> TaskTally {
        let open: Vec<Arc<LiveSession>> = lock(&self.open).clone();
        // Side by side: each close may wait for a turn to unwind and for its SessionEnd hooks.
        let closed = futures::future::join_all(open.iter().map(|s| s.close(CloseReason::Exit))).await;
        let mut tally = TaskTally::default();
        for one in closed {
            tally.add(one);
        }
        tally
    }
}

impl LiveSession {
    /// Wires a built session to the front end that opens it (`first`, its first subscriber).
    pub fn open(built: BuiltSession, first: Arc<dyn Projection>, sessions: &Sessions) -> Arc<Self> {
        let BuiltSession { session, soul, recorder } = built;
        let (fanout, _) = Fanout::with(first);
        let driver = TurnDriver::new(soul, EventSink::new(fanout.clone(), Some(recorder)));
        let hooks =
            HookRunner::new(driver.agent().hooks.clone(), driver.sink().clone(), &session.id, session.work_dir.clone())
                .hidden();
        let live = Arc::new(Self {
            id: session.id.clone(),
            work_dir: session.work_dir.clone(),
            wire_path: session.wire_path(),
            resumed: session.resumed,
            session: Mutex::new(Some(session)),
            registry: sessions.clone(),
            driver,
            hooks,
            fanout,
            closed: AtomicBool::new(false),
        });
        sessions.register(&live);
        live
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn work_dir(&self) -> &Path {
        &self.work_dir
    }

    pub fn resumed(&self) -> bool {
        self.resumed
    }

    pub fn wire_path(&self) -> PathBuf {
        self.wire_path.clone()
    }

    /// The turn driver: start, cancel and steer turns, reach the agent.
    pub fn driver(&self) -> &Arc<TurnDriver> {
        &self.driver
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// The `SessionStart` hooks (`startup`, or `resume` for a resumed session).
    pub async fn start(&self) {
        let source = if self.resumed { "resume" } else { "startup" };
        self.hooks.run(HookEvent::SessionStart, source, hooks::input([("source", Value::from(source))])).await;
    }

    /// Attaches another client: its history is `wire.jsonl` up to the returned length, and every
    /// message after that reaches `projection` live (so the client must send the history before
    /// what `projection` queues meanwhile). Requests still waiting are put to it too.
    pub async fn attach(&self, projection: Arc<dyn Projection>) -> (SubscriberId, History) {
        let path = self.wire_path();
        self.driver
            .sink()
            .at_seam(|| {
                let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
                (self.fanout.attach(projection), History { path: path.clone(), len })
            })
            .await
    }

    /// Detaches a client; the session goes on.
    pub fn detach(&self, id: SubscriberId) {
        self.fanout.detach(id);
    }

    /// How many clients watch the session.
    pub fn subscriber_count(&self) -> usize {
        self.fanout.subscriber_count()
    }

    /// Requests (approvals, questions, …) waiting for a client's answer.
    pub fn waiting_requests(&self) -> usize {
        self.fanout.waiting_requests()
    }

    /// Starts a turn for an attached client: its outcome goes back to that client.
    pub fn start_turn_for(&self, client: SubscriberId, input: UserInput, tag: TurnTag) -> Result<(), Busy> {
        self.driver.start(input, Fanout::tag_for(client, tag))
    }

    /// Closes the session (once): cancels the running turn, stops the background tasks, runs the
    /// `SessionEnd` hooks (bounded) and does the folder's exit bookkeeping.
    pub async fn close(&self, reason: CloseReason) -> TaskTally {
        if self.closed.swap(true, Ordering::SeqCst) {
            return TaskTally::default();
        }
        self.driver.shutdown(SHUTDOWN_GRACE).await;
        let background = &self.driver.agent().background;
        let tally = match reason {
            CloseReason::Exit => background.stop_all_for_exit(),
            CloseReason::Closed => background.stop_all_for_close(),
        };
        let end = self.hooks.run(HookEvent::SessionEnd, "exit", hooks::input([("reason", Value::from("exit"))]));
        if tokio::time::timeout(SESSION_END_BOUND, end).await.is_err() {
            tracing::info!("SessionEnd hooks did not finish in {SESSION_END_BOUND:?}; closing anyway");
        }
        // The folder's bookkeeping, then its lock is released: the session may be opened again.
        if let Some(session) = lock(&self.session).take() {
            session.finish();
        }
        self.registry.forget(self);
        tally
    }
}
