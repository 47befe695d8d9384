//! A session another kiwi process hosts, seen from a front end of this process (`docs/host.md`
//! §2): a client of the host's `live.sock` that turns the host's frames back into the core's
//! vocabulary, so ACP or the Claude dialect can serve a hosted session through the same
//! [`Projection`] they use for a session of their own.
//!
//! What it does: joins (the host sends the history up to the seam, `history_complete`, then the
//! live stream and the requests still waiting); hands the history out in batches
//! ([`RemoteHistory`]); then feeds every live event to the projection, puts every request to it
//! and sends its answer back (the host takes the first answer of any client); runs prompts and
//! cancels as the wire's `prompt` and `cancel`.
//!
//! Invariants: live messages reach the projection only after the history was read to its end
//! or dropped, so a front end's history output always precedes its live output; each request
//! is answered at most once, and is withdrawn from the projection (`Projection::resolved`) when
//! another client's answer won or the host went away; after the host's stream ended every call
//! answers [`RemoteError::Gone`] and a prompt still waiting ends as cancelled (the host cancels
//! the turn in flight when it exits, `docs/host.md` §3). This process writes nothing to the
//! session folder.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader, BufWriter};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::errors::WireError;
use super::host::Address;
use super::params::{ApprovalReply, HookReply, PromptResult, QuestionReply};
use crate::llm::ChatError;
use crate::protocol::{ApprovalDecision, Event, Request, ToolResult, UserInput, WireMessage};
use crate::rpc::ErrorObject;
use crate::soul::{ClientAnswer, Projection, TurnError, TurnOutcome, TurnResult};

/// How long the host may take to send its first frame (a peer it refuses gets none).
const FIRST_FRAME: Duration = Duration::from_secs(2);
/// History messages per batch handed to the front end.
const HISTORY_BATCH: usize = 256;
/// The longest frame accepted from the host.
const MAX_LINE: u64 = 64 * 1024 * 1024;

/// Why a call on a hosted session did not happen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RemoteError {
    /// Another client's turn runs (the wire's -32000).
    #[error("An agent turn is already in progress")]
    Busy,
    /// The host's stream ended: the host process exited.
    #[error("the session's host went away")]
    Gone,
    /// The host refused the call for another reason.
    #[error("{message}")]
    Rpc { code: i64, message: String },
}

/// A hosted session this process is attached to. Cheap to clone; the connection lasts until
/// [`Remote::detach`] or the host goes away (the task reading the host's frames holds a clone,
/// so dropping the front end's does not end it).
#[derive(Clone)]
pub struct Remote {
    inner: Arc<Inner>,
}

struct Inner {
    /// Lines for the writer task.
    lines: mpsc::UnboundedSender<String>,
    /// Our requests waiting for the host's answer, by id.
    waiting: Mutex<HashMap<String, oneshot::Sender<Reply>>>,
    next_id: AtomicU64,
    /// A turn runs on the host (its `TurnBegin` seen, its `TurnEnd` not yet).
    busy: AtomicBool,
    /// The inputs of our prompts whose turn has not begun yet, oldest first.
    own_inputs: Mutex<Vec<UserInput>>,
    /// The running turn is one of our prompts.
    own_turn: AtomicBool,
    /// The host's requests put to the projection and not answered yet, by id.
    asked: Mutex<HashMap<String, Asked>>,
    closed: CancellationToken,
}

struct Asked {
    request: Request,
    task: tokio::task::AbortHandle,
}

type Reply = Result<Value, ErrorObject>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The session's history up to the moment this process attached, in batches of messages as
/// `wire.jsonl` stores them. Reading it to the end, or dropping it, lets the live stream flow.
pub struct RemoteHistory {
    batches: mpsc::Receiver<Vec<WireMessage>>,
    gate: Option<oneshot::Sender<()>>,
}

impl RemoteHistory {
    /// The next batch; `None` once the history is complete (or the host went away).
    pub async fn next(&mut self) -> Option<Vec<WireMessage>> {
        let batch = self.batches.recv().await;
        if batch.is_none() {
            self.gate.take();
        }
        batch
    }
}

/// What a frame from the host can be: an event, a request, a response to us, a notice.
#[derive(Deserialize)]
struct Frame<'a> {
    #[serde(default, borrow)]
    method: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    id: Option<Value>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<ErrorObject>,
}

/// kiwi's `tool_output` event (`ToolOutput`), the one live event type outside the protocol's.
#[derive(Deserialize)]
struct ToolOutput {
    tool_call_id: String,
    text: String,
}

impl Remote {
    /// Attaches to the host of the session folder `dir`: connects, waits for its first frame
    /// (a peer the host refuses gets none), says what this client can answer, and returns the
    /// session's history up to the attach seam. Live messages then reach `projection`.
    pub async fn attach(dir: &Path, projection: Arc<dyn Projection>) -> std::io::Result<(Remote, RemoteHistory)> {
        let stream = UnixStream::connect(Address::of(dir)?.path()).await?;
        let (read, write) = stream.into_split();
        let mut reader = BufReader::new(read);
        let first = match tokio::time::timeout(FIRST_FRAME, reader.fill_buf()).await {
            Ok(Ok(buffer)) => !buffer.is_empty(),
            Ok(Err(e)) => return Err(e),
            Err(_) => false,
        };
        if !first {
            return Err(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "the host sent nothing"));
        }
        let (lines, queued) = mpsc::unbounded_channel();
        let inner = Arc::new(Inner {
            lines,
            waiting: Mutex::default(),
            next_id: AtomicU64::new(1),
            busy: AtomicBool::new(false),
            own_inputs: Mutex::default(),
            own_turn: AtomicBool::new(false),
            asked: Mutex::default(),
            closed: CancellationToken::new(),
        });
        tokio::spawn(write_lines(write, queued, inner.closed.clone()).in_current_span());
        // What this client can show; the extensions carry costs and running output to it.
        let hello = json!({
            "jsonrpc": "2.0",
            "id": "kiwi-remote-initialize",
            "method": "initialize",
            "params": {
                "protocol_version": super::params::PROTOCOL_VERSION,
                "client": {"name": "kiwi", "version": crate::VERSION},
                "capabilities": {"supports_question": true, "supports_plan_mode": true},
                "extensions": [super::extensions::COST, super::extensions::TOOL_OUTPUT],
            },
        });
        let _ = inner.lines.send(hello.to_string());
        let (batches, history) = mpsc::channel(2);
        let (gate, opened) = oneshot::channel();
        let remote = Remote { inner };
        tokio::spawn(read_frames(reader, remote.clone(), projection, batches, opened).in_current_span());
        Ok((remote, RemoteHistory { batches: history, gate: Some(gate) }))
    }

    /// Runs `input` as a turn of the hosted session; its events reach the projection as they
    /// come. The turn's end is the answer; [`RemoteError::Busy`] while another client's turn
    /// runs. A prompt the host never answered because it went away ended cancelled.
    pub async fn prompt(&self, input: UserInput) -> Result<TurnResult, RemoteError> {
        if self.is_closed() {
            return Err(RemoteError::Gone);
        }
        lock(&self.inner.own_inputs).push(input.clone());
        let reply = self.call("prompt", json!({ "user_input": input })).await;
        match reply {
            Err(RemoteError::Gone) => Ok(Ok(TurnOutcome::Cancelled)),
            Err(e) => {
                let mut own = lock(&self.inner.own_inputs);
                if let Some(at) = own.iter().position(|i| *i == input) {
                    own.remove(at);
                }
                Err(e)
            }
            Ok(Ok(value)) => match serde_json::from_value::<PromptResult>(value) {
                Ok(result) => Ok(Ok(outcome(result))),
                Err(e) => Err(RemoteError::Rpc { code: -32603, message: format!("unreadable prompt answer: {e}") }),
            },
            Ok(Err(error)) => match turn_error(&error) {
                Some(e) => Ok(Err(e)),
                None if error.code == WireError::InvalidState.code() => Err(RemoteError::Busy),
                None => Err(RemoteError::Rpc { code: error.code, message: error.message }),
            },
        }
    }

    /// Cancels the running turn, whoever started it.
    pub async fn cancel(&self) -> Result<(), RemoteError> {
        match self.call("cancel", json!({})).await? {
            Ok(_) => Ok(()),
            Err(error) => Err(RemoteError::Rpc { code: error.code, message: error.message }),
        }
    }

    /// Detaches from the host (the front end is done with the session): the host sees this
    /// connection end, as when the process exits; later calls answer [`RemoteError::Gone`].
    pub fn detach(&self) {
        self.inner.closed.cancel();
    }

    /// Resolves when the host's stream ended.
    pub async fn closed(&self) {
        self.inner.closed.cancelled().await;
    }

    /// Whether the host's stream ended.
    pub fn is_closed(&self) -> bool {
        self.inner.closed.is_cancelled()
    }

    /// Whether a turn runs on the host.
    pub fn is_busy(&self) -> bool {
        self.inner.busy.load(Ordering::SeqCst)
    }

    /// Sends one request to the host and waits for its answer.
    async fn call(&self, method: &str, params: Value) -> Result<Reply, RemoteError> {
        if self.is_closed() {
            return Err(RemoteError::Gone);
        }
        let id = format!("kiwi-remote-{}", self.inner.next_id.fetch_add(1, Ordering::Relaxed));
        let (reply, answer) = oneshot::channel();
        lock(&self.inner.waiting).insert(id.clone(), reply);
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        if self.inner.lines.send(line.to_string()).is_err() {
            lock(&self.inner.waiting).remove(&id);
            return Err(RemoteError::Gone);
        }
        answer.await.map_err(|_| RemoteError::Gone)
    }
}

/// Writes queued lines to the host, flushing when the queue is empty.
async fn write_lines(half: OwnedWriteHalf, mut queued: mpsc::UnboundedReceiver<String>, closed: CancellationToken) {
    let mut out = BufWriter::new(half);
    loop {
        let line = tokio::select! {
            line = queued.recv() => line,
            () = closed.cancelled() => None,
        };
        let Some(line) = line else { break };
        if out.write_all(line.as_bytes()).await.is_err() || out.write_all(b"\n").await.is_err() {
            break;
        }
        if queued.is_empty() && out.flush().await.is_err() {
            break;
        }
    }
    let _ = out.shutdown().await;
}

/// Reads the host's frames until its stream ends: the history into `batches`, then (once
/// `opened` fires) the live stream into the projection.
async fn read_frames(
    mut reader: BufReader<OwnedReadHalf>,
    remote: Remote,
    projection: Arc<dyn Projection>,
    batches: mpsc::Sender<Vec<WireMessage>>,
    opened: oneshot::Receiver<()>,
) {
    let mut history = Some((batches, Vec::new(), opened));
    let mut line = Vec::new();
    loop {
        line.clear();
        match (&mut reader).take(MAX_LINE + 1).read_until(b'\n', &mut line).await {
            Ok(0) => break,
            Ok(n) if n as u64 > MAX_LINE => {
                tracing::warn!("the session's host sent a frame longer than {MAX_LINE} bytes; detaching");
                break;
            }
            Ok(_) => {}
            Err(e) => {
                tracing::info!("reading from the session's host failed: {e}");
                break;
            }
        }
        let Ok(frame) = serde_json::from_slice::<Frame>(&line) else {
            tracing::warn!("the session's host sent a line that is not JSON-RPC; skipped");
            continue;
        };
        match (frame.method.as_deref(), history.as_mut()) {
            (Some("history_complete"), Some(_)) => {
                let Some((batches, batch, opened)) = history.take() else { continue };
                if !batch.is_empty() {
                    let _ = batches.send(batch).await;
                }
                drop(batches);
                // The front end has written the history out (or does not want it).
                let _ = opened.await;
            }
            (Some("event" | "request"), Some((batches, batch, _))) => {
                if let Some(message) = frame.params.and_then(|p| serde_json::from_str::<WireMessage>(p.get()).ok()) {
                    batch.push(message);
                }
                if batch.len() >= HISTORY_BATCH {
                    let full = std::mem::take(batch);
                    let _ = batches.send(full).await;
                }
            }
            (Some("event"), None) => remote.live_event(frame.params, &projection).await,
            (Some("request"), None) => remote.live_request(frame.id, frame.params, &projection),
            (Some(other), _) => tracing::debug!("the session's host sent `{other}`; not for this client"),
            (None, _) => remote.answered(frame.id, frame.result, frame.error),
        }
    }
    remote.host_gone(&projection).await;
}

impl Remote {
    async fn live_event(&self, params: Option<&RawValue>, projection: &Arc<dyn Projection>) {
        let Some(params) = params else { return };
        // One parse for the protocol's events; only what is not one is looked at again.
        let event = match serde_json::from_str::<Event>(params.get()) {
            Ok(event) => event,
            Err(e) => {
                #[derive(Deserialize)]
                struct Output {
                    #[serde(rename = "type")]
                    kind: String,
                    payload: ToolOutput,
                }
                match serde_json::from_str::<Output>(params.get()) {
                    Ok(output) if output.kind == "ToolOutput" => {
                        projection.tool_output(&output.payload.tool_call_id, &output.payload.text).await;
                    }
                    _ => tracing::debug!("skipping an event of the session's host ({e})"),
                }
                return;
            }
        };
        let inner = &self.inner;
        let mut observed = false;
        match &event {
            Event::TurnBegin { user_input } => {
                inner.busy.store(true, Ordering::SeqCst);
                let mut own = lock(&inner.own_inputs);
                let at = own.iter().position(|i| i == user_input);
                if let Some(at) = at {
                    own.remove(at);
                }
                inner.own_turn.store(at.is_some(), Ordering::SeqCst);
            }
            Event::TurnEnd {} => {
                inner.busy.store(false, Ordering::SeqCst);
                observed = !inner.own_turn.swap(false, Ordering::SeqCst);
            }
            Event::ApprovalResponse(response) => {
                // An answer won: if it was not ours, the projection forgets the question.
                let asked = lock(&inner.asked).remove(&response.request_id);
                if let Some(asked) = asked {
                    asked.task.abort();
                    projection.resolved(&asked.request).await;
                }
            }
            _ => {}
        }
        projection.event(&event).await;
        if observed {
            // The outcome of another client's turn is its own; an attacher only sees it end.
            projection.turn_observed(&Ok(TurnOutcome::Finished(None))).await;
        }
    }

    /// Puts a request of the host to the projection; its answer goes back to the host.
    fn live_request(&self, id: Option<Value>, params: Option<&RawValue>, projection: &Arc<dyn Projection>) {
        let (Some(id), Some(params)) = (id, params) else { return };
        let request = match serde_json::from_str::<Request>(params.get()) {
            Ok(request) => request,
            Err(e) => {
                tracing::warn!(
                    "the session's host sent a request this process cannot read ({e}); left to other clients"
                );
                return;
            }
        };
        let key = request.id().to_string();
        let remote = self.clone();
        let projection = projection.clone();
        let asked = request.clone();
        let mut asked_map = lock(&self.inner.asked);
        let task = tokio::spawn(
            async move {
                let answer = projection.request(asked.clone()).await.await;
                // Out of the map before the answer leaves, so the host's `ApprovalResponse`
                // for it is not taken for another client's.
                let still_asked = lock(&remote.inner.asked).remove(asked.id()).is_some();
                let Ok(answer) = answer else { return };
                match reply(&asked, answer) {
                    Some(result) if still_asked => {
                        let line = json!({"jsonrpc": "2.0", "id": id, "result": result});
                        let _ = remote.inner.lines.send(line.to_string());
                    }
                    Some(_) => {}
                    None => tracing::info!("left request {} to the session's other clients", asked.id()),
                }
            }
            .in_current_span(),
        );
        asked_map.insert(key, Asked { request, task: task.abort_handle() });
    }

    /// The host's answer to one of our requests.
    fn answered(&self, id: Option<Value>, result: Option<Value>, error: Option<ErrorObject>) {
        let Some(id) = id.as_ref().and_then(Value::as_str) else { return };
        let Some(reply) = lock(&self.inner.waiting).remove(id) else {
            // The answer to our `initialize` (nothing to do with it) or to an id we gave up.
            return;
        };
        let _ = reply.send(match error {
            Some(error) => Err(error),
            None => Ok(result.unwrap_or(Value::Null)),
        });
    }

    /// The host's stream ended: every call and request is over.
    async fn host_gone(&self, projection: &Arc<dyn Projection>) {
        tracing::info!("the session's host ended the stream");
        self.inner.closed.cancel();
        self.inner.busy.store(false, Ordering::SeqCst);
        lock(&self.inner.waiting).clear();
        let asked: Vec<Asked> = lock(&self.inner.asked).drain().map(|(_, a)| a).collect();
        for asked in asked {
            asked.task.abort();
            projection.resolved(&asked.request).await;
        }
    }
}

/// A wire prompt answer as the turn's outcome.
fn outcome(result: PromptResult) -> TurnOutcome {
    match result {
        PromptResult::Finished => TurnOutcome::Finished(None),
        PromptResult::Cancelled => TurnOutcome::Cancelled,
        PromptResult::MaxStepsReached { steps } => TurnOutcome::MaxStepsReached(steps),
        PromptResult::TokenBudgetReached { tokens, max_session_tokens } => {
            TurnOutcome::TokenBudgetReached { used: tokens, limit: max_session_tokens }
        }
        PromptResult::BudgetReached { cost_usd, max_budget_usd } => {
            TurnOutcome::CostBudgetReached { spent: cost_usd, limit: max_budget_usd }
        }
    }
}

/// The turn failure a wire error of a `prompt` stands for; `None` for errors that are not a
/// failed turn (busy, refused params, a capability the host's model lacks).
fn turn_error(error: &ErrorObject) -> Option<TurnError> {
    let code = error.code;
    if code == WireError::LlmNotSet.code() {
        Some(TurnError::LlmNotSet { reason: None })
    } else if code == WireError::ChatProvider.code() {
        Some(TurnError::Provider(ChatError::Other(error.message.clone())))
    } else if code == WireError::LoginExpired.code() {
        Some(TurnError::Provider(ChatError::LoginExpired))
    } else {
        None
    }
}

/// The wire answer to `request` for the projection's `answer`; `None` when this client has no
/// answer to give (the other clients may).
fn reply(request: &Request, answer: ClientAnswer) -> Option<Value> {
    let request_id = request.id().to_string();
    let approval = |response: ApprovalDecision, feedback: String| {
        serde_json::to_value(ApprovalReply { request_id: request_id.clone(), response, feedback }).ok()
    };
    match (request, answer) {
        (Request::ApprovalRequest(_), ClientAnswer::Approval { decision, feedback }) => approval(decision, feedback),
        (Request::ApprovalRequest(_), ClientAnswer::ApprovalWithArguments(decision, _)) => {
            // The wire cannot carry edited arguments: the call runs as the model made it.
            tracing::info!("an approval with edited arguments reached a hosted session; the arguments stay");
            approval(decision, String::new())
        }
        (Request::ApprovalRequest(_), ClientAnswer::Denial(message)) => approval(ApprovalDecision::Reject, message),
        (Request::ToolCallRequest(call), ClientAnswer::ToolResult(return_value)) => {
            serde_json::to_value(ToolResult { tool_call_id: call.id.clone(), return_value }).ok()
        }
        (Request::QuestionRequest(_), ClientAnswer::Questions(answers)) => {
            serde_json::to_value(QuestionReply { request_id: request_id.clone(), answers: answers.unwrap_or_default() })
                .ok()
        }
        (Request::HookRequest(_), ClientAnswer::Hook { action, reason }) => {
            serde_json::to_value(HookReply { request_id: request_id.clone(), action, reason }).ok()
        }
        (_, ClientAnswer::QuestionsUnanswerable(_)) => None,
        (request, answer) => {
            tracing::warn!("answer {answer:?} does not fit request {}; not sent", request.id());
            None
        }
    }
}

#[cfg(test)]
mod tests;
