//! The subcommands: `login`, `logout`, `info`, `mcp`, `sessions`, `export` (`docs/subcommands.md`
//! §1, §3, §4, §6, §7), `sandbox` (`docs/sandbox.md`), and `web`, which runs the web server (`crate::web`). Unlike the wire
//! server, stdout here belongs to the command: one message per line, text or (with `--json`) one
//! JSON object per line, written only by [`print_line`] (`web` prints its start-up lines through
//! the process shell).
//!
//! Invariants:
//! * a subcommand does not act on the top-level options (§0); only their paths are checked, as
//!   Click type-checks them (a missing `--work-dir` or `--config-file` is still a usage error);
//! * `info` touches no file; `login` and `logout` create the share dir and log to
//!   `<share>/logs/kiwi.log`, never to stderr or stdout (the npm SDK reads stdout as the answer
//!   and takes stderr as the error text);
//! * exit 0 on success, 1 when an `error` event was emitted, 2 on usage errors.

mod export;
mod info;
mod login;
mod logout;
mod mcp;
mod mcp_remote;
mod sandbox;
mod sessions;

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;

use serde_json::{Map, Value};

use crate::cli::{Cli, Command};

/// Runs a subcommand to completion.
pub fn run(command: &Command, cli: &Cli) -> ExitCode {
    if let Err(message) = check_top_level_paths(cli) {
        return usage_error(&message);
    }
    let share = crate::session::store::share_dir();
    match command {
        Command::Info(flag) => info::run(flag.json),
        Command::Login(flag) => account(&share, flag.json, Account::Login),
        Command::Logout(flag) => account(&share, flag.json, Account::Logout),
        Command::Sessions(args) => sessions::run(&share, args.json, args.archived),
        Command::Export(args) => {
            let cwd = std::env::current_dir().unwrap_or_default();
            let work_dir = match &cli.work_dir {
                Some(w) => crate::session::store::normalize(w, &cwd),
                None => cwd,
            };
            export::run(&share, &work_dir, args.session_id.as_deref(), args.output.as_deref(), args.yes)
        }
        Command::Web(args) => crate::web::serve::run(args, cli),
        Command::Schema => {
            crate::wire::schema::print();
            ExitCode::SUCCESS
        }
        // The process layer serves `kiwi … acp` itself (it is `--acp`); a caller that did not is told so.
        Command::Acp => usage_error("kiwi acp is a server, not a command: run it as `kiwi acp` or `kiwi --acp`"),
        Command::Sandbox(args) => sandbox::run(args, cli, &share),
        Command::Mcp(command) => {
            if let Err(e) = std::fs::create_dir_all(&share) {
                return mcp::fail(&format!("Cannot create {}: {e}", share.display()));
            }
            init_logging(&share);
            mcp::run(command, &share)
        }
    }
}

#[derive(Clone, Copy)]
enum Account {
    Login,
    Logout,
}

/// Creates the share dir, logs to its log file, and runs the command on a small runtime.
fn account(share: &Path, json: bool, command: Account) -> ExitCode {
    let mut out = Reporter::new(json);
    if let Err(e) = std::fs::create_dir_all(share) {
        out.error(&format!("Cannot create {}: {e}", share.display()));
        return out.exit_code();
    }
    init_logging(share);
    match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime.block_on(async {
            match command {
                Account::Login => login::run(share, &mut out).await,
                Account::Logout => logout::run(share, &mut out),
            }
        }),
        Err(e) => out.error(&format!("Cannot start the async runtime: {e}")),
    }
    out.exit_code()
}

/// Logs go to `<share>/logs/kiwi.log` at INFO (or `$KIWI_LOG`).
fn init_logging(share: &Path) {
    crate::startup::init_logging(false, false, &crate::startup::log_file(share));
}

/// The top-level options are not acted on, but their paths must exist (Click's type checks).
fn check_top_level_paths(cli: &Cli) -> Result<(), String> {
    if let Some(dir) = &cli.work_dir
        && !dir.is_dir()
    {
        return Err(format!("Invalid value for '--work-dir' / '-w': Directory '{}' does not exist.", dir.display()));
    }
    let files = cli
        .config_file
        .iter()
        .map(|p| (p, "--config-file"))
        .chain(cli.agent_file.iter().map(|p| (p, "--agent-file")))
        .chain(cli.mcp_config_file.iter().map(|p| (p, "--mcp-config-file")));
    for (path, what) in files {
        if !path.is_file() {
            return Err(format!("Invalid value for {what}: File '{}' does not exist.", path.display()));
        }
    }
    if let Some(dir) = &cli.skills_dir
        && !dir.is_dir()
    {
        return Err(format!("Invalid value for --skills-dir: Directory '{}' does not exist.", dir.display()));
    }
    Ok(())
}

#[allow(clippy::print_stderr)]
/// A usage error in Click's shape (kimi's parser): usage, a hint, the message; exit 2.
pub fn usage_error(message: &str) -> ExitCode {
    eprintln!("Usage: kiwi [OPTIONS] COMMAND [ARGS]...\nTry 'kiwi --help' for help.\n\nError: {message}");
    ExitCode::from(2)
}

/// Writes one line to stdout. This is the only place the subcommands write stdout: it is theirs
/// (they are not the wire server, whose stdout carries only protocol frames). Each line is
/// flushed at once, since the npm SDK acts on the verification URL while `login` still waits;
/// a closed stdout is ignored (the command still finishes its work and its exit code tells).
#[allow(clippy::print_stdout)]
fn print_line(line: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

/// Writes a question to stdout without a line end (flushed: the answer is read next).
#[allow(clippy::print_stdout)]
fn print_prompt(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = write!(stdout, "{text}");
    let _ = stdout.flush();
}

/// The events of `login` / `logout` (§3.4): `{"type", "message"[, "data"]}` lines with Python's
/// JSON separators in `--json` mode, the bare message otherwise (`waiting` is not printed then).
pub(crate) struct Reporter {
    json: bool,
    failed: bool,
}

impl Reporter {
    pub(crate) fn new(json: bool) -> Self {
        Self { json, failed: false }
    }

    pub(crate) fn emit(&mut self, kind: &str, message: &str, data: Option<Value>) {
        if kind == "error" {
            self.failed = true;
            tracing::warn!("{message}");
        }
        if !self.json {
            if kind != "waiting" {
                print_line(message);
            }
            return;
        }
        let mut obj = Map::new();
        obj.insert("type".into(), Value::String(kind.into()));
        obj.insert("message".into(), Value::String(message.into()));
        if let Some(data) = data {
            obj.insert("data".into(), data);
        }
        let line = crate::session::pyjson::to_line(&Value::Object(obj)).unwrap_or_default();
        print_line(String::from_utf8_lossy(&line).trim_end_matches('\n'));
    }

    pub(crate) fn info(&mut self, message: &str) {
        self.emit("info", message, None);
    }

    pub(crate) fn error(&mut self, message: &str) {
        self.emit("error", message, None);
    }

    pub(crate) fn success(&mut self, message: &str) {
        self.emit("success", message, None);
    }

    fn exit_code(&self) -> ExitCode {
        if self.failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
    }
}
