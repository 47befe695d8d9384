//! The print dialects on one session with other processes (`docs/print-mode.md`, "One session,
//! many clients"; `docs/host.md`, "Print mode"): a print run hosts its session on
//! `live.sock` while it has it open, so a `kiwi --wire -S` watches and steers it, and the
//! run's own output keeps only its own turns.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Env, Kiwi, wait_until};

const ID: &str = "print-hosted";

/// kiwi with `args` (a print dialect's) on the test's config, work dir and share dir.
fn print_command(env: &Env, config: &std::path::Path, args: &[&str]) -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kiwi"));
    cmd.args(args).arg("--config-file").arg(config).arg("--work-dir").arg(env.work());
    cmd.env("HOME", env.home()).env("KIMI_SHARE_DIR", env.share());
    for var in ["KIMI_SCRIPTED_ECHO_TRACE", "KIMI_DIALECT", "CLAUDE_CODE_SDK_READS_SESSION_STATE"] {
        cmd.env_remove(var);
    }
    cmd
}

/// The Claude dialect (kept open: stream-json input).
fn claude(env: &Env, config: &std::path::Path, extra: &[&str]) -> Kiwi {
    let base = ["--output-format", "stream-json", "--verbose", "--input-format", "stream-json"];
    Kiwi::spawn(print_command(env, config, &[&base[..], extra].concat()))
}

fn user(text: &str) -> Value {
    json!({"type": "user", "message": {"role": "user", "content": text}, "parent_tool_use_id": null, "session_id": ""})
}

/// The Claude lines up to and with the next `result`.
fn until_result(k: &mut Kiwi) -> Vec<Value> {
    let mut lines = Vec::new();
    loop {
        let line = k.next();
        let done = line["type"] == "result";
        lines.push(line);
        if done {
            return lines;
        }
    }
}

/// The wire messages up to and with the event of `kind`.
fn until_event(k: &mut Kiwi, kind: &str) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let m = k.next();
        let done = m["method"] == "event" && m["params"]["type"] == kind;
        seen.push(m);
        if done {
            return seen;
        }
    }
}

#[test]
fn a_wire_process_watches_and_steers_a_claude_stream_json_run() {
    let env = Env::new();
    let ran = env.dir.path().join("ran.txt");
    let command = format!("echo ran >> {}", ran.display());
    let scripts = ["text: first answer", "text: watched answer", &shell(&command), "text: wire answer", "text: last"];
    let config = env.scripted_config(&scripts);
    let mut run = claude(&env, &config, &["--session-id", ID]);
    run.send(user("one"));
    let first = until_result(&mut run);
    assert_eq!(first.last().unwrap()["result"], "first answer", "{first:?}");
    let socket = env.session_dir(ID).join("live.sock");
    assert!(wait_until(Duration::from_secs(10), || socket.exists()), "the run serves no socket");

    let mut wire = env.spawn(&config, &["--session", ID]);
    let init = wire.initialize();
    assert!(init.get("result").is_some(), "{init}");
    // The run's next turn reaches the watcher as events.
    run.send(user("two"));
    let second = until_result(&mut run);
    assert_eq!(second.last().unwrap()["result"], "watched answer", "{second:?}");
    assert_eq!(second.last().unwrap()["session_id"], ID);
    let watched = until_event(&mut wire, "TurnEnd");
    let begin = watched.iter().find(|m| m["params"]["type"] == "TurnBegin").expect("TurnBegin");
    assert!(begin["params"]["payload"]["user_input"].to_string().contains("two"), "{watched:?}");
    assert!(watched.iter().any(|m| m.to_string().contains("watched answer")), "{watched:?}");

    // The watcher's own turn runs on the run's session; the run's output leaves it out, and its
    // approval is the watcher's to give (the run, which cannot ask, would have denied it).
    wire.send(json!({"jsonrpc": "2.0", "id": "w1", "method": "prompt", "params": {"user_input": "from the wire"}}));
    let (_, asked) = wire.until_request();
    let id = asked["id"].clone();
    // The run's next message comes while the watcher's turn still waits for its approval: it
    // waits for that turn (the turn driver's idle wait) and runs once it ended.
    run.send(user("three"));
    wire.send(json!({"jsonrpc": "2.0", "id": id, "result": {"request_id": id, "response": "approve"}}));
    let (_, answer) = wire.until_response(&json!("w1"));
    assert_eq!(answer["result"]["status"], "finished", "{answer}");
    assert_eq!(std::fs::read_to_string(&ran).unwrap(), "ran\n", "the command ran once");
    let third = until_result(&mut run);
    assert_eq!(third.last().unwrap()["result"], "last", "{third:?}");
    let everything = run.seen.iter().map(Value::to_string).collect::<String>();
    assert!(!everything.contains("wire answer") && !everything.contains("from the wire"), "{everything}");
    assert_eq!(run.seen.iter().filter(|l| l["type"] == "result").count(), 3);

    // The message uuids are recorded by the session's turn numbers: the watcher's turn counts.
    let ledger = std::fs::read_to_string(env.session_dir(ID).join("claude_uuids.jsonl")).unwrap();
    let turns: Vec<u64> =
        ledger.lines().map(|l| serde_json::from_str::<Value>(l).unwrap()["turn"].as_u64().unwrap()).collect();
    assert_eq!(turns, [0, 1, 3], "{ledger}");

    // The run ends with its input; the socket goes with it (the watcher left first: it would
    // take the session over).
    wire.close_stdin();
    assert!(wire.wait_exit(Duration::from_secs(20)).is_some(), "the watcher did not end");
    run.close_stdin();
    assert!(run.wait_exit(Duration::from_secs(20)).is_some(), "the run did not end");
    assert!(!socket.exists(), "the socket outlived the run");
}

/// A Claude run to its end (stdin closed at once): exit code and stdout lines.
fn claude_once(env: &Env, config: &std::path::Path, args: &[&str]) -> (Option<i32>, Vec<Value>, String) {
    let base = ["-p", "--verbose", "--output-format", "stream-json"];
    let out =
        print_command(env, config, &[&base[..], args].concat()).stdin(std::process::Stdio::null()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines = stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect();
    (out.status.code(), lines, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn shell(command: &str) -> String {
    let args = json!({"command": command}).to_string();
    format!("tool_call: {}", json!({"id": "tc-1", "name": "Shell", "arguments": args}))
}

#[test]
fn a_claude_resume_runs_its_prompt_as_a_turn_of_the_hosted_session() {
    let env = Env::new();
    let ran = env.dir.path().join("ran.txt");
    let command = format!("echo ran >> {}", ran.display());
    let config = env.scripted_config(&["text: hosted first", &shell(&command), "text: attached answer", "text: mine"]);
    let mut host = env.spawn(&config, &["--session", ID]);
    host.initialize();
    let (_, first) = host.prompt("p0", json!("first"));
    assert_eq!(first["result"]["status"], "finished", "{first}");

    // The run's prompt is a turn of the host's session; the run approves its own Shell call.
    let (code, lines, stderr) =
        claude_once(&env, &config, &["--resume", ID, "--dangerously-skip-permissions", "run it for me"]);
    assert_eq!(code, Some(0), "{stderr}");
    let init = lines.iter().find(|l| l["type"] == "system" && l["subtype"] == "init").expect("system/init");
    assert_eq!(init["session_id"], ID, "{init}");
    assert_eq!(init["tools"], json!([]), "{init}");
    let result = lines.last().unwrap();
    assert_eq!((result["type"].as_str(), result["is_error"].as_bool()), (Some("result"), Some(false)), "{result}");
    assert_eq!(result["result"], "attached answer", "{result}");
    assert_eq!(result["session_id"], ID);
    assert!(lines.iter().any(|l| l["type"] == "assistant" && l.to_string().contains("\"Shell\"")), "{lines:?}");
    assert_eq!(std::fs::read_to_string(&ran).unwrap(), "ran\n", "the command ran once");
    // The host's client saw the turn: its prompt, the approval asked of every client, its end.
    let watched = until_event(&mut host, "TurnEnd");
    let begin = watched.iter().find(|m| m["params"]["type"] == "TurnBegin").expect("TurnBegin");
    assert!(begin.to_string().contains("run it for me"), "{watched:?}");
    assert!(watched.iter().any(|m| m.to_string().contains("attached answer")), "{watched:?}");

    // A fork is made from disk while the host holds the session: a new session, no attaching.
    // (A process of its own plays its scripts from the start.)
    let fork_config = env.named_scripted_config("fork", &["text: fork"], json!({}));
    let (code, lines, stderr) = claude_once(&env, &fork_config, &["--resume", ID, "--fork-session", "and a fork"]);
    assert_eq!(code, Some(0), "{stderr}");
    let result = lines.last().unwrap();
    assert_eq!(result["result"], "fork", "{result}");
    assert_ne!(result["session_id"], ID, "{result}");
    let (_, again) = host.prompt("p1", json!("still the host's"));
    assert_eq!(again["result"]["status"], "finished", "{again}");
}

#[test]
fn a_claude_prompt_while_another_clients_turn_runs_gets_an_error_result() {
    let env = Env::new();
    let ran = env.dir.path().join("ran.txt");
    let command = format!("echo ran >> {}", ran.display());
    let config = env.scripted_config(&["text: hosted first", &shell(&command), "text: done"]);
    let mut host = env.spawn(&config, &["--session", ID]);
    host.initialize();
    host.prompt("p0", json!("first"));
    // The host's turn waits for its client's approval.
    host.send(json!({"jsonrpc": "2.0", "id": "p1", "method": "prompt", "params": {"user_input": "run it"}}));
    let (_, asked) = host.until_request();
    assert_eq!(asked["params"]["type"], "ApprovalRequest", "{asked}");

    let (code, lines, stderr) =
        claude_once(&env, &config, &["--resume", ID, "--dangerously-skip-permissions", "me too"]);
    assert_eq!(code, Some(1), "{stderr}");
    let result = lines.last().expect("a result line");
    assert_eq!(result["type"], "result", "{lines:?}");
    assert_eq!(result["is_error"], true, "{result}");
    assert_eq!(result["subtype"], "error_during_execution", "{result}");
    assert_eq!(result["session_id"], ID, "{result}");
    let errors = result["errors"].to_string();
    assert!(errors.contains("An agent turn is already in progress"), "{errors}");
    // Nothing of the host's turn reached the run, and it answered none of its requests.
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(!ran.exists(), "the attached run answered the host's approval");

    let id = asked["id"].clone();
    host.send(json!({"jsonrpc": "2.0", "id": id, "result": {"request_id": id, "response": "approve"}}));
    let (_, answer) = host.until_response(&json!("p1"));
    assert_eq!(answer["result"]["status"], "finished", "{answer}");
    assert_eq!(std::fs::read_to_string(&ran).unwrap(), "ran\n");
}

#[test]
fn kimi_print_on_a_hosted_session_runs_its_prompt_there() {
    let env = Env::new();
    let config = env.scripted_config(&["text: hosted first", "text: printed answer"]);
    let mut host = env.spawn(&config, &["--session", ID]);
    host.initialize();
    host.prompt("p0", json!("first"));
    let out = print_command(&env, &config, &["--print", "--session", ID, "-p", "print this"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("printed answer"), "{stderr}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("hosted first"));
    let watched = until_event(&mut host, "TurnEnd");
    assert!(watched.iter().any(|m| m.to_string().contains("print this")), "{watched:?}");
}

#[test]
fn an_attached_claude_run_asks_its_host_with_can_use_tool() {
    let env = Env::new();
    let ran = env.dir.path().join("ran.txt");
    let command = format!("echo ran >> {}", ran.display());
    let config = env.scripted_config(&["text: hosted first", &shell(&command), "text: asked and done"]);
    let mut host = env.spawn(&config, &["--session", ID]);
    host.initialize();
    host.prompt("p0", json!("first"));
    let mut run = claude(&env, &config, &["--resume", ID, "--permission-prompt-tool", "stdio"]);
    run.send(user("run it"));
    let asked = loop {
        let line = run.next();
        if line["type"] == "control_request" {
            break line;
        }
    };
    assert_eq!(asked["request"]["subtype"], "can_use_tool", "{asked}");
    assert_eq!(asked["request"]["tool_name"], "Shell", "{asked}");
    let answer = json!({"type": "control_response", "response": {"subtype": "success",
        "request_id": asked["request_id"], "response": {"behavior": "allow"}}});
    run.send(answer);
    let lines = until_result(&mut run);
    let result = lines.last().unwrap();
    assert_eq!((result["is_error"].as_bool(), result["result"].as_str()), (Some(false), Some("asked and done")));
    assert_eq!(std::fs::read_to_string(&ran).unwrap(), "ran\n", "the command ran once");
    // An unsupported control request names why.
    run.send(json!({"type": "control_request", "request_id": "c1", "request": {"subtype": "set_model", "model": "x"}}));
    let refused = run.next();
    assert_eq!(refused["response"]["subtype"], "error", "{refused}");
    assert!(refused.to_string().contains("hosted by another process"), "{refused}");
    run.close_stdin();
    assert!(run.wait_exit(Duration::from_secs(20)).is_some(), "the run did not end");
    let watched = until_event(&mut host, "TurnEnd");
    assert!(watched.iter().any(|m| m.to_string().contains("asked and done")), "{watched:?}");
}
