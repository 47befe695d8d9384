//! kimi's `--print` dialect (`docs/print-mode.md` Part A): prompts from `-p` and stdin, one turn at a
//! time, output as text or kosong `Message` lines, exit 0/1/75.
//!
//! Invariants: the next prompt is read only after the previous turn's outcome; the first failed
//! turn ends the run (its line on stderr, its exit status); a signal cancels the running turn
//! (which then fails as "Interrupted by user") or, between turns, ends the run; the session id is
//! told on stderr so the run can be resumed (`kiwi --session ID`, or `-C`).

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
use super::common::{OwnTurns, host, stderr_line, trace_to_stderr};
use crate::builder::{AgentSetup, BuildError, SessionRequest};
use crate::live::{LiveSession, Runtime, shell};
use crate::tools::background::BackgroundTasks;

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
        let built = setup.build(SessionRequest { trace: Some(trace_to_stderr()), ..request })?;
        super::common::mark_created_session(&built.session, "kimi");
        let model = setup.diagnostics().model_summary;
        let projection = Arc::new(KimiProjection::new(process.outbound, options.clone(), model));
        // Other clients' turns (processes attached through the socket) stay out of the output.
        let turns = OwnTurns::new(projection, false);
        let live = LiveSession::open(built, turns.clone(), &process.sessions);
        live.start().await;
        // Served while the run has the session open; the file goes when this is dropped.
        let hosting = host(&live);
        let driver = live.driver().clone();
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
            // Another client's turn runs to its end first.
            let Some(waiter) = turns.start_when_idle(&driver, prompt, &stop).await else { break };
            tokio::pin!(waiter);
            let report = tokio::select! {
                r = &mut waiter => r.ok(),
                () = stop.cancelled() => {
                    // The first Ctrl-C (or stdout going away) cancels the turn, which then
                    // reports "Interrupted by user".
                    driver.cancel();
                    waiter.await.ok()
                }
            };
            match report {
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
        drop(hosting);
        if !options.quiet {
            stderr_line(&format!("To resume this session: kiwi --session {}", live.id()));
        }
        Ok(ExitCode::from(code))
    });
    served.map_err(|e| BuildError::Fatal(e.0))?
}
