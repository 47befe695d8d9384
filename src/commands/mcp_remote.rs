//! `kiwi mcp test | auth | reset-auth` (`cli-subcommands.md` §1.5-§1.7): the subcommands that
//! talk to a server or its stored OAuth tokens.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::Value;

use super::mcp::{entry, fail};
use super::print_line;
use crate::mcp::config::{ServerEntry, parse_entry};
use crate::mcp::{LinkEnv, ServerLink, StderrTo, oauth_store};

/// The limit on one `test` connection (the default tool call limit; the reference has none and
/// hangs on a server that never answers).
const TEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Descriptions longer than this are cut to 47 characters and `...`.
const DESCRIPTION_MAX: usize = 50;

pub fn test(name: &str, doc: &Value, share: &Path) -> ExitCode {
    let Some(raw) = entry(doc, name) else { return fail(&format!("MCP server '{name}' not found.")) };
    let entry = match parse_entry(name, &Value::Object(raw.clone())) {
        Ok(entry) => entry,
        Err(e) => return fail(&format!("✗ Connection failed: ValueError: {e}")),
    };
    let oauth_token = match &entry {
        ServerEntry::Remote(r) => oauth_store::access_token(share, &r.url),
        ServerEntry::Stdio(_) => None,
    };
    print_line(&format!("Testing connection to '{name}'..."));
    let work_dir = std::env::current_dir().unwrap_or_else(|_| ".".into());
    let link = ServerLink::new(name.to_string(), entry, LinkEnv { work_dir, stderr: StderrTo::Inherit, oauth_token });
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("✗ Connection failed: RuntimeError: {e}")),
    };
    let outcome = runtime.block_on(async {
        let listed = match tokio::time::timeout(TEST_TIMEOUT, link.connect()).await {
            Ok(listed) => listed,
            Err(_) => Err(format!("no answer within {} s", TEST_TIMEOUT.as_secs())),
        };
        link.shut_down().await;
        listed
    });
    match outcome {
        Ok(tools) => {
            print_line(&format!("✓ Connected to '{name}'"));
            print_line(&format!("  Available tools: {}", tools.len()));
            if !tools.is_empty() {
                print_line("  Tools:");
                for tool in &tools {
                    print_line(&format!("    - {}: {}", tool.name, short(tool.description.as_deref().unwrap_or(""))));
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            let kind = if e.starts_with("Client failed to connect") { "RuntimeError" } else { "McpError" };
            fail(&format!("✗ Connection failed: {kind}: {e}"))
        }
    }
}

fn short(description: &str) -> String {
    if description.chars().count() > DESCRIPTION_MAX {
        format!("{}...", description.chars().take(DESCRIPTION_MAX - 3).collect::<String>())
    } else {
        description.to_string()
    }
}

/// The entry `name` when it is a remote one; the failure otherwise.
fn remote<'a>(name: &str, doc: &'a Value) -> Result<&'a serde_json::Map<String, Value>, ExitCode> {
    let Some(raw) = entry(doc, name) else { return Err(fail(&format!("MCP server '{name}' not found."))) };
    if raw.get("url").is_none() {
        return Err(fail(&format!("MCP server '{name}' is not a remote server.")));
    }
    Ok(raw)
}

pub fn auth(name: &str, doc: &Value) -> ExitCode {
    let raw = match remote(name, doc) {
        Ok(raw) => raw,
        Err(code) => return code,
    };
    if raw.get("auth").and_then(Value::as_str) != Some("oauth") {
        return fail(&format!("MCP server '{name}' does not use OAuth. Add with --auth oauth."));
    }
    // The browser authorization flow (§1.6) is not part of kiwi yet: say so rather than pretend.
    fail(&format!(
        "Authorization failed: NotImplementedError: kiwi cannot run the OAuth browser flow yet; authorize '{name}' with kimi-cli (`kimi mcp auth {name}`), whose tokens kiwi reads"
    ))
}

pub fn reset_auth(name: &str, doc: &Value, share: &Path) -> ExitCode {
    let raw = match remote(name, doc) {
        Ok(raw) => raw,
        Err(code) => return code,
    };
    let url = raw.get("url").and_then(Value::as_str).unwrap_or("");
    match oauth_store::clear(share, url) {
        Ok(()) => {
            print_line(&format!("OAuth tokens cleared for '{name}'."));
            ExitCode::SUCCESS
        }
        Err(e) => fail(&format!("Failed to clear tokens: OSError: {e}")),
    }
}
