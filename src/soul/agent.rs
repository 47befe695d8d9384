//! The parts of an agent that outlive a turn and are shared with front ends: environment, model,
//! toolset, session state and approvals, what the client can do, system prompt and slash
//! commands.

use std::sync::{Arc, RwLock};

use crate::agent_env::AgentEnv;
use crate::blueprint::skills::{Skill, skill_commands};
use crate::config::LoopControl;
use crate::llm::{Capability, SharedProvider};
use crate::mcp::McpManager;
use crate::soul::approval::ApprovalHub;
use crate::soul::client::ClientState;
use crate::soul::dmail::DMailBox;
use crate::soul::hooks::HookRegistry;
use crate::soul::slash::{CommandInfo, builtin_commands};
use crate::soul::state::SessionState;
use crate::tools::Toolset;

pub struct Agent {
    /// Also holds the model (`env.llm`; `None` when none is configured: `prompt` ⇒ -32001).
    pub env: Arc<AgentEnv>,
    pub max_context_size: u64,
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
    /// Why there is no model, when there is none (told to the client with every -32001).
    pub no_model_reason: Option<String>,
    /// The session's MCP servers, when any are configured.
    pub mcp: Option<Arc<McpManager>>,
}

/// Everything start-up decides about an agent.
pub struct AgentParts {
    pub env: Arc<AgentEnv>,
    pub max_context_size: u64,
    pub loop_control: LoopControl,
    pub toolset: Toolset,
    pub state: Arc<SessionState>,
    pub system_prompt: String,
    pub skills: Vec<Skill>,
    /// Present when the agent has the `SendDMail` tool.
    pub dmail: Option<Arc<DMailBox>>,
    /// Why no model could be built, if none could.
    pub no_model_reason: Option<String>,
    pub mcp: Option<Arc<McpManager>>,
}

impl Agent {
    pub fn new(parts: AgentParts) -> Self {
        let mut slash_commands = builtin_commands();
        slash_commands.extend(skill_commands(&parts.skills).into_iter().map(|(name, description)| CommandInfo {
            name,
            description,
            aliases: Vec::new(),
        }));
        let hooks = Arc::new(HookRegistry::new(parts.env.config.hooks.clone()));
        Self {
            env: parts.env,
            max_context_size: parts.max_context_size,
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
            no_model_reason: parts.no_model_reason,
            mcp: parts.mcp,
        }
    }

    /// The chat provider; `None` when no usable model is configured.
    pub fn llm(&self) -> Option<&SharedProvider> {
        self.env.llm.as_ref()
    }

    /// The error of a turn that needs a model when there is none.
    pub fn llm_not_set(&self) -> crate::soul::TurnError {
        crate::soul::TurnError::LlmNotSet { reason: self.no_model_reason.clone() }
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
