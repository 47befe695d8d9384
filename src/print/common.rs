//! What the dialects share: how a turn's end reaches the run loop, stderr lines, the
//! scripted-echo trace (which must not reach stdout in print mode), and [`OwnTurns`]: a print
//! run shows only the turns it started, also when other processes' clients run turns on the
//! session it hosts or attaches to (`docs/print-mode.md`, "One session, many clients").
//!
//! Invariants: a [`TurnWaiter`] resolves exactly once per started turn (the projection's
//! `turn_ended` sends through the tag, after every line of the turn is queued); a tag that
//! carries no waiter is logged, never a panic; a turn another client started reaches neither
//! the print projection's lines nor its answers (its requests are left to that client).

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::{Notify, oneshot};

use crate::llm::build::TraceSink;
use crate::protocol::{Event, Request, UserInput};
use crate::soul::{Busy, ClientAnswer, Projection, TurnDriver, TurnResult, TurnTag};

/// How a turn ended, as the run loop needs it (the lines are already written).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnReport {
    pub failed: bool,
    /// Exit status the dialect gives this outcome when it ends the run.
    pub exit_code: u8,
}

/// The run loop's end of a started turn.
pub type TurnWaiter = oneshot::Receiver<TurnReport>;

/// A tag for `TurnDriver::start` and the waiter that resolves when the projection ends it.
pub fn turn_tag() -> (TurnTag, TurnWaiter) {
    let (tx, rx) = oneshot::channel();
    (TurnTag::new(tx), rx)
}

/// Hands the report to the run loop waiting on the tag.
pub fn report_turn(tag: TurnTag, report: TurnReport) {
    match tag.take::<oneshot::Sender<TurnReport>>() {
        Some(tx) => {
            let _ = tx.send(report);
        }
        None => tracing::error!("a print-mode turn ended without its waiter"),
    }
}

/// One line on stderr (progress, warnings, errors). Write errors are ignored: stderr is ours
/// to lose, never a reason to fail a run.
pub fn stderr_line(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    let _ = err.write_all(b"\n");
    let _ = err.flush();
}

/// A print dialect's `--version` or `--help`: printed to stdout, and the run ends there
/// (`Some(exit code)`); `None` when neither was asked.
pub fn version_or_help(version: bool, help: bool, help_text: &str) -> Option<std::process::ExitCode> {
    use std::io::Write as _;
    if version {
        crate::cli::print_version(crate::VERSION);
        return Some(std::process::ExitCode::SUCCESS);
    }
    if help {
        let _ = std::io::stdout().lock().write_all(help_text.as_bytes());
        return Some(std::process::ExitCode::SUCCESS);
    }
    None
}

/// The scripted-echo trace goes to stderr: stdout carries only the dialect's lines.
pub fn trace_to_stderr() -> TraceSink {
    Box::new(|line: String| stderr_line(&line))
}

/// Marks a session this print run created (not one it resumed) as a print run's
/// (`session::origin`), so the web UI can set it apart from the user's own. A failure to write
/// the marker only loses that mark: it is logged and the run goes on.
pub fn mark_created_session(session: &crate::session::Session, dialect: &str) {
    if session.resumed {
        return;
    }
    if let Err(e) = crate::session::origin::mark_print(&session.dir, dialect) {
        tracing::warn!("cannot mark {} as a print run's session: {e}", session.dir.display());
    }
}

/// Whose turn the session runs, as far as the print run can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Whose {
    /// No turn runs (or one began before this run could see it).
    Idle,
    /// The turn this run started.
    Own,
    /// A turn another client started.
    Foreign,
}

struct Turns {
    whose: Whose,
    /// The input of the turn this run is starting, until its `TurnBegin` arrives.
    expecting: Option<String>,
}

/// The print projection as the session sees it: the events and requests of the turns this run
/// started pass through, those of turns other clients started (`kiwi --wire -S`, a browser) are
/// dropped, so the run's output holds its own turns only. A turn is this run's when its
/// outermost `TurnBegin` carries the input the run announced with [`OwnTurns::expect`].
///
/// `strict` (an attached run): what comes while no turn of this run runs is dropped too (an
/// attached run has no background work of its own whose lines could come between turns).
pub struct OwnTurns {
    inner: Arc<dyn Projection>,
    strict: bool,
    turns: Mutex<Turns>,
    /// Woken whenever a turn ends (this run's or another client's).
    ended: Notify,
}

/// How often a run waiting for another client's turn looks again when it cannot wait on the
/// turn driver itself (an attached run: the host's claims, such as an undo, end without a turn
/// end to wake it).
const IDLE_POLL: Duration = Duration::from_millis(200);

impl OwnTurns {
    pub fn new(inner: Arc<dyn Projection>, strict: bool) -> Arc<Self> {
        Arc::new(Self {
            inner,
            strict,
            turns: Mutex::new(Turns { whose: Whose::Idle, expecting: None }),
            ended: Notify::new(),
        })
    }

    fn turns(&self) -> std::sync::MutexGuard<'_, Turns> {
        self.turns.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The run is about to start a turn with `input`.
    pub fn expect(&self, input: &UserInput) {
        self.turns().expecting = Some(input.text_input());
    }

    /// The turn announced by [`Self::expect`] did not start (the session was busy).
    pub fn not_started(&self) {
        let mut turns = self.turns();
        turns.expecting = None;
        if turns.whose == Whose::Own {
            turns.whose = Whose::Idle;
        }
    }

    /// Starts `input` as this run's turn on `driver`; `Busy` while another client's turn (or
    /// claim) runs. No await lies between announcing the turn and starting it, so no other turn
    /// can begin in between.
    pub fn try_start(&self, driver: &Arc<TurnDriver>, input: UserInput) -> Result<TurnWaiter, Busy> {
        let (tag, waiter) = turn_tag();
        self.expect(&input);
        match driver.start(input, tag) {
            Ok(()) => Ok(waiter),
            Err(Busy) => {
                self.not_started();
                Err(Busy)
            }
        }
    }

    /// [`Self::try_start`], waiting while another client's turn (or claim) runs, through the turn
    /// driver's one wait (`TurnDriver::idle`); `None` when `stop` came first.
    pub async fn start_when_idle(
        &self,
        driver: &Arc<TurnDriver>,
        input: UserInput,
        stop: &tokio_util::sync::CancellationToken,
    ) -> Option<TurnWaiter> {
        loop {
            // Not before the last turn's end reached this run: its `TurnBegin` would be taken
            // for part of that turn.
            if driver.is_free()
                && let Ok(waiter) = self.try_start(driver, input.clone())
            {
                return Some(waiter);
            }
            tokio::select! {
                () = driver.idle() => {}
                () = stop.cancelled() => return None,
            }
        }
    }

    /// Waits until a turn ends or a little time passed (for a run whose turn found the session busy).
    pub async fn turn_end_or_poll(&self) {
        tokio::select! {
            () = self.ended.notified() => {}
            () = tokio::time::sleep(IDLE_POLL) => {}
        }
    }

    /// Whether what comes now belongs to this run's output.
    fn shown(&self) -> bool {
        let turns = self.turns();
        match turns.whose {
            Whose::Own => true,
            Whose::Foreign => false,
            Whose::Idle => !self.strict,
        }
    }

    fn end(&self, whose: Whose) {
        {
            let mut turns = self.turns();
            if turns.whose == whose || whose == Whose::Own {
                turns.whose = Whose::Idle;
            }
            if whose == Whose::Own {
                turns.expecting = None;
            }
        }
        self.ended.notify_waiters();
    }
}

impl Projection for OwnTurns {
    fn event<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, ()> {
        if let Event::TurnBegin { user_input } = event {
            let mut turns = self.turns();
            // A nested `TurnBegin` (a flow's) belongs to the turn already running.
            if turns.whose == Whose::Idle {
                let text = user_input.text_input();
                turns.whose = if turns.expecting.as_deref() == Some(text.as_str()) {
                    turns.expecting = None;
                    Whose::Own
                } else {
                    Whose::Foreign
                };
            }
        }
        if self.shown() { self.inner.event(event) } else { Box::pin(async {}) }
    }

    // The receiver is the answer, awaited by the soul later; the future is only the asking.
    #[allow(clippy::async_yields_async)]
    fn request(&self, request: Request) -> BoxFuture<'_, oneshot::Receiver<ClientAnswer>> {
        if self.shown() {
            self.inner.request(request)
        } else {
            // Not this run's to answer: the client whose turn it is answers (first answer wins).
            Box::pin(async { oneshot::channel().1 })
        }
    }

    fn turn_ended(&self, tag: TurnTag, result: TurnResult) -> BoxFuture<'_, ()> {
        self.end(Whose::Own);
        self.inner.turn_ended(tag, result)
    }

    fn turn_observed<'a>(&'a self, result: &'a TurnResult) -> BoxFuture<'a, ()> {
        self.end(Whose::Foreign);
        // Only that it ended: a projection may keep count of the session's turns.
        self.inner.turn_observed(result)
    }

    fn tool_output<'a>(&'a self, tool_call_id: &'a str, text: &'a str) -> BoxFuture<'a, ()> {
        if self.shown() { self.inner.tool_output(tool_call_id, text) } else { Box::pin(async {}) }
    }

    fn resolved<'a>(&'a self, request: &'a Request) -> BoxFuture<'a, ()> {
        self.inner.resolved(request)
    }
}

/// Serves the session on its folder's socket (`docs/host.md`) while the run has it open, so
/// that other kiwi processes of this user attach to it; serving stops and the file goes when
/// the handle is dropped. A socket that cannot be served costs only the attaching: logged.
pub fn host(live: &Arc<crate::live::LiveSession>) -> Option<crate::wire::host::Hosting> {
    crate::wire::host::serve(live.clone(), crate::VERSION.to_string())
        .inspect_err(|e| tracing::warn!("cannot serve the session on its socket: {e}"))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the kinds of what it is given; leaves every request unanswered.
    struct Seen(Mutex<Vec<String>>);

    impl Projection for Seen {
        fn event<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, ()> {
            let kind = serde_json::to_value(event).unwrap()["type"].as_str().unwrap().to_string();
            self.0.lock().unwrap().push(kind);
            Box::pin(async {})
        }

        #[allow(clippy::async_yields_async)]
        fn request(&self, _request: Request) -> BoxFuture<'_, oneshot::Receiver<ClientAnswer>> {
            self.0.lock().unwrap().push("asked".into());
            Box::pin(async { oneshot::channel().1 })
        }

        fn turn_ended(&self, _tag: TurnTag, _result: TurnResult) -> BoxFuture<'_, ()> {
            self.0.lock().unwrap().push("ended".into());
            Box::pin(async {})
        }
    }

    fn begin(text: &str) -> Event {
        Event::TurnBegin { user_input: UserInput::Text(text.into()) }
    }

    fn approval() -> Request {
        serde_json::from_value(serde_json::json!({"type": "ApprovalRequest", "payload": {
            "id": "r1", "tool_call_id": "c1", "sender": "Shell", "action": "run command",
            "description": "ls", "display": []}}))
        .unwrap()
    }

    /// Drives `turns` through this run's turn, another client's, then nothing; what passed.
    async fn drive(strict: bool) -> Vec<String> {
        let seen = Arc::new(Seen(Mutex::default()));
        let turns = OwnTurns::new(seen.clone(), strict);
        let done = || Ok(crate::soul::TurnOutcome::Finished(None));
        turns.expect(&UserInput::Text("mine".into()));
        turns.event(&begin("mine")).await;
        turns.event(&begin("a nested flow turn")).await;
        drop(turns.request(approval()).await);
        turns.event(&Event::TurnEnd {}).await;
        turns.turn_ended(TurnTag::new(()), done()).await;
        turns.event(&begin("theirs")).await;
        let unanswered = turns.request(approval()).await;
        turns.event(&Event::TurnEnd {}).await;
        turns.turn_observed(&done()).await;
        turns.event(&Event::TurnEnd {}).await;
        assert!(unanswered.await.is_err(), "another client's request was answered");
        seen.0.lock().unwrap().clone()
    }

    #[tokio::test]
    async fn only_the_runs_own_turns_pass() {
        let own = ["TurnBegin", "TurnBegin", "asked", "TurnEnd", "ended"];
        assert_eq!(drive(true).await, own);
        // Not strict (a host): what comes between turns passes too.
        assert_eq!(drive(false).await, [&own[..], &["TurnEnd"]].concat());
    }

    #[test]
    fn a_tag_reaches_its_waiter() {
        let (tag, mut waiter) = turn_tag();
        report_turn(tag, TurnReport { failed: true, exit_code: 1 });
        assert_eq!(waiter.try_recv().unwrap(), TurnReport { failed: true, exit_code: 1 });
        report_turn(TurnTag::new(5u8), TurnReport { failed: false, exit_code: 0 });
    }
}
