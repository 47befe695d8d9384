//! A subagent run as a background task (`docs/protocol-1.10.md` §8.4): the call returns at once with the
//! task id; the run goes on inside the server, its events only in its own files (and a front end's
//! background view, when the session has one), its approvals to the client marked
//! `background_agent` with the task id as their source.
//!
//! Invariants: the run is the task's future, so `TaskStop`, its timeout and exit drop it (its
//! processes die with their calls); its pending approvals are rejected when it ends that way.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::oneshot;

use super::SubagentRole;
use super::run::{Instance, open_instance, run_to_summary};
use super::wrap::WrapProjection;
use crate::protocol::{ApprovalSource, Event, Request, ToolReturnValue};
use crate::session::wire_log::WireLog;
use crate::soul::Agent;
use crate::soul::approval::ApprovalHub;
use crate::soul::error::TurnResult;
use crate::soul::sink::{ClientAnswer, EventSink, Projection, TurnTag};
use crate::tools::Delegation;
use crate::tools::background::{TaskEnd, TaskKind, TaskStatus, Work, new_task_id};

/// Starts the instance `d` asks for as a background task; the tool result says how to follow it.
pub fn start_background(parent: &Arc<Agent>, d: Delegation, parent_sink: &EventSink) -> ToolReturnValue {
    let tasks = parent.background.clone();
    if let Err(message) = tasks.check_room() {
        return ToolReturnValue::error(message, "Start failed");
    }
    let task_id = new_task_id(TaskKind::Agent);
    let role_of = |agent_id: &str, subagent_type: &str| SubagentRole {
        agent_id: agent_id.to_string(),
        subagent_type: subagent_type.to_string(),
        source_kind: ApprovalSource::BackgroundAgent,
        source_id: Some(task_id.clone()),
        owner: task_id.clone(),
    };
    let instance = match open_instance(parent, &d, role_of) {
        Ok(i) => i,
        Err(result) => return *result,
    };
    let (agent_id, subagent_type) = (instance.agent_id.clone(), instance.subagent_type.clone());
    let timeout_s = d.timeout.unwrap_or(tasks.settings().agent_task_timeout_s);
    let view = parent
        .subagents
        .background_view()
        .map(|view| WrapProjection::new(EventSink::new(view, None), &d.tool_call_id, &agent_id, &subagent_type));
    let projection = ApprovalsOnly { parent: parent_sink.clone(), view };
    let sink = EventSink::new(Arc::new(projection), Some(WireLog::new(&instance.dir.join("wire.jsonl"))));
    let cleanup = RejectOnDrop { hub: parent.approvals.clone(), owner: task_id.clone(), sink: sink.clone() };
    let run = run(instance, d.prompt.clone(), sink, cleanup);
    let work = Work::Agent { agent_id: agent_id.clone(), subagent_type: subagent_type.clone(), run, timeout_s };
    let info = match tasks.start_as(task_id, work, &d.description) {
        Ok(info) => info,
        Err(message) => return ToolReturnValue::error(message, "Start failed"),
    };
    let output = [
        format!("task_id: {}", info.id),
        "kind: agent".into(),
        format!("status: {}", info.status.as_str()),
        format!("description: {}", d.description),
        format!("agent_id: {agent_id}"),
        format!("actual_subagent_type: {subagent_type}"),
        "automatic_notification: true".into(),
        "next_step: You will be notified when the subagent finishes; carry on with other work meanwhile.".into(),
        format!("resume_hint: Once it has finished, call Agent with resume set to {agent_id} to give it more work."),
    ];
    ToolReturnValue::ok(output.join("\n"), "Background task started.")
}

fn run(
    mut instance: Instance,
    prompt: String,
    sink: EventSink,
    cleanup: RejectOnDrop,
) -> BoxFuture<'static, (TaskEnd, String)> {
    Box::pin(async move {
        let outcome = run_to_summary(&mut instance.soul, &prompt, &sink).await;
        sink.flush_record();
        drop(cleanup);
        match outcome {
            Ok(summary) => {
                let _ = std::fs::write(instance.dir.join("output"), &summary);
                (TaskEnd { status: TaskStatus::Completed, exit_code: None, reason: None, timed_out: false }, summary)
            }
            Err(result) => {
                let message = result.message.clone();
                let end = TaskEnd {
                    status: TaskStatus::Failed,
                    exit_code: None,
                    reason: Some(message.clone()),
                    timed_out: false,
                };
                (end, message)
            }
        }
    })
}

/// Rejects the run's pending approvals when it ends, also when it is dropped (stopped).
struct RejectOnDrop {
    hub: Arc<ApprovalHub>,
    owner: String,
    sink: EventSink,
}

impl Drop for RejectOnDrop {
    fn drop(&mut self) {
        let (hub, owner, sink) = (self.hub.clone(), self.owner.clone(), self.sink.clone());
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move { hub.reject_turn(&owner, &sink).await });
        }
    }
}

/// A background run's front end: its events stay in its own files (and reach the session's
/// background view, if it has one, wrapped); approvals (and their resolutions) reach the client.
struct ApprovalsOnly {
    parent: EventSink,
    view: Option<WrapProjection>,
}

impl Projection for ApprovalsOnly {
    fn event<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            match (event, &self.view) {
                (Event::ApprovalResponse(_), _) => self.parent.emit_unrecorded(event.clone()).await,
                (_, Some(view)) => view.event(event).await,
                (_, None) => {}
            }
        })
    }

    // The answer's receiver is what a projection hands back (awaited by the asker).
    #[allow(clippy::async_yields_async)]
    fn request(&self, request: Request) -> BoxFuture<'_, oneshot::Receiver<ClientAnswer>> {
        Box::pin(async move {
            // What the run showed so far comes before its question.
            if let Some(view) = &self.view {
                view.flush().await;
            }
            match request {
                Request::ApprovalRequest(_) | Request::HookRequest(_) => self.parent.request_unrecorded(request).await,
                other => self.parent.request(other).await,
            }
        })
    }

    fn turn_ended(&self, _tag: TurnTag, _result: TurnResult) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}
