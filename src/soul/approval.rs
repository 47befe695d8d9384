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
        if self.state.auto_approved(&ask.action) {
            return true;
        }
        let _turn = self.outstanding.lock().await;
        if self.state.auto_approved(&ask.action) {
            return true;
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
        let decision = match self.sink.request(request).await.await {
            Ok(ClientAnswer::Approval(decision)) => decision,
            _ => ApprovalDecision::Reject,
        };
        if decision == ApprovalDecision::ApproveForSession {
            self.state.approve_for_session(&ask.action);
        }
        self.sink.emit(Event::ApprovalResponse(ApprovalResponse { request_id: id, response: decision })).await;
        decision.is_approved()
    }
}
