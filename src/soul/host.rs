//! The soul's side of the tools' host interface: approvals through the agent's approval state
//! and client-owned tool calls as requests on the event sink.

use futures::future::BoxFuture;

use super::approval::Approval;
use super::sink::{ClientAnswer, EventSink};
use crate::protocol::{Request, ToolCallRequest, ToolReturnValue};
use crate::tools::{ApprovalAsk, ClientToolCall, ToolHost};

pub struct SoulToolHost {
    approval: Approval,
    sink: EventSink,
}

impl SoulToolHost {
    pub fn new(approval: Approval, sink: EventSink) -> Self {
        Self { approval, sink }
    }
}

impl ToolHost for SoulToolHost {
    fn request_approval(&self, ask: ApprovalAsk) -> BoxFuture<'_, bool> {
        Box::pin(self.approval.request(ask))
    }

    fn call_client_tool(&self, call: ClientToolCall) -> BoxFuture<'_, Option<ToolReturnValue>> {
        Box::pin(async move {
            let request = Request::ToolCallRequest(ToolCallRequest {
                id: call.tool_call_id,
                name: call.name,
                arguments: call.arguments,
            });
            match self.sink.request(request).await.await {
                Ok(ClientAnswer::ToolResult(value)) => Some(value),
                _ => None,
            }
        })
    }
}
