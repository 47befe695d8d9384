//! One `prompt` = one turn (`soul.md` §1-§3): `TurnBegin`, slash command or agent turn, `TurnEnd`.

use super::Soul;
use super::error::{TurnError, TurnOutcome};
use super::event::EventSink;
use super::slash;
use super::step::StepOutcome;
use super::tool_message::required_capabilities;
use crate::llm::{Capability, Message};
use crate::protocol::{ContentPart, Event, StatusUpdate, UserInput};

impl Soul {
    /// Runs a whole turn. `TurnEnd` is emitted only when it finishes normally.
    pub async fn run_turn(&mut self, input: UserInput, sink: &EventSink) -> Result<TurnOutcome, TurnError> {
        sink.emit(Event::TurnBegin { user_input: input.clone() }).await;
        let text = input.text_input();
        let outcome = match slash::parse(&text) {
            Some(cmd) => self.run_command(cmd.name, cmd.args, sink).await?,
            None => self.agent_turn(input.to_parts(), sink).await?,
        };
        if outcome == TurnOutcome::Finished {
            sink.emit(Event::TurnEnd {}).await;
        }
        Ok(outcome)
    }

    async fn run_command(&mut self, name: &str, args: &str, sink: &EventSink) -> Result<TurnOutcome, TurnError> {
        match name {
            "compact" => {
                if self.context.checkpoints() == 0 {
                    say(sink, "The context is empty.").await;
                } else {
                    if let Err(e) = self.compact_with_focus(sink, args).await {
                        sink.emit(Event::StepInterrupted {}).await;
                        return Err(e);
                    }
                    say(sink, "The context has been compacted.").await;
                    self.emit_context_usage(sink).await;
                }
            }
            "clear" | "reset" => {
                self.context.clear().map_err(|e| TurnError::Internal(format!("Failed to clear the context: {e}")))?;
                say(sink, "The context has been cleared.").await;
                self.emit_context_usage(sink).await;
            }
            "yolo" => {
                let on = !self.agent.approval.yolo();
                self.agent.approval.set_yolo(on);
                say(
                    sink,
                    if on {
                        "You only live once! All actions will be auto-approved."
                    } else {
                        "You only die once! Actions will require approval."
                    },
                )
                .await;
            }
            _ => say(sink, &format!("Unknown slash command \"/{name}\".")).await,
        }
        Ok(TurnOutcome::Finished)
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

    /// A normal agent turn (`soul.md` §2): checks, the user message, then the step loop.
    pub async fn agent_turn(&mut self, parts: Vec<ContentPart>, sink: &EventSink) -> Result<TurnOutcome, TurnError> {
        let Some(llm) = self.agent.llm.clone() else { return Err(TurnError::LlmNotSet) };
        self.check_capabilities(&parts)?;
        self.context.checkpoint();
        self.context.append(Message::user(parts));

        let max_steps = self.agent.loop_control.max_steps_per_turn;
        let mut step_no = 0;
        loop {
            step_no += 1;
            if step_no > max_steps {
                return Ok(TurnOutcome::MaxStepsReached(max_steps));
            }
            sink.emit(Event::StepBegin { n: step_no }).await;
            match self.run_step(&llm, sink).await {
                Ok(StepOutcome::Continue) => {}
                Ok(StepOutcome::Stop) => return Ok(TurnOutcome::Finished),
                Err(e) => {
                    sink.emit(Event::StepInterrupted {}).await;
                    return Err(e);
                }
            }
        }
    }

    pub(super) fn check_capabilities(&self, parts: &[ContentPart]) -> Result<(), TurnError> {
        let missing: Vec<Capability> =
            required_capabilities(parts).into_iter().filter(|c| !self.agent.has(*c)).collect();
        if missing.is_empty() { Ok(()) } else { Err(TurnError::Capability { model: self.agent.model_name(), missing }) }
    }
}

async fn say(sink: &EventSink, text: &str) {
    sink.emit(Event::ContentPart(ContentPart::text(text))).await;
}
