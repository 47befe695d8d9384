//! One `prompt` = one turn (`soul.md` §1-§3): `TurnBegin`, slash command, Ralph loop or agent
//! turn, then `TurnEnd` when it finished normally.

use super::Soul;
use super::error::{TurnError, TurnOutcome};
use super::sink::EventSink;
use super::slash;
use super::step::StepOutcome;
use super::tool_message::required_capabilities;
use crate::llm::{Capability, Message};
use crate::protocol::{ContentPart, Event, StatusUpdate, UserInput};

/// How one agent run (the step loop over one user message) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentRun {
    /// The model stopped calling tools, or a tool call was rejected.
    Done { steps: u32, rejected: bool },
    /// The step limit was hit.
    MaxSteps { steps: u32 },
}

impl AgentRun {
    pub fn steps(self) -> u32 {
        match self {
            AgentRun::Done { steps, .. } | AgentRun::MaxSteps { steps } => steps,
        }
    }
}

impl Soul {
    /// Runs a whole turn. `TurnEnd` is emitted only when it finishes normally.
    pub async fn run_turn(&mut self, input: UserInput, sink: &EventSink) -> Result<TurnOutcome, TurnError> {
        sink.emit(Event::TurnBegin { user_input: input.clone() }).await;
        let text = input.text_input();
        let outcome = match slash::parse(&text) {
            Some(cmd) => self.run_command(cmd.name, cmd.args, sink).await?,
            None if self.agent.loop_control.max_ralph_iterations != 0 => self.run_ralph(input.to_parts(), sink).await?,
            None => {
                let run = self.agent_run(input.to_parts(), sink).await?;
                self.turn_outcome(run)
            }
        };
        if outcome == TurnOutcome::Finished {
            sink.emit(Event::TurnEnd {}).await;
        }
        Ok(outcome)
    }

    pub(super) fn turn_outcome(&self, run: AgentRun) -> TurnOutcome {
        match run {
            AgentRun::Done { .. } => TurnOutcome::Finished,
            AgentRun::MaxSteps { .. } => TurnOutcome::MaxStepsReached(self.agent.loop_control.max_steps_per_turn),
        }
    }

    /// `StatusUpdate` carrying only the context usage (after `/clear` and `/compact`).
    pub(super) async fn emit_context_usage(&self, sink: &EventSink) {
        let usage = if self.agent.max_context_size > 0 {
            self.context.token_count() as f64 / self.agent.max_context_size as f64
        } else {
            0.0
        };
        sink.emit(Event::StatusUpdate(StatusUpdate {
            context_usage: Some(usage),
            token_usage: None,
            message_id: None,
        }))
        .await;
    }

    /// A normal agent run (`soul.md` §2): checks, the user message, then the step loop.
    pub async fn agent_run(&mut self, parts: Vec<ContentPart>, sink: &EventSink) -> Result<AgentRun, TurnError> {
        let Some(llm) = self.agent.llm().cloned() else { return Err(self.agent.llm_not_set()) };
        self.check_capabilities(&parts)?;
        // A D-Mail left over from a cancelled or failed turn must not rewind this one.
        if let Some(mailbox) = &self.agent.dmail {
            mailbox.take();
        }
        self.checkpoint();
        self.context.append(Message::user(parts));

        let max_steps = self.agent.loop_control.max_steps_per_turn;
        let mut step_no = 0;
        loop {
            step_no += 1;
            if step_no > max_steps {
                return Ok(AgentRun::MaxSteps { steps: max_steps });
            }
            sink.emit(Event::StepBegin { n: step_no }).await;
            match self.run_step(&llm, sink).await {
                Ok(StepOutcome::Continue) => {
                    self.take_queued_input()?;
                }
                // Input queued during the step keeps the turn going for one more step.
                Ok(StepOutcome::Stop { rejected }) => {
                    if !self.take_queued_input()? {
                        return Ok(AgentRun::Done { steps: step_no, rejected });
                    }
                }
                Err(e) => {
                    sink.emit(Event::StepInterrupted {}).await;
                    return Err(e);
                }
            }
        }
    }

    /// Moves input queued during the step into the context, in arrival order, each as its own
    /// user message; true when there was any.
    fn take_queued_input(&mut self) -> Result<bool, TurnError> {
        let Some(inbox) = &self.inbox else { return Ok(false) };
        let queued = inbox.take_all();
        for input in &queued {
            let parts = input.to_parts();
            self.check_capabilities(&parts)?;
            self.context.append(Message::user(parts));
        }
        Ok(!queued.is_empty())
    }

    pub(super) fn check_capabilities(&self, parts: &[ContentPart]) -> Result<(), TurnError> {
        let missing: Vec<Capability> =
            required_capabilities(parts).into_iter().filter(|c| !self.agent.has(*c)).collect();
        if missing.is_empty() { Ok(()) } else { Err(TurnError::Capability { model: self.agent.model_name(), missing }) }
    }
}
