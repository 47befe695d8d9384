//! One session lifecycle under every front end: session hooks in both print dialects, a print
//! run that notices its stdout is gone, ACP sessions that open and close without holding up the
//! others, and a session closed over ACP stopping its background tasks.

use crate::common;
use crate::print_support;

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::{Env, Kiwi, wait_until};
use print_support::{Dirs, run};
use serde_json::{Value, json};

/// A config whose SessionStart and SessionEnd hooks append their input to files in `dir`.
fn hooked_print_config(d: &Dirs, scripts: &[&str], dir: &Path) -> std::path::PathBuf {
    let scripts_path = d.dir.path().join("scripts.json");
    std::fs::write(&scripts_path, serde_json::to_string(scripts).unwrap()).unwrap();
    d.config(json!({
        "default_model": "scripted",
        "models": {"scripted": {"provider": "p", "model": "scripted_echo", "max_context_size": 100000}},
        "providers": {"p": {"type": "_scripted_echo", "base_url": "", "api_key": "",
            "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": scripts_path.to_str().unwrap()}}},
        "hooks": [
            {"event": "SessionStart", "command": format!("cat >> {}/start.jsonl; echo >> {0}/start.jsonl", dir.display())},
            {"event": "SessionEnd", "command": format!("cat >> {}/end.jsonl; echo >> {0}/end.jsonl", dir.display())}
        ]
    }))
}

fn hook_inputs(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn kimi_print_runs_the_session_hooks() {
    let d = Dirs::new();
    let hooks = d.dir.path().join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let config = hooked_print_config(&d, &["text: hello"], &hooks);
    let out = run(d.command(&config, &["--print", "-p", "hi"]), "");
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let start = hook_inputs(&hooks.join("start.jsonl"));
    let end = hook_inputs(&hooks.join("end.jsonl"));
    assert_eq!(start.len(), 1, "one SessionStart");
    assert_eq!(start[0]["source"], "startup");
    assert_eq!(end.len(), 1, "one SessionEnd");
    assert_eq!(end[0]["reason"], "exit");
}

#[test]
fn claude_print_runs_the_session_hooks() {
    let d = Dirs::new();
    let hooks = d.dir.path().join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let config = hooked_print_config(&d, &["text: hello"], &hooks);
    let out = run(d.command(&config, &["-p", "hi", "--output-format", "json"]), "");
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let start = hook_inputs(&hooks.join("start.jsonl"));
    let end = hook_inputs(&hooks.join("end.jsonl"));
    assert_eq!(start.len(), 1, "one SessionStart");
    assert_eq!(start[0]["source"], "startup");
    assert_eq!(end.len(), 1, "one SessionEnd");
}

/// kimi print with prompts on stdin, stdin left open: once nobody reads its stdout, the run ends
/// instead of waiting for more input.
#[test]
fn kimi_print_ends_when_its_stdout_is_gone() {
    let d = Dirs::new();
    let config = d.scripted(&["text: one", "text: two"]);
    let mut cmd = d.command(&config, &["--print", "--input-format", "stream-json", "--output-format", "stream-json"]);
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    writeln!(stdin, r#"{{"role":"user","content":"first"}}"#).unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains("one"), "{line}");
    // Nobody reads stdout any more; the next answer cannot be written.
    drop(stdout);
    writeln!(stdin, r#"{{"role":"user","content":"second"}}"#).unwrap();
    let ended = wait_until(Duration::from_secs(20), || child.try_wait().unwrap().is_some());
    if !ended {
        let _ = child.kill();
    }
    assert!(ended, "kiwi kept running with a closed stdout");
    drop(stdin);
}

fn acp_config(env: &Env, scripts: &[&str], extra: Value) -> std::path::PathBuf {
    env.scripted_config_with(scripts, extra)
}

fn acp_initialize(k: &mut Kiwi) {
    let (_, r) = k.call("0", "initialize", json!({"protocolVersion": 1, "clientCapabilities": {}}));
    assert!(r.get("result").is_some(), "{r}");
}

fn new_session(k: &mut Kiwi, id: &str, cwd: &Path) -> String {
    let (_, r) = k.call(id, "session/new", json!({"cwd": cwd, "mcpServers": []}));
    r["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{r}")).to_string()
}

/// A SessionStart hook that waits keeps nothing else waiting: another request is answered while
/// it runs (before, the dispatcher awaited the hook).
#[test]
fn a_slow_session_start_hook_does_not_hold_up_other_requests() {
    let env = Env::new();
    let go = env.dir.path().join("go");
    let hook = format!("while [ ! -e {} ]; do sleep 0.05; done", go.display());
    let config = acp_config(&env, &[], json!({"hooks": [{"event": "SessionStart", "command": hook, "timeout": 60}]}));
    let mut k = Kiwi::spawn(env.acp_command(&config, &[]));
    acp_initialize(&mut k);
    new_session(&mut k, "1", &env.work());
    // The first session's hook now waits for `go`; a second request must still be answered.
    let (_, listed) = k.call("2", "session/list", json!({"cwd": env.work()}));
    assert!(listed.get("result").is_some(), "{listed}");
    let second = new_session(&mut k, "3", &env.work());
    assert!(!second.is_empty());
    std::fs::write(&go, "").unwrap();
    k.close_stdin();
    assert!(k.wait_exit(Duration::from_secs(20)).is_some());
}

/// `session/close` ends the session's background tasks: the task's process is gone and its
/// record says it was stopped (before, it ran on, and reopening called it lost).
#[test]
fn closing_an_acp_session_stops_its_background_tasks() {
    let env = Env::new();
    let pid_file = env.dir.path().join("bg.pid");
    let command = format!("echo $$ > {}; exec sleep 60", pid_file.display());
    let call = json!({"id": "b1", "name": "Shell",
        "arguments": json!({"command": command, "run_in_background": true, "description": "sleeper"}).to_string()});
    let config = acp_config(&env, &[&format!("tool_call: {call}"), "text: started"], json!({}));
    let mut k = Kiwi::spawn(env.acp_command(&config, &["--yolo"]));
    acp_initialize(&mut k);
    let session = new_session(&mut k, "1", &env.work());
    let (_, r) =
        k.call("2", "session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}));
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert!(wait_until(Duration::from_secs(10), || std::fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n'))));
    let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    assert!(common::alive(pid));
    let (_, r) = k.call("3", "session/close", json!({"sessionId": session}));
    assert!(r.get("result").is_some(), "{r}");
    assert!(wait_until(Duration::from_secs(10), || !common::alive(pid)), "the task's process outlived its session");
    let tasks = env.session_dir(&session).join("tasks");
    let runtime: Value = std::fs::read_dir(&tasks)
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.unwrap().path().join("runtime.json")).ok())
        .map(|t| serde_json::from_str(&t).unwrap())
        .next()
        .expect("a task record");
    assert_eq!(runtime["status"], "killed", "{runtime}");
    k.close_stdin();
    assert!(k.wait_exit(Duration::from_secs(20)).is_some());
}
