//! Claude Code's headless command line (`docs/print-mode.md` B.1, C.2), parsed by hand: `-p` is a
//! switch here and a value in kimi, every option that takes a value accepts both `--flag value`
//! and `--flag=value` (the SDK sends `--resume=<id>`), an empty token is a value
//! (`--system-prompt ""`), and unknown options are accepted and ignored with a stderr line,
//! never a usage error that would break an SDK launch.
//!
//! Invariants: parsing has no side effects; every refusal is a [`UsageError`] with one line the
//! user reads; session ids are checked with `check_session_id` before anything opens a folder.

use std::ffi::OsString;
use std::path::PathBuf;

use crate::session::id::check_session_id;

/// A command-line mistake (exit 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageError(pub String);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputFormat {
    #[default]
    Text,
    Json,
    StreamJson,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InputFormat {
    #[default]
    Text,
    StreamJson,
}

/// `--permission-mode` / `set_permission_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PermissionMode {
    #[default]
    Default,
    AcceptEdits,
    BypassPermissions,
    Plan,
    DontAsk,
    Auto,
}

impl PermissionMode {
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "default" => Self::Default,
            "acceptEdits" => Self::AcceptEdits,
            "bypassPermissions" => Self::BypassPermissions,
            "plan" => Self::Plan,
            "dontAsk" => Self::DontAsk,
            "auto" => Self::Auto,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::AcceptEdits => "acceptEdits",
            Self::BypassPermissions => "bypassPermissions",
            Self::Plan => "plan",
            Self::DontAsk => "dontAsk",
            Self::Auto => "auto",
        }
    }
}

/// Everything the Claude dialect's command line says.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClaudeArgs {
    pub version: bool,
    pub help: bool,
    /// The positional prompt.
    pub prompt: Option<String>,
    pub output_format: OutputFormat,
    pub input_format: InputFormat,
    pub verbose: bool,
    pub include_partial_messages: bool,
    pub replay_user_messages: bool,
    pub permission_mode: PermissionMode,
    pub dangerously_skip_permissions: bool,
    /// `--permission-prompt-tool NAME`; only `stdio` is served.
    pub permission_prompt_tool: Option<String>,
    pub allowed_tools: Vec<String>,
    pub disallowed_tools: Vec<String>,
    /// `--tools`: the only tools offered (`None`: all; `default` means all too).
    pub tools: Option<Vec<String>>,
    pub system_prompt: Option<String>,
    pub system_prompt_file: Option<PathBuf>,
    pub append_system_prompt: Option<String>,
    pub mcp_config: Vec<String>,
    /// `--strict-mcp-config`: only the `--mcp-config` servers, not the user's `mcp.json`.
    pub strict_mcp_config: bool,
    pub continue_: bool,
    pub resume: Option<String>,
    pub session_id: Option<String>,
    pub model: Option<String>,
    pub max_turns: Option<u32>,
    /// `--max-budget-usd`: the session's dollar budget (`loop_control.max_budget_usd`).
    pub max_budget_usd: Option<f64>,
    /// kiwi's own options, accepted in this dialect too.
    pub config: Option<String>,
    pub config_file: Option<PathBuf>,
    pub work_dir: Option<PathBuf>,
    /// `--add-dir` (repeatable): where `acceptEdits` approves edits besides the work dir.
    pub add_dirs: Vec<PathBuf>,
    pub debug: bool,
    pub log_stderr: bool,
    /// `--json-schema`: the schema of the `StructuredOutput` tool's answer.
    pub json_schema: Option<String>,
    /// `--agents`: subagent types as JSON (`{name: {description, prompt, tools?, model?}}`).
    pub agents: Option<String>,
    /// `--max-thinking-tokens` / `--thinking`: thinking on (`Some(true)`) or off.
    pub thinking: Option<bool>,
    /// `--fork-session`: the resumed (or continued) session is forked into a new one first;
    /// without `--resume`/`--continue` it changes nothing (as in Claude Code).
    pub fork_session: bool,
    /// `--resume-session-at UUID`: the resumed history ends with the turn this message ends
    /// (`super::resume_at`).
    pub resume_session_at: Option<String>,
    /// `--resume-drops-turn UUID`: the prompt of the one turn `--resume-session-at` may discard.
    pub resume_drops_turn: Option<String>,
    /// `--settings` (inline JSON or a file): only its `sandbox` member is read.
    pub settings: Option<String>,
    /// kiwi's `--sandbox MODE` and `--sandbox-network`, accepted in this dialect too.
    pub sandbox: Option<crate::sandbox::SandboxMode>,
    pub sandbox_network: bool,
    /// Options accepted and ignored (each named on stderr at start-up).
    pub ignored: Vec<String>,
}

enum Arity {
    Switch,
    Value,
}

/// Known options: (names, arity). Everything a current Python SDK passes is here.
const OPTIONS: &[(&[&str], Arity)] = &[
    (&["-p", "--print"], Arity::Switch),
    (&["-v", "--version"], Arity::Switch),
    (&["-h", "--help"], Arity::Switch),
    (&["--output-format"], Arity::Value),
    (&["--input-format"], Arity::Value),
    (&["--verbose"], Arity::Switch),
    (&["--include-partial-messages"], Arity::Switch),
    (&["--replay-user-messages"], Arity::Switch),
    (&["--permission-mode"], Arity::Value),
    (&["--dangerously-skip-permissions"], Arity::Switch),
    (&["--permission-prompt-tool"], Arity::Value),
    (&["--allowedTools", "--allowed-tools"], Arity::Value),
    (&["--disallowedTools", "--disallowed-tools"], Arity::Value),
    (&["--tools"], Arity::Value),
    (&["--system-prompt"], Arity::Value),
    (&["--system-prompt-file"], Arity::Value),
    (&["--append-system-prompt"], Arity::Value),
    (&["--mcp-config"], Arity::Value),
    (&["--strict-mcp-config"], Arity::Switch),
    (&["-c", "--continue"], Arity::Switch),
    (&["-r", "--resume"], Arity::Value),
    (&["--session-id"], Arity::Value),
    (&["--model"], Arity::Value),
    (&["--max-turns"], Arity::Value),
    (&["--max-budget-usd"], Arity::Value),
    (&["--config"], Arity::Value),
    (&["--config-file"], Arity::Value),
    (&["--work-dir"], Arity::Value),
    (&["-d", "--debug"], Arity::Switch),
    (&["--log-stderr"], Arity::Switch),
    (&["--add-dir"], Arity::Value),
    (&["--fork-session"], Arity::Switch),
    (&["--resume-session-at"], Arity::Value),
    (&["--resume-drops-turn"], Arity::Value),
    (&["--json-schema"], Arity::Value),
    (&["--agents"], Arity::Value),
    (&["--max-thinking-tokens"], Arity::Value),
    (&["--thinking"], Arity::Value),
    (&["--settings"], Arity::Value),
    (&["--sandbox"], Arity::Value),
    (&["--sandbox-network"], Arity::Switch),
    // Accepted and ignored (named on stderr): kiwi has no equivalent.
    (&["--include-hook-events"], Arity::Switch),
    (&["--session-mirror"], Arity::Switch),
    (&["--allow-dangerously-skip-permissions"], Arity::Switch),
    (&["--no-session-persistence"], Arity::Switch),
    (&["--ide"], Arity::Switch),
    (&["--setting-sources"], Arity::Value),
    (&["--task-budget"], Arity::Value),
    (&["--fallback-model"], Arity::Value),
    (&["--betas"], Arity::Value),
    (&["--thinking-display"], Arity::Value),
    (&["--effort"], Arity::Value),
    (&["--plugin-dir"], Arity::Value),
    (&["--agent"], Arity::Value),
    (&["--debug-file"], Arity::Value),
];

fn lookup(name: &str) -> Option<(&'static str, &'static Arity)> {
    OPTIONS.iter().find(|(names, _)| names.contains(&name)).map(|(names, arity)| (names[names.len() - 1], arity))
}

/// A tool list: comma- and/or space-separated names or rules, possibly repeated; a rule's
/// pattern keeps its spaces (`Bash(git commit:*)`).
fn tool_list(value: &str) -> impl Iterator<Item = String> + '_ {
    let mut items = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for c in value.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        if depth == 0 && (c == ',' || c.is_whitespace()) {
            if !current.is_empty() {
                items.push(std::mem::take(&mut current));
            }
        } else {
            current.push(c);
        }
    }
    if !current.is_empty() {
        items.push(current);
    }
    items.into_iter()
}

impl ClaudeArgs {
    /// Parses argv without the program name.
    pub fn parse(args: &[OsString]) -> Result<Self, UsageError> {
        let mut out = ClaudeArgs::default();
        let mut positionals: Vec<String> = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let token = args[i].to_string_lossy().to_string();
            i += 1;
            if token == "--" {
                positionals.extend(args[i..].iter().map(|a| a.to_string_lossy().to_string()));
                break;
            }
            if !token.starts_with('-') || token == "-" {
                positionals.push(token);
                continue;
            }
            let (name, inline) = match token.split_once('=') {
                Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
                _ => (token.clone(), None),
            };
            let Some((canonical, arity)) = lookup(&name) else {
                // An unknown option: take the next token as its value unless it looks like an
                // option (the SDK writes dash-leading values as `--flag=value`).
                let mut ignored = token.clone();
                if inline.is_none()
                    && let Some(next) = args.get(i).map(|a| a.to_string_lossy().to_string())
                    && !next.starts_with('-')
                    && name.starts_with("--")
                {
                    ignored = format!("{token} {next}");
                    i += 1;
                }
                out.ignored.push(ignored);
                continue;
            };
            let value = match arity {
                Arity::Switch => {
                    if inline.is_some() {
                        return Err(UsageError(format!("option '{canonical}' takes no value")));
                    }
                    None
                }
                Arity::Value => match inline {
                    Some(v) => Some(v),
                    None => match args.get(i).map(|a| a.to_string_lossy().to_string()) {
                        Some(next) if !next.starts_with('-') || next == "-" => {
                            i += 1;
                            Some(next)
                        }
                        _ => return Err(UsageError(format!("option '{canonical} <value>' argument missing"))),
                    },
                },
            };
            out.apply(canonical, value)?;
        }
        if positionals.len() > 1 {
            return Err(UsageError(format!(
                "too many arguments: expected one prompt, got {} (quote the prompt)",
                positionals.len()
            )));
        }
        out.prompt = positionals.pop();
        out.validate()?;
        Ok(out)
    }

    fn apply(&mut self, name: &str, value: Option<String>) -> Result<(), UsageError> {
        let v = value.unwrap_or_default();
        match name {
            "--print" => {}
            "--version" => self.version = true,
            "--help" => self.help = true,
            "--output-format" => {
                self.output_format = match v.as_str() {
                    "text" => OutputFormat::Text,
                    "json" => OutputFormat::Json,
                    "stream-json" => OutputFormat::StreamJson,
                    _ => return Err(invalid("--output-format", &v, "text, json, stream-json")),
                }
            }
            "--input-format" => {
                self.input_format = match v.as_str() {
                    "text" => InputFormat::Text,
                    "stream-json" => InputFormat::StreamJson,
                    _ => return Err(invalid("--input-format", &v, "text, stream-json")),
                }
            }
            "--verbose" => self.verbose = true,
            "--include-partial-messages" => self.include_partial_messages = true,
            "--replay-user-messages" => self.replay_user_messages = true,
            "--permission-mode" => {
                self.permission_mode = PermissionMode::parse(&v).ok_or_else(|| {
                    invalid("--permission-mode", &v, "default, acceptEdits, bypassPermissions, plan, dontAsk, auto")
                })?
            }
            "--dangerously-skip-permissions" => self.dangerously_skip_permissions = true,
            "--permission-prompt-tool" => self.permission_prompt_tool = Some(v),
            "--allowed-tools" => self.allowed_tools.extend(tool_list(&v)),
            "--disallowed-tools" => self.disallowed_tools.extend(tool_list(&v)),
            "--tools" => self.tools = Some(tool_list(&v).collect()),
            "--system-prompt" => self.system_prompt = Some(v),
            "--system-prompt-file" => self.system_prompt_file = Some(PathBuf::from(v)),
            "--append-system-prompt" => self.append_system_prompt = Some(v),
            "--mcp-config" => self.mcp_config.push(v),
            "--strict-mcp-config" => self.strict_mcp_config = true,
            "--continue" => self.continue_ = true,
            "--resume" => self.resume = Some(v),
            "--session-id" => self.session_id = Some(v),
            "--model" => self.model = Some(v),
            "--max-turns" => {
                let n: u32 =
                    v.trim().parse().ok().filter(|n| *n >= 1).ok_or_else(|| {
                        UsageError(format!("--max-turns needs a whole number of at least 1, got {v:?}"))
                    })?;
                self.max_turns = Some(n);
            }
            "--max-budget-usd" => {
                let usd = crate::config::prices::parse_budget_usd(&v).ok_or_else(|| {
                    UsageError(format!("--max-budget-usd needs a number of US dollars above 0, got {v:?}"))
                })?;
                self.max_budget_usd = Some(usd);
            }
            "--config" => self.config = Some(v),
            "--config-file" => self.config_file = Some(PathBuf::from(v)),
            "--work-dir" => self.work_dir = Some(PathBuf::from(v)),
            "--add-dir" => self.add_dirs.push(PathBuf::from(v)),
            "--json-schema" => self.json_schema = Some(v),
            "--agents" => self.agents = Some(v),
            "--fork-session" => self.fork_session = true,
            "--resume-session-at" => self.resume_session_at = Some(v),
            "--resume-drops-turn" => self.resume_drops_turn = Some(v),
            "--max-thinking-tokens" => {
                let n: u64 = v
                    .trim()
                    .parse()
                    .map_err(|_| UsageError(format!("--max-thinking-tokens needs a whole number, got {v:?}")))?;
                self.thinking = Some(n > 0);
            }
            "--thinking" => {
                self.thinking = Some(match v.as_str() {
                    "enabled" | "adaptive" | "on" | "true" => true,
                    "disabled" | "off" | "false" => false,
                    _ => return Err(invalid("--thinking", &v, "enabled, adaptive, disabled")),
                })
            }
            "--debug" => self.debug = true,
            "--log-stderr" => self.log_stderr = true,
            "--settings" => self.settings = Some(v),
            "--sandbox" => {
                self.sandbox = Some(
                    crate::sandbox::SandboxMode::parse(&v)
                        .ok_or_else(|| invalid("--sandbox", &v, "read-only, workspace-write, off"))?,
                )
            }
            "--sandbox-network" => self.sandbox_network = true,
            other => self.ignored.push(if v.is_empty() { other.to_string() } else { format!("{other}={v}") }),
        }
        Ok(())
    }

    fn validate(&self) -> Result<(), UsageError> {
        // Claude Code's own texts.
        if self.resume_session_at.is_some() && self.resume.is_none() {
            return Err(UsageError("--resume-session-at requires --resume".into()));
        }
        if self.resume_drops_turn.is_some() && self.resume_session_at.is_none() {
            return Err(UsageError("--resume-drops-turn requires --resume-session-at".into()));
        }
        if self.input_format == InputFormat::StreamJson && self.output_format != OutputFormat::StreamJson {
            return Err(UsageError("--input-format stream-json needs --output-format stream-json".into()));
        }
        if self.include_partial_messages && self.output_format != OutputFormat::StreamJson {
            return Err(UsageError("--include-partial-messages needs --output-format stream-json".into()));
        }
        if self.replay_user_messages && self.input_format != InputFormat::StreamJson {
            return Err(UsageError("--replay-user-messages needs --input-format stream-json".into()));
        }
        // With --fork-session, --session-id names the fork of the resumed session.
        let fork_named = self.fork_session && self.session_id.is_some();
        let chosen = [self.continue_, self.resume.is_some(), self.session_id.is_some() && !fork_named];
        if chosen.iter().filter(|c| **c).count() > 1 {
            return Err(UsageError(
                "Choose one of --continue, --resume and --session-id (--session-id goes with --resume or \
                 --continue only to name a --fork-session)"
                    .into(),
            ));
        }
        for id in self.resume.iter().chain(&self.session_id) {
            check_session_id(id.trim()).map_err(UsageError)?;
        }
        if let Some(tool) = &self.permission_prompt_tool
            && tool != "stdio"
        {
            return Err(UsageError(format!(
                "--permission-prompt-tool {tool:?} is not available in kiwi: only stdio (control requests) is supported"
            )));
        }
        if self.system_prompt.is_some() && self.system_prompt_file.is_some() {
            return Err(UsageError("Cannot combine --system-prompt and --system-prompt-file".into()));
        }
        if self.config.is_some() && self.config_file.is_some() {
            return Err(UsageError("Cannot combine --config and --config-file.".into()));
        }
        for text in &self.mcp_config {
            if serde_json::from_str::<serde_json::Value>(text).is_err() && !std::path::Path::new(text).is_file() {
                return Err(UsageError(format!("Invalid --mcp-config {text:?}: neither JSON nor a file")));
            }
        }
        Ok(())
    }
}

fn invalid(flag: &str, value: &str, choices: &str) -> UsageError {
    UsageError(format!("Invalid value for {flag}: {value:?} is not one of {choices}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<ClaudeArgs, UsageError> {
        ClaudeArgs::parse(&args.iter().map(OsString::from).collect::<Vec<_>>())
    }

    #[test]
    fn the_sdk_command_line_parses() {
        let a = parse(&[
            "--output-format",
            "stream-json",
            "--verbose",
            "--system-prompt",
            "",
            "--permission-prompt-tool",
            "stdio",
            "--resume=0b6f",
            "--setting-sources=user,project",
            "--allowedTools",
            "Shell,ReadFile",
            "--max-turns",
            "3",
            "--mcp-config",
            "{\"mcpServers\":{}}",
            "--input-format",
            "stream-json",
        ])
        .unwrap();
        assert_eq!(a.output_format, OutputFormat::StreamJson);
        assert_eq!(a.input_format, InputFormat::StreamJson);
        assert_eq!(a.system_prompt.as_deref(), Some(""));
        assert_eq!(a.resume.as_deref(), Some("0b6f"));
        assert_eq!(a.allowed_tools, ["Shell", "ReadFile"]);
        assert_eq!(a.max_turns, Some(3));
        assert_eq!(a.permission_prompt_tool.as_deref(), Some("stdio"));
        assert_eq!(a.ignored, ["--setting-sources=user,project"]);
        assert_eq!(a.prompt, None);
    }

    #[test]
    fn scripts_command_lines_parse() {
        let a = parse(&["-p", "--output-format", "json", "list files", "--model", "k2", "-c"]).unwrap();
        assert_eq!(a.prompt.as_deref(), Some("list files"));
        assert_eq!(a.output_format, OutputFormat::Json);
        assert!(a.continue_);
        assert_eq!(a.model.as_deref(), Some("k2"));
        let a = parse(&["--session-id=abc", "-p", "hi"]).unwrap();
        assert_eq!(a.session_id.as_deref(), Some("abc"));
        let a = parse(&["--disallowed-tools", "Shell WriteFile", "--tools", ""]).unwrap();
        assert_eq!(a.disallowed_tools, ["Shell", "WriteFile"]);
        assert_eq!(a.tools, Some(vec![]));
        let a = parse(&["--add-dir", "/a", "--add-dir=../b", "-p", "q"]).unwrap();
        assert_eq!(a.add_dirs, [PathBuf::from("/a"), PathBuf::from("../b")]);
        assert!(a.ignored.is_empty());
    }

    #[test]
    fn sdk_options_are_served() {
        let a = parse(&["--allowedTools", "Bash(git commit:*),Read mcp__calc__add", "-p", "q"]).unwrap();
        assert_eq!(a.allowed_tools, ["Bash(git commit:*)", "Read", "mcp__calc__add"]);
        let a =
            parse(&["--json-schema", "{\"type\":\"object\"}", "--agents={}", "--max-thinking-tokens", "0", "-p", "q"])
                .unwrap();
        assert_eq!(a.json_schema.as_deref(), Some("{\"type\":\"object\"}"));
        assert_eq!(a.agents.as_deref(), Some("{}"));
        assert_eq!(a.thinking, Some(false));
        assert!(a.ignored.is_empty());
        let a = parse(&["--max-budget-usd", "1.5", "--task-budget", "1", "--settings", "s.json", "-p", "q"]).unwrap();
        assert_eq!(a.max_budget_usd, Some(1.5));
        assert_eq!(a.ignored, ["--task-budget=1"]);
        assert_eq!(a.settings.as_deref(), Some("s.json"));
        let a = parse(&["--sandbox", "read-only", "--sandbox-network", "-p", "q"]).unwrap();
        assert_eq!((a.sandbox, a.sandbox_network), (Some(crate::sandbox::SandboxMode::ReadOnly), true));
        assert!(parse(&["--sandbox", "bogus", "-p", "q"]).is_err());
    }

    #[test]
    fn unknown_options_are_ignored_not_refused() {
        let a = parse(&["--brand-new-flag", "value", "--another", "-p", "--x=1", "prompt"]).unwrap();
        assert_eq!(a.ignored, ["--brand-new-flag value", "--another", "--x=1"]);
        assert_eq!(a.prompt.as_deref(), Some("prompt"));
    }

    #[test]
    fn bad_command_lines_are_usage_errors() {
        let cases: &[(&[&str], &str)] = &[
            (&["--output-format", "xml"], "Invalid value for --output-format"),
            (&["--input-format", "stream-json"], "needs --output-format stream-json"),
            (&["--max-turns", "0"], "--max-turns needs"),
            (&["--max-turns", "x"], "--max-turns needs"),
            (&["--max-budget-usd", "0"], "--max-budget-usd needs"),
            (&["--max-budget-usd=-2"], "--max-budget-usd needs"),
            (&["--max-budget-usd", "lots"], "--max-budget-usd needs"),
            (&["--model"], "argument missing"),
            (&["--resume-session-at=u"], "--resume-session-at requires --resume"),
            (&["--resume-drops-turn=u", "-r", "x"], "--resume-drops-turn requires --resume-session-at"),
            (&["-c", "-r", "x", "--fork-session"], "Choose one of"),
            (&["--max-thinking-tokens", "lots"], "--max-thinking-tokens needs"),
            (&["--model", "--verbose"], "argument missing"),
            (&["--permission-mode", "yolo"], "Invalid value for --permission-mode"),
            (&["--resume", ".."], "Invalid session id"),
            (&["--session-id=a/b"], "Invalid session id"),
            (&["--resume", "a", "--session-id", "b"], "Choose one of"),
            (&["--permission-prompt-tool", "mcp__x__y"], "only stdio"),
            (&["--mcp-config", "{nope"], "Invalid --mcp-config"),
            (&["a", "b"], "too many arguments"),
            (&["--verbose=yes"], "takes no value"),
        ];
        for (args, expected) in cases {
            let e = parse(args).unwrap_err();
            assert!(e.0.contains(expected), "{args:?}: {}", e.0);
        }
    }
}
