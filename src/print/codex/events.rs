//! The dialect's output vocabulary (`docs/codex-exec.md`, spec codex-exec.md §5): one
//! `ThreadEvent` per stdout line, items with their fields in codex's order.
//!
//! Invariants: every field of an item is always present (`null` where empty), as codex writes
//! it; `usage` has the five integer fields; a `web_search` item carries its `id` once (kiwi has
//! no second, API-side id to repeat).

use serde::Serialize;
use serde_json::Value;

/// `turn.completed.usage`: the thread's running total (§6).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub cache_write_input_tokens: u64,
    pub output_tokens: u64,
    pub reasoning_output_tokens: u64,
}

impl Usage {
    /// Adds one model call's usage (§11: input counts every input token, cached ones included).
    pub fn add(&mut self, usage: &crate::protocol::TokenUsage) {
        self.input_tokens += usage.input();
        self.cached_input_tokens += usage.input_cache_read;
        self.cache_write_input_tokens += usage.input_cache_creation;
        self.output_tokens += usage.output;
    }
}

/// One line of stdout.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type")]
pub enum ThreadEvent {
    #[serde(rename = "thread.started")]
    ThreadStarted { thread_id: String },
    #[serde(rename = "turn.started")]
    TurnStarted {},
    #[serde(rename = "item.started")]
    ItemStarted { item: Item },
    #[serde(rename = "item.updated")]
    ItemUpdated { item: Item },
    #[serde(rename = "item.completed")]
    ItemCompleted { item: Item },
    #[serde(rename = "turn.completed")]
    TurnCompleted { usage: Usage },
    #[serde(rename = "turn.failed")]
    TurnFailed { error: ErrorText },
    #[serde(rename = "error")]
    Error { message: String },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ErrorText {
    pub message: String,
}

/// An item: its id (`item_<n>`, counted per process) and what it is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Item {
    pub id: String,
    #[serde(flatten)]
    pub details: Details,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    InProgress,
    Completed,
    Failed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    Add,
    Delete,
    Update,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FileChange {
    pub path: String,
    pub kind: ChangeKind,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TodoEntry {
    pub text: String,
    pub completed: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpResult {
    pub content: Vec<Value>,
    pub structured_content: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchAction {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub query: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Details {
    AgentMessage {
        text: String,
    },
    Reasoning {
        text: String,
    },
    CommandExecution {
        command: String,
        aggregated_output: String,
        exit_code: Option<i64>,
        status: Status,
    },
    FileChange {
        changes: Vec<FileChange>,
        status: Status,
    },
    McpToolCall {
        server: String,
        tool: String,
        arguments: Value,
        result: Option<McpResult>,
        error: Option<ErrorText>,
        status: Status,
    },
    WebSearch {
        query: String,
        action: SearchAction,
    },
    TodoList {
        items: Vec<TodoEntry>,
    },
    Error {
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(event: &ThreadEvent) -> String {
        serde_json::to_string(event).unwrap()
    }

    #[test]
    fn lines_have_codex_shapes() {
        assert_eq!(line(&ThreadEvent::TurnStarted {}), r#"{"type":"turn.started"}"#);
        assert_eq!(
            line(&ThreadEvent::ThreadStarted { thread_id: "t".into() }),
            r#"{"type":"thread.started","thread_id":"t"}"#
        );
        let usage = Usage { input_tokens: 270, cached_input_tokens: 50, output_tokens: 10, ..Default::default() };
        assert_eq!(
            line(&ThreadEvent::TurnCompleted { usage }),
            r#"{"type":"turn.completed","usage":{"input_tokens":270,"cached_input_tokens":50,"cache_write_input_tokens":0,"output_tokens":10,"reasoning_output_tokens":0}}"#
        );
        let command = Item {
            id: "item_0".into(),
            details: Details::CommandExecution {
                command: "echo out".into(),
                aggregated_output: String::new(),
                exit_code: None,
                status: Status::InProgress,
            },
        };
        assert_eq!(
            line(&ThreadEvent::ItemStarted { item: command }),
            r#"{"type":"item.started","item":{"id":"item_0","type":"command_execution","command":"echo out","aggregated_output":"","exit_code":null,"status":"in_progress"}}"#
        );
        let mcp = Item {
            id: "item_1".into(),
            details: Details::McpToolCall {
                server: "calc".into(),
                tool: "add".into(),
                arguments: serde_json::json!({"a": 2}),
                result: None,
                error: Some(ErrorText { message: "x".into() }),
                status: Status::Failed,
            },
        };
        assert_eq!(
            line(&ThreadEvent::ItemCompleted { item: mcp }),
            r#"{"type":"item.completed","item":{"id":"item_1","type":"mcp_tool_call","server":"calc","tool":"add","arguments":{"a":2},"result":null,"error":{"message":"x"},"status":"failed"}}"#
        );
        let search = Item {
            id: "item_2".into(),
            details: Details::WebSearch {
                query: "q".into(),
                action: SearchAction { kind: "search", query: "q".into() },
            },
        };
        assert_eq!(
            line(&ThreadEvent::ItemStarted { item: search }),
            r#"{"type":"item.started","item":{"id":"item_2","type":"web_search","query":"q","action":{"type":"search","query":"q"}}}"#
        );
        assert_eq!(
            line(&ThreadEvent::TurnFailed { error: ErrorText { message: "m".into() } }),
            r#"{"type":"turn.failed","error":{"message":"m"}}"#
        );
    }
}
