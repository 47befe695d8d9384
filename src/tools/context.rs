//! What a running tool may use: the call id, the agent's runtime and its approval channel.

use std::sync::Arc;

use crate::protocol::DisplayBlock;
use crate::runtime::Runtime;
use crate::soul::approval::{Approval, ApprovalAsk};
use crate::soul::event::EventSink;

#[derive(Clone)]
pub struct ToolCallContext {
    pub tool_call_id: String,
    /// The arguments exactly as the model sent them (external tools forward them verbatim).
    pub raw_arguments: Option<String>,
    pub runtime: Arc<Runtime>,
    pub approval: Approval,
    pub sink: EventSink,
}

impl ToolCallContext {
    /// Asks for approval of this call; true when it may go ahead.
    pub async fn approve(&self, sender: &str, action: &str, description: String, display: Vec<DisplayBlock>) -> bool {
        self.approval
            .request(ApprovalAsk {
                tool_call_id: self.tool_call_id.clone(),
                sender: sender.to_string(),
                action: action.to_string(),
                description,
                display,
            })
            .await
    }
}
