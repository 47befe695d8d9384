//! The process: command line, logging, configuration, and choosing the front end
//! (`cli-and-config.md` §1.2). Sessions are built by `crate::builder`; serving is the front
//! end's (`crate::wire::serve`).
//!
//! Start-up happens before the first line is read; any failure exits non-zero with one readable
//! line on stderr and nothing on stdout. The process's working directory and environment are
//! never changed.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;

use crate::builder::{AgentChoice, AgentSetup, BuildError, SessionRequest};
use crate::cli::Cli;
use crate::config::{self, Config};
use crate::session::store::{SessionChoice, normalize, share_dir};
use crate::wire::serve::{WireOptions, serve_streams, signal_token};

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Log lines that may wait for the log file before new ones are dropped.
const LOG_QUEUE_LINES: usize = 512;

/// A start-up failure: usage errors exit 2, everything else 1.
pub enum StartError {
    Usage(String),
    Fatal(String),
}

/// Everything start-up prepared for serving: the process-wide agent setup and the one session
/// the wire server will build.
pub struct Prepared {
    setup: AgentSetup,
    work_dir: PathBuf,
    session: SessionChoice,
    max_line_bytes: usize,
}

#[allow(clippy::print_stderr)]
pub fn main() -> ExitCode {
    // `kiwi schema`: the wire protocol's JSON Schema, for client authors.
    if std::env::args().nth(1).as_deref() == Some("schema") {
        crate::wire::schema::print();
        return ExitCode::SUCCESS;
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    if cli.version {
        crate::cli::print_version(VERSION);
        return ExitCode::SUCCESS;
    }
    let share = share_dir();
    let log_path = log_file(&share);
    let _log_guard = init_logging(&cli, &log_path);
    match prepare(cli, &share) {
        Ok(prepared) => run_with(prepared, std::io::stdin(), std::io::stdout()),
        Err(e) => report(e, &share),
    }
}

/// One readable start-up error on stderr; usage errors exit 2, everything else 1.
#[allow(clippy::print_stderr)]
fn report(error: StartError, share: &Path) -> ExitCode {
    match error {
        StartError::Usage(msg) => {
            eprintln!("Usage: kiwi [OPTIONS]\nTry 'kiwi --help' for help.\n\nError: {msg}");
            ExitCode::from(2)
        }
        StartError::Fatal(msg) => {
            tracing::error!("start-up failed: {msg}");
            eprintln!("{msg}\nSee logs: {}", log_file(share).display());
            ExitCode::from(1)
        }
    }
}

fn log_file(share: &Path) -> PathBuf {
    share.join("logs").join("kiwi.log")
}

fn init_logging(cli: &Cli, log_path: &Path) -> Option<tracing_appender::non_blocking::WorkerGuard> {
    let level = if cli.debug { "trace" } else { "info" };
    let filter = tracing_subscriber::EnvFilter::try_from_env("KIWI_LOG").unwrap_or_else(|_| level.into());
    if cli.log_stderr {
        let _ =
            tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(false).try_init();
        return None;
    }
    let dir = log_path.parent()?;
    std::fs::create_dir_all(dir).ok()?;
    let file = std::fs::OpenOptions::new().create(true).append(true).open(log_path).ok()?;
    // The default queue preallocates 128k slots (4 MB); a few hundred lines of slack is plenty.
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .buffered_lines_limit(LOG_QUEUE_LINES)
        .lossy(true)
        .finish(file);
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(writer).with_ansi(false).try_init();
    Some(guard)
}

fn load_config(cli: &Cli, share: &Path) -> Result<Config, StartError> {
    if let Some(text) = &cli.config {
        return config::load_text(text).map_err(|e| StartError::Usage(e.to_string()));
    }
    if let Some(path) = &cli.config_file {
        return config::load_file(path).map_err(|e| StartError::Fatal(e.to_string()));
    }
    std::fs::create_dir_all(share).map_err(|e| StartError::Fatal(format!("Cannot create {}: {e}", share.display())))?;
    config::load_default(share).map(|(c, _)| c).map_err(|e| StartError::Fatal(e.to_string()))
}

fn resolve_work_dir(cli: &Cli) -> Result<PathBuf, StartError> {
    let cwd =
        std::env::current_dir().map_err(|e| StartError::Fatal(format!("Cannot read the current directory: {e}")))?;
    let dir = match &cli.work_dir {
        Some(dir) => normalize(dir, &cwd),
        None => normalize(&cwd, &cwd),
    };
    if !dir.is_dir() {
        return Err(StartError::Usage(format!(
            "Invalid value for '--work-dir' / '-w': Directory '{}' does not exist.",
            dir.display()
        )));
    }
    Ok(dir)
}

pub fn prepare(cli: Cli, share: &Path) -> Result<Prepared, StartError> {
    cli.validate().map_err(StartError::Usage)?;
    // Flag values are checked (usage errors) before any config is read.
    let work_dir = resolve_work_dir(&cli)?;
    let mut config = load_config(&cli, share)?;
    let session = match (&cli.session, cli.continue_) {
        (Some(id), _) => SessionChoice::Id(id.trim().to_string()),
        (None, true) => SessionChoice::Continue,
        (None, false) => SessionChoice::New,
    };
    if let Some(n) = cli.max_steps_per_turn {
        config.loop_control.max_steps_per_turn = n;
    }
    if let Some(n) = cli.max_retries_per_step {
        config.loop_control.max_retries_per_step = n;
    }
    if let Some(n) = cli.max_ralph_iterations {
        config.loop_control.max_ralph_iterations = n;
    }
    let agent = match (&cli.agent_file, &cli.agent) {
        (Some(path), _) => AgentChoice::File(path.clone()),
        (None, Some(name)) => AgentChoice::Builtin(name.clone()),
        (None, None) => AgentChoice::Default,
    };
    let setup = AgentSetup {
        config: Arc::new(config),
        share_dir: share.to_path_buf(),
        model: cli.model.clone(),
        thinking: cli.thinking_flag(),
        agent,
        skills_dir: cli.skills_dir.clone(),
        yolo: cli.yolo,
    };
    Ok(Prepared { setup, work_dir, session, max_line_bytes: cli.max_line_bytes })
}

/// Serves the wire protocol on `input` / `output` (stdin and stdout for the binary; pipes for
/// the bundled demo client). A session that cannot be built is reported like any start-up error.
pub fn run_with<R, W>(prepared: Prepared, input: R, output: W) -> ExitCode
where
    R: std::io::Read + Send + 'static,
    W: std::io::Write + Send + 'static,
{
    let Prepared { setup, work_dir, session, max_line_bytes } = prepared;
    let request = SessionRequest { work_dir, session, trace: None };
    let options = WireOptions { max_line_bytes, version: VERSION.to_string() };
    match serve_streams(&setup, request, options, input, output, signal_token) {
        Ok(code) => code,
        Err(BuildError::Usage(msg)) => report(StartError::Usage(msg), &setup.share_dir),
        Err(BuildError::Fatal(msg)) => report(StartError::Fatal(msg), &setup.share_dir),
    }
}
