//! The turn driver: the one owner of a session's turn lifecycle, shared by every front end.
//!
//! A front end submits input (`start`), may cancel the running turn, and may queue input for it
//! (`steer`); everything else reaches it through its [`Projection`](super::sink::Projection),
//! where the turn's outcome is the last item of the turn's stream. So a front end writes its
//! answer to a `prompt` after the turn's events by construction, and never holds a cancel token,
//! catches a panic or tracks whether a turn runs.
//!
//! Invariants: at most one turn at a time (`start` answers `Busy` otherwise); every started turn
//! ends with exactly one `turn_ended`, also when it panics or is cancelled; cancel drops the turn's
//! future, so every await point is a cancel point and a pending request's answer channel closes;
//! the next turn's events come after the previous turn's outcome (the soul stays locked until the
//! outcome is out).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Soul;
use super::agent::Agent;
use super::error::{TurnError, TurnOutcome};
use super::inbox::Inbox;
use super::sink::{EventSink, TurnTag};
use crate::protocol::UserInput;

/// A turn is already running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Busy;

/// No turn is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Idle;

struct RunningTurn {
    cancel: CancellationToken,
    done: watch::Receiver<bool>,
}

pub struct TurnDriver {
    agent: Arc<Agent>,
    soul: tokio::sync::Mutex<Soul>,
    sink: EventSink,
    running: Mutex<Option<RunningTurn>>,
    inbox: Arc<Inbox>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl TurnDriver {
    pub fn new(mut soul: Soul, sink: EventSink) -> Arc<Self> {
        let inbox = Arc::new(Inbox::default());
        soul.inbox = Some(inbox.clone());
        Arc::new(Self {
            agent: soul.agent.clone(),
            soul: tokio::sync::Mutex::new(soul),
            sink,
            running: Mutex::default(),
            inbox,
        })
    }

    /// The running agent: tools, approvals, slash commands, model.
    pub fn agent(&self) -> &Arc<Agent> {
        &self.agent
    }

    /// The sink the turns write into (a front end may emit events outside turns through it).
    pub fn sink(&self) -> &EventSink {
        &self.sink
    }

    pub fn is_busy(&self) -> bool {
        lock(&self.running).is_some()
    }

    /// Starts a turn on its own task. Its outcome reaches the projection's `turn_ended` with `tag`.
    pub fn start(self: &Arc<Self>, input: UserInput, tag: TurnTag) -> Result<(), Busy> {
        let cancel = CancellationToken::new();
        let (done_tx, done_rx) = watch::channel(false);
        {
            let mut running = lock(&self.running);
            if running.is_some() {
                return Err(Busy);
            }
            *running = Some(RunningTurn { cancel: cancel.clone(), done: done_rx });
        }
        // Input queued for an earlier turn is not this turn's (`wire-1.10.md` §2.4).
        self.inbox.clear();
        let driver = self.clone();
        tokio::spawn(async move {
            let mut soul = driver.soul.lock().await;
            // A panic inside the turn is still answered (-32603), never left in silence.
            let turn = std::panic::AssertUnwindSafe(soul.run_turn(input, &driver.sink)).catch_unwind();
            // Cancel is checked first: a cancelled turn makes no further progress, even when its
            // own next step is ready too.
            let result = tokio::select! {
                biased;
                () = cancel.cancelled() => Ok(TurnOutcome::Cancelled),
                r = turn => r.unwrap_or_else(|panic| Err(TurnError::Internal(panic_message(&panic)))),
            };
            if let Err(e) = &result {
                match e {
                    TurnError::LlmNotSet { reason: Some(reason) } => tracing::warn!("turn failed: {e}: {reason}"),
                    _ => tracing::warn!("turn failed: {e}"),
                }
            }
            *lock(&driver.running) = None;
            driver.sink.turn_ended(tag, result).await;
            drop(soul);
            let _ = done_tx.send(true);
        });
        Ok(())
    }

    /// A handle that cancels the running turn, if one runs. The front end may answer its
    /// `cancel` request before using it, so that answer precedes the turn's outcome.
    pub fn cancel_handle(&self) -> Option<CancellationToken> {
        lock(&self.running).as_ref().map(|t| t.cancel.clone())
    }

    /// Cancels the running turn; false when none runs.
    pub fn cancel(&self) -> bool {
        match self.cancel_handle() {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// Queues input for the running turn; it is taken at the next step boundary.
    pub fn steer(&self, input: UserInput) -> Result<(), Idle> {
        if !self.is_busy() {
            return Err(Idle);
        }
        self.inbox.push(input);
        Ok(())
    }

    /// Cancels the running turn and waits up to `grace` for its outcome to be out.
    pub async fn shutdown(&self, grace: Duration) {
        let running = lock(&self.running).as_ref().map(|t| (t.cancel.clone(), t.done.clone()));
        if let Some((cancel, mut done)) = running {
            cancel.cancel();
            let _ = tokio::time::timeout(grace, done.wait_for(|d| *d)).await;
        }
        self.sink.flush_record();
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    let text = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    tracing::error!("a turn panicked: {text}");
    format!("Panic: {text}")
}
