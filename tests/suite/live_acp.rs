//! One session, ACP and the wire in two processes (`docs/host.md`, `docs/acp.md` §4.18): a
//! `kiwi acp` session is hosted on its folder's `live.sock`, so a `kiwi --wire -S` attaches to it
//! (sees the ACP-started turn, answers its approval first, takes the session over at
//! `session/close`); and `session/load` / `session/resume` of a session a running `kiwi --wire`
//! holds attach to that host instead of failing (and take it over when the host exits).

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Env, Kiwi};

/// A client of the current ACP schema.
fn acp(env: &Env, config: &Path) -> Kiwi {
    let mut k = Kiwi::spawn(env.acp_command(config, &[]));
    let caps = json!({"auth": {"terminal": false}});
    let (_, init) = k.call("init", "initialize", json!({"protocolVersion": 1, "clientCapabilities": caps}));
    assert!(init.get("result").is_some(), "{init}");
    k
}

fn shell(id: &str, command: &str) -> String {
    let args = json!({"command": command}).to_string();
    format!("tool_call: {}", json!({"id": id, "name": "Shell", "arguments": args}))
}

fn send_prompt(k: &mut Kiwi, id: &str, session: &str, text: &str) {
    k.send(json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}}));
}

/// The `session/update`s among `messages` of `kind`, as their `update` objects.
fn of_kind(messages: &[Value], kind: &str) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m["method"] == "session/update" && m["params"]["update"]["sessionUpdate"] == kind)
        .map(|m| m["params"]["update"].clone())
        .collect()
}

fn texts(messages: &[Value], kind: &str) -> String {
    of_kind(messages, kind).iter().map(|u| u["content"]["text"].as_str().unwrap_or_default().to_string()).collect()
}

/// Reads until a message for which `found` holds; the messages before it and it.
fn until(k: &mut Kiwi, found: impl Fn(&Value) -> bool) -> (Vec<Value>, Value) {
    let mut before = Vec::new();
    loop {
        let m = k.next();
        if found(&m) {
            return (before, m);
        }
        before.push(m);
    }
}

fn is_event(kind: &'static str) -> impl Fn(&Value) -> bool {
    move |m| m["method"] == "event" && m["params"]["type"] == kind
}

/// A stored session `id` with one turn, made by a wire process that has exited.
fn store_session(env: &Env, id: &str) {
    let config = env.named_scripted_config("first", &["text: stored"], json!({}));
    let mut k = env.spawn(&config, &["--session", id]);
    let (_, r) = k.prompt("p0", json!("the first turn"));
    assert_eq!(r["result"]["status"], "finished", "{r}");
    k.close_stdin();
    assert!(k.wait_exit(Duration::from_secs(20)).is_some_and(|s| s.success()));
}

fn is_permission(m: &Value) -> bool {
    m["method"] == "session/request_permission"
}

#[test]
fn a_wire_process_attaches_to_a_session_an_acp_client_has_open() {
    let env = Env::new();
    let work = env.work();
    let ran = env.dir.path().join("ran.txt");
    let command = format!("echo ran >> {}", ran.display());
    let config = env.scripted_config(&[&shell("tc-1", &command), "text: done", "text: from the wire"]);
    // A stored session loaded by the editor: the ACP process holds and hosts it.
    let session = "acp-host".to_string();
    store_session(&env, &session);
    let mut editor = acp(&env, &config);
    let (_, loaded) = editor.call("load", "session/load", json!({"sessionId": session, "cwd": work, "mcpServers": []}));
    assert!(loaded.get("result").is_some(), "{loaded}");
    let socket = env.session_dir(&session).join("live.sock");
    assert!(socket.exists(), "the ACP session is not hosted");

    let own = env.named_scripted_config("wire", &["text: the wire's own"], json!({}));
    let mut wire = env.spawn(&own, &["--session", &session]);
    let (_, init) = wire.call("init", "initialize", json!({"protocol_version": "1.10"}));
    assert_eq!(init["result"]["protocol_version"], "1.10", "{init}");

    // The editor's turn asks for approval: both clients are asked, the wire answers first.
    send_prompt(&mut editor, "p1", &session, "run it");
    let (_, card) = until(&mut editor, is_permission);
    let (seen, asked) = wire.until_request();
    assert_eq!(asked["params"]["type"], "ApprovalRequest", "{asked}");
    assert!(seen.iter().any(is_event("TurnBegin")), "{seen:?}");
    let id = asked["id"].clone();
    wire.send(json!({"jsonrpc": "2.0", "id": id, "result": {"request_id": id, "response": "approve"}}));
    let (during, answer) = editor.until_response(&json!("p1"));
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(texts(&during, "agent_message_chunk"), "done", "{during:?}");
    let (seen, _) = until(&mut wire, is_event("TurnEnd"));
    assert!(seen.iter().any(|m| m["params"]["type"] == "ToolResult"), "{seen:?}");
    assert_eq!(std::fs::read_to_string(&ran).unwrap(), "ran\n", "the command ran once");
    // The editor's late answer to the card changes nothing.
    editor.send(json!({"jsonrpc": "2.0", "id": card["id"], "result": {"outcome": {"outcome": "cancelled"}}}));

    // A turn the wire starts runs in the ACP process; the editor sees its updates.
    let (_, mine) = wire.prompt("w1", json!("hello from the wire"));
    assert_eq!(mine["result"]["status"], "finished", "{mine}");
    let (before, _) = until(&mut editor, |m| !of_kind(std::slice::from_ref(m), "agent_message_chunk").is_empty());
    assert_eq!(texts(&before, "user_message_chunk"), "hello from the wire", "{before:?}");

    // `session/close` stops the hosting: the attacher's stream ends and it takes the session
    // over, serving its client's next prompt itself.
    let (_, closed) = editor.call("close", "session/close", json!({"sessionId": session}));
    assert!(closed.get("result").is_some(), "{closed}");
    // (A prompt that crosses the host's exit ends cancelled.)
    let mut finished = false;
    for n in 0..100 {
        let (_, next) = wire.prompt(&format!("w{n}"), json!("mine now"));
        if next["result"]["status"] == "finished" {
            finished = true;
            break;
        }
        assert_eq!(next["result"]["status"], "cancelled", "{next}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(finished, "the wire process never ran its prompt");
    let text: String = wire
        .seen
        .iter()
        .filter(|m| m["params"]["type"] == "ContentPart")
        .map(|m| m["params"]["payload"]["text"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(text.ends_with("the wire's own"), "{text}");
    assert!(socket.exists(), "the wire process does not host the session");
}

fn approve(k: &mut Kiwi, card: &Value) {
    k.send(json!({"jsonrpc": "2.0", "id": card["id"], "result": {"outcome": {"outcome": "selected", "optionId": "approve"}}}));
}

fn load(k: &mut Kiwi, id: &str, session: &str, work: &Path) -> (Vec<Value>, Value) {
    k.call(id, "session/load", json!({"sessionId": session, "cwd": work, "mcpServers": []}))
}

#[test]
fn an_acp_client_loads_a_session_a_wire_process_holds() {
    let env = Env::new();
    let work = env.work();
    let ran = env.dir.path().join("ran.txt");
    let config = env.scripted_config(&[
        "text: first",
        &shell("tc-1", &format!("echo one >> {}", ran.display())),
        "text: done",
        "text: from acp",
        &shell("tc-2", "echo two"),
        "text: host two",
        "text: queued ran",
        &shell("tc-3", "echo three"),
    ]);
    let mut host = env.spawn(&config, &["--session", "shared"]);
    host.initialize();
    let (_, first) = host.prompt("h0", json!("first"));
    assert_eq!(first["result"]["status"], "finished", "{first}");

    // The load attaches: the history as a load from disk replays it, then the answer.
    let mut editor = acp(&env, &config);
    let (history, loaded) = load(&mut editor, "load", "shared", &work);
    assert_eq!(loaded["result"]["modes"]["currentModeId"], "default", "{loaded}");
    assert_eq!(loaded["result"]["configOptions"], json!([]), "the host's options are set there: {loaded}");
    assert!(loaded["result"].get("models").is_none(), "{loaded}");
    assert_eq!(texts(&history, "user_message_chunk"), "first", "{history:?}");
    assert_eq!(texts(&history, "agent_message_chunk"), "first", "{history:?}");
    // Its options cannot be changed here.
    let (_, refused) = editor.call("mode", "session/set_mode", json!({"sessionId": "shared", "modeId": "plan"}));
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert!(refused["error"]["data"]["error"].as_str().unwrap().contains("hosted by another process"), "{refused}");

    // The host's turn: the editor sees its prompt and its permission request, and answers it.
    host.send(json!({"jsonrpc": "2.0", "id": "h1", "method": "prompt", "params": {"user_input": "run it"}}));
    let (before, card) = until(&mut editor, is_permission);
    assert_eq!(texts(&before, "user_message_chunk"), "run it", "{before:?}");
    let (_, asked) = host.until_request();
    assert_eq!(asked["params"]["type"], "ApprovalRequest");
    approve(&mut editor, &card);
    let (_, answer) = host.until_response(&json!("h1"));
    assert_eq!(answer["result"]["status"], "finished", "{answer}");
    assert_eq!(std::fs::read_to_string(&ran).unwrap(), "one\n", "the command ran once");
    let (during, _) = until(&mut editor, |m| of_kind(std::slice::from_ref(m), "agent_message_chunk").len() == 1);
    assert!(of_kind(&during, "tool_call_update").iter().any(|u| u["status"] == "completed"), "{during:?}");

    // The editor's prompt runs on the host; the wire client sees it.
    send_prompt(&mut editor, "a1", "shared", "hello from acp");
    let (during, mine) = editor.until_response(&json!("a1"));
    assert_eq!(mine["result"]["stopReason"], "end_turn", "{mine}");
    assert!(texts(&during, "agent_message_chunk").ends_with("from acp"), "{during:?}");
    assert!(texts(&during, "user_message_chunk").is_empty(), "its own prompt is not echoed: {during:?}");
    let (_, begin) = until(&mut host, is_event("TurnBegin"));
    assert_eq!(begin["params"]["payload"]["user_input"], "hello from acp", "{begin}");
    until(&mut host, is_event("TurnEnd"));

    // While the host's turn waits for its approval, the editor's prompt waits its turn.
    host.send(json!({"jsonrpc": "2.0", "id": "h2", "method": "prompt", "params": {"user_input": "again"}}));
    let (_, asked) = host.until_request();
    let (_, card) = until(&mut editor, is_permission);
    send_prompt(&mut editor, "a2", "shared", "queued");
    let id = asked["id"].clone();
    host.send(json!({"jsonrpc": "2.0", "id": id, "result": {"request_id": id, "response": "approve"}}));
    let (_, answer) = host.until_response(&json!("h2"));
    assert_eq!(answer["result"]["status"], "finished", "{answer}");
    let (during, queued) = editor.until_response(&json!("a2"));
    assert_eq!(queued["result"]["stopReason"], "end_turn", "{queued}");
    assert!(texts(&during, "agent_message_chunk").ends_with("queued ran"), "{during:?}");
    // The card the wire answered first: the editor's late answer changes nothing.
    approve(&mut editor, &card);

    // A cancel from the editor cancels the host's turn.
    send_prompt(&mut editor, "a3", "shared", "cancel me");
    until(&mut editor, is_permission);
    editor.send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "shared"}}));
    let (_, cancelled) = editor.until_response(&json!("a3"));
    assert_eq!(cancelled["result"]["stopReason"], "cancelled", "{cancelled}");
    let (_, end) = until(&mut host, |m| m["method"] == "event" && m["params"]["type"] == "TurnEnd");
    assert_eq!(end["params"]["type"], "TurnEnd");
}

#[test]
fn when_the_host_exits_the_acp_process_takes_the_session_over() {
    let env = Env::new();
    let work = env.work();
    let config = env.scripted_config(&["text: first", &shell("tc-1", "echo one")]);
    let mut host = env.spawn(&config, &["--session", "shared"]);
    host.initialize();
    host.prompt("h0", json!("first"));
    let mine = env.named_scripted_config("editor", &["text: taken over"], json!({}));
    let mut editor = acp(&env, &mine);
    let (_, loaded) = load(&mut editor, "load", "shared", &work);
    assert!(loaded.get("result").is_some(), "{loaded}");

    // The editor's prompt waits for an approval when the host exits: it ends cancelled.
    send_prompt(&mut editor, "a1", "shared", "run it");
    until(&mut editor, is_permission);
    host.close_stdin();
    assert!(host.wait_exit(Duration::from_secs(20)).is_some(), "the host did not exit");
    let (_, cancelled) = editor.until_response(&json!("a1"));
    assert_eq!(cancelled["result"]["stopReason"], "cancelled", "{cancelled}");

    // The session goes on in the editor's process, which now hosts it: a prompt runs there (one
    // sent before this process saw the host go may still end cancelled), without a protocol
    // error.
    let socket = env.session_dir("shared").join("live.sock");
    let mut during = Vec::new();
    for n in 0..100 {
        let id = format!("later-{n}");
        send_prompt(&mut editor, &id, "shared", "still there?");
        let (before, answer) = editor.until_response(&json!(id));
        assert!(answer.get("error").is_none(), "{answer}");
        if answer["result"]["stopReason"] == "end_turn" {
            during = before;
            break;
        }
        assert_eq!(answer["result"]["stopReason"], "cancelled", "{answer}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(texts(&during, "agent_message_chunk"), "taken over", "{during:?}");
    assert!(socket.exists(), "the editor's process does not host the session");
    // A wire process attaches to it there.
    let mut wire = env.spawn(&config, &["--session", "shared"]);
    let (_, replayed) = wire.call("r", "replay", json!({}));
    assert_eq!(replayed["result"]["status"], "finished", "{replayed}");
}

/// `session/resume` attaches too (no history, then the live updates); what would change the
/// host's agent is refused with the reason; a fork of the idle hosted session is made from its
/// folder; a directory outside the host's workspace is refused.
#[test]
fn a_resumed_attached_session_refuses_what_belongs_to_the_host() {
    let env = Env::new();
    let work = env.work();
    let config = env.scripted_config(&["text: first", "text: second"]);
    let mut host = env.spawn(&config, &["--session", "shared"]);
    host.initialize();
    host.prompt("h0", json!("first"));
    let mut editor = acp(&env, &config);

    let elsewhere = env.dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let (_, outside) = editor.call(
        "r0",
        "session/resume",
        json!({"sessionId": "shared", "cwd": work, "mcpServers": [], "additionalDirectories": [elsewhere]}),
    );
    assert_eq!(outside["error"]["code"], -32602, "{outside}");
    assert!(outside["error"]["data"]["error"].as_str().unwrap().contains("not in its workspace"), "{outside}");

    let (before, resumed) =
        editor.call("r1", "session/resume", json!({"sessionId": "shared", "cwd": work, "mcpServers": []}));
    assert_eq!(resumed["result"]["configOptions"], json!([]), "{resumed}");
    assert!(of_kind(&before, "user_message_chunk").is_empty(), "resume replays nothing: {before:?}");

    let hosted = |answer: &Value| {
        answer["error"]["code"] == -32603
            && answer["error"]["data"]["error"].as_str().is_some_and(|e| e.contains("hosted by another process"))
    };
    let (_, option) = editor.call(
        "o",
        "session/set_config_option",
        json!({"sessionId": "shared", "configId": "thinking", "value": "on"}),
    );
    assert!(hosted(&option), "{option}");
    let (_, model) = editor.call("m", "session/set_model", json!({"sessionId": "shared", "modelId": "scripted"}));
    assert!(hosted(&model), "{model}");
    let (_, undo) = editor.call("u", "_kiwi/undo", json!({"sessionId": "shared"}));
    assert!(hosted(&undo), "{undo}");

    let (_, forked) = editor.call("f", "session/fork", json!({"sessionId": "shared", "cwd": work, "mcpServers": []}));
    let fork = forked["result"]["sessionId"].as_str().expect("a forked session").to_string();
    assert_ne!(fork, "shared");

    // The host's next turn reaches the resumed session live.
    let (_, second) = host.prompt("h1", json!("second"));
    assert_eq!(second["result"]["status"], "finished", "{second}");
    let (before, chunk) = until(&mut editor, |m| !of_kind(std::slice::from_ref(m), "agent_message_chunk").is_empty());
    assert_eq!(texts(&before, "user_message_chunk"), "second", "{before:?}");
    assert_eq!(chunk["params"]["update"]["content"]["text"], "second");
}
