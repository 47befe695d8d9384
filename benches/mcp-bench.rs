//! mcp-bench: what MCP costs kiwi.
//!
//! Run: `cargo bench --bench mcp-bench` (release settings) or, quicker and slower-running,
//! `cargo test --bench mcp-bench` (debug). Nothing asserts on timings; it only prints.
//!
//! * `startup`: spawn → `initialize` answered (ms, median of 21 fresh processes) with no MCP
//!   server configured and with one; `initialize` must not wait for MCP either way. Set
//!   `KIWI_BIN` to measure another build of kiwi (e.g. one without MCP support) the same way.
//! * `tool call`: 1,000 calls of the test server's `echo` through kiwi's MCP tool (argument
//!   validation, approval, the rmcp client, result mapping) versus 1,000 raw JSON-RPC round trips
//!   of the same request over the same kind of pipes. The raw round trip is the server's own
//!   time plus the pipes; kiwi's overhead is the difference of the medians.
#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/common/mcp.rs"]
mod mcp;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use kiwi::mcp::tool::McpTool;
use kiwi::mcp::{LinkEnv, ServerLink, StderrTo};
use kiwi::protocol::ToolReturnValue;
use kiwi::tools::{ApprovalAsk, ClientToolCall, Tool, ToolCallContext, ToolHost};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

const CALLS: usize = 1000;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    startup();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(tool_call());
}

fn startup() {
    let bin = std::env::var("KIWI_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_kiwi").to_string());
    let env = common::Env::new();
    let config = env.scripted_config(&["text: hi"]);
    let servers = mcp::config_arg(&[("srv", mcp::stdio_entry(&["--delay-ms", "2000"]))]);
    for (label, extra) in [("no MCP server", vec![]), ("one MCP server (2 s to start)", vec!["--mcp-config", &servers])]
    {
        let mut times = Vec::new();
        for _ in 0..21 {
            let mut cmd = std::process::Command::new(&bin);
            cmd.arg("--wire").arg("--config-file").arg(&config).args(&extra).arg("--work-dir").arg(env.work());
            cmd.env("HOME", env.home()).env("KIMI_SHARE_DIR", env.share());
            let t = Instant::now();
            let mut k = common::Kiwi::spawn(cmd);
            k.initialize();
            times.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        println!("startup ({label}): spawn -> initialize answered {:.2} ms ({bin})", median(times));
    }
}

struct Yolo;

impl ToolHost for Yolo {
    fn request_approval(&self, _: ApprovalAsk) -> BoxFuture<'_, bool> {
        Box::pin(async { true })
    }

    fn call_client_tool(&self, _: ClientToolCall) -> BoxFuture<'_, Option<ToolReturnValue>> {
        Box::pin(async { None })
    }
}

async fn tool_call() {
    let server = mcp::test_server();
    let dir = tempfile::tempdir().unwrap();
    let entry = kiwi::mcp::config::parse_entry("srv", &json!({"command": server.to_str().unwrap()})).unwrap();
    let env = LinkEnv { work_dir: dir.path().to_path_buf(), stderr: StderrTo::Log, oauth_token: None };
    let link = Arc::new(ServerLink::new("srv".into(), entry, env));
    let tools = link.connect().await.unwrap();
    let echo = tools.iter().find(|t| t.name == "echo").unwrap();
    let tool = McpTool::new(link.clone(), echo, Duration::from_secs(60));
    let agent_env = Arc::new(kiwi::agent_env::AgentEnv {
        work_dir: dir.path().to_path_buf(),
        share_dir: dir.path().to_path_buf(),
        session_dir: dir.path().to_path_buf(),
        session_id: "bench".into(),
        config: Arc::default(),
        model: Default::default(),
        sandbox: Default::default(),
    });
    let ctx = ToolCallContext { tool_call_id: "c".into(), raw_arguments: None, env: agent_env, host: Arc::new(Yolo) };
    let mut through_kiwi = Vec::with_capacity(CALLS);
    for _ in 0..CALLS + 50 {
        let t = Instant::now();
        let result = tool.call(json!({"text": "hi"}), &ctx).await;
        through_kiwi.push(t.elapsed().as_secs_f64() * 1e6);
        assert!(!result.is_error);
    }
    through_kiwi.drain(..50);
    link.shut_down().await;

    let mut child = tokio::process::Command::new(&server)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}});
    stdin.write_all(format!("{init}\n").as_bytes()).await.unwrap();
    lines.next_line().await.unwrap();
    stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n").await.unwrap();
    let mut raw = Vec::with_capacity(CALLS);
    for id in 1..=CALLS + 50 {
        let call =
            json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}});
        let t = Instant::now();
        stdin.write_all(format!("{call}\n").as_bytes()).await.unwrap();
        let line = lines.next_line().await.unwrap().unwrap();
        raw.push(t.elapsed().as_secs_f64() * 1e6);
        assert!(line.contains("pong:hi"));
    }
    raw.drain(..50);
    let (k, r) = (median(through_kiwi), median(raw));
    println!(
        "tool call (median of {CALLS}): through kiwi {k:.1} µs, raw JSON-RPC round trip {r:.1} µs, kiwi overhead {:.1} µs",
        k - r
    );
}
