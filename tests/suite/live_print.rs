//! The print dialects on one session with other processes (`docs/print-mode.md`, "One session,
//! many clients"; `docs/host.md`, "Print mode"): a print run hosts its session on
//! `live.sock` while it has it open, so a `kiwi --wire -S` watches and steers it, and the
//! run's own output keeps only its own turns.

use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Env, Kiwi, wait_until};

const ID: &str = "print-hosted";

/// The Claude dialect (kept open: stream-json input) on the test's work dir and share dir.
fn claude(env: &Env, config: &std::path::Path, extra: &[&str]) -> Kiwi {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kiwi"));
    cmd.args(["--output-format", "stream-json", "--verbose", "--input-format", "stream-json"])
        .args(extra)
        .arg("--config-file")
        .arg(config)
        .arg("--work-dir")
        .arg(env.work());
    cmd.env("HOME", env.home()).env("KIMI_SHARE_DIR", env.share());
    for var in ["KIMI_SCRIPTED_ECHO_TRACE", "KIMI_DIALECT", "CLAUDE_CODE_SDK_READS_SESSION_STATE"] {
        cmd.env_remove(var);
    }
    Kiwi::spawn(cmd)
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
    let config =
        env.scripted_config(&["text: first answer", "text: watched answer", "text: wire answer", "text: last"]);
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

    // The watcher's own turn runs on the run's session; the run's output leaves it out.
    let (_, answer) = wire.prompt("w1", json!("from the wire"));
    assert_eq!(answer["result"]["status"], "finished", "{answer}");
    run.send(user("three"));
    let third = until_result(&mut run);
    assert_eq!(third.last().unwrap()["result"], "last", "{third:?}");
    let everything = run.seen.iter().map(Value::to_string).collect::<String>();
    assert!(!everything.contains("wire answer") && !everything.contains("from the wire"), "{everything}");
    assert_eq!(run.seen.iter().filter(|l| l["type"] == "result").count(), 3);

    // The run ends with its input; the socket goes with it.
    run.close_stdin();
    assert!(run.wait_exit(Duration::from_secs(20)).is_some(), "the run did not end");
    assert!(!socket.exists(), "the socket outlived the run");
}
