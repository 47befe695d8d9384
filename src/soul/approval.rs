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
    /// Approved with edited arguments: the call is run again with these.
    pub rerun_with: Option<String>,
    /// Denied with a message that replaces the call's result (the turn goes on).
    pub denial: Option<String>,
}

impl Verdict {
    pub fn approve() -> Self {
        Self { decision: ApprovalDecision::Approve, feedback: String::new(), rerun_with: None, denial: None }
    }

    pub fn reject() -> Self {
        Self { decision: ApprovalDecision::Reject, feedback: String::new(), rerun_with: None, denial: None }
    }

    pub fn is_approved(&self) -> bool {
        self.decision.is_approved()
    }
}

/// Who asks for an approval: what the request says about its source, and whose end rejects it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalOrigin {
    pub source_kind: ApprovalSource,
    /// The asking run's id (`source_id` on the wire).
    pub source_id: String,
    /// The subagent instance and its type; `None` for the main agent.
    pub agent_id: Option<String>,
    pub subagent_type: Option<String>,
    /// Whose end or cancellation rejects the request: the main agent's turn (also for its
    /// foreground subagents) or a background task.
    pub owner: String,
}

impl ApprovalOrigin {
    /// The main agent's turn `turn_id`.
    pub fn main_turn(turn_id: &str) -> Self {
        Self {
            source_kind: ApprovalSource::ForegroundTurn,
            source_id: turn_id.to_string(),
            agent_id: None,
            subagent_type: None,
            owner: turn_id.to_string(),
        }
    }
}

struct Pending {
    id: String,
    action: String,
    /// The turn (or background task) that owns the request; resolved with it.
    owner: String,
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

    /// Asks the client on behalf of `origin`; resolves as described in the module doc.
    pub async fn request(self: &Arc<Self>, ask: ApprovalAsk, origin: &ApprovalOrigin, sink: &EventSink) -> Verdict {
        if self.auto_approved(&ask.action) {
            return Verdict::approve();
        }
        let id = uuid::Uuid::new_v4().to_string();
        let (decide, decided) = oneshot::channel();
        self.lock().push(Pending {
            id: id.clone(),
            action: ask.action.clone(),
            owner: origin.owner.clone(),
            decide,
            waiter: None,
        });
        let request = Request::ApprovalRequest(ApprovalRequest {
            id: id.clone(),
            tool_call_id: ask.tool_call_id,
            sender: ask.sender,
            action: ask.action,
            description: ask.description,
            source_kind: origin.source_kind,
            source_id: Some(origin.source_id.clone()),
            agent_id: origin.agent_id.clone(),
            subagent_type: origin.subagent_type.clone(),
            source_description: None,
            display: ask.display,
        });
        let answer = sink.request_unrecorded(request).await;
        let hub = self.clone();
        let waiter_sink = sink.clone();
        let waiter_id = id.clone();
        let waiter = tokio::spawn(async move {
            let verdict = match answer.await {
                Ok(ClientAnswer::Approval { decision, feedback }) => {
                    Verdict { decision, feedback, ..Verdict::reject() }
                }
                Ok(ClientAnswer::ApprovalWithArguments(decision, arguments)) if decision.is_approved() => {
                    Verdict { decision, rerun_with: Some(arguments), ..Verdict::reject() }
                }
                Ok(ClientAnswer::Denial(message)) => Verdict { denial: Some(message), ..Verdict::reject() },
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

    /// Rejects every request owned by `owner` (its turn ended or was cancelled, its background
    /// task stopped).
    pub async fn reject_turn(&self, owner: &str, sink: &EventSink) {
        for entry in self.take(|p| p.owner == owner) {
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

#[cfg(test)]
mod tests {
    use futures::future::BoxFuture;

    use super::*;
    use crate::soul::{Projection, TurnResult, TurnTag};

    type Asked = (Request, oneshot::Sender<ClientAnswer>);

    /// Hands requests to the test and keeps every event.
    struct Client {
        asked: tokio::sync::mpsc::UnboundedSender<Asked>,
        events: Arc<Mutex<Vec<Event>>>,
    }

    impl Projection for Client {
        fn event<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, ()> {
            self.events.lock().unwrap().push(event.clone());
            Box::pin(async {})
        }

        #[allow(clippy::async_yields_async)]
        fn request(&self, request: Request) -> BoxFuture<'_, oneshot::Receiver<ClientAnswer>> {
            let (tx, rx) = oneshot::channel();
            let _ = self.asked.send((request, tx));
            Box::pin(async move { rx })
        }

        fn turn_ended(&self, _: TurnTag, _: TurnResult) -> BoxFuture<'_, ()> {
            Box::pin(async {})
        }
    }

    fn ask(call: &str, action: &str) -> ApprovalAsk {
        ApprovalAsk {
            tool_call_id: call.into(),
            sender: "Shell".into(),
            action: action.into(),
            description: String::new(),
            display: Vec::new(),
        }
    }

    fn responses(events: &Mutex<Vec<Event>>) -> Vec<(String, ApprovalDecision)> {
        events
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                Event::ApprovalResponse(r) => Some((r.request_id.clone(), r.response)),
                _ => None,
            })
            .collect()
    }

    #[tokio::test]
    async fn approve_for_session_resolves_covered_siblings() {
        let (tx, mut asked) = tokio::sync::mpsc::unbounded_channel();
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = EventSink::new(Arc::new(Client { asked: tx, events: events.clone() }), None);
        let hub = ApprovalHub::new(Arc::new(SessionState::in_memory(false)));
        let (a, b, c) = (
            tokio::spawn({
                let (hub, sink) = (hub.clone(), sink.clone());
                async move { hub.request(ask("a", "run command"), &ApprovalOrigin::main_turn("t1"), &sink).await }
            }),
            tokio::spawn({
                let (hub, sink) = (hub.clone(), sink.clone());
                async move { hub.request(ask("b", "run command"), &ApprovalOrigin::main_turn("t1"), &sink).await }
            }),
            tokio::spawn({
                let (hub, sink) = (hub.clone(), sink.clone());
                async move { hub.request(ask("c", "edit file"), &ApprovalOrigin::main_turn("t1"), &sink).await }
            }),
        );
        let mut requests = Vec::new();
        for _ in 0..3 {
            requests.push(asked.recv().await.unwrap());
        }
        assert_eq!(hub.pending_count(), 3, "all three outstanding at once");
        let index = |call: &str| {
            requests
                .iter()
                .position(|(r, _)| matches!(r, Request::ApprovalRequest(q) if q.tool_call_id == call))
                .unwrap()
        };
        let (first, answer) = requests.remove(index("a"));
        let _ = answer
            .send(ClientAnswer::Approval { decision: ApprovalDecision::ApproveForSession, feedback: String::new() });
        assert!(a.await.unwrap().is_approved());
        assert!(b.await.unwrap().is_approved(), "the sibling with the same action");
        assert_eq!(hub.pending_count(), 1, "another action still waits");
        let got = responses(&events);
        assert_eq!(got[0], (first.id().to_string(), ApprovalDecision::ApproveForSession));
        assert_eq!(got[1].1, ApprovalDecision::Approve);
        hub.reject_turn("t1", &sink).await;
        assert!(!c.await.unwrap().is_approved(), "the turn's end rejects what is left");
        assert_eq!(responses(&events).len(), 3);
        assert!(hub.state().is_session_approved("run command"));
        // Now approved for the session: no request at all.
        assert!(hub.request(ask("d", "run command"), &ApprovalOrigin::main_turn("t2"), &sink).await.is_approved());
        assert!(asked.try_recv().is_err());
    }

    #[tokio::test]
    async fn an_unanswerable_request_is_a_rejection() {
        let (tx, mut asked) = tokio::sync::mpsc::unbounded_channel();
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = EventSink::new(Arc::new(Client { asked: tx, events: events.clone() }), None);
        let hub = ApprovalHub::new(Arc::new(SessionState::in_memory(false)));
        let waiting = tokio::spawn({
            let (hub, sink) = (hub.clone(), sink.clone());
            async move { hub.request(ask("a", "run command"), &ApprovalOrigin::main_turn("t"), &sink).await }
        });
        let (_, answer) = asked.recv().await.unwrap();
        drop(answer);
        let verdict = waiting.await.unwrap();
        assert_eq!(verdict, Verdict::reject());
        assert_eq!(responses(&events).len(), 1, "announced like any resolution");
    }
}
