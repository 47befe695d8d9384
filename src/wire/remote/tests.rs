//! `wire::remote` against a scripted host on a socket in a temporary folder: what it sends, what
//! the projection sees and in which order.

use std::sync::Mutex;

use futures::future::BoxFuture;
use serde_json::json;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::net::UnixListener;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use super::*;
use crate::soul::TurnTag;
use crate::wire::host::socket_path;

/// Records what reaches it; answers approvals with `approve`, questions as unanswerable, or,
/// when `holding`, nothing at all (a person who has not decided yet).
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<String>>,
    holding: bool,
    held: Mutex<Vec<oneshot::Sender<ClientAnswer>>>,
}

impl Recorder {
    fn seen(&self) -> Vec<String> {
        lock(&self.seen).clone()
    }

    fn note(&self, what: String) {
        lock(&self.seen).push(what);
    }
}

impl Projection for Recorder {
    fn event<'a>(&'a self, event: &'a Event) -> BoxFuture<'a, ()> {
        let kind = serde_json::to_value(event).unwrap()["type"].as_str().unwrap().to_string();
        self.note(format!("event:{kind}"));
        Box::pin(async {})
    }

    #[allow(clippy::async_yields_async)]
    fn request(&self, request: Request) -> BoxFuture<'_, oneshot::Receiver<ClientAnswer>> {
        self.note(format!("asked:{}", request.id()));
        let (reply, answer) = oneshot::channel();
        if self.holding {
            lock(&self.held).push(reply);
            return Box::pin(async move { answer });
        }
        let _ = reply.send(match request {
            Request::QuestionRequest(_) => ClientAnswer::QuestionsUnanswerable("no way to show it".into()),
            _ => ClientAnswer::Approval { decision: ApprovalDecision::Approve, feedback: "ok".into() },
        });
        Box::pin(async move { answer })
    }

    fn turn_ended(&self, _tag: TurnTag, _result: TurnResult) -> BoxFuture<'_, ()> {
        self.note("ended".into());
        Box::pin(async {})
    }

    fn turn_observed<'a>(&'a self, _result: &'a TurnResult) -> BoxFuture<'a, ()> {
        self.note("observed".into());
        Box::pin(async {})
    }

    fn tool_output<'a>(&'a self, tool_call_id: &'a str, text: &'a str) -> BoxFuture<'a, ()> {
        self.note(format!("output:{tool_call_id}:{text}"));
        Box::pin(async {})
    }

    fn resolved<'a>(&'a self, request: &'a Request) -> BoxFuture<'a, ()> {
        self.note(format!("resolved:{}", request.id()));
        Box::pin(async {})
    }
}

/// The host's side of one connection.
struct Host {
    lines: tokio::io::Lines<BufReader<OwnedReadHalf>>,
    out: OwnedWriteHalf,
}

impl Host {
    async fn send(&mut self, frame: Value) {
        self.out.write_all(format!("{frame}\n").as_bytes()).await.unwrap();
    }

    /// The next line the remote sent, as JSON.
    async fn next(&mut self) -> Value {
        let line = self.lines.next_line().await.unwrap().expect("the remote closed");
        serde_json::from_str(&line).unwrap()
    }
}

fn event(kind: &str, payload: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": "event", "params": {"type": kind, "payload": payload}})
}

fn approval(id: &str) -> Value {
    json!({"jsonrpc": "2.0", "method": "request", "id": id, "params": {"type": "ApprovalRequest", "payload": {
        "id": id, "tool_call_id": "call-1", "sender": "Shell", "action": "run command",
        "description": "Run `ls`", "display": []}}})
}

const COMPLETE: &str = r#"{"jsonrpc":"2.0","method":"history_complete","id":"h"}"#;

/// A scripted host serving a temporary session folder, and a remote attached to it.
async fn attached(history: Vec<Value>) -> (tempfile::TempDir, Host, Remote, RemoteHistory, Arc<Recorder>) {
    attached_with(history, Recorder::default()).await
}

async fn attached_with(
    history: Vec<Value>,
    recorder: Recorder,
) -> (tempfile::TempDir, Host, Remote, RemoteHistory, Arc<Recorder>) {
    let dir = tempfile::tempdir().unwrap();
    let listener = UnixListener::bind(socket_path(dir.path())).unwrap();
    let recorder = Arc::new(recorder);
    let accepted = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let (read, out) = stream.into_split();
        let mut host = Host { lines: BufReader::new(read).lines(), out };
        for frame in history {
            host.send(frame).await;
        }
        host.out.write_all(format!("{COMPLETE}\n").as_bytes()).await.unwrap();
        host
    });
    let (remote, batches) = Remote::attach(dir.path(), recorder.clone()).await.unwrap();
    let mut host = accepted.await.unwrap();
    let hello = host.next().await;
    assert_eq!(hello["method"], "initialize");
    assert_eq!(hello["params"]["capabilities"]["supports_question"], true);
    (dir, host, remote, batches, recorder)
}

/// Waits until the recorder has seen `n` things.
async fn seen_at_least(recorder: &Recorder, n: usize) -> Vec<String> {
    for _ in 0..500 {
        let seen = recorder.seen();
        if seen.len() >= n {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("saw only {:?}", recorder.seen());
}

#[tokio::test]
async fn history_first_then_live_events_in_order() {
    let history = vec![
        event("TurnBegin", json!({"user_input": "hi"})),
        event("ContentPart", json!({"type": "text", "text": "Hello"})),
        approval("old"),
        event("TurnEnd", json!({})),
    ];
    let (_dir, mut host, remote, mut batches, recorder) = attached(history).await;
    host.send(event("TurnBegin", json!({"user_input": "from another client"}))).await;
    host.send(json!({"jsonrpc": "2.0", "method": "session_status", "params": {"state": "busy"}})).await;
    host.send(event("ToolOutput", json!({"tool_call_id": "c", "text": "line\n"}))).await;
    // Nothing live reaches the projection while the history is being read.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(recorder.seen().is_empty(), "{:?}", recorder.seen());
    let batch = batches.next().await.unwrap();
    assert_eq!(batch.len(), 4);
    assert!(matches!(&batch[2], WireMessage::Request(Request::ApprovalRequest(r)) if r.id == "old"));
    assert!(batches.next().await.is_none());
    host.send(event("TurnEnd", json!({}))).await;
    let seen = seen_at_least(&recorder, 4).await;
    assert_eq!(seen, ["event:TurnBegin", "output:c:line\n", "event:TurnEnd", "observed"]);
    assert!(!remote.is_busy());
}

#[tokio::test]
async fn a_request_is_answered_once_and_a_question_it_cannot_show_is_left_to_others() {
    let (_dir, mut host, _remote, batches, recorder) = attached(Vec::new()).await;
    drop(batches);
    host.send(approval("a1")).await;
    let answer = host.next().await;
    assert_eq!(answer["id"], "a1");
    assert_eq!(answer["result"], json!({"request_id": "a1", "response": "approve", "feedback": "ok"}));
    // Its own answer won: nothing to withdraw.
    host.send(event("ApprovalResponse", json!({"request_id": "a1", "response": "approve", "feedback": ""}))).await;
    // A question this client cannot show is left to the others: no answer is sent.
    host.send(json!({"jsonrpc": "2.0", "method": "request", "id": "q1", "params": {"type": "QuestionRequest",
        "payload": {"id": "q1", "tool_call_id": "t", "questions": []}}}))
        .await;
    let seen = seen_at_least(&recorder, 3).await;
    assert_eq!(seen, ["asked:a1", "event:ApprovalResponse", "asked:q1"]);
    host.out.shutdown().await.unwrap();
    assert!(host.lines.next_line().await.unwrap().is_none(), "nothing more was sent");
}

#[tokio::test]
async fn prompts_run_as_turns_and_their_answers_map_back() {
    let (_dir, mut host, remote, batches, recorder) = attached(Vec::new()).await;
    drop(batches);
    let running = tokio::spawn({
        let remote = remote.clone();
        async move { remote.prompt(UserInput::Text("go".into())).await }
    });
    let prompt = host.next().await;
    assert_eq!(prompt["method"], "prompt");
    assert_eq!(prompt["params"], json!({"user_input": "go"}));
    host.send(event("TurnBegin", json!({"user_input": "go"}))).await;
    host.send(event("TurnEnd", json!({}))).await;
    host.send(json!({"jsonrpc": "2.0", "id": prompt["id"], "result": {"status": "max_steps_reached", "steps": 3}}))
        .await;
    let result = running.await.unwrap().unwrap();
    assert!(matches!(result, Ok(TurnOutcome::MaxStepsReached(3))));
    // Its own turn's end is not reported as another client's.
    assert_eq!(recorder.seen(), ["event:TurnBegin", "event:TurnEnd"]);

    let busy = tokio::spawn({
        let remote = remote.clone();
        async move { remote.prompt(UserInput::Text("again".into())).await }
    });
    let prompt = host.next().await;
    host.send(json!({"jsonrpc": "2.0", "id": prompt["id"],
        "error": {"code": -32000, "message": "An agent turn is already in progress"}}))
        .await;
    assert_eq!(busy.await.unwrap().unwrap_err(), RemoteError::Busy);

    let failing = tokio::spawn({
        let remote = remote.clone();
        async move { remote.prompt(UserInput::Text("x".into())).await }
    });
    let prompt = host.next().await;
    host.send(json!({"jsonrpc": "2.0", "id": prompt["id"], "error": {"code": -32003, "message": "quota"}})).await;
    let failed = failing.await.unwrap().unwrap();
    assert!(matches!(failed, Err(TurnError::Provider(ChatError::Other(m))) if m == "quota"));

    let cancel = tokio::spawn({
        let remote = remote.clone();
        async move { remote.cancel().await }
    });
    let sent = host.next().await;
    assert_eq!(sent["method"], "cancel");
    host.send(json!({"jsonrpc": "2.0", "id": sent["id"], "error": {"code": -32000, "message": "No turn"}})).await;
    assert!(matches!(cancel.await.unwrap(), Err(RemoteError::Rpc { code: -32000, .. })));
}

#[tokio::test]
async fn another_clients_answer_withdraws_the_request() {
    let (_dir, mut host, _remote, batches, recorder) =
        attached_with(Vec::new(), Recorder { holding: true, ..Recorder::default() }).await;
    drop(batches);
    host.send(approval("a2")).await;
    seen_at_least(&recorder, 1).await;
    host.send(event("ApprovalResponse", json!({"request_id": "a2", "response": "reject", "feedback": ""}))).await;
    let seen = seen_at_least(&recorder, 3).await;
    assert_eq!(seen, ["asked:a2", "resolved:a2", "event:ApprovalResponse"]);
    // A late answer from this client is not sent.
    for reply in lock(&recorder.held).drain(..) {
        let _ = reply.send(ClientAnswer::Approval { decision: ApprovalDecision::Approve, feedback: String::new() });
    }
    host.out.shutdown().await.unwrap();
    assert!(host.lines.next_line().await.unwrap().is_none(), "nothing was sent");
}

#[tokio::test]
async fn when_the_host_goes_away_waiting_prompts_end_cancelled_and_requests_are_withdrawn() {
    let (_dir, mut host, remote, batches, recorder) =
        attached_with(Vec::new(), Recorder { holding: true, ..Recorder::default() }).await;
    drop(batches);
    let running = tokio::spawn({
        let remote = remote.clone();
        async move { remote.prompt(UserInput::Text("long".into())).await }
    });
    let _prompt = host.next().await;
    host.send(event("TurnBegin", json!({"user_input": "long"}))).await;
    host.send(approval("a3")).await;
    seen_at_least(&recorder, 2).await;
    assert!(remote.is_busy());
    drop(host);
    let result = running.await.unwrap().unwrap();
    assert!(matches!(result, Ok(TurnOutcome::Cancelled)));
    remote.closed().await;
    assert!(!remote.is_busy());
    assert_eq!(seen_at_least(&recorder, 3).await, ["event:TurnBegin", "asked:a3", "resolved:a3"]);
    assert_eq!(remote.cancel().await.unwrap_err(), RemoteError::Gone);
    assert_eq!(remote.prompt(UserInput::Text("late".into())).await.unwrap_err(), RemoteError::Gone);
}

#[tokio::test]
async fn a_host_that_says_nothing_is_not_attached() {
    let dir = tempfile::tempdir().unwrap();
    let listener = UnixListener::bind(socket_path(dir.path())).unwrap();
    // Accepts and closes at once, as a host refusing a peer does.
    tokio::spawn(async move { drop(listener.accept().await) });
    let refused = Remote::attach(dir.path(), Arc::new(Recorder::default())).await;
    assert_eq!(refused.err().unwrap().kind(), std::io::ErrorKind::ConnectionRefused);
    let nobody = Remote::attach(&dir.path().join("missing"), Arc::new(Recorder::default())).await;
    assert!(nobody.is_err());
}
