//! Flow skills (`/flow:<name>`) and the Ralph loop (`docs/soul.md` §7.5, §9): each node is a sub-turn
//! with its own nested `TurnBegin` / `TurnEnd`.

use super::Soul;
use super::error::{TurnError, TurnOutcome};
use super::sink::EventSink;
use super::turn::AgentRun;
use crate::blueprint::flow::{
    Flow, NodeKind, RALPH_CONTINUE, RALPH_STOP, decision_prompt, decision_retry_prompt, extract_choice,
    ralph_decision_prompt,
};
use crate::llm::Role;
use crate::protocol::{ContentPart, Event, UserInput};

/// A flow may move between nodes this often before it counts as runaway.
const MAX_FLOW_MOVES: u32 = 1000;

/// What a sub-turn left behind for the flow to decide on.
struct SubTurn {
    run: AgentRun,
    /// Text of the last assistant message.
    reply: String,
}

impl Soul {
    async fn sub_turn(&mut self, input: UserInput, sink: &EventSink) -> Result<SubTurn, TurnError> {
        sink.emit(Event::TurnBegin { user_input: input.clone() }).await;
        let run = self.agent_run(input.to_parts(), sink).await?;
        if let AgentRun::Done { .. } = run {
            sink.emit(Event::TurnEnd {}).await;
        }
        let reply = self
            .context
            .history()
            .iter()
            .rev()
            .find(|m| m.role == Role::Assistant)
            .map(|m| m.text())
            .unwrap_or_default();
        Ok(SubTurn { run, reply })
    }

    pub(super) async fn run_flow(&mut self, flow: &Flow, sink: &EventSink) -> Result<TurnOutcome, TurnError> {
        let mut steps = 0;
        let mut moves = 0;
        let mut node = flow.next(&flow.begin().id, None).cloned();
        let mut retry = false;
        while let Some(current) = node {
            if current.kind == NodeKind::End {
                break;
            }
            moves += 1;
            if moves > MAX_FLOW_MOVES {
                return Ok(TurnOutcome::MaxStepsReached(steps));
            }
            let choices = flow.outgoing_labels(&current.id);
            let prompt = match current.kind {
                NodeKind::Decision if retry => decision_retry_prompt(&current.label, &choices),
                NodeKind::Decision => decision_prompt(&current.label, &choices),
                _ => current.label.clone(),
            };
            let sub = self.sub_turn(UserInput::Text(prompt), sink).await?;
            steps += sub.run.steps();
            match sub.run {
                AgentRun::MaxSteps { .. } => return Ok(TurnOutcome::MaxStepsReached(steps)),
                budget @ (AgentRun::TokenBudget { .. } | AgentRun::CostBudget { .. }) => {
                    return Ok(self.turn_outcome(budget));
                }
                AgentRun::Done { rejected: true, .. } => return Ok(TurnOutcome::Finished(None)),
                AgentRun::Done { .. } => {}
            }
            if current.kind == NodeKind::Decision {
                let choice = extract_choice(&sub.reply);
                match flow.next(&current.id, choice.as_deref()) {
                    Some(next) => {
                        retry = false;
                        node = Some(next.clone());
                    }
                    None => {
                        retry = true;
                        node = Some(current);
                    }
                }
            } else {
                node = flow.next(&current.id, None).cloned();
            }
        }
        Ok(TurnOutcome::Finished(None))
    }

    /// The Ralph loop: the prompt once as given, then again and again until the model says STOP.
    pub(super) async fn run_ralph(
        &mut self,
        parts: Vec<ContentPart>,
        sink: &EventSink,
    ) -> Result<TurnOutcome, TurnError> {
        let limit = self.agent.loop_control.max_ralph_iterations;
        let cap = if limit < 0 { u64::MAX } else { limit as u64 + 1 };
        let text: String = parts.iter().filter_map(ContentPart::as_text).collect::<Vec<_>>().join(" ");
        let mut steps = 0;
        let mut executions: u64 = 1;
        let first = self.sub_turn(UserInput::Parts(parts), sink).await?;
        steps += first.run.steps();
        match first.run {
            AgentRun::MaxSteps { .. } => return Ok(TurnOutcome::MaxStepsReached(steps)),
            budget @ (AgentRun::TokenBudget { .. } | AgentRun::CostBudget { .. }) => {
                return Ok(self.turn_outcome(budget));
            }
            AgentRun::Done { rejected: true, .. } => return Ok(TurnOutcome::Finished(None)),
            AgentRun::Done { .. } => {}
        }
        let choices = [RALPH_CONTINUE.to_string(), RALPH_STOP.to_string()];
        let mut retry = false;
        loop {
            if executions >= cap {
                return Ok(TurnOutcome::MaxStepsReached(steps));
            }
            executions += 1;
            let prompt = if retry {
                decision_retry_prompt(&crate::blueprint::flow::ralph_prompt(&text), &choices)
            } else {
                ralph_decision_prompt(&text)
            };
            let sub = self.sub_turn(UserInput::Text(prompt), sink).await?;
            steps += sub.run.steps();
            match sub.run {
                AgentRun::MaxSteps { .. } => return Ok(TurnOutcome::MaxStepsReached(steps)),
                budget @ (AgentRun::TokenBudget { .. } | AgentRun::CostBudget { .. }) => {
                    return Ok(self.turn_outcome(budget));
                }
                AgentRun::Done { rejected: true, .. } => return Ok(TurnOutcome::Finished(None)),
                AgentRun::Done { .. } => {}
            }
            match extract_choice(&sub.reply).as_deref() {
                Some(c) if c == RALPH_STOP => return Ok(TurnOutcome::Finished(None)),
                Some(c) if c == RALPH_CONTINUE => retry = false,
                _ => retry = true,
            }
        }
    }
}
