//! Where a soul's events go: the front end's projection, and the session's recorder.
//!
//! The soul speaks one vocabulary (`protocol::Event` and `protocol::Request`) and knows nothing of
//! JSON-RPC. Each front end (wire, ACP, print) implements [`Projection`] to turn that vocabulary
//! into its own frames. The projection runs inline in the emitting task: when `emit` returns, the
//! frame is queued for the writer, so anything written straight to the writer afterwards (the
//! scripted-echo trace line) keeps its place by construction, and a slow client slows the turn
//! down through the writer's bounded queue (backpressure) instead of growing memory.
//!
//! Recording is the session's job, not the front end's: every event and request that passes
//! through a sink with a recorder lands in `wire.jsonl`, whoever serves the session — except what
//! 1.10 keeps out of the file on purpose (approvals and their responses, hook requests), which
//! goes through the `*_unrecorded` doors.

use std::any::Any;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use tokio::sync::oneshot;

use super::error::TurnResult;
use serde_json::{Map, Value};

use crate::protocol::{ApprovalDecision, Event, HookAction, Request, ToolReturnValue, WireMessage};
use crate::session::wire_log::WireLog;

/// The client's answer to a request, already interpreted by the front end.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientAnswer {
    Approval {
        decision: ApprovalDecision,
        feedback: String,
    },
    ToolResult(ToolReturnValue),
    /// Approved, with the call's arguments edited by the client (print mode's `can_use_tool`):
    /// the call runs again with these, without asking again.
    ApprovalWithArguments(ApprovalDecision, String),
    /// Refused with a message for the model; the turn goes on (print mode's deny).
    Denial(String),
    /// Question text → answer; `None` when the client dismissed the questions.
    Questions(Option<Map<String, Value>>),
    /// Nobody could answer the questions: the client has no way to show them (the reason, for
    /// the model, says why).
    QuestionsUnanswerable(String),
    Hook {
        action: HookAction,
        reason: String,
    },
}

/// Whatever the front end needs to answer the request that started a turn (the wire keeps the
/// JSON-RPC id of its `prompt` here). Opaque to the soul; handed back with the turn's outcome.
pub struct TurnTag(Box<dyn Any + Send>);

impl TurnTag {
    pub fn new<T: Any + Send>(value: T) -> Self {
        Self(Box::new(value))
    }

    /// The value the front end put in, if it is of type `T`.
    pub fn take<T: Any>(self) -> Option<T> {
        self.0.downcast::<T>().ok().map(|b| *b)
    }

    /// The value if it is of type `T`, else the tag unchanged (a wrapper looks inside).
    pub fn downcast<T: Any>(self) -> Result<T, TurnTag> {
        self.0.downcast::<T>().map(|b| *b).map_err(TurnTag)
    }
}

impl std::fmt::Debug for TurnTag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TurnTag")
    }
}

/// A front end's view of the soul's events. Implementations must not block: awaiting the
/// writer's queue is the only backpressure.
pub trait Projection: Send + Sync {
    /// One event, in order.
    fn event<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, ()>;

    /// A request the client must answer. Dropping the sender unanswered means the client is gone.
    fn request(&self, request: Request) -> BoxFuture<'_, oneshot::Receiver<ClientAnswer>>;

    /// The last item of every turn's stream: how it ended, with the tag it was started with.
    fn turn_ended(&self, tag: TurnTag, result: TurnResult) -> BoxFuture<'_, ()>;

    /// A turn another client of the same session started has ended (many clients on one
    /// session); a front end with one client never sees this.
    fn turn_observed<'a>(&'a self, _result: &'a TurnResult) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    /// Output a running tool has produced so far (`text`, a run of whole lines), for clients
    /// that show it while the tool runs (kiwi's `tool_output` extension). Never recorded: the
    /// tool's result is the record. A front end without such clients ignores it.
    fn tool_output<'a>(&'a self, _tool_call_id: &'a str, _text: &'a str) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    /// Another client answered `request` first: forget it (a late answer from this client is
    /// dropped).
    fn resolved<'a>(&'a self, _request: &'a Request) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}

/// Where a soul sends its events. Cheap to clone.
#[derive(Clone)]
pub struct EventSink {
    projection: Arc<dyn Projection>,
    recorder: Option<Arc<Mutex<WireLog>>>,
    /// Held shared while a message is projected and recorded, exclusively while a client
    /// joins: so a joining client finds each message either in the file or in its live stream,
    /// never in both and never in neither.
    seam: Arc<tokio::sync::RwLock<()>>,
}

impl std::fmt::Debug for EventSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventSink").field("recording", &self.recorder.is_some()).finish()
    }
}

impl EventSink {
    pub fn new(projection: Arc<dyn Projection>, recorder: Option<WireLog>) -> Self {
        Self { projection, recorder: recorder.map(|r| Arc::new(Mutex::new(r))), seam: Arc::default() }
    }

    /// Runs `join` with no message half-delivered: the record is flushed first, so the file
    /// holds exactly what was projected before, and `join` may take its length as the history.
    pub async fn at_seam<T>(&self, join: impl FnOnce() -> T) -> T {
        let _all = self.seam.write().await;
        self.flush_record();
        join()
    }

    fn record(&self, message: WireMessage) {
        if let Some(recorder) = &self.recorder {
            recorder.lock().unwrap_or_else(|p| p.into_inner()).record(message);
        }
    }

    /// Attaches the context position `mark` to the next recorded `TurnBegin`.
    pub fn mark_next_turn(&self, mark: crate::session::fork::ContextMark) {
        if let Some(recorder) = &self.recorder {
            recorder.lock().unwrap_or_else(|p| p.into_inner()).mark_next_turn(mark);
        }
    }

    /// The client's answer to the approval of `tool_call_id`: kept on that call's `ToolResult`
    /// record (kiwi's member `kiwi_approval`), since 1.10 records no approvals.
    pub fn note_decision(&self, tool_call_id: &str, decision: ApprovalDecision, feedback: &str) {
        if let Some(recorder) = &self.recorder {
            recorder.lock().unwrap_or_else(|p| p.into_inner()).note_decision(tool_call_id, decision, feedback);
        }
    }

    /// The running turn was stopped: its `TurnEnd` record says so (kiwi's member `kiwi_stopped`).
    pub fn note_stopped(&self) {
        if let Some(recorder) = &self.recorder {
            recorder.lock().unwrap_or_else(|p| p.into_inner()).note_stopped();
        }
    }

    /// Where the last recorded `TurnBegin` starts in `wire.jsonl`, taken once (`None`: not
    /// recording, or taken already).
    pub fn take_turn_begin(&self) -> Option<u64> {
        let recorder = self.recorder.as_ref()?;
        recorder.lock().unwrap_or_else(|p| p.into_inner()).take_turn_begin()
    }

    /// Cuts `wire.jsonl` back to `len` bytes with no message half-delivered (an undo); with
    /// `mute_turn` the rest of the running turn is not recorded. Without a recorder: nothing.
    pub async fn cut_record(&self, len: u64, mute_turn: bool) -> std::io::Result<()> {
        let _all = self.seam.write().await;
        match &self.recorder {
            Some(recorder) => recorder.lock().unwrap_or_else(|p| p.into_inner()).cut(len, mute_turn),
            None => Ok(()),
        }
    }

    /// Sends an event to the front end and the recorder.
    pub async fn emit(&self, event: Event) {
        let _seam = self.seam.read().await;
        self.projection.event(&event).await;
        self.record(WireMessage::Event(event));
    }

    /// Sends a request and returns the receiver of its answer.
    pub async fn request(&self, request: Request) -> oneshot::Receiver<ClientAnswer> {
        let _seam = self.seam.read().await;
        if self.recorder.is_some() {
            self.record(WireMessage::Request(request.clone()));
        }
        self.projection.request(request).await
    }

    /// An event the client sees but `wire.jsonl` does not keep (`ApprovalResponse`).
    pub async fn emit_unrecorded(&self, event: Event) {
        let _seam = self.seam.read().await;
        self.projection.event(&event).await;
    }

    /// A running tool's output so far, to the front end only (never recorded).
    pub async fn tool_output(&self, tool_call_id: &str, text: &str) {
        let _seam = self.seam.read().await;
        self.projection.tool_output(tool_call_id, text).await;
    }

    /// A request the client sees but `wire.jsonl` does not keep (approvals, hook requests).
    pub async fn request_unrecorded(&self, request: Request) -> oneshot::Receiver<ClientAnswer> {
        let _seam = self.seam.read().await;
        self.projection.request(request).await
    }

    /// Writes what the recorder still holds (a merged fragment run).
    pub fn flush_record(&self) {
        if let Some(recorder) = &self.recorder {
            recorder.lock().unwrap_or_else(|p| p.into_inner()).flush();
        }
    }

    /// Ends a turn's stream: the record is flushed first, so the file is complete when the
    /// client sees the outcome.
    pub(crate) async fn turn_ended(&self, tag: TurnTag, result: TurnResult) {
        let _seam = self.seam.read().await;
        self.flush_record();
        self.projection.turn_ended(tag, result).await;
    }
}
