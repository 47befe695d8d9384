//! The core's typed vocabulary, shared by every front end: content parts, display blocks, tool
//! calls and results, events and requests. They serialize in the shape the wire protocol and
//! `wire.jsonl` use; the other front ends map them onto their own shapes.

pub mod content;
pub mod display;
pub mod event;
pub mod tool;

pub use content::{ContentPart, MediaUrl, UserInput};
pub use display::{DisplayBlock, TodoItem, TodoStatus};
pub use event::{
    ApprovalDecision, ApprovalRequest, ApprovalResponse, Event, Request, StatusUpdate, SubagentEvent, TokenUsage,
    ToolCallRequest, WireMessage,
};
pub use tool::{ErrorCause, FunctionCall, ResultKind, ToolCall, ToolCallPart, ToolOutput, ToolResult, ToolReturnValue};
