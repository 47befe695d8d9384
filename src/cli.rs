//! Command-line flags (`docs/configuration.md` §1). Usage errors exit 2 with one readable message.

use std::path::PathBuf;

use clap::{ArgAction, Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "kiwi",
    about = "An agent runtime speaking the Kimi Wire protocol over stdio",
    after_help = "Logs go to <share dir>/logs/kiwi.log (share dir: $KIMI_SHARE_DIR, else ~/.kimi), or to stderr \
with --log-stderr; stdout carries protocol frames only. KIWI_LOG sets the log filter in tracing's syntax \
(e.g. KIWI_LOG=debug, or KIWI_LOG=info,kiwi::llm=debug) and wins over --debug.",
    disable_version_flag = true
)]
pub struct Cli {
    /// Print the version and exit.
    #[arg(short = 'V', long = "version", action = ArgAction::SetTrue)]
    pub version: bool,

    /// Serve the Wire protocol on stdin/stdout (the default mode).
    #[arg(long)]
    pub wire: bool,
    /// Non-interactive print mode: run the prompt(s) and print the answer (approves every action).
    #[arg(long)]
    pub print: bool,
    /// Serve the Agent Client Protocol on stdin/stdout (for IDEs such as Zed; also `kiwi acp`).
    #[arg(long)]
    pub acp: bool,

    /// Working directory of the agent (default: the current directory).
    #[arg(short = 'w', long = "work-dir", value_name = "PATH")]
    pub work_dir: Option<PathBuf>,
    /// Resume this session of the work dir, or create it with exactly this id (kimi also spells
    /// it `-r` / `--resume`).
    #[arg(short = 'S', long = "session", value_name = "ID", visible_alias = "resume", visible_short_alias = 'r')]
    pub session: Option<String>,
    /// Resume the work dir's last session.
    #[arg(short = 'C', long = "continue")]
    pub continue_: bool,

    /// The whole config as JSON or TOML text.
    #[arg(long = "config", value_name = "TEXT")]
    pub config: Option<String>,
    /// Config file (TOML, or JSON by suffix). Default: <share dir>/config.toml.
    #[arg(long = "config-file", value_name = "PATH")]
    pub config_file: Option<PathBuf>,
    /// Model to use (a key of `models`).
    #[arg(short = 'm', long = "model", value_name = "NAME")]
    pub model: Option<String>,
    /// Turn thinking on.
    #[arg(long, overrides_with = "no_thinking")]
    pub thinking: bool,
    /// Turn thinking off.
    #[arg(long = "no-thinking")]
    pub no_thinking: bool,
    /// Approve every action without asking.
    #[arg(short = 'y', long = "yolo", visible_aliases = ["yes", "auto-approve"])]
    pub yolo: bool,
    /// Start new sessions in plan mode (as the config's `default_plan_mode`).
    #[arg(long)]
    pub plan: bool,
    /// Nobody is at the keyboard, for this run only (as `/afk`, never saved with the session):
    /// actions are approved and questions dismissed. `--print` implies it.
    #[arg(long)]
    pub afk: bool,
    /// Add a directory to the workspace, as `/add-dir` (repeatable; saved with the session).
    #[arg(long = "add-dir", value_name = "DIR")]
    pub add_dir: Vec<PathBuf>,

    /// Built-in agent: `default` or `okabe`.
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// Custom agent spec (YAML).
    #[arg(long = "agent-file", value_name = "PATH")]
    pub agent_file: Option<PathBuf>,
    /// MCP config file(s).
    #[arg(long = "mcp-config-file", value_name = "PATH")]
    pub mcp_config_file: Vec<PathBuf>,
    /// Inline MCP config JSON.
    #[arg(long = "mcp-config", value_name = "JSON")]
    pub mcp_config: Vec<String>,
    /// Skills root (replaces user and project skill discovery).
    #[arg(long = "skills-dir", value_name = "DIR")]
    pub skills_dir: Option<PathBuf>,

    /// Most model calls (steps) one turn may make (as `loop_control.max_steps_per_turn`).
    #[arg(long = "max-steps-per-turn", value_name = "N", value_parser = at_least_one)]
    pub max_steps_per_turn: Option<u32>,
    /// Most retries of one failed model call (as `loop_control.max_retries_per_step`).
    #[arg(long = "max-retries-per-step", value_name = "N", value_parser = at_least_one)]
    pub max_retries_per_step: Option<u32>,
    /// Extra automatic rounds per prompt, "Ralph" mode (0: off, -1: no limit; as
    /// `loop_control.max_ralph_iterations`).
    #[arg(long = "max-ralph-iterations", value_name = "N", value_parser = at_least_minus_one, allow_negative_numbers = true)]
    pub max_ralph_iterations: Option<i64>,
    /// End the turn once the session's model calls have used this many tokens (as
    /// `loop_control.max_session_tokens`).
    #[arg(long = "max-tokens-per-session", value_name = "N", value_parser = at_least_one_u64)]
    pub max_tokens_per_session: Option<u64>,
    /// End the turn once the session's model calls have cost this many US dollars (as
    /// `loop_control.max_budget_usd`; needs the model's prices, `usd_per_mtok`).
    #[arg(long = "max-budget-usd", value_name = "USD", value_parser = budget_usd)]
    pub max_budget_usd: Option<f64>,

    /// kiwi's own debug lines in the log (dependencies stay at INFO; see KIWI_LOG below).
    #[arg(long)]
    pub debug: bool,
    /// Accepted for compatibility; no effect in wire mode.
    #[arg(long)]
    pub verbose: bool,
    /// Write logs to stderr instead of the log file.
    #[arg(long = "log-stderr")]
    pub log_stderr: bool,
    /// Longest accepted inbound line in bytes.
    #[arg(long = "max-line-bytes", value_name = "BYTES", default_value_t = crate::rpc::reader::DEFAULT_MAX_LINE_BYTES)]
    pub max_line_bytes: usize,

    /// The prompt of a print-mode run (ignored in wire mode, validated only).
    #[arg(short = 'p', long = "prompt", visible_alias = "command", short_alias = 'c', value_name = "TEXT")]
    pub prompt: Option<String>,
    /// = --print --output-format text --final-message-only.
    #[arg(long)]
    pub quiet: bool,
    /// Print mode: `text` (stdin is the prompt) or `stream-json` (one message per line).
    #[arg(long = "input-format", value_name = "FORMAT")]
    pub input_format: Option<String>,
    /// Print mode: `text` or `stream-json`.
    #[arg(long = "output-format", value_name = "FORMAT")]
    pub output_format: Option<String>,
    /// Print mode: only the last assistant message of each turn.
    #[arg(long = "final-message-only")]
    pub final_message_only: bool,
    /// Print mode with stream-json output: also write the model's text and thinking as they
    /// arrive, one `{"type":"delta",...}` line per piece.
    #[arg(long = "stream-deltas")]
    pub stream_deltas: bool,

    /// The OS sandbox for Shell commands.
    #[command(flatten)]
    pub sandbox: SandboxFlags,

    /// A subcommand; without one kiwi serves the wire protocol.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Subcommands: they run instead of a server and do not act on the top-level options
/// (`docs/subcommands.md` §0). Each variant is dispatched by the `commands` module. Their
/// options are defined only when one is used (`defer`): building them all cost every start of
/// the server, which uses none of them.
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum Command {
    /// Log in to your Kimi account (device flow); writes the login to the default config.
    Login(JsonFlag),
    /// Log out of your Kimi account: removes the stored login and the managed models.
    Logout(JsonFlag),
    /// Print version information.
    Info(JsonFlag),
    /// List the stored sessions of every work dir (id, updated, work dir, title).
    Sessions(SessionsArgs),
    /// Export a session as a ZIP archive.
    Export(ExportArgs),
    /// Manage the MCP servers of <share_dir>/mcp.json.
    #[command(subcommand, subcommand_required = true)]
    Mcp(McpCommand),
    /// Serve sessions to browsers: a web UI, a REST API and a WebSocket per session (`docs/web.md`).
    Web(WebArgs),
    /// Serve the Agent Client Protocol on stdin/stdout, for IDEs such as Zed (the same as --acp).
    #[command(after_help = "kiwi acp takes kiwi's top-level options (see `kiwi --help`), after `acp` or before it: \
kiwi acp --config-file PATH -m MODEL. In Zed's settings: \
{ \"agent_servers\": { \"kiwi\": { \"command\": \"kiwi\", \"args\": [\"acp\"] } } }")]
    Acp,
    /// Print the wire protocol's JSON Schema (every method, event, request and error code) on stdout.
    Schema,
    /// Run one command under the sandbox policy a Shell call in the work dir would get
    /// (`docs/sandbox.md`); exits with the command's status, 125 when the sandbox cannot be set up.
    Sandbox(SandboxArgs),
}

// `--sandbox MODE` and `--sandbox-network` (spec sandbox.md §2.1), on the top-level command
// line, `kiwi web` and `kiwi sandbox` (a plain comment: clap would show a doc comment as the
// help of every command that flattens these flags).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Args)]
pub struct SandboxFlags {
    /// Confine the commands the model runs: `read-only`, `workspace-write` or `off` (default:
    /// the config's `[sandbox] mode`, else off).
    #[arg(long = "sandbox", value_name = "MODE")]
    pub sandbox: Option<crate::sandbox::SandboxMode>,
    /// In a sandboxed mode, let commands use the network (as `[sandbox] network = true`).
    #[arg(long = "sandbox-network")]
    pub sandbox_network: bool,
}

// `kiwi sandbox [OPTIONS] -- CMD [ARG]...` (its help is the variant's doc comment).
#[derive(Debug, Clone, Args)]
pub struct SandboxArgs {
    /// The mode (default: workspace-write) and the network switch.
    #[command(flatten)]
    pub flags: SandboxFlags,
    /// A directory that is writable too, as `--add-dir` of a session (repeatable).
    #[arg(long = "add-dir", value_name = "DIR")]
    pub add_dir: Vec<PathBuf>,
    /// The work dir the command runs in and may write (default: the current directory).
    #[arg(short = 'w', long = "work-dir", value_name = "DIR")]
    pub work_dir: Option<PathBuf>,
    /// The config file whose `[sandbox]` keys apply (default: <share dir>/config.toml when it
    /// exists).
    #[arg(long = "config-file", value_name = "PATH")]
    pub config_file: Option<PathBuf>,
    /// The command and its arguments (put them after `--`).
    #[arg(value_name = "CMD", required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<std::ffi::OsString>,
}

// `kiwi web [OPTIONS]` (`docs/web.md` §1): the reference's flags; `-h` is the host, `--help` is
// help.
#[derive(Debug, Clone, Args)]
#[command(disable_help_flag = true)]
pub struct WebArgs {
    /// Print help.
    #[arg(long, action = ArgAction::Help)]
    pub help: Option<bool>,
    /// Bind to this address (default 127.0.0.1).
    #[arg(long, short = 'h', value_name = "HOST")]
    pub host: Option<String>,
    /// Bind 0.0.0.0 (share on the network); ignored when --host is given.
    #[arg(long, short = 'n')]
    pub network: bool,
    /// The first port to try (the next nine are tried when it is busy).
    #[arg(long, short = 'p', default_value_t = 5494)]
    pub port: u16,
    /// Accepted for compatibility (the reference's developer auto-reload); no effect.
    #[arg(long)]
    pub reload: bool,
    /// Open the browser once the server is up (the default).
    #[arg(long, overrides_with = "no_open")]
    pub open: bool,
    /// Do not open the browser.
    #[arg(long = "no-open")]
    pub no_open: bool,
    /// Require this bearer token (default: `--auth-token-file`, else $KIWI_WEB_AUTH_TOKEN, else a
    /// random one, printed in the URL).
    #[arg(long = "auth-token", value_name = "TOKEN")]
    pub auth_token: Option<String>,
    /// Read the bearer token from the first line of this file (not visible in the process list).
    #[arg(long = "auth-token-file", value_name = "PATH")]
    pub auth_token_file: Option<std::path::PathBuf>,
    /// Comma-separated Origin values allowed to call the API (`*` allows every origin).
    #[arg(long = "allowed-origins", value_name = "ORIGINS")]
    pub allowed_origins: Option<String>,
    /// Never require a token: anyone who can reach the port drives the agent (asks for
    /// confirmation when bound to a public address).
    #[arg(long = "dangerously-omit-auth")]
    pub dangerously_omit_auth: bool,
    /// Refuse the sensitive APIs (config writes, open-in, hidden files).
    #[arg(long = "restrict-sensitive-apis", overrides_with = "no_restrict_sensitive_apis")]
    pub restrict_sensitive_apis: bool,
    /// Allow the sensitive APIs even in public mode.
    #[arg(long = "no-restrict-sensitive-apis")]
    pub no_restrict_sensitive_apis: bool,
    /// Only accept clients with a private address (the default).
    #[arg(long = "lan-only", overrides_with = "public")]
    pub lan_only: bool,
    /// Accept clients from any address.
    #[arg(long)]
    pub public: bool,
    /// Build every session from this config file (TOML, or JSON by suffix); the config API
    /// edits it. Default: <share dir>/config.toml.
    #[arg(long = "config-file", value_name = "PATH")]
    pub config_file: Option<PathBuf>,
    /// Model to use (a key of `models`) until the UI switches it.
    #[arg(short = 'm', long = "model", value_name = "NAME")]
    pub model: Option<String>,
    /// The sandbox of every session served (`--sandbox MODE`, `--sandbox-network`).
    #[command(flatten)]
    pub sandbox: SandboxFlags,
}

impl WebArgs {
    /// `--open` / `--no-open`, `--open` by default.
    pub fn open_browser(&self) -> bool {
        !self.no_open
    }

    /// `--restrict-sensitive-apis` / `--no-restrict-sensitive-apis`; `None` when neither is given.
    pub fn restrict_flag(&self) -> Option<bool> {
        if self.restrict_sensitive_apis {
            Some(true)
        } else if self.no_restrict_sensitive_apis {
            Some(false)
        } else {
            None
        }
    }

    /// `--lan-only` (the default) unless `--public`.
    pub fn lan_only_flag(&self) -> bool {
        !self.public
    }
}

/// `kiwi mcp …` (`docs/subcommands.md` §1).
#[derive(Debug, Subcommand)]
#[command(defer = true)]
pub enum McpCommand {
    /// Add a server (or replace the one of the same name).
    Add(McpAdd),
    /// Remove a server.
    Remove(McpName),
    /// List the configured servers.
    List,
    /// Authorize kiwi with an OAuth-protected remote server.
    Auth(McpName),
    /// Forget the OAuth tokens stored for a remote server.
    #[command(name = "reset-auth")]
    ResetAuth(McpName),
    /// Connect to a server once and list its tools.
    Test(McpName),
}

#[derive(Debug, Args)]
pub struct McpName {
    /// The server's name in mcp.json.
    pub name: String,
}

#[derive(Debug, Args)]
pub struct McpAdd {
    /// How kiwi talks to the server.
    #[arg(long, short = 't', default_value = "stdio", value_parser = ["stdio", "http"])]
    pub transport: String,
    /// KEY=VALUE for a stdio server's environment (repeatable).
    #[arg(long, short = 'e', value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// KEY:VALUE header for an http server (repeatable).
    #[arg(long, short = 'H', value_name = "KEY:VALUE")]
    pub header: Vec<String>,
    /// http only: `oauth`, or a bearer token.
    #[arg(long, short = 'a')]
    pub auth: Option<String>,
    /// The server's name.
    pub name: String,
    /// http: the URL; stdio: the command and its arguments (put arguments starting with `-` after `--`).
    #[arg(value_name = "TARGET_OR_COMMAND")]
    pub target: Vec<String>,
}

// `kiwi sessions`.
#[derive(Debug, Clone, Copy, Args)]
pub struct SessionsArgs {
    /// One JSON array instead of text.
    #[arg(long)]
    pub json: bool,
    /// Only the archived sessions.
    #[arg(long)]
    pub archived: bool,
}

// `kiwi export`.
#[derive(Debug, Clone, Args)]
pub struct ExportArgs {
    /// Session ID to export. Defaults to the work dir's previous session.
    pub session_id: Option<String>,
    /// Output ZIP file path. Default: session-<id>.zip in the current directory.
    #[arg(long, short = 'o', value_name = "PATH")]
    pub output: Option<PathBuf>,
    /// Skip the confirmation when exporting the previous session.
    #[arg(long, short = 'y')]
    pub yes: bool,
}

// The one option the account subcommands take.
#[derive(Debug, Clone, Copy, Args)]
pub struct JsonFlag {
    /// One JSON object per line instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Click's wording for an out-of-range integer: `0 is not in the range x>=1.`
fn int_at_least(text: &str, min: i64) -> Result<i64, String> {
    let n: i64 = text.trim().parse().map_err(|_| format!("'{text}' is not a valid integer."))?;
    if n < min {
        return Err(format!("{n} is not in the range x>={min}."));
    }
    Ok(n)
}

fn at_least_one(text: &str) -> Result<u32, String> {
    int_at_least(text, 1).map(|n| u32::try_from(n).unwrap_or(u32::MAX))
}

fn at_least_one_u64(text: &str) -> Result<u64, String> {
    int_at_least(text, 1).map(|n| n as u64)
}

fn budget_usd(text: &str) -> Result<f64, String> {
    crate::config::prices::parse_budget_usd(text).ok_or_else(|| format!("expected US dollars above 0, got '{text}'"))
}

fn at_least_minus_one(text: &str) -> Result<i64, String> {
    int_at_least(text, -1)
}

/// Every subcommand name, `help` included (clap adds that one only when it builds the parser).
pub fn subcommand_names() -> Vec<String> {
    use clap::CommandFactory;
    let mut names: Vec<String> = Cli::command().get_subcommands().map(|c| c.get_name().to_string()).collect();
    names.push("help".into());
    names
}

/// Options that make the words after them a prompt: a command line with one of them is never
/// taken for a mistyped subcommand.
const PROMPT_OPTIONS: &[&str] = &["-p", "-c", "--print", "--prompt", "--command", "--quiet", "--"];

/// The usage error (Click's wording) for a first word that looks like a mistyped subcommand (`kiwi sesions`,
/// `kiwi wbe`), `docs/subcommands.md` §0: the word comes first, is one word of letters, digits,
/// `-` or `_`, is not a subcommand, and is within one edit of a subcommand name of up to four
/// letters or two edits of a longer one (a swap of two neighbours is one edit; case is
/// ignored); and no `-p`, `-c`, `--print`, `--prompt`, `--command`, `--quiet` or `--` follows.
/// Anything else stays what it was (a prompt of Claude's dialect, or clap's own error).
pub fn mistyped_subcommand(args: &[std::ffi::OsString]) -> Option<String> {
    let word = args.first()?.to_str()?;
    if word.is_empty()
        || word.starts_with('-')
        || !word.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return None;
    }
    if args[1..].iter().any(|a| {
        let a = a.to_string_lossy();
        PROMPT_OPTIONS.contains(&a.as_ref()) || a.starts_with("--prompt=") || a.starts_with("--command=")
    }) {
        return None;
    }
    let names = subcommand_names();
    if names.iter().any(|n| n == word) {
        return None;
    }
    let lower = word.to_ascii_lowercase();
    let near = names
        .iter()
        .map(|n| (crate::config::diagnose::edit_distance(&lower, n), n))
        .filter(|(d, n)| *d <= if n.len() <= 4 { 1 } else { 2 })
        .min_by_key(|(d, _)| *d)
        .map(|(_, n)| n)?;
    Some(format!("No such command '{word}'. Did you mean '{near}'? (A prompt goes after -p: kiwi -p \"{word}\".)"))
}

/// `--version`: the one thing kiwi prints to stdout that is not a protocol frame (it exits at once).
#[allow(clippy::print_stdout)]
pub fn print_version(version: &str) {
    println!("kiwi, version {version}");
}

impl Cli {
    /// Cross-flag rules clap cannot express; the error text is the usage message.
    pub fn validate(&self) -> Result<(), String> {
        let modes: Vec<&str> = [(self.print, "--print"), (self.acp, "--acp"), (self.wire, "--wire")]
            .iter()
            .filter(|(on, _)| *on)
            .map(|(_, name)| *name)
            .collect();
        if modes.len() > 1 {
            return Err(format!("Cannot combine {}.", modes.join(", ")));
        }
        if self.agent.is_some() && self.agent_file.is_some() {
            return Err("Cannot combine --agent and --agent-file.".into());
        }
        if self.continue_ && self.session.is_some() {
            return Err("Cannot combine --continue and --session.".into());
        }
        if self.config.is_some() && self.config_file.is_some() {
            return Err("Cannot combine --config and --config-file.".into());
        }
        if self.quiet && (self.wire || self.acp) {
            return Err("Quiet mode cannot be combined with ACP or Wire UI".into());
        }
        if self.quiet && self.output_format.as_deref().is_some_and(|f| f != "text") {
            return Err("Quiet mode implies --output-format text".into());
        }
        if !self.print_mode()
            && (self.input_format.is_some() || self.output_format.is_some() || self.final_message_only)
        {
            return Err("--input-format, --output-format and --final-message-only are only for print mode".into());
        }
        if self.stream_deltas && (!self.print_mode() || self.output_format.as_deref() != Some("stream-json")) {
            return Err("--stream-deltas needs --print --output-format stream-json".into());
        }
        for dir in &self.add_dir {
            if !dir.is_dir() {
                return Err(format!("Invalid value for --add-dir: Directory '{}' does not exist.", dir.display()));
            }
        }
        for (flag, value) in [("--input-format", &self.input_format), ("--output-format", &self.output_format)] {
            if let Some(v) = value
                && v != "text"
                && v != "stream-json"
            {
                return Err(format!("Invalid value for {flag}: '{v}' is not one of 'text', 'stream-json'."));
            }
        }
        if let Some(session) = &self.session {
            if session.trim().is_empty() {
                return Err("Session ID cannot be empty".into());
            }
            crate::session::id::check_session_id(session.trim())?;
        }
        if let Some(config) = &self.config
            && config.trim().is_empty()
        {
            return Err("Config cannot be empty".into());
        }
        if let Some(prompt) = &self.prompt
            && prompt.trim().is_empty()
        {
            return Err("Prompt cannot be empty".into());
        }
        if let Some(agent) = &self.agent
            && agent != "default"
            && agent != "okabe"
        {
            return Err(format!("Invalid value for --agent: '{agent}' is not one of 'default', 'okabe'."));
        }
        for (path, what) in self
            .agent_file
            .iter()
            .map(|p| (p, "--agent-file"))
            .chain(self.mcp_config_file.iter().map(|p| (p, "--mcp-config-file")))
            .chain(self.config_file.iter().map(|p| (p, "--config-file")))
        {
            if !path.is_file() {
                return Err(format!("Invalid value for {what}: File '{}' does not exist.", path.display()));
            }
        }
        if let Some(dir) = &self.skills_dir
            && !dir.is_dir()
        {
            return Err(format!("Invalid value for --skills-dir: Directory '{}' does not exist.", dir.display()));
        }
        for text in &self.mcp_config {
            if let Err(e) = serde_json::from_str::<serde_json::Value>(text) {
                return Err(format!("Invalid JSON: {e}"));
            }
        }
        for path in &self.mcp_config_file {
            let text = std::fs::read_to_string(path).map_err(|e| format!("Cannot read {}: {e}", path.display()))?;
            if let Err(e) = serde_json::from_str::<serde_json::Value>(&text) {
                return Err(format!("Invalid JSON: {e}"));
            }
        }
        Ok(())
    }

    /// `--print`, or `--quiet` which implies it.
    pub fn print_mode(&self) -> bool {
        self.print || self.quiet
    }

    pub fn thinking_flag(&self) -> Option<bool> {
        if self.thinking {
            Some(true)
        } else if self.no_thinking {
            Some(false)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, String> {
        let cli =
            Cli::try_parse_from(std::iter::once("kiwi").chain(args.iter().copied())).map_err(|e| e.to_string())?;
        cli.validate()?;
        Ok(cli)
    }

    #[test]
    fn combinations() {
        assert_eq!(parse(&["--print", "--wire"]).unwrap_err(), "Cannot combine --print, --wire.");
        assert!(parse(&["--continue", "--session", "x"]).is_err());
        assert_eq!(parse(&["--session", "  "]).unwrap_err(), "Session ID cannot be empty");
        for id in ["..", ".", "/tmp", "a/b", "a\\b"] {
            assert!(parse(&["--session", id]).unwrap_err().starts_with("Invalid session id"), "{id}");
        }
        assert!(parse(&["--max-steps-per-turn", "0"]).unwrap_err().contains("0 is not in the range x>=1."));
        assert!(parse(&["--max-retries-per-step", "0"]).unwrap_err().contains("0 is not in the range x>=1."));
        assert!(parse(&["--max-ralph-iterations", "-2"]).unwrap_err().contains("-2 is not in the range x>=-1."));
        assert_eq!(parse(&["--max-steps-per-turn", "7"]).unwrap().max_steps_per_turn, Some(7));
        assert!(parse(&["--wire", "--yes", "-m", "x", "--no-thinking", "--max-ralph-iterations", "-1"]).is_ok());
        assert!(parse(&["--quiet", "--wire"]).is_err());
        assert!(parse(&["--quiet", "--output-format", "stream-json"]).is_err());
        assert!(parse(&["--quiet"]).unwrap().print_mode());
        assert!(parse(&["--output-format", "text"]).unwrap_err().contains("only for print mode"));
        assert!(parse(&["--print", "--input-format", "xml"]).unwrap_err().contains("Invalid value for --input-format"));
        assert!(parse(&["--print", "--output-format", "stream-json", "--final-message-only"]).is_ok());
        assert!(parse(&["--acp"]).is_ok());
        assert_eq!(parse(&["--acp", "--wire"]).unwrap_err(), "Cannot combine --acp, --wire.");
        assert!(parse(&["--mcp-config", "{"]).unwrap_err().starts_with("Invalid JSON"));
    }

    fn web(args: &[&str]) -> WebArgs {
        match parse(&[&["web"], args].concat()).unwrap().command {
            Some(Command::Web(w)) => w,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn web_flags() {
        let w = web(&[]);
        assert_eq!((w.host.as_deref(), w.port, w.network), (None, 5494, false));
        assert!(w.open_browser() && w.lan_only_flag() && w.restrict_flag().is_none());
        let w = web(&["-h", "0.0.0.0", "-p", "6000", "-n", "--no-open", "--public", "--restrict-sensitive-apis"]);
        assert_eq!((w.host.as_deref(), w.port, w.network), (Some("0.0.0.0"), 6000, true));
        assert!(!w.open_browser() && !w.lan_only_flag() && w.restrict_flag() == Some(true));
        let w = web(&["--public", "--lan-only", "--no-open", "--open", "--no-restrict-sensitive-apis"]);
        assert!(w.open_browser() && w.lan_only_flag() && w.restrict_flag() == Some(false));
        let w = web(&["--auth-token", "t", "--allowed-origins", "a,b", "--dangerously-omit-auth", "--reload"]);
        assert_eq!((w.auth_token.as_deref(), w.allowed_origins.as_deref()), (Some("t"), Some("a,b")));
        assert!(w.dangerously_omit_auth && w.reload);
        assert!(parse(&["web", "--port", "x"]).is_err());
        let help = Cli::try_parse_from(["kiwi", "web", "--help"]).unwrap_err();
        assert_eq!(help.kind(), clap::error::ErrorKind::DisplayHelp);
    }

    /// Every flag, argument and subcommand, at every depth, says what it is for in `--help`.
    #[test]
    fn everything_has_a_description() {
        use clap::CommandFactory;
        fn walk(command: &clap::Command, path: &str, missing: &mut Vec<String>) {
            for arg in command.get_arguments() {
                if arg.get_help().is_none_or(|h| h.to_string().trim().is_empty()) {
                    missing.push(format!("{path} {}", arg.get_id()));
                }
            }
            for sub in command.get_subcommands() {
                let path = format!("{path} {}", sub.get_name());
                let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
                if about.trim().is_empty() || about.starts_with('`') {
                    missing.push(format!("{path}: about {about:?}"));
                }
                walk(sub, &path, missing);
            }
        }
        let mut command = Cli::command();
        command.build();
        let mut missing = Vec::new();
        walk(&command, "kiwi", &mut missing);
        assert!(missing.is_empty(), "no description: {missing:#?}");
    }

    #[test]
    fn mistyped_subcommands() {
        let typo = |args: &[&str]| {
            let args: Vec<std::ffi::OsString> = args.iter().map(Into::into).collect();
            mistyped_subcommand(&args)
        };
        assert!(typo(&["sesions"]).unwrap().contains("Did you mean 'sessions'?"));
        assert!(typo(&["wbe", "--no-open"]).unwrap().contains("Did you mean 'web'?"));
        assert!(typo(&["WEB"]).unwrap().contains("Did you mean 'web'?"));
        assert!(typo(&["logot"]).unwrap().contains("Did you mean 'logout'?"));
        for not_a_typo in [
            &["sessions"][..],
            &["hello"],
            &["yes"],
            &["sesions", "-p"],
            &["sesions", "--", "x"],
            &["sesions", "--prompt=x"],
            &["-p", "sesions"],
            &["fix the bug"],
            &[],
        ] {
            assert_eq!(typo(not_a_typo), None, "{not_a_typo:?}");
        }
    }

    #[test]
    fn sandbox_flags() {
        use crate::sandbox::SandboxMode;
        assert_eq!(parse(&[]).unwrap().sandbox.sandbox, None);
        let cli = parse(&["--sandbox", "workspace-write", "--sandbox-network"]).unwrap();
        assert_eq!((cli.sandbox.sandbox, cli.sandbox.sandbox_network), (Some(SandboxMode::WorkspaceWrite), true));
        assert_eq!(parse(&["--sandbox", "danger-full-access"]).unwrap().sandbox.sandbox, Some(SandboxMode::Off));
        let e = Cli::try_parse_from(["kiwi", "--sandbox", "bogus"]).unwrap_err();
        let text = e.to_string();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some("error: invalid value 'bogus' for '--sandbox <MODE>'"));
        assert_eq!(lines.next(), Some("  [possible values: read-only, workspace-write, off]"));
        assert!(text.contains("For more information, try '--help'."), "{text}");
        assert_eq!(web(&["--sandbox", "read-only"]).sandbox.sandbox, Some(SandboxMode::ReadOnly));
        match parse(&["sandbox", "--sandbox", "read-only", "-w", "/", "--", "ls", "-l"]).unwrap().command {
            Some(Command::Sandbox(a)) => {
                assert_eq!(a.flags.sandbox, Some(SandboxMode::ReadOnly));
                assert_eq!(a.command, ["ls", "-l"]);
            }
            other => panic!("{other:?}"),
        }
        assert!(parse(&["sandbox"]).is_err());
    }

    #[test]
    fn kimi_149_spellings() {
        assert_eq!(parse(&["--wire", "-r", "s1"]).unwrap().session.as_deref(), Some("s1"));
        assert_eq!(parse(&["--resume", "s2"]).unwrap().session.as_deref(), Some("s2"));
        assert!(parse(&["-r", "s1", "-C"]).is_err());
        assert!(parse(&["--afk"]).unwrap().afk);
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap();
        assert_eq!(parse(&["--add-dir", d, "--add-dir", d]).unwrap().add_dir.len(), 2);
        assert!(parse(&["--add-dir", "/no/such/dir/here"]).unwrap_err().contains("--add-dir"));
        assert_eq!(parse(&["--max-tokens-per-session", "500"]).unwrap().max_tokens_per_session, Some(500));
        assert!(parse(&["--max-tokens-per-session", "0"]).is_err());
        assert!(parse(&["--print", "--stream-deltas"]).unwrap_err().contains("--stream-deltas"));
        assert!(parse(&["--print", "--output-format", "stream-json", "--stream-deltas"]).is_ok());
    }
}
