//! What a running tool may use: the call id, the agent's environment and its host.

use std::sync::Arc;

use super::host::{ApprovalAsk, ToolHost};
use crate::agent_env::AgentEnv;
use crate::protocol::DisplayBlock;

#[derive(Clone)]
pub struct ToolCallContext {
    pub tool_call_id: String,
    /// The arguments exactly as the model sent them (external tools forward them verbatim).
    pub raw_arguments: Option<String>,
    pub env: Arc<AgentEnv>,
    pub host: Arc<dyn ToolHost>,
}

impl ToolCallContext {
    /// Asks for approval of this call; true when it may go ahead.
    pub async fn approve(&self, sender: &str, action: &str, description: String, display: Vec<DisplayBlock>) -> bool {
        self.host
            .request_approval(ApprovalAsk {
                tool_call_id: self.tool_call_id.clone(),
                sender: sender.to_string(),
                action: action.to_string(),
                description,
                display,
                arguments: self.raw_arguments.clone(),
            })
            .await
    }
}
