//! Slash commands in wire mode (`docs/soul.md` §7.2, `docs/protocol-1.10.md` §4.5): init, compact, clear/reset,
//! the mode switches (in `mode_commands`), skills, flows.

use super::Soul;
use super::compaction::Trigger;
use super::context::Context;
use super::error::{TurnError, TurnOutcome};
use super::sink::EventSink;
use crate::blueprint::prompts::{INIT, init_done_note};
use crate::blueprint::skills::skill_command_text;
use crate::llm::Message;
use crate::protocol::{ContentPart, Event, UserInput};

impl Soul {
    /// `/fork` (`docs/sessions.md` §8): forks the session after the turn before this one; the
    /// session goes on as it was.
    async fn fork_command(&mut self, sink: &EventSink) {
        sink.flush_record();
        let env = self.agent.env.clone();
        let forked = tokio::task::spawn_blocking(move || {
            let wire = env.session_dir.join("wire.jsonl");
            // This command's own turn is the last one recorded.
            let turns = crate::session::fork::turn_count(&wire);
            let Some(last_done) = turns.checked_sub(2) else { return Ok(None) };
            crate::session::fork::fork(&env.share_dir, &env.work_dir, &env.session_dir, Some(last_done)).map(Some)
        })
        .await;
        let text = match forked {
            Ok(Ok(Some(forked))) => format!(
                "Forked into session {} ({}). Resume it with `kiwi --session {}`.",
                forked.id, forked.title, forked.id
            ),
            Ok(Ok(None)) => "Nothing to fork yet: the session has no finished turn.".to_string(),
            Ok(Err(e)) => format!("Failed to fork the session: {e}"),
            Err(e) => format!("Failed to fork the session: {e}"),
        };
        say(sink, &text).await;
    }

    pub(super) async fn run_command(
        &mut self,
        name: &str,
        args: &str,
        sink: &EventSink,
    ) -> Result<TurnOutcome, TurnError> {
        match name {
            "init" => return self.run_init(sink).await,
            "compact" => {
                if self.context.checkpoints() == 0 {
                    say(sink, "The context is empty.").await;
                } else {
                    // Arguments are ignored in 1.2 (`docs/soul.md` §7.2).
                    let trigger = if args.is_empty() { Trigger::Manual } else { Trigger::ManualWithPrompt };
                    if let Err(e) = self.compact(sink, args, trigger).await {
                        sink.emit(Event::StepInterrupted {}).await;
                        return Err(e);
                    }
                    say(sink, "The context has been compacted.").await;
                    self.emit_context_usage(sink).await;
                }
            }
            "clear" | "reset" => {
                self.context
                    .clear()
                    .map_err(|e| TurnError::internal("ContextError", format!("Failed to clear the context: {e}")))?;
                self.record_system_prompt();
                self.sync_dmail_checkpoints();
                say(sink, "The context has been cleared.").await;
                self.emit_context_usage(sink).await;
            }
            "yolo" => self.toggle_yolo(sink).await,
            "afk" => self.toggle_afk(sink).await,
            "plan" => self.plan_command(args, sink).await,
            "add-dir" => self.add_dir_command(args, sink).await,
            "export" => self.export_command(args, sink).await,
            "import" => self.import_command(args, sink).await,
            "fork" => self.fork_command(sink).await,
            "undo" => self.undo_command(args, sink).await,
            _ => {
                if let Some(skill_name) = name.strip_prefix("skill:")
                    && let Some(skill) = self.agent.skill(skill_name).cloned()
                {
                    return match skill_command_text(&skill, args) {
                        Ok(text) => {
                            let run = self.agent_run(vec![ContentPart::text(text)], sink).await?;
                            Ok(self.turn_outcome(run))
                        }
                        Err(e) => {
                            tracing::warn!("cannot read {}: {e}", skill.path.display());
                            say(sink, &format!("Failed to load skill \"/{name}\".")).await;
                            Ok(TurnOutcome::Finished(None))
                        }
                    };
                }
                if let Some(flow_name) = name.strip_prefix("flow:")
                    && let Some(flow) = self.agent.skill(flow_name).and_then(|s| s.flow()).cloned()
                {
                    if !args.is_empty() {
                        return Ok(TurnOutcome::Finished(None));
                    }
                    return self.run_flow(&flow, sink).await;
                }
                say(sink, &format!("Unknown slash command \"/{name}\".")).await;
            }
        }
        Ok(TurnOutcome::Finished(None))
    }

    /// `/init`: a nested turn on a throw-away context, then a note with the new `AGENTS.md`.
    async fn run_init(&mut self, sink: &EventSink) -> Result<TurnOutcome, TurnError> {
        let real = std::mem::replace(&mut self.context, Context::in_memory());
        sink.emit(Event::TurnBegin { user_input: UserInput::Text(INIT.trim().to_string()) }).await;
        // The nested run enters like any prompt, so the Ralph loop applies to it (`docs/soul.md` §9).
        let parts = vec![ContentPart::text(INIT.trim())];
        let result = if self.agent.loop_control.max_ralph_iterations != 0 {
            self.run_ralph(parts, sink).await
        } else {
            self.agent_run(parts, sink).await.map(|run| self.turn_outcome(run))
        };
        self.context = real;
        let outcome = result?;
        if !matches!(outcome, TurnOutcome::Finished(_)) {
            return Ok(outcome);
        }
        sink.emit(Event::TurnEnd {}).await;
        let agents_md = std::fs::read_to_string(self.agent.env.work_dir.join("AGENTS.md")).ok();
        self.context.append(Message::user_text(init_done_note(agents_md.as_deref().map(str::trim))));
        Ok(TurnOutcome::Finished(None))
    }
}

pub(super) async fn say(sink: &EventSink, text: &str) {
    sink.emit(Event::ContentPart(ContentPart::text(text))).await;
}
