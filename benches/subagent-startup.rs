//! subagent-startup: what starting a foreground subagent costs kiwi before the subagent's first
//! model request, seen from the client over pipes with the release binary.
//!
//! Run: `cargo bench --bench subagent-startup`. One `kiwi` process, `_scripted_echo` model,
//! `--yolo`; each of the prompts makes the parent call `Agent` once, the subagent answer with a
//! long text (no elaborate round) and the parent answer. Measured per prompt: the parent step's
//! `StatusUpdate` arrives (its stream has ended; the `Agent` call runs next) → the wrapped
//! `SubagentEvent(StepBegin)` arrives (the subagent's first step, which calls the model right
//! after it). That span holds the tool dispatch, the instance's folder and files, its context,
//! its soul, the `UserPromptSubmit` hook check and two wrapped frames: an upper bound of the
//! start-up cost. The first 10 prompts are warm-up; the median and p90 of the rest are printed.
//! Target (issue 10): ≤ 1 ms. Nothing is asserted.

#[path = "../tests/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use serde_json::json;

const PROMPTS: usize = 110;
const WARMUP: usize = 10;

const LONG: &str = "The subagent has finished the delegated work and reports, at a length that skips the \
     elaborate round, that nothing else needs to be done here; this sentence only makes the summary long, \
     and this clause makes sure it stays well past two hundred characters.";

fn main() {
    let env = common::Env::new();
    let agent = format!(
        "tool_call: {}",
        json!({"id": "ag", "name": "Agent", "arguments": json!({"description": "d", "prompt": "p"}).to_string()})
    );
    let sub = format!("text: {LONG}");
    let mut scripts: Vec<String> = Vec::new();
    for _ in 0..PROMPTS {
        scripts.extend([agent.clone(), sub.clone(), "text: ok".to_string()]);
    }
    let config = env.named_scripted_config("bench", &scripts, json!({}));
    let mut k = env.spawn(&config, &["--yolo"]);
    let mut spans: Vec<Duration> = Vec::new();
    for i in 0..PROMPTS {
        let id = format!("p{i}");
        k.send(json!({"jsonrpc":"2.0","id":id,"method":"prompt","params":{"user_input":"go"}}));
        let mut status_at: Option<Instant> = None;
        let mut measured_this = false;
        loop {
            let m = k.next();
            let now = Instant::now();
            let p = &m["params"];
            if status_at.is_none() && !measured_this && p["type"] == "StatusUpdate" {
                status_at = Some(now);
            }
            if p["type"] == "SubagentEvent"
                && p["payload"]["event"]["type"] == "StepBegin"
                && let Some(at) = status_at.take()
            {
                spans.push(now - at);
                measured_this = true;
            }
            if m["id"] == id.as_str() {
                break;
            }
        }
    }
    let mut measured: Vec<Duration> = spans.into_iter().skip(WARMUP).collect();
    measured.sort();
    let pick = |q: f64| measured[((measured.len() - 1) as f64 * q) as usize];
    println!(
        "subagent start-up (parent StatusUpdate → subagent StepBegin, {} runs): median {:.3} ms, p90 {:.3} ms, min {:.3} ms",
        measured.len(),
        pick(0.5).as_secs_f64() * 1e3,
        pick(0.9).as_secs_f64() * 1e3,
        measured[0].as_secs_f64() * 1e3
    );
}
