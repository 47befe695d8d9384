//! `kiwi sandbox [--sandbox MODE] [--sandbox-network] [--add-dir DIR]... [-w DIR] -- CMD [ARG]...`
//! (spec sandbox.md §2.1): one command under exactly the policy a Shell call in the work dir
//! would get, with the config's `[sandbox]` keys; the mode defaults to `workspace-write` (the
//! config's `mode` is not used: this command exists to run sandboxed).
//!
//! Exit status: the command's (128 + the signal that killed it); 125 when kiwi itself fails —
//! the config is invalid, the sandbox cannot be set up (one stderr line, §5.3) — 126 when the
//! command cannot be started, 127 when it does not exist (the shells' convention).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::cli::{Cli, SandboxArgs};
use crate::sandbox::{Sandbox, SandboxMode};

/// kiwi's own failure (the command did not run).
const SETUP_FAILED: u8 = 125;

#[allow(clippy::print_stderr)]
fn fail(code: u8, line: &str) -> ExitCode {
    eprintln!("{line}");
    ExitCode::from(code)
}

pub(super) fn run(args: &SandboxArgs, cli: &Cli, share: &Path) -> ExitCode {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let work_dir = match &args.work_dir {
        Some(dir) => crate::session::store::normalize(dir, &cwd),
        None => cwd.clone(),
    };
    if !work_dir.is_dir() {
        return super::usage_error(&format!(
            "Invalid value for '-w': Directory '{}' does not exist.",
            work_dir.display()
        ));
    }
    let mut added = Vec::new();
    for dir in &args.add_dir {
        if !dir.is_dir() {
            return super::usage_error(&format!(
                "Invalid value for --add-dir: Directory '{}' does not exist.",
                dir.display()
            ));
        }
        added.push(crate::session::store::normalize(dir, &cwd));
    }
    // The config: this command's `--config-file`, else the top-level one or `--config` text,
    // else the default file when it exists (never written here).
    let config_file = args.config_file.clone().or_else(|| cli.config_file.clone());
    let default_file = share.join("config.toml");
    let loaded = match (&config_file, &cli.config) {
        (Some(path), _) => crate::config::load_file_reporting(path).map(|(c, w)| (c, w, Some(path.clone()))),
        (None, Some(text)) => crate::config::load_text_reporting(text).map(|(c, w)| (c, w, None)),
        (None, None) if default_file.is_file() => {
            crate::config::load_file_reporting(&default_file).map(|(c, w)| (c, w, Some(default_file.clone())))
        }
        (None, None) => Ok((crate::config::Config::default(), Vec::new(), None)),
    };
    let (config, warnings, config_path) = match loaded {
        Ok(loaded) => loaded,
        Err(e) => return fail(SETUP_FAILED, &e.to_string()),
    };
    // Unknown keys elsewhere in the file are not this command's business; `[sandbox]` ones are.
    for w in warnings.iter().filter(|w| w.contains("sandbox")) {
        warn(w);
    }
    let mode = args.flags.sandbox.unwrap_or(SandboxMode::WorkspaceWrite);
    let protected: Vec<PathBuf> = config_path.into_iter().collect();
    let mut sandbox =
        Sandbox::new(config.sandbox.clone(), Some(mode), args.flags.sandbox_network, share.to_path_buf(), protected);
    match sandbox.probe(&work_dir, &added) {
        Ok(warnings) => warnings.iter().for_each(|w| warn(w)),
        Err(line) => return fail(SETUP_FAILED, &line),
    }
    let policy = match sandbox.policy_for(&work_dir, &added) {
        Ok(policy) => policy,
        Err(reason) => return fail(SETUP_FAILED, &crate::sandbox::command_not_run_message(&reason)),
    };
    let Some((program, rest)) = args.command.split_first() else {
        return super::usage_error("Missing argument 'CMD'.");
    };
    let mut cmd = std::process::Command::new(program);
    cmd.args(rest).current_dir(&work_dir);
    policy.apply_std(&mut cmd);
    let status = match cmd.status() {
        Ok(status) => status,
        Err(e) => {
            if let Some(reason) = crate::sandbox::setup_failure(&e) {
                return fail(SETUP_FAILED, &crate::sandbox::command_not_run_message(&reason));
            }
            let code = if e.kind() == std::io::ErrorKind::NotFound { 127 } else { 126 };
            return fail(
                code,
                &format!("kiwi sandbox: {}: {}", program.to_string_lossy(), crate::sandbox::strerror_of(&e)),
            );
        }
    };
    use std::os::unix::process::ExitStatusExt;
    let code = status.code().or_else(|| status.signal().map(|s| 128 + s)).unwrap_or(1);
    ExitCode::from(code.clamp(0, 255) as u8)
}

#[allow(clippy::print_stderr)]
fn warn(line: &str) {
    eprintln!("kiwi: warning: {line}");
}
