//! The wire dispatcher: routes each inbound message, never awaiting the client or a turn.
//!
//! Invariants: every request gets exactly one response; the turn's lifecycle belongs to the
//! soul's driver, and a `prompt`'s response is written by the projection after every event of its
//! turn; the `cancel` response precedes the cancelled `prompt`'s response; answers to our own
//! requests are routed by their typed id, unknown ids dropped.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::methods::{ClientNotification, ClientRequest};
use super::params::{
    Empty, ExternalToolsOutcome, InitializeParams, InitializeResult, InterruptResult, PROTOCOL_VERSION, RejectedTool,
    SERVER_NAME, ServerInfo, SlashCommandInfo,
};
use crate::llm::ClientIdentity;
use crate::protocol::UserInput;
use crate::rpc::pending::PendingRequests;
use crate::rpc::reader::Inbound;
use crate::rpc::{ErrorCode, ErrorObject, Incoming, Outbound, RequestId};
use crate::soul::{TurnDriver, TurnTag};
use crate::tools::external::ExternalTool;

/// How long shutdown waits for a cancelled turn to unwind before giving up on it.
const SHUTDOWN_GRACE: Duration = Duration::from_millis(500);

pub struct WireServer {
    outbound: Outbound,
    pending: Arc<PendingRequests>,
    driver: Arc<TurnDriver>,
    version: String,
}

impl WireServer {
    pub fn new(outbound: Outbound, pending: Arc<PendingRequests>, driver: Arc<TurnDriver>, version: String) -> Self {
        Self { outbound, pending, driver, version }
    }

    /// Serves until the inbound channel closes (EOF) or `stop` fires.
    pub async fn serve(&self, mut inbound: Inbound, stop: CancellationToken) {
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

    async fn dispatch(&self, item: Incoming) {
        match item {
            Incoming::Request { id, method, params } => match ClientRequest::parse(&method, params) {
                Ok(request) => self.handle(id, request).await,
                Err(e) => self.outbound.error(Some(&id), &e).await,
            },
            Incoming::Notification { method, .. } => match ClientNotification::parse(&method) {
                Some(ClientNotification::Interrupt) => {
                    self.driver.cancel();
                }
                None => tracing::debug!("ignoring `{method}` sent as a notification"),
            },
            Incoming::Response { id, outcome } => {
                if !self.pending.resolve(&id, outcome) {
                    tracing::info!("ignoring a response to unknown request {id}");
                }
            }
            Incoming::Reject { id, error } => self.outbound.error(id.as_ref(), &error).await,
            Incoming::Ignore => {}
        }
    }

    async fn handle(&self, id: RequestId, request: ClientRequest) {
        match request {
            ClientRequest::Initialize(params) => self.initialize(id, params).await,
            ClientRequest::Prompt(params) => self.prompt(id, params.user_input).await,
            ClientRequest::Run(input) => self.prompt(id, input).await,
            ClientRequest::Cancel => match self.driver.cancel_handle() {
                Some(token) => {
                    // The answer goes out before the cancelled prompt's.
                    self.outbound.respond(&id, &Empty {}).await;
                    token.cancel();
                }
                None => {
                    let e = ErrorCode::InvalidState.with_message("No agent turn is in progress");
                    self.outbound.error(Some(&id), &e).await;
                }
            },
            ClientRequest::Interrupt => {
                let result = if self.driver.cancel() { InterruptResult::Ok } else { InterruptResult::Idle };
                self.outbound.respond(&id, &result).await;
            }
        }
    }

    async fn initialize(&self, id: RequestId, params: InitializeParams) {
        if self.driver.is_busy() {
            self.outbound.error(Some(&id), &busy()).await;
            return;
        }
        let agent = self.driver.agent();
        let mut outcome = ExternalToolsOutcome::default();
        let tools = params.external_tools.unwrap_or_default();
        let mut accepted = Vec::new();
        let current = agent.toolset();
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
            agent.update_toolset(|set| set.extend(accepted));
        }
        if let Some(llm) = agent.llm() {
            llm.set_client(params.client.map(|c| ClientIdentity { name: c.name, version: c.version }));
        }
        let result = InitializeResult {
            protocol_version: PROTOCOL_VERSION.into(),
            server: ServerInfo { name: SERVER_NAME.into(), version: self.version.clone() },
            slash_commands: agent
                .slash_commands
                .iter()
                .map(|c| SlashCommandInfo {
                    name: c.name.clone(),
                    description: c.description.clone(),
                    aliases: c.aliases.clone(),
                })
                .collect(),
            external_tools: (!tools.is_empty()).then_some(outcome),
        };
        self.outbound.respond(&id, &result).await;
    }

    async fn prompt(&self, id: RequestId, input: UserInput) {
        if self.driver.start(input, TurnTag::new(id.clone())).is_err() {
            self.outbound.error(Some(&id), &busy()).await;
        }
    }

    /// EOF or a signal: cancel the turn, let it answer, fail what is still pending.
    async fn shutdown(&self) {
        self.driver.shutdown(SHUTDOWN_GRACE).await;
        self.pending.fail_all();
    }
}

fn busy() -> ErrorObject {
    ErrorCode::InvalidState.with_message("An agent turn is already in progress")
}
