//! Every line of the Claude dialect, as typed serde shapes (`docs/print-mode.md` B.2, B.3): what kiwi
//! writes (system, assistant, user, stream_event, result, control lines) and what it reads.
//!
//! Invariants: field order is the order the spec's examples show (serde writes struct fields in
//! declaration order); optional members the real CLI omits are skipped when absent, never
//! written as `null`; readers ignore unknown keys, as the spec asks of both sides.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::protocol::{DisplayBlock, ToolOutput};

/// A line kiwi writes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum OutLine {
    System(SystemLine),
    Assistant(AssistantLine),
    User(UserLine),
    StreamEvent(StreamEventLine),
    Result(ResultLine),
    ControlRequest(ControlRequestLine),
    ControlResponse(ControlResponseLine),
    ControlCancelRequest(ControlCancelLine),
}

/// `system` lines, by `subtype`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "subtype", rename_all = "snake_case")]
pub enum SystemLine {
    Init(Box<InitLine>),
    SessionStateChanged(SessionStateLine),
    CompactBoundary(CompactBoundaryLine),
    /// A provider call failed with a retryable error and is retried after `retry_delay_ms`.
    ApiRetry(ApiRetryLine),
    /// kiwi's own: something the host should know that is not an error of a turn (e.g. MCP
    /// servers that were configured but are not started because kiwi has no MCP yet).
    Warning(WarningLine),
    /// A subagent started for an `Agent` call (`docs/print-mode.md` B.3a).
    TaskStarted(TaskStartedLine),
    /// A subagent task went on: after each of its tool calls.
    TaskProgress(TaskProgressLine),
    /// A task's state changed (`patch.status` terminal when it ended).
    TaskUpdated(TaskUpdatedLine),
    /// A task ended: its terminal frame.
    TaskNotification(TaskNotificationLine),
    /// The permission mode changed (`set_permission_mode`).
    Status(StatusLine),
    /// A call was denied without asking (`dontAsk`).
    PermissionDenied(PermissionDeniedLine),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskStartedLine {
    pub task_id: String,
    pub tool_use_id: String,
    pub description: String,
    /// A subagent's type (`local_agent` tasks only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_type: Option<String>,
    /// `local_agent` (a subagent) or `local_bash` (a background shell command).
    pub task_type: String,
    pub is_backgrounded: bool,
    /// A subagent's prompt (`local_agent` tasks only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    pub session_id: String,
    pub uuid: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskProgressLine {
    pub task_id: String,
    pub tool_use_id: String,
    pub description: String,
    pub usage: TaskUsage,
    pub last_tool_name: String,
    pub session_id: String,
    pub uuid: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskUpdatedLine {
    pub task_id: String,
    pub patch: Value,
    pub session_id: String,
    pub uuid: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskNotificationLine {
    pub task_id: String,
    pub tool_use_id: String,
    /// `completed`, `failed` or `stopped`.
    pub status: String,
    pub output_file: String,
    pub summary: String,
    pub usage: TaskUsage,
    pub session_id: String,
    pub uuid: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskUsage {
    pub total_tokens: u64,
    pub tool_uses: u64,
    pub duration_ms: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusLine {
    pub status: Option<String>,
    #[serde(rename = "permissionMode")]
    pub permission_mode: String,
    pub session_id: String,
    pub uuid: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PermissionDeniedLine {
    pub tool_name: String,
    pub tool_use_id: String,
    pub decision_reason_type: String,
    pub message: String,
    pub session_id: String,
    pub uuid: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InitLine {
    pub cwd: String,
    pub session_id: String,
    pub tools: Vec<String>,
    pub mcp_servers: Vec<McpServerStatus>,
    pub model: String,
    #[serde(rename = "permissionMode")]
    pub permission_mode: String,
    pub slash_commands: Vec<String>,
    #[serde(rename = "apiKeySource")]
    pub api_key_source: String,
    /// The Claude Code release whose headless protocol kiwi follows (hosts gate features on it;
    /// the SDK warns when it is missing). Not a claim to be Claude Code.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claude_code_version: Option<String>,
    pub output_style: String,
    pub agents: Vec<String>,
    pub skills: Vec<String>,
    pub plugins: Vec<Value>,
    pub uuid: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpServerStatus {
    pub name: String,
    pub status: String,
    /// `sdk` for the host's in-process servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionState {
    Running,
    RequiresAction,
    Idle,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionStateLine {
    pub state: SessionState,
    /// The frame is sent only because the host asked for it (the SDK keeps it out of its
    /// caller's stream).
    pub sdk_host_only: bool,
    pub session_id: String,
    pub uuid: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactBoundaryLine {
    pub compact_metadata: CompactMetadata,
    pub session_id: String,
    pub uuid: String,
}

/// `system/api_retry`: the retry counters of Claude Code's own line. `attempt` counts retries
/// (the first retry is 1) and `max_retries` is the number of retries the call may take.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiRetryLine {
    pub attempt: u32,
    pub max_retries: u32,
    pub retry_delay_ms: u64,
    /// The HTTP status; `null` for connection errors and timeouts.
    pub error_status: Option<u16>,
    /// The SDK's error class of the status ([`error_class`]).
    pub error: String,
    pub session_id: String,
    pub uuid: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactMetadata {
    pub trigger: String,
    pub pre_tokens: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WarningLine {
    pub message: String,
    pub session_id: String,
    pub uuid: String,
}

/// The SDK's error class (`SDKAssistantMessageError`) for an API error with this HTTP status, as
/// `docs/print-mode.md` C.2 lists it: 400 `invalid_request`, 401/403 `authentication_failed`, 402
/// `billing_error`, 429 `rate_limit`, 5xx `server_error`, anything else (no status: connection
/// errors, timeouts, empty answers) `unknown`. The one map of both the synthetic error message
/// and `system/api_retry`.
pub fn error_class(status: Option<u16>) -> &'static str {
    match status {
        Some(400) => "invalid_request",
        Some(401 | 403) => "authentication_failed",
        Some(402) => "billing_error",
        Some(429) => "rate_limit",
        Some(500..=599) => "server_error",
        _ => "unknown",
    }
}

/// Token counts in Anthropic's names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub output_tokens: u64,
}

impl Usage {
    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.cache_creation_input_tokens += other.cache_creation_input_tokens;
        self.cache_read_input_tokens += other.cache_read_input_tokens;
        self.output_tokens += other.output_tokens;
    }
}

/// A content block of a message (Anthropic Messages API shapes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Block {
    Text { text: String },
    Thinking { thinking: String, signature: String },
    ToolUse { id: String, name: String, input: Value },
    ToolResult { tool_use_id: String, content: ToolResultContent, is_error: bool },
    Image { source: ImageSource },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolResultContent {
    Text(String),
    Blocks(Vec<Block>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ImageSource {
    Base64 { media_type: String, data: String },
    Url { url: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssistantMessage {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub role: String,
    pub model: String,
    pub content: Vec<Block>,
    pub stop_reason: Option<String>,
    pub stop_sequence: Option<String>,
    pub usage: Usage,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AssistantLine {
    pub message: AssistantMessage,
    pub parent_tool_use_id: Option<String>,
    pub session_id: String,
    pub uuid: String,
    /// The subagent a line comes from (with `parent_tool_use_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_type: Option<String>,
    /// Marks a synthetic message standing for an API error (`rate_limit`, `server_error`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_error_status: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserMessage {
    pub role: String,
    pub content: UserContent,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum UserContent {
    Text(String),
    Blocks(Vec<Value>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserLine {
    pub message: UserMessage,
    pub parent_tool_use_id: Option<String>,
    pub session_id: String,
    pub uuid: String,
    /// The subagent a line comes from (with `parent_tool_use_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subagent_type: Option<String>,
    /// The tool's own structured result (kiwi: output, message, display).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_result: Option<ToolUseResult>,
    #[serde(rename = "isReplay", default, skip_serializing_if = "Option::is_none")]
    pub is_replay: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolUseResult {
    pub output: ToolOutput,
    pub message: String,
    pub display: Vec<DisplayBlock>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamEventLine {
    pub event: StreamEvent,
    pub parent_tool_use_id: Option<String>,
    pub session_id: String,
    pub uuid: String,
}

/// Anthropic streaming events (`--include-partial-messages`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    MessageStart { message: AssistantMessage },
    ContentBlockStart { index: u32, content_block: Block },
    ContentBlockDelta { index: u32, delta: Delta },
    ContentBlockStop { index: u32 },
    MessageDelta { delta: MessageDeltaBody, usage: OutputUsage },
    MessageStop {},
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Delta {
    TextDelta { text: String },
    ThinkingDelta { thinking: String },
    SignatureDelta { signature: String },
    InputJsonDelta { partial_json: String },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MessageDeltaBody {
    pub stop_reason: Option<String>,
    pub stop_sequence: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputUsage {
    pub output_tokens: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResultSubtype {
    Success,
    ErrorMaxTurns,
    ErrorDuringExecution,
    /// Claude Code's budget stop: the session's dollar budget (`--max-budget-usd`), and its
    /// token budget too.
    ErrorMaxBudgetUsd,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResultLine {
    pub subtype: ResultSubtype,
    pub is_error: bool,
    pub duration_ms: u64,
    pub duration_api_ms: u64,
    pub num_turns: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    pub stop_reason: Option<String>,
    pub session_id: String,
    /// The session's cost in US dollars (continued across resumes); 0 unless prices are known.
    #[serde(serialize_with = "js_number")]
    pub total_cost_usd: f64,
    pub usage: Usage,
    #[serde(rename = "modelUsage")]
    pub model_usage: BTreeMap<String, ModelUsage>,
    pub permission_denials: Vec<PermissionDenial>,
    pub uuid: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errors: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_error_status: Option<u16>,
    /// The object the model gave the `StructuredOutput` tool (`--json-schema`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_output: Option<Value>,
}

/// A number as Claude Code (JavaScript) writes it: whole values without a fraction (`0`, not
/// `0.0`), others in their shortest form.
fn js_number<S: serde::Serializer>(n: &f64, s: S) -> Result<S::Ok, S::Error> {
    if n.fract() == 0.0 && n.abs() < 9e15 { s.serialize_i64(*n as i64) } else { s.serialize_f64(*n) }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_input_tokens: u64,
    pub cache_creation_input_tokens: u64,
    pub web_search_requests: u64,
    /// What this model's calls in this run cost; 0 unless prices are known.
    #[serde(rename = "costUSD", serialize_with = "js_number")]
    pub cost_usd: f64,
    pub context_window: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PermissionDenial {
    pub tool_name: String,
    pub tool_use_id: String,
    pub tool_input: Value,
}

/// A request kiwi sends to the host (only `can_use_tool`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlRequestLine {
    pub request_id: String,
    pub request: CanUseTool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CanUseTool {
    /// Always `can_use_tool`.
    pub subtype: String,
    pub tool_name: String,
    pub input: Value,
    pub tool_use_id: String,
    pub permission_suggestions: Vec<Value>,
    pub description: String,
    /// The subagent whose call asks (absent for the main agent), as the SDK names it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlCancelLine {
    pub request_id: String,
}

/// A control response in either direction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlResponseLine {
    pub response: ControlResponse,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "subtype", rename_all = "snake_case")]
pub enum ControlResponse {
    Success {
        request_id: String,
        /// Absent for an answer without a payload (`null`), as Claude Code sends them.
        #[serde(default, skip_serializing_if = "Value::is_null")]
        response: Value,
    },
    Error {
        request_id: String,
        error: String,
    },
}

/// The success payload of `initialize`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InitializeResponse {
    pub commands: Vec<CommandInfo>,
    pub agents: Vec<Value>,
    pub output_style: String,
    pub available_output_styles: Vec<String>,
    pub models: Vec<ModelInfo>,
    pub account: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CommandInfo {
    pub name: String,
    pub description: String,
    pub argument_hint: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelInfo {
    pub value: String,
    pub display_name: String,
    pub description: String,
}

/// A `can_use_tool` answer from the host (inside a success control response).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "behavior", rename_all = "snake_case")]
pub enum PermissionAnswer {
    Allow {
        #[serde(rename = "updatedInput", default)]
        updated_input: Option<Value>,
        #[serde(rename = "updatedPermissions", default)]
        updated_permissions: Option<Vec<Value>>,
    },
    Deny {
        #[serde(default)]
        message: String,
        #[serde(default)]
        interrupt: bool,
    },
}

/// A line the host writes (stream-json input), by `type`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum InLine {
    User(UserInLine),
    ControlRequest(ControlRequestIn),
    ControlResponse(ControlResponseLine),
    KeepAlive {},
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UserInLine {
    pub message: UserMessage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
}

/// A control request from the host; `request` is read by subtype (unknown ones get an error
/// response, so they are kept raw here).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ControlRequestIn {
    pub request_id: String,
    pub request: Value,
}

/// The control requests kiwi serves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "subtype", rename_all = "snake_case")]
pub enum HostRequest {
    Initialize {
        #[serde(default)]
        hooks: Option<BTreeMap<String, Vec<HookMatcherIn>>>,
        #[serde(default)]
        agents: Option<BTreeMap<String, AgentDefinitionIn>>,
    },
    Interrupt {},
    SetPermissionMode {
        mode: String,
    },
    SetModel {
        model: Option<String>,
    },
    SetMaxThinkingTokens {},
    GetContextUsage {},
    McpStatus {},
    /// Stops a background task the host saw start.
    StopTask {
        task_id: String,
    },
}

/// One matcher of `initialize.hooks`: callbacks the host runs at the event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookMatcherIn {
    #[serde(default)]
    pub matcher: Option<String>,
    #[serde(rename = "hookCallbackIds", default)]
    pub hook_callback_ids: Vec<String>,
    /// Seconds to wait for the host's answer.
    #[serde(default)]
    pub timeout: Option<f64>,
}

/// A subagent type the host defines (`initialize.agents`, `--agents`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentDefinitionIn {
    pub description: String,
    pub prompt: String,
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    #[serde(rename = "disallowedTools", default)]
    pub disallowed_tools: Option<Vec<String>>,
    #[serde(default)]
    pub model: Option<String>,
}

#[cfg(test)]
mod tests {
    #[test]
    fn dollars_are_written_as_claude_code_writes_numbers() {
        #[derive(Serialize)]
        struct N(#[serde(serialize_with = "js_number")] f64);
        let text = |n: f64| serde_json::to_string(&N(n)).unwrap();
        assert_eq!(text(0.0), "0");
        assert_eq!(text(2.0), "2");
        assert_eq!(text(0.025), "0.025");
        assert_eq!(text(1.5), "1.5");
    }

    use super::*;

    fn rt<T: Serialize + for<'de> Deserialize<'de>>(json: &str) {
        let value: T = serde_json::from_str(json).unwrap();
        assert_eq!(serde_json::to_string(&value).unwrap(), json);
    }

    #[test]
    fn the_worked_example_round_trips() {
        // `docs/print-mode.md` C.5, line by line.
        for line in [
            r#"{"type":"system","subtype":"init","cwd":"/w","session_id":"S","tools":["Shell","ReadFile","..."],"mcp_servers":[],"model":"kimi-k2","permissionMode":"bypassPermissions","slash_commands":["init","compact","clear","yolo"],"apiKeySource":"none","output_style":"default","agents":[],"skills":[],"plugins":[],"uuid":"U1"}"#,
            r#"{"type":"assistant","message":{"id":"msg_a","type":"message","role":"assistant","model":"kimi-k2","content":[{"type":"text","text":"Let me check."}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":900,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":20}},"parent_tool_use_id":null,"session_id":"S","uuid":"U2"}"#,
            r#"{"type":"assistant","message":{"id":"msg_a","type":"message","role":"assistant","model":"kimi-k2","content":[{"type":"tool_use","id":"tool_1","name":"Shell","input":{"command":"ls"}}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":900,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":20}},"parent_tool_use_id":null,"session_id":"S","uuid":"U3"}"#,
            r#"{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"tool_1","content":"Command executed successfully.\na.py\nb.py\n","is_error":false}]},"parent_tool_use_id":null,"session_id":"S","uuid":"U4"}"#,
            r#"{"type":"result","subtype":"success","is_error":false,"duration_ms":4100,"duration_api_ms":3900,"num_turns":2,"result":"There are two files.","stop_reason":"end_turn","session_id":"S","total_cost_usd":0,"usage":{"input_tokens":1850,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":28},"modelUsage":{},"permission_denials":[],"uuid":"U6"}"#,
        ] {
            rt::<OutLine>(line);
        }
    }

    #[test]
    fn other_output_lines_round_trip() {
        for line in [
            r#"{"type":"system","subtype":"session_state_changed","state":"requires_action","sdk_host_only":true,"session_id":"S","uuid":"U"}"#,
            r#"{"type":"system","subtype":"compact_boundary","compact_metadata":{"trigger":"manual","pre_tokens":0},"session_id":"S","uuid":"U"}"#,
            r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}},"parent_tool_use_id":null,"session_id":"S","uuid":"U"}"#,
            r#"{"type":"stream_event","event":{"type":"content_block_start","index":1,"content_block":{"type":"thinking","thinking":"","signature":""}},"parent_tool_use_id":null,"session_id":"S","uuid":"U"}"#,
            r#"{"type":"stream_event","event":{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":4}},"parent_tool_use_id":null,"session_id":"S","uuid":"U"}"#,
            r#"{"type":"stream_event","event":{"type":"message_stop"},"parent_tool_use_id":null,"session_id":"S","uuid":"U"}"#,
            r#"{"type":"result","subtype":"error_during_execution","is_error":true,"duration_ms":1,"duration_api_ms":1,"num_turns":1,"stop_reason":null,"session_id":"S","total_cost_usd":0,"usage":{"input_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0},"modelUsage":{"m":{"inputTokens":1,"outputTokens":2,"cacheReadInputTokens":0,"cacheCreationInputTokens":0,"webSearchRequests":0,"costUSD":0,"contextWindow":100}},"permission_denials":[{"tool_name":"Shell","tool_use_id":"t","tool_input":{"command":"rm"}}],"uuid":"U","errors":["Interrupted by user"]}"#,
            r#"{"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"rm -rf build"},"tool_use_id":"toolu_01","permission_suggestions":[],"description":"..."}}"#,
            r#"{"type":"control_response","response":{"subtype":"success","request_id":"r","response":{}}}"#,
            r#"{"type":"control_response","response":{"subtype":"error","request_id":"r","error":"Unsupported control request subtype: x"}}"#,
            r#"{"type":"control_cancel_request","request_id":"r1"}"#,
            r#"{"type":"user","message":{"role":"user","content":"hi"},"parent_tool_use_id":null,"session_id":"S","uuid":"U","isReplay":true}"#,
        ] {
            rt::<OutLine>(line);
        }
    }

    #[test]
    fn input_lines_parse() {
        let line: InLine = serde_json::from_str(
            r#"{"type":"user","message":{"role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AA=="}}]},"parent_tool_use_id":null,"session_id":"","priority":"now"}"#,
        )
        .unwrap();
        assert!(
            matches!(line, InLine::User(UserInLine { message: UserMessage { content: UserContent::Blocks(b), .. }, .. }) if b.len() == 2)
        );
        let line: InLine = serde_json::from_str(
            r#"{"type":"control_request","request_id":"x","request":{"subtype":"initialize","hooks":null}}"#,
        )
        .unwrap();
        let InLine::ControlRequest(req) = line else { panic!() };
        assert_eq!(
            serde_json::from_value::<HostRequest>(req.request).unwrap(),
            HostRequest::Initialize { hooks: None, agents: None }
        );
        let answer: ControlResponseLine = serde_json::from_str(
            r#"{"response":{"subtype":"success","request_id":"r","response":{"behavior":"allow","updatedInput":{"command":"ls"}}}}"#,
        )
        .unwrap();
        let ControlResponse::Success { response, .. } = answer.response else { panic!() };
        assert_eq!(
            serde_json::from_value::<PermissionAnswer>(response).unwrap(),
            PermissionAnswer::Allow {
                updated_input: Some(serde_json::json!({"command":"ls"})),
                updated_permissions: None
            }
        );
        rt::<PermissionAnswer>(r#"{"behavior":"deny","message":"no","interrupt":true}"#);
        assert!(matches!(serde_json::from_str::<InLine>(r#"{"type":"keep_alive"}"#).unwrap(), InLine::KeepAlive {}));
        assert!(serde_json::from_str::<InLine>(r#"{"type":"bogus"}"#).is_err());
        assert!(serde_json::from_str::<InLine>(r#"{"type":"user"}"#).is_err());
    }

    #[test]
    fn error_classes_follow_the_spec() {
        let cases = [
            (Some(400), "invalid_request"),
            (Some(401), "authentication_failed"),
            (Some(403), "authentication_failed"),
            (Some(402), "billing_error"),
            (Some(404), "unknown"),
            (Some(422), "unknown"),
            (Some(429), "rate_limit"),
            (Some(500), "server_error"),
            (Some(529), "server_error"),
            (Some(200), "unknown"),
            (None, "unknown"),
        ];
        for (status, class) in cases {
            assert_eq!(error_class(status), class, "{status:?}");
        }
    }

    #[test]
    fn initialize_payload_has_the_spec_keys() {
        let r = InitializeResponse {
            commands: vec![CommandInfo {
                name: "compact".into(),
                description: "d".into(),
                argument_hint: String::new(),
            }],
            agents: vec![],
            output_style: "default".into(),
            available_output_styles: vec!["default".into()],
            models: vec![ModelInfo { value: "k".into(), display_name: "k".into(), description: String::new() }],
            account: BTreeMap::new(),
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"commands":[{"name":"compact","description":"d","argumentHint":""}],"agents":[],"output_style":"default","available_output_styles":["default"],"models":[{"value":"k","displayName":"k","description":""}],"account":{}}"#
        );
    }
}
