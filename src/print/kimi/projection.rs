//! kimi's `--print` projection (`docs/print-mode.md` A.3-A.6): per step, the assistant `Message` and
//! one `tool` message per answered call (stream-json), or only the last step's text
//! (`--final-message-only`, and the stdout part of text output); progress on stderr.
//!
//! Invariants: fragments are merged by the step assembler (`protocol::assembly`), once for both
//! the step's messages and the progress lines; a step's messages are written once, when the step
//! ends (next `StepBegin`, `StepInterrupted`, `TurnEnd` or the turn's end), never token by token;
//! calls without a result are left out; a turn's final text is printed only when the turn
//! finished normally; every approval is granted (print implies yolo); a failed turn ends with one
//! `error:` line on stderr (naming the model, its provider type and URL for a provider error);
//! the exit status of a provider error follows the core's retry rule. Progress lines read as text
//! (`super::progress`); the last step's text is not repeated there when stdout prints it.

use std::collections::HashMap;
use std::sync::Mutex;

use futures::future::BoxFuture;
use tokio::sync::oneshot;

use super::options::{Format, KimiOptions};
use super::progress;
use crate::llm::{ChatError, Message, Role};
use crate::print::common::{TurnReport, report_turn, stderr_line};
use crate::protocol::{
    ApprovalDecision, ContentPart, Event, Fed, Request, Run, RunAssembler, StepMessage, ToolCall, ToolReturnValue,
};
use crate::rpc::Outbound;
use crate::rpc::writer::encode;
use crate::soul::tool_message::tool_message;
use crate::soul::{ClientAnswer, Projection, TurnError, TurnOutcome, TurnResult, TurnTag};

/// Exit status for a provider error worth retrying later (EX_TEMPFAIL, A.6).
pub const EXIT_RETRYABLE: u8 = 75;

/// What one step produced.
#[derive(Debug, Default)]
struct Step {
    message: StepMessage,
    results: HashMap<String, ToolReturnValue>,
    /// Written already (its messages must not be written twice).
    written: bool,
}

impl Step {
    /// The assistant message and tool messages of the step, as A.4 prints them.
    fn messages(&self) -> Vec<Message> {
        let answered: Vec<ToolCall> =
            self.message.calls.iter().filter(|c| self.results.contains_key(&c.id)).cloned().collect();
        if self.message.content.is_empty() && answered.is_empty() {
            return Vec::new();
        }
        let mut assistant = Message::new(Role::Assistant, self.message.content.clone());
        if !answered.is_empty() {
            assistant.tool_calls = Some(answered.clone());
        }
        let mut out = vec![assistant];
        out.extend(answered.iter().filter_map(|c| self.results.get(&c.id).map(|r| tool_message(&c.id, r))));
        out
    }

    fn text(&self) -> String {
        self.message.content.iter().filter_map(ContentPart::as_text).collect()
    }
}

/// `--stream-deltas` (A.4): a piece of text or thinking as it arrives,
/// `{"type":"delta","part":{"type":"text","text":"…"}}`; other parts only come whole.
fn delta_line(part: &ContentPart) -> Option<Vec<u8>> {
    match part {
        ContentPart::Text { .. } | ContentPart::Think { .. } => {
            encode(&serde_json::json!({"type": "delta", "part": part}))
        }
        _ => None,
    }
}

#[derive(Debug, Default)]
struct State {
    runs: RunAssembler,
    step: Step,
    /// The model's latest text, held back until something follows it: when nothing does and
    /// the turn finishes, it is the answer stdout prints, and is not said twice.
    held: Option<String>,
}

impl State {
    /// Feeds one event: a run it closes goes to the step (after its progress line, when
    /// `progress` collects them); a non-fragment event gets its own line after that.
    fn push(&mut self, event: &Event, progress: Option<&mut Vec<String>>) {
        let (closed, other) = match self.runs.push(event) {
            Fed::Continued => (None, false),
            Fed::Opened(closed) => (closed, false),
            Fed::Other(closed) => (closed, true),
        };
        self.close(closed, progress, other.then_some(event));
    }

    /// Closes the open run (the step or the turn ends).
    fn flush(&mut self, progress: Option<&mut Vec<String>>) {
        let closed = self.runs.close();
        self.close(closed, progress, None);
    }

    fn close(&mut self, closed: Option<Run>, mut progress: Option<&mut Vec<String>>, event: Option<&Event>) {
        if let Some(run) = closed {
            if let Some(lines) = progress.as_deref_mut() {
                let text = matches!(run, Run::Content(ContentPart::Text { .. }));
                self.say(lines, progress::run(&run), text);
            }
            self.step.message.add(run);
        }
        if let (Some(lines), Some(event)) = (progress, event) {
            self.say(lines, progress::event(event), false);
        }
    }

    /// Adds a progress line after the held text; a text line is held itself.
    fn say(&mut self, lines: &mut Vec<String>, line: Option<String>, hold: bool) {
        let Some(line) = line else { return };
        lines.extend(self.held.take());
        if hold {
            self.held = Some(line);
        } else {
            lines.push(line);
        }
    }
}

pub struct KimiProjection {
    out: Outbound,
    options: KimiOptions,
    /// `model NAME (TYPE at URL)`, for the error line of a provider error.
    model: String,
    state: Mutex<State>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl KimiProjection {
    pub fn new(out: Outbound, options: KimiOptions, model: String) -> Self {
        Self { out, options, model, state: Mutex::default() }
    }

    fn step_lines(&self, step: &mut Step) -> Vec<Vec<u8>> {
        if step.written || self.options.final_only || self.options.output != Format::StreamJson {
            return Vec::new();
        }
        step.written = true;
        step.messages().iter().filter_map(encode).collect()
    }

    async fn send(&self, frames: Vec<Vec<u8>>) {
        for frame in frames {
            self.out.send_raw(frame).await;
        }
    }
}

/// The A.6 line for a failed turn and its exit status (0/1/75, the later upstream's choice).
pub fn failure(result: &TurnResult) -> Option<(String, u8)> {
    match result {
        Ok(TurnOutcome::Finished(_)) => None,
        Ok(TurnOutcome::MaxStepsReached(n)) => Some((format!("Max number of steps reached: {n}"), 1)),
        Ok(TurnOutcome::Cancelled) => Some(("Interrupted by user".into(), 1)),
        Ok(TurnOutcome::TokenBudgetReached { used, limit }) => {
            Some((format!("Session token budget reached: {used} of {limit} tokens"), 1))
        }
        Ok(TurnOutcome::CostBudgetReached { spent, limit }) => {
            let (spent, limit) = (crate::config::prices::dollars(*spent), crate::config::prices::dollars(*limit));
            Some((format!("Session budget reached: {spent} of {limit}"), 1))
        }
        Err(TurnError::LlmNotSet { reason: None }) => Some(("LLM not set".into(), 1)),
        Err(TurnError::LlmNotSet { reason: Some(why) }) => Some((format!("LLM not set: {why}"), 1)),
        Err(e @ TurnError::Capability { .. }) => Some((e.to_string(), 1)),
        // Worth retrying later exactly when the core would have retried it (its one rule).
        Err(TurnError::Provider(e)) => Some((e.to_string(), if e.is_retryable() { EXIT_RETRYABLE } else { 1 })),
        Err(e @ TurnError::Internal { .. }) => Some((format!("Unknown error: {e}"), 1)),
    }
}

/// The one `error:` line a failed turn ends with: what failed, and for a provider error the
/// model, its provider type and URL (`model`) and the HTTP status when there is one.
pub fn error_line(result: &TurnResult, what: &str, model: &str) -> String {
    match result {
        Err(TurnError::Provider(ChatError::Status { status, message, .. }))
            if !message.starts_with(&format!("Error code: {status}")) =>
        {
            format!("error: {model}: HTTP {status}: {what}")
        }
        Err(TurnError::Provider(_)) => format!("error: {model}: {what}"),
        _ => format!("error: {what}"),
    }
}

impl Projection for KimiProjection {
    fn event<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let (frames, progress) = {
                let mut state = lock(&self.state);
                let mut progress = Vec::new();
                state.push(event, self.options.progress().then_some(&mut progress));
                let frames = match event {
                    Event::StepBegin { .. } | Event::StepInterrupted {} => {
                        let mut step = std::mem::take(&mut state.step);
                        self.step_lines(&mut step)
                    }
                    Event::TurnEnd {} => {
                        let mut step = std::mem::take(&mut state.step);
                        let frames = self.step_lines(&mut step);
                        // The last step's text is still needed for the final message.
                        state.step = step;
                        frames
                    }
                    Event::ToolResult(result) => {
                        state.step.results.insert(result.tool_call_id.clone(), result.return_value.clone());
                        Vec::new()
                    }
                    Event::ContentPart(part) if self.options.deltas => delta_line(part).into_iter().collect(),
                    _ => Vec::new(),
                };
                (frames, progress)
            };
            for line in progress {
                stderr_line(&line);
            }
            self.send(frames).await;
        })
    }

    // The receiver is the answer; the future is only the asking.
    #[allow(clippy::async_yields_async)]
    fn request(&self, request: Request) -> BoxFuture<'_, oneshot::Receiver<ClientAnswer>> {
        Box::pin(async move {
            let (reply, answer) = oneshot::channel();
            let answer_now = match request {
                // `--print` approves everything, also after `/yolo` turned the core's flag off.
                Request::ApprovalRequest(_) => {
                    ClientAnswer::Approval { decision: ApprovalDecision::Approve, feedback: String::new() }
                }
                Request::ToolCallRequest(call) => ClientAnswer::ToolResult(ToolReturnValue::error(
                    format!("The tool `{}` belongs to a client, and print mode has none.", call.name),
                    "No client",
                )),
                // No one to ask a question or run a client hook: a closed answer channel is
                // "client gone" (questions dismissed, hooks fail open).
                Request::QuestionRequest(_) | Request::HookRequest(_) => return answer_closed(),
            };
            let _ = reply.send(answer_now);
            answer
        })
    }

    fn turn_ended(&self, tag: TurnTag, result: TurnResult) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let (frames, progress, text) = {
                let mut state = lock(&self.state);
                let mut progress = Vec::new();
                state.flush(self.options.progress().then_some(&mut progress));
                let mut step = std::mem::take(&mut state.step);
                let frames = self.step_lines(&mut step);
                let text = if matches!(result, Ok(TurnOutcome::Finished(_))) { step.text() } else { String::new() };
                // The held text is the answer stdout is about to print; anything else is said.
                let held = state.held.take();
                if text.is_empty() && self.options.progress() {
                    progress.extend(held);
                }
                (frames, progress, text)
            };
            for line in progress {
                stderr_line(&line);
            }
            self.send(frames).await;
            if !text.is_empty() && (self.options.final_only || self.options.output == Format::Text) {
                let frame = match self.options.output {
                    Format::StreamJson => encode(&Message::new(Role::Assistant, vec![ContentPart::text(text)])),
                    Format::Text => Some(format!("{text}\n").into_bytes()),
                };
                self.send(frame.into_iter().collect()).await;
            }
            let failed = failure(&result);
            if let Some((what, _)) = &failed {
                stderr_line(&error_line(&result, what, &self.model));
            }
            let report = match failed {
                Some((_, code)) => TurnReport { failed: true, exit_code: code },
                None => TurnReport { failed: false, exit_code: 0 },
            };
            report_turn(tag, report);
        })
    }
}

/// An answer channel whose sender is already gone.
fn answer_closed() -> oneshot::Receiver<ClientAnswer> {
    oneshot::channel().1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ChatError;
    use crate::protocol::{ToolCallPart, ToolResult};

    fn step_of(events: &[Event]) -> Step {
        let mut state = State::default();
        for e in events {
            state.push(e, None);
            if let Event::ToolResult(r) = e {
                state.step.results.insert(r.tool_call_id.clone(), r.return_value.clone());
            }
        }
        state.flush(None);
        state.step
    }

    #[test]
    fn a_step_prints_as_the_spec_example() {
        let step = step_of(&[
            Event::ContentPart(ContentPart::text("Let me ")),
            Event::ContentPart(ContentPart::text("check.")),
            Event::ToolCall(ToolCall::new("tool_1", "Shell", Some("{\"command\":".into()))),
            Event::ToolCallPart(ToolCallPart { arguments_part: Some("\"ls\"}".into()) }),
            Event::ToolCall(ToolCall::new("tool_2", "Shell", None)),
            Event::ToolResult(ToolResult {
                tool_call_id: "tool_1".into(),
                return_value: ToolReturnValue::ok("a.py\nb.py\n", "Command executed successfully."),
            }),
        ]);
        let lines: Vec<String> = step.messages().iter().map(|m| serde_json::to_string(m).unwrap()).collect();
        assert_eq!(
            lines,
            [
                r#"{"role":"assistant","content":"Let me check.","tool_calls":[{"type":"function","id":"tool_1","function":{"name":"Shell","arguments":"{\"command\":\"ls\"}"}}]}"#,
                r#"{"role":"tool","content":[{"type":"text","text":"<system>Command executed successfully.</system>"},{"type":"text","text":"a.py\nb.py\n"}],"tool_call_id":"tool_1"}"#,
            ]
        );
        let think =
            step_of(&[Event::ContentPart(ContentPart::think("hm")), Event::ContentPart(ContentPart::text("ok"))]);
        assert_eq!(
            serde_json::to_string(&think.messages()[0]).unwrap(),
            r#"{"role":"assistant","content":[{"type":"think","think":"hm","encrypted":null},{"type":"text","text":"ok"}]}"#
        );
        assert!(Step::default().messages().is_empty());
    }

    #[test]
    fn progress_merges_fragments_and_holds_the_last_text() {
        let mut state = State::default();
        let mut out = Vec::new();
        for e in [
            Event::StepBegin { n: 1 },
            Event::ContentPart(ContentPart::text("a")),
            Event::ContentPart(ContentPart::text("b")),
            Event::ToolCall(ToolCall::new("t", "Shell", None)),
            Event::ToolCallPart(ToolCallPart { arguments_part: Some(r#"{"command":"ls"}"#.into()) }),
            Event::StepBegin { n: 2 },
            Event::ContentPart(ContentPart::text("done")),
            Event::TurnEnd {},
        ] {
            state.push(&e, Some(&mut out));
        }
        state.flush(Some(&mut out));
        assert_eq!(out, ["ab", r#"→ Shell(command="ls")"#]);
        assert_eq!(state.held.as_deref(), Some("done"), "the answer waits for the turn's end");
    }

    #[test]
    fn the_error_line_names_the_model_for_provider_errors() {
        let model = "model m (kimi at http://127.0.0.1:9/v1)";
        let status = |message: &str| {
            Err(TurnError::Provider(ChatError::Status { status: 401, message: message.into(), retry_after: None }))
        };
        assert_eq!(
            error_line(&status("bad key"), "bad key", model),
            "error: model m (kimi at http://127.0.0.1:9/v1): HTTP 401: bad key"
        );
        assert_eq!(
            error_line(&status("Error code: 401 - {}"), "Error code: 401 - {}", model),
            "error: model m (kimi at http://127.0.0.1:9/v1): Error code: 401 - {}"
        );
        let steps = Ok(TurnOutcome::MaxStepsReached(1));
        assert_eq!(
            error_line(&steps, "Max number of steps reached: 1", model),
            "error: Max number of steps reached: 1"
        );
    }

    #[test]
    fn failures_and_exit_codes() {
        assert_eq!(failure(&Ok(TurnOutcome::Finished(None))), None);
        assert_eq!(failure(&Ok(TurnOutcome::MaxStepsReached(2))), Some(("Max number of steps reached: 2".into(), 1)));
        assert_eq!(failure(&Err(TurnError::LlmNotSet { reason: None })), Some(("LLM not set".into(), 1)));
        let e = |status| TurnError::Provider(ChatError::Status { status, message: "m".into(), retry_after: None });
        assert_eq!(failure(&Err(e(504))).unwrap().1, EXIT_RETRYABLE);
        assert_eq!(failure(&Err(e(401))).unwrap().1, 1);
        assert_eq!(failure(&Err(TurnError::Provider(ChatError::Timeout("t".into())))).unwrap().1, EXIT_RETRYABLE);
        // The core retries an answer that only thought; so does the exit status ask for it.
        assert_eq!(failure(&Err(TurnError::Provider(ChatError::ThinkingOnly))).unwrap().1, EXIT_RETRYABLE);
        assert_eq!(failure(&Err(TurnError::Provider(ChatError::Invalid("x".into())))).unwrap().1, 1);
    }
}
