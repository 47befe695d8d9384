//! The process: command line, logging, configuration, and choosing the front end
//! (`docs/configuration.md` §1.2): Claude Code's command line goes to `crate::print::claude`
//! (`docs/print-mode.md` C.4), codex's `exec` to `crate::print::codex` (`docs/codex-exec.md`), kimi's to wire (`crate::wire::serve`), to kimi's `--print`
//! (`crate::print::kimi`) or to ACP (`kiwi acp` / `--acp`, `crate::acp::serve`). Sessions are
//! built by `crate::builder`.
//!
//! Start-up happens before the first line is read; any failure exits non-zero with one readable
//! line on stderr and nothing on stdout. The process's working directory and environment are
//! never changed.

use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;

use crate::acp::serve::{AcpOptions, serve_streams as serve_acp};
use crate::builder::{AgentChoice, AgentSetup, BuildError, Invocation, SessionRequest};
use crate::cli::Cli;
use crate::session::store::{SessionChoice, share_dir};
use crate::wire::attach;
use crate::wire::serve::{WireOptions, serve_streams};

pub use crate::VERSION;

pub use crate::startup::StartError;
use crate::startup::{
    Choices, agent_setup, init_logging, load_config, log_file, report, resolve_work_dir, warn_at_start_up,
};

/// Everything start-up prepared for serving: the process-wide agent setup and the one session
/// the front end will build.
pub struct Prepared {
    setup: AgentSetup,
    work_dir: PathBuf,
    session: SessionChoice,
    max_line_bytes: usize,
    front_end: FrontEnd,
}

/// Which front end serves a kimi command line.
enum FrontEnd {
    Wire,
    /// ACP: sessions are made by the client (`session/new`), not on the command line.
    Acp,
    Print(crate::print::kimi::KimiOptions),
}

#[allow(clippy::print_stderr)]
pub fn main() -> ExitCode {
    let mut argv: Vec<OsString> = std::env::args_os().collect();
    // `kiwi schema`: the wire protocol's JSON Schema, for client authors (no parser needed).
    if argv.len() == 2 && argv[1] == "schema" {
        crate::wire::schema::print();
        return ExitCode::SUCCESS;
    }
    // `kiwi acp [options]` is `kiwi --acp [options]`: the options stay the top-level ones.
    // `kiwi acp --help` is acp's own help.
    if argv.get(1).is_some_and(|a| a == "acp") {
        if argv[2..].iter().any(|a| a == "-h" || a == "--help") {
            argv.truncate(2);
            argv.push(OsString::from("--help"));
        } else {
            argv[1] = OsString::from("--acp");
        }
    }
    // `kiwi sesions`: a usage error with a suggestion, before it can become a prompt.
    if !crate::print::dialect::claude_by_name_or_env(&argv)
        && let Some(message) = crate::cli::mistyped_subcommand(&argv[1..])
    {
        return crate::commands::usage_error(&message);
    }
    match crate::print::dialect::from_process(&argv) {
        crate::print::dialect::Dialect::Claude => return crate::print::claude::main(&argv),
        crate::print::dialect::Dialect::Codex => return crate::print::codex::main(&argv),
        crate::print::dialect::Dialect::Kimi => {}
    }
    let mut cli = match Cli::try_parse_from(&argv) {
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
    // Options before `acp` (`kiwi --config-file c acp`): the same as `--acp`.
    if matches!(cli.command, Some(crate::cli::Command::Acp)) {
        cli.command = None;
        cli.acp = true;
    }
    // A subcommand runs instead of the server, before any of its start-up (`docs/subcommands.md` §0).
    if let Some(command) = &cli.command {
        return crate::commands::run(command, &cli);
    }
    let share = share_dir();
    let log_path = log_file(&share);
    init_logging(cli.debug, cli.log_stderr, &log_path);
    if std::io::stdin().is_terminal() && !cli.print_mode() && !cli.acp {
        eprintln!(
            "kiwi speaks JSON-RPC 2.0 (the Kimi Wire protocol), one message per line on stdin and stdout; \
             try: {{\"jsonrpc\":\"2.0\",\"id\":\"1\",\"method\":\"initialize\",\"params\":{{\"protocol_version\":\"1.2\"}}}}"
        );
    }
    match prepare(cli, &share) {
        Ok(prepared) => run_with(prepared, std::io::stdin(), std::io::stdout()),
        Err(e) => report(e, &share),
    }
}

pub fn prepare(cli: Cli, share: &Path) -> Result<Prepared, StartError> {
    cli.validate().map_err(StartError::Usage)?;
    // Flag values are checked (usage errors) before any config is read.
    let work_dir = resolve_work_dir(cli.work_dir.as_deref())?;
    let (mut config, config_source, warnings) = load_config(cli.config.as_deref(), cli.config_file.as_deref(), share)?;
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
    if let Some(n) = cli.max_tokens_per_session {
        config.loop_control.max_session_tokens = Some(n);
    }
    if let Some(usd) = cli.max_budget_usd {
        config.loop_control.max_budget_usd = Some(usd);
    }
    if cli.plan {
        config.default_plan_mode = true;
    }
    let agent = match (&cli.agent_file, &cli.agent) {
        (Some(path), _) => AgentChoice::File(path.clone()),
        (None, Some(name)) => AgentChoice::Builtin(name.clone()),
        (None, None) => AgentChoice::Default,
    };
    let no_model = if cli.acp {
        "every prompt will fail with -32000 (Authentication required)"
    } else {
        "every prompt will fail with -32001 (LLM is not set)"
    };
    let add_dirs = add_dirs(&cli)?;
    let choices = Choices {
        model: cli.model.clone(),
        thinking: cli.thinking_flag(),
        agent,
        skills_dir: cli.skills_dir.clone(),
        // kimi's `--print` approves every action (`docs/print-mode.md` A.1).
        yolo: cli.yolo || cli.print_mode(),
        mcp_configs: mcp_documents(&cli, share)?,
        invocation: Invocation {
            // kimi 1.49's `--print` implies afk: nobody is there to answer a question.
            afk: cli.afk || cli.print_mode(),
            add_dirs: add_dirs.clone(),
        },
        added_dirs: add_dirs,
        sandbox: (cli.sandbox.sandbox, cli.sandbox.sandbox_network),
        mcp_files: cli.mcp_config_file.clone(),
        no_model: Some(no_model),
        ..Choices::new(work_dir.clone())
    };
    let (setup, warnings) = agent_setup(config, config_source, share, choices, warnings)?;
    warn_at_start_up(&warnings);
    let front_end = match crate::print::kimi::KimiOptions::from_cli(&cli) {
        Some(options) => FrontEnd::Print(options),
        None if cli.acp => FrontEnd::Acp,
        None => FrontEnd::Wire,
    };
    Ok(Prepared { setup, work_dir, session, max_line_bytes: cli.max_line_bytes, front_end })
}

/// `--add-dir` directories, absolute (relative ones are taken from the current directory).
fn add_dirs(cli: &Cli) -> Result<Vec<PathBuf>, StartError> {
    let cwd =
        std::env::current_dir().map_err(|e| StartError::Fatal(format!("Cannot read the current directory: {e}")))?;
    Ok(cli.add_dir.iter().map(|d| crate::session::store::normalize(d, &cwd)).collect())
}

/// The MCP config documents of the command line (`docs/subcommands.md` §2.1): the
/// `--mcp-config-file` files in order, or `<share_dir>/mcp.json` when there are none and it
/// exists, then each `--mcp-config`. Checked here so that a bad one stops the start-up.
fn mcp_documents(cli: &Cli, share: &Path) -> Result<Vec<serde_json::Value>, StartError> {
    let default_file = share.join("mcp.json");
    let files: Vec<PathBuf> = if cli.mcp_config_file.is_empty() {
        if default_file.is_file() { vec![default_file] } else { Vec::new() }
    } else {
        cli.mcp_config_file.clone()
    };
    let mut documents = Vec::new();
    for path in &files {
        let text = std::fs::read_to_string(path)
            .map_err(|e| StartError::Fatal(format!("Cannot read {}: {e}", path.display())))?;
        let doc = serde_json::from_str(&text)
            .map_err(|e| StartError::Usage(format!("Invalid JSON in MCP config file '{}': {e}", path.display())))?;
        documents.push(doc);
    }
    for text in &cli.mcp_config {
        documents.push(serde_json::from_str(text).map_err(|e| StartError::Usage(format!("Invalid JSON: {e}")))?);
    }
    crate::mcp::server_table(&documents).map_err(|e| StartError::Fatal(format!("Invalid MCP config: {e}")))?;
    Ok(documents)
}

/// The session and its host's socket when the wire session `request` opens is held by another
/// process (`docs/host.md` §2); `None` when this process opens the session itself: it is
/// nobody's, or its host cannot be reached and the lock came free within [`attach::LOCK_WAIT`].
/// Otherwise the reason goes to stderr and opening fails on the lock as it always did.
#[allow(clippy::print_stderr)] // one start-up line naming why attaching failed
fn connect_to_host(
    share: &Path,
    request: &SessionRequest,
) -> Option<(attach::Target, std::io::BufReader<std::os::unix::net::UnixStream>)> {
    let (id, dir) = attach::held_elsewhere(share, &request.work_dir, &request.session)?;
    match attach::connect(&dir) {
        Ok(stream) => Some((attach::Target { id, dir, work_dir: request.work_dir.clone() }, stream)),
        Err(e) => {
            if !attach::wait_for_lock(&dir) {
                tracing::warn!("cannot attach to session {id}: {e}");
                eprintln!("Cannot attach to session {id}: {e}");
            }
            None
        }
    }
}

/// Serves the chosen front end on `input` / `output` (stdin and stdout for the binary). A
/// session that cannot be built is reported like any start-up error.
pub fn run_with<R, W>(prepared: Prepared, input: R, output: W) -> ExitCode
where
    R: std::io::Read + Send + 'static,
    W: std::io::Write + Send + 'static,
{
    let Prepared { setup, work_dir, session, max_line_bytes, front_end } = prepared;
    let request = SessionRequest { work_dir, session, trace: None };
    let served = match front_end {
        FrontEnd::Wire => {
            let options = WireOptions { max_line_bytes, version: VERSION.to_string() };
            match connect_to_host(&setup.share_dir, &request) {
                Some((target, host)) => attach::serve(&setup, target, host, options, input, output),
                None => serve_streams(&setup, request, options, input, output),
            }
        }
        FrontEnd::Print(options) => crate::print::kimi::run(&setup, request, options, input, output, max_line_bytes),
        FrontEnd::Acp => {
            let program = std::env::args().next().unwrap_or_else(|| "kiwi".into());
            let options = AcpOptions { max_line_bytes, version: VERSION.to_string(), program };
            return serve_acp(setup, options, input, output);
        }
    };
    match served {
        Ok(code) => code,
        Err(BuildError::Usage(msg)) => report(StartError::Usage(msg), &setup.share_dir),
        Err(BuildError::Fatal(msg)) => report(StartError::Fatal(msg), &setup.share_dir),
    }
}
