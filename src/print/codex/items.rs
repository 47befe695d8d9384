//! A kiwi turn as codex items (spec codex-exec.md §5.3, §11): the pure part of the projection.
//! Events go in, the lines they complete come out.
//!
//! Invariants: a step's reasoning and text become one `reasoning` and one `agent_message` item
//! each, completed when the step's stream has ended (the step's `StatusUpdate`), before the
//! step's tool items start, so items come in the order the model produced them; a tool item
//! is started when the stream ended (its arguments are whole, the tool has not run) and
//! completed by its result; a file edit that fails is no item at all (codex shows only applied
//! patches); the one `todo_list` item is started by the first list, updated by each later one
//! and completed at the turn's end; a retried attempt's fragments are dropped with it (the core
//! drops them too); subagents' events are not the thread's items; ids count from `item_0` per
//! process.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::events::{
    ChangeKind, Details, ErrorText, FileChange, Item, McpResult, SearchAction, Status, ThreadEvent, TodoEntry, Usage,
};
use crate::protocol::{
    ContentPart, DisplayBlock, Event, Fed, Run, RunAssembler, StepRetry, TodoStatus, ToolCall, ToolOutput,
    ToolReturnValue,
};

/// What the items need from the session: where relative paths start, and which MCP server
/// offers a tool (kiwi offers MCP tools under their plain names).
pub struct Lookup {
    pub work_dir: PathBuf,
    pub mcp_server: McpServerOf,
}

/// The MCP server offering a tool, by the tool's name.
pub type McpServerOf = Box<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// A started tool item waiting for its result.
enum Pending {
    /// `item.started` is out.
    Started(Box<Item>),
    /// A file edit: shown only once it is applied (the kind was decided before it ran).
    Edit(Vec<FileChange>),
    /// `SetTodoList`: its item is the turn's one todo list.
    Todo,
}

#[derive(Default)]
pub struct TurnItems {
    next_id: u32,
    runs: RunAssembler,
    think: String,
    text: String,
    /// Calls of the step whose stream is still open.
    calls: Vec<ToolCall>,
    pending: HashMap<String, Pending>,
    /// The turn's todo list: its id and last items.
    todo: Option<(String, Vec<TodoEntry>)>,
    /// The thread's usage so far (earlier turns included).
    pub usage: Usage,
    /// The text of the latest `agent_message` (`-o FILE`).
    pub last_message: Option<String>,
}

impl TurnItems {
    pub fn new(usage: Usage) -> Self {
        Self { usage, ..Default::default() }
    }

    fn id(&mut self) -> String {
        let id = format!("item_{}", self.next_id);
        self.next_id += 1;
        id
    }

    /// A non-fatal notice as an `error` item (completed at once).
    pub fn notice(&mut self, message: String) -> ThreadEvent {
        ThreadEvent::ItemCompleted { item: Item { id: self.id(), details: Details::Error { message } } }
    }

    /// The lines `event` completes.
    pub fn push(&mut self, event: &Event, lookup: &Lookup) -> Vec<ThreadEvent> {
        let closed = match self.runs.push(event) {
            Fed::Continued => None,
            Fed::Opened(closed) | Fed::Other(closed) => closed,
        };
        if let Some(run) = closed {
            self.take_run(run);
        }
        match event {
            // The step's stream has ended (MCP status reports come on their own, mid-stream too).
            Event::StatusUpdate(status) if status.mcp_status.is_none() => {
                if let Some(usage) = &status.token_usage {
                    self.usage.add(usage);
                }
                self.end_of_stream(lookup)
            }
            Event::StepRetry(retry) => {
                self.drop_attempt();
                vec![ThreadEvent::Error { message: reconnecting(retry) }]
            }
            Event::StepInterrupted {} => {
                self.drop_attempt();
                Vec::new()
            }
            Event::ToolResult(result) => self.result(&result.tool_call_id, &result.return_value),
            _ => Vec::new(),
        }
    }

    /// The todo list's completion, owed at the turn's end (also a failed one).
    pub fn finish(&mut self) -> Vec<ThreadEvent> {
        self.drop_attempt();
        match self.todo.take() {
            Some((id, items)) => {
                vec![ThreadEvent::ItemCompleted { item: Item { id, details: Details::TodoList { items } } }]
            }
            None => Vec::new(),
        }
    }

    fn take_run(&mut self, run: Run) {
        match run {
            Run::Content(ContentPart::Text { text }) => self.text.push_str(&text),
            Run::Content(ContentPart::Think { think, .. }) => self.think.push_str(&think),
            Run::Call(call) => self.calls.push(call),
            Run::Content(_) | Run::Arguments(_) => {}
        }
    }

    fn drop_attempt(&mut self) {
        let _ = self.runs.close();
        self.think.clear();
        self.text.clear();
        self.calls.clear();
    }

    fn end_of_stream(&mut self, lookup: &Lookup) -> Vec<ThreadEvent> {
        let mut lines = Vec::new();
        let think = std::mem::take(&mut self.think);
        if !think.trim().is_empty() {
            let item = Item { id: self.id(), details: Details::Reasoning { text: think } };
            lines.push(ThreadEvent::ItemCompleted { item });
        }
        let text = std::mem::take(&mut self.text);
        if !text.is_empty() {
            self.last_message = Some(text.clone());
            let item = Item { id: self.id(), details: Details::AgentMessage { text } };
            lines.push(ThreadEvent::ItemCompleted { item });
        }
        for call in std::mem::take(&mut self.calls) {
            let arguments: Value =
                call.function.arguments.as_deref().and_then(|a| serde_json::from_str(a).ok()).unwrap_or(json!({}));
            let pending = match call.function.name.as_str() {
                "Shell" => {
                    let command = str_arg(&arguments, "command");
                    Pending::Started(Box::new(Item {
                        id: self.id(),
                        details: Details::CommandExecution {
                            command,
                            aggregated_output: String::new(),
                            exit_code: None,
                            status: Status::InProgress,
                        },
                    }))
                }
                "WriteFile" | "StrReplaceFile" => {
                    let path = absolute(&lookup.work_dir, &str_arg(&arguments, "path"));
                    let kind = if path.exists() { ChangeKind::Update } else { ChangeKind::Add };
                    Pending::Edit(vec![FileChange { path: path.display().to_string(), kind }])
                }
                "SetTodoList" => Pending::Todo,
                "SearchWeb" => {
                    let query = str_arg(&arguments, "query");
                    let action = SearchAction { kind: "search", query: query.clone() };
                    Pending::Started(Box::new(Item { id: self.id(), details: Details::WebSearch { query, action } }))
                }
                name => match (lookup.mcp_server)(name) {
                    Some(server) => Pending::Started(Box::new(Item {
                        id: self.id(),
                        details: Details::McpToolCall {
                            server,
                            tool: name.to_string(),
                            arguments,
                            result: None,
                            error: None,
                            status: Status::InProgress,
                        },
                    })),
                    None => continue,
                },
            };
            if let Pending::Started(item) = &pending {
                lines.push(ThreadEvent::ItemStarted { item: (**item).clone() });
            }
            self.pending.insert(call.id.clone(), pending);
        }
        lines
    }

    fn result(&mut self, call_id: &str, value: &ToolReturnValue) -> Vec<ThreadEvent> {
        match self.pending.remove(call_id) {
            None => Vec::new(),
            Some(Pending::Started(mut item)) => {
                complete(&mut item.details, value);
                vec![ThreadEvent::ItemCompleted { item: *item }]
            }
            Some(Pending::Edit(changes)) if !value.is_error => {
                let id = self.id();
                let started = Item {
                    id: id.clone(),
                    details: Details::FileChange { changes: changes.clone(), status: Status::InProgress },
                };
                let done = Item { id, details: Details::FileChange { changes, status: Status::Completed } };
                vec![ThreadEvent::ItemStarted { item: started }, ThreadEvent::ItemCompleted { item: done }]
            }
            Some(Pending::Edit(_)) => Vec::new(),
            Some(Pending::Todo) => {
                let Some(items) = todo_items(value) else { return Vec::new() };
                match &mut self.todo {
                    Some((id, last)) => {
                        last.clone_from(&items);
                        let item = Item { id: id.clone(), details: Details::TodoList { items } };
                        vec![ThreadEvent::ItemUpdated { item }]
                    }
                    None => {
                        let id = self.id();
                        self.todo = Some((id.clone(), items.clone()));
                        vec![ThreadEvent::ItemStarted { item: Item { id, details: Details::TodoList { items } } }]
                    }
                }
            }
        }
    }
}

/// The `error` line of a retry: codex's wording, kiwi's reason.
fn reconnecting(retry: &StepRetry) -> String {
    let reason = match retry.status_code {
        Some(status) => format!("{}: HTTP {status}", retry.error_type),
        None => retry.error_type.clone(),
    };
    format!("Reconnecting... {}/{} ({reason})", retry.next_attempt - 1, retry.max_attempts.saturating_sub(1))
}

fn str_arg(arguments: &Value, key: &str) -> String {
    arguments.get(key).and_then(Value::as_str).unwrap_or_default().to_string()
}

fn absolute(work_dir: &Path, path: &str) -> PathBuf {
    crate::session::store::normalize(Path::new(path), work_dir)
}

/// The output text of a result (text parts joined).
fn output_text(value: &ToolReturnValue) -> String {
    match &value.output {
        ToolOutput::Text(text) => text.clone(),
        ToolOutput::Parts(parts) => parts.iter().filter_map(ContentPart::as_text).collect(),
    }
}

/// A finished item from its tool's result.
fn complete(details: &mut Details, value: &ToolReturnValue) {
    match details {
        Details::CommandExecution { aggregated_output, exit_code, status, .. } => {
            *aggregated_output = output_text(value);
            *exit_code = shell_exit_code(value);
            *status = if value.is_error { Status::Failed } else { Status::Completed };
        }
        Details::McpToolCall { result, error, status, .. } => {
            *status = if value.is_error { Status::Failed } else { Status::Completed };
            match &value.output {
                // The server answered (`isError` or not): its content blocks.
                ToolOutput::Parts(parts) => {
                    *result =
                        Some(McpResult { content: parts.iter().map(mcp_block).collect(), structured_content: None })
                }
                // The call could not be made (refused, timed out, the server failed).
                ToolOutput::Text(_) if value.is_error => *error = Some(ErrorText { message: value.message.clone() }),
                ToolOutput::Text(text) => {
                    *result = Some(McpResult {
                        content: vec![json!({"type": "text", "text": text})],
                        structured_content: None,
                    })
                }
            }
        }
        _ => {}
    }
}

/// The exit status kiwi's Shell result states (`Command failed with exit code: N.`); 124 for a
/// timeout, 128 + N for a signal, as a shell reports them; `None` when the command never ran.
fn shell_exit_code(value: &ToolReturnValue) -> Option<i64> {
    let message = value.message.as_str();
    if message.starts_with("Command executed successfully") {
        return Some(0);
    }
    if let Some(rest) = message.strip_prefix("Command failed with exit code: ") {
        return rest.split(|c: char| !(c.is_ascii_digit() || c == '-')).next().and_then(|n| n.parse().ok());
    }
    if message.starts_with("Command killed by timeout") {
        return Some(124);
    }
    if let Some(rest) = message.strip_prefix("Command terminated by signal: ") {
        let name = rest.split(['.', ' ']).next().unwrap_or_default();
        return signal_number(name).map(|n| 128 + n);
    }
    None
}

fn signal_number(name: &str) -> Option<i64> {
    let known = [("SIGHUP", 1), ("SIGINT", 2), ("SIGQUIT", 3), ("SIGABRT", 6), ("SIGKILL", 9), ("SIGSEGV", 11)];
    let more = [("SIGPIPE", 13), ("SIGALRM", 14), ("SIGTERM", 15)];
    known.iter().chain(&more).find(|(n, _)| *n == name).map(|(_, v)| *v)
}

/// One content part as an MCP content block (the shape codex hands on).
fn mcp_block(part: &ContentPart) -> Value {
    match part {
        ContentPart::Text { text } => json!({"type": "text", "text": text}),
        ContentPart::ImageUrl { image_url } => media_block("image", &image_url.url),
        ContentPart::AudioUrl { audio_url } => media_block("audio", &audio_url.url),
        ContentPart::VideoUrl { video_url } => json!({"type": "text", "text": video_url.url}),
        ContentPart::Think { think, .. } => json!({"type": "text", "text": think}),
    }
}

fn media_block(kind: &str, url: &str) -> Value {
    let parsed = url.strip_prefix("data:").and_then(|rest| rest.split_once(";base64,"));
    match parsed {
        Some((mime, data)) => json!({"type": kind, "data": data, "mimeType": mime}),
        None => json!({"type": "text", "text": url}),
    }
}

/// The list a `SetTodoList` result shows (`None` when it changed nothing: a read or an error).
fn todo_items(value: &ToolReturnValue) -> Option<Vec<TodoEntry>> {
    if value.is_error {
        return None;
    }
    value.display.iter().find_map(|block| match block {
        DisplayBlock::Todo { items } => Some(
            items
                .iter()
                .map(|i| TodoEntry { text: i.title.clone(), completed: i.status == TodoStatus::Done })
                .collect(),
        ),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{StatusUpdate, TodoItem, TokenUsage, ToolCallPart, ToolResult};

    fn lookup(dir: &Path) -> Lookup {
        Lookup { work_dir: dir.to_path_buf(), mcp_server: Box::new(|tool| (tool == "add").then(|| "calc".to_string())) }
    }

    fn step_end(input: u64, output: u64) -> Event {
        let mut status = StatusUpdate::plan_mode(false);
        status.token_usage =
            Some(TokenUsage { input_other: input, output, input_cache_read: 5, input_cache_creation: 0 });
        Event::StatusUpdate(status)
    }

    fn call(id: &str, name: &str, arguments: Value) -> Event {
        Event::ToolCall(ToolCall::new(id, name, Some(arguments.to_string())))
    }

    fn result(id: &str, value: ToolReturnValue) -> Event {
        Event::ToolResult(ToolResult { tool_call_id: id.into(), return_value: value })
    }

    fn run(items: &mut TurnItems, events: &[Event], lookup: &Lookup) -> Vec<Value> {
        events.iter().flat_map(|e| items.push(e, lookup)).map(|l| serde_json::to_value(l).unwrap()).collect()
    }

    #[test]
    fn a_step_becomes_items_in_the_models_order() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("old.txt"), "x").unwrap();
        let lookup = lookup(dir.path());
        let mut items = TurnItems::new(Usage { input_tokens: 100, ..Default::default() });
        let lines = run(
            &mut items,
            &[
                Event::StepBegin { n: 1 },
                Event::ContentPart(ContentPart::think("Let me ")),
                Event::ContentPart(ContentPart::think("look")),
                Event::ContentPart(ContentPart::text("Running it.")),
                Event::ToolCall(ToolCall::new("c1", "Shell", Some("{\"command\":".into()))),
                Event::ToolCallPart(ToolCallPart { arguments_part: Some("\"echo hi\"}".into()) }),
                call("c2", "WriteFile", json!({"path": "new.txt", "content": "a"})),
                call("c3", "StrReplaceFile", json!({"path": "old.txt"})),
                call("c4", "add", json!({"a": 2})),
                call("c5", "ReadFile", json!({"path": "x"})),
                step_end(10, 2),
                result("c1", ToolReturnValue::ok("hi\n", "Command executed successfully.")),
                result("c2", ToolReturnValue::ok("", "File successfully overwritten.")),
                result("c3", ToolReturnValue::error("String not found", "Not found")),
                result(
                    "c4",
                    crate::mcp::content::tool_result(
                        &json!({"content": [{"type": "text", "text": "sum"}], "isError": true}),
                    ),
                ),
                result("c5", ToolReturnValue::ok("x", "")),
            ],
            &lookup,
        );
        let kinds: Vec<String> =
            lines.iter().map(|l| format!("{} {} {}", l["type"], l["item"]["id"], l["item"]["type"])).collect();
        assert_eq!(
            kinds,
            [
                r#""item.completed" "item_0" "reasoning""#,
                r#""item.completed" "item_1" "agent_message""#,
                r#""item.started" "item_2" "command_execution""#,
                r#""item.started" "item_3" "mcp_tool_call""#,
                r#""item.completed" "item_2" "command_execution""#,
                r#""item.started" "item_4" "file_change""#,
                r#""item.completed" "item_4" "file_change""#,
                r#""item.completed" "item_3" "mcp_tool_call""#,
            ]
        );
        assert_eq!(lines[0]["item"]["text"], "Let me look");
        assert_eq!(lines[2]["item"]["command"], "echo hi");
        assert_eq!(lines[4]["item"]["aggregated_output"], "hi\n");
        assert_eq!(
            (lines[4]["item"]["exit_code"].as_i64(), lines[4]["item"]["status"].as_str()),
            (Some(0), Some("completed"))
        );
        let path = dir.path().join("new.txt").display().to_string();
        assert_eq!(lines[6]["item"]["changes"], json!([{"path": path, "kind": "add"}]));
        assert_eq!(lines[7]["item"]["status"], "failed");
        assert_eq!(lines[7]["item"]["result"]["content"], json!([{"type": "text", "text": "sum"}]));
        assert_eq!(items.usage.input_tokens, 115);
        assert_eq!(items.usage.cached_input_tokens, 5);
        assert_eq!(items.last_message.as_deref(), Some("Running it."));
    }

    #[test]
    fn the_todo_list_is_one_item_completed_at_the_end() {
        let lookup = lookup(Path::new("/"));
        let mut items = TurnItems::default();
        let todo = |done: bool| {
            let status = if done { TodoStatus::Done } else { TodoStatus::Pending };
            ToolReturnValue::ok("", "")
                .with_display(vec![DisplayBlock::Todo { items: vec![TodoItem { title: "fix".into(), status }] }])
        };
        let lines = run(
            &mut items,
            &[
                call("t1", "SetTodoList", json!({})),
                step_end(1, 1),
                result("t1", todo(false)),
                call("t2", "SetTodoList", json!({})),
                step_end(1, 1),
                result("t2", todo(true)),
            ],
            &lookup,
        );
        assert_eq!(lines[0]["type"], "item.started");
        assert_eq!(lines[1]["type"], "item.updated");
        assert_eq!(lines[1]["item"]["id"], lines[0]["item"]["id"]);
        let end = serde_json::to_value(&items.finish()[0]).unwrap();
        assert_eq!(end["type"], "item.completed");
        assert_eq!(end["item"]["items"], json!([{"text": "fix", "completed": true}]));
        assert!(items.finish().is_empty());
    }

    #[test]
    fn retries_drop_the_attempt_and_say_so() {
        let lookup = lookup(Path::new("/"));
        let mut items = TurnItems::default();
        let retry = StepRetry {
            n: 1,
            next_attempt: 2,
            max_attempts: 3,
            wait_s: 0.1,
            error_type: "APIStatusError".into(),
            status_code: Some(503),
        };
        let lines = run(
            &mut items,
            &[
                Event::ContentPart(ContentPart::text("partial")),
                Event::StepRetry(retry),
                Event::ContentPart(ContentPart::text("whole")),
                step_end(1, 1),
            ],
            &lookup,
        );
        assert_eq!(lines[0], json!({"type": "error", "message": "Reconnecting... 1/2 (APIStatusError: HTTP 503)"}));
        assert_eq!(lines[1]["item"]["text"], "whole");
    }

    #[test]
    fn searches_and_unknown_tools() {
        let lookup = lookup(Path::new("/"));
        let mut items = TurnItems::default();
        let lines = run(
            &mut items,
            &[
                call("q1", "SearchWeb", json!({"query": "kiwi fruit"})),
                call("g1", "Glob", json!({"pattern": "*"})),
                step_end(1, 1),
                result("q1", ToolReturnValue::ok("results", "")),
                result("g1", ToolReturnValue::ok("a", "")),
            ],
            &lookup,
        );
        let search = json!({"id": "item_0", "type": "web_search", "query": "kiwi fruit", "action": {"type": "search", "query": "kiwi fruit"}});
        assert_eq!(
            lines,
            vec![json!({"type": "item.started", "item": search}), json!({"type": "item.completed", "item": search})]
        );
    }

    #[test]
    fn shell_exit_codes() {
        let code = |m: &str| shell_exit_code(&ToolReturnValue::error(m, ""));
        assert_eq!(code("Command failed with exit code: 3."), Some(3));
        assert_eq!(code("Command killed by timeout (5s)"), Some(124));
        assert_eq!(code("Command terminated by signal: SIGKILL."), Some(137));
        assert_eq!(code("Command cannot be empty."), None);
    }
}
