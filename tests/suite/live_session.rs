//! The live session through the library API, as a server with many clients per session uses it:
//! a second client joins a running turn, gets the history up to the seam and everything after it
//! live (each message once), is asked the approval still waiting, and its answer is the one that
//! counts while the first client hears that the request was resolved.

use std::io::Read;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use kiwi::builder::{AgentChoice, AgentSetup, SessionRequest};
use kiwi::live::{LiveSession, Sessions};
use kiwi::protocol::{ApprovalDecision, Event, Request, UserInput};
use kiwi::session::store::SessionChoice;
use kiwi::soul::{ClientAnswer, Projection, TurnResult, TurnTag};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

/// A client: the type of every event it is shown, the requests it is asked, how turns end for it.
struct Client {
    seen: Arc<Mutex<Vec<String>>>,
    asked: mpsc::UnboundedSender<oneshot::Sender<ClientAnswer>>,
    ended: mpsc::UnboundedSender<String>,
}

impl Projection for Client {
    fn event<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, ()> {
        let kind = serde_json::to_value(event).unwrap()["type"].as_str().unwrap().to_string();
        self.seen.lock().unwrap().push(kind);
        Box::pin(async {})
    }

    #[allow(clippy::async_yields_async)]
    fn request(&self, _request: Request) -> BoxFuture<'_, oneshot::Receiver<ClientAnswer>> {
        let (reply, answer) = oneshot::channel();
        let _ = self.asked.send(reply);
        Box::pin(async move { answer })
    }

    fn turn_ended(&self, tag: TurnTag, _result: TurnResult) -> BoxFuture<'_, ()> {
        let _ = self.ended.send(format!("ended:{}", tag.take::<&'static str>().unwrap_or("?")));
        Box::pin(async {})
    }

    fn turn_observed<'a>(&'a self, _result: &'a TurnResult) -> BoxFuture<'a, ()> {
        let _ = self.ended.send("observed".into());
        Box::pin(async {})
    }
}

struct Side {
    seen: Arc<Mutex<Vec<String>>>,
    asked: mpsc::UnboundedReceiver<oneshot::Sender<ClientAnswer>>,
    ended: mpsc::UnboundedReceiver<String>,
}

fn client() -> (Arc<Client>, Side) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (asked_tx, asked) = mpsc::unbounded_channel();
    let (ended_tx, ended) = mpsc::unbounded_channel();
    (Arc::new(Client { seen: seen.clone(), asked: asked_tx, ended: ended_tx }), Side { seen, asked, ended })
}

async fn within<T>(f: impl std::future::Future<Output = Option<T>>) -> T {
    tokio::time::timeout(Duration::from_secs(10), f).await.expect("in time").expect("a value")
}

const SHELL: &str = r#"tool_call: {"id": "tc-1", "name": "Shell", "arguments": "{\"command\": \"echo hi\"}"}"#;

fn setup(dir: &std::path::Path, scripts: &[&str]) -> (AgentSetup, SessionRequest) {
    let scripts_path = dir.join("scripts.json");
    std::fs::write(&scripts_path, serde_json::to_string(scripts).unwrap()).unwrap();
    let config = json!({
        "default_model": "s",
        "models": {"s": {"provider": "p", "model": "m", "max_context_size": 100000}},
        "providers": {"p": {"type": "_scripted_echo", "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": scripts_path}}}
    });
    let (work, skills) = (dir.join("work"), dir.join("skills"));
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&skills).unwrap();
    let setup = AgentSetup {
        config: Arc::new(kiwi::config::load_text(&config.to_string()).unwrap()),
        share_dir: dir.join("share"),
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
    (setup, SessionRequest { work_dir: work, session: SessionChoice::New, trace: None })
}

/// The event types recorded in the first `len` bytes of `wire.jsonl`.
fn history(path: &std::path::Path, len: u64) -> Vec<String> {
    let mut text = String::new();
    std::fs::File::open(path).unwrap().take(len).read_to_string(&mut text).unwrap();
    text.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| v["message"]["type"].as_str().map(str::to_string))
        .collect()
}

#[tokio::test]
async fn a_client_joining_a_running_turn_gets_history_then_live_and_can_answer() {
    let dir = tempfile::tempdir().unwrap();
    let (setup, request) = setup(dir.path(), &[SHELL, "text: done"]);
    let sessions = Sessions::default();
    let (a, mut a_side) = client();
    let live = LiveSession::open(setup.build(request).unwrap(), a, &sessions);
    live.driver().start(UserInput::Text("go".into()), TurnTag::new("p1")).unwrap();
    // The turn now waits for an approval that A was asked.
    let mut a_reply = within(a_side.asked.recv()).await;

    let (b, mut b_side) = client();
    let (_b_id, seam) = live.attach(b).await;
    assert_eq!(live.subscriber_count(), 2);
    let b_reply = within(b_side.asked.recv()).await;
    b_reply.send(ClientAnswer::Approval { decision: ApprovalDecision::Approve, feedback: String::new() }).unwrap();

    assert_eq!(within(a_side.ended.recv()).await, "ended:p1");
    assert_eq!(within(b_side.ended.recv()).await, "observed");
    tokio::time::timeout(Duration::from_secs(5), a_reply.closed()).await.expect("A's request was resolved");

    // Approvals are shown live but never recorded: compare the rest.
    let recorded = |kinds: Vec<String>| kinds.into_iter().filter(|k| k != "ApprovalResponse").collect::<Vec<_>>();
    let a_seen = recorded(a_side.seen.lock().unwrap().clone());
    let mut joined = history(&seam.path, seam.len);
    assert!(joined.contains(&"TurnBegin".to_string()), "the history holds the turn's start: {joined:?}");
    joined.extend(recorded(b_side.seen.lock().unwrap().clone()));
    assert_eq!(joined, a_seen, "history + live is the whole stream, each message once");
    assert!(a_side.seen.lock().unwrap().contains(&"ApprovalResponse".to_string()));
    assert!(b_side.seen.lock().unwrap().contains(&"ApprovalResponse".to_string()));

    sessions.close_all_for_exit().await;
    assert!(live.is_closed());
    assert!(sessions.is_empty());
}

#[tokio::test]
async fn close_runs_once_and_releases_the_session_folder() {
    let dir = tempfile::tempdir().unwrap();
    let (setup, request) = setup(dir.path(), &["text: hi"]);
    let sessions = Sessions::default();
    let (a, mut a_side) = client();
    let work_dir = request.work_dir.clone();
    let live = LiveSession::open(setup.build(request).unwrap(), a, &sessions);
    live.driver().start(UserInput::Text("go".into()), TurnTag::new("p")).unwrap();
    within(a_side.ended.recv()).await;
    let id = live.id().to_string();
    live.close(kiwi::live::CloseReason::Closed).await;
    live.close(kiwi::live::CloseReason::Closed).await;
    assert!(sessions.is_empty());
    // The folder's lock is released while `live` is still held: the session opens again.
    let again = setup.build(SessionRequest { work_dir, session: SessionChoice::Id(id), trace: None }).unwrap();
    assert!(again.session.resumed);
}
