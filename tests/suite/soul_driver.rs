//! The turn driver through the library API, as any front end uses it: a session built by the
//! session builder, a projection that records what it is given, turns started, steered and
//! cancelled.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use kiwi::builder::{AgentChoice, AgentSetup, BuiltSession, SessionRequest};
use kiwi::protocol::{ApprovalDecision, Event, Request, UserInput};
use kiwi::session::store::SessionChoice;
use kiwi::soul::{Busy, ClientAnswer, EventSink, Idle, Projection, TurnDriver, TurnOutcome, TurnResult, TurnTag};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

/// What the projection saw, in order: event type names, then `end:<tag>:<outcome>`.
#[derive(Default)]
struct Seen {
    items: Mutex<Vec<String>>,
}

struct TestProjection {
    seen: Arc<Seen>,
    requests: mpsc::UnboundedSender<(Request, oneshot::Sender<ClientAnswer>)>,
    ended: mpsc::UnboundedSender<()>,
}

impl Projection for TestProjection {
    fn event<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, ()> {
        let name = serde_json::to_value(event).unwrap()["type"].as_str().unwrap().to_string();
        self.seen.items.lock().unwrap().push(name);
        Box::pin(async {})
    }

    #[allow(clippy::async_yields_async)]
    fn request(&self, request: Request) -> BoxFuture<'_, oneshot::Receiver<ClientAnswer>> {
        let (reply, answer) = oneshot::channel();
        self.seen.items.lock().unwrap().push("request".into());
        let _ = self.requests.send((request, reply));
        Box::pin(async move { answer })
    }

    fn turn_ended(&self, tag: TurnTag, result: TurnResult) -> BoxFuture<'_, ()> {
        let tag = tag.take::<&'static str>().unwrap_or("?");
        let outcome = match result {
            Ok(TurnOutcome::Finished(_)) => "finished".to_string(),
            Ok(TurnOutcome::Cancelled) => "cancelled".to_string(),
            Ok(TurnOutcome::MaxStepsReached(n)) => format!("max_steps:{n}"),
            Ok(TurnOutcome::TokenBudgetReached { used, limit }) => format!("token_budget:{used}/{limit}"),
            Ok(TurnOutcome::CostBudgetReached { spent, limit }) => format!("cost_budget:{spent}/{limit}"),
            Err(e) => format!("error:{e}"),
        };
        self.seen.items.lock().unwrap().push(format!("end:{tag}:{outcome}"));
        let _ = self.ended.send(());
        Box::pin(async {})
    }
}

struct World {
    _dir: tempfile::TempDir,
    driver: Arc<TurnDriver>,
    seen: Arc<Seen>,
    requests: mpsc::UnboundedReceiver<(Request, oneshot::Sender<ClientAnswer>)>,
    ended: mpsc::UnboundedReceiver<()>,
    context_path: std::path::PathBuf,
}

fn world(scripts: &[&str]) -> World {
    let dir = tempfile::tempdir().unwrap();
    let scripts_path = dir.path().join("scripts.json");
    std::fs::write(&scripts_path, serde_json::to_string(scripts).unwrap()).unwrap();
    let config = json!({
        "default_model": "s",
        "models": {"s": {"provider": "p", "model": "m", "max_context_size": 100000}},
        "providers": {"p": {"type": "_scripted_echo", "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": scripts_path}}}
    });
    let work = dir.path().join("work");
    let skills = dir.path().join("skills");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&skills).unwrap();
    let setup = AgentSetup {
        config: Arc::new(kiwi::config::load_text(&config.to_string()).unwrap()),
        share_dir: dir.path().join("share"),
        model: None,
        thinking: None,
        agent: AgentChoice::Default,
        skills_dir: Some(skills),
        yolo: false,
        config_source: "test".into(),
        system_prompt: Default::default(),
        mcp_configs: Vec::new(),
        invocation: Default::default(),
        sandbox: kiwi::agent_env::SandboxRun::off(),
    };
    let request = SessionRequest { work_dir: work, session: SessionChoice::New, trace: None };
    let BuiltSession { session, soul, recorder } = setup.build(request).unwrap();
    let context_path = session.context_path();
    std::mem::forget(session); // keep the folder (and its lock) for the test's life
    let seen = Arc::new(Seen::default());
    let (req_tx, requests) = mpsc::unbounded_channel();
    let (end_tx, ended) = mpsc::unbounded_channel();
    let projection = Arc::new(TestProjection { seen: seen.clone(), requests: req_tx, ended: end_tx });
    let driver = TurnDriver::new(soul, EventSink::new(projection, Some(recorder)));
    World { _dir: dir, driver, seen, requests, ended, context_path }
}

const SHELL: &str = r#"tool_call: {"id": "tc-1", "name": "Shell", "arguments": "{\"command\": \"echo hi\"}"}"#;

impl World {
    fn items(&self) -> Vec<String> {
        self.seen.items.lock().unwrap().clone()
    }

    async fn next_request(&mut self) -> (Request, oneshot::Sender<ClientAnswer>) {
        tokio::time::timeout(Duration::from_secs(10), self.requests.recv()).await.unwrap().unwrap()
    }

    async fn wait_end(&mut self) {
        tokio::time::timeout(Duration::from_secs(10), self.ended.recv()).await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn the_outcome_is_the_last_item_and_a_second_start_is_busy() {
    let mut w = world(&["text: hello"]);
    w.driver.start(UserInput::Text("go".into()), TurnTag::new("p1")).unwrap();
    w.wait_end().await;
    assert_eq!(w.items(), ["TurnBegin", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd", "end:p1:finished"]);
    assert!(!w.driver.is_busy());

    let mut w = world(&[SHELL, "text: done"]);
    w.driver.start(UserInput::Text("go".into()), TurnTag::new("p1")).unwrap();
    let (_request, reply) = w.next_request().await;
    assert_eq!(w.driver.start(UserInput::Text("again".into()), TurnTag::new("p2")), Err(Busy));
    reply.send(ClientAnswer::Approval { decision: ApprovalDecision::Approve, feedback: String::new() }).unwrap();
    w.wait_end().await;
    assert_eq!(w.items().last().unwrap(), "end:p1:finished");
    assert!(!w.items().iter().any(|i| i.contains("p2")));
}

#[tokio::test]
async fn cancel_during_an_approval_answers_cancelled_and_drops_the_request() {
    let mut w = world(&[SHELL]);
    assert!(!w.driver.cancel(), "nothing to cancel yet");
    w.driver.start(UserInput::Text("go".into()), TurnTag::new("p")).unwrap();
    let (_request, mut reply) = w.next_request().await;
    assert!(w.driver.cancel());
    w.wait_end().await;
    assert_eq!(w.items().last().unwrap(), "end:p:cancelled");
    // The pending request's answer channel is closed: a late answer changes nothing.
    tokio::time::timeout(Duration::from_secs(5), reply.closed()).await.unwrap();
    assert!(!w.driver.is_busy());
}

#[tokio::test]
async fn steered_input_joins_the_context_at_the_next_step_and_keeps_a_stopping_turn_going() {
    assert_eq!(world(&[]).driver.steer(UserInput::Text("x".into())), Err(Idle));
    // The user rejects the tool call (which would end the turn), but input steered meanwhile
    // keeps it going for one more step.
    let mut w = world(&[SHELL, "text: after the steer"]);
    w.driver.start(UserInput::Text("go".into()), TurnTag::new("p")).unwrap();
    let (_request, reply) = w.next_request().await;
    w.driver.steer(UserInput::Text("also do this".into())).unwrap();
    reply.send(ClientAnswer::Approval { decision: ApprovalDecision::Reject, feedback: String::new() }).unwrap();
    w.wait_end().await;
    let items = w.items();
    assert_eq!(items.iter().filter(|i| *i == "StepBegin").count(), 2, "{items:?}");
    assert_eq!(items.last().unwrap(), "end:p:finished");
    let context = std::fs::read_to_string(&w.context_path).unwrap();
    let tool_at = context.find("\"role\":\"tool\"").unwrap();
    let steer_at = context.find("also do this").unwrap();
    let answer_at = context.find("after the steer").unwrap();
    assert!(tool_at < steer_at && steer_at < answer_at, "{context}");
}

#[tokio::test]
async fn input_steered_into_an_earlier_turn_is_not_carried_into_the_next() {
    let mut w = world(&[SHELL, "text: second"]);
    w.driver.start(UserInput::Text("go".into()), TurnTag::new("p1")).unwrap();
    let (_request, reply) = w.next_request().await;
    // Cancel before the step boundary: the steer is never consumed by the first turn.
    w.driver.steer(UserInput::Text("stale".into())).unwrap();
    w.driver.cancel();
    drop(reply);
    w.wait_end().await;
    w.driver.start(UserInput::Text("next".into()), TurnTag::new("p2")).unwrap();
    w.wait_end().await;
    let context = std::fs::read_to_string(&w.context_path).unwrap();
    assert!(!context.contains("stale"), "{context}");
    assert!(Path::new(&w.context_path).exists());
}
