//! The soul's side of the tools' host interface, one per step: approvals through the session's
//! hub, client-owned tool calls and questions as requests on the event sink, plan mode and todos
//! through the session state.
//!
//! Invariants: what the step needs to know after its tools ran is kept here, keyed by tool call
//! id — a rejection's feedback (the step rewrites that call's result) — plus whether a tool
//! switched plan mode (the step reports it). What is granted without asking (a plan-file write,
//! the rerun of a call with the arguments its approver gave) is granted to the call itself: its
//! id, tool and arguments, since ids can repeat within a step.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;

use super::agent::Agent;
use super::approval::{ApprovalHub, ApprovalOrigin};
use super::client::ClientState;
use super::sink::{ClientAnswer, EventSink};
use super::subagent::background::start_background;
use super::subagent::run::run_foreground;
use crate::protocol::{Event, QuestionItem, QuestionRequest, Request, TodoItem, ToolCallRequest, ToolReturnValue};
use crate::tools::background::BackgroundTasks;
use crate::tools::host::NO_NESTED_SUBAGENTS;
use crate::tools::{ApprovalAsk, ClientToolCall, Delegation, PlanView, Presence, QuestionOutcome, ToolHost};

pub struct SoulToolHost {
    hub: Arc<ApprovalHub>,
    client: Arc<ClientState>,
    sink: EventSink,
    /// Where its approvals come from.
    origin: ApprovalOrigin,
    /// The main agent, which may start subagents (`None` in a subagent: they cannot nest).
    delegator: Option<Arc<Agent>>,
    /// Feedback given with rejections, by tool call id.
    feedback: Mutex<HashMap<String, String>>,
    /// Calls whose approval plan mode grants (writes of the plan file).
    granted: Mutex<HashSet<CallKey>>,
    plan_switched: AtomicBool,
    /// What the step must do with a call after its tool returned, by tool call id and arguments
    /// (an approval answer that said more than yes or no: a denial, or approved edited arguments).
    follow_ups: Mutex<HashMap<(String, Option<String>), FollowUp>>,
    /// Calls whose next approval is granted without asking (their rerun with edited arguments),
    /// by id and arguments.
    preapproved: Mutex<HashSet<(String, Option<String>)>>,
    /// The session's before-image store for the edit tools.
    journal: Option<Arc<crate::session::rewind::EditJournal>>,
}

/// One call: its id, its tool and its arguments as the model sent them.
type CallKey = (String, String, Option<String>);

/// What the step must do with a call after its tool returned.
#[derive(Debug, Clone, PartialEq)]
pub enum FollowUp {
    /// Run the call again with these arguments (already approved).
    Rerun(String),
    /// Report this result instead of the tool's.
    Replace(ToolReturnValue),
}

impl SoulToolHost {
    pub fn new(hub: Arc<ApprovalHub>, client: Arc<ClientState>, sink: EventSink, origin: ApprovalOrigin) -> Self {
        Self {
            hub,
            client,
            sink,
            origin,
            delegator: None,
            feedback: Mutex::default(),
            granted: Mutex::default(),
            plan_switched: AtomicBool::new(false),
            follow_ups: Mutex::default(),
            preapproved: Mutex::default(),
            journal: None,
        }
    }

    /// Lets the edit tools keep before-images in `journal` (`docs/sessions.md` §9).
    pub fn with_journal(mut self, journal: Option<Arc<crate::session::rewind::EditJournal>>) -> Self {
        self.journal = journal;
        self
    }

    /// Lets the tools start subagents of `agent` (the main agent only).
    pub fn with_delegator(mut self, agent: Arc<Agent>) -> Self {
        self.delegator = Some(agent);
        self
    }

    /// The follow-up the approval answer of the call `tool_call_id` with `arguments` asked for,
    /// if any.
    pub fn take_follow_up(&self, tool_call_id: &str, arguments: Option<&str>) -> Option<FollowUp> {
        let key = (tool_call_id.to_string(), arguments.map(str::to_string));
        let follow_up = self.follow_ups.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
        if let Some(FollowUp::Rerun(arguments)) = &follow_up {
            let key = (tool_call_id.to_string(), Some(arguments.clone()));
            self.preapproved.lock().unwrap_or_else(|p| p.into_inner()).insert(key);
        }
        follow_up
    }

    /// The call `tool_call_id` of `tool` with `arguments` needs no approval (plan mode's own
    /// file); another call with the same id still asks.
    pub fn grant(&self, tool_call_id: &str, tool: &str, arguments: Option<&str>) {
        let key = (tool_call_id.to_string(), tool.to_string(), arguments.map(str::to_string));
        self.granted.lock().unwrap_or_else(|p| p.into_inner()).insert(key);
    }

    /// The feedback given with the rejection of `tool_call_id` ("" when none).
    pub fn rejection_feedback(&self, tool_call_id: &str) -> String {
        self.feedback.lock().unwrap_or_else(|p| p.into_inner()).remove(tool_call_id).unwrap_or_default()
    }

    /// Whether a tool switched plan mode since the last call.
    pub fn take_plan_switched(&self) -> bool {
        self.plan_switched.swap(false, Ordering::SeqCst)
    }
}

impl ToolHost for SoulToolHost {
    fn client_files(&self) -> Option<Arc<dyn crate::tools::client_files::ClientFiles>> {
        self.client.files()
    }

    fn edit_journal(&self) -> Option<Arc<crate::session::rewind::EditJournal>> {
        self.journal.clone()
    }

    fn request_approval(&self, ask: ApprovalAsk) -> BoxFuture<'_, bool> {
        Box::pin(async move {
            let call = (ask.tool_call_id.clone(), ask.sender.clone(), ask.arguments.clone());
            if self.granted.lock().unwrap_or_else(|p| p.into_inner()).remove(&call) {
                return true;
            }
            let (call_id, _, arguments) = call;
            let key = (call_id.clone(), arguments);
            if self.preapproved.lock().unwrap_or_else(|p| p.into_inner()).remove(&key) {
                return true;
            }
            let verdict = self.hub.request(ask, &self.origin, &self.sink).await;
            let follow_up = match (&verdict.rerun_with, &verdict.denial) {
                (Some(arguments), _) => Some(FollowUp::Rerun(arguments.clone())),
                (None, Some(message)) => Some(FollowUp::Replace(ToolReturnValue::error(message.clone(), "Denied"))),
                (None, None) => None,
            };
            if let Some(follow_up) = follow_up {
                self.follow_ups.lock().unwrap_or_else(|p| p.into_inner()).insert(key, follow_up);
                return false;
            }
            let approved = verdict.is_approved();
            if !approved && !verdict.feedback.is_empty() {
                self.feedback.lock().unwrap_or_else(|p| p.into_inner()).insert(call_id, verdict.feedback);
            }
            approved
        })
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

    fn can_ask_user(&self) -> bool {
        self.client.supports_question()
    }

    fn ask_user(&self, tool_call_id: &str, questions: Vec<QuestionItem>) -> BoxFuture<'_, QuestionOutcome> {
        let tool_call_id = tool_call_id.to_string();
        Box::pin(async move {
            if !self.client.supports_question() {
                return QuestionOutcome::Unsupported;
            }
            let request = Request::QuestionRequest(QuestionRequest {
                id: uuid::Uuid::new_v4().to_string(),
                tool_call_id,
                questions,
            });
            match self.sink.request(request).await.await {
                Ok(ClientAnswer::Questions(Some(answers))) if !answers.is_empty() => QuestionOutcome::Answered(answers),
                Ok(ClientAnswer::QuestionsUnanswerable(reason)) => QuestionOutcome::Unanswerable(reason),
                // Dismissed, an error answer, or nobody left to answer.
                _ => QuestionOutcome::Dismissed,
            }
        })
    }

    fn plan_mode(&self) -> PlanView {
        self.hub.state().plan()
    }

    fn switch_plan_mode(&self, on: bool) -> PlanView {
        let before = self.hub.state().plan_mode();
        let view = self.hub.state().set_plan_mode(on);
        if before != on {
            self.plan_switched.store(true, Ordering::SeqCst);
        }
        view
    }

    fn show_plan(&self, content: String, file_path: String) -> BoxFuture<'_, ()> {
        Box::pin(async move { self.sink.emit(Event::PlanDisplay { content, file_path }).await })
    }

    // The main agent's calls only: a subagent's stream is merged before it reaches the client.
    fn streams_output(&self) -> bool {
        self.delegator.is_some()
    }

    fn show_output<'a>(&'a self, tool_call_id: &'a str, text: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if self.delegator.is_some() {
                self.sink.tool_output(tool_call_id, text).await;
            }
        })
    }

    fn presence(&self) -> Presence {
        let state = self.hub.state();
        Presence { yolo: state.yolo(), afk: state.afk() }
    }

    fn added_dirs(&self) -> Vec<std::path::PathBuf> {
        self.hub.state().additional_dirs().into_iter().map(std::path::PathBuf::from).collect()
    }

    fn todos(&self) -> Vec<TodoItem> {
        self.hub.state().todos()
    }

    fn set_todos(&self, todos: Vec<TodoItem>) {
        self.hub.state().set_todos(todos);
    }

    fn background(&self) -> Option<Arc<BackgroundTasks>> {
        self.delegator.as_ref().map(|agent| agent.background.clone())
    }

    fn delegate(&self, delegation: Delegation) -> BoxFuture<'_, ToolReturnValue> {
        Box::pin(async move {
            let Some(agent) = &self.delegator else {
                return ToolReturnValue::error(NO_NESTED_SUBAGENTS, "Agent failed");
            };
            if delegation.run_in_background {
                return start_background(agent, delegation, &self.sink);
            }
            run_foreground(agent, delegation, &self.sink, &self.origin.owner).await
        })
    }
}
