//! Typed protocol vocabulary shared by every front end: content parts, display blocks, tool calls
//! and results, events and requests, and the params/results of the client methods.

pub mod content;
pub mod display;
pub mod event;
pub mod methods;
pub mod tool;

pub use content::{ContentPart, MediaUrl, UserInput};
pub use display::{DisplayBlock, TodoItem, TodoStatus};
pub use event::{
    ApprovalDecision, ApprovalRequest, ApprovalResponse, Event, Request, StatusUpdate, SubagentEvent, TokenUsage,
    ToolCallRequest, WireMessage,
};
pub use tool::{FunctionCall, ToolCall, ToolCallPart, ToolOutput, ToolResult, ToolReturnValue};
