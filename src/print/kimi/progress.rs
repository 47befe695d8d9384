//! The progress lines of kimi's `--print` text output on stderr (`docs/print-mode.md` A.3): what a
//! person reads while a turn runs. The model's thinking and text as text, each tool call as its
//! name and a summary of its arguments, each result as `✓` or `✗` and its message. Not a stable
//! format: nothing should parse it (the stdout formats are the stable ones).
//!
//! Invariants: one entry per closed run or event (a text keeps its own line breaks); long values
//! are cut with `…`; markers a person has no use for (turn and step boundaries, status updates,
//! MCP loading brackets) print nothing.

use serde_json::Value;

use crate::protocol::{ContentPart, Event, Run, ToolCall, ToolOutput, ToolReturnValue};

/// The longest argument value or result message shown, in characters.
const VALUE_CHARS: usize = 80;
/// The longest argument summary shown, in characters.
const SUMMARY_CHARS: usize = 160;

/// What a closed run of fragments reads as: thinking, the model's text, or a tool call.
pub fn run(run: &Run) -> Option<String> {
    match run {
        Run::Content(ContentPart::Think { think, .. }) if !think.trim().is_empty() => {
            Some(format!("thinking: {}", think.trim()))
        }
        Run::Content(ContentPart::Text { text }) if !text.trim().is_empty() => Some(text.trim_end().to_string()),
        Run::Content(ContentPart::ImageUrl { .. }) => Some("[image]".into()),
        Run::Content(ContentPart::AudioUrl { .. }) => Some("[audio]".into()),
        Run::Content(ContentPart::VideoUrl { .. }) => Some("[video]".into()),
        Run::Content(_) | Run::Arguments(_) => None,
        Run::Call(call) => Some(call_line(call)),
    }
}

/// `→ Shell(command="ls -la")`: the tool and what it was asked.
pub fn call_line(call: &ToolCall) -> String {
    let arguments = call.function.arguments.as_deref().unwrap_or("");
    format!("→ {}({})", call.function.name, arguments_summary(arguments))
}

/// The arguments as `name=value` pairs: strings quoted on one line, lists as their length,
/// objects as `{…}`; text that is not a JSON object is shown as it came, cut.
pub fn arguments_summary(arguments: &str) -> String {
    let summary = match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(members)) => members
            .iter()
            .map(|(name, value)| format!("{name}={}", value_summary(value)))
            .collect::<Vec<_>>()
            .join(", "),
        _ => one_line(arguments.trim(), VALUE_CHARS),
    };
    cut(&summary, SUMMARY_CHARS)
}

fn value_summary(value: &Value) -> String {
    match value {
        Value::String(s) => format!("\"{}\"", one_line(s, VALUE_CHARS)),
        Value::Array(items) if items.len() == 1 => "[1 item]".into(),
        Value::Array(items) => format!("[{} items]", items.len()),
        Value::Object(_) => "{…}".into(),
        other => other.to_string(),
    }
}

/// `  ✓ message` or `  ✗ message` (the output's first line when there is no message).
pub fn result_line(result: &ToolReturnValue) -> String {
    let mark = if result.is_error { "✗" } else { "✓" };
    let said = if result.message.trim().is_empty() {
        match &result.output {
            ToolOutput::Text(text) => text.lines().find(|l| !l.trim().is_empty()).unwrap_or("").to_string(),
            ToolOutput::Parts(parts) => parts.iter().find_map(ContentPart::as_text).unwrap_or("").to_string(),
        }
    } else {
        result.message.clone()
    };
    let said = one_line(&said, VALUE_CHARS);
    if said.is_empty() { format!("  {mark}") } else { format!("  {mark} {said}") }
}

/// What an event that is not a fragment reads as, if anything.
pub fn event(event: &Event) -> Option<String> {
    match event {
        Event::ToolResult(result) => Some(result_line(&result.return_value)),
        Event::StepInterrupted {} => Some("(step interrupted)".into()),
        Event::StepRetry(retry) => Some(format!(
            "retrying the model call in {:.1} s (attempt {} of {}): {}{}",
            retry.wait_s,
            retry.next_attempt,
            retry.max_attempts,
            retry.error_type,
            retry.status_code.map(|s| format!(" {s}")).unwrap_or_default()
        )),
        Event::SteerInput { user_input } => {
            Some(format!("steered: {}", one_line(&user_input.text_input(), VALUE_CHARS)))
        }
        Event::CompactionBegin {} => Some("compacting the context…".into()),
        Event::CompactionEnd {} => Some("context compacted".into()),
        Event::PlanDisplay { file_path, .. } => Some(format!("plan: {file_path}")),
        Event::Notification(n) => Some(format!("notice: {}", one_line(&n.title, VALUE_CHARS))),
        Event::HookTriggered(_) | Event::HookResolved(_) => None,
        Event::SubagentEvent(sub) => {
            let who = sub.subagent_type.as_deref().unwrap_or("subagent");
            match sub.event.as_ref() {
                Event::TurnBegin { .. } => Some(format!("  [{who}] started")),
                Event::ToolCall(call) => Some(format!("  [{who}] → {}", call.function.name)),
                Event::ToolResult(result) => Some(format!("  [{who}]{}", result_line(&result.return_value))),
                Event::TurnEnd {} => Some(format!("  [{who}] done")),
                _ => None,
            }
        }
        Event::TurnBegin { .. }
        | Event::TurnEnd {}
        | Event::StepBegin { .. }
        | Event::StatusUpdate(_)
        | Event::ApprovalResponse(_)
        | Event::McpLoadingBegin {}
        | Event::McpLoadingEnd {}
        | Event::ContentPart(_)
        | Event::ToolCall(_)
        | Event::ToolCallPart(_)
        | Event::BtwBegin { .. }
        | Event::BtwEnd { .. } => None,
    }
}

/// `text` on one line (line breaks shown as `⏎`), cut to `max` characters.
fn one_line(text: &str, max: usize) -> String {
    cut(&text.trim().replace("\r\n", "⏎").replace('\n', "⏎"), max)
}

fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_reads_as_its_name_and_arguments() {
        let call = ToolCall::new("t", "Shell", Some(r#"{"command":"ls -la\nwc -l","timeout":60}"#.into()));
        assert_eq!(call_line(&call), r#"→ Shell(command="ls -la⏎wc -l", timeout=60)"#);
        let todos = ToolCall::new("t", "SetTodoList", Some(r#"{"todos":[{"title":"a"},{"title":"b"}]}"#.into()));
        assert_eq!(call_line(&todos), "→ SetTodoList(todos=[2 items])");
        assert_eq!(call_line(&ToolCall::new("t", "Odd", Some("not json".into()))), "→ Odd(not json)");
        assert_eq!(call_line(&ToolCall::new("t", "None", None)), "→ None()");
        let long = format!(r#"{{"content":"{}"}}"#, "x".repeat(500));
        let line = call_line(&ToolCall::new("t", "WriteFile", Some(long)));
        assert!(line.ends_with("…\")") && line.chars().count() < 120, "{line}");
    }

    #[test]
    fn results_read_as_a_mark_and_a_message() {
        assert_eq!(
            result_line(&ToolReturnValue::ok("a\nb", "Command executed successfully.")),
            "  ✓ Command executed successfully."
        );
        assert_eq!(result_line(&ToolReturnValue::ok("\nfirst\nsecond", "")), "  ✓ first");
        assert_eq!(result_line(&ToolReturnValue::error("Permission denied", "Denied")), "  ✗ Permission denied");
        assert_eq!(result_line(&ToolReturnValue::ok("", "")), "  ✓");
    }

    #[test]
    fn markers_print_nothing() {
        assert_eq!(event(&Event::StepBegin { n: 2 }), None);
        assert_eq!(event(&Event::TurnEnd {}), None);
        assert_eq!(run(&Run::Content(ContentPart::think("  "))), None);
        assert_eq!(run(&Run::Content(ContentPart::think("hm"))).as_deref(), Some("thinking: hm"));
        assert_eq!(cut("äöü", 2), "äö…");
    }
}
