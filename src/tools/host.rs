//! The narrow interface through which a running tool reaches its host (the soul): asking the
//! user for approval or questions, handing a call to a client-owned tool, plan mode, the
//! session's todo list. Tools know nothing else of the agent loop, its events or the front end,
//! so the layers point one way (soul → tools).
//!
//! Every method but the first two has a default for hosts without a user (tests, subagents): no
//! questions, no plan mode, nobody away, no stored todo list.

use std::path::PathBuf;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use crate::protocol::{DisplayBlock, QuestionItem, TodoItem, ToolReturnValue};

/// What a tool asks approval for.
#[derive(Debug, Clone)]
pub struct ApprovalAsk {
    pub tool_call_id: String,
    pub sender: String,
    pub action: String,
    pub description: String,
    pub display: Vec<DisplayBlock>,
    /// The asking call's arguments exactly as it got them: the call itself, not only its id
    /// (ids can repeat), is what an approval is for.
    pub arguments: Option<String>,
}

/// A call of the `Agent` tool, validated: what to delegate, to which kind of subagent, how.
#[derive(Debug, Clone)]
pub struct Delegation {
    pub tool_call_id: String,
    pub description: String,
    pub prompt: String,
    pub subagent_type: String,
    pub model: Option<String>,
    /// The instance to continue (`a` + 8 hex digits).
    pub resume: Option<String>,
    pub run_in_background: bool,
    /// Seconds; `None` = no limit for a foreground run, the configured one in the background.
    pub timeout: Option<u64>,
}

/// Said to a subagent that tries to start another (`docs/protocol-1.10.md` §8.1).
pub const NO_NESTED_SUBAGENTS: &str = "Subagents cannot launch other subagents.";

/// A call of a client-owned tool, with the arguments exactly as the model sent them.
#[derive(Debug, Clone)]
pub struct ClientToolCall {
    pub tool_call_id: String,
    pub name: String,
    pub arguments: Option<String>,
}

/// How questions to the user went.
#[derive(Debug, Clone, PartialEq)]
pub enum QuestionOutcome {
    /// Question text → answer (an option label, labels joined with `, `, or free text).
    Answered(Map<String, Value>),
    /// The user (or the end of the turn) dismissed them.
    Dismissed,
    /// The client cannot show questions; nothing was asked.
    Unsupported,
    /// The client can show some questions but not these (the reason says why); nothing was asked.
    Unanswerable(String),
}

/// Plan mode as a tool sees it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PlanView {
    pub active: bool,
    /// The current plan file, while active.
    pub file: Option<PathBuf>,
}

/// Whether somebody is there to answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Presence {
    /// Every action is approved without asking.
    pub yolo: bool,
    /// Nobody is present: approvals pass, questions are dismissed, plans approved.
    pub afk: bool,
}

pub trait ToolHost: Send + Sync {
    /// Asks for approval (unless auto-approved); true when the call may go ahead. A request that
    /// cannot be answered (client gone, turn cancelled) is a rejection.
    fn request_approval(&self, ask: ApprovalAsk) -> BoxFuture<'_, bool>;

    /// Hands the call to the client; `None` when no answer can come (the client is gone).
    fn call_client_tool(&self, call: ClientToolCall) -> BoxFuture<'_, Option<ToolReturnValue>>;

    /// Whether questions can reach the user at all (the client shows them).
    fn can_ask_user(&self) -> bool {
        false
    }

    /// Asks the user `questions` on behalf of the call `tool_call_id`.
    fn ask_user(&self, _tool_call_id: &str, _questions: Vec<QuestionItem>) -> BoxFuture<'_, QuestionOutcome> {
        Box::pin(async { QuestionOutcome::Unsupported })
    }

    fn plan_mode(&self) -> PlanView {
        PlanView::default()
    }

    /// Switches plan mode on or off; returns the new state.
    fn switch_plan_mode(&self, _on: bool) -> PlanView {
        PlanView::default()
    }

    /// Shows the plan at `file_path` to the user (before asking to approve it).
    fn show_plan(&self, _content: String, _file_path: String) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    fn presence(&self) -> Presence {
        Presence::default()
    }

    /// Whether output a tool produces while it runs reaches anyone ([`ToolHost::show_output`]);
    /// when not, a tool need not gather it.
    fn streams_output(&self) -> bool {
        false
    }

    /// Output of the running call `tool_call_id` so far (whole lines), shown to the user while
    /// it runs. What the model sees is the tool's result alone.
    fn show_output<'a>(&'a self, _tool_call_id: &'a str, _text: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    /// The session's added dirs (`--add-dir`, `/add-dir`): writable roots of a sandboxed command.
    fn added_dirs(&self) -> Vec<PathBuf> {
        Vec::new()
    }

    /// The session's todo list.
    fn todos(&self) -> Vec<TodoItem> {
        Vec::new()
    }

    /// The client's files, when the client serves them (ACP): the file tools read and write
    /// through it instead of the disk.
    fn client_files(&self) -> Option<std::sync::Arc<dyn super::client_files::ClientFiles>> {
        None
    }

    fn set_todos(&self, _todos: Vec<TodoItem>) {}

    /// Where the edit tools keep what a file was before they changed it, for an undo
    /// (`docs/sessions.md` §9); `None` keeps nothing.
    fn edit_journal(&self) -> Option<std::sync::Arc<crate::session::rewind::EditJournal>> {
        None
    }

    /// The session's background tasks; `None` where tasks cannot be managed (a subagent).
    fn background(&self) -> Option<std::sync::Arc<super::background::BackgroundTasks>> {
        None
    }

    /// Runs a subagent for the `Agent` tool; hosts that cannot (a subagent's own) refuse.
    fn delegate(&self, _delegation: Delegation) -> BoxFuture<'_, ToolReturnValue> {
        Box::pin(async { ToolReturnValue::error(NO_NESTED_SUBAGENTS, "Agent failed") })
    }
}
