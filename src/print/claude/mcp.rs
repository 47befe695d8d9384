//! `--mcp-config` in Claude's dialect: server definitions as JSON text or a file, in Claude
//! Code's shape (`{"mcpServers": {NAME: {"type": "stdio"|"http"|"sse", ...}}}`), run by kiwi's
//! MCP client beside the user's own `<share>/mcp.json` (`--strict-mcp-config`: only these);
//! `"type": "sdk"` entries are the host's own servers (`super::sdk_mcp`).

use std::path::Path;

use serde_json::Value;

use super::lines::McpServerStatus as InitServer;
use crate::protocol::McpServerState;

/// What `--mcp-config` (and the user's own `mcp.json`) define.
#[derive(Debug, Default, PartialEq)]
pub struct McpConfigs {
    /// The documents kiwi's MCP client runs, in the order they apply (later names win).
    pub documents: Vec<Value>,
    /// The names of the host's in-process servers (`"type": "sdk"`, `super::sdk_mcp`).
    pub sdk: Vec<String>,
}

/// The MCP config documents of a Claude run; `"type": "sdk"` entries are taken out (the host
/// serves them over the control channel).
pub fn documents(configs: &[String], strict: bool, share: &Path) -> Result<McpConfigs, String> {
    let mut documents: Vec<Value> = Vec::new();
    let mut sdk: Vec<String> = Vec::new();
    let own = share.join("mcp.json");
    if !strict && own.is_file() {
        let text = std::fs::read_to_string(&own).map_err(|e| format!("Cannot read {}: {e}", own.display()))?;
        documents.push(
            serde_json::from_str(&text)
                .map_err(|e| format!("Invalid JSON in MCP config file '{}': {e}", own.display()))?,
        );
    }
    for config in configs {
        let path = Path::new(config);
        let text = if path.is_file() {
            std::fs::read_to_string(path).map_err(|e| format!("Cannot read --mcp-config {config}: {e}"))?
        } else {
            config.clone()
        };
        let mut document: Value =
            serde_json::from_str(&text).map_err(|e| format!("Invalid JSON in --mcp-config {config:?}: {e}"))?;
        let hosts = take_sdk_servers(&mut document);
        // A later definition of a name replaces an earlier one, in-process or not.
        if let Ok(servers) = crate::mcp::config::servers_of(&document) {
            sdk.retain(|name| !servers.contains_key(name));
        }
        for name in hosts {
            for earlier in &mut documents {
                if let Some(servers) = earlier.get_mut("mcpServers").and_then(Value::as_object_mut) {
                    servers.remove(&name);
                } else if let Some(servers) = earlier.as_object_mut() {
                    servers.remove(&name);
                }
            }
            if !sdk.contains(&name) {
                sdk.push(name);
            }
        }
        claude_types_to_transports(&mut document);
        documents.push(document);
    }
    crate::mcp::server_table(&documents).map_err(|e| format!("Invalid MCP config: {e}"))?;
    Ok(McpConfigs { documents, sdk })
}

/// Removes the `"type": "sdk"` entries of `document`; their names.
fn take_sdk_servers(document: &mut Value) -> Vec<String> {
    let Some(servers) = document.get_mut("mcpServers").and_then(Value::as_object_mut) else { return Vec::new() };
    let names: Vec<String> = servers
        .iter()
        .filter(|(_, entry)| entry.get("type").and_then(Value::as_str) == Some("sdk"))
        .map(|(name, _)| name.clone())
        .collect();
    for name in &names {
        servers.remove(name);
    }
    names
}

/// Claude names the transport `type` (`stdio`, `http`, `sse`); kiwi's config calls it
/// `transport` and knows a server is stdio by its `command`.
fn claude_types_to_transports(document: &mut Value) {
    let Some(servers) = document.get_mut("mcpServers").and_then(Value::as_object_mut) else { return };
    for entry in servers.values_mut() {
        let Some(entry) = entry.as_object_mut() else { continue };
        let Some(kind) = entry.get("type").and_then(Value::as_str).map(str::to_string) else { continue };
        if matches!(kind.as_str(), "http" | "sse" | "streamable-http") && !entry.contains_key("transport") {
            entry.insert("transport".into(), Value::from(kind));
        }
        entry.remove("type");
    }
}

/// `system/init`'s `mcp_servers`: each server of kiwi's MCP client with Claude's status words
/// (`disabled`: turned off by `mcp_toggle`).
pub fn init_servers(manager: Option<&crate::mcp::McpManager>) -> Vec<InitServer> {
    let Some(manager) = manager else { return Vec::new() };
    let disabled = manager.disabled();
    manager
        .snapshot()
        .servers
        .into_iter()
        .map(|s| InitServer {
            status: if disabled.contains(&s.name) {
                "disabled"
            } else {
                match s.status {
                    McpServerState::Pending | McpServerState::Connecting => "pending",
                    McpServerState::Connected => "connected",
                    McpServerState::Failed => "failed",
                    McpServerState::Unauthorized => "needs-auth",
                }
            }
            .into(),
            name: s.name,
            source: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn claude_shapes_become_kiwi_shapes() {
        let share = tempfile::tempdir().unwrap();
        let config = json!({"mcpServers": {
            "a": {"type": "stdio", "command": "srv", "args": ["x"]},
            "b": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"X": "1"}}
        }})
        .to_string();
        let docs = documents(&[config], false, share.path()).unwrap().documents;
        assert_eq!(
            docs,
            [json!({"mcpServers": {
                "a": {"command": "srv", "args": ["x"]},
                "b": {"url": "http://127.0.0.1:1/mcp", "headers": {"X": "1"}, "transport": "http"}
            }})]
        );
    }

    #[test]
    fn the_users_own_servers_come_first_unless_strict() {
        let share = tempfile::tempdir().unwrap();
        std::fs::write(share.path().join("mcp.json"), r#"{"mcpServers":{"mine":{"command":"m"}}}"#).unwrap();
        let given = r#"{"mcpServers":{"given":{"command":"g"}}}"#.to_string();
        assert_eq!(documents(std::slice::from_ref(&given), false, share.path()).unwrap().documents.len(), 2);
        assert_eq!(documents(&[given], true, share.path()).unwrap().documents.len(), 1);
    }

    #[test]
    fn sdk_servers_are_the_hosts() {
        let share = tempfile::tempdir().unwrap();
        let config = json!({"mcpServers": {
            "calc": {"type": "sdk", "name": "calc"},
            "a": {"type": "stdio", "command": "srv"}
        }})
        .to_string();
        let configs = documents(&[config], true, share.path()).unwrap();
        assert_eq!(configs.sdk, ["calc"]);
        assert_eq!(configs.documents, [json!({"mcpServers": {"a": {"command": "srv"}}})]);
        // A later stdio definition of the same name wins.
        let later = json!({"mcpServers": {"calc": {"command": "c"}}}).to_string();
        let first = json!({"mcpServers": {"calc": {"type": "sdk", "name": "calc"}}}).to_string();
        assert!(documents(&[first, later], true, share.path()).unwrap().sdk.is_empty());
    }

    #[test]
    fn bad_configs_are_refused_with_the_reason() {
        let share = tempfile::tempdir().unwrap();
        let e = documents(&["{".into()], true, share.path()).unwrap_err();
        assert!(e.starts_with("Invalid JSON in --mcp-config"), "{e}");
        let e = documents(&[r#"{"mcpServers":{"x":{"url":5}}}"#.into()], true, share.path()).unwrap_err();
        assert!(e.starts_with("Invalid MCP config: "), "{e}");
    }
}
