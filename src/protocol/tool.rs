//! Tool calls as the model streams them and tool results as the agent reports them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::content::ContentPart;
use super::display::DisplayBlock;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct FunctionCall {
    pub name: String,
    #[serde(default)]
    pub arguments: Option<String>,
}

/// `{"type":"function","id",...,"function":{"name","arguments"},"extras"}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCall {
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    pub id: String,
    pub function: FunctionCall,
    #[serde(default)]
    pub extras: Option<Map<String, Value>>,
}

fn function_type() -> String {
    "function".to_string()
}

impl ToolCall {
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Option<String>) -> Self {
        Self {
            kind: function_type(),
            id: id.into(),
            function: FunctionCall { name: name.into(), arguments },
            extras: None,
        }
    }

    /// Appends a streamed arguments fragment (a null fragment appends nothing).
    pub fn append_arguments(&mut self, part: Option<&str>) {
        if let Some(part) = part {
            match &mut self.function.arguments {
                Some(args) => args.push_str(part),
                None => self.function.arguments = Some(part.to_string()),
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolCallPart {
    #[serde(default)]
    pub arguments_part: Option<String>,
}

/// `output` of a tool result: a string or a list of content parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum ToolOutput {
    Text(String),
    Parts(Vec<ContentPart>),
}

impl Default for ToolOutput {
    fn default() -> Self {
        ToolOutput::Text(String::new())
    }
}

impl ToolOutput {
    pub fn is_empty(&self) -> bool {
        match self {
            ToolOutput::Text(t) => t.is_empty(),
            ToolOutput::Parts(p) => p.is_empty(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolReturnValue {
    pub is_error: bool,
    pub output: ToolOutput,
    pub message: String,
    pub display: Vec<DisplayBlock>,
    #[serde(default)]
    pub extras: Option<Map<String, Value>>,
    /// Why an error happened, when the agent loop must act on it. Never serialized: the wire
    /// shape above is unchanged, and control flow never compares message text.
    #[serde(skip)]
    pub cause: ErrorCause,
}

/// The typed reason behind an error result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ErrorCause {
    /// An ordinary result (ok or error, as `is_error` says).
    #[default]
    None,
    /// The user rejected the call's approval request: the turn stops, unless a rejection of the
    /// same step came with feedback (`docs/protocol-1.10.md` §3.5).
    Rejected,
    /// A policy stopped the call before it ran (a `PreToolUse` hook, plan mode): the model reads
    /// why and the turn goes on.
    Blocked,
    /// The tool itself failed (a panic, an I/O error of its own): the model is told to avoid it.
    Crashed,
    /// Not an error: the call's answer is the turn's final answer (the Claude dialect's
    /// `StructuredOutput`, `docs/print-mode.md` B.3a), so the turn ends after this step.
    EndsTurn,
}

/// What became of a tool call, as the agent loop sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultKind {
    Ok,
    Error,
    Rejected,
    Blocked,
    Crashed,
}

/// The message of a plain rejection (no feedback) of a main-agent call.
pub const REJECTED_MESSAGE: &str =
    "The tool call is rejected by the user. Stop what you are doing and wait for the user to tell you how to proceed.";

/// The message of a plain rejection of a subagent's call.
pub const REJECTED_SUBAGENT_MESSAGE: &str = "The user rejected this tool call. Do not try it again as it was: \
     find another way to finish the task, or explain in your final summary what you could not do and why.";

impl ToolReturnValue {
    pub fn ok(output: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            is_error: false,
            output: ToolOutput::Text(output.into()),
            message: message.into(),
            display: Vec::new(),
            extras: None,
            cause: ErrorCause::None,
        }
    }

    /// An error result whose display starts with a `brief` block.
    pub fn error(message: impl Into<String>, brief: impl Into<String>) -> Self {
        Self {
            is_error: true,
            output: ToolOutput::default(),
            message: message.into(),
            display: vec![DisplayBlock::brief(brief)],
            extras: None,
            cause: ErrorCause::None,
        }
    }

    /// The tool itself failed (`Tool runtime error`); the model is told to avoid it.
    pub fn crashed(message: impl Into<String>) -> Self {
        Self { cause: ErrorCause::Crashed, ..Self::error(message, "Tool runtime error") }
    }

    pub fn kind(&self) -> ResultKind {
        match (self.is_error, self.cause) {
            (true, ErrorCause::Rejected) => ResultKind::Rejected,
            (true, ErrorCause::Blocked) => ResultKind::Blocked,
            (true, ErrorCause::Crashed) => ResultKind::Crashed,
            (true, ErrorCause::None | ErrorCause::EndsTurn) => ResultKind::Error,
            (false, _) => ResultKind::Ok,
        }
    }

    pub fn with_output(mut self, output: impl Into<String>) -> Self {
        self.output = ToolOutput::Text(output.into());
        self
    }

    pub fn with_display(mut self, blocks: Vec<DisplayBlock>) -> Self {
        self.display.extend(blocks);
        self
    }

    /// The result a tool returns when the user rejected its approval request.
    pub fn rejected() -> Self {
        Self { cause: ErrorCause::Rejected, ..Self::error(REJECTED_MESSAGE, "Rejected by user") }
    }

    /// A plain rejection of a subagent's call: the subagent goes on without it.
    pub fn rejected_for_subagent() -> Self {
        Self { cause: ErrorCause::Rejected, ..Self::error(REJECTED_SUBAGENT_MESSAGE, "Rejected by user") }
    }

    /// A rejection that came with the user's feedback: the model reads it and goes on.
    pub fn rejected_with_feedback(feedback: &str) -> Self {
        Self {
            cause: ErrorCause::Rejected,
            ..Self::error(
                format!("The tool call is rejected by the user. User feedback: {feedback}"),
                format!("Rejected: {feedback}"),
            )
        }
    }

    /// A call a policy stopped before it ran.
    pub fn blocked(message: impl Into<String>, brief: impl Into<String>) -> Self {
        Self { cause: ErrorCause::Blocked, ..Self::error(message, brief) }
    }
}

/// `{"tool_call_id","return_value"}`: the `ToolResult` event payload and an external tool's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ToolResult {
    pub tool_call_id: String,
    pub return_value: ToolReturnValue,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_call_round_trips() {
        let json = r#"{"type":"function","id":"tc-1","function":{"name":"Shell","arguments":"{\"command\": \"echo hi\"}"},"extras":null}"#;
        let call: ToolCall = serde_json::from_str(json).unwrap();
        assert_eq!(serde_json::to_string(&call).unwrap(), json);
    }

    #[test]
    fn tool_result_round_trips() {
        let json = r#"{"tool_call_id":"tc-1","return_value":{"is_error":false,"output":"hi\n","message":"Command executed successfully.","display":[],"extras":null}}"#;
        let r: ToolResult = serde_json::from_str(json).unwrap();
        assert_eq!(serde_json::to_string(&r).unwrap(), json);
        let parts = r#"{"tool_call_id":"e","return_value":{"is_error":false,"output":[{"type":"text","text":"pong:hi"}],"message":"","display":[{"type":"brief","text":"b"}],"extras":{"k":1}}}"#;
        let r: ToolResult = serde_json::from_str(parts).unwrap();
        assert_eq!(serde_json::to_string(&r).unwrap(), parts);
    }

    #[test]
    fn rejection_has_the_spec_shape() {
        assert_eq!(
            serde_json::to_string(&ToolReturnValue::rejected()).unwrap(),
            r#"{"is_error":true,"output":"","message":"The tool call is rejected by the user. Stop what you are doing and wait for the user to tell you how to proceed.","display":[{"type":"brief","text":"Rejected by user"}],"extras":null}"#
        );
        assert_eq!(
            serde_json::to_string(&ToolReturnValue::rejected_with_feedback("use rg")).unwrap(),
            r#"{"is_error":true,"output":"","message":"The tool call is rejected by the user. User feedback: use rg","display":[{"type":"brief","text":"Rejected: use rg"}],"extras":null}"#
        );
    }

    #[test]
    fn kinds_are_typed_not_read_from_text() {
        assert_eq!(ToolReturnValue::rejected().kind(), ResultKind::Rejected);
        assert_eq!(ToolReturnValue::crashed("x").kind(), ResultKind::Crashed);
        assert_eq!(ToolReturnValue::blocked("x", "b").kind(), ResultKind::Blocked);
        assert_eq!(ToolReturnValue::ok("", "").kind(), ResultKind::Ok);
        // A client's result that happens to carry the rejection text is still an ordinary error.
        let json = serde_json::to_string(&ToolReturnValue::rejected()).unwrap();
        let parsed: ToolReturnValue = serde_json::from_str(&json).unwrap();
        assert_eq!(parsed.kind(), ResultKind::Error);
    }

    #[test]
    fn arguments_fragments_append() {
        let mut call = ToolCall::new("x", "T", None);
        call.append_arguments(None);
        assert_eq!(call.function.arguments, None);
        call.append_arguments(Some("{"));
        call.append_arguments(Some("}"));
        assert_eq!(call.function.arguments.as_deref(), Some("{}"));
    }
}
