//! What the model sees of a tool result (`docs/soul.md` §5.3).

use crate::llm::{Capability, Message};
use crate::protocol::{ContentPart, ResultKind, ToolOutput, ToolReturnValue};

fn system(text: &str) -> ContentPart {
    ContentPart::text(format!("<system>{text}</system>"))
}

pub fn tool_message(tool_call_id: &str, result: &ToolReturnValue) -> Message {
    let mut content = Vec::new();
    if result.is_error {
        let mut text = format!("ERROR: {}", result.message);
        if result.kind() == ResultKind::Crashed {
            text.push_str(" This tool seems to be broken; avoid calling it again and find another way.");
        }
        content.push(system(&text));
    } else if !result.message.is_empty() {
        content.push(system(&result.message));
    }
    match &result.output {
        ToolOutput::Text(t) if !t.is_empty() => content.push(ContentPart::text(t.clone())),
        ToolOutput::Parts(parts) => content.extend(parts.iter().cloned()),
        _ => {}
    }
    if content.is_empty() {
        content.push(system("Tool output is empty."));
    }
    Message::tool(tool_call_id, content)
}

/// Capabilities a set of parts needs from the model.
pub fn required_capabilities(parts: &[ContentPart]) -> Vec<Capability> {
    let mut needed = Vec::new();
    for part in parts {
        let cap = match part {
            ContentPart::ImageUrl { .. } => Capability::ImageIn,
            ContentPart::VideoUrl { .. } => Capability::VideoIn,
            ContentPart::Think { .. } => Capability::Thinking,
            _ => continue,
        };
        if !needed.contains(&cap) {
            needed.push(cap);
        }
    }
    needed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_match_the_spec() {
        let m = tool_message("x", &ToolReturnValue::ok("", "Todo list updated"));
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"role":"tool","content":"<system>Todo list updated</system>","tool_call_id":"x"}"#
        );
        let m = tool_message("e3", &ToolReturnValue::ok("hello", "m"));
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"role":"tool","content":[{"type":"text","text":"<system>m</system>"},{"type":"text","text":"hello"}],"tool_call_id":"e3"}"#
        );
        let m = tool_message("tc-1", &ToolReturnValue::rejected());
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"role":"tool","content":"<system>ERROR: The tool call is rejected by the user. Stop what you are doing and wait for the user to tell you how to proceed.</system>","tool_call_id":"tc-1"}"#
        );
        let m = tool_message("e", &ToolReturnValue::ok("", ""));
        assert_eq!(m.content.len(), 1);
    }
}
