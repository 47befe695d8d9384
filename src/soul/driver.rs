//! The turn driver: the one owner of a session's turn lifecycle, shared by every front end.
//!
//! A front end submits input (`start`), may cancel the running turn, and may queue input for it
//! (`steer`); everything else reaches it through its [`Projection`](super::sink::Projection),
//! where the turn's outcome is the last item of the turn's stream. So a front end writes its
//! answer to a `prompt` after the turn's events by construction, and never holds a cancel token,
//! catches a panic or tracks whether a turn runs. Other long jobs of a front end that must keep
//! turns out (the wire's `replay`) take the same busy slot with [`TurnDriver::claim`].
//!
//! Invariants: at most one turn or claim at a time (`start`/`claim` answer `Busy` otherwise);
//! every started turn ends with exactly one `turn_ended`, also when it panics or is cancelled,
//! and every `TurnBegin` is followed by one `TurnEnd` before it (`docs/protocol-1.10.md` §4.4), then by the
//! rejection of the turn's unanswered approvals; cancel drops the turn's future, so every await
//! point is a cancel point and a pending request's answer channel closes; the next turn's events
//! come after the previous turn's outcome (the soul stays locked until the outcome is out).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Soul;
use super::agent::Agent;
use super::error::{TurnError, TurnOutcome};
use super::sink::{EventSink, TurnTag};
use super::slash;
use super::turn_shared::TurnShared;
use crate::protocol::{Event, UserInput};

/// A turn (or another claim) is already running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Busy;

/// No agent loop is running that could take the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Idle;

struct Running {
    cancel: CancellationToken,
    done: watch::Receiver<bool>,
    /// The running turn; `None` for a claim.
    turn: Option<Arc<TurnShared>>,
}

pub struct TurnDriver {
    agent: Arc<Agent>,
    soul: tokio::sync::Mutex<Soul>,
    sink: EventSink,
    running: Mutex<Option<Running>>,
    /// Set when the latest turn or claim has fully ended: for a turn, once its end reached every
    /// projection (`turn_ended` / `turn_observed`), which is after its slot was freed.
    last_done: Mutex<Option<watch::Receiver<bool>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Holds the busy slot for a job that is not a turn; dropping it frees the slot.
pub struct BusyClaim {
    driver: Arc<TurnDriver>,
    /// Cancelled by the front end's `cancel`.
    pub cancel: CancellationToken,
    done: watch::Sender<bool>,
}

impl Drop for BusyClaim {
    fn drop(&mut self) {
        *lock(&self.driver.running) = None;
        let _ = self.done.send(true);
    }
}

impl TurnDriver {
    pub fn new(soul: Soul, sink: EventSink) -> Arc<Self> {
        Arc::new(Self {
            agent: soul.agent.clone(),
            soul: tokio::sync::Mutex::new(soul),
            sink,
            running: Mutex::default(),
            last_done: Mutex::default(),
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

    /// Nothing holds the busy slot and the latest turn's end has reached every projection: what
    /// [`Self::idle`] waits for. (`is_busy` turns false a little earlier, while that end is still
    /// on its way to the clients.)
    pub fn is_free(&self) -> bool {
        !self.is_busy() && lock(&self.last_done).as_ref().is_none_or(|done| *done.borrow())
    }

    fn occupy(&self, turn: Option<Arc<TurnShared>>) -> Result<(CancellationToken, watch::Sender<bool>), Busy> {
        let mut running = lock(&self.running);
        if running.is_some() {
            return Err(Busy);
        }
        let cancel = CancellationToken::new();
        let (done_tx, done_rx) = watch::channel(false);
        *lock(&self.last_done) = Some(done_rx.clone());
        *running = Some(Running { cancel: cancel.clone(), done: done_rx, turn });
        Ok((cancel, done_tx))
    }

    /// Takes the busy slot for a job of the front end's own (no turn can start meanwhile).
    pub fn claim(self: &Arc<Self>) -> Result<BusyClaim, Busy> {
        let (cancel, done) = self.occupy(None)?;
        Ok(BusyClaim { driver: self.clone(), cancel, done })
    }

    /// Undoes `target` between turns (`docs/sessions.md` §9): the busy slot is taken for it, so
    /// no turn can start meanwhile; `Busy` while a turn (or another claim) runs.
    pub async fn undo(
        self: &Arc<Self>,
        target: crate::session::rewind::UndoTarget,
    ) -> Result<Result<super::undo::UndoReport, crate::session::rewind::RewindError>, Busy> {
        let claim = self.claim()?;
        let mut soul = self.soul.lock().await;
        let report = soul.undo(target, &self.sink, false).await;
        drop(soul);
        drop(claim);
        Ok(report)
    }

    /// Restores the files kiwi's edit tools changed in the turns from byte `offset` of
    /// `wire.jsonl` on, keeping the conversation (`Soul::rewind_files`); `Busy` while a turn runs.
    pub async fn rewind_files(
        self: &Arc<Self>,
        offset: u64,
    ) -> Result<Result<super::undo::UndoReport, crate::session::rewind::RewindError>, Busy> {
        let claim = self.claim()?;
        let mut soul = self.soul.lock().await;
        let report = soul.rewind_files(offset, &self.sink).await;
        drop(soul);
        drop(claim);
        Ok(report)
    }

    /// Starts a turn on its own task. Its outcome reaches the projection's `turn_ended` with `tag`.
    pub fn start(self: &Arc<Self>, input: UserInput, tag: TurnTag) -> Result<(), Busy> {
        let turn = Arc::new(TurnShared::new());
        // Input steered while the turn sets up is kept for its agent loop; a slash command
        // opens the inbox only if it runs one.
        if slash::parse(&input.text_input()).is_none() {
            turn.inbox.open();
        }
        let (cancel, done_tx) = self.occupy(Some(turn.clone()))?;
        let driver = self.clone();
        // The turn logs in the span of whoever started it (a web session's id, for one).
        let span = tracing::Span::current();
        tokio::spawn(tracing::Instrument::instrument(
            async move {
                tracing::info!("a turn begins");
                let mut soul = driver.soul.lock().await;
                soul.turn = turn.clone();
                // A panic inside the turn is still answered (-32603), never left in silence.
                let run = std::panic::AssertUnwindSafe(soul.run_turn(input, &driver.sink)).catch_unwind();
                // Cancel is checked first: a cancelled turn makes no further progress, even when its
                // own next step is ready too.
                let result = tokio::select! {
                    biased;
                    () = cancel.cancelled() => Ok(TurnOutcome::Cancelled),
                    r = run => r.unwrap_or_else(|panic| Err(TurnError::internal("Panic", panic_message(&panic)))),
                };
                if let Err(e) = &result {
                    match e {
                        TurnError::LlmNotSet { reason: Some(reason) } => tracing::warn!("turn failed: {e}: {reason}"),
                        _ => tracing::warn!("turn failed: {e}"),
                    }
                }
                turn.inbox.close();
                if turn.owes_turn_end() {
                    if matches!(result, Ok(TurnOutcome::Cancelled)) {
                        driver.sink.note_stopped();
                    }
                    driver.sink.emit(Event::TurnEnd {}).await;
                    turn.mark_ended();
                }
                driver.agent.approvals.reject_turn(&turn.id, &driver.sink).await;
                *lock(&driver.running) = None;
                driver.sink.turn_ended(tag, result).await;
                drop(soul);
                let _ = done_tx.send(true);
            },
            span,
        ));
        Ok(())
    }

    /// Resolves once nothing holds the busy slot (no turn, no claim) and the latest turn's end
    /// has reached every projection (the slot is freed before that, so that a front end may
    /// start the next turn from its `turn_ended`; a waiter must not start one before every
    /// client knows the last one ended): the one wait of every front end that queues a prompt
    /// behind what runs. Another caller may take the slot right after, so a caller starts its
    /// turn and, on `Busy`, waits again.
    pub async fn idle(&self) {
        loop {
            let running = lock(&self.running).as_ref().map(|r| r.done.clone());
            let mut done = match running {
                Some(done) => done,
                None => match lock(&self.last_done).clone() {
                    Some(last) if !*last.borrow() => last,
                    _ => return,
                },
            };
            if done.wait_for(|d| *d).await.is_err() {
                // The holder went without saying so (it panicked): free is free; else look
                // again shortly.
                if lock(&self.running).is_none() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    /// A handle that cancels the running turn or claim, if one runs. The front end may answer
    /// its `cancel` request before using it, so that answer precedes the turn's outcome.
    pub fn cancel_handle(&self) -> Option<CancellationToken> {
        lock(&self.running).as_ref().map(|t| t.cancel.clone())
    }

    /// Cancels the running turn or claim; false when none runs.
    pub fn cancel(&self) -> bool {
        match self.cancel_handle() {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// Queues input for the running turn's agent loop; it is taken at the next step boundary.
    pub fn steer(&self, input: UserInput) -> Result<(), Idle> {
        let running = lock(&self.running);
        match running.as_ref().and_then(|r| r.turn.as_ref()) {
            Some(turn) if turn.inbox.push(input) => Ok(()),
            _ => Err(Idle),
        }
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
    text
}
