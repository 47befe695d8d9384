//! Start-up of the Claude dialect: flags to an agent setup, the session (`--resume` must exist,
//! `--session-id` must be new), tool filters, MCP warnings, then the run loop.
//!
//! Invariants: usage errors exit 2 with one stderr line and nothing on stdout; once output has
//! begun, a failure is reported as an error `result` (stream-json and json output) as well as on
//! stderr, and exits 1; nothing on stdout but the dialect's lines.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use super::args::{ClaudeArgs, InputFormat, OutputFormat, PermissionMode, UsageError};
use super::control::HostAsk;
use super::input::spawn_reader;
use super::lines::AgentDefinitionIn;
use super::lines::{OutLine, ResultLine, ResultSubtype, SystemLine, WarningLine};
use super::permission::Policy;
use super::projection::{ClaudeProjection, Settings};
use super::run::RunLoop;
use super::sdk::Extras;
use super::sdk_mcp::SdkServer;
use super::structured::{StructuredOutput, StructuredSlot};
use super::tool_names::{Rule, kiwi_name};
use super::turn::{Identity, fresh_uuid};
use crate::builder::{AgentSetup, BuildError, BuiltSession, PromptEdit, SessionRequest};
use crate::live::{LiveSession, Runtime, Sessions, shell};
use crate::print::common::{OwnTurns, stderr_line, trace_to_stderr};
use crate::protocol::UserInput;
use crate::rpc::Peer;
use crate::rpc::reader::DEFAULT_MAX_LINE_BYTES;
use crate::rpc::writer::encode;
use crate::session::store::{SessionChoice, share_dir};
use crate::startup::{Choices, StartError, init_logging, load_config, log_file, report, resolve_work_dir};
use crate::tools::Toolset;

/// Set by the SDKs: the host reads `system/session_state_changed` frames.
const SESSION_STATE_ENV: &str = "CLAUDE_CODE_SDK_READS_SESSION_STATE";

const HELP: &str = "kiwi (Claude Code headless dialect)

Usage: kiwi -p [OPTIONS] [PROMPT]
       kiwi --output-format stream-json --input-format stream-json [OPTIONS]

  -p, --print                     headless run (the prompt is the argument, or stdin)
  --output-format FORMAT          text (default), json, stream-json
  --input-format FORMAT           text (default), stream-json
  --include-partial-messages      stream_event lines (stream-json output)
  --replay-user-messages          echo user messages read from stdin
  --permission-mode MODE          default, acceptEdits, bypassPermissions, plan, dontAsk, auto
  --dangerously-skip-permissions  approve every action
  --permission-prompt-tool stdio  ask the host with can_use_tool control requests
  --allowedTools / --disallowedTools / --tools NAMES   Claude's or kiwi's tool names, Tool(pattern) rules
  --json-schema SCHEMA            answer through the StructuredOutput tool (result.structured_output)
  --agents JSON                   subagent types {name: {description, prompt, tools?}}
  --mcp-config JSON|FILE, --strict-mcp-config, --add-dir DIR, --max-thinking-tokens N
  --system-prompt TEXT, --system-prompt-file PATH, --append-system-prompt TEXT
  -c, --continue | -r, --resume ID | --session-id ID
  --fork-session                  continue a copy of the resumed session (under --session-id if given)
  --resume-session-at UUID        resume with the history up to the turn that message ends
  --resume-drops-turn UUID        ... discarding only the turn of that prompt
  --model NAME, --max-turns N, --max-budget-usd USD (needs prices: usd_per_mtok in the config)
  --config TEXT, --config-file PATH, --work-dir PATH, --debug, --log-stderr (kiwi's own)

Other Claude Code options are accepted and ignored, each named on stderr. See docs/print-mode.md.
";

/// The Claude dialect's `main` (`argv` with the program name first).
pub fn main(argv: &[OsString]) -> ExitCode {
    let args = match ClaudeArgs::parse(argv.get(1..).unwrap_or(&[])) {
        Ok(args) => args,
        Err(UsageError(message)) => return usage(&message),
    };
    if let Some(code) = crate::print::common::version_or_help(args.version, args.help, HELP) {
        return code;
    }
    let share = share_dir();
    init_logging(args.debug, args.log_stderr, &log_file(&share));
    for ignored in &args.ignored {
        stderr_line(&format!("kiwi: ignoring {ignored}: {}", why_ignored(ignored)));
    }
    let mut additions = match Additions::of(&args) {
        Ok(additions) => additions,
        Err(message) => return usage(&message),
    };
    let first = match first_prompt(&args) {
        Ok(first) => first,
        Err(message) => return usage(&message),
    };
    match prepare(&args, &share) {
        Ok((setup, request, sdk_servers, refused)) => {
            additions.sdk_servers = sdk_servers;
            additions.refused = refused;
            serve(&setup, request, &args, first, additions)
        }
        Err(e) => report(e, &share),
    }
}

/// Why an accepted option does nothing in kiwi (the stderr line that names it).
fn why_ignored(option: &str) -> &'static str {
    let name = option.split(['=', ' ']).next().unwrap_or(option);
    match name {
        "--task-budget" => "kiwi keeps one dollar budget per session (--max-budget-usd), none per task",
        "--fallback-model" => "kiwi retries the same model; choose another one with --model or set_model",
        "--setting-sources" => "kiwi reads no Claude Code settings files (its config is --config-file)",
        "--include-hook-events" => "hook runs are not reported as lines in this dialect",
        "--no-session-persistence" => "kiwi always saves the session",
        _ => "kiwi has no equivalent",
    }
}

/// What the SDK adds to a run from the command line: its in-process MCP servers, the
/// `--json-schema` tool, the `--agents` types.
#[derive(Default)]
struct Additions {
    sdk_servers: Vec<String>,
    structured: Option<(Arc<StructuredOutput>, StructuredSlot)>,
    agents: Option<BTreeMap<String, AgentDefinitionIn>>,
    /// Why the session asked for cannot be resumed (`super::resume`): the run's error result.
    refused: Option<String>,
}

impl Additions {
    fn of(args: &ClaudeArgs) -> Result<Self, String> {
        let structured = match &args.json_schema {
            Some(schema) => {
                let slot = StructuredSlot::default();
                Some((Arc::new(StructuredOutput::new(schema, slot.clone())?), slot))
            }
            None => None,
        };
        let agents = match &args.agents {
            Some(text) => Some(
                serde_json::from_str::<BTreeMap<String, AgentDefinitionIn>>(text)
                    .map_err(|e| format!("--agents is not a JSON object of agent definitions: {e}"))?,
            ),
            None => None,
        };
        Ok(Self { sdk_servers: Vec::new(), structured, agents, refused: None })
    }
}

fn usage(message: &str) -> ExitCode {
    stderr_line(&format!("Error: {message}\nTry 'kiwi -p --help' for help."));
    ExitCode::from(2)
}

/// The positional prompt, or all of stdin for text input (read before serving starts).
fn first_prompt(args: &ClaudeArgs) -> Result<Option<UserInput>, String> {
    if let Some(prompt) = &args.prompt {
        if prompt.trim().is_empty() {
            return Err("The prompt is empty".into());
        }
        return Ok(Some(UserInput::Text(prompt.clone())));
    }
    if args.input_format == InputFormat::StreamJson {
        return Ok(None);
    }
    let stdin = std::io::stdin();
    if stdin.is_terminal() {
        return Err("Input must be provided either through stdin or as a prompt argument in print mode".into());
    }
    let mut bytes = Vec::new();
    stdin.lock().read_to_end(&mut bytes).map_err(|e| format!("Cannot read stdin: {e}"))?;
    let text = String::from_utf8_lossy(&bytes).trim().to_string();
    if text.is_empty() {
        return Err("Input must be provided either through stdin or as a prompt argument in print mode".into());
    }
    Ok(Some(UserInput::Text(text)))
}

type Prepared = (AgentSetup, SessionRequest, Vec<String>, Option<String>);

fn prepare(args: &ClaudeArgs, share: &Path) -> Result<Prepared, StartError> {
    let work_dir = resolve_work_dir(args.work_dir.as_deref())?;
    let (mut config, config_source, warnings) =
        load_config(args.config.as_deref(), args.config_file.as_deref(), share)?;
    crate::startup::warn_at_start_up(&warnings);
    if let Some(n) = args.max_turns {
        config.loop_control.max_steps_per_turn = n;
    }
    if let Some(usd) = args.max_budget_usd {
        config.loop_control.max_budget_usd = Some(usd);
    }
    let replace = match &args.system_prompt_file {
        Some(path) => Some(
            std::fs::read_to_string(path)
                .map_err(|e| StartError::Usage(format!("Cannot read --system-prompt-file {}: {e}", path.display())))?,
        ),
        // An empty --system-prompt (every SDK run without one of its own) keeps kiwi's prompt.
        None => args.system_prompt.clone().filter(|p| !p.trim().is_empty()),
    };
    let (session, refused) = match super::resume::choose(args, share, &work_dir) {
        Ok(choice) => (choice, None),
        Err(refused) => (SessionChoice::New, Some(refused)),
    };
    let mcp = super::mcp::documents(&args.mcp_config, args.strict_mcp_config, share).map_err(StartError::Fatal)?;
    let mode = claude_sandbox_mode(args, &mut config, &work_dir)?;
    let choices = Choices {
        model: args.model.clone().filter(|m| m != "default"),
        thinking: args.thinking,
        system_prompt: PromptEdit { replace, append: args.append_system_prompt.clone() },
        mcp_configs: mcp.documents,
        sandbox: (mode, args.sandbox_network),
        mcp_files: args.mcp_config.iter().map(PathBuf::from).filter(|p| p.is_file()).collect(),
        added_dirs: args.add_dirs.clone(),
        ..Choices::new(work_dir.clone())
    };
    // The config's warnings went out above; these are the sandbox's.
    let (setup, warnings) = crate::startup::agent_setup(config, config_source, share, choices, Vec::new())?;
    crate::startup::warn_at_start_up(&warnings);
    Ok((setup, SessionRequest { work_dir, session, trace: Some(trace_to_stderr()) }, mcp.sdk, refused))
}

/// The run's sandbox mode (spec sandbox.md §2.3, §2.6): kiwi's `--sandbox` wins; else the
/// stricter of the host's `--settings` `sandbox` and `[sandbox] mode`. The `sandbox` settings'
/// other keys are mapped onto the config's `[sandbox]`. Probed with the setup, before any output.
fn claude_sandbox_mode(
    args: &ClaudeArgs,
    config: &mut crate::config::Config,
    work_dir: &Path,
) -> Result<Option<crate::sandbox::SandboxMode>, StartError> {
    let mut mode = args.sandbox;
    if let Some(value) = &args.settings {
        let cwd = std::env::current_dir().unwrap_or_else(|_| work_dir.to_path_buf());
        let settings = super::sandbox_settings::read(value, &cwd)
            .map_err(|detail| StartError::Fatal(format!("Cannot read --settings: {detail}")))?;
        let host = super::sandbox_settings::apply(&settings, &mut config.sandbox, work_dir);
        crate::startup::warn_at_start_up(&host.warnings);
        if mode.is_none()
            && let Some(asked) = host.mode
        {
            mode = Some(asked.stricter(config.sandbox.mode));
        }
    }
    Ok(mode)
}

/// A failure once output may have begun: an error `result` for JSON output, a stderr line always.
pub(super) async fn fail_early(out: &crate::rpc::Outbound, args: &ClaudeArgs, session_id: &str, message: &str) {
    stderr_line(message);
    if args.output_format == OutputFormat::Text {
        return;
    }
    let line = OutLine::Result(ResultLine {
        subtype: ResultSubtype::ErrorDuringExecution,
        is_error: true,
        duration_ms: 0,
        duration_api_ms: 0,
        num_turns: 0,
        result: None,
        stop_reason: None,
        session_id: session_id.to_string(),
        total_cost_usd: 0.0,
        usage: Default::default(),
        model_usage: Default::default(),
        permission_denials: Vec::new(),
        uuid: fresh_uuid(),
        errors: Some(vec![message.to_string()]),
        api_error_status: None,
        structured_output: None,
    });
    if let Some(frame) = encode(&line) {
        out.send_raw(frame).await;
    }
}

fn serve(
    setup: &AgentSetup,
    request: SessionRequest,
    args: &ClaudeArgs,
    first: Option<UserInput>,
    additions: Additions,
) -> ExitCode {
    let cwd = request.work_dir.display().to_string();
    let served = shell::run(Runtime::CurrentThread, std::io::stdout(), |process| async move {
        let out = process.outbound;
        if let Some(refused) = &additions.refused {
            let id = args.resume.as_deref().map(str::trim).unwrap_or_default();
            fail_early(&out, args, id, refused).await;
            return 1;
        }
        // A session another process hosts: this run's prompts become turns of it there.
        if let Some(hosted) =
            super::attached::hosted_session(args, &setup.share_dir, &request.work_dir, &request.session)
            && let Some(code) =
                super::attached::run(args, hosted, &request.work_dir, out.clone(), first.clone(), process.stop.clone())
                    .await
        {
            return code;
        }
        match setup.build(request) {
            Err(BuildError::Usage(m) | BuildError::Fatal(m)) => {
                fail_early(&out, args, "", &m).await;
                1
            }
            Ok(built) => match session_problem(args, &built) {
                Some(problem) => {
                    fail_early(&out, args, &built.session.id, &problem).await;
                    // Never opened: only a folder this run created is removed (an empty new one).
                    built.session.finish();
                    1
                }
                None => {
                    crate::print::common::mark_created_session(&built.session, "claude");
                    let live = Live { sessions: &process.sessions, stop: process.stop, out };
                    run(built, live, setup, args, cwd, first, additions).await
                }
            },
        }
    });
    match served {
        Ok(code) => ExitCode::from(code),
        Err(e) => report(StartError::Fatal(e.0), &setup.share_dir),
    }
}

/// What the run needs from the process shell.
struct Live<'a> {
    sessions: &'a Sessions,
    stop: tokio_util::sync::CancellationToken,
    /// stdout.
    out: crate::rpc::Outbound,
}

/// `--resume` needs an existing session, `--session-id` a new one (as Claude Code).
fn session_problem(args: &ClaudeArgs, built: &BuiltSession) -> Option<String> {
    if let Some(id) = &args.resume
        && !built.session.resumed
    {
        return Some(format!("No conversation found with session ID: {}", id.trim()));
    }
    // With --fork-session, --session-id named the fork just made.
    if let Some(id) = &args.session_id
        && built.session.resumed
        && !(args.fork_session && (args.resume.is_some() || args.continue_))
    {
        return Some(format!("Session ID {} is already in use.", id.trim()));
    }
    None
}

async fn run(
    built: BuiltSession,
    shell: Live<'_>,
    setup: &AgentSetup,
    args: &ClaudeArgs,
    cwd: String,
    first: Option<UserInput>,
    additions: Additions,
) -> u8 {
    let out = shell.out.clone();
    let agent = built.soul.agent.clone();
    let session_id = built.session.id.clone();
    let warnings = filter_tools(&agent, args);
    let structured = additions.structured.map(|(tool, slot)| {
        agent.update_toolset(|set| set.insert(tool));
        slot
    });
    let streaming = args.output_format == OutputFormat::StreamJson;
    // Nobody approves an escalation out of the sandbox in these modes (spec sandbox.md §2.6).
    let bypass = args.dangerously_skip_permissions
        || matches!(args.permission_mode, PermissionMode::BypassPermissions | PermissionMode::DontAsk);
    agent.env.sandbox.set_nobody_to_ask(bypass || !super::permission::can_ask(args));
    let policy = Arc::new(Policy::of(args));
    // The host's answers to `can_use_tool` (and the other questions kiwi asks it) come back on
    // stdin as `control_response`s.
    let peer = Peer::new(out.clone(), "perm");
    let host = HostAsk::new(peer.clone(), out.clone());
    let mcp_timeout = Duration::from_millis(agent.env.config.mcp.client.tool_call_timeout_ms);
    let servers = additions
        .sdk_servers
        .into_iter()
        .map(|name| Arc::new(SdkServer::new(name, host.clone(), mcp_timeout)))
        .collect();
    let extras = Arc::new(Extras::new(host, servers));
    if let Some(agents) = additions.agents {
        extras.set_flag_agents(agents);
    }
    let identity = Identity {
        session_id: session_id.clone(),
        model: agent.model_name(),
        context_window: agent.max_context_size(),
    };
    let settings = Settings {
        format: args.output_format,
        partial: args.include_partial_messages,
        state_frames: std::env::var(SESSION_STATE_ENV).is_ok_and(|v| v == "1" || v.eq_ignore_ascii_case("true")),
        cwd,
        structured,
    };
    let projection = Arc::new(ClaudeProjection::new(
        out.clone(),
        settings,
        Some(agent.clone()),
        identity,
        policy.clone(),
        peer.clone(),
        extras.clone(),
    ));
    let ledger = Arc::new(super::ledger::Ledger::new(&agent.env.session_dir));
    projection.set_ledger(ledger.clone());
    // Other clients' turns (processes attached through the socket) stay out of the output.
    let turns = OwnTurns::new(projection.clone(), false);
    let live = LiveSession::open(built, turns.clone(), shell.sessions);
    let driver = live.driver().clone();
    projection.set_driver(&driver);
    // A subagent's result is its final text, as Claude Code hands it over (no "elaborate" round).
    agent.subagents.report_final_text();
    // Background subagents' lines reach the host too (`docs/print-mode.md`, "Background tasks").
    if let Err(e) = agent.subagents.show_background(projection.background_view()) {
        tracing::warn!("{e}");
    }
    for warning in &warnings {
        stderr_line(&format!("kiwi: {warning}"));
        if streaming && let Some(frame) = encode(&warning_line(&session_id, warning)) {
            out.send_raw(frame).await;
        }
    }
    live.start().await;
    // Served while the run has the session open (also a long-lived stream-json input run, which
    // a person may watch from `kiwi web`); the file goes when this is dropped.
    let hosting = crate::print::common::host(&live);
    let lines =
        (args.input_format == InputFormat::StreamJson).then(|| spawn_reader(std::io::stdin(), DEFAULT_MAX_LINE_BYTES));
    let run_loop = RunLoop {
        out,
        driver: driver.clone(),
        projection: projection.clone(),
        turns,
        policy,
        peer,
        session_id,
        setup: setup.clone(),
        next_model: Default::default(),
        replay: args.replay_user_messages,
        streaming,
        extras,
        ledger,
    };
    // Ends the session's turns; the shell closes the session (SessionEnd hooks, tasks, folder).
    let code = run_loop.serve(first, lines, shell.stop).await;
    drop(hosting);
    code
}

fn warning_line(session_id: &str, message: &str) -> OutLine {
    OutLine::System(SystemLine::Warning(WarningLine {
        message: message.to_string(),
        session_id: session_id.to_string(),
        uuid: fresh_uuid(),
    }))
}

/// Applies `--tools` and `--disallowedTools` (rules without a pattern) to the toolset, Claude's
/// tool names taken as kiwi's (`super::tool_names`); returns warnings for names that match no
/// kiwi tool.
fn filter_tools(agent: &crate::soul::Agent, args: &ClaudeArgs) -> Vec<String> {
    let toolset = agent.toolset();
    let names: Vec<String> = toolset.names().map(str::to_string).collect();
    let mut warnings = Vec::new();
    let only: Option<Vec<String>> = args
        .tools
        .as_ref()
        .filter(|t| !t.iter().any(|n| n == "default"))
        .map(|t| t.iter().map(|n| kiwi_name(n).to_string()).collect());
    let rules: Vec<Rule> = args.allowed_tools.iter().chain(&args.disallowed_tools).map(|r| Rule::parse(r)).collect();
    let removed: Vec<String> =
        args.disallowed_tools.iter().map(|r| Rule::parse(r)).filter(|r| r.pattern.is_none()).map(|r| r.tool).collect();
    let listed = only.iter().flatten().cloned().chain(rules.into_iter().map(|r| r.tool));
    for name in listed {
        // The host's own MCP tools and the structured answer's tool come later.
        if !names.contains(&name) && !name.starts_with("mcp__") && name != super::structured::TOOL_NAME {
            warnings.push(format!(
                "no kiwi tool is called {name:?}; tool options take Claude's or kiwi's names ({})",
                names.join(", ")
            ));
        }
    }
    let keep = |name: &String| only.as_ref().is_none_or(|only| only.contains(name)) && !removed.contains(name);
    if names.iter().all(keep) {
        return warnings;
    }
    agent.update_toolset(|set| {
        let kept: Vec<_> = names.iter().filter(|n| keep(n)).filter_map(|n| set.get(n).cloned()).collect();
        *set = Toolset::new(kept);
    });
    warnings
}
