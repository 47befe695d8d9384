//! Approvals (`docs/protocol-1.10.md` §3.5-§3.6): one registry per session for every approval request,
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
//! - a request that cannot be answered is a rejection;
//! - the front end's own rules come first: without any (wire, ACP, kimi's print), the session's
//!   grants — yolo, afk, actions approved for the session — approve without asking; a front end
//!   with rules of its own (the Claude dialect, [`ApprovalHub::let_front_end_decide`]) gets every
//!   request, marked `granted` when this run's grants cover it, and applies the grant only where
//!   its own rules would ask (grants saved by earlier runs do not count for it);
//! - the request carries the asking call's own arguments, so whoever shows it shows that call.

use std::sync::atomic::{AtomicBool, Ordering};
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
    /// The front end decides every request itself (see the module doc).
    front_end_decides: AtomicBool,
}

impl ApprovalHub {
    pub fn new(state: Arc<SessionState>) -> Arc<Self> {
        Arc::new(Self { state, pending: Mutex::default(), front_end_decides: AtomicBool::new(false) })
    }

    /// The front end has approval rules of its own that come before the session's grants: from
    /// now on every request reaches it, marked `granted` when this run's grants cover it, and
    /// the grants earlier runs saved are set aside. Called before the first turn.
    pub fn let_front_end_decide(&self) {
        self.state.count_only_this_runs_grants();
        self.front_end_decides.store(true, Ordering::SeqCst);
    }

    pub fn state(&self) -> &Arc<SessionState> {
        &self.state
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Pending>> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Number of requests waiting for a decision.
    pub fn pending_count(&self) -> usize {
        self.lock().len()
    }

    /// Asks the client on behalf of `origin`; resolves as described in the module doc.
    pub async fn request(self: &Arc<Self>, ask: ApprovalAsk, origin: &ApprovalOrigin, sink: &EventSink) -> Verdict {
        let granted = self.state.grants(&ask.action);
        if granted && !self.front_end_decides.load(Ordering::SeqCst) {
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
            arguments: ask.arguments.as_deref().and_then(|a| serde_json::from_str(a).ok()),
            granted,
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
            arguments: Some(format!(r#"{{"command":"{call}"}}"#)),
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
    async fn a_front_end_with_its_own_rules_is_asked_even_when_granted() {
        let dir = tempfile::tempdir().unwrap();
        SessionState::load(dir.path(), false).approve_for_session("run command");
        let (tx, mut asked) = tokio::sync::mpsc::unbounded_channel();
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = EventSink::new(Arc::new(Client { asked: tx, events }), None);
        // Saved by an earlier run, and `--yolo` of this one: without rules of its own, no request.
        let hub = ApprovalHub::new(Arc::new(SessionState::load(dir.path(), false)));
        assert!(hub.request(ask("a", "run command"), &ApprovalOrigin::main_turn("t"), &sink).await.is_approved());
        assert!(asked.try_recv().is_err());
        let hub = ApprovalHub::new(Arc::new(SessionState::load(dir.path(), true)));
        hub.let_front_end_decide();
        let asking = |hub: &Arc<ApprovalHub>, call: &'static str, action: &'static str| {
            let (hub, sink) = (hub.clone(), sink.clone());
            tokio::spawn(async move { hub.request(ask(call, action), &ApprovalOrigin::main_turn("t"), &sink).await })
        };
        let waiting = asking(&hub, "b", "run command");
        let (request, answer) = asked.recv().await.unwrap();
        let Request::ApprovalRequest(q) = request else { panic!() };
        assert!(q.granted, "this run's --yolo covers it; the front end applies it after its own rules");
        assert_eq!(q.arguments, Some(serde_json::json!({"command": "b"})), "the very call's arguments");
        let _ = answer.send(ClientAnswer::Denial("plan mode".into()));
        assert_eq!(waiting.await.unwrap().denial.as_deref(), Some("plan mode"), "the front end's rule wins");
        // Without --yolo, the saved approval does not count for it.
        let hub = ApprovalHub::new(Arc::new(SessionState::load(dir.path(), false)));
        hub.let_front_end_decide();
        let waiting = asking(&hub, "c", "run command");
        let (request, answer) = asked.recv().await.unwrap();
        let Request::ApprovalRequest(q) = request else { panic!() };
        assert!(!q.granted, "an earlier run's approve-for-session is set aside");
        let _ = answer
            .send(ClientAnswer::Approval { decision: ApprovalDecision::ApproveForSession, feedback: String::new() });
        assert!(waiting.await.unwrap().is_approved());
        let waiting = asking(&hub, "d", "run command");
        let (request, _answer) = asked.recv().await.unwrap();
        let Request::ApprovalRequest(q) = request else { panic!() };
        assert!(q.granted, "approved for the session in this run");
        hub.reject_turn("t", &sink).await;
        assert!(!waiting.await.unwrap().is_approved());
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
