//! The parts of an agent that outlive a turn and are shared with front ends: environment, model,
//! toolset, session state and approvals, what the client can do, system prompt and slash
//! commands.

use std::sync::{Arc, RwLock};

use crate::agent_env::{AgentEnv, ModelSource};
use crate::blueprint::skills::{Skill, skill_commands};
use crate::config::LoopControl;
use crate::llm::{Capability, SharedProvider};
use crate::mcp::McpManager;
use crate::session::rewind::EditJournal;
use crate::soul::approval::ApprovalHub;
use crate::soul::client::ClientState;
use crate::soul::dmail::DMailBox;
use crate::soul::hooks::HookRegistry;
use crate::soul::slash::{CommandInfo, builtin_commands};
use crate::soul::state::SessionState;
use crate::soul::subagent::{Defs, SubagentDef, Subagents};
use crate::tools::Toolset;
use crate::tools::background::BackgroundTasks;

pub struct Agent {
    /// Also holds the model (`env.model`; no provider when none is configured: `prompt` ⇒ -32001).
    pub env: Arc<AgentEnv>,
    pub loop_control: LoopControl,
    /// Replaced whole when the client registers external tools (never during a turn).
    toolset: RwLock<Arc<Toolset>>,
    /// The session's persisted state (approval flags, plan mode, todos, …).
    pub state: Arc<SessionState>,
    /// Every approval request of the session.
    pub approvals: Arc<ApprovalHub>,
    /// What the connected client can do (set by its handshake).
    pub client: Arc<ClientState>,
    /// Config hooks and client subscriptions.
    pub hooks: Arc<HookRegistry>,
    pub system_prompt: String,
    /// Built-in commands, then `skill:` and `flow:` commands, as `initialize` lists them.
    pub slash_commands: Vec<CommandInfo>,
    pub skills: Vec<Skill>,
    pub dmail: Option<Arc<DMailBox>>,
    /// The subagent types the `Agent` tool can start, and the running instances.
    pub subagents: Arc<Subagents>,
    /// The session's background tasks (managed by the main agent only).
    pub background: Arc<BackgroundTasks>,
    /// The session's MCP servers, when any are configured.
    pub mcp: Option<Arc<McpManager>>,
    /// Before-images of the files the edit tools change, per turn (`docs/sessions.md` §9);
    /// `None` for an agent without a session folder.
    pub journal: Option<Arc<EditJournal>>,
}

/// Everything start-up decides about an agent.
pub struct AgentParts {
    pub env: Arc<AgentEnv>,
    pub loop_control: LoopControl,
    pub toolset: Toolset,
    pub state: Arc<SessionState>,
    pub system_prompt: String,
    pub skills: Vec<Skill>,
    /// Present when the agent has the `SendDMail` tool.
    pub dmail: Option<Arc<DMailBox>>,
    /// The agent file's subagent types (see `soul::subagent::defs`).
    pub subagents: Defs,
    /// Builds the models subagents may ask for by alias.
    pub models: Option<Arc<dyn ModelSource>>,
    pub mcp: Option<Arc<McpManager>>,
}

impl Agent {
    pub fn new(parts: AgentParts) -> Self {
        let slash_commands = Self::slash_commands_for(&parts.skills);
        let hooks = Arc::new(HookRegistry::new(parts.env.config.hooks.clone()));
        let background = BackgroundTasks::new(parts.env.config.background.clone(), parts.env.session_dir.clone());
        let journal = parts
            .env
            .session_dir
            .is_absolute()
            .then(|| Arc::new(EditJournal::new(&parts.env.session_dir, parts.env.config.undo.max_bytes)));
        Self {
            env: parts.env,
            loop_control: parts.loop_control,
            toolset: RwLock::new(Arc::new(parts.toolset)),
            approvals: ApprovalHub::new(parts.state.clone()),
            state: parts.state,
            client: Arc::default(),
            hooks,
            system_prompt: parts.system_prompt,
            slash_commands,
            skills: parts.skills,
            dmail: parts.dmail,
            subagents: Arc::new(Subagents::new(parts.subagents, parts.models)),
            background,
            mcp: parts.mcp,
            journal,
        }
    }

    /// Built-in commands, then the `skill:` and `flow:` commands of `skills`: what `initialize`
    /// lists for an agent with these skills.
    pub fn slash_commands_for(skills: &[Skill]) -> Vec<CommandInfo> {
        let mut commands = builtin_commands();
        commands.extend(skill_commands(skills).into_iter().map(|(name, description)| CommandInfo {
            name,
            description,
            aliases: Vec::new(),
            extension: None,
        }));
        commands
    }

    /// A subagent of `parent` of type `def` in `env` (the parent's, or the parent's with another
    /// model): its own prompt and tools; the session's state, approvals, client and hooks. No
    /// slash commands, skills or D-Mail.
    pub fn for_subagent(parent: &Agent, def: &SubagentDef, system_prompt: String, env: Arc<AgentEnv>) -> Self {
        Self {
            env,
            loop_control: parent.loop_control.clone(),
            toolset: RwLock::new(def.toolset.clone()),
            state: parent.state.clone(),
            approvals: parent.approvals.clone(),
            client: parent.client.clone(),
            hooks: parent.hooks.clone(),
            system_prompt,
            slash_commands: Vec::new(),
            skills: Vec::new(),
            dmail: None,
            subagents: parent.subagents.clone(),
            background: parent.background.clone(),
            // Subagents never get MCP tools (`docs/tools.md` §10).
            mcp: None,
            journal: parent.journal.clone(),
        }
    }

    /// The chat provider now in use; `None` when no usable model is configured.
    pub fn llm(&self) -> Option<SharedProvider> {
        self.env.llm()
    }

    /// The model's context window in tokens.
    pub fn max_context_size(&self) -> u64 {
        self.env.model.get().max_context_size
    }

    /// What the model's tokens cost (`None`: unknown).
    pub fn prices(&self) -> Option<crate::config::ModelPrices> {
        self.env.model.get().prices
    }

    /// The error of a turn that needs a model when there is none.
    pub fn llm_not_set(&self) -> crate::soul::TurnError {
        crate::soul::TurnError::LlmNotSet { reason: self.env.model.get().no_model_reason.clone() }
    }

    pub fn skill(&self, name: &str) -> Option<&Skill> {
        self.skills.iter().find(|s| s.name == name)
    }

    pub fn toolset(&self) -> Arc<Toolset> {
        match self.toolset.read() {
            Ok(t) => t.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Applies `change` to a copy of the toolset and publishes it.
    pub fn update_toolset(&self, change: impl FnOnce(&mut Toolset)) {
        let mut guard = match self.toolset.write() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let mut next = (**guard).clone();
        change(&mut next);
        *guard = Arc::new(next);
    }

    pub fn has(&self, cap: Capability) -> bool {
        self.env.has(cap)
    }

    pub fn model_name(&self) -> String {
        self.llm().map(|l| l.model_name().to_string()).unwrap_or_default()
    }
}
