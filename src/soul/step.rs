//! One step (`soul.md` §4): call the model (with retries), forward its fragments, queue each tool
//! call as soon as it is complete, report usage, run the tools concurrently, grow the context.
//!
//! Invariants: fragments reach the sink one-to-one in stream order; `StatusUpdate` precedes the
//! step's `ToolResult`s; results are stored in call order; the context is only touched after
//! everything succeeded, synchronously, so a cancel (a dropped future) never stores half a step.

use std::pin::Pin;
use std::sync::Arc;

use futures::stream::FuturesUnordered;
use futures::{Future, StreamExt};

use super::Soul;
use super::approval::Approval;
use super::error::TurnError;
use super::host::{FollowUp, SoulToolHost};
use super::retry::backoff;
use super::sink::EventSink;
use super::tool_message::tool_message;
use crate::blueprint::prompts::dmail_note;
use crate::llm::{ChatError, ChatRequest, Message, Role, SharedProvider, StreamEvent};
use crate::protocol::{
    ContentPart, Event, ResultKind, StatusUpdate, TokenUsage, ToolCall, ToolResult, ToolReturnValue,
};
use crate::tools::{ToolCallContext, ToolHost, Toolset};

pub enum StepOutcome {
    Continue,
    /// The turn ends: no tool calls, or the user rejected one.
    Stop {
        rejected: bool,
    },
}

type ToolFuture = Pin<Box<dyn Future<Output = (usize, ToolReturnValue)> + Send>>;

/// One attempt's stream, merged, with its tools possibly still running.
struct Attempt {
    content: Vec<ContentPart>,
    calls: Vec<ToolCall>,
    usage: Option<TokenUsage>,
    message_id: Option<String>,
    /// Tool calls queued as soon as complete. They are polled once the stream has ended, so a
    /// step's `StatusUpdate` always precedes its approval requests and results (deterministic
    /// order for clients; the model's stream is never held back by a tool).
    running: FuturesUnordered<ToolFuture>,
}

impl Soul {
    pub(super) async fn run_step(&mut self, llm: &SharedProvider, sink: &EventSink) -> Result<StepOutcome, TurnError> {
        let lc = &self.agent.loop_control;
        if self.context.token_count() + lc.reserved_context_size >= self.agent.max_context_size {
            self.compact(sink, "").await?;
        }
        self.checkpoint();

        let toolset = self.agent.toolset();
        let host = Arc::new(SoulToolHost::new(Approval::new(self.agent.approval.clone(), sink.clone()), sink.clone()));
        let max_attempts = self.agent.loop_control.max_retries_per_step.max(1);
        let mut attempt_no = 0;
        let mut attempt = loop {
            attempt_no += 1;
            match self.stream_attempt(llm, &toolset, &host, sink).await {
                Ok(a) => break a,
                Err(e) if e.is_retryable() && attempt_no < max_attempts => {
                    let wait = backoff(attempt_no, &e);
                    tracing::info!(
                        "LLM call failed (attempt {attempt_no}/{max_attempts}); retrying in {:.2} s: {e}",
                        wait.as_secs_f64()
                    );
                    tokio::time::sleep(wait).await;
                }
                Err(e) => return Err(TurnError::Provider(e)),
            }
        };

        if let Some(usage) = attempt.usage {
            self.context.set_token_count(usage.input());
        }
        let context_usage = attempt.usage.map(|u| u.input() as f64 / self.agent.max_context_size.max(1) as f64);
        sink.emit(Event::StatusUpdate(StatusUpdate {
            context_usage,
            token_usage: attempt.usage,
            message_id: attempt.message_id.clone(),
        }))
        .await;

        let mut results: Vec<Option<ToolReturnValue>> = vec![None; attempt.calls.len()];
        while let Some((i, result)) = attempt.running.next().await {
            report(sink, &attempt.calls[i], &result).await;
            results[i] = Some(result);
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
        // A failed session write ends the turn with a -32603 answer (issue 14, item 8).
        if let Some(e) = self.context.take_write_error() {
            return Err(TurnError::Internal(e));
        }

        let rejected = results.iter().any(|r| r.kind() == ResultKind::Rejected);
        let mail = self.agent.dmail.as_ref().and_then(|mailbox| mailbox.take());
        if let Some(mail) = mail.filter(|_| !rejected) {
            self.context
                .revert_to(mail.checkpoint_id)
                .map_err(|e| TurnError::Internal(format!("Failed to revert the context: {e}")))?;
            self.checkpoint();
            self.context.append(Message::user_text(dmail_note(&mail.message)));
            return Ok(StepOutcome::Continue);
        }
        if rejected || !has_calls { Ok(StepOutcome::Stop { rejected }) } else { Ok(StepOutcome::Continue) }
    }

    /// One LLM call: forwards fragments and starts tools as their calls complete.
    async fn stream_attempt(
        &self,
        llm: &SharedProvider,
        toolset: &Arc<Toolset>,
        host: &Arc<SoulToolHost>,
        sink: &EventSink,
    ) -> Result<Attempt, ChatError> {
        let history = self.context.history();
        let request = ChatRequest { system_prompt: &self.agent.system_prompt, tools: toolset.specs(), history };
        let mut stream = llm.stream(request).await?;
        let mut attempt = Attempt {
            content: Vec::new(),
            calls: Vec::new(),
            usage: None,
            message_id: None,
            running: FuturesUnordered::new(),
        };
        // Index of the call whose arguments are still streaming.
        let mut open_call: Option<usize> = None;
        loop {
            let Some(item) = stream.next().await else { break };
            let event = item?;
            if !matches!(event, StreamEvent::ToolCallPart(_) | StreamEvent::MessageId(_) | StreamEvent::Usage(_))
                && let Some(i) = open_call.take()
            {
                self.queue_tool(&mut attempt, i, toolset, host);
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
            }
        }
        if let Some(i) = open_call.take() {
            self.queue_tool(&mut attempt, i, toolset, host);
        }
        if attempt.content.is_empty() && attempt.calls.is_empty() {
            return Err(ChatError::EmptyResponse);
        }
        Ok(attempt)
    }

    /// Queues a complete tool call; it runs when the attempt's tools are polled (after the
    /// stream has ended, see `Attempt::running`).
    fn queue_tool(&self, attempt: &mut Attempt, index: usize, toolset: &Arc<Toolset>, host: &Arc<SoulToolHost>) {
        let call = &attempt.calls[index];
        let tool_host: Arc<dyn ToolHost> = host.clone();
        let ctx = ToolCallContext {
            tool_call_id: call.id.clone(),
            raw_arguments: call.function.arguments.clone(),
            env: self.agent.env.clone(),
            host: tool_host,
        };
        let toolset = toolset.clone();
        let host = host.clone();
        let name = call.function.name.clone();
        attempt.running.push(Box::pin(async move {
            let mut result = toolset.dispatch(&name, ctx.raw_arguments.as_deref(), &ctx).await;
            // An approval answer that said more than yes or no (see `SoulToolHost`).
            match host.take_follow_up(&ctx.tool_call_id) {
                Some(FollowUp::Rerun(arguments)) => {
                    let ctx = ToolCallContext { raw_arguments: Some(arguments), ..ctx };
                    result = toolset.dispatch(&name, ctx.raw_arguments.as_deref(), &ctx).await;
                }
                Some(FollowUp::Replace(replacement)) => result = replacement,
                None => {}
            }
            (index, result)
        }));
    }
}

async fn report(sink: &EventSink, call: &ToolCall, result: &ToolReturnValue) {
    sink.emit(Event::ToolResult(ToolResult { tool_call_id: call.id.clone(), return_value: result.clone() })).await;
}
