//! `kiwi mcp add | remove | list` and the file they edit (`docs/subcommands.md` §1.1-§1.4):
//! `<share_dir>/mcp.json`, read and validated before anything else, edited as raw JSON so that
//! keys kiwi does not know survive, written with 2-space indentation and no trailing newline.
//!
//! Messages about a failure go to stderr with exit 1; a file that cannot be read as a config is
//! a usage error (exit 2).

use std::path::Path;
use std::process::ExitCode;

use serde_json::{Map, Value, json};

use super::print_line;
use crate::cli::{McpAdd, McpCommand};
use crate::mcp::config::{parse_entry, servers_of};
use crate::mcp::oauth_store;

/// Runs one `mcp` subcommand.
pub fn run(command: &McpCommand, share: &Path) -> ExitCode {
    let path = share.join("mcp.json");
    let mut doc = match read(&path) {
        Ok(doc) => doc,
        Err(message) => return super::usage_error(&message),
    };
    match command {
        McpCommand::Add(add) => self::add(add, &mut doc, &path),
        McpCommand::Remove(n) => remove(&n.name, &mut doc, &path),
        McpCommand::List => list(&doc, &path, share),
        McpCommand::Auth(n) => super::mcp_remote::auth(&n.name, &doc, share),
        McpCommand::ResetAuth(n) => super::mcp_remote::reset_auth(&n.name, &doc, share),
        McpCommand::Test(n) => super::mcp_remote::test(&n.name, &doc, share),
    }
}

/// The file as a JSON object (`{"mcpServers": {}}` when absent), checked against the entry rules.
pub fn read(path: &Path) -> Result<Value, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(json!({"mcpServers": {}})),
        Err(e) => return Err(format!("Cannot read MCP config file '{}': {e}", path.display())),
    };
    let doc: Value = serde_json::from_str(&text)
        .map_err(|e| format!("Invalid JSON in MCP config file '{}': {e}", path.display()))?;
    let invalid = |e: String| format!("Invalid MCP config in '{}': {e}", path.display());
    for (name, entry) in servers_of(&doc).map_err(invalid)? {
        parse_entry(name, entry).map_err(invalid)?;
    }
    Ok(doc)
}

/// The raw entries under `mcpServers` (servers at the top level are not listed, as in the reference).
pub fn entries(doc: &Value) -> Option<&Map<String, Value>> {
    doc.get("mcpServers").and_then(Value::as_object)
}

/// The raw entry `name`.
pub fn entry<'a>(doc: &'a Value, name: &str) -> Option<&'a Map<String, Value>> {
    entries(doc)?.get(name)?.as_object()
}

fn write(path: &Path, doc: &Value) -> Result<(), String> {
    let text = serde_json::to_string_pretty(doc).map_err(|e| e.to_string())?;
    std::fs::write(path, text).map_err(|e| format!("Cannot write {}: {e}", path.display()))
}

#[allow(clippy::print_stderr)]
pub fn fail(message: &str) -> ExitCode {
    eprintln!("{message}");
    ExitCode::FAILURE
}

fn add(add: &McpAdd, doc: &mut Value, path: &Path) -> ExitCode {
    let entry = match new_entry(add) {
        Ok(entry) => entry,
        Err(message) => return fail(&message),
    };
    let Some(obj) = doc.as_object_mut() else { return fail("mcp.json is not a JSON object") };
    let servers = obj.entry("mcpServers").or_insert_with(|| json!({}));
    let Some(servers) = servers.as_object_mut() else { return fail("mcpServers is not an object") };
    // An existing entry keeps its position (the map preserves insertion order).
    servers.insert(add.name.clone(), entry);
    if let Some(parent) = path.parent() {
        let _ = std::fs::create_dir_all(parent);
    }
    if let Err(message) = write(path, doc) {
        return fail(&message);
    }
    print_line(&format!("Added MCP server '{}' to {}.", add.name, path.display()));
    ExitCode::SUCCESS
}

/// The entry `add` writes, after the checks of §1.2 in their order.
fn new_entry(add: &McpAdd) -> Result<Value, String> {
    let mut entry = Map::new();
    if add.transport == "stdio" {
        let Some((command, args)) = add.target.split_first() else {
            return Err("For stdio transport, provide the command to start the MCP server after `--`.".into());
        };
        if !add.header.is_empty() {
            return Err("--header is only valid for http transport.".into());
        }
        if add.auth.as_deref().is_some_and(|a| !a.is_empty()) {
            return Err("--auth is only valid for http transport.".into());
        }
        let mut env = Map::new();
        for item in &add.env {
            let Some((key, value)) = item.split_once('=') else {
                return Err(format!("Invalid env format: {item} (expected KEY=VALUE)."));
            };
            if key.is_empty() {
                return Err(format!("Invalid env format: {item} (empty key)."));
            }
            env.insert(key.to_string(), Value::String(value.to_string()));
        }
        entry.insert("command".into(), Value::String(command.clone()));
        entry.insert("args".into(), json!(args));
        if !add.env.is_empty() {
            entry.insert("env".into(), Value::Object(env));
        }
        return Ok(Value::Object(entry));
    }
    if !add.env.is_empty() {
        return Err("--env is only supported for stdio transport.".into());
    }
    let url = match add.target.as_slice() {
        [] => return Err("URL is required for http transport.".into()),
        [url] => url,
        _ => return Err("Multiple targets provided. Supply a single URL for http transport.".into()),
    };
    let mut headers = Map::new();
    for item in &add.header {
        let Some((key, value)) = item.split_once(':') else {
            return Err(format!("Invalid header format: {item} (expected KEY:VALUE)."));
        };
        if key.trim().is_empty() {
            return Err(format!("Invalid header format: {item} (empty key)."));
        }
        headers.insert(key.trim().to_string(), Value::String(value.trim().to_string()));
    }
    entry.insert("url".into(), Value::String(url.clone()));
    entry.insert("transport".into(), Value::String("http".into()));
    if !add.header.is_empty() {
        entry.insert("headers".into(), Value::Object(headers));
    }
    if let Some(auth) = add.auth.as_deref().filter(|a| !a.is_empty()) {
        entry.insert("auth".into(), Value::String(auth.into()));
    }
    Ok(Value::Object(entry))
}

fn remove(name: &str, doc: &mut Value, path: &Path) -> ExitCode {
    let removed = doc.get_mut("mcpServers").and_then(Value::as_object_mut).and_then(|s| s.shift_remove(name));
    if removed.is_none() {
        return fail(&format!("MCP server '{name}' not found."));
    }
    if let Err(message) = write(path, doc) {
        return fail(&message);
    }
    print_line(&format!("Removed MCP server '{name}' from {}.", path.display()));
    ExitCode::SUCCESS
}

fn list(doc: &Value, path: &Path, share: &Path) -> ExitCode {
    print_line(&format!("MCP config file: {}", path.display()));
    let servers = entries(doc).filter(|s| !s.is_empty());
    let Some(servers) = servers else {
        print_line("No MCP servers configured.");
        return ExitCode::SUCCESS;
    };
    for (name, raw) in servers {
        print_line(&list_line(name, raw, share));
    }
    ExitCode::SUCCESS
}

fn list_line(name: &str, raw: &Value, share: &Path) -> String {
    let text = |k: &str| raw.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    if raw.get("command").is_some() {
        let args: Vec<String> = raw
            .get("args")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default();
        let line = format!("  {name} (stdio): {} {}", text("command"), args.join(" "));
        return line.trim_end().to_string();
    }
    let transport = match text("transport").as_str() {
        "" | "streamable-http" => "http".to_string(),
        other => other.to_string(),
    };
    let mut line = format!("  {name} ({transport}): {}", text("url"));
    if text("auth") == "oauth" {
        oauth_store::ensure_store_dir(share);
        if !oauth_store::has_tokens(share, &text("url")) {
            line.push_str(&format!(" [authorization required - run: kimi mcp auth {name}]"));
        }
    }
    line
}
