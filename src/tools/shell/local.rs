//! The local runner of Shell commands: `<shell> -c <command>` as kiwi's own child process.
//!
//! Invariants:
//! * the command runs as `<shell> -c <command>` in the work dir, as the leader of its own session
//!   (and process group), with stdin on `/dev/null` (the reference leaves an unwritten pipe, which
//!   makes commands that read stdin hang until the timeout);
//! * stdout and stderr are merged line by line in arrival order through the output builder;
//! * when the call times out or its future is dropped (turn cancelled), every process of the call
//!   is killed through [`CallGuard`], including children that called `setsid` and orphans (the
//!   reference only kills the shell on timeout and nothing on cancel); daemons of a command that
//!   finished normally keep running until the server exits (`docs/tools.md` §19.1);
//! * at most [`MAX_PENDING_LINE`] bytes of one line are buffered, so a command printing an
//!   endless line cannot exhaust memory;
//! * the command's environment is kiwi's minus the secrets kiwi consumed ([`secret_env_names`]):
//!   the provider API key variables, every name in a provider's `env` table, and any variable
//!   whose value is a key kiwi holds (`docs/tools.md` §19.2; the reference passes everything on);
//! * a background command is a `bash` task of `background::shell_task` (its output goes straight
//!   to the task's `output.log`);
//! * when the host shows output as it comes ([`crate::tools::ToolHost::streams_output`]), the lines also go to
//!   a [`Feed`] that hands them on at most every [`FEED_EVERY`] and once more when the streams
//!   end, before the call returns (so they never follow its result); the result is unchanged.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

use super::{CommandRunner, Exit, Ran};
use crate::config::Config;
use crate::tools::ToolCallContext;
use crate::tools::background::Work;
use crate::tools::output::OutputBuilder;
use crate::tools::process::CallGuard;

/// Variables holding provider API keys that kiwi itself reads (`config::select` for the Kimi
/// and OpenAI providers, the Gemini provider's fallbacks).
pub const SECRET_ENV_VARS: &[&str] = &["KIMI_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"];

/// Variables a command cannot work without; a provider `env` table naming one of them does not
/// take it away from commands.
const ESSENTIAL_ENV_VARS: &[&str] = &["PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "TERM", "TMPDIR", "PWD"];

/// Secrets shorter than this are not matched by value (a test key like "x" would otherwise
/// remove unrelated variables).
const MIN_SECRET_LEN: usize = 8;

/// Names of the variables of kiwi's environment that are not passed to Shell commands (see the
/// module doc). A variable whose value contains an API key or credential header kiwi holds is
/// removed; one whose value equals a provider `env` table value too (equality only: such values
/// are often plain paths or regions that other variables contain).
pub fn secret_env_names(config: &Config) -> Vec<OsString> {
    let mut names: Vec<OsString> = SECRET_ENV_VARS.iter().map(OsString::from).collect();
    let mut keys: Vec<&str> = Vec::new();
    let mut table_values: Vec<&str> = Vec::new();
    for provider in config.providers.values() {
        keys.push(&provider.api_key);
        keys.extend(credential_headers(&provider.custom_headers));
        for (name, value) in &provider.env {
            if !ESSENTIAL_ENV_VARS.contains(&name.as_str()) {
                names.push(name.into());
            }
            table_values.push(value);
        }
    }
    for service in [&config.services.moonshot_search, &config.services.moonshot_fetch].into_iter().flatten() {
        keys.push(&service.api_key);
        keys.extend(credential_headers(&service.custom_headers));
    }
    let env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    keys.extend(SECRET_ENV_VARS.iter().filter_map(|n| env.iter().find(|(k, _)| k == n)?.1.to_str()));
    keys.retain(|k| k.len() >= MIN_SECRET_LEN);
    table_values.retain(|v| v.len() >= MIN_SECRET_LEN);
    for (name, value) in &env {
        if name.to_str().is_some_and(|n| ESSENTIAL_ENV_VARS.contains(&n)) {
            continue;
        }
        let Some(value) = value.to_str() else { continue };
        if keys.iter().any(|k| value.contains(k)) || table_values.contains(&value) {
            names.push(name.clone());
        }
    }
    names.sort();
    names.dedup();
    names
}

/// Values of the headers that carry credentials.
fn credential_headers(headers: &std::collections::BTreeMap<String, String>) -> impl Iterator<Item = &str> {
    headers.iter().filter(|(n, _)| is_credential_header(n)).map(|(_, v)| v.as_str())
}

fn is_credential_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["authorization", "key", "token", "secret", "cookie"].iter().any(|w| name.contains(w))
}

/// Longest part of a single output line kept in memory; the rest of such a line is dropped (it
/// would be cut to 2,000 characters by the output builder anyway).
const MAX_PENDING_LINE: usize = 64 * 1024;

const SHELL_CANDIDATES: &[&str] = &["/bin/bash", "/usr/bin/bash", "/usr/local/bin/bash"];

/// The interpreter of Shell commands: the first bash found (`docs/tools.md` §3), else `/bin/sh`.
pub fn default_shell() -> PathBuf {
    SHELL_CANDIDATES.iter().map(Path::new).find(|p| p.exists()).unwrap_or(Path::new("/bin/sh")).to_path_buf()
}

/// Runs commands as kiwi's own processes, with the interpreter chosen once at start-up.
pub struct LocalRunner {
    shell_path: PathBuf,
}

impl LocalRunner {
    pub fn new() -> Self {
        Self { shell_path: default_shell() }
    }

    pub fn shell_path(&self) -> &Path {
        &self.shell_path
    }
}

impl Default for LocalRunner {
    fn default() -> Self {
        Self::new()
    }
}

impl CommandRunner for LocalRunner {
    fn run<'a>(
        &'a self,
        command: &'a str,
        timeout: Duration,
        ctx: &'a ToolCallContext,
    ) -> BoxFuture<'a, Result<Ran, String>> {
        Box::pin(async move {
            let scrub = secret_env_names(&ctx.env.config);
            let (output, code) =
                self.run_command(command, ctx, &scrub, timeout, None).await.map_err(|e| e.to_string())?;
            // A signal `n` arrives as the code `-n` (see `run_command`), as the built-in always reported it.
            Ok(Ran { output, exit: code.map_or(Exit::TimedOut, Exit::Code), note: None })
        })
    }

    fn background<'a>(
        &'a self,
        command: &'a str,
        timeout_s: u64,
        ctx: &'a ToolCallContext,
    ) -> BoxFuture<'a, Result<Work, String>> {
        Box::pin(async move {
            Ok(Work::Shell {
                command: command.to_string(),
                shell: self.shell_path.clone(),
                work_dir: ctx.env.work_dir.clone(),
                scrub: secret_env_names(&ctx.env.config),
                timeout_s,
                policy: None,
                denial_note: None,
            })
        })
    }
}

impl LocalRunner {
    /// Runs `command` confined by `policy`; `Err` is the reason the sandbox could not be set up
    /// (`Ok(Err(..))`), or another failure to run it.
    pub async fn run_confined(
        &self,
        command: &str,
        timeout: Duration,
        ctx: &ToolCallContext,
        policy: &crate::sandbox::CommandPolicy,
    ) -> Result<Ran, ConfinedError> {
        let scrub = secret_env_names(&ctx.env.config);
        match self.run_command(command, ctx, &scrub, timeout, Some(policy)).await {
            Ok((output, code)) => Ok(Ran { output, exit: code.map_or(Exit::TimedOut, Exit::Code), note: None }),
            Err(e) => Err(match crate::sandbox::setup_failure(&e) {
                Some(reason) => ConfinedError::Setup(reason),
                None => ConfinedError::Other(e.to_string()),
            }),
        }
    }

    /// The background work of `command` confined by `policy`; `denial_note` is added to its end
    /// notification when it looks denied.
    pub fn background_confined(
        &self,
        command: &str,
        timeout_s: u64,
        ctx: &ToolCallContext,
        policy: &crate::sandbox::CommandPolicy,
        denial_note: Option<String>,
    ) -> Work {
        Work::Shell {
            command: command.to_string(),
            shell: self.shell_path.clone(),
            work_dir: ctx.env.work_dir.clone(),
            scrub: secret_env_names(&ctx.env.config),
            timeout_s,
            policy: Some(policy.clone()),
            denial_note,
        }
    }
}

/// Why a confined command did not run.
#[derive(Debug)]
pub enum ConfinedError {
    /// The sandbox could not be set up (the reason).
    Setup(String),
    Other(String),
}

impl LocalRunner {
    /// Runs the command; `Ok((output, None))` means it timed out and its group was killed.
    async fn run_command(
        &self,
        command: &str,
        ctx: &ToolCallContext,
        scrub: &[OsString],
        timeout: Duration,
        policy: Option<&crate::sandbox::CommandPolicy>,
    ) -> std::io::Result<(OutputBuilder, Option<i32>)> {
        let work_dir = &ctx.env.work_dir;
        let feed = ctx.host.streams_output().then(|| Feed::new(ctx));
        let mut cmd = tokio::process::Command::new(&self.shell_path);
        cmd.arg("-c")
            .arg(command)
            .current_dir(work_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for name in scrub {
            cmd.env_remove(name);
        }
        // Owns the call from the spawn on, so a dropped future always kills its whole tree.
        let mut guard = CallGuard::spawn_confined(&mut cmd, policy)?;
        let builder = Mutex::new(OutputBuilder::new());
        let Some(child) = guard.child() else {
            return Err(std::io::Error::other("the command's process is gone"));
        };
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        let finished = tokio::time::timeout(timeout, async {
            let pumps = async {
                futures::join!(pump(stdout, &builder, feed.as_ref()), pump(stderr, &builder, feed.as_ref()));
            };
            match &feed {
                Some(feed) => feed.alongside(pumps).await,
                None => pumps.await,
            }
            child.wait().await
        })
        .await;
        let code = match finished {
            Ok(status) => {
                guard.finished();
                let status = status?;
                use std::os::unix::process::ExitStatusExt;
                Some(status.code().unwrap_or_else(|| -status.signal().unwrap_or(0)))
            }
            Err(_) => {
                guard.kill();
                // Reap the shell; it has just been SIGKILLed so this returns promptly.
                if let Some(child) = guard.child()
                    && tokio::time::timeout(Duration::from_secs(5), child.wait()).await.is_ok()
                {
                    guard.finished();
                }
                None
            }
        };
        let builder = builder.into_inner().unwrap_or_else(|p| p.into_inner());
        Ok((builder, code))
    }
}

/// How often gathered output is handed on while a command runs.
const FEED_EVERY: Duration = Duration::from_millis(100);
/// The most output handed on at once; lines beyond it within one interval are skipped (and
/// marked with a line `…`): a live view needs the flow, the result keeps everything.
const FEED_MAX: usize = 64 * 1024;

/// A running command's lines on their way to the user (see the module doc).
struct Feed<'a> {
    ctx: &'a ToolCallContext,
    pending: Mutex<String>,
    skipped: std::sync::atomic::AtomicBool,
}

impl<'a> Feed<'a> {
    fn new(ctx: &'a ToolCallContext) -> Self {
        Self { ctx, pending: Mutex::new(String::new()), skipped: Default::default() }
    }

    fn push(&self, text: &str) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        if pending.len() + text.len() > FEED_MAX {
            self.skipped.store(true, std::sync::atomic::Ordering::Relaxed);
        } else {
            pending.push_str(text);
        }
    }

    async fn flush(&self) {
        let mut text = std::mem::take(&mut *self.pending.lock().unwrap_or_else(|p| p.into_inner()));
        if self.skipped.swap(false, std::sync::atomic::Ordering::Relaxed) {
            text.push_str("…\n");
        }
        if !text.is_empty() {
            self.ctx.host.show_output(&self.ctx.tool_call_id, &text).await;
        }
    }

    /// Runs `work` (the pumps), handing on what they gathered every [`FEED_EVERY`], and the
    /// rest when they end.
    async fn alongside(&self, work: impl std::future::Future<Output = ()>) {
        let mut work = std::pin::pin!(work);
        let mut tick = tokio::time::interval(FEED_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = &mut work => break,
                _ = tick.tick() => self.flush().await,
            }
        }
        self.flush().await;
    }
}

/// Copies one stream into the shared builder line by line (and to the feed, if any).
async fn pump<R: AsyncRead + Unpin>(stream: Option<R>, out: &Mutex<OutputBuilder>, feed: Option<&Feed<'_>>) {
    let Some(stream) = stream else { return };
    let mut reader = BufReader::new(stream);
    let mut line: Vec<u8> = Vec::new();
    // Set while the current line has outgrown MAX_PENDING_LINE: its remainder is discarded.
    let mut overlong = false;
    loop {
        let chunk = match reader.fill_buf().await {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!("shell output read failed: {e}");
                break;
            }
        };
        if chunk.is_empty() {
            break;
        }
        let (take, complete) = match memchr_newline(chunk) {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        if !overlong {
            let room = MAX_PENDING_LINE.saturating_sub(line.len());
            if complete || take <= room {
                line.extend_from_slice(&chunk[..take]);
            } else {
                line.extend_from_slice(&chunk[..room]);
                overlong = true;
            }
        } else if complete {
            line.push(b'\n');
        }
        reader.consume(take);
        if complete {
            emit(&mut line, out, overlong, feed);
            overlong = false;
        }
    }
    if !line.is_empty() {
        emit(&mut line, out, overlong, feed);
    }
}

fn memchr_newline(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b == b'\n')
}

fn emit(line: &mut Vec<u8>, out: &Mutex<OutputBuilder>, overlong: bool, feed: Option<&Feed<'_>>) {
    let text = String::from_utf8_lossy(line);
    // An overlong line may end in a cut multi-byte character; that is within the dropped part.
    let text = if overlong { text.trim_end_matches('\u{FFFD}').to_string() } else { text.into_owned() };
    if let Some(feed) = feed {
        feed.push(&text);
    }
    if let Ok(mut b) = out.lock() {
        b.write(&text);
    }
    line.clear();
}
