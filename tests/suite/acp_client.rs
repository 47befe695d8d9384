//! `kiwi acp` driven by the `agent-client-protocol` crate's client side over pipes: prompts,
//! permissions (allow once, allow always, reject), cancel during a permission and during a shell
//! command, load with replay, modes, config options, and two sessions in one process.

use crate::common;
use crate::mock_llm;

use std::future::Future;
use std::path::Path;
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema::{
    CancelNotification, ClientCapabilities, ContentBlock, CreateElicitationRequest, CreateElicitationResponse,
    CreateTerminalRequest, CreateTerminalResponse, ElicitationAcceptAction, ElicitationAction, ElicitationCapabilities,
    ElicitationContentValue, ElicitationFormCapabilities, ElicitationMode, ElicitationPropertySchema,
    FileSystemCapabilities, InitializeRequest, KillTerminalRequest, KillTerminalResponse, LoadSessionRequest,
    NewSessionRequest, PromptRequest, ReadTextFileRequest, ReadTextFileResponse, ReleaseTerminalRequest,
    ReleaseTerminalResponse, RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse,
    SelectedPermissionOutcome, SessionNotification, SessionUpdate, SetSessionConfigOptionRequest,
    SetSessionModeRequest, StopReason, TerminalExitStatus, TerminalOutputRequest, TerminalOutputResponse,
    ToolCallStatus, WaitForTerminalExitRequest, WaitForTerminalExitResponse, WriteTextFileRequest,
    WriteTextFileResponse,
};
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Agent, ByteStreams, Client, Error};
use common::{Env, alive};
use serde_json::{Value, json};
use tokio::sync::mpsc::{UnboundedReceiver, unbounded_channel};
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

/// Longest any one test may take before it counts as hung.
const TEST_BOUND: Duration = Duration::from_secs(60);

type Permission = (RequestPermissionRequest, Responder<RequestPermissionResponse>);
type Elicitation = (CreateElicitationRequest, Responder<CreateElicitationResponse>);

/// What the test client's fake terminal was asked, in order (`create <command>`, `wait`,
/// `output`, `kill`, `release`). A command containing `sleep` never exits by itself; one
/// containing `long-line` prints a line of 3,000 characters, and with `cut` the client says it
/// cut the output.
type TerminalLog = std::sync::Arc<std::sync::Mutex<Vec<String>>>;

/// What the test client's editor holds for any file it is asked to read (unsaved edits).
const EDITOR_BUFFER: &str = "line one from the editor\nline two\n";

/// The client's side of one connection.
struct Peer {
    cx: ConnectionTo<Agent>,
    updates: UnboundedReceiver<SessionNotification>,
    permissions: UnboundedReceiver<Permission>,
    elicitations: UnboundedReceiver<Elicitation>,
    terminal: TerminalLog,
}

impl Peer {
    async fn initialize(&self) {
        let response = self.cx.send_request(InitializeRequest::new(ProtocolVersion::V1)).block_task().await.unwrap();
        assert_eq!(response.protocol_version, ProtocolVersion::V1);
    }

    /// `initialize` announcing a client that runs terminals.
    async fn initialize_with_terminal(&self) {
        let request =
            InitializeRequest::new(ProtocolVersion::V1).client_capabilities(ClientCapabilities::new().terminal(true));
        self.cx.send_request(request).block_task().await.unwrap();
    }

    fn terminal_log(&self) -> Vec<String> {
        self.terminal.lock().unwrap().clone()
    }

    /// `initialize` announcing a client that serves file reads and writes.
    async fn initialize_with_fs(&self) {
        let fs = FileSystemCapabilities::new().read_text_file(true).write_text_file(true);
        let request = InitializeRequest::new(ProtocolVersion::V1).client_capabilities(ClientCapabilities::new().fs(fs));
        self.cx.send_request(request).block_task().await.unwrap();
    }

    async fn new_session(&self, cwd: &Path) -> String {
        let response = self.cx.send_request(NewSessionRequest::new(cwd)).block_task().await.unwrap();
        response.session_id.0.to_string()
    }

    async fn prompt(&self, session: &str, text: &str) -> Result<StopReason, Error> {
        let request = PromptRequest::new(session.to_string(), vec![ContentBlock::from(text.to_string())]);
        Ok(self.cx.send_request(request).block_task().await?.stop_reason)
    }

    /// Every update received so far.
    fn drain(&mut self) -> Vec<SessionNotification> {
        let mut all = Vec::new();
        while let Ok(n) = self.updates.try_recv() {
            all.push(n);
        }
        all
    }

    async fn next_permission(&mut self) -> Permission {
        self.permissions.recv().await.expect("a permission request")
    }

    async fn cancel(&self, session: &str) {
        self.cx.send_notification(CancelNotification::new(session.to_string())).unwrap();
    }
}

fn answer(responder: Responder<RequestPermissionResponse>, option: Option<&str>) {
    let outcome = match option {
        Some(id) => RequestPermissionOutcome::Selected(SelectedPermissionOutcome::new(id.to_string())),
        None => RequestPermissionOutcome::Cancelled,
    };
    responder.respond(RequestPermissionResponse::new(outcome)).unwrap();
}

/// Spawns `kiwi acp` and runs `body` as its client; the process is killed afterwards.
fn with_client<F, Fut>(env: &Env, config: &Path, extra: &[&str], body: F)
where
    F: FnOnce(Peer) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let mut command = tokio::process::Command::from(env.acp_command(config, extra));
    command.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).kill_on_drop(true);
    runtime.block_on(async move {
        let mut child = command.spawn().expect("spawn kiwi acp");
        let transport =
            ByteStreams::new(child.stdin.take().unwrap().compat_write(), child.stdout.take().unwrap().compat());
        let (update_tx, updates) = unbounded_channel();
        let (permission_tx, permissions) = unbounded_channel();
        let (elicitation_tx, elicitations) = unbounded_channel();
        let terminal = TerminalLog::default();
        let (log, held) = (terminal.clone(), std::sync::Arc::new(std::sync::Mutex::new(Vec::new())));
        let sleeping = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (l1, l2, l3, l4, l5, l6, l7) =
            (log.clone(), log.clone(), log.clone(), log.clone(), log.clone(), log.clone(), log);
        let s1 = sleeping.clone();
        let running = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let r1 = running.clone();
        let run = Client
            .v1()
            .on_receive_notification(
                async move |n: SessionNotification, _cx| {
                    let _ = update_tx.send(n);
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
            .on_receive_request(
                async move |request: RequestPermissionRequest, responder, _cx| {
                    let _ = permission_tx.send((request, responder));
                    Ok(())
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: CreateElicitationRequest, responder, _cx| {
                    let _ = elicitation_tx.send((request, responder));
                    Ok(())
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: CreateTerminalRequest, responder, _cx| {
                    s1.store(request.command.contains("sleep"), std::sync::atomic::Ordering::SeqCst);
                    *r1.lock().unwrap() = request.command.clone();
                    l1.lock().unwrap().push(format!("create {}", request.command));
                    responder.respond(CreateTerminalResponse::new("term-1"))
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |_: WaitForTerminalExitRequest, responder, _cx| {
                    l2.lock().unwrap().push("wait".into());
                    if sleeping.load(std::sync::atomic::Ordering::SeqCst) {
                        // Never answered: the command "runs" until it is killed or released.
                        held.lock().unwrap().push(responder);
                        return Ok(());
                    }
                    responder.respond(WaitForTerminalExitResponse::new(TerminalExitStatus::new().exit_code(0)))
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |_: TerminalOutputRequest, responder, _cx| {
                    l3.lock().unwrap().push("output".into());
                    let command = running.lock().unwrap().clone();
                    let output = match command.contains("long-line") {
                        true => format!("{}\n", "x".repeat(3000)),
                        false => "from the editor's terminal\n".to_string(),
                    };
                    responder.respond(
                        TerminalOutputResponse::new(output, command.contains("cut"))
                            .exit_status(TerminalExitStatus::new().exit_code(0)),
                    )
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |_: KillTerminalRequest, responder, _cx| {
                    l4.lock().unwrap().push("kill".into());
                    responder.respond(KillTerminalResponse::new())
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |_: ReleaseTerminalRequest, responder, _cx| {
                    l5.lock().unwrap().push("release".into());
                    responder.respond(ReleaseTerminalResponse::new())
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: ReadTextFileRequest, responder, _cx| {
                    l6.lock().unwrap().push(format!("read {}", request.path.display()));
                    responder.respond(ReadTextFileResponse::new(EDITOR_BUFFER))
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |request: WriteTextFileRequest, responder, _cx| {
                    l7.lock().unwrap().push(format!("write {} {:?}", request.path.display(), request.content));
                    responder.respond(WriteTextFileResponse::new())
                },
                agent_client_protocol::on_receive_request!(),
            )
            .connect_with(transport, async move |cx: ConnectionTo<Agent>| {
                body(Peer { cx, updates, permissions, elicitations, terminal }).await;
                Ok(())
            });
        tokio::time::timeout(TEST_BOUND, run).await.expect("the test hung").unwrap();
        let _ = child.kill().await;
    });
}

fn shell(id: &str, command: &str) -> String {
    let args = serde_json::to_string(&json!({ "command": command })).unwrap();
    format!("tool_call: {}", json!({"id": id, "name": "Shell", "arguments": args}))
}

fn as_json(n: &SessionNotification) -> Value {
    serde_json::to_value(&n.update).unwrap()
}

fn kinds(updates: &[SessionNotification]) -> Vec<String> {
    updates.iter().map(|n| as_json(n)["sessionUpdate"].as_str().unwrap().to_string()).collect()
}

fn texts(updates: &[SessionNotification], kind: &str) -> String {
    updates
        .iter()
        .map(as_json)
        .filter(|u| u["sessionUpdate"] == kind)
        .map(|u| u["content"]["text"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn final_status(updates: &[SessionNotification]) -> Option<ToolCallStatus> {
    updates.iter().rev().find_map(|n| match &n.update {
        SessionUpdate::ToolCallUpdate(u) => u.fields.status,
        _ => None,
    })
}

#[test]
fn a_prompt_streams_text_and_thoughts_then_ends_the_turn() {
    let env = Env::new();
    let config = env.scripted_config(&["think: pondering\ntext: Hel\ntext: lo"]);
    let work = env.work();
    with_client(&env, &config, &[], move |mut peer| async move {
        peer.initialize().await;
        let session = peer.new_session(&work).await;
        assert_eq!(peer.prompt(&session, "hi").await.unwrap(), StopReason::EndTurn);
        let updates = peer.drain();
        assert!(updates.iter().all(|n| n.session_id.0.as_ref() == session));
        assert_eq!(kinds(&updates)[0], "available_commands_update");
        assert_eq!(texts(&updates, "agent_thought_chunk"), "pondering");
        assert_eq!(texts(&updates, "agent_message_chunk"), "Hello");
    });
}

/// A Chat Completions stream that says `text`, then finishes with `finish_reason`.
fn chat_stream(text: &str, finish_reason: &str) -> mock_llm::MockResponse {
    let first = json!({"id": "c1", "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": null}]});
    let last = json!({"id": "c1", "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {}, "finish_reason": finish_reason,
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}]});
    mock_llm::MockResponse::sse(format!("data: {first}\n\ndata: {last}\n\ndata: [DONE]\n\n"))
}

#[test]
fn a_cut_or_filtered_answer_ends_with_max_tokens_or_refusal() {
    let env = Env::new();
    let rt = mock_llm::background_runtime();
    let mock = rt.block_on(mock_llm::MockLlm::start());
    mock.push(chat_stream("half an ans", "length"));
    mock.push(chat_stream("I would rather", "content_filter"));
    mock.push(chat_stream("All done.", "stop"));
    let config = env.provider_config("kimi", "kimi-k2", &format!("{}/v1", mock.base_url()), json!({}));
    let work = env.work();
    with_client(&env, &config, &[], move |mut peer| async move {
        peer.initialize().await;
        let session = peer.new_session(&work).await;
        assert_eq!(peer.prompt(&session, "write a long essay").await.unwrap(), StopReason::MaxTokens);
        assert_eq!(texts(&peer.drain(), "agent_message_chunk"), "half an ans");
        assert_eq!(peer.prompt(&session, "something forbidden").await.unwrap(), StopReason::Refusal);
        assert_eq!(texts(&peer.drain(), "agent_message_chunk"), "I would rather");
        // The reason belongs to its turn only.
        assert_eq!(peer.prompt(&session, "something fine").await.unwrap(), StopReason::EndTurn);
    });
    assert_eq!(mock.request_count(), 3);
}

/// The session's token budget (`--max-tokens-per-session`) ends the prompt with `max_tokens`.
#[test]
fn a_used_up_token_budget_ends_with_max_tokens() {
    let env = Env::new();
    let todo = r#"tool_call: {"id": "t1", "name": "SetTodoList", "arguments": "{\"todos\": []}"}"#;
    let config =
        env.scripted_config(&[&format!("text: working\n{todo}\nusage: input_other=8 output=4"), "text: never"]);
    let work = env.work();
    with_client(&env, &config, &["--max-tokens-per-session", "10"], move |mut peer| async move {
        peer.initialize().await;
        let session = peer.new_session(&work).await;
        assert_eq!(peer.prompt(&session, "go").await.unwrap(), StopReason::MaxTokens);
        assert_eq!(texts(&peer.drain(), "agent_message_chunk"), "working");
    });
}

#[test]
fn approve_once_runs_the_command_and_shows_its_output() {
    let env = Env::new();
    let config = env.scripted_config(&[&shell("tc-1", "echo hi"), "text: done"]);
    let work = env.work();
    with_client(&env, &config, &[], move |mut peer| async move {
        peer.initialize().await;
        let session = peer.new_session(&work).await;
        let cx = peer.cx.clone();
        let s = session.clone();
        let prompt = tokio::spawn(async move {
            cx.send_request(PromptRequest::new(s, vec![ContentBlock::from("go".to_string())])).block_task().await
        });
        let (request, responder) = peer.next_permission().await;
        let ids: Vec<String> = request.options.iter().map(|o| o.option_id.0.to_string()).collect();
        assert_eq!(ids, ["approve", "approve_for_session", "reject"]);
        assert_eq!(request.tool_call.fields.title.as_deref(), Some("Shell: echo hi"));
        answer(responder, Some("approve"));
        assert_eq!(prompt.await.unwrap().unwrap().stop_reason, StopReason::EndTurn);
        let updates = peer.drain();
        let call = updates.iter().map(as_json).find(|u| u["sessionUpdate"] == "tool_call").unwrap();
        assert_eq!((call["kind"].clone(), call["rawInput"].clone()), (json!("execute"), json!({"command":"echo hi"})));
        assert!(call["toolCallId"].as_str().unwrap().ends_with("/tc-1"));
        let result = updates.iter().map(as_json).rfind(|u| u["sessionUpdate"] == "tool_call_update").unwrap();
        assert_eq!(result["status"], "completed");
        assert_eq!(result["content"], json!([{"type":"content","content":{"type":"text","text":"hi\n"}}]));
        let statuses: Vec<Value> =
            updates.iter().map(as_json).map(|u| u["status"].clone()).filter(|s| !s.is_null()).collect();
        assert_eq!(statuses, [json!("in_progress"), json!("completed")], "approved, then running, then done");
        assert_eq!(texts(&updates, "agent_message_chunk"), "done");
    });
}

#[test]
fn allow_always_approves_the_action_for_the_rest_of_the_session() {
    let env = Env::new();
    let config = env.scripted_config(&[&shell("a", "echo one"), "text: one", &shell("b", "echo two"), "text: two"]);
    let work = env.work();
    with_client(&env, &config, &[], move |mut peer| async move {
        peer.initialize().await;
        let session = peer.new_session(&work).await;
        let cx = peer.cx.clone();
        let s = session.clone();
        let first = tokio::spawn(async move {
            cx.send_request(PromptRequest::new(s, vec![ContentBlock::from("1".to_string())])).block_task().await
        });
        let (_, responder) = peer.next_permission().await;
        answer(responder, Some("approve_for_session"));
        assert_eq!(first.await.unwrap().unwrap().stop_reason, StopReason::EndTurn);
        // The second command is not asked about.
        assert_eq!(peer.prompt(&session, "2").await.unwrap(), StopReason::EndTurn);
        assert!(peer.permissions.try_recv().is_err());
        let updates = peer.drain();
        assert_eq!(final_status(&updates), Some(ToolCallStatus::Completed));
        assert!(texts(&updates, "agent_message_chunk").ends_with("two"));
    });
}

#[test]
fn reject_fails_the_call_and_runs_nothing() {
    let env = Env::new();
    let config = env.scripted_config(&[&shell("tc-1", "touch should-not-exist"), "text: never"]);
    let work = env.work();
    let marker = work.join("should-not-exist");
    with_client(&env, &config, &[], move |mut peer| async move {
        peer.initialize().await;
        let session = peer.new_session(&work).await;
        let cx = peer.cx.clone();
        let s = session.clone();
        let prompt = tokio::spawn(async move {
            cx.send_request(PromptRequest::new(s, vec![ContentBlock::from("go".to_string())])).block_task().await
        });
        let (_, responder) = peer.next_permission().await;
        answer(responder, Some("reject"));
        assert_eq!(prompt.await.unwrap().unwrap().stop_reason, StopReason::EndTurn);
        assert_eq!(final_status(&peer.drain()), Some(ToolCallStatus::Failed));
    });
    assert!(!marker.exists());
}

#[test]
fn cancel_during_a_permission_answers_cancelled() {
    let env = Env::new();
    let config = env.scripted_config(&[&shell("tc-1", "touch should-not-exist"), "text: never"]);
    let work = env.work();
    let marker = work.join("should-not-exist");
    with_client(&env, &config, &[], move |mut peer| async move {
        peer.initialize().await;
        let session = peer.new_session(&work).await;
        let cx = peer.cx.clone();
        let s = session.clone();
        let prompt = tokio::spawn(async move {
            cx.send_request(PromptRequest::new(s, vec![ContentBlock::from("go".to_string())])).block_task().await
        });
        let (_, responder) = peer.next_permission().await;
        peer.cancel(&session).await;
        // As the protocol asks of a client: pending permissions are answered `cancelled`.
        answer(responder, None);
        assert_eq!(prompt.await.unwrap().unwrap().stop_reason, StopReason::Cancelled);
        // The session still serves.
        assert!(peer.prompt(&session, "again").await.is_ok());
    });
    assert!(!marker.exists());
}

#[test]
fn cancel_while_a_shell_command_runs_kills_it() {
    let env = Env::new();
    let work = env.work();
    let pid_file = work.join("pid");
    let command = format!("echo $$ > {}; exec sleep 60", pid_file.display());
    let config = env.scripted_config(&[&shell("tc-1", &command), "text: never"]);
    let pid_path = pid_file.clone();
    with_client(&env, &config, &["--yolo"], move |peer| async move {
        peer.initialize().await;
        let session = peer.new_session(&work).await;
        let cx = peer.cx.clone();
        let s = session.clone();
        let prompt = tokio::spawn(async move {
            cx.send_request(PromptRequest::new(s, vec![ContentBlock::from("go".to_string())])).block_task().await
        });
        let pid = loop {
            if let Some(pid) = std::fs::read_to_string(&pid_path).ok().and_then(|t| t.trim().parse::<i32>().ok()) {
                break pid;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert!(alive(pid));
        peer.cancel(&session).await;
        assert_eq!(prompt.await.unwrap().unwrap().stop_reason, StopReason::Cancelled);
        // Gone without waiting for the sleep to end (bounded by the test's own limit, not timed).
        while alive(pid) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}

#[test]
fn load_replays_the_stored_history_before_answering() {
    let env = Env::new();
    let todo = json!({"todos":[{"title":"write tests","status":"in_progress"},{"title":"ship","status":"pending"}]});
    let config = env.scripted_config(&[
        &shell("tc-1", "echo hi"),
        &format!("tool_call: {}", json!({"id":"tc-2","name":"SetTodoList","arguments": todo.to_string()})),
        "think: done thinking\ntext: all done",
    ]);
    let work = env.work();
    let id = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let (w, keep) = (work.clone(), id.clone());
    with_client(&env, &config, &["--yolo"], move |peer| async move {
        peer.initialize().await;
        let session = peer.new_session(&w).await;
        assert_eq!(peer.prompt(&session, "hello kiwi").await.unwrap(), StopReason::EndTurn);
        *keep.lock().unwrap() = session;
    });
    let session = id.lock().unwrap().clone();
    // A second process loads it.
    with_client(&env, &config, &[], move |mut peer| async move {
        peer.initialize().await;
        let response =
            peer.cx.send_request(LoadSessionRequest::new(session.clone(), &work)).block_task().await.unwrap();
        assert_eq!(response.modes.unwrap().current_mode_id.0.as_ref(), "default");
        let updates = peer.drain();
        assert_eq!(texts(&updates, "user_message_chunk"), "hello kiwi");
        assert_eq!(texts(&updates, "agent_message_chunk"), "all done");
        assert_eq!(texts(&updates, "agent_thought_chunk"), "done thinking");
        let calls: Vec<Value> = updates.iter().map(as_json).filter(|u| u["sessionUpdate"] == "tool_call").collect();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0]["title"], "Shell: echo hi");
        let finals: Vec<Value> =
            updates.iter().map(as_json).filter(|u| u["sessionUpdate"] == "tool_call_update").collect();
        assert!(finals.iter().all(|u| u["status"] == "completed"));
        assert_eq!(finals[0]["content"][0]["content"]["text"], "hi\n");
        let plan = updates.iter().map(as_json).find(|u| u["sessionUpdate"] == "plan").unwrap();
        assert_eq!(
            plan["entries"],
            json!([{"content":"write tests","priority":"medium","status":"in_progress"},
                   {"content":"ship","priority":"medium","status":"pending"}])
        );
        // An unknown session is an error, not a new session.
        let error = peer.cx.send_request(LoadSessionRequest::new("nope", &work)).block_task().await.unwrap_err();
        assert_eq!(i32::from(error.code), -32602);
    });
}

#[test]
fn set_mode_switches_plan_mode_and_tells_the_client() {
    let env = Env::new();
    let config = env.scripted_config(&["text: ok"]);
    let work = env.work();
    with_client(&env, &config, &[], move |mut peer| async move {
        peer.initialize().await;
        let session = peer.new_session(&work).await;
        peer.cx.send_request(SetSessionModeRequest::new(session.clone(), "plan")).block_task().await.unwrap();
        let updates = peer.drain();
        let mode = updates.iter().map(as_json).find(|u| u["sessionUpdate"] == "current_mode_update").unwrap();
        assert_eq!(mode["currentModeId"], "plan");
        let error =
            peer.cx.send_request(SetSessionModeRequest::new(session.clone(), "warp")).block_task().await.unwrap_err();
        assert_eq!(i32::from(error.code), -32602);
        // Config options: a bad value is refused, thinking can be switched.
        let error = peer
            .cx
            .send_request(SetSessionConfigOptionRequest::new(session.clone(), "model", "no-such-model"))
            .block_task()
            .await
            .unwrap_err();
        assert_eq!(i32::from(error.code), -32602);
        let options = peer
            .cx
            .send_request(SetSessionConfigOptionRequest::new(session.clone(), "thinking", "on"))
            .block_task()
            .await
            .unwrap()
            .config_options;
        let options = serde_json::to_value(&options).unwrap();
        let thinking = options.as_array().unwrap().iter().find(|o| o["id"] == "thinking").unwrap();
        assert_eq!(thinking["currentValue"], "on");
        assert_eq!(peer.prompt(&session, "still works").await.unwrap(), StopReason::EndTurn);
    });
}

#[test]
fn two_sessions_run_side_by_side_in_one_process() {
    let env = Env::new();
    let config = env.scripted_config(&["text: from the script"]);
    let work = env.work();
    with_client(&env, &config, &[], move |mut peer| async move {
        peer.initialize().await;
        let a = peer.new_session(&work).await;
        let b = peer.new_session(&work).await;
        assert_ne!(a, b);
        let (ra, rb) = tokio::join!(peer.prompt(&a, "to a"), peer.prompt(&b, "to b"));
        assert_eq!((ra.unwrap(), rb.unwrap()), (StopReason::EndTurn, StopReason::EndTurn));
        let updates = peer.drain();
        for id in [&a, &b] {
            let mine: Vec<SessionNotification> =
                updates.iter().filter(|n| n.session_id.0.as_ref() == id.as_str()).cloned().collect();
            assert_eq!(texts(&mine, "agent_message_chunk"), "from the script");
        }
    });
}

#[test]
fn bad_requests_get_clear_errors_and_the_server_keeps_serving() {
    let env = Env::new();
    let config = env.scripted_config(&["text: ok"]);
    let work = env.work();
    with_client(&env, &config, &[], move |peer| async move {
        peer.initialize().await;
        let error = peer.prompt("no-such-session", "hi").await.unwrap_err();
        assert_eq!(i32::from(error.code), -32602);
        let error = peer.cx.send_request(NewSessionRequest::new("relative/dir")).block_task().await.unwrap_err();
        assert_eq!(i32::from(error.code), -32602);
        let session = peer.new_session(&work).await;
        let audio = PromptRequest::new(
            session.clone(),
            vec![serde_json::from_value(json!({"type":"audio","data":"AA","mimeType":"audio/wav"})).unwrap()],
        );
        let error = peer.cx.send_request(audio).block_task().await.unwrap_err();
        assert_eq!(i32::from(error.code), -32602);
        assert_eq!(peer.prompt(&session, "hi").await.unwrap(), StopReason::EndTurn);
    });
}

#[test]
fn shell_runs_in_the_clients_terminal_when_offered() {
    let env = Env::new();
    let config = env.scripted_config(&[&shell("tc-1", "echo hi"), "text: done"]);
    let work = env.work();
    with_client(&env, &config, &["--yolo"], move |mut peer| async move {
        peer.initialize_with_terminal().await;
        let session = peer.new_session(&work).await;
        assert_eq!(peer.prompt(&session, "go").await.unwrap(), StopReason::EndTurn);
        // Release may trail the prompt's answer by a moment: it is sent when the call ends.
        while !peer.terminal_log().contains(&"release".to_string()) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(peer.terminal_log(), ["create echo hi", "wait", "output", "release"]);
        let updates: Vec<Value> = peer.drain().iter().map(as_json).collect();
        let embedded = updates.iter().find(|u| u["status"] == "in_progress").unwrap();
        assert_eq!(embedded["content"], json!([{"type":"terminal","terminalId":"term-1"}]));
        let last = updates.iter().rfind(|u| u["sessionUpdate"] == "tool_call_update").unwrap();
        assert_eq!(last["status"], "completed");
        assert!(last.get("content").is_none(), "the terminal stays what the user sees");
    });
}

#[test]
fn cancel_releases_the_clients_terminal() {
    let env = Env::new();
    let config = env.scripted_config(&[&shell("tc-1", "sleep 60"), "text: never"]);
    let work = env.work();
    with_client(&env, &config, &["--yolo"], move |peer| async move {
        peer.initialize_with_terminal().await;
        let session = peer.new_session(&work).await;
        let cx = peer.cx.clone();
        let s = session.clone();
        let prompt = tokio::spawn(async move {
            cx.send_request(PromptRequest::new(s, vec![ContentBlock::from("go".to_string())])).block_task().await
        });
        while !peer.terminal_log().contains(&"wait".to_string()) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        peer.cancel(&session).await;
        assert_eq!(prompt.await.unwrap().unwrap().stop_reason, StopReason::Cancelled);
        while !peer.terminal_log().contains(&"release".to_string()) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
}

/// The model's view of each tool call of session `id` (its `return_value` by tool call id), as
/// the session's `wire.jsonl` recorded it.
fn tool_results(sessions: &Path, id: &str) -> std::collections::BTreeMap<String, Value> {
    let wire = std::fs::read_to_string(sessions.join(id).join("wire.jsonl")).unwrap();
    wire.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["message"]["type"] == "ToolResult")
        .map(|r| {
            let payload = &r["message"]["payload"];
            (payload["tool_call_id"].as_str().unwrap().to_string(), payload["return_value"].clone())
        })
        .collect()
}

/// The folder holding the sessions of `env`'s work dir.
fn sessions_of(env: &Env) -> std::path::PathBuf {
    env.session_dir("x").parent().unwrap().to_path_buf()
}

/// The value of the `name: value` line of a tool's output.
fn output_line<'a>(output: &'a str, name: &str) -> &'a str {
    output.lines().find_map(|l| l.strip_prefix(&format!("{name}: "))).unwrap_or_else(|| panic!("no {name} in {output}"))
}

/// Runs one prompt of `config` in a new session (with or without the client's terminal); the
/// tool results and what the terminal was asked.
fn results_of_one_prompt(
    env: &Env,
    config: &Path,
    terminal: bool,
) -> (std::collections::BTreeMap<String, Value>, Vec<String>) {
    let (work, sessions) = (env.work(), sessions_of(env));
    let out = std::sync::Arc::new(std::sync::Mutex::new(Default::default()));
    let keep = out.clone();
    with_client(env, config, &["--yolo"], move |peer| async move {
        match terminal {
            true => peer.initialize_with_terminal().await,
            false => peer.initialize().await,
        }
        let session = peer.new_session(&work).await;
        assert_eq!(peer.prompt(&session, "go").await.unwrap(), StopReason::EndTurn);
        *keep.lock().unwrap() = (tool_results(&sessions, &session), peer.terminal_log());
    });
    std::mem::take(&mut *out.lock().unwrap())
}

#[test]
fn the_terminal_shell_refuses_bad_arguments_as_the_builtin_does() {
    let env = Env::new();
    let calls = [
        tool_call("empty", "Shell", json!({"command": ""})),
        tool_call("long", "Shell", json!({"command": "echo", "timeout": 301})),
        tool_call("zero", "Shell", json!({"command": "echo", "timeout": 0})),
        tool_call(
            "bglong",
            "Shell",
            json!({"command": "sleep 1", "run_in_background": true, "description": "d", "timeout": 86401}),
        ),
        tool_call("bgnodesc", "Shell", json!({"command": "echo", "run_in_background": true})),
    ];
    let config = env.scripted_config(&[&calls.join("\n"), "text: done"]);
    let (in_terminal, asked) = results_of_one_prompt(&env, &config, true);
    assert!(asked.is_empty(), "no terminal for a refused call: {asked:?}");
    let (built_in, _) = results_of_one_prompt(&env, &config, false);
    assert_eq!(in_terminal, built_in, "the same refusals with and without the client's terminal");
    let message = |id: &str| in_terminal[id]["message"].as_str().unwrap().to_string();
    assert_eq!(message("empty"), "Command cannot be empty.");
    assert_eq!(message("long"), "Error validating JSON arguments: timeout must be between 1 and 300, got 301");
    assert_eq!(message("zero"), "Error validating JSON arguments: timeout must be between 1 and 300, got 0");
    assert_eq!(message("bglong"), "Error validating JSON arguments: timeout must be between 1 and 86400, got 86401");
    assert_eq!(
        message("bgnodesc"),
        "Error validating JSON arguments: description is required when run_in_background is true"
    );
    assert!(in_terminal.values().all(|r| r["is_error"] == true));
}

#[test]
fn the_terminal_shell_keeps_the_builtins_result_limits_and_timeout() {
    let env = Env::new();
    let config = env.scripted_config(&[
        &tool_call("long", "Shell", json!({"command": "print long-line"})),
        &tool_call("cut", "Shell", json!({"command": "print long-line cut"})),
        &tool_call("slow", "Shell", json!({"command": "sleep 60", "timeout": 1})),
        "text: done",
    ]);
    let (results, asked) = results_of_one_prompt(&env, &config, true);
    let long = &results["long"];
    let text = long["output"].as_str().unwrap();
    assert_eq!(text, format!("{}[...truncated]\n", "x".repeat(1985)), "a line is cut at 2,000 characters");
    assert_eq!(long["message"], "Command executed successfully. Output is truncated to fit in the message.");
    assert_eq!(
        results["cut"]["message"],
        "Command executed successfully. Output was truncated by the client output limit. \
         Output is truncated to fit in the message."
    );
    let slow = &results["slow"];
    assert_eq!(slow["is_error"], true);
    assert_eq!(slow["message"], "Command killed by timeout (1s)");
    assert_eq!(slow["display"], json!([{"type":"brief","text":"Killed by timeout (1s)"}]));
    // (The release of the call before may trail behind its result.)
    let last: Vec<&str> =
        asked.iter().map(String::as_str).skip_while(|a| *a != "create sleep 60").filter(|a| *a != "release").collect();
    assert_eq!(last, ["create sleep 60", "wait", "kill", "output"]);
}

#[test]
fn a_background_command_runs_in_the_clients_terminal_with_its_own_timeout() {
    let env = Env::new();
    let command = "sleep 5000; echo served";
    let args = json!({"command": command, "run_in_background": true, "description": "server", "timeout": 3600});
    let config = env.scripted_config(&[&tool_call("bg", "Shell", args), "text: started"]);
    let (work, sessions) = (env.work(), sessions_of(&env));
    with_client(&env, &config, &["--yolo"], move |mut peer| async move {
        peer.initialize_with_terminal().await;
        let session = peer.new_session(&work).await;
        assert_eq!(peer.prompt(&session, "go").await.unwrap(), StopReason::EndTurn);
        let result = &tool_results(&sessions, &session)["bg"];
        assert_eq!(result["is_error"], false, "{result}");
        assert_eq!(result["message"], "Background task started");
        let output = result["output"].as_str().unwrap();
        assert_eq!((output_line(output, "kind"), output_line(output, "command")), ("bash", command));
        // The task asks for the wait on its own task: it may trail the prompt's answer.
        let mut log = peer.terminal_log();
        while log.len() < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
            log = peer.terminal_log();
        }
        assert_eq!(log[..2], [format!("create {command}"), "wait".to_string()]);
        assert!(!log.contains(&"release".to_string()), "the command still runs: {log:?}");
        let updates: Vec<Value> = peer.drain().iter().map(as_json).collect();
        let embedded = updates.iter().find(|u| u["status"] == "in_progress" && u.get("content").is_some()).unwrap();
        assert_eq!(embedded["content"], json!([{"type":"terminal","terminalId":"term-1"}]));
        let last = updates.iter().rfind(|u| u["sessionUpdate"] == "tool_call_update").unwrap();
        assert_eq!(last["status"], "completed");
        assert!(last.get("content").is_none(), "the terminal stays what the user sees");
        // The task's output file follows the terminal's output.
        let task = sessions.join(&session).join("tasks").join(output_line(output, "task_id"));
        while std::fs::read_to_string(task.join("output.log")).unwrap_or_default() != "from the editor's terminal\n" {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let runtime: Value =
            serde_json::from_str(&std::fs::read_to_string(task.join("runtime.json")).unwrap()).unwrap();
        assert_eq!(runtime["status"], "running");
    });
}

#[test]
fn a_background_command_in_the_clients_terminal_is_killed_at_its_timeout() {
    let env = Env::new();
    let args = json!({"command": "sleep 5000", "run_in_background": true, "description": "d", "timeout": 1});
    let config = env.scripted_config(&[&tool_call("bg", "Shell", args), "text: started"]);
    let (work, sessions) = (env.work(), sessions_of(&env));
    with_client(&env, &config, &["--yolo"], move |peer| async move {
        peer.initialize_with_terminal().await;
        let session = peer.new_session(&work).await;
        assert_eq!(peer.prompt(&session, "go").await.unwrap(), StopReason::EndTurn);
        let result = &tool_results(&sessions, &session)["bg"];
        assert_eq!(result["message"], "Background task started", "{result}");
        let task =
            sessions.join(&session).join("tasks").join(output_line(result["output"].as_str().unwrap(), "task_id"));
        let runtime =
            || -> Value { serde_json::from_str(&std::fs::read_to_string(task.join("runtime.json")).unwrap()).unwrap() };
        while !peer.terminal_log().contains(&"release".to_string()) || runtime()["status"] == "running" {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let log = peer.terminal_log();
        let tail: Vec<&str> = log.iter().map(String::as_str).filter(|a| *a != "output").collect();
        assert_eq!(tail, ["create sleep 5000", "wait", "kill", "release"], "{log:?}");
        assert_eq!(log[log.len() - 2], "output", "the output is read after the kill: {log:?}");
        let runtime = runtime();
        assert_eq!((runtime["status"].clone(), runtime["timed_out"].clone()), (json!("killed"), json!(true)));
        assert_eq!(runtime["reason"], "Timed out after 1s");
        assert_eq!(std::fs::read_to_string(task.join("output.log")).unwrap(), "from the editor's terminal\n");
    });
}

fn tool_call(id: &str, name: &str, arguments: Value) -> String {
    format!("tool_call: {}", json!({"id": id, "name": name, "arguments": arguments.to_string()}))
}

#[test]
fn file_tools_read_and_write_the_clients_buffers_when_offered() {
    let env = Env::new();
    let work = env.work();
    std::fs::write(work.join("a.txt"), "what the disk holds\n").unwrap();
    let config = env.scripted_config(&[
        &tool_call("r", "ReadFile", json!({"path": "a.txt"})),
        &tool_call("e", "StrReplaceFile", json!({"path": "a.txt", "edit": {"old": "line two", "new": "line 2"}})),
        &tool_call("w", "WriteFile", json!({"path": "b.txt", "content": "new file\n"})),
        "text: done",
    ]);
    let w = work.clone();
    with_client(&env, &config, &["--yolo"], move |mut peer| async move {
        peer.initialize_with_fs().await;
        let session = peer.new_session(&w).await;
        assert_eq!(peer.prompt(&session, "go").await.unwrap(), StopReason::EndTurn);
        let a = w.join("a.txt");
        let b = w.join("b.txt");
        assert_eq!(
            peer.terminal_log(),
            [
                format!("read {}", a.display()),
                format!("read {}", a.display()),
                format!("read {}", a.display()),
                format!("write {} {:?}", a.display(), "line one from the editor\nline 2\n"),
                format!("write {} {:?}", b.display(), "new file\n"),
            ]
        );
        let updates: Vec<Value> = peer.drain().iter().map(as_json).collect();
        let read =
            updates.iter().find(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed").unwrap();
        assert!(read["content"][0]["content"]["text"].as_str().unwrap().contains("line one from the editor"));
        let edit = updates
            .iter()
            .find(|u| u["sessionUpdate"] == "tool_call_update" && u["content"][0]["type"] == "diff")
            .unwrap();
        assert_eq!(edit["content"][0]["newText"], "line one from the editor\nline 2");
    });
    // Nothing was written to the disk behind the editor's back.
    assert_eq!(std::fs::read_to_string(work.join("a.txt")).unwrap(), "what the disk holds\n");
    assert!(!work.join("b.txt").exists());
}

#[test]
fn a_wire_session_loads_over_acp_and_an_acp_session_resumes_over_the_wire() {
    let env = Env::new();
    let config = env.scripted_config(&["text: said on the wire", "text: said over acp"]);
    let work = env.work();
    // Wire first: an ordinary `--session` run.
    let mut k = env.spawn(&config, &["--session", "shared-1"]);
    let (_, response) = k.prompt("p", json!("hello from the wire"));
    assert_eq!(response["result"]["status"], "finished");
    k.close_stdin();
    assert!(k.wait_exit(Duration::from_secs(10)).expect("exit").success());
    // ACP loads it, sees its history, and adds a turn.
    let w = work.clone();
    with_client(&env, &config, &[], move |mut peer| async move {
        peer.initialize().await;
        peer.cx.send_request(LoadSessionRequest::new("shared-1", &w)).block_task().await.unwrap();
        let history = peer.drain();
        assert_eq!(texts(&history, "user_message_chunk"), "hello from the wire");
        assert_eq!(texts(&history, "agent_message_chunk"), "said on the wire");
        assert_eq!(peer.prompt("shared-1", "hello over acp").await.unwrap(), StopReason::EndTurn);
    });
    // The wire resumes it with both turns.
    let mut k = env.spawn(&config, &["--session", "shared-1"]);
    let (sent, _) = k.call("r", "replay", json!({}));
    let inputs: Vec<Value> = sent
        .iter()
        .filter(|m| m["params"]["type"] == "TurnBegin")
        .map(|m| m["params"]["payload"]["user_input"].clone())
        .collect();
    assert_eq!(inputs, [json!("hello from the wire"), json!("hello over acp")]);
}

/// A session stored in the legacy flat layout (`<id>.jsonl` beside the folders) loads over ACP as
/// `--session` finds it on the wire: ACP asks the session store where a session lives.
#[test]
fn a_legacy_flat_session_file_loads_over_acp() {
    let env = Env::new();
    let config = env.scripted_config(&["text: said on the wire", "text: said over acp"]);
    let work = env.work();
    let mut k = env.spawn(&config, &["--session", "flat-1"]);
    let (_, response) = k.prompt("p", json!("hello from the wire"));
    assert_eq!(response["result"]["status"], "finished");
    k.close_stdin();
    assert!(k.wait_exit(Duration::from_secs(10)).expect("exit").success());
    let sessions = std::fs::read_dir(env.share().join("sessions")).unwrap().next().unwrap().unwrap().path();
    let folder = sessions.join("flat-1");
    std::fs::rename(folder.join("context.jsonl"), sessions.join("flat-1.jsonl")).unwrap();
    std::fs::remove_dir_all(&folder).unwrap();
    with_client(&env, &config, &[], move |peer| async move {
        peer.initialize().await;
        peer.cx.send_request(LoadSessionRequest::new("flat-1", &work)).block_task().await.unwrap();
        assert_eq!(peer.prompt("flat-1", "hello over acp").await.unwrap(), StopReason::EndTurn);
    });
    let context = std::fs::read_to_string(folder.join("context.jsonl")).unwrap();
    assert!(context.contains("hello from the wire") && context.contains("hello over acp"), "{context}");
}

#[test]
fn provider_errors_and_a_missing_model_are_json_rpc_errors() {
    let env = Env::new();
    let config = env.scripted_config(&["error: 401 Token expired"]);
    let work = env.work();
    with_client(&env, &config, &[], move |peer| async move {
        peer.initialize().await;
        let session = peer.new_session(&work).await;
        let error = peer.prompt(&session, "hi").await.unwrap_err();
        assert_eq!(i32::from(error.code), -32603);
        assert!(serde_json::to_string(&error.data).unwrap().contains("Token expired"), "{error:?}");
    });
    let env = Env::new();
    let no_model = env.named_scripted_config("none", &["text: x"], json!({"default_model": ""}));
    let work = env.work();
    with_client(&env, &no_model, &[], move |peer| async move {
        peer.initialize().await;
        let session = peer.new_session(&work).await;
        let error = peer.prompt(&session, "hi").await.unwrap_err();
        assert_eq!(i32::from(error.code), -32000, "authentication required: {error:?}");
        // As the wire's -32001: the fixed error and nothing more (the reason is in the log).
        assert!(error.data.as_ref().is_none_or(Value::is_null), "{error:?}");
    });
}

/// Raw frames, for what the crate has no type for: the legacy `models` member and
/// `session/set_model`.
#[test]
fn legacy_models_and_set_model_for_older_clients() {
    let env = Env::new();
    let config = env.scripted_config_with(
        &["text: ok"],
        json!({"models": {"other": {"provider": "scripted_provider", "model": "scripted_echo", "max_context_size": 1000}}}),
    );
    let mut k = common::Kiwi::spawn(env.acp_command(&config, &[]));
    let (_, init) = k.call("i", "initialize", json!({"protocolVersion": 1, "clientCapabilities": {}}));
    assert_eq!(init["result"]["protocolVersion"], 1);
    let (_, created) = k.call("n", "session/new", json!({"cwd": env.work(), "mcpServers": []}));
    let result = &created["result"];
    assert_eq!(result["models"]["currentModelId"], "scripted");
    assert_eq!(
        result["models"]["availableModels"],
        json!([{"modelId":"other","name":"scripted_echo"},{"modelId":"scripted","name":"scripted_echo"}])
    );
    let session = result["sessionId"].clone();
    let (_, changed) = k.call("m", "session/set_model", json!({"sessionId": session, "modelId": "other"}));
    assert_eq!(changed["result"], json!({}));
    let (_, missing) = k.call("x", "session/set_model", json!({"sessionId": session, "modelId": "gone"}));
    assert_eq!(missing["error"]["data"], json!({"model_id": "Model not found"}));
    let (_, prompt) =
        k.call("p", "session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}));
    assert_eq!(prompt["result"]["stopReason"], "end_turn");
}

/// `--yolo` holds for its own process; a later `session/load` asks again.
#[test]
fn a_yolo_flag_is_not_loaded_with_the_session() {
    let env = Env::new();
    let work = env.work();
    let pwned = work.join("PWNED");
    let first = env.named_scripted_config("first", &[&shell("a", "echo yolo"), "text: ran"], json!({}));
    let id = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let (w, keep) = (work.clone(), id.clone());
    with_client(&env, &first, &["--yolo"], move |mut peer| async move {
        peer.initialize().await;
        let session = peer.new_session(&w).await;
        assert_eq!(peer.prompt(&session, "go").await.unwrap(), StopReason::EndTurn);
        assert!(peer.permissions.try_recv().is_err(), "yolo: nothing asked");
        *keep.lock().unwrap() = session;
    });
    let session = id.lock().unwrap().clone();
    let later = env.named_scripted_config(
        "later",
        &[shell("b", &format!("touch {}", pwned.display())), "text: never".into()],
        json!({}),
    );
    let p = pwned.clone();
    with_client(&env, &later, &[], move |mut peer| async move {
        peer.initialize().await;
        peer.cx.send_request(LoadSessionRequest::new(session.clone(), &work)).block_task().await.unwrap();
        let cx = peer.cx.clone();
        let prompt = tokio::spawn(async move {
            cx.send_request(PromptRequest::new(session, vec![ContentBlock::from("again".to_string())]))
                .block_task()
                .await
        });
        let (request, responder) = peer.next_permission().await;
        assert_eq!(request.tool_call.fields.title.as_deref(), Some(format!("Shell: touch {}", p.display()).as_str()));
        answer(responder, Some("reject"));
        prompt.await.unwrap().unwrap();
        assert!(!p.exists());
    });
}

/// A subagent's permission request is titled after its own call, even when
/// its call id is the parent's.
#[test]
fn a_subagents_permission_shows_its_own_call() {
    let env = Env::new();
    let agent = format!(
        "tool_call: {}",
        json!({"id": "t1", "name": "Agent", "arguments": json!({"description": "look", "prompt": "look around",
            "subagent_type": "explore"}).to_string()})
    );
    let summary = "text: The subagent ran its command and found that the work directory holds nothing surprising \
                   at all; the command printed its greeting, no file needed a change, and this summary is deliberately \
                   long enough to be kept as it is.";
    let config = env.scripted_config(&[&agent, &shell("t1", "echo from-sub"), summary, "text: parent done"]);
    let work = env.work();
    with_client(&env, &config, &[], move |mut peer| async move {
        peer.initialize().await;
        let session = peer.new_session(&work).await;
        let cx = peer.cx.clone();
        let prompt = tokio::spawn(async move {
            cx.send_request(PromptRequest::new(session, vec![ContentBlock::from("go".to_string())])).block_task().await
        });
        let (request, responder) = peer.next_permission().await;
        assert_eq!(request.tool_call.fields.title.as_deref(), Some("Shell: echo from-sub"));
        answer(responder, Some("approve"));
        assert_eq!(prompt.await.unwrap().unwrap().stop_reason, StopReason::EndTurn);
    });
}

/// `AskUserQuestion` to a client that offers forms: the crate's client reads kiwi's
/// `elicitation/create` as its typed request, and its typed answer reaches the model.
#[test]
fn a_question_reaches_a_client_with_forms_as_a_typed_elicitation() {
    let env = Env::new();
    let arguments = json!({"questions": [{"question": "Which editor?", "header": "Editor", "options": [
        {"label": "Zed", "description": "fast"}, {"label": "Vim", "description": "modal"}]}]})
    .to_string();
    let ask = format!("tool_call: {}", json!({"id": "q1", "name": "AskUserQuestion", "arguments": arguments}));
    let config = env.scripted_config(&[&ask, "text: noted"]);
    let work = env.work();
    let session_dir = env.share().join("sessions");
    with_client(&env, &config, &[], move |mut peer| async move {
        let forms = ElicitationCapabilities::new().form(ElicitationFormCapabilities::new());
        let request = InitializeRequest::new(ProtocolVersion::V1)
            .client_capabilities(ClientCapabilities::new().elicitation(forms));
        peer.cx.send_request(request).block_task().await.unwrap();
        let session = peer.new_session(&work).await;
        let cx = peer.cx.clone();
        let s = session.clone();
        let prompt = tokio::spawn(async move {
            cx.send_request(PromptRequest::new(s, vec![ContentBlock::from("ask".to_string())])).block_task().await
        });
        let (request, responder) = peer.elicitations.recv().await.expect("an elicitation");
        assert_eq!(request.message, "Which editor?");
        let ElicitationMode::Form(form) = &request.mode else { panic!("a form: {request:?}") };
        let Some(ElicitationPropertySchema::String(property)) = form.requested_schema.properties.get("question_1")
        else {
            panic!("a single choice: {form:?}")
        };
        let labels: Vec<&str> = property.one_of.as_ref().unwrap().iter().map(|o| o.value.as_str()).collect();
        assert_eq!(labels, ["Zed", "Vim"]);
        let content = std::collections::BTreeMap::from([(
            "question_1".to_string(),
            ElicitationContentValue::String("Vim".into()),
        )]);
        let accept = ElicitationAction::Accept(ElicitationAcceptAction::new().content(content));
        responder.respond(CreateElicitationResponse::new(accept)).unwrap();
        assert_eq!(prompt.await.unwrap().unwrap().stop_reason, StopReason::EndTurn);
        let context = walk(&session_dir).into_iter().find(|p| p.ends_with(format!("{session}/context.jsonl"))).unwrap();
        let text = std::fs::read_to_string(context).unwrap();
        assert!(text.contains(r#"{\"answers\": {\"Which editor?\": \"Vim\"}}"#), "{text}");
    });
}

/// Every file under `dir`.
fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
