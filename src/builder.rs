//! The session builder: from a work dir and a session choice to a ready agent, callable any
//! number of times in one process (a wire server builds one session; an ACP server one per
//! `session/new`).
//!
//! Invariants: building never changes the process (no working directory, no environment
//! variables, no exit): everything a session needs travels in its `AgentEnv`; a failure is a
//! typed error with one readable line, and nothing has been written for a failed build except
//! the session folder the choice asked for.

use std::path::PathBuf;
use std::sync::Arc;

use crate::agent_env::{AgentEnv, Model, ModelSlot};
use crate::auth::build_provider;
use crate::blueprint::skills::discover;
use crate::blueprint::spec::{load_agent_spec, load_builtin_agent_spec};
use crate::blueprint::system_prompt::{BuiltinArgs, load_system_prompt};
use crate::config::{self, Config};
use crate::llm::build::TraceSink;
use crate::mcp::{self, McpManager};
use crate::session::SessionError;
use crate::session::context_prompt;
use crate::session::store::{Session, SessionChoice, home_dir};
use crate::session::wire_log::WireLog;
use crate::soul::agent::AgentParts;
use crate::soul::dmail::{DMailBox, SendDMail};
use crate::soul::state::SessionState;
use crate::soul::subagent::Defs;
use crate::soul::subagent::defs::{agent_tool, load_defs};
use crate::soul::{Agent, Context, Soul};
use crate::tools::Toolset;
use crate::tools::builtin::{ToolCache, is_agent_path};

/// Which agent definition to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentChoice {
    /// The default built-in agent.
    Default,
    /// A built-in agent by name (`default`, `okabe`).
    Builtin(String),
    /// An agent file (YAML).
    File(PathBuf),
}

/// What every session of this process shares: the config (with command-line overrides applied)
/// and the choices made on the command line.
#[derive(Debug, Clone)]
pub struct AgentSetup {
    pub config: Arc<Config>,
    pub share_dir: PathBuf,
    /// `-m`: a key of `models` (None: `default_model`).
    pub model: Option<String>,
    /// `--thinking` / `--no-thinking`.
    pub thinking: Option<bool>,
    pub agent: AgentChoice,
    /// `--skills-dir`: the only skills root besides the built-ins.
    pub skills_dir: Option<PathBuf>,
    pub yolo: bool,
    /// Where the config came from (a file path, `--config`), for messages about it.
    pub config_source: String,
    /// A replaced or extended system prompt (Claude's `--system-prompt` / `--append-system-prompt`).
    pub system_prompt: PromptEdit,
    /// MCP config documents (the `mcp.json` shape, `{"mcpServers": {...}}`) for the sessions this
    /// setup builds; ACP puts the servers its client names for a session here.
    /// MCP config documents (`{"mcpServers": {NAME: {...}}}` each), merged in order; every built
    /// session connects to their servers itself and stops them when it is dropped.
    pub mcp_configs: Vec<serde_json::Value>,
    /// What the command line adds for the sessions this setup builds (`--afk`, `--add-dir`).
    pub invocation: Invocation,
    /// The run's sandbox (probed by the front end before serving); never saved with a session.
    pub sandbox: crate::agent_env::SandboxRun,
}

/// Command-line choices applied to each session built (`docs/configuration.md` §1.1).
#[derive(Debug, Clone, Default)]
pub struct Invocation {
    /// `--afk` (kimi's `--print` implies it): for this run only, never saved with the session.
    pub afk: bool,
    /// `--add-dir`, absolute: added as `/add-dir` adds them, and saved with the session.
    pub add_dirs: Vec<PathBuf>,
}

/// What the config's model selection will do, in words: for the start-up log and stderr.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diagnostics {
    /// Why there will be no model (every prompt then fails with -32001 carrying this).
    pub no_model: Option<String>,
    /// Problems that will fail requests (e.g. a missing API key).
    pub warnings: Vec<String>,
    /// `model <name> (<type> at <base url>)` or `no model`.
    pub model_summary: String,
}

/// Changes to the agent's own system prompt.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PromptEdit {
    /// Used instead of the agent's prompt.
    pub replace: Option<String>,
    /// Appended (after a blank line) to the prompt in effect.
    pub append: Option<String>,
}

impl PromptEdit {
    pub fn apply(&self, prompt: String) -> String {
        let mut prompt = self.replace.clone().unwrap_or(prompt);
        if let Some(more) = self.append.as_deref().filter(|m| !m.is_empty()) {
            if !prompt.is_empty() {
                prompt.push_str("\n\n");
            }
            prompt.push_str(more);
        }
        prompt
    }
}

/// One session to build.
pub struct SessionRequest {
    /// Absolute and normalized.
    pub work_dir: PathBuf,
    pub session: SessionChoice,
    /// Where the scripted-echo provider's trace lines go (the front end's writer), if anywhere.
    pub trace: Option<TraceSink>,
}

/// A ready session: its folder (locked), the soul over its restored context, and the recorder
/// for its `wire.jsonl`.
pub struct BuiltSession {
    pub session: Session,
    pub soul: Soul,
    pub recorder: WireLog,
}

/// Why a session could not be built. The text is the one line the user sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BuildError {
    /// The request itself is wrong (a usage error at start-up, exit 2).
    Usage(String),
    Fatal(String),
}

impl std::fmt::Display for BuildError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BuildError::Usage(m) | BuildError::Fatal(m) => f.write_str(m),
        }
    }
}

impl AgentSetup {
    /// The model selection and what is wrong with it, without building anything.
    pub fn diagnostics(&self) -> Diagnostics {
        let config = &self.config;
        let Ok(settings) = config::select(config, self.model.as_deref(), self.thinking, &config::select::ProcessEnv)
        else {
            return Diagnostics::default();
        };
        let name = self.model.as_deref().or(Some(config.default_model.as_str()).filter(|n| !n.is_empty()));
        let provider_key = name.and_then(|n| config.models.get(n)).map(|m| m.provider.as_str());
        let source = &self.config_source;
        let no_model = config::diagnose::no_model_reason(config, self.model.as_deref(), &settings, source);
        let model_summary = match (&no_model, name) {
            (None, Some(name)) => format!(
                "model {name} ({} at {})",
                config::diagnose::type_name(settings.provider.kind),
                if settings.provider.base_url.is_empty() {
                    "no URL".to_string()
                } else {
                    crate::llm::settings::loggable_url(&settings.provider.base_url)
                }
            ),
            (None, None) => {
                format!(
                    "model from the environment ({})",
                    crate::llm::settings::loggable_url(&settings.provider.base_url)
                )
            }
            (Some(_), _) => "no model".to_string(),
        };
        let mut warnings = config::diagnose::selection_warnings(&settings, provider_key, source);
        warnings.extend(config::diagnose::budget_without_prices(config, name));
        Diagnostics { warnings, no_model, model_summary }
    }

    pub fn build(&self, request: SessionRequest) -> Result<BuiltSession, BuildError> {
        let SessionRequest { work_dir, session, trace } = request;
        let session = Session::open(&self.share_dir, &work_dir, &session).map_err(|e| match e {
            SessionError::NoPrevious | SessionError::InvalidId(_) => BuildError::Usage(e.to_string()),
            other => BuildError::Fatal(other.to_string()),
        })?;
        let config = &self.config;
        let model = self.model_for(self.model.as_deref(), self.thinking, &session.id, trace)?;
        let diagnostics = self.diagnostics();
        tracing::info!(
            "kiwi {} session {} ({}) in {}: {}, config {}",
            crate::VERSION,
            session.id,
            if session.resumed { "resumed" } else { "new" },
            work_dir.display(),
            diagnostics.model_summary,
            self.config_source
        );
        let env = Arc::new(AgentEnv {
            work_dir: work_dir.clone(),
            share_dir: self.share_dir.clone(),
            session_dir: session.dir.clone(),
            session_id: session.id.clone(),
            config: config.clone(),
            model: ModelSlot::new(model),
            sandbox: Arc::new(crate::agent_env::SessionSandbox::new(self.sandbox.clone())),
        });
        let spec = match &self.agent {
            AgentChoice::File(path) => load_agent_spec(Some(path)),
            AgentChoice::Builtin(name) => load_builtin_agent_spec(name),
            AgentChoice::Default => load_agent_spec(None),
        }
        .map_err(|e| BuildError::Fatal(e.to_string()))?;
        let skills = discover(&home_dir(), &work_dir, self.skills_dir.as_deref());
        let builtins = BuiltinArgs::collect(&work_dir, &skills);
        let mut cache = ToolCache::default();
        let mut tools: Vec<Arc<dyn crate::tools::Tool>> = Vec::new();
        let mut invalid = Vec::new();
        let mut dmail = None;
        for path in &spec.tools {
            if is_agent_path(path) {
                tools.push(agent_tool(&spec.subagents));
                continue;
            }
            if is_dmail_path(path) {
                let mailbox = Arc::new(DMailBox::default());
                tools.push(Arc::new(crate::tools::Typed::new(SendDMail { mailbox: mailbox.clone() })));
                dmail = Some(mailbox);
                continue;
            }
            match cache.get(path, &env) {
                Some(Some(tool)) => tools.push(tool),
                Some(None) => {}
                None => invalid.push(format!("'{path}'")),
            }
        }
        if !invalid.is_empty() {
            return Err(BuildError::Fatal(format!("Invalid tools: [{}]", invalid.join(", "))));
        }
        // A user's agent file is checked whole before the session starts; the built-in agents'
        // subagent types (known good) are prepared after start-up, sharing the built tools.
        let subagents = match &self.agent {
            AgentChoice::File(_) => {
                Defs::Ready(load_defs(&spec.subagents, &env, &builtins, &mut cache).map_err(BuildError::Fatal)?)
            }
            AgentChoice::Builtin(_) | AgentChoice::Default => {
                let (specs, env, builtins) = (spec.subagents.clone(), env.clone(), builtins.clone());
                Defs::Deferred(Box::new(move || load_defs(&specs, &env, &builtins, &mut cache)))
            }
        };
        let mcp = self.mcp_manager(&work_dir)?;
        let rendered = load_system_prompt(&spec, builtins).map_err(|e| BuildError::Fatal(e.to_string()))?;
        let rendered = self.system_prompt.apply(rendered);
        // A session keeps the prompt it started with (`docs/protocol-1.10.md` §10.3).
        let context_path = session.context_path();
        // An undo killed half-way is finished before the context and the record are read.
        if let Some(line) = crate::session::rewind::finish_pending_undo(&session.dir, std::slice::from_ref(&work_dir)) {
            tracing::warn!("{line}");
        }
        let cannot_open = |e: std::io::Error| BuildError::Fatal(format!("Cannot open {}: {e}", context_path.display()));
        let ensured = context_prompt::ensure(&context_path, &rendered).map_err(cannot_open)?;
        let system_prompt = ensured.prompt;
        let context = match ensured.fresh {
            Some(file) => Context::fresh(&context_path, file),
            None => Context::restore(&context_path).map_err(cannot_open)?,
        };
        let agent = Arc::new(Agent::new(AgentParts {
            env,
            loop_control: config.loop_control.clone(),
            toolset: Toolset::new(tools),
            state: Arc::new(session_state(&session.dir, self.yolo, config.default_plan_mode && !session.resumed)),
            system_prompt,
            skills,
            dmail,
            subagents,
            models: Some(Arc::new(SessionModels { setup: self.clone(), session_id: session.id.clone() })),
            mcp,
        }));
        if self.invocation.afk {
            agent.state.grant_afk_for_run();
        }
        // A history with model answers but no cost record was made without prices: the sum
        // that starts now can only be a lower bound.
        if context.history().iter().any(|m| m.role == crate::llm::Role::Assistant) {
            agent.state.note_unpriced_history();
        }
        let mut soul = Soul::new(agent, context);
        for dir in &self.invocation.add_dirs {
            soul.add_dir_at_start(dir).map_err(|e| BuildError::Usage(format!("Invalid value for --add-dir: {e}")))?;
        }
        let recorder = WireLog::new(&session.wire_path());
        Ok(BuiltSession { session, soul, recorder })
    }
}

impl AgentSetup {
    /// The model `key` (`None`: the setup's default choice) with `thinking`, built for a session.
    fn model_for(
        &self,
        key: Option<&str>,
        thinking: Option<bool>,
        session_id: &str,
        trace: Option<TraceSink>,
    ) -> Result<Model, BuildError> {
        let settings = config::select(&self.config, key, thinking, &config::select::ProcessEnv)
            .map_err(|e| BuildError::Fatal(e.to_string()))?;
        let llm = build_provider(&settings, session_id, trace, &self.share_dir).map_err(BuildError::Fatal)?;
        let no_model_reason = config::diagnose::no_model_reason(&self.config, key, &settings, &self.config_source);
        let key = key.map(str::to_string).or_else(|| Some(self.config.default_model.clone()).filter(|k| !k.is_empty()));
        let prices = key.as_ref().and_then(|k| self.config.models.get(k)).and_then(|m| m.usd_per_mtok);
        Ok(Model {
            key,
            llm,
            capabilities: settings.capabilities.clone(),
            max_context_size: settings.model.max_context_size,
            prices,
            no_model_reason,
        })
    }

    /// The model `key` of the config (`None`: the setup's default) with `thinking` (`None`: as
    /// the setup says), built for `agent`'s session, for the front end to install between turns
    /// (`agent.env.model.set`). The toolset stays as the session was built (`ReadMediaFile`
    /// follows the first model's media capabilities). Unknown keys and models that cannot be
    /// built are refused with one readable line.
    pub fn model_switch(&self, agent: &Agent, key: Option<&str>, thinking: Option<bool>) -> Result<Model, String> {
        let key = key.or(self.model.as_deref());
        if let Some(k) = key
            && !self.config.models.contains_key(k)
        {
            return Err(format!("Unknown model {k:?}"));
        }
        let thinking = thinking.or(self.thinking);
        let model = self.model_for(key, thinking, &agent.env.session_id, None).map_err(|e| e.to_string())?;
        if let Some(reason) = &model.no_model_reason {
            return Err(reason.clone());
        }
        tracing::info!("session {} switches to model {}", agent.env.session_id, key.unwrap_or("from the environment"));
        Ok(model)
    }

    /// The session's MCP servers (none configured: no manager). Nothing connects yet: the first
    /// agent turn starts the connections.
    fn mcp_manager(&self, work_dir: &std::path::Path) -> Result<Option<Arc<McpManager>>, BuildError> {
        let table =
            mcp::server_table(&self.mcp_configs).map_err(|e| BuildError::Fatal(format!("Invalid MCP config: {e}")))?;
        if table.is_empty() {
            return Ok(None);
        }
        let env = mcp::LinkEnv { work_dir: work_dir.to_path_buf(), stderr: mcp::StderrTo::Log, oauth_token: None };
        let timeout = std::time::Duration::from_millis(self.config.mcp.client.tool_call_timeout_ms);
        Ok(Some(Arc::new(McpManager::new(table, env, &self.share_dir, timeout))))
    }
}

/// Builds the config's other models for one session: the `model` of an `Agent` call.
struct SessionModels {
    setup: AgentSetup,
    session_id: String,
}

impl crate::agent_env::ModelSource for SessionModels {
    fn build(&self, key: &str) -> Result<Model, String> {
        let model =
            self.setup.model_for(Some(key), self.setup.thinking, &self.session_id, None).map_err(|e| e.to_string())?;
        match model.no_model_reason {
            Some(reason) => Err(reason),
            None => Ok(model),
        }
    }
}

/// The session's saved state with `--yolo` applied, in plan mode when a new session should start
/// there; added directories that vanished are dropped.
fn session_state(dir: &std::path::Path, yolo: bool, plan_mode: bool) -> SessionState {
    let state = SessionState::load(dir, yolo);
    state.prune_missing_dirs();
    if plan_mode {
        state.set_plan_mode(true);
    }
    state
}

/// `SendDMail` lives with the soul (it rewinds the context), not in the tool registry.
fn is_dmail_path(path: &str) -> bool {
    match path.split_once(':') {
        Some((module, "SendDMail")) => module == "kimi_cli.tools.dmail" || module.starts_with("kimi_cli.tools.dmail."),
        _ => false,
    }
}
