//! The codex projection: soul events become JSONL lines through [`super::items`], approvals are
//! decided without asking (codex exec never asks, spec codex-exec.md §10), and the turn's
//! outcome becomes `turn.completed` or `error` + `turn.failed`.
//!
//! Invariants: lines are written in event order, one JSON object per line; a turn ended by a
//! signal writes nothing more (codex dies of the signal); a failed turn's message is kiwi's own
//! text, the same on both its lines; the usage reported is the thread's running total.

use std::sync::Mutex;

use futures::future::BoxFuture;
use tokio::sync::oneshot;

use super::approvals::Rule;
use super::events::{ErrorText, ThreadEvent, Usage};
use super::items::{Lookup, TurnItems};
use crate::print::common::{TurnReport, report_turn};
use crate::print::kimi::projection::failure;
use crate::protocol::{Event, Request, ToolReturnValue};
use crate::rpc::Outbound;
use crate::rpc::writer::encode;
use crate::soul::{ClientAnswer, Projection, TurnOutcome, TurnResult, TurnTag};

pub struct CodexProjection {
    out: Outbound,
    lookup: Lookup,
    rule: Rule,
    items: Mutex<TurnItems>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl CodexProjection {
    pub fn new(out: Outbound, lookup: Lookup, rule: Rule, usage: Usage) -> Self {
        Self { out, lookup, rule, items: Mutex::new(TurnItems::new(usage)) }
    }

    /// The text of the turn's latest `agent_message`.
    pub fn last_message(&self) -> Option<String> {
        lock(&self.items).last_message.clone()
    }

    /// Start-up warnings as `error` items, numbered before the turn's items.
    pub fn notices(&self, messages: Vec<String>) -> Vec<ThreadEvent> {
        let mut items = lock(&self.items);
        messages.into_iter().map(|message| items.notice(message)).collect()
    }

    pub async fn write(&self, lines: Vec<ThreadEvent>) {
        for line in lines {
            if let Some(frame) = encode(&line) {
                self.out.send_raw(frame).await;
            }
        }
    }
}

/// The turn's outcome as the dialect's last lines and exit status.
pub fn ending(result: &TurnResult, usage: Usage) -> (Vec<ThreadEvent>, TurnReport) {
    match result {
        Ok(TurnOutcome::Finished(_)) => {
            (vec![ThreadEvent::TurnCompleted { usage }], TurnReport { failed: false, exit_code: 0 })
        }
        // Only a signal cancels a turn here: the process ends without another line.
        Ok(TurnOutcome::Cancelled) => (Vec::new(), TurnReport { failed: true, exit_code: 1 }),
        _ => {
            let message = failure(result).map(|(m, _)| m).unwrap_or_else(|| "the turn failed".into());
            let lines = vec![
                ThreadEvent::Error { message: message.clone() },
                ThreadEvent::TurnFailed { error: ErrorText { message } },
            ];
            (lines, TurnReport { failed: true, exit_code: 1 })
        }
    }
}

impl Projection for CodexProjection {
    fn event<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let lines = lock(&self.items).push(event, &self.lookup);
            self.write(lines).await;
        })
    }

    // The receiver is the answer; the future is only the asking.
    #[allow(clippy::async_yields_async)]
    fn request(&self, request: Request) -> BoxFuture<'_, oneshot::Receiver<ClientAnswer>> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            let answer_now = match request {
                // Decided at once by codex's rule, never asked.
                Request::ApprovalRequest(ask) => self.rule.answer(&ask),
                Request::ToolCallRequest(call) => ClientAnswer::ToolResult(ToolReturnValue::error(
                    format!("The tool `{}` belongs to a client, and codex exec has none.", call.name),
                    "No client",
                )),
                // Nobody to ask or to run a client hook: a closed channel is "client gone".
                Request::QuestionRequest(_) | Request::HookRequest(_) => return oneshot::channel().1,
            };
            let _ = reply.send(answer_now);
            answer
        })
    }

    fn turn_ended(&self, tag: TurnTag, result: TurnResult) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let (mut lines, usage) = {
                let mut items = lock(&self.items);
                (items.finish(), items.usage)
            };
            let (last, report) = ending(&result, usage);
            if matches!(result, Ok(TurnOutcome::Cancelled)) {
                lines.clear();
            }
            lines.extend(last);
            self.write(lines).await;
            report_turn(tag, report);
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ChatError;
    use crate::soul::TurnError;

    #[test]
    fn endings() {
        let usage = Usage { input_tokens: 3, ..Default::default() };
        let (lines, report) = ending(&Ok(TurnOutcome::Finished(None)), usage);
        assert_eq!(lines, vec![ThreadEvent::TurnCompleted { usage }]);
        assert_eq!(report.exit_code, 0);
        let (lines, report) = ending(&Ok(TurnOutcome::Cancelled), usage);
        assert!(lines.is_empty());
        assert_eq!(report.exit_code, 1);
        let failed = Err(TurnError::Provider(ChatError::Invalid("bad".into())));
        let (lines, report) = ending(&failed, usage);
        let text = serde_json::to_string(&lines).unwrap();
        assert!(text.contains(r#""type":"error""#) && text.contains(r#""type":"turn.failed""#), "{text}");
        assert_eq!(report.exit_code, 1);
        let (lines, _) = ending(&Ok(TurnOutcome::MaxStepsReached(2)), usage);
        assert_eq!(
            lines[1],
            ThreadEvent::TurnFailed { error: ErrorText { message: "Max number of steps reached: 2".into() } }
        );
    }
}
