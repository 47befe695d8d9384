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

use std::path::{Path, PathBuf};
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
    /// A front end's edits mode (ACP's `acceptEdits`): file edits inside this work dir (or an
    /// added dir) are approved without asking, for this run only (never saved).
    edits_in: Mutex<Option<PathBuf>>,
}

/// The file-edit tools an edits grant covers.
const EDIT_TOOLS: &[&str] = &["WriteFile", "StrReplaceFile"];

impl ApprovalHub {
    pub fn new(state: Arc<SessionState>) -> Arc<Self> {
        Arc::new(Self {
            state,
            pending: Mutex::default(),
            front_end_decides: AtomicBool::new(false),
            edits_in: Mutex::default(),
        })
    }

    /// The front end has approval rules of its own that come before the session's grants: from
    /// now on every request reaches it, marked `granted` when this run's grants cover it, and
    /// the grants earlier runs saved are set aside. Called before the first turn.
    pub fn let_front_end_decide(&self) {
        self.state.count_only_this_runs_grants();
        self.front_end_decides.store(true, Ordering::SeqCst);
    }

    /// Approves file edits inside `work_dir` (and the session's added dirs) without asking, for
    /// this run; `None` ends it. Never written to `state.json`.
    pub fn approve_edits_in(&self, work_dir: Option<PathBuf>) {
        *self.edits_in.lock().unwrap_or_else(|p| p.into_inner()) = work_dir;
    }

    /// Whether edits inside the work dir are approved without asking (see [`Self::approve_edits_in`]).
    pub fn edits_approved(&self) -> bool {
        self.edits_in.lock().unwrap_or_else(|p| p.into_inner()).is_some()
    }

    /// Whether the edits grant covers `ask`: an edit tool whose target, links resolved, lies
    /// inside the work dir or an added dir and not inside a `.git` folder.
    fn edit_granted(&self, ask: &ApprovalAsk) -> bool {
        let Some(work_dir) = self.edits_in.lock().unwrap_or_else(|p| p.into_inner()).clone() else { return false };
        if !EDIT_TOOLS.contains(&ask.sender.as_str()) {
            return false;
        }
        let Some(path) = ask
            .arguments
            .as_deref()
            .and_then(|a| serde_json::from_str::<serde_json::Value>(a).ok())
            .and_then(|v| v.get("path").and_then(|p| p.as_str()).map(str::to_string))
        else {
            return false;
        };
        let Some(target) = real_path(&work_dir.join(crate::tools::paths::expand_home(&path))) else { return false };
        let roots = std::iter::once(work_dir).chain(self.state.additional_dirs().into_iter().map(PathBuf::from));
        for root in roots {
            let Ok(root) = std::fs::canonicalize(&root) else { continue };
            if let Ok(inside) = target.strip_prefix(&root) {
                return !inside.components().any(|c| c.as_os_str().eq_ignore_ascii_case(".git"));
            }
        }
        false
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
        // An escalation out of the sandbox is never granted: no yolo, afk or session grant
        // covers it (spec sandbox.md §6.2; the Shell tool refuses it where nobody may be asked).
        let escalation = crate::tools::shell::is_escalation_action(&ask.action);
        let granted = !escalation && (self.state.grants(&ask.action) || self.edit_granted(&ask));
        if granted && !self.front_end_decides.load(Ordering::SeqCst) {
            return Verdict::approve();
        }
        let id = uuid::Uuid::new_v4().to_string();
        let tool_call_id = ask.tool_call_id.clone();
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
        let verdict = decided.await.unwrap_or_else(|_| Verdict::reject());
        // kiwi's record of the answer, kept beside the call's result (`docs/sessions.md` §6).
        sink.note_decision(&tool_call_id, verdict.decision, &verdict.feedback);
        verdict
    }

    /// Resolves request `id` (no-op when it is no longer pending). `from_waiter` is true when
    /// called by the task that waited for the client's answer (it must not abort itself).
    async fn resolve(&self, id: &str, verdict: Verdict, sink: &EventSink, from_waiter: bool) {
        let Some(entry) = self.take(|p| p.id == id).into_iter().next() else { return };
        if !from_waiter && let Some(w) = &entry.waiter {
            w.abort();
        }
        // Approving an escalation for the session counts as approving it once.
        let approve_for_session = verdict.decision == ApprovalDecision::ApproveForSession
            && !crate::tools::shell::is_escalation_action(&entry.action);
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

/// Where `path` (absolute) really is: the longest existing ancestor with its links resolved,
/// then the rest as written. `None` when the rest climbs (`..`) or nothing exists.
fn real_path(path: &Path) -> Option<PathBuf> {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(&existing) {
            let mut out = real;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return Some(out);
        }
        let name = existing.file_name()?.to_os_string();
        if name == ".." || name == "." {
            return None;
        }
        rest.push(name);
        if !existing.pop() {
            return None;
        }
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

    /// The edits grant (ACP's `acceptEdits`): edits inside the work dir pass, links followed;
    /// anything else, `.git`, and other tools still ask; nothing is saved.
    #[tokio::test]
    async fn the_edits_grant_covers_edits_inside_the_work_dir_only() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        std::fs::create_dir_all(work.join(".git")).unwrap();
        std::os::unix::fs::symlink(dir.path(), work.join("out")).unwrap();
        let (tx, mut asked) = tokio::sync::mpsc::unbounded_channel();
        let sink = EventSink::new(Arc::new(Client { asked: tx, events: Arc::default() }), None);
        let hub = ApprovalHub::new(Arc::new(SessionState::load(dir.path(), false)));
        let edit = |tool: &str, path: &str| ApprovalAsk {
            sender: tool.into(),
            arguments: Some(serde_json::json!({ "path": path }).to_string()),
            ..ask("e", "edit file")
        };
        hub.approve_edits_in(Some(work.clone()));
        assert!(hub.edits_approved());
        let origin = ApprovalOrigin::main_turn("t");
        for path in ["a.txt", "new/dir/b.txt", &work.join("c.txt").display().to_string()] {
            assert!(hub.request(edit("WriteFile", path), &origin, &sink).await.is_approved(), "{path}");
        }
        assert!(hub.request(edit("StrReplaceFile", "a.txt"), &origin, &sink).await.is_approved());
        assert!(asked.try_recv().is_err(), "nobody was asked");
        for (tool, path) in
            [("WriteFile", "out/x.txt"), ("WriteFile", "../x.txt"), ("WriteFile", ".git/config"), ("Shell", "a.txt")]
        {
            let waiting = tokio::spawn({
                let (hub, sink, ask) = (hub.clone(), sink.clone(), edit(tool, path));
                async move { hub.request(ask, &ApprovalOrigin::main_turn("t"), &sink).await }
            });
            let (request, answer) = asked.recv().await.expect("asked");
            assert!(matches!(request, Request::ApprovalRequest(_)), "{tool} {path}");
            drop(answer);
            assert!(!waiting.await.unwrap().is_approved());
        }
        hub.approve_edits_in(None);
        assert!(!hub.edits_approved());
        assert_eq!(crate::session::state::load(dir.path()), crate::session::state::SessionStateFile::default());
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
