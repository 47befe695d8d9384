//! The parts of an agent that outlive a turn and are shared with front ends: runtime, model,
//! toolset, approval state, system prompt and slash commands.

use std::sync::{Arc, RwLock};

use crate::config::LoopControl;
use crate::llm::{Capability, SharedProvider};
use crate::protocol::methods::SlashCommandInfo;
use crate::runtime::Runtime;
use crate::soul::approval::ApprovalState;
use crate::tools::Toolset;

pub struct Agent {
    pub runtime: Arc<Runtime>,
    /// `None` when no usable model is configured (`prompt` ⇒ -32001).
    pub llm: Option<SharedProvider>,
    pub max_context_size: u64,
    pub loop_control: LoopControl,
    /// Replaced whole when the client registers external tools (never during a turn).
    toolset: RwLock<Arc<Toolset>>,
    pub approval: Arc<ApprovalState>,
    pub system_prompt: String,
    pub slash_commands: Vec<SlashCommandInfo>,
}

impl Agent {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        runtime: Arc<Runtime>,
        llm: Option<SharedProvider>,
        max_context_size: u64,
        loop_control: LoopControl,
        toolset: Toolset,
        yolo: bool,
        system_prompt: String,
        slash_commands: Vec<SlashCommandInfo>,
    ) -> Self {
        Self {
            runtime,
            llm,
            max_context_size,
            loop_control,
            toolset: RwLock::new(Arc::new(toolset)),
            approval: Arc::new(ApprovalState::new(yolo)),
            system_prompt,
            slash_commands,
        }
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
        self.runtime.has(cap)
    }

    pub fn model_name(&self) -> String {
        self.llm.as_ref().map(|l| l.model_name().to_string()).unwrap_or_default()
    }
}
