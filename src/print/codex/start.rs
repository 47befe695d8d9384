//! Start-up and the one turn of a `codex exec --experimental-json` process (spec
//! codex-exec.md §1-§4, §6, §8, §10): flags and `--config` keys to an agent setup, the thread
//! (a kiwi session, resumed by id from any work dir), then one turn and its exit status.
//!
//! Invariants: every start-up failure is one stderr line and nothing on stdout (exit 2 for
//! usage, 1 otherwise); `thread.started` is the first line once the session exists; a signal
//! cancels the running turn, which is recorded in the session, and ends the process without
//! another line; approvals are never asked (`super::approvals` answers each at once; the
//! sandbox decides), questions and plan mode are not offered.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use super::approvals::Rule;
use super::args::{ArgError, CodexArgs, Resume};
use super::config_keys::CodexConfig;
use super::events::ThreadEvent;
use super::items::Lookup;
use super::projection::CodexProjection;
use super::{input, usage};
use crate::builder::{AgentSetup, BuildError, Invocation, PromptEdit, SessionRequest};
use crate::config::{Config, ProviderType};
use crate::live::{LiveSession, Runtime, shell};
use crate::print::common::{OwnTurns, stderr_line, trace_to_stderr};
use crate::protocol::UserInput;
use crate::sandbox::SandboxMode;
use crate::session::catalog;
use crate::session::store::{SessionChoice, normalize, share_dir, stored_session};
use crate::startup::{Choices, agent_setup, init_logging, load_config, log_file};

const HELP: &str = "kiwi (codex exec dialect, for @openai/codex-sdk programs)

Usage: kiwi exec --experimental-json [OPTIONS] [PROMPT] [resume ID|--last [PROMPT]]

  --experimental-json, --json      JSONL events on stdout (required)
  -c, --config key=value           codex config keys (docs/codex-exec.md); kiwi.config_file=\"PATH\" names kiwi's config
  -m, --model NAME                 a key of the config's models
  -s, --sandbox MODE               read-only (default), workspace-write, danger-full-access
  -C, --cd DIR, --add-dir DIR, --skip-git-repo-check
  --output-schema FILE, -i, --image FILE, -o, --output-last-message FILE
  --dangerously-bypass-approvals-and-sandbox, --full-auto

The prompt is the argument, else stdin. See docs/codex-exec.md.
";

/// Tools that ask a person something: codex exec has nobody to ask (§10).
const HIDDEN_TOOLS: &[&str] = &["AskUserQuestion", "EnterPlanMode", "ExitPlanMode"];

/// A start-up failure: the line and the exit status.
struct Fail(String, u8);

impl Fail {
    fn exit(self) -> ExitCode {
        stderr_line(&self.0);
        ExitCode::from(self.1)
    }
}

/// The codex dialect's `main` (`argv` with the program name first).
pub fn main(argv: &[OsString]) -> ExitCode {
    let args = match CodexArgs::parse(argv.get(1..).unwrap_or(&[])) {
        Ok(args) => args,
        Err(ArgError::Usage(m)) => return Fail(m, 2).exit(),
        Err(ArgError::Refused(m)) => return Fail(m, 1).exit(),
    };
    if let Some(code) = crate::print::common::version_or_help(args.version, args.help, HELP) {
        return code;
    }
    if !args.json {
        return Fail("kiwi: codex exec without --json is not supported".into(), 2).exit();
    }
    let share = share_dir();
    init_logging(false, false, &log_file(&share));
    match prepare(&args, &share) {
        Ok(run) => serve(run, &args),
        Err(fail) => fail.exit(),
    }
}

/// Everything the turn needs, checked before anything reaches stdout.
struct Run {
    setup: AgentSetup,
    work_dir: PathBuf,
    session: SessionChoice,
    input: UserInput,
    web_search_disabled: bool,
    /// Start-up warnings (sandbox, config, model): on stderr, and as `error` items after
    /// `thread.started` (spec §11), as codex reports its config warnings.
    warnings: Vec<String>,
}

fn prepare(args: &CodexArgs, share: &Path) -> Result<Run, Fail> {
    for note in &args.notes {
        stderr_line(&format!("kiwi: ignoring {note}"));
    }
    let keys = CodexConfig::parse(&args.configs).map_err(|e| Fail(e.message, e.exit))?;
    for note in &keys.notes {
        stderr_line(&format!("kiwi: ignoring {note}"));
    }
    let cwd = std::env::current_dir().map_err(|e| Fail(format!("kiwi: cannot read the current directory: {e}"), 1))?;
    let work_dir = normalize(args.cd.as_deref().unwrap_or(&cwd), &cwd);
    if !work_dir.is_dir() {
        return Err(Fail(format!("kiwi: --cd {}: No such file or directory", work_dir.display()), 1));
    }
    if !args.skip_git_repo_check && !inside_git_repo(&work_dir) {
        return Err(Fail("Not inside a trusted directory and --skip-git-repo-check was not specified.".into(), 1));
    }
    let schema = args.output_schema.as_deref().map(input::output_schema).transpose().map_err(|m| Fail(m, 1))?;
    let text = input::prompt_text(args.prompt.as_deref(), std::io::stdin().lock()).map_err(|m| Fail(m, 1))?;
    let input = input::user_input(text, &args.images, &cwd).map_err(|m| Fail(m, 1))?;
    let config_file = keys.config_file.as_ref().map(|p| normalize(p, &cwd));
    let (mut config, config_source, config_warnings) =
        load_config(None, config_file.as_deref(), share).map_err(|e| Fail(start_error_text(e), 1))?;
    let model = args.model.clone().or(keys.model.clone());
    let model_key = model.clone().unwrap_or_else(|| config.default_model.clone());
    if let Some(name) = &model
        && !config.models.contains_key(name)
    {
        return Err(Fail(format!("kiwi: unknown model '{name}'"), 1));
    }
    point_provider(&mut config, &model_key, keys.openai_base_url.as_deref())?;
    let session = session_choice(args.resume.as_ref(), share, &work_dir)?;
    let (session, work_dir) = session;
    let add_dirs: Vec<PathBuf> = args.add_dirs.iter().map(|d| normalize(d, &cwd)).collect();
    // codex's default in exec is read-only; the flag wins over the config key.
    let mode = args.sandbox.or(keys.sandbox).unwrap_or(SandboxMode::ReadOnly);
    let mut mcp_configs = default_mcp(share)?;
    mcp_configs.extend(keys.mcp_document());
    crate::mcp::server_table(&mcp_configs).map_err(|e| Fail(format!("kiwi: invalid MCP server config: {e}"), 1))?;
    let choices = Choices {
        model,
        thinking: keys.thinking,
        // codex exec never asks (§10): what the sandbox allows runs.
        yolo: true,
        system_prompt: PromptEdit { replace: None, append: schema.as_ref().map(input::schema_instruction) },
        mcp_configs,
        invocation: Invocation { afk: true, add_dirs: add_dirs.clone() },
        sandbox: (Some(mode), keys.network_access == Some(true)),
        added_dirs: add_dirs,
        ..Choices::new(work_dir.clone())
    };
    let (setup, warnings) = agent_setup(config, config_source, share, choices, config_warnings)
        .map_err(|e| Fail(start_error_text(e), 1))?;
    crate::startup::warn_at_start_up(&warnings);
    Ok(Run { setup, work_dir, session, input, web_search_disabled: keys.web_search_disabled, warnings })
}

fn start_error_text(e: crate::startup::StartError) -> String {
    match e {
        crate::startup::StartError::Usage(m) | crate::startup::StartError::Fatal(m) => m,
    }
}

/// Whether `dir` is inside a git work tree (a `.git` file or folder here or above).
fn inside_git_repo(dir: &Path) -> bool {
    dir.ancestors().any(|d| d.join(".git").exists())
}

/// `<share dir>/mcp.json`, when it exists (as every other front end reads it).
fn default_mcp(share: &Path) -> Result<Vec<serde_json::Value>, Fail> {
    let path = share.join("mcp.json");
    if !path.is_file() {
        return Ok(Vec::new());
    }
    let text = std::fs::read_to_string(&path).map_err(|e| Fail(format!("Cannot read {}: {e}", path.display()), 1))?;
    let doc = serde_json::from_str(&text)
        .map_err(|e| Fail(format!("Invalid JSON in MCP config file '{}': {e}", path.display()), 1))?;
    Ok(vec![doc])
}

/// `openai_base_url` re-points the model's provider (only an OpenAI-compatible one), and the
/// SDK's `apiKey` (`CODEX_API_KEY`) is the provider's key when it has none.
fn point_provider(config: &mut Config, model_key: &str, base_url: Option<&str>) -> Result<(), Fail> {
    let provider_name = config.models.get(model_key).map(|m| m.provider.clone());
    let provider = provider_name.and_then(|name| config.providers.get_mut(&name));
    if let Some(url) = base_url {
        match provider {
            Some(p) if matches!(p.kind, ProviderType::OpenAiLegacy | ProviderType::OpenAiResponses) => {
                p.base_url = url.to_string();
            }
            _ => return Err(Fail("kiwi: openai_base_url needs an OpenAI-compatible provider".into(), 1)),
        }
        return point_provider(config, model_key, None);
    }
    if let Some(p) = provider
        && p.api_key.is_empty()
        && p.oauth.is_none()
        && !p.kind.is_echo()
        && let Ok(key) = std::env::var("CODEX_API_KEY")
        && !key.is_empty()
    {
        p.api_key = key;
    }
    Ok(())
}

/// The session to run (§8): a new one; `resume ID` found in this work dir, else in whichever
/// work dir holds it (the session then runs in its own work dir: kiwi keeps a session's files
/// with the work dir it was made for); `resume --last`: the work dir's last session.
fn session_choice(resume: Option<&Resume>, share: &Path, work_dir: &Path) -> Result<(SessionChoice, PathBuf), Fail> {
    let unknown = |id: &str| Fail(format!("kiwi: no thread found with id {id}"), 1);
    match resume {
        None => Ok((SessionChoice::New, work_dir.to_path_buf())),
        Some(Resume::Last) => Ok((SessionChoice::Continue, work_dir.to_path_buf())),
        Some(Resume::Id(id)) => {
            let id = id.trim();
            if crate::session::id::check_session_id(id).is_err() {
                return Err(unknown(id));
            }
            if stored_session(share, work_dir, id).is_some() {
                return Ok((SessionChoice::Id(id.to_string()), work_dir.to_path_buf()));
            }
            let found = catalog::find(share, id).ok_or_else(|| unknown(id))?;
            let home = PathBuf::from(&found.work_dir);
            if !home.is_dir() {
                return Err(Fail(format!("kiwi: thread {id} belongs to {}, which is gone", found.work_dir), 1));
            }
            tracing::info!("thread {id} resumes in its own work dir {}", found.work_dir);
            Ok((SessionChoice::Id(id.to_string()), home))
        }
    }
}

fn serve(run: Run, args: &CodexArgs) -> ExitCode {
    let Run { setup, work_dir, session, input, web_search_disabled, warnings } = run;
    let resuming = !matches!(session, SessionChoice::New);
    let request = SessionRequest { work_dir: work_dir.clone(), session, trace: Some(trace_to_stderr()) };
    let last_message_file = args.last_message_file.clone();
    let served = shell::run(Runtime::CurrentThread, std::io::stdout(), |process| async move {
        let built = match setup.build(request) {
            Ok(built) => built,
            Err(BuildError::Usage(m) | BuildError::Fatal(m)) => {
                stderr_line(&m);
                return 1;
            }
        };
        if resuming && !built.session.resumed {
            let id = built.session.id.clone();
            built.session.finish();
            stderr_line(&format!("kiwi: no thread found with id {id}"));
            return 1;
        }
        let agent = built.soul.agent.clone();
        let hidden = |name: &str| HIDDEN_TOOLS.contains(&name) || (web_search_disabled && name == "SearchWeb");
        agent.update_toolset(|set| {
            let kept = set.names().filter(|n| !hidden(n)).filter_map(|n| set.get(n).cloned()).collect();
            *set = crate::tools::Toolset::new(kept);
        });
        agent.env.sandbox.set_nobody_to_ask(true);
        // Every approval reaches the projection's rule (the run's yolo would approve MCP calls
        // a read-only run must refuse).
        agent.approvals.let_front_end_decide();
        let tools = agent.clone();
        let rule = Rule {
            read_only: agent.env.sandbox.current().mode() == SandboxMode::ReadOnly,
            read_only_hint: Box::new(move |name| tools.toolset().get(name).is_some_and(|t| t.read_only_hint())),
        };
        crate::print::common::mark_created_session(&built.session, "codex");
        let prior = usage::recorded(&built.session.wire_path());
        let thread_id = built.session.id.clone();
        let mcp = agent.mcp.clone();
        let lookup = Lookup {
            work_dir,
            mcp_server: Box::new(move |tool| {
                let status = mcp.as_ref()?.snapshot();
                status.servers.into_iter().find(|s| s.tools.iter().any(|t| t == tool)).map(|s| s.name)
            }),
        };
        let projection = Arc::new(CodexProjection::new(process.outbound, lookup, rule, prior));
        // Other clients' turns (processes attached through the socket) stay out of the output.
        let turns = OwnTurns::new(projection.clone(), false);
        let live = LiveSession::open(built, turns.clone(), &process.sessions);
        let mut opening = vec![ThreadEvent::ThreadStarted { thread_id }];
        opening.extend(projection.notices(warnings));
        opening.push(ThreadEvent::TurnStarted {});
        projection.write(opening).await;
        live.start().await;
        // Served while the run has the session open; the file goes when this is dropped.
        let _hosting = crate::print::common::host(&live);
        let driver = live.driver().clone();
        // Another client's turn runs to its end first.
        let Some(waiter) = turns.start_when_idle(&driver, input, &process.stop).await else {
            stderr_line("kiwi: stopped before the turn could start");
            return 1;
        };
        tokio::pin!(waiter);
        let report = tokio::select! {
            r = &mut waiter => r.ok(),
            () = process.stop.cancelled() => {
                // The SDK's abort is SIGTERM: the turn is cancelled (and recorded so), no more lines.
                driver.cancel();
                waiter.await.ok()
            }
        };
        if let Some(path) = &last_message_file
            && let Some(text) = projection.last_message()
            && let Err(e) = std::fs::write(path, text)
        {
            stderr_line(&format!("kiwi: cannot write {}: {e}", path.display()));
        }
        report.map_or(1, |r| r.exit_code)
    });
    match served {
        Ok(code) => ExitCode::from(code),
        Err(e) => Fail(e.0, 1).exit(),
    }
}
