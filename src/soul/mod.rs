//! The agent core: one turn at a time, steps, tools, approvals, context.
//!
//! The soul knows nothing of JSON-RPC: it reads a `UserInput` and writes events into an
//! `EventSink`, whose projection belongs to the front end. The [`TurnDriver`] owns the turn
//! lifecycle for every front end. Cancellation is by dropping the turn future: every await point
//! is a cancel point, and context changes are synchronous, so a cancelled turn never leaves half
//! a step behind.

pub mod add_dir;
pub mod agent;
pub mod approval;
pub mod client;
pub mod commands;
pub mod compaction;
pub mod context;
pub mod dmail;
pub mod driver;
pub mod error;
pub mod flow_runner;
pub mod hooks;
pub mod host;
pub mod mcp_wait;
pub mod mode_commands;
pub mod plan;
pub mod repeats;
pub mod retry;
pub mod sink;
pub mod slash;
pub mod state;
mod state_writer;
pub mod step;
pub mod subagent;
pub mod tool_message;
pub mod transfer;
pub mod turn;
pub mod turn_shared;
pub mod undo;

use std::sync::Arc;

pub use agent::Agent;
pub use context::Context;
pub use driver::{Busy, BusyClaim, Idle, TurnDriver};
pub use error::{TurnError, TurnOutcome, TurnResult};
pub use sink::{ClientAnswer, EventSink, Projection, TurnTag};

/// One agent with its context. Owned by one turn at a time.
pub struct Soul {
    pub agent: Arc<Agent>,
    pub context: Context,
    /// The running turn's id, inbox and marks; replaced by the driver for every turn.
    pub(crate) turn: Arc<turn_shared::TurnShared>,
    /// When plan mode was last brought to the model's mind (`None`: not yet, or plan mode off).
    pub(crate) plan_reminders: Option<mode_commands::PlanReminders>,
    /// Identical tool calls in a row in the running turn.
    pub(crate) repeats: repeats::RepeatTracker,
    /// Set when this soul runs as a subagent (`None`: the session's main agent).
    pub(crate) subagent: Option<subagent::SubagentRole>,
    /// Where the running turn's `TurnBegin` starts in `wire.jsonl` (`docs/sessions.md` §9).
    pub(crate) turn_start: Option<u64>,
}

impl Soul {
    pub fn new(agent: Arc<Agent>, context: Context) -> Self {
        let soul = Self {
            agent,
            context,
            turn: Arc::new(turn_shared::TurnShared::new()),
            plan_reminders: None,
            repeats: Default::default(),
            subagent: None,
            turn_start: None,
        };
        soul.sync_dmail_checkpoints();
        soul
    }

    /// Who this soul's approvals come from, for its current turn.
    pub(crate) fn approval_origin(&self) -> approval::ApprovalOrigin {
        match &self.subagent {
            None => approval::ApprovalOrigin::main_turn(&self.turn.id),
            Some(role) => approval::ApprovalOrigin {
                source_kind: role.source_kind,
                source_id: role.source_id.clone().unwrap_or_else(|| self.turn.id.clone()),
                agent_id: Some(role.agent_id.clone()),
                subagent_type: Some(role.subagent_type.clone()),
                owner: role.owner.clone(),
            },
        }
    }

    /// Takes a checkpoint; with D-Mail the model also sees it as `CHECKPOINT N`.
    pub(crate) fn checkpoint(&mut self) {
        let id = self.context.checkpoint();
        if self.agent.dmail.is_some() {
            self.context.append(crate::llm::Message::user_text(format!("<system>CHECKPOINT {id}</system>")));
        }
        self.sync_dmail_checkpoints();
    }

    /// The hook runner for points of this soul's turns.
    pub(crate) fn hooks(&self, sink: &EventSink) -> hooks::HookRunner {
        let env = &self.agent.env;
        hooks::HookRunner::new(self.agent.hooks.clone(), sink.clone(), &env.session_id, env.work_dir.clone())
    }

    /// Starts a rotated context file with the `_system_prompt` record (`docs/protocol-1.10.md` §10.3).
    pub(crate) fn record_system_prompt(&mut self) {
        self.context.write_record(&crate::session::context_prompt::record_line(&self.agent.system_prompt));
    }

    pub(crate) fn sync_dmail_checkpoints(&self) {
        if let Some(mailbox) = &self.agent.dmail {
            mailbox.set_checkpoints(self.context.checkpoints());
        }
    }
}
