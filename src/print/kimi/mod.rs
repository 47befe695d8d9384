//! kimi's `--print` dialect (`docs/print-mode.md` Part A): prompts from `-p` and stdin, one turn at a
//! time, output as text or kosong `Message` lines, exit 0/1/75.
//!
//! Invariants: the next prompt is read only after the previous turn's outcome; the first failed
//! turn ends the run (its line on stderr, its exit status); a signal cancels the running turn
//! (which then fails as "Interrupted by user") or, between turns, ends the run; the session id is
//! told on stderr so the run can be resumed (`kiwi --session ID`, or `-C`). A session another
//! kiwi process hosts is not opened but attached to (`wire::remote`): each prompt is a turn of
//! it there, and the run shows only its own turns (A.7).

pub mod input;
pub mod options;
pub mod progress;
pub mod projection;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

pub use options::KimiOptions;

use self::input::Prompts;
use self::projection::KimiProjection;
use tokio_util::sync::CancellationToken;

use super::common::{OwnTurns, TurnReport, host, stderr_line, trace_to_stderr, turn_tag};
use crate::builder::{AgentSetup, BuildError, SessionRequest};
use crate::live::{LiveSession, Runtime, shell};
use crate::protocol::UserInput;
use crate::soul::TurnDriver;
use crate::tools::background::BackgroundTasks;
use crate::wire::attach::{held_elsewhere, wait_for_lock};
use crate::wire::remote::{Remote, RemoteError};

/// Waits until every active background task is done, or `ceiling` passed.
async fn wait_for_background(background: &BackgroundTasks, ceiling: Duration) {
    let deadline = tokio::time::Instant::now() + ceiling;
    for task in background.list(true, usize::MAX) {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            tracing::info!("print mode stops waiting for background tasks after {} s", ceiling.as_secs());
            return;
        }
        background.wait(&task.id, left).await;
    }
}

/// Where the run's turns run: the session this process opened, or one another process hosts.
enum Session {
    Local { live: Arc<LiveSession>, driver: Arc<TurnDriver> },
    Hosted { id: String, remote: Remote },
}

impl Session {
    fn id(&self) -> &str {
        match self {
            Session::Local { live, .. } => live.id(),
            Session::Hosted { id, .. } => id,
        }
    }

    /// Runs `prompt` as this run's turn, after another client's turn ended if one runs; the
    /// report, `None` when there is none to give (a signal before the start, the host gone).
    async fn turn(&self, turns: &OwnTurns, prompt: UserInput, stop: &CancellationToken) -> Option<TurnReport> {
        match self {
            Session::Local { driver, .. } => {
                let waiter = turns.start_when_idle(driver, prompt, stop).await?;
                tokio::pin!(waiter);
                tokio::select! {
                    r = &mut waiter => r.ok(),
                    () = stop.cancelled() => {
                        // The first Ctrl-C (or stdout going away) cancels the turn, which then
                        // reports "Interrupted by user".
                        driver.cancel();
                        waiter.await.ok()
                    }
                }
            }
            Session::Hosted { id, remote } => loop {
                turns.expect(&prompt);
                let prompted = remote.prompt(prompt.clone());
                tokio::pin!(prompted);
                let answered = tokio::select! {
                    r = &mut prompted => r,
                    () = stop.cancelled() => {
                        let _ = remote.cancel().await;
                        prompted.await
                    }
                };
                match answered {
                    Ok(result) => {
                        let (tag, waiter) = turn_tag();
                        crate::soul::Projection::turn_ended(turns, tag, result).await;
                        return waiter.await.ok();
                    }
                    Err(RemoteError::Busy) => {
                        turns.not_started();
                        tokio::select! {
                            () = turns.turn_end_or_poll() => {}
                            () = stop.cancelled() => return None,
                        }
                    }
                    Err(e) => {
                        turns.not_started();
                        stderr_line(&format!("kiwi: session {id}: {e}"));
                        return None;
                    }
                }
            },
        }
    }
}

/// Attaches to the host of the session `request` names when another process holds it
/// (`docs/print-mode.md` A.7); `None` when this process is to open the session itself (nobody
/// holds it, or its host cannot be reached and the lock came free; otherwise the reason is on
/// stderr and opening fails on the lock as before).
async fn attach(setup: &AgentSetup, request: &SessionRequest, turns: &Arc<OwnTurns>) -> Option<Session> {
    let (id, dir) = held_elsewhere(&setup.share_dir, &request.work_dir, &request.session)?;
    match Remote::attach(&dir, turns.clone()).await {
        Ok((remote, history)) => {
            // Print mode shows no history: the live stream flows at once.
            drop(history);
            tracing::info!("attached to session {id}, hosted by another process");
            Some(Session::Hosted { id, remote })
        }
        Err(e) => {
            if !tokio::task::spawn_blocking(move || wait_for_lock(&dir)).await.unwrap_or(false) {
                tracing::warn!("cannot attach to session {id}: {e}");
                stderr_line(&format!("Cannot attach to session {id}: {e}"));
            }
            None
        }
    }
}

/// Runs kimi's print mode on `input` / `output`; `Err` when the session cannot be built.
pub fn run<R, W>(
    setup: &AgentSetup,
    request: SessionRequest,
    options: KimiOptions,
    input: R,
    output: W,
    max_line_bytes: usize,
) -> Result<ExitCode, BuildError>
where
    R: std::io::Read + Send + 'static,
    W: std::io::Write + Send + 'static,
{
    let served = shell::run(Runtime::CurrentThread, output, |process| async move {
        let model = setup.diagnostics().model_summary;
        let projection = Arc::new(KimiProjection::new(process.outbound, options.clone(), model));
        // A session another process hosts: only this run's turns are shown (strict).
        let hosted_turns = OwnTurns::new(projection.clone(), true);
        let (session, turns, hosting) = match attach(setup, &request, &hosted_turns).await {
            Some(hosted) => (hosted, hosted_turns, None),
            None => {
                let built = setup.build(SessionRequest { trace: Some(trace_to_stderr()), ..request })?;
                super::common::mark_created_session(&built.session, "kimi");
                // Other clients' turns (processes attached through the socket) stay out of the output.
                let turns = OwnTurns::new(projection, false);
                let live = LiveSession::open(built, turns.clone(), &process.sessions);
                live.start().await;
                // Served while the run has the session open; the file goes when this is dropped.
                let hosting = host(&live);
                let driver = live.driver().clone();
                (Session::Local { live, driver }, turns, hosting)
            }
        };
        let stop = process.stop;
        let mut prompts = Prompts::new(&options, input, max_line_bytes);
        let mut code = 0u8;
        loop {
            let prompt = tokio::select! {
                p = prompts.next() => p,
                () = stop.cancelled() => Ok(None),
            };
            let prompt = match prompt {
                Ok(Some(prompt)) => prompt,
                Ok(None) => break,
                Err(why) => {
                    stderr_line(&format!("kiwi: {why}"));
                    code = 1;
                    break;
                }
            };
            if options.progress() {
                stderr_line(&prompt.text_input());
            }
            match session.turn(&turns, prompt, &stop).await {
                Some(r) if r.failed => {
                    code = r.exit_code;
                    break;
                }
                Some(_) => {}
                None => {
                    code = 1;
                    break;
                }
            }
        }
        // Background tasks the run started finish before it exits (bounded by the config's
        // `background.print_wait_ceiling_s`); a signal stops the wait.
        if let Session::Local { driver, .. } = &session {
            let background = driver.agent().background.clone();
            if background.active_count() > 0 && !stop.is_cancelled() {
                let ceiling = Duration::from_secs(background.settings().print_wait_ceiling_s);
                if !options.quiet {
                    stderr_line(&format!(
                        "Waiting for {} background task(s) to finish (at most {} s)",
                        background.active_count(),
                        ceiling.as_secs()
                    ));
                }
                tokio::select! {
                    () = wait_for_background(&background, ceiling) => {}
                    () = stop.cancelled() => {}
                }
            }
        }
        drop(hosting);
        if !options.quiet {
            stderr_line(&format!("To resume this session: kiwi --session {}", session.id()));
        }
        Ok(ExitCode::from(code))
    });
    served.map_err(|e| BuildError::Fatal(e.0))?
}
