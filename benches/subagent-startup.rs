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
//! On a loaded machine the two frames often leave in one flush, so this span can read too low.
//!
//! The second measurement runs in process, without pipes: the session built by the library's own
//! builder, the `Agent` call's host function (`run_foreground`) started, and the time until the
//! subagent's `StepBegin` reaches a recording front end — after which the step calls the model.
//! Target: ≤ 1 ms. Nothing is asserted.

#[path = "../tests/common/mod.rs"]
mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use kiwi::builder::{AgentChoice, AgentSetup, PromptEdit, SessionRequest};
use kiwi::protocol::{Event, Request};
use kiwi::session::store::SessionChoice;
use kiwi::soul::error::TurnResult;
use kiwi::soul::subagent::run::run_foreground;
use kiwi::soul::{ClientAnswer, EventSink, Projection, TurnTag};
use kiwi::tools::Delegation;
use serde_json::json;
use tokio::sync::oneshot;

const PROMPTS: usize = 110;
const WARMUP: usize = 10;

const LONG: &str = "The subagent has finished the delegated work and reports, at a length that skips the \
     elaborate round, that nothing else needs to be done here; this sentence only makes the summary long, \
     and this clause makes sure it stays well past two hundred characters.";

fn main() {
    over_pipes();
    in_process();
}

fn report(what: &str, mut measured: Vec<Duration>) {
    measured.sort();
    let pick = |q: f64| measured[((measured.len() - 1) as f64 * q) as usize];
    println!(
        "{what} ({} runs): median {:.3} ms, p90 {:.3} ms, min {:.3} ms",
        measured.len(),
        pick(0.5).as_secs_f64() * 1e3,
        pick(0.9).as_secs_f64() * 1e3,
        measured[0].as_secs_f64() * 1e3
    );
}

/// Records when the subagent's first `StepBegin` arrives.
#[derive(Default)]
struct StepClock(Mutex<Option<Instant>>);

impl Projection for StepClock {
    fn event<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, ()> {
        if let Event::SubagentEvent(sub) = event
            && let Event::StepBegin { .. } = *sub.event
        {
            self.0.lock().unwrap().get_or_insert_with(Instant::now);
        }
        Box::pin(async {})
    }

    #[allow(clippy::async_yields_async)]
    fn request(&self, _: Request) -> BoxFuture<'_, oneshot::Receiver<ClientAnswer>> {
        Box::pin(async { oneshot::channel().1 })
    }

    fn turn_ended(&self, _: TurnTag, _: TurnResult) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

fn in_process() {
    let env = common::Env::new();
    let sub = format!("text: {LONG}");
    let scripts: Vec<&str> = (0..PROMPTS).map(|_| sub.as_str()).collect();
    let config_path = env.named_scripted_config("inproc", &scripts, json!({}));
    let config = kiwi::config::load::load_file(&config_path).expect("config");
    let setup = AgentSetup {
        config: Arc::new(config),
        share_dir: env.share(),
        model: None,
        thinking: None,
        agent: AgentChoice::Default,
        skills_dir: None,
        yolo: true,
        config_source: config_path.display().to_string(),
        system_prompt: PromptEdit::default(),
        mcp_configs: Vec::new(),
        invocation: Default::default(),
        sandbox: kiwi::agent_env::SandboxRun::off(),
    };
    let built = setup
        .build(SessionRequest { work_dir: env.work(), session: SessionChoice::New, trace: None })
        .expect("session");
    let agent = built.soul.agent.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let mut spans = Vec::new();
    for i in 0..PROMPTS {
        let clock = Arc::new(StepClock::default());
        let sink = EventSink::new(clock.clone(), None);
        let delegation = Delegation {
            tool_call_id: format!("ag{i}"),
            description: "d".into(),
            prompt: "p".into(),
            subagent_type: "coder".into(),
            model: None,
            resume: None,
            run_in_background: false,
            timeout: None,
        };
        let started = Instant::now();
        let result = runtime.block_on(run_foreground(&agent, delegation, &sink, "owner"));
        assert!(!result.is_error, "{result:?}");
        let stepped = clock.0.lock().unwrap().expect("a StepBegin");
        spans.push(stepped - started);
    }
    report(
        "subagent start-up in process (Agent host call → subagent StepBegin)",
        spans.into_iter().skip(WARMUP).collect(),
    );
}

fn over_pipes() {
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
    report(
        "subagent start-up over pipes (parent StatusUpdate → subagent StepBegin)",
        spans.into_iter().skip(WARMUP).collect(),
    );
}
