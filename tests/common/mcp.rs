//! The MCP test server (`examples/mcp_test_server.rs`) for tests and benchmarks.
//!
//! `cargo test` builds every example before running tests, so the server is normally already in
//! `target/<profile>/examples/`. When a single test target was asked for (`cargo test --test
//! mcp_wire`) it may be missing; then it is built with the same cargo, once per test process.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use serde_json::{Value, json};

/// The path of the built MCP test server.
pub fn test_server() -> PathBuf {
    example_binary("mcp_test_server")
}

/// The path of the built example `name` (`target/<profile>/examples/<name>`), built with the
/// same cargo when it is missing, once per test process.
pub fn example_binary(name: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut built = BUILT.get_or_init(Mutex::default).lock().unwrap_or_else(|p| p.into_inner());
    if let Some(path) = built.get(name) {
        return path.clone();
    }
    // target/<profile>/deps/<test binary> → target/<profile>/examples/<name>
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
    let path = profile_dir.join("examples").join(name);
    if !path.is_file() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| env!("CARGO").to_string());
        let mut cmd = std::process::Command::new(cargo);
        cmd.args(["build", "--example", name, "--manifest-path"])
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"));
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            cmd.arg("--release");
        }
        let status = cmd.status().expect("run cargo to build an example");
        assert!(status.success(), "building examples/{name} failed");
    }
    assert!(path.is_file(), "no example binary at {}", path.display());
    built.insert(name.to_string(), path.clone());
    path
}

/// A stdio entry running the test server with `args`.
pub fn stdio_entry(args: &[&str]) -> Value {
    json!({"command": test_server().to_str().unwrap(), "args": args})
}

/// `{"mcpServers": {name: entry, ...}}` as one `--mcp-config` string.
pub fn config_arg(servers: &[(&str, Value)]) -> String {
    let map: serde_json::Map<String, Value> = servers.iter().map(|(n, e)| (n.to_string(), e.clone())).collect();
    json!({ "mcpServers": map }).to_string()
}

/// The test server serving Streamable HTTP (or legacy SSE) on 127.0.0.1; killed when dropped.
pub struct HttpServer {
    child: std::process::Child,
    pub url: String,
}

impl HttpServer {
    /// `args` go after `--http` (e.g. `--require-header`, `authorization:Bearer tok`).
    pub fn start(args: &[&str]) -> Self {
        Self::launch("--http", args)
    }

    /// The legacy SSE transport; `url` is the stream's (`…/sse`). `args` go after `--sse`.
    pub fn start_sse(args: &[&str]) -> Self {
        Self::launch("--sse", args)
    }

    fn launch(mode: &str, args: &[&str]) -> Self {
        let mut all = vec![mode];
        all.extend_from_slice(args);
        let (child, url) = spawn_server(&test_server(), &all);
        HttpServer { child, url }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A scripted-echo line that makes the model call `name` with `args`.
pub fn call(id: &str, name: &str, args: Value) -> String {
    format!("tool_call: {}", json!({"id": id, "name": name, "arguments": args.to_string()}))
}

/// Approves the approval request `request`.
pub fn approve(k: &mut crate::common::Kiwi, request: &Value) {
    let id = request["id"].clone();
    k.send(json!({"jsonrpc":"2.0","id":id,"result":{"request_id":id,"response":"approve"}}));
}

/// The payloads of the events of type `kind`.
pub fn payloads<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["params"]["type"] == kind).map(|e| &e["params"]["payload"]).collect()
}

/// The `return_value` of every `ToolResult`.
pub fn tool_results(events: &[Value]) -> Vec<Value> {
    payloads(events, "ToolResult").into_iter().map(|p| p["return_value"].clone()).collect()
}

/// `kiwi <args>` as a subcommand run (share dir `share`, `NO_COLOR`, no stdin), with `vars` set.
pub fn subcommand(share: &std::path::Path, args: &[&str], vars: &[(&str, &str)]) -> std::process::Output {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kiwi"));
    cmd.args(args).env("KIMI_SHARE_DIR", share).env("NO_COLOR", "1");
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.stdin(std::process::Stdio::null()).output().unwrap()
}

pub fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Starts the server binary `path` with `args`; the child and the URL it prints first.
pub fn spawn_server(path: &std::path::Path, args: &[&str]) -> (std::process::Child, String) {
    use std::io::BufRead;
    let mut child = std::process::Command::new(path)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut url = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut url).unwrap();
    (child, url.trim().to_string())
}
