//! The core's typed vocabulary, shared by every front end: content parts, display blocks, tool
//! calls and results, events, status updates and requests. They serialize in the shape the wire
//! protocol (1.10) and `wire.jsonl` use; the other front ends map them onto their own shapes.
//! `assembly` is the one rule that rebuilds a step from the fragments the core streams.

pub mod assembly;
pub mod content;
pub mod display;
pub mod event;
pub mod hook;
pub mod request;
pub mod status;
pub mod tool;

pub use assembly::{Fed, Run, RunAssembler, Sorted, StepMessage};
pub use content::{ContentPart, MediaUrl, UserInput};
pub use display::{DisplayBlock, TodoItem, TodoStatus};
pub use event::{
    ApprovalDecision, ApprovalResponse, Event, HookAction, HookResolved, HookTriggered, Notification, StepRetry,
    SubagentEvent, WireMessage,
};
pub use hook::HookEvent;
pub use request::{
    ApprovalRequest, ApprovalSource, HookRequest, QuestionItem, QuestionOption, QuestionRequest, Request,
    ToolCallRequest,
};
pub use status::{McpServerState, McpServerStatus, McpStatus, StatusUpdate, StepCost, TokenUsage};
pub use tool::{ErrorCause, FunctionCall, ResultKind, ToolCall, ToolCallPart, ToolOutput, ToolResult, ToolReturnValue};
