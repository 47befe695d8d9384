//! `kiwi acp` over raw JSON lines, for what editors get beyond the basics: the modes (default,
//! acceptEdits, plan, yolo) driving the core's approval state without saving it, `session/fork`
//! (and the wire's `fork` extension and `/fork`), `session/list` across work dirs, prompts queued
//! behind a running turn, titles and option updates, the capabilities `initialize` offers, and
//! ACP's newer stable surface (`session/delete`, `logout`, `additionalDirectories`, `messageId`,
//! boolean options, the turn's usage) for the clients that take it.

use crate::common::{Env, Kiwi};

use std::path::Path;

use serde_json::{Value, json};

/// A client of the current ACP schema (it sends `auth`, newer than the updates kiwi sends).
fn acp(env: &Env, config: &Path) -> Kiwi {
    let mut k = Kiwi::spawn(env.acp_command(config, &[]));
    let caps = json!({"auth": {"terminal": false}});
    let (_, init) = k.call("init", "initialize", json!({"protocolVersion": 1, "clientCapabilities": caps}));
    assert!(init.get("result").is_some(), "{init}");
    k
}

fn new_session(k: &mut Kiwi, cwd: &Path) -> (String, Value) {
    let (_, r) = k.call("new", "session/new", json!({"cwd": cwd, "mcpServers": []}));
    (r["result"]["sessionId"].as_str().expect("a session id").to_string(), r["result"].clone())
}

fn prompt(k: &mut Kiwi, id: &str, session: &str, text: &str) -> (Vec<Value>, Value) {
    k.call(id, "session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}))
}

/// The `session/update`s among `messages`, as their `update` objects.
fn updates(messages: &[Value]) -> Vec<Value> {
    messages.iter().filter(|m| m["method"] == "session/update").map(|m| m["params"]["update"].clone()).collect()
}

fn of_kind(messages: &[Value], kind: &str) -> Vec<Value> {
    updates(messages).into_iter().filter(|u| u["sessionUpdate"] == kind).collect()
}

fn tool_call(id: &str, name: &str, arguments: Value) -> String {
    format!("tool_call: {}", json!({"id": id, "name": name, "arguments": arguments.to_string()}))
}

fn permission_requests(messages: &[Value]) -> usize {
    messages.iter().filter(|m| m["method"] == "session/request_permission").count()
}

/// `docs/compatibility.md`: what a client that asks for nothing and shows an old schema (only `fs`
/// and `terminal`, as the 0.4 SDK sends) gets, pinned whole: the `initialize` result (the spec's
/// reference answer with the differences `docs/acp.md` §4.1 lists: kiwi's name and login text,
/// embedded context, SSE, the stable session methods and the unstable fork), no kiwi extension
/// named; `session/new`'s members; the command list without kiwi's own commands; and no update
/// kind newer than that schema during a turn.
#[test]
fn what_a_client_that_asks_nothing_sees() {
    let env = Env::new();
    let work = env.work();
    let config = env.scripted_config(&["usage: {\"input_other\": 5, \"output\": 2}\ntext: hello"]);
    let mut k = Kiwi::spawn(env.acp_command(&config, &[]));
    let caps = json!({"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false});
    let (_, init) = k.call("init", "initialize", json!({"protocolVersion": 1, "clientCapabilities": caps}));
    let program = env!("CARGO_BIN_EXE_kiwi");
    let expected = json!({
        "protocolVersion": 1,
        "agentCapabilities": {
            "loadSession": true,
            "promptCapabilities": {"image": true, "audio": false, "embeddedContext": true},
            "mcpCapabilities": {"http": true, "sse": true},
            "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "fork": {}},
            "auth": {}
        },
        "authMethods": [{
            "id": "login",
            "name": "Log in to your Kimi account",
            "description": "Runs `kiwi login` in a terminal; follow its instructions, then start a session.",
            "_meta": {"terminal-auth": {"command": program, "args": ["login"], "label": "Kimi Login"}}
        }],
        "agentInfo": {"name": "kiwi", "version": env!("CARGO_PKG_VERSION")}
    });
    assert_eq!(init["result"], expected, "{init}");
    let (before, r) = k.call("new", "session/new", json!({"cwd": work, "mcpServers": []}));
    let keys: Vec<&String> = r["result"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["sessionId", "modes", "configOptions", "models"], "{r}");
    let session = r["result"]["sessionId"].as_str().unwrap().to_string();
    // The one command announcement may come just before or after the answer.
    let (after, answer) = prompt(&mut k, "p1", &session, "hi");
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    let all: Vec<Value> = before.iter().chain(after.iter()).cloned().collect();
    let commands = of_kind(&all, "available_commands_update");
    assert_eq!(commands.len(), 1, "{all:?}");
    let names: Vec<&str> =
        commands[0]["availableCommands"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["init", "compact", "clear", "yolo", "afk", "plan", "add-dir", "export", "import"]);
    let known = [
        "user_message_chunk",
        "agent_message_chunk",
        "agent_thought_chunk",
        "tool_call",
        "tool_call_update",
        "plan",
        "available_commands_update",
        "current_mode_update",
    ];
    for update in updates(&all) {
        assert!(known.contains(&update["sessionUpdate"].as_str().unwrap()), "{update}");
    }
    // The same turn's usage reaches a client of the current schema (it sends `auth`).
    let mut k = Kiwi::spawn(env.acp_command(&config, &[]));
    let (_, init) = k.call("init", "initialize", json!({"protocolVersion": 1, "clientCapabilities": {"auth": {}}}));
    assert!(init["result"]["agentCapabilities"].get("_meta").is_none(), "{init}");
    let (session, _) = new_session(&mut k, &work);
    let (during, _) = prompt(&mut k, "p1", &session, "hi");
    assert_eq!(of_kind(&during, "usage_update").len(), 1, "{during:?}");
}

/// Each mode drives the core's approval state for this connection; nothing of it is saved.
#[test]
fn modes_drive_approvals_and_are_never_saved() {
    let env = Env::new();
    let work = env.work();
    let config = env.scripted_config(&[
        &tool_call("s1", "Shell", json!({"command": "echo yolo"})),
        "text: ran",
        &tool_call("w1", "WriteFile", json!({"path": "inside.txt", "content": "x"})),
        &tool_call("s2", "Shell", json!({"command": "echo asks"})),
        "text: done",
    ]);
    let mut k = acp(&env, &config);
    let (session, answer) = new_session(&mut k, &work);
    let ids: Vec<&str> =
        answer["modes"]["availableModes"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["default", "acceptEdits", "plan", "yolo"]);
    assert_eq!(answer["modes"]["currentModeId"], "default");
    assert_eq!(answer["configOptions"][0]["id"], "mode");
    assert_eq!(answer["configOptions"][0]["currentValue"], "default");

    let (before, r) = k.call("m1", "session/set_mode", json!({"sessionId": session, "modeId": "yolo"}));
    assert!(r.get("result").is_some(), "{r}");
    let modes = of_kind(&before, "current_mode_update");
    assert_eq!(modes.len(), 1, "{before:?}");
    assert_eq!(modes[0]["currentModeId"], "yolo");
    let options = of_kind(&before, "config_option_update");
    assert_eq!(options[0]["configOptions"][0]["currentValue"], "yolo", "{before:?}");
    // Yolo: the command runs without a permission request.
    let (during, r) = prompt(&mut k, "p1", &session, "run it");
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert_eq!(permission_requests(&during), 0, "{during:?}");
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(env.session_dir(&session).join("state.json")).unwrap()).unwrap();
    assert_eq!(state["approval"]["yolo"], false, "a mode is never saved as if the user typed /yolo");

    // acceptEdits, through the config option: the edit inside the work dir passes, Shell asks.
    let (before, r) = k.call(
        "m2",
        "session/set_config_option",
        json!({"sessionId": session, "configId": "mode", "value": "acceptEdits"}),
    );
    assert_eq!(r["result"]["configOptions"][0]["currentValue"], "acceptEdits", "{r}");
    assert_eq!(of_kind(&before, "current_mode_update")[0]["currentModeId"], "acceptEdits");
    k.send(json!({"jsonrpc": "2.0", "id": "p2", "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "edit"}]}}));
    let mut seen = Vec::new();
    let asked = loop {
        let m = k.next();
        if m["method"] == "session/request_permission" {
            break m;
        }
        seen.push(m);
    };
    assert_eq!(std::fs::read_to_string(work.join("inside.txt")).unwrap(), "x", "the edit ran unasked");
    assert!(asked["params"]["toolCall"]["title"].as_str().unwrap().contains("echo asks"), "{asked}");
    k.send(json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"outcome": {"outcome": "selected", "optionId": "reject"}}}));
    let (_, r) = k.until_response(&json!("p2"));
    assert!(r.get("result").is_some(), "{r}");

    // Back to default; a mode we do not offer is refused.
    let (before, _) = k.call("m3", "session/set_mode", json!({"sessionId": session, "modeId": "default"}));
    assert_eq!(of_kind(&before, "current_mode_update")[0]["currentModeId"], "default");
    let (_, r) = k.call("m4", "session/set_mode", json!({"sessionId": session, "modeId": "bypassPermissions"}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let (_, r) =
        k.call("m5", "session/set_config_option", json!({"sessionId": session, "configId": "mode", "value": "nope"}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(env.session_dir(&session).join("state.json")).unwrap()).unwrap();
    assert_eq!(state["approval"], json!({"yolo": false, "afk": false, "auto_approve_actions": []}));
}

/// `/yolo` typed in the session and the first turn's title reach the client as updates.
#[test]
fn changes_from_inside_the_session_are_announced() {
    let env = Env::new();
    let work = env.work();
    let config = env.scripted_config(&["text: hello"]);
    let mut k = acp(&env, &config);
    let (session, _) = new_session(&mut k, &work);
    let (during, r) = prompt(&mut k, "p1", &session, "say   hello please");
    assert_eq!(r["result"]["stopReason"], "end_turn");
    let info = of_kind(&during, "session_info_update");
    assert_eq!(info.len(), 1, "{during:?}");
    assert_eq!(info[0]["title"], "say hello please");
    let (during, _) = prompt(&mut k, "p2", &session, "/yolo");
    assert_eq!(of_kind(&during, "current_mode_update")[0]["currentModeId"], "yolo", "{during:?}");
    assert_eq!(of_kind(&during, "config_option_update")[0]["configOptions"][0]["currentValue"], "yolo");
    assert!(of_kind(&during, "session_info_update").is_empty(), "the title did not change");
}

/// A prompt sent while a turn runs waits for it and then runs; a cancel answers the queued
/// ones `cancelled`.
#[test]
fn a_prompt_during_a_turn_is_queued() {
    let env = Env::new();
    let work = env.work();
    let config = env.scripted_config(&[
        &tool_call("s1", "Shell", json!({"command": "echo one"})),
        "text: first done",
        "text: second done",
        &tool_call("s2", "Shell", json!({"command": "echo three"})),
    ]);
    let mut k = acp(&env, &config);
    let (session, _) = new_session(&mut k, &work);
    let send_prompt = |k: &mut Kiwi, id: &str, text: &str| {
        k.send(json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": text}]}}));
    };
    send_prompt(&mut k, "p1", "first");
    let asked = loop {
        let m = k.next();
        if m["method"] == "session/request_permission" {
            break m;
        }
    };
    send_prompt(&mut k, "p2", "second");
    k.send(json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"outcome": {"outcome": "selected", "optionId": "approve"}}}));
    let (_, first) = k.until_response(&json!("p1"));
    assert_eq!(first["result"]["stopReason"], "end_turn", "{first}");
    let (during, second) = k.until_response(&json!("p2"));
    assert_eq!(second["result"]["stopReason"], "end_turn", "{second}");
    let text: String = of_kind(&during, "agent_message_chunk")
        .iter()
        .map(|u| u["content"]["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(text, "second done");
    // A third turn asks; a fourth waits; the cancel answers both.
    send_prompt(&mut k, "p3", "third");
    loop {
        if k.next()["method"] == "session/request_permission" {
            break;
        }
    }
    send_prompt(&mut k, "p4", "fourth");
    k.send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}));
    let (_, fourth) = k.until_response(&json!("p4"));
    assert_eq!(fourth["result"]["stopReason"], "cancelled", "{fourth}");
    let (_, third) = k.until_response(&json!("p3"));
    assert_eq!(third["result"]["stopReason"], "cancelled", "{third}");
}

fn turn_begins(wire: &Path) -> Vec<String> {
    std::fs::read_to_string(wire)
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["message"]["type"] == "TurnBegin")
        .map(|v| v["message"]["payload"]["user_input"].as_str().unwrap_or("").to_string())
        .collect()
}

/// `session/fork`: a new session with the history, independent afterwards; errors are typed.
#[test]
fn session_fork_copies_the_history_into_a_new_session() {
    let env = Env::new();
    let work = env.work();
    let config = env.scripted_config(&["text: re one", "text: re two", "text: in the fork", "text: in the source"]);
    let mut k = acp(&env, &config);
    let (source, _) = new_session(&mut k, &work);
    prompt(&mut k, "p1", &source, "one");
    prompt(&mut k, "p2", &source, "two");
    let (before, r) = k.call("f1", "session/fork", json!({"sessionId": source, "cwd": work, "mcpServers": []}));
    let fork = r["result"]["sessionId"].as_str().expect("forked").to_string();
    assert_ne!(fork, source);
    assert_eq!(r["result"]["modes"]["currentModeId"], "default");
    let info = of_kind(&before, "session_info_update");
    assert!(info.is_empty(), "the title comes after the answer: {before:?}");
    let next = k.next();
    let next = if next["params"]["update"]["sessionUpdate"] == "available_commands_update" { k.next() } else { next };
    assert_eq!(next["params"]["update"]["title"], "Fork: one", "{next}");
    assert_eq!(turn_begins(&env.session_dir(&fork).join("wire.jsonl")), ["one", "two"]);
    // The fork's context holds both turns; each session goes on on its own.
    let context = std::fs::read_to_string(env.session_dir(&fork).join("context.jsonl")).unwrap();
    assert!(context.contains("re two"), "{context}");
    prompt(&mut k, "p3", &fork, "three");
    prompt(&mut k, "p4", &source, "four");
    assert_eq!(turn_begins(&env.session_dir(&fork).join("wire.jsonl")), ["one", "two", "three"]);
    assert_eq!(turn_begins(&env.session_dir(&source).join("wire.jsonl")), ["one", "two", "four"]);
    // After one turn, by `_meta.turnIndex`.
    let (_, r) = k.call("f2", "session/fork", json!({"sessionId": source, "cwd": work, "_meta": {"turnIndex": 0}}));
    let early = r["result"]["sessionId"].as_str().unwrap().to_string();
    assert_eq!(turn_begins(&env.session_dir(&early).join("wire.jsonl")), ["one"]);
    let context = std::fs::read_to_string(env.session_dir(&early).join("context.jsonl")).unwrap();
    assert!(context.contains("re one") && !context.contains("re two"), "{context}");
    let (_, r) = k.call("f3", "session/fork", json!({"sessionId": source, "cwd": work, "_meta": {"turnIndex": 9}}));
    assert_eq!(
        (r["error"]["code"].clone(), r["error"]["message"].clone()),
        (json!(-32602), json!("Invalid params")),
        "{r}"
    );
    assert!(r.to_string().contains("turn_index 9 out of range (max turn: 2)"), "{r}");
    let (_, r) = k.call("f4", "session/fork", json!({"sessionId": "no-such-session", "cwd": work}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let (_, r) = k.call("f5", "session/fork", json!({"cwd": work}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    // A new session without turns has nothing to fork.
    let (empty, _) = new_session(&mut k, &work);
    let (_, r) = k.call("f6", "session/fork", json!({"sessionId": empty, "cwd": work}));
    assert!(r.to_string().contains("wire.jsonl not found"), "{r}");
}

/// The wire's `fork` extension (advertised in `initialize`) and `/fork`.
#[test]
fn wire_fork_extension_and_the_fork_command() {
    let env = Env::new();
    let config = env.scripted_config(&["text: re one", "text: re two"]);
    let mut k = env.spawn(&config, &["--session", "wire-fork-src"]);
    let (_, init) = k.call("init", "initialize", json!({"protocol_version": "1.10", "extensions": ["fork", "undo"]}));
    assert_eq!(init["result"]["extensions"], json!(["fork", "undo"]), "{init}");
    let (_, r) = k.call("f0", "fork", json!({}));
    assert_eq!(r["error"]["message"], "wire.jsonl not found", "{r}");
    k.prompt("p1", json!("one"));
    k.prompt("p2", json!("two"));
    let (_, r) = k.call("f1", "fork", json!({"turn_index": 0}));
    let id = r["result"]["session_id"].as_str().expect("forked").to_string();
    assert_eq!(r["result"]["title"], "Fork: one");
    assert_eq!(turn_begins(&env.session_dir(&id).join("wire.jsonl")), ["one"]);
    let (_, r) = k.call("f2", "fork", json!({"turn_index": 5}));
    assert_eq!(r["error"]["code"], -32602);
    assert_eq!(r["error"]["message"], "turn_index 5 out of range (max turn: 1)");
    let (_, r) = k.call("f3", "fork", json!({"turn_index": "x"}));
    assert_eq!(r["error"]["message"], "Invalid parameters for method `fork`");
    let (events, _) = k.prompt("p3", json!("/fork"));
    let said: String = events
        .iter()
        .filter(|m| m["params"]["type"] == "ContentPart")
        .map(|m| m["params"]["payload"]["text"].as_str().unwrap_or("").to_string())
        .collect();
    let id = said.strip_prefix("Forked into session ").and_then(|r| r.split(' ').next()).expect(&said).to_string();
    assert_eq!(turn_begins(&env.session_dir(&id).join("wire.jsonl")), ["one", "two"], "{said}");
}

/// Without a `cwd`, `session/list` lists every work dir's sessions, newest first, in pages.
#[test]
fn session_list_without_cwd_spans_work_dirs() {
    let env = Env::new();
    let config = env.scripted_config(&["text: a", "text: b"]);
    let (first, second) = (env.work().join("first"), env.work().join("second"));
    std::fs::create_dir_all(&first).unwrap();
    std::fs::create_dir_all(&second).unwrap();
    let mut k = acp(&env, &config);
    let (a, _) = new_session(&mut k, &first);
    prompt(&mut k, "p1", &a, "in first");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let (b, _) = new_session(&mut k, &second);
    prompt(&mut k, "p2", &b, "in second");
    let (_, r) = k.call("l1", "session/list", json!({}));
    let listed: Vec<(String, String)> = r["result"]["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["sessionId"].as_str().unwrap().to_string(), s["cwd"].as_str().unwrap().to_string()))
        .collect();
    assert!(listed.len() >= 2, "{r}");
    assert_eq!(listed[0], (b.clone(), second.display().to_string()), "{r}");
    assert_eq!(listed[1], (a.clone(), first.display().to_string()), "{r}");
    assert!(r["result"].get("nextCursor").is_none_or(Value::is_null), "{r}");
    let (_, r) = k.call("l2", "session/list", json!({"cwd": first}));
    assert_eq!(r["result"]["sessions"].as_array().unwrap().len(), 1, "{r}");
    let (_, r) = k.call("l3", "session/list", json!({"cursor": "not-a-cursor"}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    // Pages of 50: 60 more sessions stored in `first` make a second page.
    let key = {
        use md5::{Digest, Md5};
        Md5::digest(first.display().to_string().as_bytes()).iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    for n in 0..60 {
        let dir = env.share().join("sessions").join(&key).join(format!("00000000-0000-4000-8000-{n:012}"));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("context.jsonl"), "").unwrap();
    }
    let (_, r) = k.call("l4", "session/list", json!({}));
    assert_eq!(r["result"]["sessions"].as_array().unwrap().len(), 50);
    let cursor = r["result"]["nextCursor"].as_str().expect("a next page").to_string();
    let (_, r) = k.call("l5", "session/list", json!({"cursor": cursor}));
    assert_eq!(r["result"]["sessions"].as_array().unwrap().len(), 12, "{r}");
    assert!(r["result"].get("nextCursor").is_none_or(Value::is_null));
}

/// A client of the newest schema: it sends `session` (booleans for config options) and `auth`.
fn newest(env: &Env, config: &Path) -> (Kiwi, Value) {
    let mut k = Kiwi::spawn(env.acp_command(config, &[]));
    let caps = json!({"auth": {"terminal": false}, "session": {"configOptions": {"boolean": {}}}});
    let (_, init) = k.call("init", "initialize", json!({"protocolVersion": 1, "clientCapabilities": caps}));
    (k, init["result"].clone())
}

fn option<'a>(options: &'a Value, id: &str) -> &'a Value {
    options.as_array().unwrap().iter().find(|o| o["id"] == id).unwrap_or_else(|| panic!("no `{id}` in {options}"))
}

/// `docs/compatibility.md`: ACP's newer stable surface reaches a client whose schema has it
/// (`delete`, `additionalDirectories`, `logout` advertised; `messageId` on every chunk, one per
/// message; the turn's `usage` in the prompt's answer; `thinking` as a boolean option for a
/// client that takes booleans), and none of it reaches one as old as the 0.4 SDK.
#[test]
fn the_newer_stable_surface_reaches_only_clients_that_take_it() {
    let env = Env::new();
    let work = env.work();
    let config = env.scripted_config(&[
        "usage: {\"input_other\": 5, \"output\": 2, \"input_cache_read\": 3}\nthink: hm\ntext: hel",
        "text: old",
    ]);
    let (mut k, init) = newest(&env, &config);
    let caps = &init["agentCapabilities"];
    assert_eq!(
        caps["sessionCapabilities"],
        json!({"list": {}, "delete": {}, "additionalDirectories": {}, "resume": {}, "close": {}, "fork": {}}),
        "{init}"
    );
    assert_eq!(caps["auth"], json!({"logout": {}}), "{init}");
    let (session, answer) = new_session(&mut k, &work);
    assert_eq!(
        option(&answer["configOptions"], "thinking"),
        &json!({"id": "thinking", "name": "Thinking", "category": "thought_level", "type": "boolean", "currentValue": false})
    );
    let (during, answer) = prompt(&mut k, "p1", &session, "hi");
    assert_eq!(
        answer["result"],
        json!({"stopReason": "end_turn", "usage": {"totalTokens": 10, "inputTokens": 5, "outputTokens": 2,
            "cachedReadTokens": 3, "cachedWriteTokens": 0}}),
        "{answer}"
    );
    let chunks: Vec<Value> =
        updates(&during).into_iter().filter(|u| u["sessionUpdate"].as_str().unwrap().ends_with("_chunk")).collect();
    assert_eq!(chunks.len(), 2, "{during:?}");
    let id = chunks[0]["messageId"].as_str().expect("a message id");
    assert!(chunks.iter().all(|c| c["messageId"] == id), "one step is one message: {chunks:?}");

    // A boolean sets the boolean option; bad values are refused and change nothing.
    let set = |value: Value| json!({"sessionId": session, "configId": "thinking", "type": "boolean", "value": value});
    let (_, r) = k.call("c1", "session/set_config_option", set(json!(true)));
    assert_eq!(option(&r["result"]["configOptions"], "thinking")["currentValue"], true, "{r}");
    let (_, r) = k.call("c2", "session/set_config_option", set(json!("maybe")));
    assert_eq!((r["error"]["code"].clone(), r["error"]["message"].clone()), (json!(-32602), json!("Invalid params")));
    let (_, r) = k.call(
        "c3",
        "session/set_config_option",
        json!({"sessionId": session, "configId": "thinking", "type": "boolean"}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let (_, r) = k.call(
        "c4",
        "session/set_config_option",
        json!({"sessionId": session, "configId": "model", "type": "boolean", "value": true}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(r["error"]["data"]["error"].as_str().unwrap().contains("select option"), "{r}");
    let (_, r) = k.call(
        "c5",
        "session/set_config_option",
        json!({"sessionId": "nope", "configId": "thinking", "type": "boolean", "value": false}),
    );
    assert_eq!(r["error"]["data"], json!({"session_id": "Session not found"}), "{r}");
    // The select form still works for thinking.
    let (_, r) = k.call(
        "c6",
        "session/set_config_option",
        json!({"sessionId": session, "configId": "thinking", "value": "off"}),
    );
    assert_eq!(option(&r["result"]["configOptions"], "thinking")["currentValue"], false, "{r}");
    drop(k);

    // A client as old as the 0.4 SDK: the same kind of turn, none of it.
    let mut k = Kiwi::spawn(env.acp_command(&config, &[]));
    let (_, init) = k.call("init", "initialize", json!({"protocolVersion": 1, "clientCapabilities": {"fs": {}}}));
    let caps = &init["result"]["agentCapabilities"];
    assert!(caps["sessionCapabilities"].get("delete").is_none() && caps["auth"] == json!({}), "{init}");
    let (_, r) = k.call("l", "session/load", json!({"sessionId": session, "cwd": work, "mcpServers": []}));
    assert_eq!(option(&r["result"]["configOptions"], "thinking")["type"], "select", "{r}");
    let (during, answer) = prompt(&mut k, "p2", &session, "again");
    assert_eq!(answer["result"], json!({"stopReason": "end_turn"}), "{answer}");
    assert!(updates(&during).iter().all(|u| u.get("messageId").is_none()), "{during:?}");
}

/// `session/load` replays each user message under one id of its own, and a newer client's loaded
/// chunks carry ids like live ones.
#[test]
fn a_replayed_user_message_is_one_message() {
    let env = Env::new();
    let work = env.work();
    let config = env.scripted_config(&["text: one", "text: two"]);
    let (mut k, _) = newest(&env, &config);
    let (session, _) = new_session(&mut k, &work);
    prompt(&mut k, "p1", &session, "first");
    prompt(&mut k, "p2", &session, "second");
    drop(k);
    let (mut k, _) = newest(&env, &config);
    let (replayed, r) = k.call("l", "session/load", json!({"sessionId": session, "cwd": work, "mcpServers": []}));
    assert!(r.get("result").is_some(), "{r}");
    let users = of_kind(&replayed, "user_message_chunk");
    let agents = of_kind(&replayed, "agent_message_chunk");
    assert_eq!((users.len(), agents.len()), (2, 2), "{replayed:?}");
    let ids: Vec<&str> = users.iter().chain(agents.iter()).map(|c| c["messageId"].as_str().unwrap()).collect();
    let distinct: std::collections::HashSet<&&str> = ids.iter().collect();
    assert_eq!(distinct.len(), 4, "every message its own id: {ids:?}");
}

/// Reads until kiwi asks for a permission; returns the request.
fn until_permission(k: &mut Kiwi) -> Value {
    loop {
        let m = k.next();
        if m["method"] == "session/request_permission" {
            return m;
        }
    }
}

/// `session/delete`: the folder goes and the listing forgets it; a running session, an unknown
/// one and one another process has open are refused; a deleted session cannot be loaded.
#[test]
fn session_delete_removes_the_session_and_refuses_a_running_one() {
    let env = Env::new();
    let work = env.work();
    // Each session plays the scripts from the start: the stored one ends its turn, the other
    // waits for a permission.
    let stored_config = env.named_scripted_config("stored", &["text: kept"], json!({}));
    let (mut k, _) = newest(&env, &stored_config);
    let (done, _) = new_session(&mut k, &work);
    prompt(&mut k, "p1", &done, "finish");
    drop(k);
    let config = env.scripted_config(&[&tool_call("s1", "Shell", json!({"command": "echo hi"})), "text: never"]);
    let (mut k, _) = newest(&env, &config);
    let (running, _) = new_session(&mut k, &work);
    k.send(json!({"jsonrpc": "2.0", "id": "p2", "method": "session/prompt",
        "params": {"sessionId": running, "prompt": [{"type": "text", "text": "run"}]}}));
    let asked = until_permission(&mut k);
    let (_, r) = k.call("d1", "session/delete", json!({"sessionId": running}));
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert!(r["error"]["data"]["error"].as_str().unwrap().contains("a prompt is running"), "{r}");
    assert!(env.session_dir(&running).exists());
    k.send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": running}}));
    k.send(json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"outcome": {"outcome": "cancelled"}}}));
    let (_, r) = k.until_response(&json!("p2"));
    assert_eq!(r["result"]["stopReason"], "cancelled", "{r}");

    // Stored, not open here: deleted.
    let (_, r) = k.call("d2", "session/delete", json!({"sessionId": done}));
    assert_eq!(r["result"], json!({}), "{r}");
    assert!(!env.session_dir(&done).exists());
    let (_, r) = k.call("ls", "session/list", json!({"cwd": work}));
    let listed: Vec<&str> =
        r["result"]["sessions"].as_array().unwrap().iter().map(|s| s["sessionId"].as_str().unwrap()).collect();
    assert_eq!(listed, [running.as_str()], "{r}");
    let (_, r) = k.call("l1", "session/load", json!({"sessionId": done, "cwd": work, "mcpServers": []}));
    assert_eq!(r["error"]["data"], json!({"session_id": "Session not found"}), "{r}");
    for (id, params) in [("d3", json!({"sessionId": done})), ("d4", json!({"sessionId": "not-a-session"}))] {
        let (_, r) = k.call(id, "session/delete", params);
        let error = (r["error"]["code"].clone(), r["error"]["data"].clone());
        assert_eq!(error, (json!(-32002), json!({"session_id": "Session not found"})), "{r}");
        assert_eq!(r["error"]["message"], "Resource not found");
    }
    let (_, r) = k.call("d5", "session/delete", json!({}));
    assert_eq!(r["error"]["code"], -32602, "{r}");

    // Open here and idle: closed, then deleted; it is gone for this connection too.
    let (_, r) = k.call("d6", "session/delete", json!({"sessionId": running}));
    assert_eq!(r["result"], json!({}), "{r}");
    assert!(!env.session_dir(&running).exists());
    let (_, r) =
        k.call("p3", "session/prompt", json!({"sessionId": running, "prompt": [{"type": "text", "text": "x"}]}));
    assert_eq!(r["error"]["data"], json!({"session_id": "Session not found"}), "{r}");

    // Open in another process: refused; once that process is gone, deleted from here.
    let (mut other, _) = newest(&env, &stored_config);
    let (theirs, _) = new_session(&mut other, &work);
    prompt(&mut other, "p4", &theirs, "theirs");
    let (_, r) = k.call("d7", "session/delete", json!({"sessionId": theirs}));
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert!(r["error"]["data"]["error"].as_str().unwrap().contains("another process"), "{r}");
    drop(other);
    let (_, r) = k.call("d8", "session/delete", json!({"sessionId": theirs}));
    assert_eq!(r["result"], json!({}), "{r}");
    assert!(!env.session_dir(&theirs).exists());
}

/// `additionalDirectories` (`docs/acp.md` §4.4) adds to the session's workspace as `--add-dir`
/// does (saved with the session); paths that are not absolute directories are refused.
#[test]
fn additional_directories_join_the_workspace() {
    let env = Env::new();
    let work = env.work().join("project");
    let (extra, later) = (env.work().join("extra"), env.work().join("later"));
    for dir in [&work, &extra, &later] {
        std::fs::create_dir_all(dir).unwrap();
    }
    let config = env.scripted_config(&["text: ok"]);
    let state_dirs = |id: &str| {
        let key = {
            use md5::{Digest, Md5};
            Md5::digest(work.display().to_string().as_bytes()).iter().map(|b| format!("{b:02x}")).collect::<String>()
        };
        let state =
            std::fs::read_to_string(env.share().join("sessions").join(key).join(id).join("state.json")).unwrap();
        serde_json::from_str::<Value>(&state).unwrap()["additional_dirs"].clone()
    };
    let (mut k, _) = newest(&env, &config);
    let new = |dirs: Value| json!({"cwd": work, "mcpServers": [], "additionalDirectories": dirs});
    let (_, r) = k.call("n1", "session/new", new(json!([extra])));
    let session = r["result"]["sessionId"].as_str().expect("a session").to_string();
    prompt(&mut k, "p1", &session, "hi");
    assert_eq!(state_dirs(&session), json!([extra]));
    for (id, dirs, says) in
        [("n2", json!(["relative/dir"]), "absolute"), ("n3", json!([env.work().join("missing")]), "not a directory")]
    {
        let (_, r) = k.call(id, "session/new", new(dirs));
        assert_eq!(r["error"]["code"], -32602, "{r}");
        assert!(r["error"]["data"]["error"].as_str().unwrap().contains(says), "{r}");
    }
    // Open here already: a directory outside its workspace is refused, one inside is fine.
    let resume = |dirs: Value| json!({"sessionId": session, "cwd": work, "additionalDirectories": dirs});
    let (_, r) = k.call("r1", "session/resume", resume(json!([later])));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let (_, r) = k.call("r2", "session/resume", resume(json!([extra])));
    assert!(r.get("result").is_some(), "{r}");
    drop(k);
    // Loaded in a new process: the new directory joins the saved one.
    let (mut k, _) = newest(&env, &config);
    let (_, r) = k.call(
        "l1",
        "session/load",
        json!({"sessionId": session, "cwd": work, "mcpServers": [],
        "additionalDirectories": [later]}),
    );
    assert!(r.get("result").is_some(), "{r}");
    assert_eq!(state_dirs(&session), json!([extra, later]));
    // `session/list` reports them to this client, not to one as old as the 0.4 SDK.
    let (_, r) = k.call("ls", "session/list", json!({"cwd": work}));
    assert_eq!(r["result"]["sessions"][0]["additionalDirectories"], json!([extra, later]), "{r}");
    drop(k);
    let mut old = Kiwi::spawn(env.acp_command(&config, &[]));
    old.call("init", "initialize", json!({"protocolVersion": 1, "clientCapabilities": {}}));
    let (_, r) = old.call("ls", "session/list", json!({"cwd": work}));
    assert!(r["result"]["sessions"][0].get("additionalDirectories").is_none(), "{r}");
}

/// `logout` does what `kiwi logout` does: the stored login goes, and the managed provider and
/// its models leave the default config (the user's own model stays); twice is fine; a config
/// that cannot be read is a clear error.
#[test]
fn logout_removes_the_login_as_kiwi_logout_does() {
    let env = Env::new();
    let config = env.scripted_config(&["text: ok"]);
    let credentials = env.share().join("credentials");
    std::fs::create_dir_all(&credentials).unwrap();
    let login = credentials.join("kimi-code.json");
    std::fs::write(&login, r#"{"access_token":"a","refresh_token":"r","expires_at":1.0,"scope":"","token_type":"Bearer","expires_in":1.0}"#).unwrap();
    let default_config = env.share().join("config.toml");
    std::fs::write(
        &default_config,
        "default_model = \"kimi-code/k\"\n\n[models.\"kimi-code/k\"]\nprovider = \"managed:kimi-code\"\nmodel = \"k\"\nmax_context_size = 1\n\n\
         [models.mine]\nprovider = \"p\"\nmodel = \"m\"\nmax_context_size = 1\n\n\
         [providers.\"managed:kimi-code\"]\ntype = \"kimi\"\nbase_url = \"u\"\napi_key = \"\"\n\n\
         [providers.p]\ntype = \"kimi\"\nbase_url = \"u\"\napi_key = \"k\"\n",
    )
    .unwrap();
    let (mut k, _) = newest(&env, &config);
    let (_, r) = k.call("o1", "logout", json!({}));
    assert_eq!(r["result"], json!({}), "{r}");
    assert!(!login.exists());
    let saved: toml::Table = toml::from_str(&std::fs::read_to_string(&default_config).unwrap()).unwrap();
    assert_eq!(saved["default_model"].as_str(), Some(""));
    assert_eq!(saved["models"].as_table().unwrap().keys().collect::<Vec<_>>(), ["mine"]);
    assert_eq!(saved["providers"].as_table().unwrap().keys().collect::<Vec<_>>(), ["p"]);
    let (_, r) = k.call("o2", "logout", json!(null));
    assert_eq!(r["result"], json!({}), "logging out twice is fine: {r}");
    std::fs::write(&default_config, "default_model = [").unwrap();
    let (_, r) = k.call("o3", "logout", json!({}));
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert!(r["error"]["data"]["error"].as_str().unwrap().starts_with("Logout failed: "), "{r}");
    // The server goes on serving.
    let (session, _) = new_session(&mut k, &env.work());
    assert_eq!(prompt(&mut k, "p1", &session, "hi").1["result"]["stopReason"], "end_turn");
}
