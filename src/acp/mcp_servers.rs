//! The MCP servers an ACP client names for a session, as one MCP config document of the
//! `mcp.json` shape (`docs/acp.md` §10): stdio → `{command, args, env, transport:"stdio"}`, http/sse →
//! `{url, headers, transport}`. The document is merged after the user's own MCP config for that
//! session: the client's server wins a name clash.

use std::collections::BTreeSet;

use agent_client_protocol::v1::schema::McpServer;
use serde_json::{Map, Value, json};

/// `None` when the client named no servers; `Err` names what is wrong with the list.
pub fn config_document(servers: &[McpServer]) -> Result<Option<Value>, String> {
    if servers.is_empty() {
        return Ok(None);
    }
    let mut names = BTreeSet::new();
    let mut entries = Map::new();
    for server in servers {
        let (name, entry) = match server {
            McpServer::Stdio(s) => {
                let env: Map<String, Value> =
                    s.env.iter().map(|v| (v.name.clone(), Value::from(v.value.clone()))).collect();
                let command = s.command.to_string_lossy().to_string();
                if command.is_empty() {
                    return Err(format!("the MCP server `{}` has no command", s.name));
                }
                (s.name.clone(), json!({"command": command, "args": s.args, "env": env, "transport": "stdio"}))
            }
            McpServer::Http(s) => (s.name.clone(), remote(&s.url, &s.headers_map(), "http")),
            McpServer::Sse(s) => (s.name.clone(), remote(&s.url, &s.headers_map(), "sse")),
            _ => return Err("an MCP server of an unknown type".into()),
        };
        if name.is_empty() || !names.insert(name.clone()) {
            return Err(format!("MCP server names must be unique and not empty (`{name}`)"));
        }
        entries.insert(name, entry);
    }
    Ok(Some(json!({ "mcpServers": entries })))
}

fn remote(url: &str, headers: &Map<String, Value>, transport: &str) -> Value {
    json!({"url": url, "headers": headers, "transport": transport})
}

trait Headers {
    fn headers_map(&self) -> Map<String, Value>;
}

impl Headers for agent_client_protocol::v1::schema::McpServerHttp {
    fn headers_map(&self) -> Map<String, Value> {
        self.headers.iter().map(|h| (h.name.clone(), Value::from(h.value.clone()))).collect()
    }
}

impl Headers for agent_client_protocol::v1::schema::McpServerSse {
    fn headers_map(&self) -> Map<String, Value> {
        self.headers.iter().map(|h| (h.name.clone(), Value::from(h.value.clone()))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn servers(v: Value) -> Vec<McpServer> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn servers_become_one_document() {
        let doc = config_document(&servers(json!([
            {"name":"fs","command":"/bin/mcp-fs","args":["--root","/w"],"env":[{"name":"K","value":"v"}]},
            {"type":"http","name":"web","url":"http://127.0.0.1:9/mcp","headers":[{"name":"Authorization","value":"x"}]}
        ])))
        .unwrap()
        .unwrap();
        assert_eq!(
            doc,
            json!({"mcpServers":{
                "fs":{"command":"/bin/mcp-fs","args":["--root","/w"],"env":{"K":"v"},"transport":"stdio"},
                "web":{"url":"http://127.0.0.1:9/mcp","headers":{"Authorization":"x"},"transport":"http"}}})
        );
        assert_eq!(config_document(&[]).unwrap(), None);
    }

    #[test]
    fn duplicate_names_are_refused() {
        let list = servers(json!([
            {"name":"a","command":"x","args":[],"env":[]},
            {"name":"a","command":"y","args":[],"env":[]}
        ]));
        assert!(config_document(&list).unwrap_err().contains("unique"));
    }
}
