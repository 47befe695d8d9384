//! Start-up and shutdown of the wire server (`cli-and-config.md` §1.2).
//!
//! Start-up happens before the first line is read; any failure exits non-zero with one readable
//! line on stderr and nothing on stdout. Serving ends on EOF, SIGTERM/SIGINT (exit 0 after the
//! queue is flushed) or a closed stdout (exit at once).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use tokio_util::sync::CancellationToken;

use crate::agent::skills::discover;
use crate::agent::spec::{load_agent_spec, load_builtin_agent_spec};
use crate::agent::system_prompt::{BuiltinArgs, load_system_prompt};
use crate::cli::Cli;
use crate::config::{self, Config};
use crate::llm::build::{TraceSink, build_provider};
use crate::rpc::pending::PendingRequests;
use crate::rpc::reader::spawn_reader;
use crate::rpc::writer::spawn_writer;
use crate::runtime::Runtime;
use crate::session::store::{Session, SessionChoice, home_dir, normalize, share_dir};
use crate::session::wire_log::WireLog;
use crate::soul::agent::AgentParts;
use crate::soul::dmail::{DMailBox, SendDMail};
use crate::soul::{Agent, Context, EventSink, Soul};
use crate::tools::Toolset;
use crate::tools::builtin::tool_by_path;
use crate::wire::projection::run_projection;
use crate::wire::server::WireServer;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// Log lines that may wait for the log file before new ones are dropped.
const LOG_QUEUE_LINES: usize = 512;

/// A start-up failure: usage errors exit 2, everything else 1.
pub enum StartError {
    Usage(String),
    Fatal(String),
}

/// Everything start-up prepared for serving.
pub struct Prepared {
    cli: Cli,
    session: Session,
    soul: Soul,
    /// Where scripted-echo trace lines go once serving starts (through the soul's event queue,
    /// so they keep their place among the events).
    trace: Arc<std::sync::Mutex<Option<EventSink>>>,
}

#[allow(clippy::print_stderr)]
pub fn main() -> ExitCode {
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
    let log_path = share.join("logs").join("kiwi.log");
    let _log_guard = init_logging(&cli, &log_path);
    match prepare(cli, &share) {
        Ok(prepared) => run(prepared),
        Err(StartError::Usage(msg)) => {
            eprintln!("Usage: kiwi [OPTIONS]\nTry 'kiwi --help' for help.\n\nError: {msg}");
            ExitCode::from(2)
        }
        Err(StartError::Fatal(msg)) => {
            tracing::error!("start-up failed: {msg}");
            eprintln!("{msg}\nSee logs: {}", log_path.display());
            ExitCode::from(1)
        }
    }
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
    if let Err(e) = std::env::set_current_dir(&work_dir) {
        return Err(StartError::Fatal(format!("Cannot enter {}: {e}", work_dir.display())));
    }
    let choice = match (&cli.session, cli.continue_) {
        (Some(id), _) => SessionChoice::Id(id.trim().to_string()),
        (None, true) => SessionChoice::Continue,
        (None, false) => SessionChoice::New,
    };
    let session = Session::open(share, &work_dir, &choice).map_err(|e| match e {
        crate::session::SessionError::NoPrevious | crate::session::SessionError::InvalidId(_) => {
            StartError::Usage(e.to_string())
        }
        other => StartError::Fatal(other.to_string()),
    })?;

    if let Some(n) = cli.max_steps_per_turn {
        config.loop_control.max_steps_per_turn = n;
    }
    if let Some(n) = cli.max_retries_per_step {
        config.loop_control.max_retries_per_step = n;
    }
    if let Some(n) = cli.max_ralph_iterations {
        config.loop_control.max_ralph_iterations = n;
    }
    let settings = config::select(&config, cli.model.as_deref(), cli.thinking_flag(), &config::select::ProcessEnv)
        .map_err(|e| StartError::Fatal(e.to_string()))?;
    export_provider_env(&settings);
    let trace: Arc<std::sync::Mutex<Option<EventSink>>> = Arc::default();
    let trace_sink: TraceSink = {
        let trace = trace.clone();
        Box::new(move |line: String| {
            if let Some(sink) = trace.lock().ok().and_then(|g| g.clone()) {
                sink.try_raw_line(line);
            }
        })
    };
    let llm = build_provider(&settings, &session.id, Some(trace_sink)).map_err(StartError::Fatal)?;

    let config = Arc::new(config);
    let runtime = Arc::new(Runtime {
        work_dir: work_dir.clone(),
        share_dir: share.to_path_buf(),
        session_dir: session.dir.clone(),
        session_id: session.id.clone(),
        config: config.clone(),
        capabilities: settings.capabilities.clone(),
        llm,
    });
    let spec = match (&cli.agent_file, &cli.agent) {
        (Some(path), _) => load_agent_spec(Some(path)),
        (None, Some(name)) => load_builtin_agent_spec(name),
        (None, None) => load_agent_spec(None),
    }
    .map_err(|e| StartError::Fatal(e.to_string()))?;
    let skills = discover(&home_dir(), &work_dir, cli.skills_dir.as_deref());
    let mut tools: Vec<Arc<dyn crate::tools::Tool>> = Vec::new();
    let mut invalid = Vec::new();
    let mut dmail = None;
    for path in &spec.tools {
        if is_dmail_path(path) {
            let mailbox = Arc::new(DMailBox::default());
            tools.push(Arc::new(crate::tools::Typed::new(SendDMail { mailbox: mailbox.clone() })));
            dmail = Some(mailbox);
            continue;
        }
        match tool_by_path(path, &runtime) {
            Some(Some(tool)) => tools.push(tool),
            Some(None) => {}
            None => invalid.push(format!("'{path}'")),
        }
    }
    if !invalid.is_empty() {
        return Err(StartError::Fatal(format!("Invalid tools: [{}]", invalid.join(", "))));
    }
    let system_prompt = load_system_prompt(&spec, BuiltinArgs::collect(&work_dir, &skills))
        .map_err(|e| StartError::Fatal(e.to_string()))?;
    let context = Context::restore(&session.context_path())
        .map_err(|e| StartError::Fatal(format!("Cannot open {}: {e}", session.context_path().display())))?;
    let agent = Arc::new(Agent::new(AgentParts {
        runtime,
        max_context_size: settings.model.max_context_size,
        loop_control: config.loop_control.clone(),
        toolset: Toolset::new(tools),
        yolo: cli.yolo,
        system_prompt,
        skills,
        dmail,
    }));
    Ok(Prepared { cli, session, soul: Soul::new(agent, context), trace })
}

/// `SendDMail` lives with the soul (it rewinds the context), not in the tool registry.
fn is_dmail_path(path: &str) -> bool {
    match path.split_once(':') {
        Some((module, "SendDMail")) => module == "kimi_cli.tools.dmail" || module.starts_with("kimi_cli.tools.dmail."),
        _ => false,
    }
}

/// The provider's `env` table goes into the process environment (`_scripted_echo`, `vertexai`).
fn export_provider_env(settings: &config::LlmSettings) {
    use config::ProviderType;
    if matches!(settings.provider.kind, ProviderType::ScriptedEcho | ProviderType::VertexAi) {
        for (k, v) in &settings.provider.env {
            // SAFETY: start-up runs on the main thread before any other thread is spawned
            // (the tokio runtime, reader and writer come later), so nothing reads the env.
            unsafe { std::env::set_var(k, v) };
        }
    }
}

fn run(prepared: Prepared) -> ExitCode {
    run_with(prepared, std::io::stdin(), std::io::stdout())
}

/// Serves the wire protocol on `input` / `output` (stdin and stdout for the binary; pipes for
/// the bundled demo client).
pub fn run_with<R, W>(prepared: Prepared, input: R, output: W) -> ExitCode
where
    R: std::io::Read + Send + 'static,
    W: std::io::Write + Send + 'static,
{
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let code = runtime.block_on(serve(prepared, input, output));
    // A writer stuck on a client that stopped reading stdout must not keep the process alive:
    // dropping the runtime would wait for its blocking join forever.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    code
}

async fn serve<R, W>(prepared: Prepared, input: R, output: W) -> ExitCode
where
    R: std::io::Read + Send + 'static,
    W: std::io::Write + Send + 'static,
{
    let Prepared { cli, session, soul, trace } = prepared;
    let (outbound, writer) = spawn_writer(output);
    let pending = Arc::new(PendingRequests::default());
    let (sink, events) = EventSink::channel();
    if let Ok(mut slot) = trace.lock() {
        *slot = Some(sink.clone());
    }
    let projection = tokio::spawn(run_projection(
        events,
        outbound.clone(),
        pending.clone(),
        Some(WireLog::new(&session.wire_path())),
    ));
    let server = WireServer::new(outbound, pending, soul, sink, VERSION.to_string());
    let inbound = spawn_reader(input, cli.max_line_bytes);

    let stop = CancellationToken::new();
    spawn_signal_watch(stop.clone());
    let stdout_closed = writer.closed.clone();
    tokio::select! {
        () = server.serve(inbound, stop.clone()) => {}
        () = stdout_closed.cancelled() => {
            // Nobody reads us any more: end now, keeping the session consistent.
            tracing::info!("stdout closed; exiting");
            crate::tools::process::kill_all_process_groups();
            session.finish();
            std::process::exit(0);
        }
    }
    drop(server);
    if let Ok(mut slot) = trace.lock() {
        *slot = None;
    }
    // A turn that ignored its cancel may still hold a sender; do not wait for it forever.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), projection).await;
    writer.join_while_read(std::time::Duration::from_secs(1)).await;
    // Nothing a tool started outlives the server.
    crate::tools::process::kill_all_process_groups();
    session.finish();
    ExitCode::SUCCESS
}

fn spawn_signal_watch(stop: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    // The handlers are registered here, before the first line is read, so a signal that arrives
    // right after start-up is already ours (not the default "terminate at once").
    let (Ok(mut term), Ok(mut int)) = (signal(SignalKind::terminate()), signal(SignalKind::interrupt())) else {
        tracing::warn!("cannot install signal handlers");
        return;
    };
    tokio::spawn(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
        tracing::info!("signal received; shutting down");
        stop.cancel();
    });
}
