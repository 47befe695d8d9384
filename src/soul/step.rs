//! One step (`docs/soul.md` §4, `docs/protocol-1.10.md` §4.1-§4.2): call the model (with retries, each
//! announced by `StepRetry` before its wait), forward its fragments, queue each tool call as soon
//! as it is complete, report usage, run the tools concurrently, grow the context.
//!
//! Invariants: fragments reach the sink one-to-one in stream order; `StatusUpdate` precedes the
//! step's `ToolResult`s and carries the plan mode in force when it is sent; a tool that switched
//! plan mode gets one more `StatusUpdate{plan_mode}` after all results; results are stored in call
//! order; the context is only touched after everything succeeded, synchronously, so a cancel (a
//! dropped future) never stores half a step. The model only sees the tools the client can serve
//! (hidden ones still run when called); plan mode's policy applies before a tool runs.

use std::pin::Pin;
use std::sync::Arc;

use futures::stream::FuturesUnordered;
use futures::{Future, StreamExt};

use std::borrow::Cow;

use serde_json::{Map, Value};

use super::Soul;
use super::compaction::Trigger;
use super::error::TurnError;
use super::hooks::{self, HookRunner};
use super::host::{FollowUp, SoulToolHost};
use super::plan::{PlanVerdict, check_call};
use super::repeats;
use super::retry::backoff;
use super::sink::EventSink;
use super::tool_message::tool_message;
use crate::blueprint::prompts::dmail_note;
use crate::llm::{ChatError, ChatRequest, Message, ModelStop, Role, SharedProvider, StreamEvent, ToolSpec};
use crate::protocol::{
    ContentPart, Event, HookEvent, ResultKind, StatusUpdate, StepRetry, TokenUsage, ToolCall, ToolResult,
    ToolReturnValue,
};
use crate::tools::{ToolCallContext, ToolHost, Toolset, parse_arguments};

pub enum StepOutcome {
    Continue,
    /// The turn ends: no tool calls, or the user rejected one.
    Stop {
        rejected: bool,
        /// Why the model's answer ended early (limit, refusal); `None` after a rejection.
        model_stop: Option<ModelStop>,
    },
}

type ToolFuture = Pin<Box<dyn Future<Output = (usize, ToolReturnValue)> + Send>>;

/// One attempt's stream, merged, with its tools possibly still running.
struct Attempt {
    content: Vec<ContentPart>,
    calls: Vec<ToolCall>,
    usage: Option<TokenUsage>,
    message_id: Option<String>,
    stop: Option<ModelStop>,
    /// Each call's identity (`repeats::call_key`), in call order.
    keys: Vec<String>,
    /// For a call identical to an earlier one of this step: that call's index (it does not run).
    copy_of: Vec<Option<usize>>,
    /// Tool calls queued as soon as complete. They are polled once the stream has ended, so a
    /// step's `StatusUpdate` always precedes its approval requests and results (deterministic
    /// order for clients; the model's stream is never held back by a tool).
    running: FuturesUnordered<ToolFuture>,
}

impl Soul {
    pub(super) async fn run_step(
        &mut self,
        llm: &SharedProvider,
        step_no: u32,
        sink: &EventSink,
    ) -> Result<StepOutcome, TurnError> {
        if self.needs_compaction() {
            self.compact(sink, "", Trigger::Auto).await?;
        }
        self.checkpoint();
        self.remind_plan_mode();

        let toolset = self.agent.toolset();
        let host = SoulToolHost::new(
            self.agent.approvals.clone(),
            self.agent.client.clone(),
            sink.clone(),
            self.approval_origin(),
        )
        .with_journal(self.agent.journal.clone());
        let soul_host = Arc::new(match self.subagent {
            None => host.with_delegator(self.agent.clone()),
            Some(_) => host,
        });
        let hooks = self.hooks(sink);
        let max_attempts = self.agent.loop_control.max_retries_per_step.max(1);
        let mut attempt_no = 0;
        let mut attempt = loop {
            attempt_no += 1;
            match self.stream_attempt(llm, &toolset, &soul_host, &hooks, sink).await {
                Ok(a) => break a,
                Err(e) if e.is_retryable() && attempt_no < max_attempts => {
                    let wait = backoff(attempt_no, &e);
                    tracing::info!(
                        "LLM call failed (attempt {attempt_no}/{max_attempts}); retrying in {:.2} s: {e}",
                        wait.as_secs_f64()
                    );
                    sink.emit(Event::StepRetry(StepRetry {
                        n: step_no,
                        next_attempt: attempt_no + 1,
                        max_attempts,
                        wait_s: wait.as_secs_f64(),
                        error_type: e.error_type().to_string(),
                        status_code: e.status_code(),
                    }))
                    .await;
                    tokio::time::sleep(wait).await;
                }
                Err(e) => return Err(e.into()),
            }
        };

        let mut cost = None;
        if let Some(usage) = attempt.usage {
            self.context.set_token_count(usage.input());
            self.agent.state.count_tokens(usage.total());
            // Priced by the model that made the call (a subagent's may be another).
            cost = self.agent.state.count_cost(self.agent.prices().map(|p| p.cost(&usage)));
        }
        let max = self.agent.max_context_size();
        sink.emit(Event::StatusUpdate(StatusUpdate {
            context_usage: attempt.usage.map(|u| u.input() as f64 / max.max(1) as f64),
            context_tokens: attempt.usage.map(|u| u.input()),
            max_context_tokens: attempt.usage.map(|_| max),
            token_usage: attempt.usage,
            message_id: attempt.message_id.clone(),
            plan_mode: Some(self.agent.state.plan_mode()),
            mcp_status: None,
            cost,
        }))
        .await;

        // Streaks of identical calls across the turn's steps (`docs/protocol-1.10.md` §11).
        let mut notes: Vec<Option<String>> = vec![None; attempt.calls.len()];
        let mut repeated_too_often = false;
        for (i, key) in attempt.keys.iter().enumerate() {
            if attempt.copy_of[i].is_none() {
                let streak = self.repeats.observe(key);
                notes[i] = repeats::reminder(streak);
                repeated_too_often |= streak >= repeats::STOP_AT;
            }
        }
        let mut results: Vec<Option<ToolReturnValue>> = vec![None; attempt.calls.len()];
        // A rejection that came with feedback does not end the turn (`docs/protocol-1.10.md` §3.5).
        let mut feedback_given = false;
        while let Some((i, mut result)) = attempt.running.next().await {
            if result.kind() == ResultKind::Rejected {
                let feedback = soul_host.rejection_feedback(&attempt.calls[i].id);
                if !feedback.is_empty() {
                    result = ToolReturnValue::rejected_with_feedback(&feedback);
                    feedback_given = true;
                } else if self.subagent.is_some() {
                    // Nobody can tell a subagent how to proceed: it goes on (`docs/protocol-1.10.md` §8.3).
                    result = ToolReturnValue::rejected_for_subagent();
                    feedback_given = true;
                }
            }
            if let Some(note) = &notes[i] {
                repeats::append_note(&mut result, note);
            }
            report(sink, &attempt.calls[i], &result).await;
            // Identical calls of the same step get the original's result.
            for copy in (0..attempt.calls.len()).filter(|c| attempt.copy_of[*c] == Some(i)) {
                report(sink, &attempt.calls[copy], &result).await;
                results[copy] = Some(result.clone());
            }
            results[i] = Some(result);
        }
        if soul_host.take_plan_switched() {
            sink.emit(Event::StatusUpdate(StatusUpdate::plan_mode(self.agent.state.plan_mode()))).await;
        }

        let results: Vec<ToolReturnValue> = results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| ToolReturnValue::crashed("Error running tool: no result")))
            .collect();
        let tool_messages: Vec<Message> =
            attempt.calls.iter().zip(&results).map(|(call, result)| tool_message(&call.id, result)).collect();
        for message in &tool_messages {
            self.check_capabilities(&message.content)?;
        }
        let has_calls = !attempt.calls.is_empty();
        let mut assistant = Message::new(Role::Assistant, attempt.content);
        if has_calls {
            assistant.tool_calls = Some(attempt.calls);
        }
        self.context.append(assistant);
        if let Some(usage) = attempt.usage {
            self.context.set_token_count(usage.total());
        }
        for message in tool_messages {
            self.context.append(message);
        }
        // A failed session write ends the turn with a -32603 answer (`docs/sessions.md` §7.2).
        if let Some(e) = self.context.take_write_error() {
            return Err(TurnError::internal("OSError", e));
        }

        let rejected = !feedback_given && results.iter().any(|r| r.kind() == ResultKind::Rejected);
        let mail = self.agent.dmail.as_ref().and_then(|mailbox| mailbox.take());
        if let Some(mail) = mail.filter(|_| !rejected) {
            self.context
                .revert_to(mail.checkpoint_id)
                .map_err(|e| TurnError::internal("ContextError", format!("Failed to revert the context: {e}")))?;
            self.checkpoint();
            self.context.append(Message::user_text(dmail_note(&mail.message)));
            return Ok(StepOutcome::Continue);
        }
        if repeated_too_often {
            tracing::info!("the turn ends: the same tool call was repeated {} times in a row", repeats::STOP_AT);
        }
        // A final answer given through a tool (`ErrorCause::EndsTurn`) ends the turn at once.
        let answered = results.iter().any(|r| r.cause == crate::protocol::ErrorCause::EndsTurn);
        if rejected || !has_calls || repeated_too_often || answered {
            let model_stop = if rejected || answered { None } else { attempt.stop };
            Ok(StepOutcome::Stop { rejected, model_stop })
        } else {
            Ok(StepOutcome::Continue)
        }
    }

    /// One LLM call: forwards fragments and starts tools as their calls complete.
    async fn stream_attempt(
        &self,
        llm: &SharedProvider,
        toolset: &Arc<Toolset>,
        host: &Arc<SoulToolHost>,
        hooks: &HookRunner,
        sink: &EventSink,
    ) -> Result<Attempt, ChatError> {
        let history = self.context.history();
        let tools = self.visible_tools(toolset);
        let request = ChatRequest { system_prompt: &self.agent.system_prompt, tools: &tools, history };
        let mut stream = llm.stream(request).await?;
        let mut attempt = Attempt {
            content: Vec::new(),
            calls: Vec::new(),
            usage: None,
            message_id: None,
            stop: None,
            keys: Vec::new(),
            copy_of: Vec::new(),
            running: FuturesUnordered::new(),
        };
        // Index of the call whose arguments are still streaming.
        let mut open_call: Option<usize> = None;
        loop {
            let Some(item) = stream.next().await else { break };
            let event = item?;
            if !matches!(
                event,
                StreamEvent::ToolCallPart(_) | StreamEvent::MessageId(_) | StreamEvent::Usage(_) | StreamEvent::Stop(_)
            ) && let Some(i) = open_call.take()
            {
                self.queue_tool(&mut attempt, i, toolset, host, hooks);
            }
            match event {
                StreamEvent::Content(part) => {
                    sink.emit(Event::ContentPart(part.clone())).await;
                    match attempt.content.last_mut() {
                        Some(last) => {
                            if let Some(part) = last.merge(part) {
                                attempt.content.push(part);
                            }
                        }
                        None => attempt.content.push(part),
                    }
                }
                StreamEvent::ToolCall(call) => {
                    sink.emit(Event::ToolCall(call.clone())).await;
                    attempt.calls.push(call);
                    open_call = Some(attempt.calls.len() - 1);
                }
                StreamEvent::ToolCallPart(part) => {
                    if let Some(i) = open_call {
                        attempt.calls[i].append_arguments(part.arguments_part.as_deref());
                    }
                    sink.emit(Event::ToolCallPart(part)).await;
                }
                StreamEvent::MessageId(id) => attempt.message_id = Some(id),
                StreamEvent::Usage(usage) => attempt.usage = Some(usage),
                StreamEvent::Stop(stop) => attempt.stop = Some(stop),
            }
        }
        if let Some(i) = open_call.take() {
            self.queue_tool(&mut attempt, i, toolset, host, hooks);
        }
        if attempt.content.is_empty() && attempt.calls.is_empty() {
            return Err(ChatError::EmptyResponse);
        }
        if attempt.calls.is_empty() && is_thinking_only(&attempt.content) {
            return Err(ChatError::ThinkingOnly);
        }
        Ok(attempt)
    }

    /// Auto-compaction: when the reserved space no longer fits, or the context holds the
    /// configured share of the window.
    fn needs_compaction(&self) -> bool {
        let lc = &self.agent.loop_control;
        let (tokens, max) = (self.context.token_count(), self.agent.max_context_size());
        tokens + lc.reserved_context_size >= max || tokens as f64 >= lc.compaction_trigger_ratio * max as f64
    }

    /// The tool list the model is shown: all tools, less those the client cannot serve.
    fn visible_tools<'t>(&self, toolset: &'t Toolset) -> Cow<'t, [ToolSpec]> {
        let client = &self.agent.client;
        let specs = toolset.specs();
        if specs.iter().all(|t| client.shows_tool(&t.name)) {
            Cow::Borrowed(specs)
        } else {
            Cow::Owned(specs.iter().filter(|t| client.shows_tool(&t.name)).cloned().collect())
        }
    }

    /// Queues a complete tool call; it runs when the attempt's tools are polled (after the
    /// stream has ended, see `Attempt::running`). Plan mode's policy is applied here; the
    /// `PreToolUse` hooks run inside the call's task before the tool (and its approval), the
    /// `PostToolUse(Failure)` hooks after it, without waiting for them.
    fn queue_tool(
        &self,
        attempt: &mut Attempt,
        index: usize,
        toolset: &Arc<Toolset>,
        host: &Arc<SoulToolHost>,
        hooks: &HookRunner,
    ) {
        let call = &attempt.calls[index];
        let key = repeats::call_key(&call.function.name, call.function.arguments.as_deref());
        let original = attempt.keys.iter().position(|k| *k == key);
        attempt.keys.push(key);
        attempt.copy_of.push(original);
        if original.is_some() {
            return;
        }
        let plan = self.agent.state.plan();
        if let (true, Some(plan_file)) = (plan.active, plan.file.as_deref()) {
            let arguments = parse_arguments(call.function.arguments.as_deref()).unwrap_or_default();
            match check_call(&call.function.name, &arguments, plan_file, &self.agent.env.work_dir) {
                PlanVerdict::Run => {}
                PlanVerdict::RunApproved => {
                    host.grant(&call.id, &call.function.name, call.function.arguments.as_deref())
                }
                PlanVerdict::Blocked(result) => {
                    attempt.running.push(Box::pin(async move { (index, result) }));
                    return;
                }
            }
        }
        let ctx = ToolCallContext {
            tool_call_id: call.id.clone(),
            raw_arguments: call.function.arguments.clone(),
            env: self.agent.env.clone(),
            host: host.clone() as Arc<dyn ToolHost>,
        };
        let toolset = toolset.clone();
        let name = call.function.name.clone();
        let hooks = hooks.clone();
        let host = host.clone();
        attempt.running.push(Box::pin(async move {
            let tool_input = match parse_arguments(ctx.raw_arguments.as_deref()) {
                Ok(v @ Value::Object(_)) => v,
                _ => Value::Object(Map::new()),
            };
            let about = |more: Vec<(&'static str, Value)>| {
                let mut members = vec![("tool_name", Value::from(name.clone())), ("tool_input", tool_input.clone())];
                members.extend(more);
                members.push(("tool_call_id", Value::from(ctx.tool_call_id.clone())));
                hooks::input(members)
            };
            let pre = hooks.run(HookEvent::PreToolUse, &name, about(Vec::new())).await;
            if pre.blocked {
                let reason = if pre.reason.is_empty() { "Blocked by PreToolUse hook".into() } else { pre.reason };
                return (index, ToolReturnValue::blocked(reason, "Hook blocked"));
            }
            let mut result = toolset.dispatch(&name, ctx.raw_arguments.as_deref(), &ctx).await;
            // An approval answer that said more than yes or no (see `SoulToolHost`).
            match host.take_follow_up(&ctx.tool_call_id, ctx.raw_arguments.as_deref()) {
                Some(FollowUp::Rerun(arguments)) => {
                    let ctx = ToolCallContext { raw_arguments: Some(arguments), ..ctx.clone() };
                    result = toolset.dispatch(&name, ctx.raw_arguments.as_deref(), &ctx).await;
                }
                Some(FollowUp::Replace(replacement)) => result = replacement,
                None => {}
            }
            if result.kind() == ResultKind::Crashed {
                let extra = about(vec![("error", Value::from(result.message.clone()))]);
                hooks.fire(HookEvent::PostToolUseFailure, &name, extra).await;
            } else {
                let extra = about(vec![("tool_output", Value::from(hooks::tool_output_repr(&result)))]);
                hooks.fire(HookEvent::PostToolUse, &name, extra).await;
            }
            (index, result)
        }));
    }
}

/// A message with thinking but no text worth reading and no tool call: the stream was cut off
/// during reasoning (`docs/scripted-echo.md` §5.2), which is retried like an empty response.
fn is_thinking_only(content: &[ContentPart]) -> bool {
    content.iter().any(ContentPart::is_think)
        && !content.iter().any(|p| p.as_text().is_some_and(|t| !t.trim().is_empty()))
}

async fn report(sink: &EventSink, call: &ToolCall, result: &ToolReturnValue) {
    sink.emit(Event::ToolResult(ToolResult { tool_call_id: call.id.clone(), return_value: result.clone() })).await;
}
