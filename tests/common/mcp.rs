//! The MCP test server (`examples/mcp_test_server.rs`) for tests and benchmarks.
//!
//! `cargo test` builds every example before running tests, so the server is normally already in
//! `target/<profile>/examples/`. When a single test target was asked for (`cargo test --test
//! mcp_wire`) it may be missing; then it is built with the same cargo, once per test process.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::OnceLock;

use serde_json::{Value, json};

/// The path of the built MCP test server.
pub fn test_server() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        // target/<profile>/deps/<test binary> → target/<profile>/examples/mcp_test_server
        let exe = std::env::current_exe().unwrap();
        let profile_dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
        let path = profile_dir.join("examples").join("mcp_test_server");
        if !path.is_file() {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| env!("CARGO").to_string());
            let mut cmd = std::process::Command::new(cargo);
            cmd.args(["build", "--example", "mcp_test_server", "--manifest-path"])
                .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml"));
            if profile_dir.file_name().is_some_and(|n| n == "release") {
                cmd.arg("--release");
            }
            let status = cmd.status().expect("run cargo to build the MCP test server");
            assert!(status.success(), "building examples/mcp_test_server failed");
        }
        assert!(path.is_file(), "no MCP test server at {}", path.display());
        path
    })
    .clone()
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
        use std::io::BufRead;
        let mut child = std::process::Command::new(test_server())
            .arg(mode)
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut url = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut url).unwrap();
        HttpServer { child, url: url.trim().to_string() }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
