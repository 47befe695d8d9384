//! Approvals: YOLO, the approve-for-session set, and one outstanding request per agent.
//!
//! Invariants: a request that cannot be answered (client gone, error answer) is a reject; a
//! cancelled turn drops the waiting future, so a late answer changes nothing; requests queued
//! behind one whose action became session-approved are approved silently.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Mutex as AsyncMutex;

use super::sink::{ClientAnswer, EventSink};
use crate::protocol::{ApprovalDecision, ApprovalRequest, ApprovalResponse, Event, Request};
use crate::tools::ApprovalAsk;

/// Approval state shared by an agent and its subagents for the life of the process.
#[derive(Debug, Default)]
pub struct ApprovalState {
    yolo: AtomicBool,
    approved_actions: Mutex<HashSet<String>>,
}

impl ApprovalState {
    pub fn new(yolo: bool) -> Self {
        Self { yolo: AtomicBool::new(yolo), approved_actions: Mutex::default() }
    }

    pub fn yolo(&self) -> bool {
        self.yolo.load(Ordering::SeqCst)
    }

    pub fn set_yolo(&self, on: bool) {
        self.yolo.store(on, Ordering::SeqCst);
    }

    fn auto_approved(&self, action: &str) -> bool {
        self.yolo() || self.approved_actions.lock().map(|s| s.contains(action)).unwrap_or(false)
    }

    fn approve_for_session(&self, action: &str) {
        if let Ok(mut set) = self.approved_actions.lock() {
            set.insert(action.to_string());
        }
    }
}

/// One agent's approval channel.
#[derive(Clone, Debug)]
pub struct Approval {
    state: Arc<ApprovalState>,
    sink: EventSink,
    /// Held while a request of this agent is outstanding, so they go out one at a time.
    outstanding: Arc<AsyncMutex<()>>,
}

impl Approval {
    pub fn new(state: Arc<ApprovalState>, sink: EventSink) -> Self {
        Self { state, sink, outstanding: Arc::default() }
    }

    pub fn state(&self) -> &Arc<ApprovalState> {
        &self.state
    }

    /// Asks the client (unless YOLO or session-approved); true when the call may go ahead.
    pub async fn request(&self, ask: ApprovalAsk) -> bool {
        self.verdict(ask).await == Verdict::Approved
    }

    /// Asks the client (unless YOLO or session-approved) and keeps what the answer said beyond
    /// yes or no.
    pub async fn verdict(&self, ask: ApprovalAsk) -> Verdict {
        if self.state.auto_approved(&ask.action) {
            return Verdict::Approved;
        }
        let _turn = self.outstanding.lock().await;
        if self.state.auto_approved(&ask.action) {
            return Verdict::Approved;
        }
        let id = uuid::Uuid::new_v4().to_string();
        let request = Request::ApprovalRequest(ApprovalRequest {
            id: id.clone(),
            tool_call_id: ask.tool_call_id,
            sender: ask.sender,
            action: ask.action.clone(),
            description: ask.description,
            display: ask.display,
        });
        let (decision, verdict) = match self.sink.request(request).await.await {
            Ok(ClientAnswer::Approval(decision)) => {
                (decision, if decision.is_approved() { Verdict::Approved } else { Verdict::Rejected })
            }
            Ok(ClientAnswer::ApprovalWithArguments(decision, arguments)) if decision.is_approved() => {
                (decision, Verdict::ApprovedWithArguments(arguments))
            }
            Ok(ClientAnswer::Denial(message)) => (ApprovalDecision::Reject, Verdict::Denied(message)),
            _ => (ApprovalDecision::Reject, Verdict::Rejected),
        };
        if decision == ApprovalDecision::ApproveForSession {
            self.state.approve_for_session(&ask.action);
        }
        self.sink.emit(Event::ApprovalResponse(ApprovalResponse { request_id: id, response: decision })).await;
        verdict
    }
}

/// What an approval request came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Approved,
    /// A plain rejection: the turn stops after this step.
    Rejected,
    /// Approved to run with these arguments instead of the model's.
    ApprovedWithArguments(String),
    /// Refused with this message as the call's result; the turn goes on.
    Denied(String),
}
