//! Start-up pieces every front end's process shares: the log, the config and what is wrong
//! with it, the work dir, the one assembly of the process's agent setup ([`agent_setup`]: the
//! sandbox probe, the setup, what its model selection will do), and how a start-up failure is
//! reported (one readable line on stderr; usage errors exit 2, everything else 1; nothing on
//! stdout). Every entry point (kimi's command line, Claude Code's, `kiwi web`) goes through
//! these; each only adds its own choices.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::builder::{AgentChoice, AgentSetup, Invocation, PromptEdit};
use crate::config::{self, Config};
use crate::session::store::normalize;

/// A start-up failure: usage errors exit 2, everything else 1.
pub enum StartError {
    Usage(String),
    Fatal(String),
}

/// One readable start-up error on stderr; usage errors exit 2, everything else 1.
#[allow(clippy::print_stderr)]
pub(crate) fn report(error: StartError, share: &Path) -> ExitCode {
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

pub(crate) fn log_file(share: &Path) -> PathBuf {
    share.join("logs").join("kiwi.log")
}

/// The log filter: `KIWI_LOG` (tracing's env-filter syntax) wins; else `--debug` turns on kiwi's
/// own debug lines (not every dependency's), and the default is INFO.
///
/// Each line is written to the file as it is logged, one `write` under a lock (as the
/// reference's logger does): kiwi logs a few lines per request, not per token, and a line
/// written in place costs less than waking a writer thread for it; an idle server then has no
/// logger thread either. A log that cannot be opened is not worth failing a start for.
pub(crate) fn init_logging(debug: bool, log_stderr: bool, log_path: &Path) {
    let level = if debug { "info,kiwi=debug" } else { "info" };
    let filter = tracing_subscriber::EnvFilter::try_from_env("KIWI_LOG").unwrap_or_else(|_| level.into());
    if log_stderr {
        let _ =
            tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(false).try_init();
        return;
    }
    let Some(file) = log_writer(log_path) else { return };
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(file).with_ansi(false).try_init();
}

/// The log file opened for appending (its folder created), written one line per `write`.
pub(crate) fn log_writer(log_path: &Path) -> Option<std::sync::Mutex<std::fs::File>> {
    let dir = log_path.parent()?;
    let opened = std::fs::create_dir_all(dir)
        .and_then(|()| std::fs::OpenOptions::new().create(true).append(true).open(log_path));
    opened.ok().map(std::sync::Mutex::new)
}

/// The config, where it came from, and what is wrong with it that does not stop us.
pub(crate) fn load_config(
    text: Option<&str>,
    file: Option<&Path>,
    share: &Path,
) -> Result<(Config, String, Vec<String>), StartError> {
    if let Some(text) = text {
        let (config, warnings) = config::load_text_reporting(text).map_err(|e| StartError::Usage(e.to_string()))?;
        return Ok((config, "--config".into(), warnings));
    }
    if let Some(path) = file {
        let (config, warnings) = config::load_file_reporting(path).map_err(|e| StartError::Fatal(e.to_string()))?;
        return Ok((config, path.display().to_string(), warnings));
    }
    std::fs::create_dir_all(share).map_err(|e| StartError::Fatal(format!("Cannot create {}: {e}", share.display())))?;
    let (config, path, warnings) =
        config::load_default_reporting(share).map_err(|e| StartError::Fatal(e.to_string()))?;
    Ok((config, path.display().to_string(), warnings))
}

/// Start-up warnings go to the log and, one line each, to stderr (stdout is the protocol's).
#[allow(clippy::print_stderr)]
pub(crate) fn warn_at_start_up(lines: &[String]) {
    for line in lines {
        tracing::warn!("{line}");
        eprintln!("kiwi: warning: {line}");
    }
}

pub(crate) fn resolve_work_dir(work_dir: Option<&Path>) -> Result<PathBuf, StartError> {
    let cwd =
        std::env::current_dir().map_err(|e| StartError::Fatal(format!("Cannot read the current directory: {e}")))?;
    let dir = match work_dir {
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

/// What an entry point chooses for the sessions of its process, beside the config.
pub(crate) struct Choices {
    pub model: Option<String>,
    pub thinking: Option<bool>,
    pub agent: AgentChoice,
    pub skills_dir: Option<PathBuf>,
    pub yolo: bool,
    pub system_prompt: PromptEdit,
    pub mcp_configs: Vec<serde_json::Value>,
    pub invocation: Invocation,
    /// `--sandbox` / `--sandbox-network`.
    pub sandbox: (Option<crate::sandbox::SandboxMode>, bool),
    /// MCP config files, kept read-only inside the sandbox's writable roots.
    pub mcp_files: Vec<PathBuf>,
    /// Directories the sandbox makes writable beside the work dir (`--add-dir`).
    pub added_dirs: Vec<PathBuf>,
    /// The directory the sandbox is probed against.
    pub probe_dir: PathBuf,
    /// What every prompt does without a model, for the start-up warning; `None`: no model
    /// diagnostics at start (the Claude dialect reports it in its result line).
    pub no_model: Option<&'static str>,
}

impl Choices {
    /// The defaults: the config's model and agent, nothing added, probed against `probe_dir`.
    pub fn new(probe_dir: PathBuf) -> Self {
        Self {
            model: None,
            thinking: None,
            agent: AgentChoice::Default,
            skills_dir: None,
            yolo: false,
            system_prompt: PromptEdit::default(),
            mcp_configs: Vec::new(),
            invocation: Invocation::default(),
            sandbox: (None, false),
            mcp_files: Vec::new(),
            added_dirs: Vec::new(),
            probe_dir,
            no_model: None,
        }
    }
}

/// The process's agent setup, assembled the one way every entry point does it: the sandbox
/// probed (fail closed), the setup made of the config and `choices`, and what its model
/// selection will do. The warnings to show: the sandbox's, then `warnings` (the config's), then
/// the model diagnostics.
pub(crate) fn agent_setup(
    config: Config,
    config_source: String,
    share: &Path,
    choices: Choices,
    warnings: Vec<String>,
) -> Result<(AgentSetup, Vec<String>), StartError> {
    let (sandbox, mut all) = start_sandbox(
        config.sandbox.clone(),
        choices.sandbox,
        share,
        &config_source,
        &choices.mcp_files,
        &choices.probe_dir,
        &choices.added_dirs,
    )?;
    all.extend(warnings);
    let setup = AgentSetup {
        config: std::sync::Arc::new(config),
        share_dir: share.to_path_buf(),
        model: choices.model,
        thinking: choices.thinking,
        agent: choices.agent,
        skills_dir: choices.skills_dir,
        yolo: choices.yolo,
        config_source,
        system_prompt: choices.system_prompt,
        mcp_configs: choices.mcp_configs,
        invocation: choices.invocation,
        sandbox,
    };
    if let Some(note) = choices.no_model {
        let diagnostics = setup.diagnostics();
        all.extend(diagnostics.warnings);
        if let Some(reason) = diagnostics.no_model {
            all.push(format!("{reason}; {note}"));
        }
    }
    Ok((setup, all))
}

/// The run's sandbox (spec sandbox.md §2.3, §5.3) and its warnings: `mode_flag` wins over
/// `[sandbox] mode`; the probe runs before the front end serves, and a sandbox that cannot be set
/// up stops the start-up with its one line. The flags are `--sandbox` and `--sandbox-network`;
/// `config_source` and `mcp_files` are kept read-only inside the writable roots (§3.3).
fn start_sandbox(
    settings: crate::sandbox::SandboxSettings,
    (mode_flag, network_flag): (Option<crate::sandbox::SandboxMode>, bool),
    share: &Path,
    config_source: &str,
    mcp_files: &[PathBuf],
    work_dir: &Path,
    added_dirs: &[PathBuf],
) -> Result<(crate::agent_env::SandboxRun, Vec<String>), StartError> {
    let mut protected: Vec<PathBuf> = Vec::new();
    let config_path = Path::new(config_source);
    if config_path.is_file() {
        protected.push(config_path.to_path_buf());
    }
    let default_mcp = share.join("mcp.json");
    if default_mcp.is_file() {
        protected.push(default_mcp);
    }
    protected.extend(mcp_files.iter().filter(|p| p.is_file()).cloned());
    let (run, warnings) =
        crate::agent_env::SandboxRun::start(settings, mode_flag, network_flag, share, protected, work_dir, added_dirs)
            .map_err(StartError::Fatal)?;
    if run.sandbox.is_on() {
        tracing::info!(
            "sandbox: {} (network {})",
            run.sandbox.mode(),
            if run.sandbox.network_allowed() { "on" } else { "off" }
        );
    }
    Ok((run, warnings))
}
