//! The sandbox end to end through the front ends (spec sandbox.md §2, §4, §6, §7): the wire server
//! with the scripted echo provider. Every escape case runs twice — with the sandbox and without
//! it — and asserts opposite outcomes, so a sandbox that does nothing fails the test.
//!
//! The test boxes live under the temp dir, so their configs exclude `/tmp` and `$TMPDIR` from
//! the writable roots (as the spec's check does); "outside" is a file next to the work dir.

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::{Env, Kiwi, types};
use serde_json::{Value, json};

fn call(id: &str, name: &str, args: Value) -> String {
    format!("tool_call: {}", json!({"id": id, "name": name, "arguments": args.to_string()}))
}

fn shell(id: &str, command: &str) -> String {
    call(id, "Shell", json!({ "command": command }))
}

/// The config with `scripts` and a `[sandbox]` that keeps the temp dirs out of the roots.
fn config(env: &Env, scripts: &[&str], sandbox: Value) -> std::path::PathBuf {
    let mut table = json!({"exclude_slash_tmp": true, "exclude_tmpdir_env_var": true});
    common::merge(&mut table, sandbox);
    env.scripted_config_with(scripts, json!({ "sandbox": table }))
}

fn outside(env: &Env) -> std::path::PathBuf {
    env.dir.path().join("outside.txt")
}

/// The file outside the work dir and a command that writes it.
fn escape(env: &Env) -> (std::path::PathBuf, String) {
    let target = outside(env);
    let command = format!("echo escaped > {}", target.display());
    (target, command)
}

/// The run's flags with the sandbox, or without it (`--yolo`, so nobody is asked either).
/// A Shell call asking to run `command` outside the sandbox.
fn escalated(id: &str, command: &str, justification: &str) -> String {
    call(
        id,
        "Shell",
        json!({"command": command, "sandbox_permissions": "require_escalated", "justification": justification}),
    )
}

fn flags(sandboxed: bool) -> &'static [&'static str] {
    if sandboxed { &["--sandbox", "workspace-write"] } else { &["--yolo"] }
}

/// Prompts once and returns every message of the turn; panics when kiwi asks for approval.
fn turn_without_requests(k: &mut Kiwi) -> Vec<Value> {
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let (events, response) = k.until_response(&json!("p0"));
    assert_eq!(response["result"]["status"], "finished", "{response}");
    let asked: Vec<String> = types(&events).into_iter().filter(|t| t.starts_with("request:")).collect();
    assert!(asked.is_empty(), "unexpected requests: {asked:?}");
    events
}

fn results(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["params"]["type"] == "ToolResult")
        .map(|e| e["params"]["payload"]["return_value"].clone())
        .collect()
}

const WW_NOTE: &str = " The command ran in the workspace-write sandbox, which may have blocked it: commands may \
                       write only in the work dir, the added dirs and the temp dirs, and cannot use the network. To \
                       run it outside the sandbox, call Shell again with \"sandbox_permissions\": \
                       \"require_escalated\" and a \"justification\"; the user will be asked.";

/// A Shell write outside the work dir, with the sandbox (`--sandbox workspace-write`, no approval
/// asked) or without it (`--yolo`, so nobody is asked either).
fn shell_writes_outside(sandboxed: bool) -> (bool, Vec<Value>) {
    let env = Env::new();
    let (target, command) = escape(&env);
    let scripts = [
        shell("a", &command),
        shell("b", "echo \"$KIWI_SANDBOX:$KIWI_SANDBOX_NETWORK_DISABLED\""),
        "text: done".into(),
    ];
    let scripts: Vec<&str> = scripts.iter().map(String::as_str).collect();
    let config = config(&env, &scripts, json!({}));
    let mut k = env.spawn(&config, flags(sandboxed));
    let events = turn_without_requests(&mut k);
    (target.exists(), results(&events))
}

#[test]
fn a_sandboxed_shell_cannot_write_outside_and_is_told_why() {
    let (written, results) = shell_writes_outside(true);
    assert!(!written, "the sandboxed command wrote outside the work dir");
    assert_eq!(results[0]["is_error"], true);
    assert_eq!(results[0]["message"], format!("Command failed with exit code: 1.{WW_NOTE}"));
    assert!(results[0]["output"].as_str().unwrap().contains("Read-only file system"), "{}", results[0]);
    assert_eq!(results[0]["display"], json!([{"type":"brief","text":"Failed with exit code: 1"}]));
    assert_eq!(results[1]["output"], "workspace-write:1\n");
    // The same command without the sandbox writes the file and gets no note.
    let (written, results) = shell_writes_outside(false);
    assert!(written);
    assert_eq!(results[0]["message"], "Command executed successfully.");
    assert_eq!(results[1]["output"], ":\n");
}

#[test]
fn the_config_mode_applies_without_the_flag() {
    for sandboxed in [true, false] {
        let env = Env::new();
        let (target, command) = escape(&env);
        let mode = if sandboxed { "workspace-write" } else { "off" };
        let config = config(&env, &[&shell("a", &command), "text: done"], json!({ "mode": mode }));
        let mut k = env.spawn(&config, &["--yolo"]);
        turn_without_requests(&mut k);
        assert_eq!(target.exists(), !sandboxed, "mode {mode}");
    }
}

#[test]
fn a_sandboxed_background_task_cannot_write_outside_and_its_notice_says_so() {
    for sandboxed in [true, false] {
        let env = Env::new();
        let target = outside(&env);
        let command = format!("echo finished > bg-finished ; echo escaped > {}", target.display());
        let bg = call("bg", "Shell", json!({"command": command, "run_in_background": true, "description": "bg"}));
        let config = config(&env, &[&bg, "text: started"], json!({}));
        let mut k = env.spawn(&config, flags(sandboxed));
        turn_without_requests(&mut k);
        // The task's end notification, as kiwi stores it for the next step.
        let mut notice = None;
        assert!(common::wait_until(Duration::from_secs(20), || {
            notice = find_file(&sessions_of(&env), "event.json");
            notice.is_some()
        }));
        let event = std::fs::read_to_string(notice.unwrap()).unwrap();
        assert!(env.work().join("bg-finished").exists());
        assert_eq!(target.exists(), !sandboxed, "sandboxed: {sandboxed}");
        assert_eq!(event.contains("The command ran in the workspace-write sandbox"), sandboxed, "{event}");
    }
}

/// The first file named `name` under `dir`, depth first.
fn find_file(dir: &Path, name: &str) -> Option<std::path::PathBuf> {
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if let Some(found) = find_file(&path, name) {
                return Some(found);
            }
        } else if path.file_name().is_some_and(|n| n == name) {
            return Some(path);
        }
    }
    None
}

/// The folder every session of the work dir lies in.
fn sessions_of(env: &Env) -> std::path::PathBuf {
    env.session_dir("x").parent().unwrap().to_path_buf()
}

#[test]
fn a_subagents_shell_is_sandboxed_too() {
    for sandboxed in [true, false] {
        let env = Env::new();
        let (target, command) = escape(&env);
        let long = "x".repeat(300);
        let scripts = [
            call("ag", "Agent", json!({"description": "d", "prompt": "p"})),
            shell("sub", &command),
            format!("text: {long}"),
            "text: parent done".into(),
        ];
        let scripts: Vec<&str> = scripts.iter().map(String::as_str).collect();
        let config = config(&env, &scripts, json!({}));
        let mut k = env.spawn(&config, flags(sandboxed));
        turn_without_requests(&mut k);
        assert_eq!(target.exists(), !sandboxed, "sandboxed: {sandboxed}");
    }
}

/// A WriteFile call's result with `flags`; panics on an approval request.
fn write_file(env: &Env, path: &str, flags: &[&str], sandbox: Value) -> Value {
    let config =
        config(env, &[&call("w", "WriteFile", json!({"path": path, "content": "new"})), "text: done"], sandbox);
    let mut k = env.spawn(&config, flags);
    results(&turn_without_requests(&mut k)).remove(0)
}

fn blocked(message: String) -> Value {
    json!({"is_error": true, "output": "", "message": message,
           "display": [{"type": "brief", "text": "Blocked by sandbox"}], "extras": null})
}

#[test]
fn write_file_outside_the_roots_is_refused_before_any_approval() {
    // Outside, by absolute path.
    let env = Env::new();
    let target = outside(&env);
    let real = std::fs::canonicalize(env.dir.path()).unwrap().join("outside.txt");
    let r = write_file(&env, target.to_str().unwrap(), &["--sandbox", "workspace-write"], json!({}));
    assert_eq!(r, blocked(format!("Cannot write `{}`: it is outside the sandbox's writable roots.", real.display())));
    assert!(!target.exists());
    // Through a symlink in the work dir that points outside.
    std::fs::write(&target, "old").unwrap();
    std::os::unix::fs::symlink(&target, env.work().join("link")).unwrap();
    let r = write_file(&env, "link", &["--sandbox", "workspace-write"], json!({}));
    assert_eq!(r["message"], format!("Cannot write `{}`: it is outside the sandbox's writable roots.", real.display()));
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "old");
    // Into .git.
    std::fs::create_dir_all(env.work().join(".git")).unwrap();
    let git = std::fs::canonicalize(env.work()).unwrap().join(".git/config");
    let r = write_file(&env, ".git/config", &["--sandbox", "workspace-write"], json!({}));
    assert_eq!(r, blocked(format!("Cannot write `{}`: it is read-only in the sandbox.", git.display())));
    assert!(!git.exists());
    // Anything, in read-only mode.
    let inside = std::fs::canonicalize(env.work()).unwrap().join("inside.txt");
    let r = write_file(&env, "inside.txt", &["--sandbox", "read-only"], json!({}));
    assert_eq!(r, blocked(format!("Cannot write `{}`: the sandbox is read-only.", inside.display())));
    assert!(!inside.exists());
    // Without the sandbox (and with --yolo, so nobody is asked) the same writes happen.
    let r = write_file(&env, "link", &["--yolo"], json!({}));
    assert_eq!(r["is_error"], false, "{r}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
    let r = write_file(&env, ".git/config", &["--yolo"], json!({}));
    assert_eq!(r["is_error"], false, "{r}");
}

#[test]
fn write_file_inside_the_work_dir_works_in_the_sandbox() {
    let env = Env::new();
    let r = write_file(&env, "inside.txt", &["--sandbox", "workspace-write", "--yolo"], json!({}));
    assert_eq!(r["is_error"], false, "{r}");
    assert_eq!(std::fs::read_to_string(env.work().join("inside.txt")).unwrap(), "new");
}

#[test]
fn read_file_honours_deny_read() {
    let env = Env::new();
    let secret = env.dir.path().join("secret.txt");
    std::fs::write(&secret, "s3cret").unwrap();
    let path = secret.to_str().unwrap();
    let read = |flags: &[&str]| {
        let config =
            config(&env, &[&call("r", "ReadFile", json!({"path": path})), "text: done"], json!({"deny_read": [path]}));
        let mut k = env.spawn(&config, flags);
        results(&turn_without_requests(&mut k)).remove(0)
    };
    let real = std::fs::canonicalize(&secret).unwrap();
    let r = read(&["--sandbox", "workspace-write"]);
    assert_eq!(r, blocked(format!("Cannot read `{}`: reading it is denied by the sandbox.", real.display())));
    let r = read(&[]);
    assert!(r["output"].as_str().unwrap().contains("s3cret"), "{r}");
}

/// An escalation of a write outside, answered `response`; returns whether the file was written
/// and the tool result.
fn escalation_answered(response: &str) -> (bool, Value) {
    let env = Env::new();
    let (target, command) = escape(&env);
    let esc = escalated("e", &command, "needs it");
    let config = config(&env, &[&esc, "text: done"], json!({}));
    let mut k = env.spawn(&config, &["--sandbox", "workspace-write"]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let (_, request) = k.until_request();
    let payload = &request["params"]["payload"];
    assert_eq!(payload["action"], "run command outside the sandbox");
    assert_eq!(payload["description"], format!("Run command `{command}` outside the sandbox: needs it"));
    assert_eq!(payload["display"], json!([{"type":"shell","language":"bash","command":command}]));
    let id = request["id"].clone();
    k.send(json!({"jsonrpc":"2.0","id":id,"result":{"request_id":id,"response":response}}));
    let (events, _) = k.until_response(&json!("p0"));
    (target.exists(), results(&events).remove(0))
}

#[test]
fn an_escalation_is_asked_and_runs_unconfined_only_when_approved() {
    let (written, r) = escalation_answered("approve");
    assert!(written);
    assert_eq!(r["message"], "Command executed successfully.");
    let (written, r) = escalation_answered("reject");
    assert!(!written);
    assert_eq!(r["display"], json!([{"type":"brief","text":"Rejected by user"}]));
}

#[test]
fn approve_for_session_does_not_cover_a_later_escalation() {
    let env = Env::new();
    let esc = |id: &str| {
        call(id, "Shell", json!({"command": "true", "sandbox_permissions": "require_escalated", "justification": "j"}))
    };
    let config = config(&env, &[&esc("a"), &esc("b"), "text: done"], json!({}));
    let mut k = env.spawn(&config, &["--sandbox", "workspace-write"]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    for _ in 0..2 {
        let (_, request) = k.until_request();
        assert_eq!(request["params"]["payload"]["action"], "run command outside the sandbox");
        let id = request["id"].clone();
        k.send(json!({"jsonrpc":"2.0","id":id,"result":{"request_id":id,"response":"approve_for_session"}}));
    }
    let (events, _) = k.until_response(&json!("p0"));
    assert!(results(&events).iter().all(|r| r["is_error"] == false));
}

#[test]
fn an_escalation_is_refused_without_asking_under_yolo_and_needs_a_justification() {
    let env = Env::new();
    let (target, command) = escape(&env);
    let esc = escalated("e", &command, "j");
    let bare = call("f", "Shell", json!({"command": command, "sandbox_permissions": "require_escalated"}));
    let first = config(&env, &[&esc, &bare, "text: done"], json!({}));
    let mut k = env.spawn(&first, &["--sandbox", "workspace-write", "--yolo"]);
    let r = results(&turn_without_requests(&mut k));
    assert_eq!(
        r[0],
        json!({"is_error": true, "output": "", "message": "Running commands outside the sandbox is not allowed in this session.",
               "display": [{"type": "brief", "text": "Escalation refused"}], "extras": null})
    );
    assert_eq!(
        r[1]["message"],
        "Error validating JSON arguments: justification is required when sandbox_permissions is require_escalated"
    );
    assert!(!target.exists());
    // Without the sandbox the parameter means nothing: the command runs (yolo).
    let env = Env::new();
    let (target, command) = escape(&env);
    let esc = escalated("e", &command, "j");
    let config = config(&env, &[&esc, "text: done"], json!({}));
    let mut k = env.spawn(&config, &["--yolo"]);
    turn_without_requests(&mut k);
    assert!(target.exists());
}

#[test]
fn auto_approve_false_asks_for_sandboxed_commands() {
    let env = Env::new();
    let config = config(&env, &[&shell("a", "true"), "text: done"], json!({"auto_approve": false}));
    let mut k = env.spawn(&config, &["--sandbox", "workspace-write"]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let (_, request) = k.until_request();
    assert_eq!(request["params"]["payload"]["action"], "run command");
}

#[test]
fn the_mode_is_not_saved_with_the_session() {
    let env = Env::new();
    let (target, command) = escape(&env);
    let first = config(&env, &[&shell("a", &command), "text: done"], json!({}));
    let mut k = env.spawn(&first, &["-S", "s1", "--sandbox", "workspace-write"]);
    turn_without_requests(&mut k);
    drop(k);
    assert!(!target.exists());
    // (wire.jsonl holds the first run's tool result, whose note names the mode; nothing reads
    // a mode back from it.)
    let state = std::fs::read_to_string(env.session_dir("s1").join("state.json")).unwrap();
    assert!(!state.contains("sandbox") && !state.contains("workspace-write"), "{state}");
    let mut k = env.spawn(&first, &["-S", "s1", "--yolo"]);
    turn_without_requests(&mut k);
    assert!(target.exists(), "the resumed run without the flag should be unconfined");
}

#[test]
fn initialize_has_the_sandbox_member_only_when_it_is_on() {
    let env = Env::new();
    let config = config(&env, &["text: x"], json!({}));
    let mut k = env.spawn(&config, &["--sandbox", "workspace-write"]);
    let init = k.initialize();
    let keys: Vec<&String> = init["result"].as_object().unwrap().keys().collect();
    let at = keys.iter().position(|k| *k == "capabilities").unwrap();
    assert_eq!(keys[at + 1], "sandbox");
    let work = std::fs::canonicalize(env.work()).unwrap();
    assert_eq!(
        init["result"]["sandbox"],
        json!({"mode": "workspace-write", "network": false, "writable_roots": [work], "escalation": true})
    );
    let mut k = env.spawn(&config, &["--sandbox", "read-only", "--sandbox-network", "--yolo"]);
    assert_eq!(
        k.initialize()["result"]["sandbox"],
        json!({"mode": "read-only", "network": true, "writable_roots": [], "escalation": false})
    );
    for flags in [&[][..], &["--sandbox", "danger-full-access"][..]] {
        let mut k = env.spawn(&config, flags);
        assert!(k.initialize()["result"].get("sandbox").is_none());
    }
}

#[test]
fn an_invalid_mode_is_a_usage_error() {
    let env = Env::new();
    let config = config(&env, &["text: x"], json!({}));
    let out = env.command(&config, &["--sandbox", "bogus"]).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines[0], "error: invalid value 'bogus' for '--sandbox <MODE>'");
    assert_eq!(lines[1], "  [possible values: read-only, workspace-write, off]");
    assert!(err.contains("For more information, try '--help'."));
    // An invalid config mode stops the start-up too.
    let bad = env.scripted_config_with(&["text: x"], json!({"sandbox": {"mode": "bogus"}}));
    let out = env.command(&bad, &[]).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("sandbox.mode: unknown variant `bogus`"), "{err}");
    assert!(Path::new(&bad).exists());
}

/// `kiwi acp` with `flags`, initialized, and one session in the work dir.
fn acp_session(env: &Env, config: &Path, flags: &[&str]) -> (Kiwi, String, Value) {
    let mut k = Kiwi::spawn(env.acp_command(config, flags));
    let (_, init) = k.call("init", "initialize", json!({"protocolVersion": 1, "clientCapabilities": {}}));
    assert!(init.get("result").is_some(), "{init}");
    let (_, r) = k.call("new", "session/new", json!({"cwd": env.work(), "mcpServers": []}));
    let id = r["result"]["sessionId"].as_str().expect("a session id").to_string();
    (k, id, r["result"].clone())
}

fn sandbox_option(result: &Value) -> Option<Value> {
    result["configOptions"].as_array().unwrap().iter().find(|o| o["id"] == "sandbox").cloned()
}

#[test]
fn acp_offers_the_sandbox_option_and_refuses_to_loosen_it() {
    let env = Env::new();
    let (target, command) = escape(&env);
    let config = config(&env, &[&shell("a", &command), "text: done"], json!({}));
    let (mut k, id, result) = acp_session(&env, &config, &["--sandbox", "workspace-write"]);
    assert_eq!(
        sandbox_option(&result).unwrap(),
        json!({"id": "sandbox", "name": "Sandbox", "type": "select", "currentValue": "workspace-write", "options": [
            {"value": "read-only", "name": "Read only"},
            {"value": "workspace-write", "name": "Workspace write"},
            {"value": "off", "name": "Off"}]})
    );
    let (_, r) =
        k.call("off", "session/set_config_option", json!({"sessionId": id, "configId": "sandbox", "value": "off"}));
    assert_eq!(r["error"]["code"], -32602);
    assert_eq!(
        r["error"]["data"],
        json!({"error": "the sandbox cannot be loosened below workspace-write in this run"})
    );
    let (_, r) = k.call(
        "ro",
        "session/set_config_option",
        json!({"sessionId": id, "configId": "sandbox", "value": "read-only"}),
    );
    assert_eq!(sandbox_option(&r["result"]).unwrap()["currentValue"], "read-only");
    // A sandboxed Shell call asks nothing and cannot write outside.
    let (messages, r) =
        k.call("p", "session/prompt", json!({"sessionId": id, "prompt": [{"type": "text", "text": "go"}]}));
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert!(!messages.iter().any(|m| m["method"] == "session/request_permission"));
    assert!(!target.exists());
    // Without the sandbox the reference's options only.
    let (_, _, result) = acp_session(&env, &config, &[]);
    assert!(sandbox_option(&result).is_none());
}

/// A Claude-dialect run with [`config`]'s sandbox table and `more` arguments, prompt `go`.
fn claude_run(env: &Env, scripts: &[&str], more: &[&str]) -> ClaudeOut {
    let config = config(env, scripts, json!({}));
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kiwi"));
    cmd.args(["-p", "--output-format", "stream-json", "--verbose"]).args(more);
    cmd.arg("--config-file").arg(&config).arg("--work-dir").arg(env.work()).arg("go");
    cmd.env("HOME", env.home()).env("KIMI_SHARE_DIR", env.share()).current_dir(env.dir.path());
    for var in ["KIMI_SCRIPTED_ECHO_TRACE", "KIMI_DIALECT", "KIMI_API_KEY", "OPENAI_API_KEY"] {
        cmd.env_remove(var);
    }
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    ClaudeOut {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A finished Claude-dialect run.
struct ClaudeOut {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

#[test]
fn the_claude_dialect_reads_the_sdks_sandbox_settings() {
    let env = Env::new();
    let (target, command) = escape(&env);
    let scripts = [shell("a", &command), "text: done".to_string()];
    let scripts: Vec<&str> = scripts.iter().map(String::as_str).collect();
    let settings = json!({"model": "ignored", "sandbox": {"enabled": true, "excludedCommands": ["docker"],
        "network": {"allowedDomains": ["example.com"]}}})
    .to_string();
    let r = claude_run(&env, &scripts, &["--dangerously-skip-permissions", "--settings", &settings]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(!target.exists(), "the host asked for a sandbox");
    assert!(r.stderr.contains("sandbox.excludedCommands is not supported"), "{}", r.stderr);
    assert!(r.stderr.contains("the network stays blocked for example.com"), "{}", r.stderr);
    // The same run with the settings in a file, `enabled: false`: no sandbox.
    std::fs::write(env.dir.path().join("settings.json"), r#"{"sandbox": {"enabled": false}}"#).unwrap();
    let r = claude_run(&env, &scripts, &["--dangerously-skip-permissions", "--settings", "settings.json"]);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(target.exists());
    // Settings that cannot be read stop the start-up.
    let r = claude_run(&env, &scripts, &["--settings", "missing.json"]);
    assert_eq!(r.code, Some(1));
    assert!(r.stdout.is_empty());
    assert!(r.stderr.starts_with("Cannot read --settings: "), "{}", r.stderr);
    let r = claude_run(&env, &scripts, &["--settings", "{not json"]);
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.starts_with("Cannot read --settings: "), "{}", r.stderr);
}

#[test]
fn kiwi_web_takes_the_sandbox_flag_and_shows_it_in_the_config() {
    let home = super::web_kit::Home::new();
    home.scripted(&["text: x".to_string()]);
    let server = home.serve(&["--sandbox", "workspace-write"]);
    let (status, config) = server.get_json("/api/config/");
    assert_eq!(status, 200);
    assert_eq!(config["sandbox"], json!({"mode": "workspace-write", "network": false}));
    drop(server);
    // Without the flag the default config's `[sandbox]` applies.
    let text = std::fs::read_to_string(home.share().join("config.toml")).unwrap();
    std::fs::write(
        home.share().join("config.toml"),
        format!("{text}\n[sandbox]\nmode = \"read-only\"\nnetwork = true\n"),
    )
    .unwrap();
    let server = home.serve(&[]);
    assert_eq!(server.get_json("/api/config/").1["sandbox"], json!({"mode": "read-only", "network": true}));
    drop(server);
    let server = home.serve(&["--sandbox", "off"]);
    assert_eq!(server.get_json("/api/config/").1["sandbox"], json!({"mode": "off", "network": true}));
}

#[test]
fn glob_and_grep_skip_denied_paths() {
    let env = Env::new();
    let denied = env.work().join("private");
    std::fs::create_dir_all(&denied).unwrap();
    std::fs::write(denied.join("key.txt"), "s3cret").unwrap();
    std::fs::create_dir_all(env.work().join("pub")).unwrap();
    std::fs::write(env.work().join("pub/open.txt"), "s3cret too").unwrap();
    let run = |flags: &[&str]| {
        let scripts = [
            call("g", "Glob", json!({"pattern": "*/*.txt"})),
            call("r", "Grep", json!({"pattern": "s3cret", "output_mode": "files_with_matches"})),
            "text: done".to_string(),
        ];
        let scripts: Vec<&str> = scripts.iter().map(String::as_str).collect();
        let config = config(&env, &scripts, json!({"deny_read": [denied.to_str().unwrap()]}));
        let mut k = env.spawn(&config, flags);
        results(&turn_without_requests(&mut k))
    };
    let r = run(&["--sandbox", "workspace-write"]);
    for (i, result) in r.iter().enumerate() {
        let output = result["output"].as_str().unwrap();
        assert!(output.contains("open.txt") && !output.contains("key.txt"), "call {i}: {result}");
    }
    let r = run(&[]);
    for result in &r {
        assert!(result["output"].as_str().unwrap().contains("key.txt"), "{result}");
    }
}

/// Runs kiwi under a seccomp filter that makes `landlock_create_ruleset` (444 on every
/// architecture) fail with ENOSYS, as on a kernel without Landlock (spec sandbox.md §5.3).
const WITHOUT_LANDLOCK: &str = r#"
import ctypes, os, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
prog = [(0x20, 0, 0, 0), (0x15, 0, 1, 444), (0x06, 0, 0, 0x00050000 | 38), (0x06, 0, 0, 0x7fff0000)]
buf = b"".join(struct.pack("HBBI", *f) for f in prog)
filt = ctypes.create_string_buffer(buf)
fprog = struct.pack("HxxxxxxP", len(prog), ctypes.addressof(filt))
fbuf = ctypes.create_string_buffer(fprog)
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
assert libc.prctl(38, 1, 0, 0, 0) == 0
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
assert libc.prctl(22, 2, ctypes.addressof(fbuf), 0, 0) == 0, ctypes.get_errno()
os.execv(sys.argv[1], sys.argv[1:])
"#;

#[test]
fn a_sandbox_that_cannot_be_set_up_stops_the_start_up() {
    let env = Env::new();
    let config = config(&env, &["text: x"], json!({}));
    let run = |flags: &[&str]| {
        let wire = env.command(&config, flags);
        let mut cmd = std::process::Command::new("python3");
        cmd.arg("-c").arg(WITHOUT_LANDLOCK).arg(wire.get_program()).args(wire.get_args());
        cmd.envs(wire.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))));
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let line = json!({"jsonrpc":"2.0","id":"1","method":"initialize","params":{"protocol_version":"1.2"}});
        let mut stdin = child.stdin.take().unwrap();
        let _ = std::io::Write::write_all(&mut stdin, format!("{line}\n").as_bytes());
        drop(stdin);
        child.wait_with_output().unwrap()
    };
    let out = run(&["--sandbox", "workspace-write"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines[0],
        "Cannot start the sandbox (workspace-write): Landlock is not available (landlock_create_ruleset: Function \
         not implemented); use --sandbox off to run commands without it"
    );
    assert_eq!(lines[1], format!("See logs: {}", env.share().join("logs/kiwi.log").display()));
    // The same machine serves without the sandbox.
    let out = run(&[]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"protocol_version\":\"1.10\""));
}

/// ACP's escalation (spec sandbox.md §2.5): `session/request_permission` titled `Run command
/// outside the sandbox`, kind `execute`, only a once-approve and a once-reject; approved, the one
/// command runs unconfined; rejected, it does not run.
#[test]
fn acp_asks_for_an_escalation_with_once_only_options() {
    for (option, written) in [("approve", true), ("reject", false)] {
        let env = Env::new();
        let (target, command) = escape(&env);
        let esc = escalated("e", &command, "needs it");
        let config = config(&env, &[&esc, "text: done"], json!({}));
        let (mut k, id, _) = acp_session(&env, &config, &["--sandbox", "workspace-write"]);
        k.send(json!({"jsonrpc": "2.0", "id": "p", "method": "session/prompt",
            "params": {"sessionId": id, "prompt": [{"type": "text", "text": "go"}]}}));
        let request = loop {
            let m = k.next();
            if m["method"] == "session/request_permission" {
                break m;
            }
        };
        let params = &request["params"];
        assert_eq!(params["toolCall"]["title"], "Run command outside the sandbox", "{request}");
        assert_eq!(params["toolCall"]["kind"], "execute", "{request}");
        let kinds: Vec<&str> =
            params["options"].as_array().unwrap().iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["allow_once", "reject_once"], "{request}");
        let chosen =
            params["options"].as_array().unwrap().iter().find(|o| o["optionId"] == option).expect("the option");
        k.send(json!({"jsonrpc": "2.0", "id": request["id"],
            "result": {"outcome": {"outcome": "selected", "optionId": chosen["optionId"]}}}));
        let (_, r) = k.until_response(&json!("p"));
        assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
        assert_eq!(target.exists(), written, "{option}");
    }
}
