//! The agent core: one turn at a time, steps, tools, approvals, context.
//!
//! The soul knows nothing of JSON-RPC: it reads a `UserInput` and writes `SoulEvent`s into an
//! `EventSink`. Cancellation is by dropping the turn future: every await point is a cancel point,
//! and context changes are synchronous, so a cancelled turn never leaves half a step behind.

pub mod agent;
pub mod approval;
pub mod commands;
pub mod compaction;
pub mod context;
pub mod dmail;
pub mod error;
pub mod event;
pub mod flow_runner;
pub mod retry;
pub mod slash;
pub mod step;
pub mod tool_message;
pub mod turn;

use std::sync::Arc;

pub use agent::Agent;
pub use context::Context;
pub use error::{TurnError, TurnOutcome};
pub use event::{ClientAnswer, EventSink, SoulEvent};

/// One agent with its context. Owned by one turn at a time.
pub struct Soul {
    pub agent: Arc<Agent>,
    pub context: Context,
}

impl Soul {
    pub fn new(agent: Arc<Agent>, context: Context) -> Self {
        let soul = Self { agent, context };
        soul.sync_dmail_checkpoints();
        soul
    }

    /// Takes a checkpoint; with D-Mail the model also sees it as `CHECKPOINT N`.
    pub(crate) fn checkpoint(&mut self) {
        let id = self.context.checkpoint();
        if self.agent.dmail.is_some() {
            self.context.append(crate::llm::Message::user_text(format!("<system>CHECKPOINT {id}</system>")));
        }
        self.sync_dmail_checkpoints();
    }

    pub(crate) fn sync_dmail_checkpoints(&self) {
        if let Some(mailbox) = &self.agent.dmail {
            mailbox.set_checkpoints(self.context.checkpoints());
        }
    }
}
