//! Approvals over the wire: approve, approve_for_session, reject, yolo, display blocks, cancel.

use crate::common;

use std::time::{Duration, Instant};

use common::{Env, types};
use serde_json::{Value, json};

fn shell(id: &str, command: &str) -> String {
    let args = serde_json::to_string(&json!({ "command": command })).unwrap();
    format!("tool_call: {}", json!({"id": id, "name": "Shell", "arguments": args}))
}

fn answer(k: &mut common::Kiwi, request: &Value, response: &str) {
    let id = request["id"].clone();
    k.send(json!({"jsonrpc":"2.0","id":id,"result":{"request_id":id,"response":response}}));
}

#[test]
fn approve_runs_the_command() {
    let env = Env::new();
    let config = env.scripted_config(&[&shell("tc-1", "echo hi"), "text: done"]);
    let mut k = env.spawn(&config, &[]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let (before, request) = k.until_request();
    assert_eq!(types(&before), ["TurnBegin", "StepBegin", "ToolCall", "StatusUpdate"]);
    let payload = &request["params"]["payload"];
    assert_eq!(request["id"], payload["id"]);
    assert_eq!(request["params"]["type"], "ApprovalRequest");
    assert_eq!(payload["tool_call_id"], "tc-1");
    assert_eq!(payload["sender"], "Shell");
    assert_eq!(payload["action"], "run command");
    assert_eq!(payload["description"], "Run command `echo hi`");
    assert_eq!(payload["display"], json!([{"type":"shell","language":"bash","command":"echo hi"}]));
    // `docs/protocol-1.10.md` §3.4: the source members, in order, before `display`.
    let keys: Vec<&String> = payload.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "id",
            "tool_call_id",
            "sender",
            "action",
            "description",
            "source_kind",
            "source_id",
            "agent_id",
            "subagent_type",
            "source_description",
            "display"
        ]
    );
    assert_eq!(payload["source_kind"], "foreground_turn");
    let source = payload["source_id"].as_str().unwrap();
    assert!(source.len() == 32 && source.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    assert_eq!((&payload["agent_id"], &payload["subagent_type"]), (&Value::Null, &Value::Null));
    answer(&mut k, &request, "approve");
    let (events, response) = k.until_response(&json!("p0"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(
        types(&events),
        ["ApprovalResponse", "ToolResult", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd"]
    );
    assert_eq!(
        events[0]["params"]["payload"],
        json!({"request_id": request["id"], "response": "approve", "feedback": ""})
    );
    assert_eq!(
        events[1]["params"]["payload"]["return_value"],
        json!({"is_error":false,"output":"hi\n","message":"Command executed successfully.","display":[],"extras":null})
    );
}

#[test]
fn reject_ends_the_turn_after_the_step() {
    let env = Env::new();
    let config = env.scripted_config(&[&shell("tc-1", "touch should-not-exist"), "text: never"]);
    let mut k = env.spawn(&config, &[]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let (_, request) = k.until_request();
    answer(&mut k, &request, "reject");
    let (events, response) = k.until_response(&json!("p0"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(types(&events), ["ApprovalResponse", "ToolResult", "TurnEnd"]);
    assert_eq!(
        events[1]["params"]["payload"]["return_value"],
        // `docs/protocol-1.10.md` §3.5: the 1.10 wording of a plain rejection.
        json!({"is_error":true,"output":"","message":"The tool call is rejected by the user. Stop what you are doing and wait for the user to tell you how to proceed.","display":[{"type":"brief","text":"Rejected by user"}],"extras":null})
    );
    assert!(!env.work().join("should-not-exist").exists());
}

#[test]
fn error_or_invalid_answers_count_as_reject() {
    let env = Env::new();
    let config = env.scripted_config(&[&shell("a", "true"), &shell("b", "true")]);
    let mut k = env.spawn(&config, &[]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let (_, request) = k.until_request();
    k.send(json!({"jsonrpc":"2.0","id":request["id"],"error":{"code":-1,"message":"no"}}));
    let (events, _) = k.until_response(&json!("p0"));
    assert_eq!(events[0]["params"]["payload"]["response"], "reject");
    k.send(json!({"jsonrpc":"2.0","id":"p1","method":"prompt","params":{"user_input":"go"}}));
    let (_, request) = k.until_request();
    // A 1.0-style answer without request_id is invalid and therefore a reject.
    k.send(json!({"jsonrpc":"2.0","id":request["id"],"result":{"response":"approve"}}));
    let (events, _) = k.until_response(&json!("p1"));
    assert_eq!(events[0]["params"]["payload"]["response"], "reject");
}

#[test]
fn approve_for_session_skips_later_requests() {
    let env = Env::new();
    let config = env.scripted_config(&[&shell("a", "echo one"), "text: ok", &shell("b", "echo two"), "text: ok"]);
    let mut k = env.spawn(&config, &[]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let (_, request) = k.until_request();
    answer(&mut k, &request, "approve_for_session");
    k.until_response(&json!("p0"));
    let (events, response) = k.prompt("p1", json!("again"));
    assert_eq!(response["result"]["status"], "finished");
    assert!(!types(&events).iter().any(|t| t.starts_with("request") || t == "ApprovalResponse"));
    let result = events.iter().find(|e| e["params"]["type"] == "ToolResult").unwrap();
    assert_eq!(result["params"]["payload"]["return_value"]["output"], "two\n");
}

#[test]
fn yolo_flag_and_command_skip_approvals() {
    let env = Env::new();
    let config = env.scripted_config(&[&shell("a", "echo y"), "text: ok", &shell("b", "echo z"), "text: ok"]);
    let mut k = env.spawn(&config, &["--yolo"]);
    let (events, _) = k.prompt("p0", json!("go"));
    assert!(!types(&events).iter().any(|t| t.starts_with("request")));
    let (events, _) = k.prompt("p1", json!("/yolo"));
    assert_eq!(events[1]["params"]["payload"]["text"], "You only die once! Actions will require approval.");
    k.send(json!({"jsonrpc":"2.0","id":"p2","method":"prompt","params":{"user_input":"go"}}));
    let (_, request) = k.until_request();
    assert_eq!(request["params"]["type"], "ApprovalRequest");
}

#[test]
fn write_and_edit_show_diff_blocks() {
    let env = Env::new();
    let path = env.work().join("a.txt");
    let write = format!(
        "tool_call: {}",
        json!({"id":"w","name":"WriteFile","arguments": json!({"path": path, "content": "a\nb\n"}).to_string()})
    );
    let edit = format!(
        "tool_call: {}",
        json!({"id":"e","name":"StrReplaceFile","arguments": json!({"path": path, "edit": {"old": "b", "new": "c"}}).to_string()})
    );
    let config = env.scripted_config(&[&write, &edit, "text: done"]);
    let mut k = env.spawn(&config, &[]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let (_, request) = k.until_request();
    let p = &request["params"]["payload"];
    let shown = path.to_str().unwrap();
    assert_eq!(p["action"], "edit file");
    assert_eq!(p["description"], format!("Write file `{shown}`"));
    // `docs/protocol-1.10.md` §3.3: diff blocks carry their first lines and `is_summary`.
    assert_eq!(
        p["display"],
        json!([{"type":"diff","path":shown,"old_text":"","new_text":"a\nb","old_start":1,"new_start":1,"is_summary":false}])
    );
    answer(&mut k, &request, "approve");
    let (events, request) = k.until_request();
    let result = events.iter().find(|e| e["params"]["type"] == "ToolResult").unwrap();
    assert_eq!(
        result["params"]["payload"]["return_value"]["message"],
        "File successfully overwritten. Current size: 4 bytes."
    );
    assert_eq!(result["params"]["payload"]["return_value"]["display"][0]["type"], "diff");
    let p = &request["params"]["payload"];
    assert_eq!(p["description"], format!("Edit file `{shown}`"));
    assert_eq!(
        p["display"],
        json!([{"type":"diff","path":shown,"old_text":"a\nb","new_text":"a\nc","old_start":1,"new_start":1,"is_summary":false}])
    );
    answer(&mut k, &request, "approve");
    let (_, response) = k.until_response(&json!("p0"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "a\nc\n");
}

#[test]
fn parallel_calls_an_approval_does_not_hold_back_other_results() {
    let env = Env::new();
    std::fs::write(env.work().join("f.txt"), "content\n").unwrap();
    let read =
        format!("tool_call: {}", json!({"id":"r","name":"ReadFile","arguments": json!({"path": "f.txt"}).to_string()}));
    let script = format!("{}\n{read}", shell("s", "echo hi"));
    let config = env.scripted_config(&[&script, "text: ok"]);
    let mut k = env.spawn(&config, &[]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let (mut before, request) = k.until_request();
    // The ReadFile result arrives while the approval is still unanswered.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !before.iter().any(|e| e["params"]["payload"]["tool_call_id"] == "r") {
        assert!(Instant::now() < deadline, "ReadFile result held back by the approval");
        before.push(k.next());
    }
    answer(&mut k, &request, "approve");
    let (events, response) = k.until_response(&json!("p0"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(types(&events)[..2], ["ApprovalResponse", "ToolResult"]);
    k.close_stdin();
    k.wait_exit(Duration::from_secs(5));
    let context = std::fs::read_dir(env.share().join("sessions")).unwrap().next().unwrap().unwrap().path();
    let session = std::fs::read_dir(context).unwrap().next().unwrap().unwrap().path();
    let text = std::fs::read_to_string(session.join("context.jsonl")).unwrap();
    let tool_lines: Vec<&str> = text.lines().filter(|l| l.starts_with("{\"role\":\"tool\"")).collect();
    assert!(tool_lines[0].ends_with("\"tool_call_id\":\"s\"}"), "stored in call order: {tool_lines:?}");
    assert!(tool_lines[1].ends_with("\"tool_call_id\":\"r\"}"));
}

#[test]
fn cancel_during_an_approval_answers_cancelled_and_ignores_the_late_answer() {
    let env = Env::new();
    let config = env.scripted_config(&[&shell("tc-1", "touch late-approval"), "text: next"]);
    let mut k = env.spawn(&config, &[]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let (_, request) = k.until_request();
    let started = Instant::now();
    k.send(json!({"jsonrpc":"2.0","id":"c","method":"cancel"}));
    assert_eq!(k.next(), json!({"jsonrpc":"2.0","id":"c","result":{}}));
    let (events, response) = k.until_response(&json!("p0"));
    assert!(started.elapsed() < Duration::from_secs(2), "cancel took {:?}", started.elapsed());
    // `docs/protocol-1.10.md` §2.7: `TurnEnd`, then the pending approval rejected, then the answer.
    assert_eq!(types(&events), ["TurnEnd", "ApprovalResponse"]);
    assert_eq!(
        events[1]["params"]["payload"],
        json!({"request_id": request["id"], "response": "reject", "feedback": ""})
    );
    assert_eq!(response["result"]["status"], "cancelled");
    answer(&mut k, &request, "approve");
    std::thread::sleep(Duration::from_millis(300));
    assert!(!env.work().join("late-approval").exists());
    let (events, _) = k.prompt("p1", json!("next"));
    assert_eq!(events[2]["params"]["payload"]["text"], "next");
}

#[test]
fn cancel_kills_the_whole_process_group() {
    let env = Env::new();
    let marker = format!("kiwi-cancel-{}", std::process::id());
    let command = format!("sleep 30 & sleep 30; echo {marker}");
    let config = env.scripted_config(&[&shell("tc-1", &command)]);
    let mut k = env.spawn(&config, &["--yolo"]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let pgid = wait_for_sleeps(&marker);
    k.send(json!({"jsonrpc":"2.0","id":"c","method":"cancel"}));
    let (_, response) = k.until_response(&json!("p0"));
    assert_eq!(response["result"]["status"], "cancelled");
    let deadline = Instant::now() + Duration::from_secs(1);
    while members(pgid) > 0 {
        assert!(Instant::now() < deadline, "children survived the cancel");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Finds the shell's process group and waits until it runs both `sleep 30`s.
fn wait_for_sleeps(marker: &str) -> u32 {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(pgid) = group_of(marker)
            && members(pgid) >= 3
        {
            return pgid;
        }
        assert!(Instant::now() < deadline, "sleeps did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// (pid, pgid, command line) of every live process.
fn processes() -> Vec<(u32, u32, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else { continue };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let fields: Vec<&str> = stat.rsplit(')').next().unwrap_or("").split_whitespace().collect();
        if fields.first().is_none_or(|s| *s == "Z") {
            continue;
        }
        let pgid = fields.get(2).and_then(|p| p.parse::<u32>().ok()).unwrap_or(0);
        out.push((pid, pgid, String::from_utf8_lossy(&cmd).replace('\0', " ")));
    }
    out
}

fn group_of(marker: &str) -> Option<u32> {
    processes().into_iter().find(|(_, _, cmd)| cmd.contains(marker) && !cmd.contains("cargo")).map(|(_, g, _)| g)
}

fn members(pgid: u32) -> usize {
    processes().into_iter().filter(|(_, g, _)| *g == pgid).count()
}

#[test]
fn eof_kills_running_commands() {
    let env = Env::new();
    let marker = format!("kiwi-eof-{}", std::process::id());
    let command = format!("sleep 30 & sleep 30; echo {marker}");
    let config = env.scripted_config(&[&shell("tc-1", &command)]);
    let mut k = env.spawn(&config, &["--yolo"]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let pgid = wait_for_sleeps(&marker);
    k.close_stdin();
    assert!(k.wait_exit(Duration::from_secs(2)).expect("exits after EOF").success());
    let deadline = Instant::now() + Duration::from_secs(1);
    while members(pgid) > 0 {
        assert!(Instant::now() < deadline, "children survived the server");
        std::thread::sleep(Duration::from_millis(20));
    }
}
