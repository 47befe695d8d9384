//! The narrow interface through which a running tool reaches its host (the soul): asking the
//! user for approval and handing a call to a client-owned tool. Tools know nothing else of the
//! agent loop, its events or the front end, so the layers point one way (soul → tools).

use futures::future::BoxFuture;

use crate::protocol::{DisplayBlock, ToolReturnValue};

/// What a tool asks approval for.
#[derive(Debug, Clone)]
pub struct ApprovalAsk {
    pub tool_call_id: String,
    pub sender: String,
    pub action: String,
    pub description: String,
    pub display: Vec<DisplayBlock>,
}

/// A call of a client-owned tool, with the arguments exactly as the model sent them.
#[derive(Debug, Clone)]
pub struct ClientToolCall {
    pub tool_call_id: String,
    pub name: String,
    pub arguments: Option<String>,
}

pub trait ToolHost: Send + Sync {
    /// Asks for approval (unless auto-approved); true when the call may go ahead. A request that
    /// cannot be answered (client gone, turn cancelled) is a rejection.
    fn request_approval(&self, ask: ApprovalAsk) -> BoxFuture<'_, bool>;

    /// Hands the call to the client; `None` when no answer can come (the client is gone).
    fn call_client_tool(&self, call: ClientToolCall) -> BoxFuture<'_, Option<ToolReturnValue>>;
}
