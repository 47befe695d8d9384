//! The MCP wait at the start of an agent run (`docs/subcommands.md` §2.4, `docs/protocol-1.10.md` §4.1):
//! start the session's connections if nobody has yet, bracket a wait for servers still
//! connecting with `StatusUpdate{mcp_status}` + `MCPLoadingBegin` … `StatusUpdate{mcp_status}` +
//! `MCPLoadingEnd`, then fail this one turn if a connection failed and no turn has said so yet.
//!
//! Cancelling the turn drops only the wait; the connections go on (the reference's bug of
//! cancelling the whole job is not reproduced).

use std::sync::Arc;

use super::Soul;
use super::error::TurnError;
use super::sink::EventSink;
use crate::protocol::{Event, StatusUpdate};

impl Soul {
    pub(super) async fn wait_for_mcp(&self, sink: &EventSink) -> Result<(), TurnError> {
        let Some(mcp) = self.agent.mcp.clone() else { return Ok(()) };
        // The agent owns the manager; its tools reach the agent's toolset through a weak link.
        let agent = Arc::downgrade(&self.agent);
        mcp.start(Arc::new(move |tools| {
            if let Some(agent) = agent.upgrade() {
                agent.update_toolset(|set| set.extend(tools));
            }
        }));
        if mcp.loading() {
            let status = |s| StatusUpdate { mcp_status: Some(s), ..StatusUpdate::default() };
            sink.emit(Event::StatusUpdate(status(mcp.snapshot()))).await;
            sink.emit(Event::McpLoadingBegin {}).await;
            mcp.wait().await;
            sink.emit(Event::StatusUpdate(status(mcp.snapshot()))).await;
            sink.emit(Event::McpLoadingEnd {}).await;
        }
        match mcp.take_error() {
            Some(error) => Err(TurnError::internal("MCPRuntimeError", error)),
            None => Ok(()),
        }
    }
}
