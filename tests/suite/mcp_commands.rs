//! `kiwi mcp add | list | remove | test | auth | reset-auth`: exact output, exit codes and the
//! `mcp.json` they write (`docs/subcommands.md` §1).

use crate::common;
use crate::npm;

use crate::mcp;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::Env;
use mcp::{stderr, stdout};

fn kiwi(share: &Path, args: &[&str]) -> Output {
    mcp::subcommand(share, args, &[])
}

fn share(env: &Env) -> PathBuf {
    env.share()
}

#[test]
fn add_list_remove_write_the_reference_file() {
    let env = Env::new();
    let share = share(&env);
    let file = share.join("mcp.json");
    let o = kiwi(&share, &["mcp", "list"]);
    assert_eq!(stdout(&o), format!("MCP config file: {}\nNo MCP servers configured.\n", file.display()));
    assert!(!file.exists(), "reading creates nothing");

    let o = kiwi(&share, &["mcp", "add", "test", "--", "python3", "/srv.py", "--flag", "-x"]);
    assert_eq!((o.status.code(), stdout(&o)), (Some(0), format!("Added MCP server 'test' to {}.\n", file.display())));
    let o = kiwi(&share, &["mcp", "add", "-t", "http", "-H", "X-Test: 1", "remote", "https://example.com/mcp"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "{\n  \"mcpServers\": {\n    \"test\": {\n      \"command\": \"python3\",\n      \"args\": [\n        \"/srv.py\",\n        \"--flag\",\n        \"-x\"\n      ]\n    },\n    \"remote\": {\n      \"url\": \"https://example.com/mcp\",\n      \"transport\": \"http\",\n      \"headers\": {\n        \"X-Test\": \"1\"\n      }\n    }\n  }\n}"
    );
    kiwi(&share, &["mcp", "add", "-t", "http", "-a", "oauth", "oauth", "https://example.com/oauth"]);
    kiwi(&share, &["mcp", "add", "-e", "A=1", "envsrv", "node", "server.js"]);
    let o = kiwi(&share, &["mcp", "list"]);
    assert_eq!(
        stdout(&o),
        format!(
            "MCP config file: {}\n  test (stdio): python3 /srv.py --flag -x\n  remote (http): https://example.com/mcp\n  oauth (http): https://example.com/oauth [authorization required - run: kimi mcp auth oauth]\n  envsrv (stdio): node server.js\n",
            file.display()
        )
    );
    // Replacing keeps the position; header keys and values are trimmed.
    kiwi(&share, &["mcp", "add", "-t", "http", "-H", " Authorization :  Bearer abc ", "test", "https://h/x"]);
    let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let names: Vec<&String> = doc["mcpServers"].as_object().unwrap().keys().collect();
    assert_eq!(names, ["test", "remote", "oauth", "envsrv"]);
    assert_eq!(doc["mcpServers"]["test"]["headers"]["Authorization"], "Bearer abc");
    assert_eq!(doc["mcpServers"]["envsrv"]["env"]["A"], "1");

    for name in ["test", "remote", "oauth", "envsrv"] {
        let o = kiwi(&share, &["mcp", "remove", name]);
        assert_eq!(stdout(&o), format!("Removed MCP server '{name}' from {}.\n", file.display()));
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "{\n  \"mcpServers\": {}\n}");
    let o = kiwi(&share, &["mcp", "remove", "test"]);
    assert_eq!((o.status.code(), stderr(&o)), (Some(1), "MCP server 'test' not found.\n".to_string()));
}

#[test]
fn unknown_keys_survive_a_rewrite() {
    let env = Env::new();
    let share = share(&env);
    std::fs::create_dir_all(&share).unwrap();
    let file = share.join("mcp.json");
    std::fs::write(&file, r#"{"other":1,"mcpServers":{"c":{"command":"x","extra":true}}}"#).unwrap();
    kiwi(&share, &["mcp", "add", "d", "y"]);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.starts_with("{\n  \"other\": 1,"), "{text}");
    assert!(text.contains("\"extra\": true"));
}

#[test]
fn add_checks_its_arguments() {
    let env = Env::new();
    let share = share(&env);
    for (args, message) in [
        (&["mcp", "add", "x"][..], "For stdio transport, provide the command to start the MCP server after `--`."),
        (&["mcp", "add", "-H", "A:1", "x", "c"], "--header is only valid for http transport."),
        (&["mcp", "add", "-a", "tok", "x", "c"], "--auth is only valid for http transport."),
        (&["mcp", "add", "-e", "NOEQ", "x", "c"], "Invalid env format: NOEQ (expected KEY=VALUE)."),
        (&["mcp", "add", "-e", "=v", "x", "c"], "Invalid env format: =v (empty key)."),
        (&["mcp", "add", "-t", "http", "-e", "A=1", "x", "u"], "--env is only supported for stdio transport."),
        (&["mcp", "add", "-t", "http", "x"], "URL is required for http transport."),
        (
            &["mcp", "add", "-t", "http", "x", "u1", "u2"],
            "Multiple targets provided. Supply a single URL for http transport.",
        ),
        (
            &["mcp", "add", "-t", "http", "-H", "nocolon", "x", "u"],
            "Invalid header format: nocolon (expected KEY:VALUE).",
        ),
        (&["mcp", "add", "-t", "http", "-H", " :v", "x", "u"], "Invalid header format:  :v (empty key)."),
    ] {
        let o = kiwi(&share, args);
        assert_eq!((o.status.code(), stderr(&o)), (Some(1), format!("{message}\n")), "{args:?}");
    }
    // Usage errors: an option-like argument before `--`, an unknown transport, no subcommand.
    for args in [&["mcp", "add", "x", "python3", "-c", "pass"][..], &["mcp", "add", "-t", "sse", "a", "b"], &["mcp"]] {
        assert_eq!(kiwi(&share, args).status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn a_broken_file_is_a_usage_error_for_every_subcommand() {
    let env = Env::new();
    let share = share(&env);
    std::fs::create_dir_all(&share).unwrap();
    let file = share.join("mcp.json");
    std::fs::write(&file, "{nope").unwrap();
    let o = kiwi(&share, &["mcp", "list"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains(&format!("Invalid JSON in MCP config file '{}': ", file.display())));
    std::fs::write(&file, r#"{"mcpServers":{"x":{"args":[]}}}"#).unwrap();
    let o = kiwi(&share, &["mcp", "remove", "x"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains(&format!("Invalid MCP config in '{}': ", file.display())));
}

#[test]
fn test_connects_and_lists_the_tools() {
    let env = Env::new();
    let share = share(&env);
    let server = mcp::test_server();
    kiwi(&share, &["mcp", "add", "srv", server.to_str().unwrap()]);
    let o = kiwi(&share, &["mcp", "test", "srv"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.starts_with("Testing connection to 'srv'...\n✓ Connected to 'srv'\n  Available tools: 9\n  Tools:\n"),
        "{out}"
    );
    assert!(out.contains("\n    - echo: Answers pong with the text.\n"));
    // No description: the line ends with ": "; long ones are cut to 47 characters and "...".
    assert!(out.contains("\n    - boom: \n"));
    assert!(out.contains("\n    - sleep: Waits the given number of milliseconds and then...\n"));
    // The server's stderr is the command's stderr.
    assert!(stderr(&o).contains("mcp_test_server: starting"));

    kiwi(&share, &["mcp", "add", "dies", "--", server.to_str().unwrap(), "--exit"]);
    let o = kiwi(&share, &["mcp", "test", "dies"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(stdout(&o), "Testing connection to 'dies'...\n");
    assert!(stderr(&o).contains("✗ Connection failed: McpError: "), "{}", stderr(&o));
    kiwi(&share, &["mcp", "add", "missing", "/nonexistent/cmd"]);
    let o = kiwi(&share, &["mcp", "test", "missing"]);
    assert!(stderr(&o).starts_with("✗ Connection failed: RuntimeError: Client failed to connect"), "{}", stderr(&o));
    let o = kiwi(&share, &["mcp", "test", "nope"]);
    assert_eq!((o.status.code(), stderr(&o)), (Some(1), "MCP server 'nope' not found.\n".to_string()));
}

#[test]
fn auth_and_reset_auth_check_the_entry() {
    let env = Env::new();
    let share = share(&env);
    kiwi(&share, &["mcp", "add", "local", "cmd"]);
    kiwi(&share, &["mcp", "add", "-t", "http", "plain", "http://127.0.0.1:1/mcp"]);
    kiwi(&share, &["mcp", "add", "-t", "http", "-a", "oauth", "oa", "http://127.0.0.1:1/mcp"]);
    for (args, message) in [
        (&["mcp", "auth", "nope"][..], "MCP server 'nope' not found."),
        (&["mcp", "auth", "local"], "MCP server 'local' is not a remote server."),
        (&["mcp", "auth", "plain"], "MCP server 'plain' does not use OAuth. Add with --auth oauth."),
        (&["mcp", "reset-auth", "nope"], "MCP server 'nope' not found."),
        (&["mcp", "reset-auth", "local"], "MCP server 'local' is not a remote server."),
    ] {
        let o = kiwi(&share, args);
        assert_eq!((o.status.code(), stderr(&o)), (Some(1), format!("{message}\n")), "{args:?}");
    }
    // Nothing listens at the URL: the flow fails at its first request (tests/mcp_oauth.rs runs it).
    let o = kiwi(&share, &["mcp", "auth", "oa"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).starts_with("Authorization failed: "));
    // reset-auth works for any remote entry and removes stored tokens, which `list` then misses.
    let tokens = share.join("mcp-oauth/S_mcp_oauth_token-3a009b34");
    std::fs::create_dir_all(&tokens).unwrap();
    let key = "http://127.0.0.1:1/mcp/tokens";
    let file = tokens.join(format!("S_http_127_0_0_1_1_mcp_tokens-{}.json", sha8(key)));
    std::fs::write(&file, r#"{"expires_at":"2999-01-01T00:00:00+00:00","value":{"access_token":"t"}}"#).unwrap();
    assert!(!stdout(&kiwi(&share, &["mcp", "list"])).contains("authorization required"));
    for name in ["plain", "oa"] {
        let o = kiwi(&share, &["mcp", "reset-auth", name]);
        assert_eq!((o.status.code(), stdout(&o)), (Some(0), format!("OAuth tokens cleared for '{name}'.\n")));
    }
    assert!(!file.exists());
    assert!(
        stdout(&kiwi(&share, &["mcp", "list"]))
            .contains("  oa (http): http://127.0.0.1:1/mcp [authorization required - run: kimi mcp auth oa]")
    );
}

/// The first 8 hex digits of SHA-256, as the token store names its files.
fn sha8(text: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(text.as_bytes()).iter().take(4).map(|b| format!("{b:02x}")).collect()
}

#[test]
fn the_npm_sdk_tests_mcp_servers_through_kiwi() {
    use std::process::Command;
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk");
    if let Err(reason) = npm::ready(&sdk, "@moonshot-ai/kimi-agent-sdk") {
        return npm::skip("the SDK MCP test", &reason);
    }
    let env = Env::new();
    let share = share(&env);
    let server = mcp::test_server();
    kiwi(&share, &["mcp", "add", "srv", server.to_str().unwrap()]);
    kiwi(&share, &["mcp", "add", "dies", "--", server.to_str().unwrap(), "--exit"]);
    kiwi(&share, &["mcp", "add", "-t", "http", "remote", "http://127.0.0.1:1/mcp"]);
    let output = Command::new("node")
        .arg(sdk.join("mcp.mjs"))
        .current_dir(&sdk)
        .env("KIWI_BIN", env!("CARGO_BIN_EXE_kiwi"))
        .env("KIMI_SHARE_DIR", &share)
        .env("HOME", env.home())
        .output()
        .expect("run node");
    let out = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{out}{}", String::from_utf8_lossy(&output.stderr));
    let seen: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{out}: {e}"));
    assert_eq!(seen["ok"]["success"], true, "{seen}");
    let shown = seen["ok"]["output"].as_str().unwrap();
    assert!(shown.starts_with("Testing connection to 'srv'...\n✓ Connected to 'srv'\n  Available tools: 9"), "{shown}");
    assert_eq!(seen["failed"]["success"], false);
    assert!(seen["failed"]["output"].as_str().unwrap().contains("✗ Connection failed: "), "{seen}");
    assert_eq!(seen["missing"], serde_json::json!({"success": false, "output": "MCP server 'nope' not found."}));
    assert_eq!(seen["reset"], "resolved");
    assert!(seen["auth"].as_str().unwrap().contains("MCP server 'srv' is not a remote server."), "{seen}");
}
