//! The Claude Agent SDK's session APIs in the Claude dialect, driven as raw processes
//! (`docs/print-mode.md`, "Session APIs"): `--fork-session`, `--resume-session-at` with
//! `--resume-drops-turn`, `rewind_files`, `mcp_toggle` and `mcp_reconnect`, and their bad input.
//! The pinned Python SDK drives the same in `print_sdk` (tests/print_sdk/check.py).

use crate::common;
use crate::mcp;
use crate::print_support;

use common::Kiwi;
use print_support::{Dirs, run};
use serde_json::{Value, json};

const STREAM: &[&str] = &["-p", "--verbose", "--output-format", "stream-json"];
const SDK: &[&str] =
    &["--output-format", "stream-json", "--verbose", "--system-prompt", "", "--input-format", "stream-json"];
const CHECKPOINTS: &str = "CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING";

fn args<'a>(base: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(more).copied().collect()
}

fn user(text: &str) -> String {
    json!({"type":"user","message":{"role":"user","content":text},"parent_tool_use_id":null,"session_id":""})
        .to_string()
}

fn control(id: &str, request: Value) -> String {
    json!({"type":"control_request","request_id":id,"request":request}).to_string()
}

fn call(id: &str, name: &str, arguments: Value) -> String {
    format!("tool_call: {}", json!({"id": id, "name": name, "arguments": arguments.to_string()}))
}

fn context_of(d: &Dirs, id: &str) -> String {
    std::fs::read_to_string(print_support::session_dir(d, id).join("context.jsonl")).unwrap()
}

fn turns_of(d: &Dirs, id: &str) -> usize {
    let wire = std::fs::read_to_string(print_support::session_dir(d, id).join("wire.jsonl")).unwrap();
    wire.matches("\"TurnBegin\"").count()
}

/// Reads lines until the control response `id`; its `response`.
fn response(k: &mut Kiwi, id: &str) -> Value {
    loop {
        let m = k.next();
        if m["type"] == "control_response" && m["response"]["request_id"] == id {
            return m["response"].clone();
        }
    }
}

/// One turn of an SDK-style run: the replayed prompt's uuid, the turn's assistant uuids, its result.
fn turn(k: &mut Kiwi, text: &str) -> (String, Vec<String>, Value) {
    k.send_raw(&user(text));
    let (mut prompt, mut assistant) = (String::new(), Vec::new());
    loop {
        let m = k.next();
        match m["type"].as_str() {
            Some("user") if m["isReplay"] == true => prompt = m["uuid"].as_str().unwrap().to_string(),
            Some("assistant") => assistant.push(m["uuid"].as_str().unwrap().to_string()),
            Some("result") => return (prompt, assistant, m),
            _ => {}
        }
    }
}

/// A session of three one-line turns (prompts `one`, `two`, `three`); its id, and per turn the
/// prompt's uuid and the last assistant line's uuid.
fn three_turns(d: &Dirs) -> (String, Vec<(String, String)>) {
    let config = d.scripted(&["text: answer one", "text: answer two", "text: answer three"]);
    let mut k = Kiwi::spawn(d.command(&config, &args(SDK, &["--replay-user-messages"])));
    let mut turns = Vec::new();
    let mut id = String::new();
    for text in ["one", "two", "three"] {
        let (prompt, assistant, result) = turn(&mut k, text);
        assert_eq!(result["is_error"], false, "{result}");
        id = result["session_id"].as_str().unwrap().to_string();
        turns.push((prompt, assistant.last().unwrap().clone()));
    }
    k.close_stdin();
    assert!(k.wait_exit(common::TIMEOUT).is_some_and(|s| s.success()));
    (id, turns)
}

#[test]
fn fork_session_continues_a_copy_of_the_resumed_session() {
    let d = Dirs::new();
    let config = d.scripted(&["text: from the source"]);
    let r = run(d.command(&config, &args(STREAM, &["first"])), "");
    let source = r.lines()[0]["session_id"].as_str().unwrap().to_string();
    let config = d.scripted(&["text: in the fork"]);
    let r = run(d.command(&config, &args(STREAM, &[&format!("--resume={source}"), "--fork-session", "second"])), "");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let lines = r.lines();
    let fork = lines[0]["session_id"].as_str().unwrap().to_string();
    assert_ne!(fork, source);
    assert!(
        lines.iter().all(|l| l.get("session_id").is_none_or(|s| s == fork.as_str())),
        "init and result name the fork"
    );
    let forked = context_of(&d, &fork);
    assert!(forked.contains("from the source") && forked.contains("in the fork"), "{forked}");
    assert!(!context_of(&d, &source).contains("second"), "the source is left as it was");
    assert_eq!((turns_of(&d, &source), turns_of(&d, &fork)), (1, 2));
    // Named by --session-id; that name is then taken.
    let config = d.scripted(&["text: named fork"]);
    let named = args(STREAM, &["--resume", &source, "--fork-session", "--session-id=my-fork", "third"]);
    let r = run(d.command(&config, &named), "");
    assert_eq!(r.lines()[0]["session_id"], "my-fork", "{}", r.stderr);
    let r = run(d.command(&config, &named), "");
    assert_eq!(r.code, Some(1));
    let errors = r.lines().last().unwrap()["errors"].to_string();
    assert!(errors.contains("Session ID my-fork is already in use."), "{errors}");
    // --continue forks the work dir's latest session.
    let config = d.scripted(&["text: continued fork"]);
    let r = run(d.command(&config, &args(STREAM, &["-c", "--fork-session", "fourth"])), "");
    let continued = r.lines()[0]["session_id"].as_str().unwrap().to_string();
    assert!(![source.as_str(), fork.as_str(), "my-fork"].contains(&continued.as_str()), "{continued}");
    // Without a session to resume it is a new session, as in Claude Code.
    let r = run(d.command(&config, &args(STREAM, &["--fork-session", "fresh"])), "");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
}

#[test]
fn fork_session_of_a_missing_session_is_refused() {
    let d = Dirs::new();
    let config = d.scripted(&["text: never"]);
    let r = run(d.command(&config, &args(STREAM, &["--resume", "no-such-session", "--fork-session", "q"])), "");
    assert_eq!(r.code, Some(1));
    let last = r.lines().last().unwrap().clone();
    assert_eq!(last["errors"], json!(["No conversation found with session ID: no-such-session"]), "{last}");
    // --session-id names a fork only: with --resume and no --fork-session it is refused.
    let r = run(d.command(&config, &args(STREAM, &["--resume", "a", "--session-id", "b", "q"])), "");
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.contains("Choose one of --continue, --resume and --session-id"), "{}", r.stderr);
}

#[test]
fn resume_session_at_keeps_the_history_up_to_that_message() {
    let d = Dirs::new();
    let (id, turns) = three_turns(&d);
    // A fork at the end of the first turn: the source keeps all three.
    let config = d.scripted(&["text: after one"]);
    let at = format!("--resume-session-at={}", turns[0].1);
    let r = run(d.command(&config, &args(STREAM, &["--resume", &id, &at, "--fork-session", "four"])), "");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let fork = r.lines()[0]["session_id"].as_str().unwrap().to_string();
    let context = context_of(&d, &fork);
    assert!(context.contains("answer one") && context.contains("after one"), "{context}");
    assert!(!context.contains("answer two") && !context.contains("answer three"), "{context}");
    assert_eq!((turns_of(&d, &id), turns_of(&d, &fork)), (3, 2));
    // The fork's own uuids are found too: resume it at its first turn again.
    let config = d.scripted(&["text: again"]);
    let at_fork = format!("--resume-session-at={}", turns[0].1);
    let r = run(d.command(&config, &args(STREAM, &["--resume", &fork, &at_fork, "five"])), "");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(turns_of(&d, &fork), 2);
    // In place, dropping exactly the last turn (declared by its prompt's uuid).
    let config = d.scripted(&["text: instead of three"]);
    let at = format!("--resume-session-at={}", turns[1].1);
    let drops = format!("--resume-drops-turn={}", turns[2].0);
    let r = run(d.command(&config, &args(STREAM, &["--resume", &id, &at, &drops, "three again"])), "");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.lines()[0]["session_id"], id.as_str());
    let context = context_of(&d, &id);
    assert!(context.contains("answer two") && context.contains("instead of three"), "{context}");
    assert!(!context.contains("answer three"), "{context}");
    assert_eq!(turns_of(&d, &id), 3);
}

#[test]
fn resume_session_at_refuses_points_it_cannot_serve() {
    let d = Dirs::new();
    let (id, turns) = three_turns(&d);
    let config = d.scripted(&["text: never"]);
    let refused = |extra: &[&str]| {
        let r = run(d.command(&config, &args(STREAM, &args(&["--resume", &id], &args(extra, &["q"])))), "");
        assert_eq!(r.code, Some(1), "{extra:?}: {}", r.stderr);
        let last = r.lines().last().unwrap().clone();
        assert_eq!(last["type"], "result");
        last["errors"][0].as_str().unwrap().to_string()
    };
    let e = refused(&["--resume-session-at=4f2c0b6e-0000-4000-8000-000000000000"]);
    assert_eq!(e, "No message found with message.uuid of: 4f2c0b6e-0000-4000-8000-000000000000");
    let at_prompt = format!("--resume-session-at={}", turns[1].0);
    let e = refused(&[&at_prompt]);
    assert!(e.starts_with("kiwi resumes a session only at the end of a turn"), "{e}");
    let at = format!("--resume-session-at={}", turns[0].1);
    // Two turns would go, but only one is declared.
    let e = refused(&[&at, &format!("--resume-drops-turn={}", turns[1].0)]);
    assert!(e.starts_with("Resume rejected by --resume-drops-turn: resuming at"), "{e}");
    assert!(e.contains("1 more turn(s)"), "{e}");
    // The wrong prompt.
    let e = refused(&[&at, &format!("--resume-drops-turn={}", turns[2].0)]);
    assert!(e.contains("range does not start with the declared turn prompt"), "{e}");
    let e = refused(&[&at, "--resume-drops-turn=not-a-uuid"]);
    assert!(e.contains("declared turn id is not a UUID: not-a-uuid"), "{e}");
    // Nothing was cut by the refusals.
    assert_eq!(turns_of(&d, &id), 3);
    // Usage errors, with Claude Code's texts.
    let r = run(d.command(&config, &args(STREAM, &[&at, "q"])), "");
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.contains("Error: --resume-session-at requires --resume"), "{}", r.stderr);
    let r = run(d.command(&config, &args(STREAM, &["--resume", &id, "--resume-drops-turn=x", "q"])), "");
    assert!(r.stderr.contains("Error: --resume-drops-turn requires --resume-session-at"), "{}", r.stderr);
}

#[test]
fn rewind_files_restores_kiwis_edits_since_a_user_message() {
    let d = Dirs::new();
    let a = d.work().join("a.txt");
    std::fs::write(&a, "original\n").unwrap();
    let scripts = [
        call("w1", "WriteFile", json!({"path": "a.txt", "content": "first edit\n"})),
        "text: edited".to_string(),
        format!(
            "{}\n{}",
            call("w2", "WriteFile", json!({"path": "a.txt", "content": "second edit\n"})),
            call("w3", "WriteFile", json!({"path": "b.txt", "content": "new\n"}))
        ),
        "text: edited again".to_string(),
        call("w4", "WriteFile", json!({"path": "a.txt", "content": "third edit\n"})),
        "text: and again".to_string(),
    ];
    let config = d.scripted(&scripts.iter().map(String::as_str).collect::<Vec<_>>());
    let mut cmd = d.command(&config, &args(SDK, &["--replay-user-messages", "--permission-mode", "bypassPermissions"]));
    cmd.env(CHECKPOINTS, "true");
    let mut k = Kiwi::spawn(cmd);
    let (first, _, _) = turn(&mut k, "edit a");
    let (second, _, _) = turn(&mut k, "edit both");
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "second edit\n");
    // Back to before the second prompt: a.txt as the first turn left it, b.txt gone.
    k.send_raw(&control("r1", json!({"subtype": "rewind_files", "user_message_id": second, "dry_run": true})));
    let dry = response(&mut k, "r1");
    assert_eq!(dry["response"]["canRewind"], true, "{dry}");
    assert_eq!(dry["response"]["filesChanged"].as_array().map(Vec::len), Some(2), "{dry}");
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "second edit\n", "a dry run changes nothing");
    k.send_raw(&control("r2", json!({"subtype": "rewind_files", "user_message_id": second})));
    let done = response(&mut k, "r2");
    assert_eq!(done["subtype"], "success", "{done}");
    assert_eq!(done["response"]["canRewind"], true, "{done}");
    assert!(done["response"].get("error").is_none(), "{done}");
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "first edit\n");
    assert!(!d.work().join("b.txt").exists());
    // The conversation goes on as it was; a rewind to the first prompt after another edit.
    let (_, _, result) = turn(&mut k, "edit once more");
    assert_eq!(result["result"], "and again");
    k.send_raw(&control("r3", json!({"subtype": "rewind_files", "user_message_id": first})));
    assert_eq!(response(&mut k, "r3")["response"]["canRewind"], true);
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "original\n");
    // Bad input: an unknown message, an assistant line's uuid, a missing id.
    for (id, request) in [
        ("x1", json!({"subtype": "rewind_files", "user_message_id": "4f2c0b6e-0000-4000-8000-000000000000"})),
        ("x2", json!({"subtype": "rewind_files", "user_message_id": result["uuid"]})),
    ] {
        k.send_raw(&control(id, request));
        let r = response(&mut k, id);
        assert_eq!(
            (r["subtype"].as_str(), r["error"].as_str()),
            (Some("error"), Some("No file checkpoint found for this message."))
        );
    }
    k.send_raw(&control("x3", json!({"subtype": "rewind_files"})));
    assert!(response(&mut k, "x3")["error"].as_str().unwrap().contains("user_message_id"));
    k.close_stdin();
    assert!(k.wait_exit(common::TIMEOUT).is_some());
}

#[test]
fn rewind_files_says_what_it_could_not_restore() {
    let d = Dirs::new();
    let scripts =
        [call("w1", "WriteFile", json!({"path": "a.txt", "content": "kiwi's\n"})), "text: written".to_string()];
    let config = d.scripted(&scripts.iter().map(String::as_str).collect::<Vec<_>>());
    let mut cmd = d.command(&config, &args(SDK, &["--replay-user-messages", "--permission-mode", "bypassPermissions"]));
    cmd.env(CHECKPOINTS, "1");
    let mut k = Kiwi::spawn(cmd);
    let (prompt, _, _) = turn(&mut k, "write a");
    // Someone else changed it since: it is left, and the rewind fails as a whole.
    std::fs::write(d.work().join("a.txt"), "mine\n").unwrap();
    k.send_raw(&control("r1", json!({"subtype": "rewind_files", "user_message_id": prompt})));
    let r = response(&mut k, "r1");
    let error = r["error"].as_str().unwrap_or_default();
    assert!(error.starts_with("Failed to rewind: not restored: ") && error.contains("a.txt"), "{r}");
    assert_eq!(std::fs::read_to_string(d.work().join("a.txt")).unwrap(), "mine\n");
    k.close_stdin();
    assert!(k.wait_exit(common::TIMEOUT).is_some());
    // Without the SDK's checkpointing option, Claude Code's refusal.
    let config = d.scripted(&["text: hi"]);
    let mut k = Kiwi::spawn(d.command(&config, SDK));
    k.send_raw(&control("r2", json!({"subtype": "rewind_files", "user_message_id": prompt})));
    assert_eq!(response(&mut k, "r2")["error"], "File rewinding is not enabled.");
    k.close_stdin();
    assert!(k.wait_exit(common::TIMEOUT).is_some());
}

#[test]
fn mcp_toggle_and_reconnect_act_on_the_sessions_servers() {
    let d = Dirs::new();
    let echo = |id: &str| call(id, "echo", json!({"text": "hi"}));
    let scripts = [echo("m1"), "text: one".into(), echo("m2"), "text: two".into(), echo("m3"), "text: three".into()];
    let config = d.scripted(&scripts.iter().map(String::as_str).collect::<Vec<_>>());
    let server = json!({"mcpServers": {"tester": {"type": "stdio", "command": mcp::test_server().to_str().unwrap()}}})
        .to_string();
    let mut k = Kiwi::spawn(d.command(
        &config,
        &args(SDK, &["--mcp-config", &server, "--strict-mcp-config", "--dangerously-skip-permissions"]),
    ));
    let tool_result = |k: &mut Kiwi, text: &str| {
        k.send_raw(&user(text));
        let mut found = None;
        loop {
            let m = k.next();
            if m["type"] == "user"
                && let Some(block) = m["message"]["content"].as_array().and_then(|c| c.first())
            {
                found = Some(block.clone());
            }
            if m["type"] == "result" {
                return found.expect("a tool result");
            }
        }
    };
    assert!(tool_result(&mut k, "call it").to_string().contains("pong:hi"));
    let status = |k: &mut Kiwi, id: &str| {
        k.send_raw(&control(id, json!({"subtype": "mcp_status"})));
        response(k, id)["response"]["mcpServers"].clone()
    };
    let of =
        |servers: &Value, name: &str| servers.as_array().unwrap().iter().find(|s| s["name"] == name).cloned().unwrap();
    // Off: no tool any more, `disabled` in the status; a reconnect is refused until it is on.
    k.send_raw(&control("t1", json!({"subtype": "mcp_toggle", "serverName": "tester", "enabled": false})));
    let off = response(&mut k, "t1");
    assert_eq!(off["subtype"], "success");
    assert!(off.get("response").is_none(), "an answer without a payload: {off}");
    assert_eq!(of(&status(&mut k, "s1"), "tester")["status"], "disabled");
    let result = tool_result(&mut k, "call it again");
    assert_eq!(result["is_error"], true, "{result}");
    k.send_raw(&control("c1", json!({"subtype": "mcp_reconnect", "serverName": "tester"})));
    assert_eq!(
        response(&mut k, "c1")["error"],
        "MCP server tester is disabled — enable it (mcp_toggle) before reconnecting"
    );
    // On again, then reconnected: connected, its tool served.
    k.send_raw(&control("t2", json!({"subtype": "mcp_toggle", "serverName": "tester", "enabled": true})));
    assert_eq!(response(&mut k, "t2")["subtype"], "success");
    k.send_raw(&control("c2", json!({"subtype": "mcp_reconnect", "serverName": "tester"})));
    assert_eq!(response(&mut k, "c2")["subtype"], "success");
    assert_eq!(of(&status(&mut k, "s2"), "tester")["status"], "connected");
    assert!(tool_result(&mut k, "and once more").to_string().contains("pong:hi"));
    // Bad input, with Claude Code's texts.
    let cases = [
        (json!({"subtype": "mcp_toggle", "serverName": "nope", "enabled": false}), "Server not found: nope"),
        (json!({"subtype": "mcp_reconnect", "serverName": "nope"}), "Server not found: nope"),
        (json!({"subtype": "mcp_toggle", "serverName": "tester"}), "mcp_toggle: enabled must be a boolean"),
    ];
    for (i, (request, expected)) in cases.into_iter().enumerate() {
        let id = format!("bad{i}");
        k.send_raw(&control(&id, request));
        assert_eq!(response(&mut k, &id)["error"], expected);
    }
    k.close_stdin();
    assert!(k.wait_exit(common::TIMEOUT).is_some());
}

/// The same APIs through the pinned Python SDK (tests/print_sdk/sessions.py): `fork_session`,
/// `resume_session_at` with `resume_drops_turn`, `enable_file_checkpointing` + `rewind_files`,
/// `toggle_mcp_server`, `reconnect_mcp_server` and `get_mcp_status`. Skipped with the reason
/// where Python or the registry is not available, unless `KIWI_REQUIRE_SDK_TESTS=1`.
#[test]
fn the_python_sdk_drives_the_session_apis() {
    super::print_sdk::run_check("sessions.py", "4 passed, 0 failed");
}
