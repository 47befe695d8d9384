//! One `prompt` = one turn (`docs/soul.md` §1-§3, `docs/protocol-1.10.md` §2.4, §4.4): `TurnBegin`, slash
//! command, Ralph loop or agent turn, then `TurnEnd` whatever happened (the driver owes it when
//! the turn's future was dropped).
//!
//! Steered input is taken after each step, once all of the step's results are out: each input
//! becomes its own user message, then a `SteerInput` with the input exactly as received; a step
//! that would have ended the turn runs one more step when it took any.

use super::Soul;
use super::error::{TurnError, TurnOutcome};
use super::sink::EventSink;
use super::slash;
use super::step::StepOutcome;
use super::tool_message::required_capabilities;
use crate::llm::{Capability, Message, ModelStop};
use serde_json::Value;

use super::hooks;
use crate::protocol::{ContentPart, Event, HookEvent, StatusUpdate, UserInput};
use crate::soul::error::TurnResult;

/// How one agent run (the step loop over one user message) ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AgentRun {
    /// The model stopped calling tools, or a tool call was rejected. `stop`: why the model's
    /// last answer ended early, if it did.
    Done { steps: u32, rejected: bool, stop: Option<ModelStop> },
    /// The step limit was hit.
    MaxSteps { steps: u32 },
    /// The session's token budget was used up before the next step (`docs/soul.md` §3).
    TokenBudget { steps: u32, used: u64, limit: u64 },
    /// The session's dollar budget was used up before the next step: `spent` of `limit` US
    /// dollars.
    CostBudget { steps: u32, spent: f64, limit: f64 },
}

impl AgentRun {
    pub fn steps(self) -> u32 {
        match self {
            AgentRun::Done { steps, .. }
            | AgentRun::MaxSteps { steps }
            | AgentRun::TokenBudget { steps, .. }
            | AgentRun::CostBudget { steps, .. } => steps,
        }
    }
}

impl Soul {
    /// Runs a whole turn: the `UserPromptSubmit` hooks, `TurnBegin`, the work, `TurnEnd` (also
    /// after an error or max steps). A blocked prompt gets the block's reason as the answer and
    /// never reaches the context (`docs/protocol-1.10.md` §4.4, §5.1).
    pub async fn run_turn(&mut self, input: UserInput, sink: &EventSink) -> TurnResult {
        // Ready before the model can ask for one (an idle session never prepares them).
        self.agent.subagents.preload();
        let prompt = match &input {
            UserInput::Text(t) => t.clone(),
            UserInput::Parts(_) => String::new(),
        };
        let submitted = self
            .hooks(sink)
            .run(HookEvent::UserPromptSubmit, &prompt, hooks::input([("prompt", Value::from(prompt.clone()))]))
            .await;
        // Where a fork after the previous turn cuts the context (`docs/sessions.md` §8).
        if let Some(mark) = self.context.position() {
            sink.mark_next_turn(mark);
        }
        sink.emit(Event::TurnBegin { user_input: input.clone() }).await;
        self.turn.mark_begun();
        self.agent.state.begin_turn_cost();
        self.begin_undo_record(sink);
        let result = if submitted.blocked {
            let reason = if submitted.reason.is_empty() { "Prompt blocked by hook.".into() } else { submitted.reason };
            sink.emit(Event::ContentPart(ContentPart::text(reason))).await;
            Ok(TurnOutcome::Finished(None))
        } else {
            self.turn_body(input, sink).await
        };
        // What the turn changed in state.json (its todo list) is on disk before the turn ends.
        self.agent.state.flush();
        self.end_undo_record();
        sink.emit(Event::TurnEnd {}).await;
        self.turn.mark_ended();
        result
    }

    async fn turn_body(&mut self, input: UserInput, sink: &EventSink) -> TurnResult {
        let text = input.text_input();
        let outcome = match slash::parse(&text) {
            Some(cmd) => self.run_command(cmd.name, cmd.args, sink).await?,
            None if self.agent.loop_control.max_ralph_iterations != 0 => self.run_ralph(input.to_parts(), sink).await?,
            None => {
                let run = self.agent_run_with_stop_hooks(input.to_parts(), sink).await?;
                self.turn_outcome(run)
            }
        };
        if matches!(outcome, TurnOutcome::Finished(_)) && slash::parse(&text).is_none() {
            self.agent.state.title_from_first_prompt(&text);
        }
        Ok(outcome)
    }

    /// An agent run, then the `Stop` hooks: a block with a reason runs the agent once more, with
    /// the reason as the user's word (once per prompt).
    pub(crate) async fn agent_run_with_stop_hooks(
        &mut self,
        parts: Vec<ContentPart>,
        sink: &EventSink,
    ) -> Result<AgentRun, TurnError> {
        let mut run = self.agent_run(parts, sink).await?;
        if let AgentRun::Done { .. } = run
            && let Some(reason) = self.stop_hooks(sink).await
        {
            run = self.agent_run(vec![ContentPart::text(reason)], sink).await?;
        }
        Ok(run)
    }

    pub(super) fn turn_outcome(&self, run: AgentRun) -> TurnOutcome {
        match run {
            AgentRun::Done { stop, .. } => TurnOutcome::Finished(stop),
            AgentRun::MaxSteps { .. } => TurnOutcome::MaxStepsReached(self.agent.loop_control.max_steps_per_turn),
            AgentRun::TokenBudget { used, limit, .. } => TurnOutcome::TokenBudgetReached { used, limit },
            AgentRun::CostBudget { spent, limit, .. } => TurnOutcome::CostBudgetReached { spent, limit },
        }
    }

    /// `StatusUpdate` carrying only the context's fill (after `/clear` and `/compact`); all zero
    /// without a model.
    pub(super) async fn emit_context_usage(&self, sink: &EventSink) {
        let (tokens, max) = match self.agent.llm() {
            Some(_) => (self.context.token_count(), self.agent.max_context_size()),
            None => (0, 0),
        };
        sink.emit(Event::StatusUpdate(StatusUpdate::context(tokens, max))).await;
    }

    /// A normal agent run (`docs/soul.md` §2): checks, the user message, then the step loop.
    pub async fn agent_run(&mut self, parts: Vec<ContentPart>, sink: &EventSink) -> Result<AgentRun, TurnError> {
        let Some(llm) = self.agent.llm() else { return Err(self.agent.llm_not_set()) };
        self.check_capabilities(&parts)?;
        self.wait_for_mcp(sink).await?;
        // A D-Mail left over from a cancelled or failed turn must not rewind this one.
        if let Some(mailbox) = &self.agent.dmail {
            mailbox.take();
        }
        self.checkpoint();
        self.context.append(Message::user(parts));
        self.turn.inbox.open();
        self.repeats = Default::default();

        let max_steps = self.agent.loop_control.max_steps_per_turn;
        let mut step_no = 0;
        loop {
            step_no += 1;
            if step_no > max_steps {
                return Ok(AgentRun::MaxSteps { steps: max_steps });
            }
            // The session's token budget is checked before every model call: a turn ends
            // cleanly between steps, never in the middle of one.
            if let Some(limit) = self.agent.loop_control.max_session_tokens {
                let used = self.agent.state.tokens_used();
                if used >= limit {
                    tracing::info!("session token budget used up: {used} of {limit} tokens");
                    return Ok(AgentRun::TokenBudget { steps: step_no - 1, used, limit });
                }
            }
            // The dollar budget, the same way; it needs prices, and without them the turn
            // refuses to run rather than spend what nobody can count.
            if let Some(limit) = self.agent.loop_control.max_budget_usd {
                let spent = self.cost_for_budget(limit)?;
                if spent >= limit {
                    tracing::info!("session dollar budget used up: {spent} of {limit} US dollars");
                    return Ok(AgentRun::CostBudget { steps: step_no - 1, spent, limit });
                }
            }
            if self.subagent.is_none() {
                self.deliver_notifications(sink).await;
            }
            sink.emit(Event::StepBegin { n: step_no }).await;
            match self.run_step(&llm, step_no, sink).await {
                Ok(StepOutcome::Continue) => {
                    let queued = self.turn.inbox.take_all();
                    self.take_steers(queued, sink).await?;
                }
                // Input steered during the step keeps the turn going for one more step.
                Ok(StepOutcome::Stop { rejected, model_stop }) => {
                    let queued = self.turn.inbox.take_all_or_close();
                    if !self.take_steers(queued, sink).await? {
                        return Ok(AgentRun::Done { steps: step_no, rejected, stop: model_stop });
                    }
                }
                Err(e) => {
                    sink.emit(Event::StepInterrupted {}).await;
                    let kind = e.kind_name();
                    let extra = hooks::input([
                        ("error_type", Value::from(kind)),
                        ("error_message", Value::from(e.to_string())),
                    ]);
                    self.hooks(sink).fire(HookEvent::StopFailure, kind, extra).await;
                    return Err(e);
                }
            }
        }
    }

    /// Background tasks that ended since the last step: each one's `Notification` to the
    /// client, its message to the model, and the `Notification` hook (`docs/protocol-1.10.md` §9.3).
    async fn deliver_notifications(&mut self, sink: &EventSink) {
        for notice in self.agent.background.take_notices() {
            self.context.append(Message::user_text(notice.model_text));
            let n = &notice.notification;
            let extra = hooks::input([
                ("sink", Value::from("llm")),
                ("notification_type", Value::from(n.kind.clone())),
                ("title", Value::from(n.title.clone())),
                ("body", Value::from(n.body.clone())),
                ("severity", Value::from(n.severity.clone())),
            ]);
            let kind = n.kind.clone();
            sink.emit(Event::Notification(notice.notification)).await;
            self.hooks(sink).fire(HookEvent::Notification, &kind, extra).await;
        }
    }

    /// Moves steered input into the context, in arrival order, each as its own user message
    /// followed by its `SteerInput`; true when there was any.
    async fn take_steers(&mut self, queued: Vec<UserInput>, sink: &EventSink) -> Result<bool, TurnError> {
        let any = !queued.is_empty();
        for input in queued {
            let parts = input.to_parts();
            self.check_capabilities(&parts)?;
            self.context.append(Message::user(parts));
            sink.emit(Event::SteerInput { user_input: input }).await;
        }
        Ok(any)
    }

    /// The `Stop` hooks of a turn that completed; the reason to go on with, when one blocked
    /// with a reason.
    async fn stop_hooks(&self, sink: &EventSink) -> Option<String> {
        let extra = hooks::input([("stop_hook_active", Value::Bool(false))]);
        self.hooks(sink).run(HookEvent::Stop, "", extra).await.first_given_reason
    }

    /// The session's cost to hold against a dollar budget of `limit`; an error when it cannot be
    /// known (the model has no price, or an earlier call had none).
    fn cost_for_budget(&self, limit: f64) -> Result<f64, TurnError> {
        let why = if self.agent.prices().is_none() {
            format!("model '{}' has no prices in the config (usd_per_mtok)", self.agent.model_name())
        } else {
            match self.agent.state.cost_usd() {
                Some(spent) => return Ok(spent),
                None => "an earlier model call of this session had no price".to_string(),
            }
        };
        let message = format!("Cannot keep the dollar budget ({}): {why}", crate::config::prices::dollars(limit));
        tracing::warn!("{message}");
        Err(TurnError::internal("BudgetError", message))
    }

    pub(super) fn check_capabilities(&self, parts: &[ContentPart]) -> Result<(), TurnError> {
        let missing: Vec<Capability> =
            required_capabilities(parts).into_iter().filter(|c| !self.agent.has(*c)).collect();
        if missing.is_empty() { Ok(()) } else { Err(TurnError::Capability { model: self.agent.model_name(), missing }) }
    }
}
