//! acp-bench: how fast `kiwi acp` gets an IDE going.
//!
//! Run: `cargo bench --bench acp-bench` (release settings). Nothing asserts on timings; it only
//! prints medians (and min / max) over fresh processes of:
//! * spawn → `initialize` answered,
//! * `session/new` sent → answered,
//! * `session/prompt` sent → first `agent_message_chunk` of a scripted turn.
//!
//! Set `KIWI_BIN` to measure another build the same way.
#[path = "../tests/common/mod.rs"]
mod common;

use std::time::Instant;

use serde_json::{Value, json};

const RUNS: usize = 21;

fn stats(mut v: Vec<f64>) -> String {
    v.sort_by(|a, b| a.total_cmp(b));
    format!("median {:.2} ms (min {:.2}, max {:.2})", v[v.len() / 2], v[0], v[v.len() - 1])
}

fn main() {
    let bin = std::env::var("KIWI_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_kiwi").to_string());
    let env = common::Env::new();
    let scripts: Vec<&str> = (0..RUNS).map(|_| "text: hello from the scripted model").collect();
    let config = env.scripted_config(&scripts);
    let (mut init, mut new, mut first) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let cmd = common::with_kiwi_bin(env.acp_command(&config, &[]));
        let t0 = Instant::now();
        let mut k = common::Kiwi::spawn(cmd);
        k.send(json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{}}}));
        k.until_response(&json!(0));
        let t1 = Instant::now();
        let cwd = env.work();
        k.send(json!({"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":cwd,"mcpServers":[]}}));
        let (_, response) = k.until_response(&json!(1));
        let session = response["result"]["sessionId"].as_str().expect("a session id").to_string();
        let t2 = Instant::now();
        let prompt = json!([{"type":"text","text":"hi"}]);
        k.send(
            json!({"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":session,"prompt":prompt}}),
        );
        loop {
            let m: Value = k.next();
            if m["method"] == "session/update" && m["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
                break;
            }
        }
        let t3 = Instant::now();
        k.until_response(&json!(2));
        k.close_stdin();
        k.wait_exit(common::TIMEOUT);
        let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1000.0;
        init.push(ms(t0, t1));
        new.push(ms(t1, t2));
        first.push(ms(t2, t3));
    }
    println!("kiwi acp ({bin}), {RUNS} fresh processes:");
    println!("  spawn -> initialize answered:             {}", stats(init));
    println!("  session/new -> answered:                  {}", stats(new));
    println!("  session/prompt -> first agent_message_chunk: {}", stats(first));
}
