//! `kiwi mcp test | auth | reset-auth` (`docs/subcommands.md` §1.5-§1.7): the subcommands that
//! talk to a server or its stored OAuth tokens.
//!
//! Only `auth` opens a browser. `test` on an OAuth server uses the stored tokens (refreshing an
//! expired one) and, when there are none or they cannot be refreshed, says to run `kiwi mcp
//! auth` instead of starting the flow as the reference does: a test should not turn into an
//! interactive login (the npm SDK runs it headless).

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::mcp::{entry, fail};
use super::print_line;
use crate::mcp::config::{RemoteAuth, RemoteEntry, RemoteTransport, ServerEntry, parse_entry};
use crate::mcp::oauth::{FlowError, TokenSource, challenge, flow, with_tokens};
use crate::mcp::{LinkEnv, LinkError, ServerLink, StderrTo, oauth_store};

/// The limit on one `test` connection (the default tool call limit; the reference has none and
/// hangs on a server that never answers).
const TEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Descriptions longer than this are cut to 47 characters and `...`.
const DESCRIPTION_MAX: usize = 50;

/// How long `auth` waits for the browser to come back (§1.6 step 5).
const CALLBACK_LIMIT: Duration = Duration::from_secs(300);

/// Test-only: overrides [`CALLBACK_LIMIT`] (seconds, may be fractional) so that the timeout can
/// be tested without waiting five minutes. Not a user setting.
const CALLBACK_LIMIT_ENV: &str = "KIWI_MCP_OAUTH_CALLBACK_TIMEOUT_S";

pub fn test(name: &str, doc: &Value, share: &Path) -> ExitCode {
    let Some(raw) = entry(doc, name) else { return fail(&format!("MCP server '{name}' not found.")) };
    let entry = match parse_entry(name, &Value::Object(raw.clone())) {
        Ok(entry) => entry,
        Err(e) => return fail(&format!("✗ Connection failed: ValueError: {e}")),
    };
    print_line(&format!("Testing connection to '{name}'..."));
    let oauth_token = match &entry {
        ServerEntry::Remote(r) if r.auth == RemoteAuth::OAuth => {
            if !oauth_store::has_tokens(share, &r.url) {
                return fail(&format!(
                    "✗ Connection failed: OAuthError: no OAuth tokens are stored for '{name}'; run: kiwi mcp auth {name}"
                ));
            }
            Some(Arc::new(TokenSource::new(share, &r.url)))
        }
        _ => None,
    };
    let work_dir = std::env::current_dir().unwrap_or_else(|_| ".".into());
    let env = LinkEnv { work_dir, stderr: StderrTo::Inherit, oauth_token: oauth_token.clone() };
    let link = ServerLink::new(name.to_string(), entry, env);
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("✗ Connection failed: RuntimeError: {e}")),
    };
    let outcome = runtime.block_on(async {
        let connect = || async {
            match tokio::time::timeout(TEST_TIMEOUT, link.connect()).await {
                Ok(listed) => listed,
                Err(_) => Err(format!("no answer within {} s", TEST_TIMEOUT.as_secs()).into()),
            }
        };
        let listed = match with_tokens(oauth_token.as_deref(), connect).await {
            Ok(listed) => listed.map_err(LinkError::into_text),
            Err(e) => Err(format!("OAuthError: {e}; run: kiwi mcp auth {name}")),
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
        Err(e) if e.starts_with("OAuthError: ") => fail(&format!("✗ Connection failed: {e}")),
        Err(e) => {
            let kind = if e.starts_with("Client failed to connect") {
                "RuntimeError"
            } else if e.starts_with("Client error '") || e.starts_with("Server error '") {
                "HTTPStatusError"
            } else {
                "McpError"
            };
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

pub fn auth(name: &str, doc: &Value, share: &Path) -> ExitCode {
    let raw = match remote(name, doc) {
        Ok(raw) => raw,
        Err(code) => return code,
    };
    if raw.get("auth").and_then(Value::as_str) != Some("oauth") {
        return fail(&format!("MCP server '{name}' does not use OAuth. Add with --auth oauth."));
    }
    let remote = match parse_entry(name, &Value::Object(raw.clone())) {
        Ok(ServerEntry::Remote(remote)) => remote,
        Ok(ServerEntry::Stdio(_)) => return fail(&format!("MCP server '{name}' is not a remote server.")),
        Err(e) => return fail(&format!("Authorization failed: ValueError: {e}")),
    };
    print_line(&format!("Authorizing with '{name}'..."));
    print_line("A browser window will open for authorization.");
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return fail(&format!("Authorization failed: RuntimeError: {e}")),
    };
    match runtime.block_on(authorize_and_list(name, remote, share)) {
        Ok(tools) => {
            print_line(&format!("Successfully authorized with '{name}'."));
            print_line(&format!("Available tools: {tools}"));
            ExitCode::SUCCESS
        }
        Err(e) => fail(&format!("Authorization failed: {e}")),
    }
}

fn callback_limit() -> Duration {
    std::env::var(CALLBACK_LIMIT_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .unwrap_or(CALLBACK_LIMIT)
}

/// Stored tokens that the server accepts are kept (as the reference does); otherwise the browser
/// flow runs. Then one connection lists the tools with the token.
async fn authorize_and_list(name: &str, remote: RemoteEntry, share: &Path) -> Result<usize, FlowError> {
    let url = remote.url.clone();
    let stored = match oauth_store::has_tokens(share, &url) {
        true => TokenSource::new(share, &url).bearer().await.ok(),
        false => None,
    };
    let mut use_store = stored.is_some();
    let sse = remote.transport == RemoteTransport::Sse;
    if let Some(challenge) = challenge(&url, sse, &remote.headers, stored.as_deref()).await? {
        let show = |authorization_url: &str| {
            print_line("If no browser opens (on a machine without a display, say), open this URL yourself:");
            print_line(authorization_url);
            crate::browser::open(authorization_url);
        };
        flow::authorize(share, &url, Some(&challenge), callback_limit(), &show).await?;
        use_store = true;
    }
    let oauth_token = use_store.then(|| Arc::new(TokenSource::new(share, &url)));
    let work_dir = std::env::current_dir().unwrap_or_else(|_| ".".into());
    let link = ServerLink::new(
        name.to_string(),
        ServerEntry::Remote(remote),
        LinkEnv { work_dir, stderr: StderrTo::Inherit, oauth_token },
    );
    let listed = match tokio::time::timeout(TEST_TIMEOUT, link.connect()).await {
        Ok(listed) => listed.map_err(LinkError::into_text),
        Err(_) => Err(format!("no answer within {} s", TEST_TIMEOUT.as_secs())),
    };
    link.shut_down().await;
    listed.map(|tools| tools.len()).map_err(|e| FlowError::new("McpError", e))
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
