//! How a foreground subagent's events reach the parent's front end (`docs/protocol-1.10.md` §8.3): its
//! stream is merged by the step assembler (text runs joined, tool calls complete) and every
//! event is wrapped in `SubagentEvent` on the parent's sink — so the parent's front end and its
//! `wire.jsonl` see them, whatever the front end is. Requests and `ApprovalResponse` go through
//! unwrapped, approvals unrecorded as for the main agent.
//!
//! Invariant: a merged fragment run is emitted before the next event or request, so the wrapped
//! order is the subagent's order.

use std::sync::Mutex;

use futures::future::BoxFuture;
use tokio::sync::oneshot;

use crate::protocol::{Event, Fed, Request, Run, RunAssembler, SubagentEvent};
use crate::soul::error::TurnResult;
use crate::soul::sink::{ClientAnswer, EventSink, Projection, TurnTag};

pub struct WrapProjection {
    parent: EventSink,
    parent_tool_call_id: String,
    agent_id: String,
    subagent_type: String,
    /// The fragment run being merged.
    runs: Mutex<RunAssembler>,
}

impl WrapProjection {
    pub fn new(parent: EventSink, parent_tool_call_id: &str, agent_id: &str, subagent_type: &str) -> Self {
        Self {
            parent,
            parent_tool_call_id: parent_tool_call_id.to_string(),
            agent_id: agent_id.to_string(),
            subagent_type: subagent_type.to_string(),
            runs: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, RunAssembler> {
        self.runs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wrap(&self, event: Event) -> Event {
        Event::SubagentEvent(SubagentEvent {
            parent_tool_call_id: Some(self.parent_tool_call_id.clone()),
            agent_id: Some(self.agent_id.clone()),
            subagent_type: Some(self.subagent_type.clone()),
            event: Box::new(event),
        })
    }

    /// Emits the merged run, if any.
    pub async fn flush(&self) {
        let done = self.lock().close();
        self.emit_run(done).await;
    }

    async fn emit_run(&self, run: Option<Run>) {
        if let Some(run) = run {
            self.parent.emit(self.wrap(run.into_event())).await;
        }
    }
}

impl Projection for WrapProjection {
    fn event<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            let fed = self.lock().push(event);
            match fed {
                Fed::Continued => {}
                Fed::Opened(done) => self.emit_run(done).await,
                Fed::Other(done) => {
                    self.emit_run(done).await;
                    match event {
                        Event::ApprovalResponse(_) => self.parent.emit_unrecorded(event.clone()).await,
                        _ => self.parent.emit(self.wrap(event.clone())).await,
                    }
                }
            }
        })
    }

    // The answer's receiver is what a projection hands back (awaited by the asker).
    #[allow(clippy::async_yields_async)]
    fn request(&self, request: Request) -> BoxFuture<'_, oneshot::Receiver<ClientAnswer>> {
        Box::pin(async move {
            self.flush().await;
            match request {
                Request::ApprovalRequest(_) | Request::HookRequest(_) => self.parent.request_unrecorded(request).await,
                other => self.parent.request(other).await,
            }
        })
    }

    /// A nested run has no turn of its own to answer; never called.
    fn turn_ended(&self, _tag: TurnTag, _result: TurnResult) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}
