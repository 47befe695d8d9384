//! `mcp_toggle` and `mcp_reconnect` (`docs/print-mode.md`, "Session APIs"): the host turns one of
//! the session's MCP servers off or on, or connects it anew, with Claude Code's answers — an
//! empty success, or its error texts (`Server not found: <name>`, `mcp_toggle: enabled must be
//! a boolean`, `MCP server <name> is disabled — enable it (mcp_toggle) before reconnecting`, the
//! connection's own error).
//!
//! Invariants: a server turned off offers no tool from then on (its tools leave the toolset, its
//! process stops) and `mcp_status`/`system/init` say `disabled`; turned on or reconnected, its
//! current tools replace the ones it offered before. The host's in-process servers (`type:
//! "sdk"`) live in the host: kiwi refuses to toggle or reconnect them, saying so.

use std::sync::Arc;

use serde_json::Value;

use crate::mcp::manager::ServerRequestError;
use crate::soul::Agent;
use crate::tools::Toolset;

fn not_found(name: &str) -> String {
    format!("Server not found: {name}")
}

fn refused(e: ServerRequestError, name: &str) -> String {
    match e {
        ServerRequestError::Unknown => not_found(name),
        ServerRequestError::Disabled => {
            format!("MCP server {name} is disabled — enable it (mcp_toggle) before reconnecting")
        }
        ServerRequestError::Failed(text) => text,
    }
}

fn host_server(name: &str) -> String {
    format!("MCP server {name} runs in the SDK host (type \"sdk\"): kiwi cannot turn it off or reconnect it")
}

/// Takes the tools named `names` out of the agent's toolset.
fn withdraw(agent: &Agent, names: &[String]) {
    if names.is_empty() {
        return;
    }
    agent.update_toolset(|set| {
        let kept: Vec<_> =
            set.names().filter(|n| !names.iter().any(|x| x == n)).filter_map(|n| set.get(n).cloned()).collect();
        *set = Toolset::new(kept);
    });
}

/// The tools server `name` offers now (as `mcp_status` lists them).
fn offered(agent: &Agent, name: &str) -> Vec<String> {
    let Some(manager) = &agent.mcp else { return Vec::new() };
    manager.snapshot().servers.into_iter().find(|s| s.name == name).map(|s| s.tools).unwrap_or_default()
}

/// `mcp_toggle {serverName, enabled}`.
pub async fn toggle(agent: &Arc<Agent>, host_servers: &[String], request: &Value) -> Result<Value, String> {
    let name = request.get("serverName").and_then(Value::as_str).unwrap_or_default();
    let Some(enabled) = request.get("enabled").and_then(Value::as_bool) else {
        return Err("mcp_toggle: enabled must be a boolean".into());
    };
    if host_servers.iter().any(|s| s == name) {
        return Err(host_server(name));
    }
    let Some(manager) = agent.mcp.clone() else { return Err(not_found(name)) };
    if enabled {
        let tools = manager.enable(name).await.map_err(|e| refused(e, name))?;
        agent.update_toolset(|set| set.extend(tools));
    } else {
        let names = manager.disable(name).await.map_err(|e| refused(e, name))?;
        withdraw(agent, &names);
    }
    Ok(Value::Null)
}

/// `mcp_reconnect {serverName}`.
pub async fn reconnect(agent: &Arc<Agent>, host_servers: &[String], request: &Value) -> Result<Value, String> {
    let name = request.get("serverName").and_then(Value::as_str).unwrap_or_default();
    if host_servers.iter().any(|s| s == name) {
        return Err(host_server(name));
    }
    let Some(manager) = agent.mcp.clone() else { return Err(not_found(name)) };
    let before = offered(agent, name);
    let outcome = manager.reconnect(name).await;
    if !matches!(outcome, Err(ServerRequestError::Unknown | ServerRequestError::Disabled)) {
        withdraw(agent, &before);
    }
    let tools = outcome.map_err(|e| refused(e, name))?;
    agent.update_toolset(|set| set.extend(tools));
    Ok(Value::Null)
}
