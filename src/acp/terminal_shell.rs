//! `Shell` through the client's terminal (`acp.md` §12.5), used when the client offers
//! `terminal`: same name, description and parameters as the built-in; the command runs in a
//! terminal the editor shows inside the tool call.
//!
//! Invariants: the terminal is released in every case, also when the turn is cancelled (the
//! call's future is dropped: release kills what still runs); the final `tool_call_update` of
//! such a call carries no content, so the embedded terminal stays what the user sees.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::v1::schema::{
    CreateTerminalRequest, CreateTerminalResponse, KillTerminalRequest, ReleaseTerminalRequest, SessionUpdate,
    Terminal, TerminalOutputRequest, TerminalOutputResponse, ToolCallContent, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, WaitForTerminalExitRequest, WaitForTerminalExitResponse,
};
use futures::future::BoxFuture;

use super::client_calls::ClientCalls;
use super::mapping::EventMapper;
use super::projection::send_update;
use crate::protocol::{DisplayBlock, ToolReturnValue};
use crate::tools::shell::{Shell, ShellParams};
use crate::tools::{ToolCallContext, TypedTool, check_range};

/// The tail of the output the client keeps.
const OUTPUT_BYTE_LIMIT: u64 = 50_000;

pub struct TerminalShell {
    session_id: String,
    calls: ClientCalls,
    mapper: Arc<Mutex<EventMapper>>,
    description: String,
}

impl TerminalShell {
    pub fn new(session_id: String, calls: ClientCalls, mapper: Arc<Mutex<EventMapper>>) -> Self {
        Self { session_id, calls, mapper, description: Shell::new().description() }
    }

    async fn execute(&self, params: ShellParams, ctx: &ToolCallContext) -> ToolReturnValue {
        if let Some(invalid) = check_range("timeout", params.timeout, 1..=300) {
            return invalid;
        }
        if params.command.is_empty() {
            return ToolReturnValue::error("Command cannot be empty.", "Empty command");
        }
        let display = vec![DisplayBlock::Shell { language: "bash".into(), command: params.command.clone() }];
        if !ctx.approve("Shell", "run command", format!("Run command `{}`", params.command), display).await {
            return ToolReturnValue::rejected();
        }
        let create = CreateTerminalRequest::new(self.session_id.clone(), params.command.clone())
            .cwd(ctx.env.work_dir.clone())
            .output_byte_limit(OUTPUT_BYTE_LIMIT);
        let created: CreateTerminalResponse = match self.calls.call("terminal/create", &create).await {
            Ok(c) => c,
            Err(e) => return ToolReturnValue::crashed(format!("Error running tool: {e}")),
        };
        let terminal = created.terminal_id.clone();
        let _release = Release {
            calls: self.calls.clone(),
            session_id: self.session_id.clone(),
            terminal: terminal.0.to_string(),
        };
        let acp_id = {
            let mut mapper = self.mapper.lock().unwrap_or_else(|p| p.into_inner());
            mapper.mark_terminal(&ctx.tool_call_id);
            mapper.acp_call_id(&ctx.tool_call_id)
        };
        let fields = ToolCallUpdateFields::new()
            .status(ToolCallStatus::InProgress)
            .content(vec![ToolCallContent::Terminal(Terminal::new(terminal.clone()))]);
        send_update(
            self.calls.peer.outbound(),
            &self.session_id,
            SessionUpdate::ToolCallUpdate(ToolCallUpdate::new(acp_id, fields)),
        )
        .await;
        let timeout = params.timeout as u64;
        let wait = WaitForTerminalExitRequest::new(self.session_id.clone(), terminal.clone());
        let waited = tokio::time::timeout(
            Duration::from_secs(timeout),
            self.calls.call::<_, WaitForTerminalExitResponse>("terminal/wait_for_exit", &wait),
        )
        .await;
        let timed_out = waited.is_err();
        if timed_out {
            let kill = KillTerminalRequest::new(self.session_id.clone(), terminal.clone());
            let _ = self.calls.call::<_, serde_json::Value>("terminal/kill", &kill).await;
        } else if let Ok(Err(e)) = waited {
            return ToolReturnValue::crashed(format!("Error running tool: {e}"));
        }
        let output_request = TerminalOutputRequest::new(self.session_id.clone(), terminal.clone());
        let output: TerminalOutputResponse = match self.calls.call("terminal/output", &output_request).await {
            Ok(o) => o,
            Err(e) => return ToolReturnValue::crashed(format!("Error running tool: {e}")),
        };
        let exit = match waited {
            Ok(Ok(w)) => Some(w.exit_status),
            _ => output.exit_status.clone(),
        };
        let note = if output.truncated { " Output was truncated by the client output limit." } else { "" };
        let text = output.output;
        if timed_out {
            return ToolReturnValue::error(
                format!("Command killed by timeout ({timeout}s){note}"),
                format!("Killed by timeout ({timeout}s)"),
            )
            .with_output(text);
        }
        match exit {
            Some(status) if status.signal.is_some() => {
                let signal = status.signal.unwrap_or_default();
                ToolReturnValue::error(
                    format!("Command terminated by signal: {signal}.{note}"),
                    format!("Terminated by {signal}"),
                )
                .with_output(text)
            }
            Some(status) if status.exit_code.is_some_and(|c| c != 0) => {
                let code = status.exit_code.unwrap_or_default();
                ToolReturnValue::error(
                    format!("Command failed with exit code: {code}.{note}"),
                    format!("Failed with exit code: {code}"),
                )
                .with_output(text)
            }
            _ => ToolReturnValue::ok(text, format!("Command executed successfully.{note}")),
        }
    }
}

impl TypedTool for TerminalShell {
    type Params = ShellParams;
    const NAME: &'static str = "Shell";

    fn description(&self) -> String {
        self.description.clone()
    }

    fn run<'a>(&'a self, params: ShellParams, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        Box::pin(self.execute(params, ctx))
    }
}

/// Releases the terminal when the call ends, however it ends.
struct Release {
    calls: ClientCalls,
    session_id: String,
    terminal: String,
}

impl Drop for Release {
    fn drop(&mut self) {
        let request = ReleaseTerminalRequest::new(self.session_id.clone(), self.terminal.clone());
        self.calls.fire("terminal/release", request);
    }
}
