//! Approvals (`wire-1.10.md` §3.5-§3.6): one registry per session for every approval request,
//! whoever asks and whoever resolves it.
//!
//! Invariants:
//! - a request goes out the moment a tool asks (several may be outstanding at once) and is never
//!   recorded in `wire.jsonl`; so is every `ApprovalResponse`;
//! - each pending request is resolved exactly once, and every resolution is announced with an
//!   `ApprovalResponse` before the waiting tool learns of it (so it precedes the tool's result):
//!   by the client's answer, by an `approve_for_session` answer covering the same action (the
//!   covered siblings' own JSON-RPC requests are then forgotten, a late answer is ignored), by the
//!   end or cancellation of the turn that asked (reject), or by the client going away (reject);
//! - a request that cannot be answered is a rejection; yolo, afk and session-approved actions
//!   never ask.

use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;
use tokio::task::AbortHandle;

use super::sink::{ClientAnswer, EventSink};
use super::state::SessionState;
use crate::protocol::{ApprovalDecision, ApprovalRequest, ApprovalResponse, ApprovalSource, Event, Request};
use crate::tools::ApprovalAsk;

/// How an approval was decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub decision: ApprovalDecision,
    /// What the user said with a rejection ("" when nothing).
    pub feedback: String,
}

impl Verdict {
    pub fn approve() -> Self {
        Self { decision: ApprovalDecision::Approve, feedback: String::new() }
    }

    pub fn reject() -> Self {
        Self { decision: ApprovalDecision::Reject, feedback: String::new() }
    }

    pub fn is_approved(&self) -> bool {
        self.decision.is_approved()
    }
}

struct Pending {
    id: String,
    action: String,
    /// The turn that asked (its id); resolved with it.
    source_id: String,
    decide: oneshot::Sender<Verdict>,
    /// The task waiting for the client's answer; aborted when resolved otherwise, which drops
    /// the answer's receiver so the front end forgets the JSON-RPC request.
    waiter: Option<AbortHandle>,
}

/// The session's approval registry.
pub struct ApprovalHub {
    state: Arc<SessionState>,
    /// Oldest first.
    pending: Mutex<Vec<Pending>>,
}

impl ApprovalHub {
    pub fn new(state: Arc<SessionState>) -> Arc<Self> {
        Arc::new(Self { state, pending: Mutex::default() })
    }

    pub fn state(&self) -> &Arc<SessionState> {
        &self.state
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Pending>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn auto_approved(&self, action: &str) -> bool {
        self.state.bypass_approvals() || self.state.is_session_approved(action)
    }

    /// Number of requests waiting for a decision.
    pub fn pending_count(&self) -> usize {
        self.lock().len()
    }

    /// Asks the client on behalf of the turn `source_id`; resolves as described in the module doc.
    pub async fn request(self: &Arc<Self>, ask: ApprovalAsk, source_id: &str, sink: &EventSink) -> Verdict {
        if self.auto_approved(&ask.action) {
            return Verdict::approve();
        }
        let id = uuid::Uuid::new_v4().to_string();
        let (decide, decided) = oneshot::channel();
        self.lock().push(Pending {
            id: id.clone(),
            action: ask.action.clone(),
            source_id: source_id.to_string(),
            decide,
            waiter: None,
        });
        let request = Request::ApprovalRequest(ApprovalRequest {
            id: id.clone(),
            tool_call_id: ask.tool_call_id,
            sender: ask.sender,
            action: ask.action,
            description: ask.description,
            source_kind: ApprovalSource::ForegroundTurn,
            source_id: Some(source_id.to_string()),
            agent_id: None,
            subagent_type: None,
            source_description: None,
            display: ask.display,
        });
        let answer = sink.request_unrecorded(request).await;
        let hub = self.clone();
        let waiter_sink = sink.clone();
        let waiter_id = id.clone();
        let waiter = tokio::spawn(async move {
            let verdict = match answer.await {
                Ok(ClientAnswer::Approval { decision, feedback }) => Verdict { decision, feedback },
                // An error answer, a malformed one, or the client gone.
                _ => Verdict::reject(),
            };
            hub.resolve(&waiter_id, verdict, &waiter_sink, true).await;
        });
        match self.lock().iter_mut().find(|p| p.id == id) {
            Some(p) => p.waiter = Some(waiter.abort_handle()),
            // Already resolved (a sibling's approve_for_session): the answer is not needed.
            None => waiter.abort(),
        }
        decided.await.unwrap_or_else(|_| Verdict::reject())
    }

    /// Resolves request `id` (no-op when it is no longer pending). `from_waiter` is true when
    /// called by the task that waited for the client's answer (it must not abort itself).
    async fn resolve(&self, id: &str, verdict: Verdict, sink: &EventSink, from_waiter: bool) {
        let Some(entry) = self.take(|p| p.id == id).into_iter().next() else { return };
        if !from_waiter && let Some(w) = &entry.waiter {
            w.abort();
        }
        let approve_for_session = verdict.decision == ApprovalDecision::ApproveForSession;
        let action = entry.action.clone();
        announce(sink, &entry.id, &verdict).await;
        let _ = entry.decide.send(verdict);
        if approve_for_session {
            self.state.approve_for_session(&action);
            for sibling in self.take(|p| p.action == action) {
                self.settle(sibling, Verdict::approve(), sink).await;
            }
        }
    }

    /// Rejects every request of the turn `source_id` (the turn ended or was cancelled).
    pub async fn reject_turn(&self, source_id: &str, sink: &EventSink) {
        for entry in self.take(|p| p.source_id == source_id) {
            self.settle(entry, Verdict::reject(), sink).await;
        }
    }

    async fn settle(&self, entry: Pending, verdict: Verdict, sink: &EventSink) {
        if let Some(w) = &entry.waiter {
            w.abort();
        }
        announce(sink, &entry.id, &verdict).await;
        let _ = entry.decide.send(verdict);
    }

    fn take(&self, which: impl Fn(&Pending) -> bool) -> Vec<Pending> {
        let mut pending = self.lock();
        let (taken, kept): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut *pending).into_iter().partition(which);
        *pending = kept;
        taken
    }
}

async fn announce(sink: &EventSink, id: &str, verdict: &Verdict) {
    sink.emit_unrecorded(Event::ApprovalResponse(ApprovalResponse {
        request_id: id.to_string(),
        response: verdict.decision,
        feedback: verdict.feedback.clone(),
    }))
    .await;
}
