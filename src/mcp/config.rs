//! MCP server definitions (`docs/subcommands.md` §2.1, §2.2): config documents of the
//! `{"mcpServers": {NAME: ENTRY}}` shape (or the entries at the top level), merged into one table
//! keyed by name where a later definition replaces an earlier one in its earlier position.
//!
//! Validation is strict about what kiwi acts on (an entry needs `command` or `url`, fields have
//! their types) and lenient about the rest: unknown keys and the fields fastmcp accepts but kiwi
//! does not use (`timeout`, `description`, `icon`, ...) are ignored.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Map, Value};

/// One server, as kiwi will connect to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerEntry {
    Stdio(StdioEntry),
    Remote(RemoteEntry),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StdioEntry {
    pub command: String,
    pub args: Vec<String>,
    /// Laid over the whitelisted part of kiwi's environment (§2.6).
    pub env: BTreeMap<String, String>,
    pub cwd: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteTransport {
    StreamableHttp,
    Sse,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteAuth {
    None,
    /// `auth: "<token>"`: sent as `Authorization: Bearer <token>`.
    Bearer(String),
    /// `auth: "oauth"`: tokens stored by `kiwi mcp auth`.
    OAuth,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteEntry {
    pub url: String,
    pub transport: RemoteTransport,
    pub headers: Vec<(String, String)>,
    pub auth: RemoteAuth,
    /// `sse_read_timeout` (seconds): how long an SSE stream may stay silent (SSE only).
    pub sse_read_timeout: Option<Duration>,
}

/// The merged table: servers in table order.
pub type ServerTable = Vec<(String, ServerEntry)>;

/// The servers of `documents`, merged in order. The error is the detail after `Invalid MCP config: `.
pub fn server_table(documents: &[Value]) -> Result<ServerTable, String> {
    let mut table: ServerTable = Vec::new();
    for doc in documents {
        for (name, raw) in servers_of(doc)? {
            let entry = parse_entry(name, raw)?;
            match table.iter_mut().find(|(n, _)| n == name) {
                Some(slot) => slot.1 = entry,
                None => table.push((name.clone(), entry)),
            }
        }
    }
    Ok(table)
}

/// The raw entries of one document: its `mcpServers` object, or the document itself when it has
/// no such member (servers at the top level).
pub fn servers_of(doc: &Value) -> Result<&Map<String, Value>, String> {
    let Some(obj) = doc.as_object() else {
        return Err(format!("expected a JSON object, got {}", crate::tools::json_kind(doc)));
    };
    match obj.get("mcpServers") {
        Some(Value::Object(servers)) => Ok(servers),
        Some(other) => Err(format!("mcpServers: expected an object, got {}", crate::tools::json_kind(other))),
        None => Ok(obj),
    }
}

fn string_field(entry: &Map<String, Value>, server: &str, key: &str) -> Result<Option<String>, String> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(format!("{server}.{key}: expected a string, got {}", crate::tools::json_kind(other))),
    }
}

fn string_map(entry: &Map<String, Value>, server: &str, key: &str) -> Result<Vec<(String, String)>, String> {
    match entry.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => Ok((k.clone(), s.clone())),
                other => Err(format!("{server}.{key}.{k}: expected a string, got {}", crate::tools::json_kind(other))),
            })
            .collect(),
        Some(other) => Err(format!("{server}.{key}: expected an object, got {}", crate::tools::json_kind(other))),
    }
}

/// Checks one raw entry and turns it into a [`ServerEntry`].
pub fn parse_entry(name: &str, raw: &Value) -> Result<ServerEntry, String> {
    let Some(entry) = raw.as_object() else {
        return Err(format!("{name}: expected an object, got {}", crate::tools::json_kind(raw)));
    };
    if let Some(command) = string_field(entry, name, "command")? {
        let args = match entry.get("args") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|a| a.as_str().map(str::to_string).ok_or_else(|| format!("{name}.args: expected strings")))
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(format!("{name}.args: expected an array, got {}", crate::tools::json_kind(other)));
            }
        };
        let env = string_map(entry, name, "env")?.into_iter().collect();
        let cwd = string_field(entry, name, "cwd")?.map(PathBuf::from);
        return Ok(ServerEntry::Stdio(StdioEntry { command, args, env, cwd }));
    }
    let Some(url) = string_field(entry, name, "url")? else {
        return Err(format!("{name}: a server needs either `command` (stdio) or `url` (remote)"));
    };
    let transport = match string_field(entry, name, "transport")?.as_deref() {
        Some("http" | "streamable-http") => RemoteTransport::StreamableHttp,
        Some("sse") => RemoteTransport::Sse,
        Some(other) => {
            return Err(format!("{name}.transport: '{other}' is not one of 'http', 'streamable-http', 'sse'"));
        }
        None if path_says_sse(&url) => RemoteTransport::Sse,
        None => RemoteTransport::StreamableHttp,
    };
    let headers = string_map(entry, name, "headers")?;
    let auth = match string_field(entry, name, "auth")? {
        None => RemoteAuth::None,
        Some(s) if s == "oauth" => RemoteAuth::OAuth,
        Some(token) => RemoteAuth::Bearer(token),
    };
    let sse_read_timeout = match entry.get("sse_read_timeout") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => match n.as_f64().and_then(|s| Duration::try_from_secs_f64(s).ok()) {
            Some(d) if !d.is_zero() => Some(d),
            _ => return Err(format!("{name}.sse_read_timeout: expected a positive number of seconds, got {n}")),
        },
        Some(other) => {
            return Err(format!("{name}.sse_read_timeout: expected a number, got {}", crate::tools::json_kind(other)));
        }
    };
    Ok(ServerEntry::Remote(RemoteEntry { url, transport, headers, auth, sse_read_timeout }))
}

/// fastmcp's inference: SSE when the URL's path has `/sse` followed by `/`, `?`, `&` or its end.
fn path_says_sse(url: &str) -> bool {
    let after_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let path = after_scheme.find('/').map_or("", |i| &after_scheme[i..]);
    path.match_indices("/sse").any(|(i, _)| matches!(path[i + 4..].chars().next(), None | Some('/' | '?' | '&')))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn later_definitions_replace_earlier_ones_in_place() {
        let a = json!({"mcpServers": {"a": {"command": "x"}, "b": {"url": "http://h/mcp"}}});
        let b = json!({"a": {"command": "y", "args": ["1"]}});
        let table = server_table(&[a, b]).unwrap();
        let names: Vec<&str> = table.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert!(matches!(&table[0].1, ServerEntry::Stdio(s) if s.command == "y" && s.args == ["1"]));
    }

    #[test]
    fn transports_auth_and_headers() {
        let doc = json!({"mcpServers": {
            "s": {"url": "https://h/x/sse"}, "q": {"url": "https://h/sse?x=1"}, "h": {"url": "https://h/ssex"},
            "t": {"url": "https://h/mcp", "transport": "sse", "auth": "tok", "headers": {"X": "1"}},
            "o": {"url": "https://h/mcp", "transport": "http", "auth": "oauth"},
            "r": {"url": "https://h/sse", "sse_read_timeout": 2.5}
        }});
        let t = server_table(&[doc]).unwrap();
        let remote = |i: usize| match &t[i].1 {
            ServerEntry::Remote(r) => r.clone(),
            _ => panic!(),
        };
        assert_eq!(remote(0).transport, RemoteTransport::Sse);
        assert_eq!(remote(1).transport, RemoteTransport::Sse);
        assert_eq!(remote(2).transport, RemoteTransport::StreamableHttp);
        assert_eq!(remote(3).auth, RemoteAuth::Bearer("tok".into()));
        assert_eq!(remote(3).headers, vec![("X".to_string(), "1".to_string())]);
        assert_eq!(remote(4).auth, RemoteAuth::OAuth);
        assert_eq!(remote(0).sse_read_timeout, None);
        assert_eq!(remote(5).sse_read_timeout, Some(Duration::from_millis(2500)));
    }

    #[test]
    fn bad_entries_are_named_errors() {
        for (doc, want) in [
            (json!({"mcpServers": {"x": {"args": []}}}), "x: a server needs"),
            (json!({"mcpServers": {"x": {"command": 1}}}), "x.command: expected a string"),
            (json!({"mcpServers": {"x": {"command": "c", "args": "a"}}}), "x.args: expected an array"),
            (json!({"mcpServers": {"x": {"command": "c", "env": {"A": 1}}}}), "x.env.A: expected a string"),
            (json!({"mcpServers": {"x": {"url": "u", "transport": "ws"}}}), "x.transport"),
            (
                json!({"mcpServers": {"x": {"url": "u", "sse_read_timeout": "5"}}}),
                "x.sse_read_timeout: expected a number",
            ),
            (
                json!({"mcpServers": {"x": {"url": "u", "sse_read_timeout": 0}}}),
                "x.sse_read_timeout: expected a positive",
            ),
            (json!({"mcpServers": []}), "mcpServers: expected an object"),
            (json!([1]), "expected a JSON object"),
            (json!({"mcpServers": {"x": 3}}), "x: expected an object"),
        ] {
            let err = server_table(&[doc]).unwrap_err();
            assert!(err.starts_with(want), "{err} !~ {want}");
        }
    }

    #[test]
    fn empty_documents_and_unknown_keys_are_fine() {
        assert!(server_table(&[json!({}), json!({"mcpServers": {}})]).unwrap().is_empty());
        let t = server_table(&[json!({"mcpServers": {"a": {"command": "c", "timeout": 5, "extra": true}}})]).unwrap();
        assert_eq!(t.len(), 1);
    }
}
