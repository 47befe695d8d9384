//! The soul's side of the tools' host interface: approvals through the agent's approval state
//! and client-owned tool calls as requests on the event sink.
//!
//! An approval answer can say more than yes or no (a denial with a message, an approval with
//! edited arguments). A tool only sees a bool, so the host keeps such an answer per call id and
//! the step applies it once the tool returns ([`SoulToolHost::take_follow_up`]): the rejected run
//! is replaced by the denial's result, or by a second run with the edited arguments, which is
//! approved without asking again.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use futures::future::BoxFuture;

use super::approval::{Approval, Verdict};
use super::sink::{ClientAnswer, EventSink};
use crate::protocol::{Request, ToolCallRequest, ToolReturnValue};
use crate::tools::{ApprovalAsk, ClientToolCall, ToolHost};

/// What the step must do with a call after its tool returned.
#[derive(Debug, Clone, PartialEq)]
pub enum FollowUp {
    /// Run the call again with these arguments (already approved).
    Rerun(String),
    /// Report this result instead of the tool's.
    Replace(ToolReturnValue),
}

pub struct SoulToolHost {
    approval: Approval,
    sink: EventSink,
    /// Follow-ups by tool call id, taken by the step when the call's tool returns.
    follow_ups: Mutex<HashMap<String, FollowUp>>,
    /// Calls whose next approval request is granted without asking (their rerun).
    preapproved: Mutex<HashSet<String>>,
}

impl SoulToolHost {
    pub fn new(approval: Approval, sink: EventSink) -> Self {
        Self { approval, sink, follow_ups: Mutex::default(), preapproved: Mutex::default() }
    }

    /// The follow-up the approval answer of this call asked for, if any.
    pub fn take_follow_up(&self, tool_call_id: &str) -> Option<FollowUp> {
        let follow_up = self.follow_ups.lock().unwrap_or_else(|p| p.into_inner()).remove(tool_call_id);
        if matches!(follow_up, Some(FollowUp::Rerun(_))) {
            self.preapproved.lock().unwrap_or_else(|p| p.into_inner()).insert(tool_call_id.to_string());
        }
        follow_up
    }

    async fn approve(&self, ask: ApprovalAsk) -> bool {
        if self.preapproved.lock().unwrap_or_else(|p| p.into_inner()).remove(&ask.tool_call_id) {
            return true;
        }
        let id = ask.tool_call_id.clone();
        let follow_up = match self.approval.verdict(ask).await {
            Verdict::Approved => return true,
            Verdict::Rejected => return false,
            Verdict::ApprovedWithArguments(arguments) => FollowUp::Rerun(arguments),
            Verdict::Denied(message) => FollowUp::Replace(ToolReturnValue::error(message, "Denied")),
        };
        self.follow_ups.lock().unwrap_or_else(|p| p.into_inner()).insert(id, follow_up);
        false
    }
}

impl ToolHost for SoulToolHost {
    fn request_approval(&self, ask: ApprovalAsk) -> BoxFuture<'_, bool> {
        Box::pin(self.approve(ask))
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
