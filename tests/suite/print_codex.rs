//! The codex exec dialect on the raw process (`docs/codex-exec.md`): `kiwi exec
//! --experimental-json` as `@openai/codex-sdk` spawns it, every event and item kind, threads and
//! their usage total, the sandbox mapping, and every bad command line, config key and input
//! (one stderr line, nothing on stdout). The published SDK drives the same in `print_codex_sdk`.

use crate::mcp;
use crate::print_support::Dirs;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

/// A finished `kiwi exec` process.
struct Exec {
    code: Option<i32>,
    lines: Vec<Value>,
    stdout: String,
    stderr: String,
}

impl Exec {
    fn types(&self) -> Vec<String> {
        self.lines
            .iter()
            .map(|l| match l["item"]["type"].as_str() {
                Some(item) => format!("{}:{item}", l["type"].as_str().unwrap()),
                None => l["type"].as_str().unwrap().to_string(),
            })
            .collect()
    }

    fn completed(&self, kind: &str) -> Vec<&Value> {
        self.lines
            .iter()
            .filter(|l| l["type"] == "item.completed" && l["item"]["type"] == kind)
            .map(|l| &l["item"])
            .collect()
    }

    fn thread_id(&self) -> String {
        self.lines[0]["thread_id"].as_str().unwrap().to_string()
    }
}

fn call(id: &str, name: &str, arguments: Value) -> String {
    format!("tool_call: {}", json!({"id": id, "name": name, "arguments": arguments.to_string()}))
}

/// The codex command line the SDK builds, kiwi's config named by `kiwi.config_file`.
fn command(d: &Dirs, config: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kiwi"));
    cmd.args(["exec", "--experimental-json"])
        .arg("--config")
        .arg(format!("kiwi.config_file={:?}", config.to_str().unwrap()))
        .args(args);
    cmd.env("HOME", d.dir.path().join("home")).env("KIMI_SHARE_DIR", d.share()).current_dir(d.work());
    for var in ["KIMI_SCRIPTED_ECHO_TRACE", "KIMI_DIALECT", "CODEX_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_KEY"] {
        cmd.env_remove(var);
    }
    cmd
}

fn run(mut cmd: Command, stdin: &str) -> Exec {
    let mut child =
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn kiwi exec");
    // A refused command line can end the process before it reads stdin (a broken pipe here).
    let _ = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines = stdout.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|_| panic!("not JSON: {l}"))).collect();
    Exec { code: output.status.code(), lines, stdout, stderr: String::from_utf8_lossy(&output.stderr).into() }
}

/// One turn in the work dir (`--cd`, no git check) with `scripts`.
fn turn(d: &Dirs, scripts: &[&str], extra: &[&str]) -> Exec {
    let config = d.scripted(scripts);
    let work = d.work();
    let mut args = vec!["--cd", work.to_str().unwrap(), "--skip-git-repo-check"];
    args.extend(extra);
    run(command(d, &config, &args), "go")
}

/// A start-up failure: the exit status, nothing on stdout, and the one stderr line wanted.
fn refused(exec: &Exec, code: i32, line: &str) {
    assert_eq!(exec.code, Some(code), "{}", exec.stderr);
    assert_eq!(exec.stdout, "", "nothing on stdout");
    assert!(exec.stderr.contains(line), "stderr {:?} lacks {line:?}", exec.stderr);
}

#[test]
fn text_and_reasoning_end_with_the_usage() {
    let d = Dirs::new();
    let exec = turn(
        &d,
        &["think: hm\nthink: m\ntext: Hello\ntext:  there\nusage: input_other=5 output=2 input_cache_read=3"],
        &[],
    );
    assert_eq!(exec.code, Some(0), "{}", exec.stderr);
    assert_eq!(
        exec.types(),
        [
            "thread.started",
            "turn.started",
            "item.completed:reasoning",
            "item.completed:agent_message",
            "turn.completed"
        ]
    );
    assert_eq!(exec.lines[2]["item"], json!({"id": "item_0", "type": "reasoning", "text": "hmm"}));
    assert_eq!(exec.lines[3]["item"], json!({"id": "item_1", "type": "agent_message", "text": "Hello there"}));
    assert_eq!(
        exec.lines[4]["usage"],
        json!({"input_tokens": 8, "cached_input_tokens": 3, "cache_write_input_tokens": 0, "output_tokens": 2, "reasoning_output_tokens": 0})
    );
    assert!(uuid::Uuid::parse_str(&exec.thread_id()).is_ok());
}

/// Start-up warnings (here a config typo) are `error` items right after `thread.started`, as
/// codex reports its config warnings, and stay on stderr too; the turn's items count on.
#[test]
fn start_up_warnings_are_error_items_before_the_turn() {
    let d = Dirs::new();
    let config = d.scripted(&["text: ok"]);
    let mut document: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    document["defualt_thinking"] = json!(true);
    std::fs::write(&config, document.to_string()).unwrap();
    let work = d.work();
    let exec = run(command(&d, &config, &["--cd", work.to_str().unwrap(), "--skip-git-repo-check"]), "go");
    assert_eq!(exec.code, Some(0), "{}", exec.stderr);
    assert_eq!(
        exec.types(),
        ["thread.started", "item.completed:error", "turn.started", "item.completed:agent_message", "turn.completed"]
    );
    let message = exec.lines[1]["item"]["message"].as_str().unwrap();
    assert!(message.contains("unknown key 'defualt_thinking'"), "{message}");
    assert_eq!(exec.lines[1]["item"]["id"], "item_0");
    assert_eq!(exec.lines[3]["item"]["id"], "item_1");
    assert!(exec.stderr.contains("unknown key 'defualt_thinking'"), "{}", exec.stderr);
}

#[test]
fn commands_are_command_execution_items() {
    let d = Dirs::new();
    let exec = turn(
        &d,
        &[
            &call("c1", "Shell", json!({"command": "echo out"})),
            &call("c2", "Shell", json!({"command": "echo err >&2; exit 3"})),
            "text: done",
        ],
        &[],
    );
    assert_eq!(exec.code, Some(0), "{}", exec.stderr);
    let started: Vec<&Value> = exec.lines.iter().filter(|l| l["type"] == "item.started").collect();
    assert_eq!(
        started[0]["item"],
        json!({"id": "item_0", "type": "command_execution", "command": "echo out", "aggregated_output": "", "exit_code": null, "status": "in_progress"})
    );
    let done = exec.completed("command_execution");
    assert_eq!(
        (done[0]["aggregated_output"].as_str(), done[0]["exit_code"].as_i64(), done[0]["status"].as_str()),
        (Some("out\n"), Some(0), Some("completed"))
    );
    assert_eq!(
        (done[1]["aggregated_output"].as_str(), done[1]["exit_code"].as_i64(), done[1]["status"].as_str()),
        (Some("err\n"), Some(3), Some("failed"))
    );
    assert_eq!(exec.completed("agent_message")[0]["text"], "done");
}

#[test]
fn file_edits_are_file_change_items_under_workspace_write() {
    let d = Dirs::new();
    std::fs::write(d.work().join("old.txt"), "one\n").unwrap();
    let exec = turn(
        &d,
        &[
            &call("w1", "WriteFile", json!({"path": "new.txt", "content": "hi\n"})),
            &call("w2", "StrReplaceFile", json!({"path": "old.txt", "edit": {"old": "one", "new": "two"}})),
            &call("w3", "StrReplaceFile", json!({"path": "missing.txt", "edit": {"old": "a", "new": "b"}})),
            "text: edited",
        ],
        &["--sandbox", "workspace-write"],
    );
    assert_eq!(exec.code, Some(0), "{}", exec.stderr);
    let changes: Vec<&Value> = exec.completed("file_change");
    let work = d.work();
    assert_eq!(changes.len(), 2, "a failed edit is no item: {:?}", exec.types());
    assert_eq!(changes[0]["changes"], json!([{"path": work.join("new.txt").to_str().unwrap(), "kind": "add"}]));
    assert_eq!(changes[1]["changes"], json!([{"path": work.join("old.txt").to_str().unwrap(), "kind": "update"}]));
    assert_eq!(changes[1]["status"], "completed");
    assert_eq!(std::fs::read_to_string(work.join("old.txt")).unwrap(), "two\n");
    let started =
        exec.lines.iter().filter(|l| l["type"] == "item.started" && l["item"]["type"] == "file_change").count();
    assert_eq!(started, 2);
}

#[test]
fn read_only_is_the_default_sandbox() {
    let d = Dirs::new();
    let exec = turn(
        &d,
        &[
            &call("w1", "WriteFile", json!({"path": "x.txt", "content": "no"})),
            &call("s1", "Shell", json!({"command": "touch y.txt"})),
            "text: tried",
        ],
        &[],
    );
    assert_eq!(exec.code, Some(0), "{}", exec.stderr);
    assert!(exec.completed("file_change").is_empty());
    assert!(!d.work().join("x.txt").exists() && !d.work().join("y.txt").exists());
    let shell = exec.completed("command_execution");
    assert_eq!(shell[0]["status"], "failed");
    assert!(shell[0]["aggregated_output"].as_str().unwrap().contains("Read-only file system"), "{}", shell[0]);
    // danger-full-access runs it unconfined.
    let exec = turn(
        &d,
        &[&call("s1", "Shell", json!({"command": "touch y.txt"})), "text: ok"],
        &["--sandbox", "danger-full-access"],
    );
    assert_eq!(exec.completed("command_execution")[0]["status"], "completed");
    assert!(d.work().join("y.txt").exists());
}

#[test]
fn the_todo_list_is_one_item() {
    let d = Dirs::new();
    let list =
        |done: &str| json!({"todos": [{"title": "inspect", "status": "done"}, {"title": "fix", "status": done}]});
    let exec = turn(
        &d,
        &[&call("t1", "SetTodoList", list("pending")), &call("t2", "SetTodoList", list("done")), "text: finished"],
        &[],
    );
    assert_eq!(exec.code, Some(0), "{}", exec.stderr);
    assert_eq!(
        exec.types(),
        [
            "thread.started",
            "turn.started",
            "item.started:todo_list",
            "item.updated:todo_list",
            "item.completed:agent_message",
            "item.completed:todo_list",
            "turn.completed"
        ]
    );
    assert_eq!(
        exec.lines[2]["item"]["items"],
        json!([{"text": "inspect", "completed": true}, {"text": "fix", "completed": false}])
    );
    assert_eq!(exec.lines[5]["item"]["items"][1], json!({"text": "fix", "completed": true}));
    assert_eq!(exec.lines[2]["item"]["id"], exec.lines[5]["item"]["id"]);
}

#[test]
fn mcp_tools_from_config_keys_are_mcp_tool_call_items() {
    let d = Dirs::new();
    let server = mcp::test_server();
    let key = format!("mcp_servers.tst.command={:?}", server.to_str().unwrap());
    let exec = turn(
        &d,
        &[
            &call("m1", "echo", json!({"text": "hi"})),
            &call("m2", "fail", json!({})),
            &call("m3", "boom", json!({})),
            "text: done",
        ],
        &[
            "--sandbox",
            "workspace-write",
            "--config",
            &key,
            "--config",
            "mcp_servers.tst.args=[]",
            "--config",
            "mcp_servers.tst.startup_timeout_sec=5",
        ],
    );
    assert_eq!(exec.code, Some(0), "{}", exec.stderr);
    assert!(exec.stderr.contains("kiwi: ignoring --config mcp_servers.tst.startup_timeout_sec"), "{}", exec.stderr);
    let calls = exec.completed("mcp_tool_call");
    assert_eq!(
        calls[0],
        &json!({"id": "item_0", "type": "mcp_tool_call", "server": "tst", "tool": "echo", "arguments": {"text": "hi"},
            "result": {"content": [{"type": "text", "text": "pong:hi"}], "structured_content": null}, "error": null, "status": "completed"})
    );
    assert_eq!(
        (calls[1]["status"].as_str(), calls[1]["result"]["content"][0]["text"].as_str()),
        (Some("failed"), Some("it went wrong"))
    );
    assert_eq!(calls[2]["status"], "failed");
    assert!(
        calls[2]["result"].is_null() && calls[2]["error"]["message"].as_str().unwrap().contains("server exploded"),
        "{}",
        calls[2]
    );
}

#[test]
fn provider_errors_fail_the_turn_and_retries_are_error_events() {
    let d = Dirs::new();
    let exec = turn(&d, &["error: 401 Token expired"], &[]);
    assert_eq!(exec.code, Some(1));
    assert_eq!(exec.types(), ["thread.started", "turn.started", "error", "turn.failed"]);
    assert_eq!(exec.lines[2], json!({"type": "error", "message": "Token expired"}));
    assert_eq!(exec.lines[3], json!({"type": "turn.failed", "error": {"message": "Token expired"}}));
    let exec = turn(&d, &["error: 503 busy", "text: recovered"], &[]);
    assert_eq!(exec.code, Some(0), "{}", exec.stderr);
    assert_eq!(exec.lines[2]["type"], "error");
    assert!(exec.lines[2]["message"].as_str().unwrap().starts_with("Reconnecting... 1/"), "{}", exec.lines[2]);
    assert_eq!(exec.completed("agent_message")[0]["text"], "recovered");
    let exec = turn(&d, &[], &[]);
    assert_eq!(exec.lines.last().unwrap()["error"]["message"], "ScriptedEchoChatProvider exhausted at turn 1.");
}

#[test]
fn threads_resume_with_a_running_usage_total() {
    let d = Dirs::new();
    let first = turn(&d, &["text: one\nusage: input_other=10 output=1"], &[]);
    let id = first.thread_id();
    let second = turn(&d, &["text: two\nusage: input_other=20 output=2"], &["resume", &id]);
    assert_eq!(second.code, Some(0), "{}", second.stderr);
    assert_eq!(second.thread_id(), id);
    assert_eq!(second.lines.last().unwrap()["usage"]["input_tokens"], 30);
    // From another directory (the SDK may pass another --cd): found by id, run in its own.
    let elsewhere = d.dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let config = d.scripted(&["text: three\nusage: input_other=40 output=4"]);
    let third =
        run(command(&d, &config, &["--cd", elsewhere.to_str().unwrap(), "--skip-git-repo-check", "resume", &id]), "x");
    assert_eq!(third.code, Some(0), "{}", third.stderr);
    assert_eq!(
        (third.thread_id(), third.lines.last().unwrap()["usage"]["output_tokens"].as_u64()),
        (id.clone(), Some(7))
    );
    let last = turn(&d, &["text: four"], &["resume", "--last"]);
    assert_eq!(last.thread_id(), id);
    let unknown = turn(&d, &["text: x"], &["resume", "019a1b2c-3d4e-7f50-8a61-b2c3d4e5f607"]);
    refused(&unknown, 1, "kiwi: no thread found with id 019a1b2c-3d4e-7f50-8a61-b2c3d4e5f607");
}

#[test]
fn the_output_schema_reaches_the_instructions_and_o_writes_the_answer() {
    let d = Dirs::new();
    let schema = d.dir.path().join("schema.json");
    std::fs::write(&schema, r#"{"type":"object","properties":{"n":{"type":"number"}}}"#).unwrap();
    let answer = d.dir.path().join("last.txt");
    let exec = turn(
        &d,
        &[r#"text: {"n": 1}"#],
        &["--output-schema", schema.to_str().unwrap(), "-o", answer.to_str().unwrap()],
    );
    assert_eq!(exec.code, Some(0), "{}", exec.stderr);
    assert_eq!(std::fs::read_to_string(&answer).unwrap(), r#"{"n": 1}"#);
    let context = std::fs::read_to_string(session_dir(&d, &exec.thread_id()).join("context.jsonl")).unwrap();
    let prompt: Value = serde_json::from_str(context.lines().next().unwrap()).unwrap();
    assert!(
        prompt["content"].as_str().unwrap().contains(r#"{"type":"object","properties":{"n":{"type":"number"}}}"#),
        "{prompt}"
    );
}

fn session_dir(d: &Dirs, id: &str) -> PathBuf {
    let sessions = d.share().join("sessions");
    std::fs::read_dir(&sessions).unwrap().map(|e| e.unwrap().path().join(id)).find(|p| p.is_dir()).unwrap()
}

#[test]
fn images_go_before_the_text() {
    let d = Dirs::new();
    let png = d.dir.path().join("dot.png");
    std::fs::write(&png, b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0").unwrap();
    let scripts = d.dir.path().join("s.json");
    std::fs::write(&scripts, json!(["text: a dot"]).to_string()).unwrap();
    let config = d.config(json!({
        "default_model": "v",
        "models": {"v": {"provider": "p", "model": "scripted_echo", "max_context_size": 100000, "capabilities": ["image_in"]}},
        "providers": {"p": {"type": "_scripted_echo", "base_url": "", "api_key": "", "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": scripts.to_str().unwrap()}}}
    }));
    let work = d.work();
    let exec = run(
        command(
            &d,
            &config,
            &["--cd", work.to_str().unwrap(), "--skip-git-repo-check", "--image", png.to_str().unwrap()],
        ),
        "what?",
    );
    assert_eq!(exec.code, Some(0), "{}", exec.stderr);
    let wire = std::fs::read_to_string(session_dir(&d, &exec.thread_id()).join("wire.jsonl")).unwrap();
    let begin: Value = wire
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|r| r["message"]["type"] == "TurnBegin")
        .unwrap();
    let input = &begin["message"]["payload"]["user_input"];
    assert!(input[0]["image_url"]["url"].as_str().unwrap().starts_with("data:image/png;base64,"));
    assert_eq!(input[1], json!({"type": "text", "text": "what?"}));
    // A model without image_in fails the turn with the capability error.
    let exec = turn(&d, &["text: x"], &["--image", png.to_str().unwrap()]);
    assert_eq!(exec.code, Some(1));
    assert!(exec.lines.last().unwrap()["error"]["message"].as_str().unwrap().contains("image_in"), "{}", exec.stdout);
}

#[test]
fn a_signal_ends_the_turn_without_another_line() {
    let d = Dirs::new();
    let config = d.scripted(&[&call("s1", "Shell", json!({"command": "sleep 30"})), "text: never"]);
    let work = d.work();
    let mut child = command(
        &d,
        &config,
        &["--cd", work.to_str().unwrap(), "--skip-git-repo-check", "--sandbox", "danger-full-access"],
    )
    .stdin(Stdio::piped())
    .stdout(Stdio::piped())
    .stderr(Stdio::null())
    .spawn()
    .unwrap();
    child.stdin.take().unwrap().write_all(b"wait").unwrap();
    let mut reader = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        assert!(std::io::BufRead::read_line(&mut reader, &mut line).unwrap() > 0, "stdout closed early: {lines:?}");
        let started = line.contains(r#""type":"item.started""#);
        lines.push(line);
        if started {
            break;
        }
    }
    // SAFETY: signalling the child we spawned.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut reader, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(rest, "", "no line after the signal");
    assert_eq!(status.code(), Some(1));
}

#[test]
fn bad_command_lines_and_keys_are_refused_with_one_line() {
    let d = Dirs::new();
    let config = d.scripted(&["text: hi"]);
    let work = d.work().to_str().unwrap().to_string();
    let base = ["--cd", work.as_str(), "--skip-git-repo-check"];
    let with = |extra: &[&str]| -> Vec<String> { base.iter().chain(extra).map(|s| s.to_string()).collect() };
    let exec_run = |args: Vec<String>, stdin: &str| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(command(&d, &config, &args), stdin)
    };
    // Human mode (no JSON flag).
    let mut plain = Command::new(env!("CARGO_BIN_EXE_kiwi"));
    plain.args(["exec", "hi"]).env("KIMI_SHARE_DIR", d.share());
    refused(&run(plain, ""), 2, "kiwi: codex exec without --json is not supported");
    refused(&exec_run(with(&["--nope"]), "x"), 2, "kiwi: unexpected argument '--nope' for codex exec");
    refused(&exec_run(with(&["--sandbox", "bogus"]), "x"), 2, "invalid value 'bogus' for '--sandbox");
    refused(&exec_run(with(&["--oss"]), "x"), 2, "kiwi: --oss is not supported");
    refused(&exec_run(with(&["--cyber-access-program", "p"]), "x"), 1, "kiwi: --cyber-access-program is not supported");
    refused(&exec_run(with(&[]), " \n"), 1, "No prompt provided via stdin.");
    refused(&exec_run(with(&["--model", "nope"]), "x"), 1, "kiwi: unknown model 'nope'");
    refused(&exec_run(with(&["--config", "no_equals"]), "x"), 2, "kiwi: --config needs key=value");
    refused(
        &exec_run(with(&["--config", "approval_policy=\"untrusted\""]), "x"),
        1,
        "approval_policy = \"untrusted\" is no longer supported; remove this setting",
    );
    refused(
        &exec_run(with(&["--config", "openai_base_url=\"http://127.0.0.1:9/v1\""]), "x"),
        1,
        "kiwi: openai_base_url needs an OpenAI-compatible provider",
    );
    refused(&exec_run(with(&["--output-schema", "/nonexistent/s.json"]), "x"), 1, "kiwi: cannot read --output-schema");
    refused(&exec_run(with(&["--image", "/nonexistent/a.png"]), "x"), 1, "kiwi: cannot read --image");
    refused(
        &exec_run(vec!["--cd".into(), "/nonexistent/dir".into()], "x"),
        1,
        "kiwi: --cd /nonexistent/dir: No such file or directory",
    );
    refused(
        &exec_run(vec!["--cd".into(), work.clone()], "x"),
        1,
        "Not inside a trusted directory and --skip-git-repo-check was not specified.",
    );
    // Inside a git work tree the check passes; unknown keys are one note each.
    std::fs::create_dir_all(d.work().join(".git")).unwrap();
    let ok = exec_run(vec!["--cd".into(), work.clone(), "--config".into(), "features.apps=false".into()], "x");
    assert_eq!(ok.code, Some(0), "{}", ok.stderr);
    assert!(ok.stderr.contains("kiwi: ignoring --config features.apps: kiwi has no such setting"), "{}", ok.stderr);
}
