//! The wire dispatcher: routes each inbound message, never awaiting the client or a turn.
//!
//! Invariants: one turn at a time; every request gets exactly one response; a `prompt` response
//! is written after every event of its turn; the `cancel` response precedes the cancelled
//! `prompt`'s response; answers to our own requests are routed by id, unknown ids dropped.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::FutureExt;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::llm::ClientIdentity;
use crate::protocol::UserInput;
use crate::protocol::methods::{
    Empty, ExternalToolsOutcome, InitializeParams, InitializeResult, InterruptResult, PROTOCOL_VERSION, PromptParams,
    PromptResult, RejectedTool, SERVER_NAME, ServerInfo,
};
use crate::rpc::pending::PendingRequests;
use crate::rpc::reader::Inbound;
use crate::rpc::{ErrorCode, ErrorObject, Incoming, Outbound, RequestId};
use crate::soul::{Agent, EventSink, Soul, TurnError, TurnOutcome};
use crate::tools::external::ExternalTool;

/// How long shutdown waits for a cancelled turn to unwind before giving up on it.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

struct RunningTurn {
    cancel: CancellationToken,
    done: tokio::sync::watch::Receiver<bool>,
}

pub struct WireServer {
    outbound: Outbound,
    pending: Arc<PendingRequests>,
    agent: Arc<Agent>,
    soul: Arc<tokio::sync::Mutex<Soul>>,
    sink: EventSink,
    turn: Mutex<Option<RunningTurn>>,
    version: String,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl WireServer {
    pub fn new(
        outbound: Outbound,
        pending: Arc<PendingRequests>,
        soul: Soul,
        sink: EventSink,
        version: String,
    ) -> Arc<Self> {
        Arc::new(Self {
            outbound,
            pending,
            agent: soul.agent.clone(),
            soul: Arc::new(tokio::sync::Mutex::new(soul)),
            sink,
            turn: Mutex::new(None),
            version,
        })
    }

    /// Serves until the inbound channel closes (EOF) or `stop` fires.
    pub async fn serve(self: &Arc<Self>, mut inbound: Inbound, stop: CancellationToken) {
        loop {
            let item = tokio::select! {
                item = inbound.recv() => item,
                () = stop.cancelled() => None,
            };
            let Some(item) = item else { break };
            // A client that stopped reading stdout can block a reply forever; a signal still ends us.
            tokio::select! {
                () = self.dispatch(item) => {}
                () = stop.cancelled() => break,
            }
        }
        self.shutdown().await;
    }

    async fn dispatch(self: &Arc<Self>, item: Incoming) {
        match item {
            Incoming::Request { id, method, params } => self.handle_request(id, &method, params).await,
            Incoming::Notification { method, .. } => {
                if method == "interrupt" {
                    self.interrupt();
                } else {
                    tracing::debug!("ignoring `{method}` sent as a notification");
                }
            }
            Incoming::Response { id, outcome } => {
                if !self.pending.resolve(&id.to_string(), outcome) {
                    tracing::info!("ignoring a response to unknown request {id}");
                }
            }
            Incoming::Reject { id, error } => self.outbound.error(id.as_ref(), &error).await,
            Incoming::Ignore => {}
        }
    }

    async fn handle_request(self: &Arc<Self>, id: RequestId, method: &str, params: Option<Value>) {
        match method {
            "initialize" => match parse_params::<InitializeParams>(method, params) {
                Ok(p) => self.initialize(id, p).await,
                Err(e) => self.outbound.error(Some(&id), &e).await,
            },
            "prompt" => match parse_params::<PromptParams>(method, params) {
                Ok(p) => self.prompt(id, p.user_input).await,
                Err(e) => self.outbound.error(Some(&id), &e).await,
            },
            "run" => match legacy_run_input(params) {
                Some(text) => self.prompt(id, UserInput::Text(text)).await,
                None => self.outbound.error(Some(&id), &invalid_params(method)).await,
            },
            "cancel" => self.cancel(id).await,
            "interrupt" => {
                let result = if self.interrupt() { InterruptResult::Ok } else { InterruptResult::Idle };
                self.outbound.respond(&id, &result).await;
            }
            other => {
                let e = ErrorCode::MethodNotFound.with_message(format!("Unexpected method received: {other}"));
                self.outbound.error(Some(&id), &e).await;
            }
        }
    }

    fn turn_running(&self) -> bool {
        lock(&self.turn).is_some()
    }

    async fn initialize(&self, id: RequestId, params: InitializeParams) {
        if self.turn_running() {
            self.outbound.error(Some(&id), &busy()).await;
            return;
        }
        let mut outcome = ExternalToolsOutcome::default();
        let tools = params.external_tools.unwrap_or_default();
        let mut accepted = Vec::new();
        let current = self.agent.toolset();
        for spec in &tools {
            let conflicts = current.get(&spec.name).is_some_and(|t| !t.is_external());
            if conflicts {
                outcome
                    .rejected
                    .push(RejectedTool { name: spec.name.clone(), reason: "conflicts with builtin tool".into() });
                continue;
            }
            match ExternalTool::new(&spec.name, &spec.description, spec.parameters.clone()) {
                Ok(tool) => {
                    outcome.accepted.push(spec.name.clone());
                    accepted.push(tool.into_tool());
                }
                Err(reason) => outcome.rejected.push(RejectedTool { name: spec.name.clone(), reason }),
            }
        }
        if !accepted.is_empty() {
            self.agent.update_toolset(|set| accepted.into_iter().for_each(|t| set.insert(t)));
        }
        if let Some(llm) = self.agent.llm() {
            llm.set_client(params.client.map(|c| ClientIdentity { name: c.name, version: c.version }));
        }
        let result = InitializeResult {
            protocol_version: PROTOCOL_VERSION.into(),
            server: ServerInfo { name: SERVER_NAME.into(), version: self.version.clone() },
            slash_commands: self.agent.slash_commands.clone(),
            external_tools: (!tools.is_empty()).then_some(outcome),
        };
        self.outbound.respond(&id, &result).await;
    }

    async fn prompt(self: &Arc<Self>, id: RequestId, input: UserInput) {
        let cancel = CancellationToken::new();
        let (done_tx, done_rx) = tokio::sync::watch::channel(false);
        let claimed = {
            let mut turn = lock(&self.turn);
            let free = turn.is_none();
            if free {
                *turn = Some(RunningTurn { cancel: cancel.clone(), done: done_rx });
            }
            free
        };
        if !claimed {
            self.outbound.error(Some(&id), &busy()).await;
            return;
        }
        let server = self.clone();
        tokio::spawn(async move {
            let mut soul = server.soul.lock().await;
            // A panic inside the turn is still answered (-32603), never left in silence.
            let turn = std::panic::AssertUnwindSafe(soul.run_turn(input, &server.sink)).catch_unwind();
            let outcome = tokio::select! {
                r = turn => Some(r.unwrap_or_else(|panic| Err(TurnError::Internal(panic_message(&panic))))),
                () = cancel.cancelled() => None,
            };
            drop(soul);
            server.sink.flush().await;
            *lock(&server.turn) = None;
            match outcome {
                None => server.outbound.respond(&id, &PromptResult::Cancelled).await,
                Some(Ok(TurnOutcome::Finished)) => server.outbound.respond(&id, &PromptResult::Finished).await,
                Some(Ok(TurnOutcome::MaxStepsReached(steps))) => {
                    server.outbound.respond(&id, &PromptResult::MaxStepsReached { steps }).await
                }
                Some(Err(e)) => server.outbound.error(Some(&id), &turn_error(&e)).await,
            }
            let _ = done_tx.send(true);
        });
    }

    async fn cancel(&self, id: RequestId) {
        let token = lock(&self.turn).as_ref().map(|t| t.cancel.clone());
        match token {
            Some(token) => {
                // The answer goes out before the cancelled prompt's.
                self.outbound.respond(&id, &Empty {}).await;
                token.cancel();
            }
            None => {
                let e = ErrorCode::InvalidState.with_message("No agent turn is in progress");
                self.outbound.error(Some(&id), &e).await;
            }
        }
    }

    /// Legacy `interrupt`: true when a turn was running.
    fn interrupt(&self) -> bool {
        match lock(&self.turn).as_ref() {
            Some(t) => {
                t.cancel.cancel();
                true
            }
            None => false,
        }
    }

    /// EOF or a signal: cancel the turn, let it answer, fail what is still pending.
    async fn shutdown(&self) {
        let running = lock(&self.turn).as_ref().map(|t| (t.cancel.clone(), t.done.clone()));
        if let Some((cancel, mut done)) = running {
            cancel.cancel();
            let _ = tokio::time::timeout(SHUTDOWN_GRACE, done.wait_for(|d| *d)).await;
        }
        self.pending.fail_all();
        // The writer may be stuck on a client that stopped reading: never wait for it forever.
        let _ = tokio::time::timeout(SHUTDOWN_GRACE, self.sink.flush()).await;
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    let text = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    tracing::error!("a turn panicked: {text}");
    format!("Panic: {text}")
}

fn busy() -> ErrorObject {
    ErrorCode::InvalidState.with_message("An agent turn is already in progress")
}

fn invalid_params(method: &str) -> ErrorObject {
    ErrorCode::InvalidParams.with_message(format!("Invalid parameters for method `{method}`"))
}

fn parse_params<T: DeserializeOwned>(method: &str, params: Option<Value>) -> Result<T, ErrorObject> {
    let value = params.unwrap_or(Value::Null);
    serde_json::from_value(value).map_err(|e| {
        tracing::debug!("invalid params for {method}: {e}");
        invalid_params(method)
    })
}

/// `run` takes `params.input` (alias `params.prompt`), a string.
fn legacy_run_input(params: Option<Value>) -> Option<String> {
    #[derive(Deserialize)]
    struct RunParams {
        input: Option<Value>,
        prompt: Option<Value>,
    }
    let p: RunParams = serde_json::from_value(params?).ok()?;
    match p.input.or(p.prompt)? {
        Value::String(s) => Some(s),
        _ => None,
    }
}

pub fn turn_error(e: &TurnError) -> ErrorObject {
    let code = match e {
        TurnError::LlmNotSet => ErrorCode::LlmNotSet,
        TurnError::Capability { .. } => ErrorCode::LlmCapability,
        TurnError::Provider(_) => ErrorCode::ChatProvider,
        TurnError::Internal(_) => ErrorCode::InternalError,
    };
    code.with_message(e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn legacy_run_params() {
        assert_eq!(legacy_run_input(Some(serde_json::json!({"input":"a"}))), Some("a".into()));
        assert_eq!(legacy_run_input(Some(serde_json::json!({"prompt":"b"}))), Some("b".into()));
        assert_eq!(legacy_run_input(Some(serde_json::json!({"input":5}))), None);
        assert_eq!(legacy_run_input(Some(serde_json::json!({}))), None);
        assert_eq!(legacy_run_input(None), None);
        assert_eq!(legacy_run_input(Some(serde_json::json!([1]))), None);
    }

    #[test]
    fn prompt_params_validation() {
        assert!(parse_params::<PromptParams>("prompt", Some(serde_json::json!({}))).is_err());
        assert!(
            parse_params::<PromptParams>("prompt", Some(serde_json::json!({"user_input":[{"type":"bogus"}]}))).is_err()
        );
        assert!(parse_params::<PromptParams>("prompt", Some(serde_json::json!({"user_input":5}))).is_err());
        assert!(parse_params::<PromptParams>("prompt", Some(serde_json::json!({"user_input":[]}))).is_ok());
        let e = parse_params::<PromptParams>("prompt", None).unwrap_err();
        assert_eq!(e.message, "Invalid parameters for method `prompt`");
    }
}
