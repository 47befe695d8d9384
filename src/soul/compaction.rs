//! Context compaction (`docs/soul.md` §6, `docs/protocol-1.10.md` §4.5): keep the last two user/assistant
//! messages, summarize what came before with one tool-less LLM call, and restart the context from
//! the summary. The new token count is an estimate: the summary's output tokens (when the call
//! reported usage) plus a quarter of the characters of the preserved messages' text.

use futures::StreamExt;
use serde_json::Value;

use super::Soul;
use super::error::TurnError;
use super::hooks;
use super::retry::backoff;
use super::sink::EventSink;
use crate::llm::{ChatError, ChatRequest, Message, Role, SharedProvider, StreamEvent};
use crate::protocol::{ContentPart, Event, HookEvent};

use crate::blueprint::prompts::{
    COMPACTED_NOTE, COMPACTION_INSTRUCTIONS, COMPACTION_SYSTEM as COMPACTION_SYSTEM_PROMPT,
};

/// Index where the preserved tail starts, or `None` when there is nothing to summarize.
fn tail_start(history: &[Message]) -> Option<usize> {
    let mut seen = 0;
    for (i, m) in history.iter().enumerate().rev() {
        if matches!(m.role, Role::User | Role::Assistant) {
            seen += 1;
            if seen == 2 {
                return (i > 0).then_some(i);
            }
        }
    }
    None
}

/// What started a compaction, as hooks see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The context ran full before a step.
    Auto,
    /// `/compact`.
    Manual,
    /// `/compact <instructions>`.
    ManualWithPrompt,
}

impl Trigger {
    pub fn name(self) -> &'static str {
        match self {
            Trigger::Auto => "auto",
            Trigger::Manual => "manual",
            Trigger::ManualWithPrompt => "manual-with-prompt",
        }
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

/// The single user message that asks for the summary. `focus` is what the user asked `/compact`
/// to keep in particular (empty for automatic compaction).
fn compaction_request(to_summarize: &[Message], focus: &str) -> Message {
    let mut parts = Vec::new();
    for (i, m) in to_summarize.iter().enumerate() {
        parts.push(ContentPart::text(format!("## Message {}\nRole: {}\nContent:\n", i + 1, role_name(m.role))));
        parts.extend(m.content.iter().filter(|p| !p.is_think()).cloned());
    }
    let mut instructions = COMPACTION_INSTRUCTIONS.trim().to_string();
    if !focus.is_empty() {
        instructions.push_str("\n\nThe user asked to keep this in particular: ");
        instructions.push_str(focus);
    }
    parts.push(ContentPart::text(instructions));
    Message::user(parts)
}

impl Soul {
    /// Compacts with `CompactionBegin` / `CompactionEnd` around it. Protocol 1.2 ignores
    /// `/compact` arguments; kiwi takes them as a focus for the summary (as later versions do).
    pub(super) async fn compact(&mut self, sink: &EventSink, focus: &str, trigger: Trigger) -> Result<(), TurnError> {
        let hooks = self.hooks(sink);
        let extra = hooks::input([
            ("trigger", Value::from(trigger.name())),
            ("token_count", Value::from(self.context.token_count())),
        ]);
        hooks.run(HookEvent::PreCompact, trigger.name(), extra).await;
        sink.emit(Event::CompactionBegin {}).await;
        let history = self.context.history().to_vec();
        let (new_history, estimate) = match tail_start(&history) {
            None => {
                let estimate = text_chars(&history) / 4;
                (history, estimate)
            }
            Some(start) => {
                let Some(llm) = self.agent.llm() else { return Err(self.agent.llm_not_set()) };
                let request = compaction_request(&history[..start], focus);
                let (summary, output_tokens) = summarize(&llm, &request, self.agent.loop_control.max_retries_per_step)
                    .await
                    .map_err(TurnError::from)?;
                let mut first = vec![ContentPart::text(format!("<system>{}</system>", COMPACTED_NOTE.trim()))];
                first.extend(summary.into_iter().filter(|p| !p.is_think()));
                let mut rebuilt = vec![Message::user(first)];
                rebuilt.extend_from_slice(&history[start..]);
                (rebuilt, output_tokens + text_chars(&history[start..]) / 4)
            }
        };
        self.context
            .clear()
            .map_err(|e| TurnError::internal("ContextError", format!("Failed to rotate the context: {e}")))?;
        self.record_system_prompt();
        self.checkpoint();
        for message in new_history {
            self.context.append(message);
        }
        self.context.set_token_count(estimate);
        sink.emit(Event::CompactionEnd {}).await;
        let extra =
            hooks::input([("trigger", Value::from(trigger.name())), ("estimated_token_count", Value::from(estimate))]);
        hooks.fire(HookEvent::PostCompact, trigger.name(), extra).await;
        Ok(())
    }
}

/// Characters of the text parts of `messages`.
fn text_chars(messages: &[Message]) -> u64 {
    messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(ContentPart::as_text)
        .map(|t| t.chars().count() as u64)
        .sum()
}

/// The summary's parts and its output tokens (0 when the call reported no usage).
async fn summarize(
    llm: &SharedProvider,
    request: &Message,
    max_attempts: u32,
) -> Result<(Vec<ContentPart>, u64), ChatError> {
    let history = std::slice::from_ref(request);
    let mut attempt = 0;
    loop {
        attempt += 1;
        match summarize_once(llm, history).await {
            Ok(parts) => return Ok(parts),
            Err(e) if e.is_retryable() && attempt < max_attempts.max(1) => {
                tokio::time::sleep(backoff(attempt, &e)).await
            }
            Err(e) => return Err(e),
        }
    }
}

async fn summarize_once(llm: &SharedProvider, history: &[Message]) -> Result<(Vec<ContentPart>, u64), ChatError> {
    let request = ChatRequest { system_prompt: COMPACTION_SYSTEM_PROMPT.trim(), tools: &[], history };
    let mut stream = llm.stream(request).await?;
    let mut parts: Vec<ContentPart> = Vec::new();
    let mut output_tokens = 0;
    while let Some(item) = stream.next().await {
        match item? {
            StreamEvent::Content(part) => match parts.last_mut() {
                Some(last) => {
                    if let Some(part) = last.merge(part) {
                        parts.push(part);
                    }
                }
                None => parts.push(part),
            },
            StreamEvent::Usage(usage) => output_tokens = usage.output,
            _ => {}
        }
    }
    if parts.is_empty() {
        return Err(ChatError::EmptyResponse);
    }
    Ok((parts, output_tokens))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_the_last_two_exchanges() {
        let u = |t: &str| Message::user_text(t);
        let a = |t: &str| Message::new(Role::Assistant, vec![ContentPart::text(t)]);
        assert_eq!(tail_start(&[u("a"), a("b")]), None);
        assert_eq!(tail_start(&[a("b")]), None);
        assert_eq!(tail_start(&[u("a"), a("b"), u("c"), a("d")]), Some(2));
        let tool = Message::tool("x", vec![ContentPart::text("r")]);
        assert_eq!(tail_start(&[u("a"), a("b"), tool.clone(), u("c"), a("d"), tool]), Some(3));
    }

    #[test]
    fn estimates_count_text_characters() {
        let u = |t: &str| Message::user_text(t);
        let a = |t: &str| Message::new(Role::Assistant, vec![ContentPart::think("not counted"), ContentPart::text(t)]);
        assert_eq!(text_chars(&[u("hi"), a("hello")]) / 4, 1);
    }

    #[test]
    fn request_lists_messages_without_think_parts() {
        let m = Message::new(Role::Assistant, vec![ContentPart::think("hidden"), ContentPart::text("shown")]);
        let req = compaction_request(std::slice::from_ref(&m), "");
        let text = req.text();
        assert!(text.contains("## Message 1\nRole: assistant"));
        assert!(text.contains("shown") && !text.contains("hidden"));
        assert!(text.ends_with(COMPACTION_INSTRUCTIONS.trim()));
        assert!(compaction_request(&[m], "the names").text().ends_with("the names"));
    }
}
