//! ACP's projection of one session's events: each event becomes zero or more `session/update`
//! notifications (through the shared [`EventMapper`]), an approval becomes a
//! `session/request_permission` whose answer is read here, and a turn's outcome becomes the answer
//! to the `session/prompt` that started it (`docs/acp.md` §13).
//!
//! Invariants: the prompt's answer is queued after every update of its turn (the projection runs
//! inline in the emitting task); a permission request whose turn is cancelled is forgotten at
//! once (the approval counts as rejected; the client's late `cancelled` answer finds nobody).

use std::sync::{Arc, Mutex, OnceLock, Weak};

use agent_client_protocol::v1::schema::{
    PromptResponse, SessionNotification, SessionUpdate, StopReason, ToolCallContent, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, Usage,
};
use futures::future::BoxFuture;
use tokio::sync::oneshot;

use super::client_calls::ClientCalls;
use super::client_profile::Updates;
use super::errors;
use super::mapping::{EventMapper, diff_content, text_content};
use super::permission;
use super::questions;
use super::session::AcpSession;
use crate::llm::ModelStop;
use crate::protocol::{
    ApprovalDecision, ApprovalRequest, Event, HookAction, QuestionRequest, Request, TokenUsage, ToolReturnValue,
};
use crate::rpc::peer::{IdTaken, Settled};
use crate::rpc::{Outbound, Peer, RequestId};
use crate::soul::{ClientAnswer, Projection, TurnOutcome, TurnResult, TurnTag};

pub struct AcpProjection {
    session_id: String,
    /// The connection's peer: updates go out through its writer, permission cards through it.
    peer: Arc<Peer>,
    outbound: Outbound,
    updates: Updates,
    mapper: Arc<Mutex<EventMapper>>,
    /// The session, once open: told when a turn ends (announcements, the prompt queue).
    session: OnceLock<Weak<AcpSession>>,
    /// The client takes `elicitation/create` forms (questions go there first).
    elicitation: bool,
    /// Other clients share the session (`kiwi web`): what ACP cannot answer is left to them.
    shared: bool,
}

impl AcpProjection {
    pub fn new(
        session_id: String,
        peer: Arc<Peer>,
        updates: Updates,
        mapper: Arc<Mutex<EventMapper>>,
        elicitation: bool,
    ) -> Self {
        let outbound = peer.outbound().clone();
        Self { session_id, peer, outbound, updates, mapper, session: OnceLock::new(), elicitation, shared: false }
    }

    /// Marks the session as shared with other clients.
    pub fn shared(mut self, shared: bool) -> Self {
        self.shared = shared;
        self
    }

    pub fn watch(&self, session: &Arc<AcpSession>) {
        let _ = self.session.set(Arc::downgrade(session));
    }

    pub(super) fn session(&self) -> Option<Arc<AcpSession>> {
        self.session.get().and_then(Weak::upgrade)
    }

    fn mapper(&self) -> std::sync::MutexGuard<'_, EventMapper> {
        self.mapper.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn permission(&self, approval: ApprovalRequest) -> oneshot::Receiver<ClientAnswer> {
        let (reply, answer) = oneshot::channel();
        let (tool_call_id, title) = {
            let mapper = self.mapper();
            let title = approval.arguments.as_ref().map(|a| mapper.title_of(&approval.sender, &a.to_string()));
            (mapper.acp_call_id(&approval.tool_call_id), title)
        };
        let diffs: Vec<ToolCallContent> = approval.display.iter().filter_map(diff_content).collect();
        let content = if diffs.is_empty() {
            vec![text_content(format!("Requesting approval to perform: {}", approval.description))]
        } else {
            diffs
        };
        let params = if crate::tools::shell::is_escalation_action(&approval.action) {
            let fields = ToolCallUpdateFields::new()
                .title("Run command outside the sandbox".to_string())
                .kind(agent_client_protocol::v1::schema::ToolKind::Execute)
                .raw_input(approval.arguments.clone())
                .content(content);
            permission::escalation_request(&self.session_id, ToolCallUpdate::new(tool_call_id.clone(), fields))
        } else {
            let fields = ToolCallUpdateFields::new()
                .title(title.unwrap_or_else(|| approval.description.clone()))
                .content(content);
            permission::request(&self.session_id, ToolCallUpdate::new(tool_call_id.clone(), fields))
        };
        let id = self.peer.next_id();
        let frame = Outbound::request_frame(&id, permission::METHOD, &params);
        let started = Started { updates: self.updates.clone(), session_id: self.session_id.clone(), tool_call_id };
        if let Err(IdTaken(reply)) =
            self.peer.ask(id, frame, reply, |settled| permission_answer(settled, started)).await
        {
            let _ = reply.send(reject());
        }
        answer
    }
}

impl AcpProjection {
    /// Asks through the editor (`docs/acp.md` §5.6); the asking stops when the soul stops
    /// waiting (the turn was cancelled), which forgets the client's pending request.
    fn questions(&self, request: QuestionRequest) -> oneshot::Receiver<ClientAnswer> {
        let (mut reply, answer) = oneshot::channel();
        let calls = ClientCalls { peer: self.peer.clone() };
        let session_id = self.session_id.clone();
        let tool_call_id = self.mapper().acp_call_id(&request.tool_call_id);
        let elicitation = self.elicitation;
        tokio::spawn(async move {
            let asked = questions::ask(&calls, &session_id, &tool_call_id, &request.questions, elicitation);
            let outcome = tokio::select! {
                outcome = asked => Some(outcome),
                () = reply.closed() => None,
            };
            if let Some(outcome) = outcome {
                let _ = reply.send(outcome);
            }
        });
        answer
    }
}

impl Projection for AcpProjection {
    fn event<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let updates = self.mapper().map(event);
            for update in updates {
                self.updates.send(&self.session_id, update).await;
            }
        })
    }

    #[allow(clippy::async_yields_async)]
    fn request(&self, request: Request) -> BoxFuture<'_, oneshot::Receiver<ClientAnswer>> {
        Box::pin(async move {
            match request {
                Request::ApprovalRequest(approval) => self.permission(approval).await,
                Request::QuestionRequest(question) => self.questions(question),
                // In a shared session a client that can answer (a browser with its hooks or its
                // tools) may: dropping the sender leaves the request to it.
                _ if self.shared => oneshot::channel().1,
                other => {
                    let (reply, answer) = oneshot::channel();
                    let _ = reply.send(unanswerable(&other));
                    answer
                }
            }
        })
    }

    fn turn_ended(&self, tag: TurnTag, result: TurnResult) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let Some(id) = tag.take::<RequestId>() else {
                tracing::error!("a turn ended without the id of its prompt");
                return;
            };
            let session = self.session();
            // What the turn changed (a title, `/plan`, `/yolo`, `/model`) reaches the client
            // before the turn's answer.
            if let Some(session) = &session {
                session.announce_changes().await;
            }
            self.answer(id, result).await;
            if let Some(session) = &session {
                session.pump();
            }
        })
    }

    /// A turn another client of a shared session started has ended: a prompt that waited for
    /// it starts now.
    fn turn_observed<'a>(&'a self, _result: &'a TurnResult) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if let Some(session) = self.session() {
                session.announce_changes().await;
                session.pump();
            }
        })
    }
}

impl AcpProjection {
    async fn answer(&self, id: RequestId, result: TurnResult) {
        {
            let stop = match result {
                Ok(TurnOutcome::Finished(None)) => StopReason::EndTurn,
                Ok(TurnOutcome::Finished(Some(ModelStop::MaxTokens))) => StopReason::MaxTokens,
                Ok(TurnOutcome::Finished(Some(ModelStop::Refusal))) => StopReason::Refusal,
                Ok(TurnOutcome::Cancelled) => StopReason::Cancelled,
                Ok(TurnOutcome::MaxStepsReached(_)) => StopReason::MaxTurnRequests,
                // The session's token budget (`docs/acp.md`): ACP's `max_tokens`.
                Ok(TurnOutcome::TokenBudgetReached { .. }) => StopReason::MaxTokens,
                // The dollar budget ends the turn the same way (`docs/acp.md`).
                Ok(TurnOutcome::CostBudgetReached { .. }) => StopReason::MaxTokens,
                Err(e) => {
                    self.outbound.error(Some(&id), &errors::turn_error(&e)).await;
                    return;
                }
            };
            let mut response = PromptResponse::new(stop);
            // The turn's tokens, for a client whose schema has them (`docs/compatibility.md`);
            // absent when the provider reported none.
            if self.updates.profile().newer_schema {
                response = response.usage(self.mapper().turn_usage().map(turn_usage));
            }
            self.outbound.respond(&id, &response).await;
        }
    }
}

/// A turn's tokens as ACP's `Usage` (`docs/acp.md` §4.12): input without the cache, as the
/// schema counts cache reads and writes on their own; the total is all four. Thought tokens are
/// not reported (providers count them inside the output).
pub fn turn_usage(used: TokenUsage) -> Usage {
    Usage::new(used.total(), used.input_other, used.output)
        .cached_read_tokens(used.input_cache_read)
        .cached_write_tokens(used.input_cache_creation)
}

/// One `session/update` notification.
/// Writes one `session/update`; only [`Updates`] calls it (it filters by what the client takes).
pub(super) async fn send_update(outbound: &Outbound, session_id: &str, update: SessionUpdate) {
    let notification = SessionNotification::new(session_id.to_string(), update);
    if let Some(frame) = Outbound::notification_frame("session/update", &notification) {
        outbound.send_raw(frame).await;
    }
}

fn reject() -> ClientAnswer {
    ClientAnswer::Approval { decision: ApprovalDecision::Reject, feedback: String::new() }
}

/// Requests ACP has no method for get the answer a client without the feature would give.
fn unanswerable(request: &Request) -> ClientAnswer {
    match request {
        Request::ApprovalRequest(_) => reject(),
        // ACP registers no external tools; a call to one is the model's mistake.
        Request::ToolCallRequest(call) => ClientAnswer::ToolResult(ToolReturnValue::error(
            format!("The tool `{}` is not available in this session.", call.name),
            "Tool not available",
        )),
        // Asked through the editor (`AcpProjection::questions`); nothing else answers them.
        Request::QuestionRequest(_) => ClientAnswer::Questions(None),
        // No ACP client subscribes to hooks.
        Request::HookRequest(_) => ClientAnswer::Hook { action: HookAction::Allow, reason: String::new() },
    }
}

/// Where to say that an approved call starts running (`in_progress`, `docs/acp.md` §13.4).
struct Started {
    updates: Updates,
    session_id: String,
    tool_call_id: String,
}

/// The client's answer to a permission card, as the soul hears it.
async fn permission_answer(settled: Settled, started: Started) -> Option<ClientAnswer> {
    let decision = match settled.answer()? {
        Ok(value) => permission::decision(value),
        Err(e) => {
            tracing::info!("the client answered a permission request with an error: {}", e.message);
            ApprovalDecision::Reject
        }
    };
    if decision.is_approved() {
        // Sent before the soul hears the answer, so it precedes the call's result.
        let fields = ToolCallUpdateFields::new().status(ToolCallStatus::InProgress);
        let update = SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(started.tool_call_id, fields));
        started.updates.send(&started.session_id, update).await;
    }
    Some(ClientAnswer::Approval { decision, feedback: String::new() })
}
