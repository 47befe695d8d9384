//! Background tasks over the wire (`docs/protocol-1.10.md` §9): a background Shell command, `TaskList`,
//! `TaskOutput`, `TaskStop` with its approval, notifications to the client and the model, no
//! orphan at exit, and a background subagent's notification (§8.4).
//!
//! Task ids are random, so the turns that name one use the `_echo` provider: the prompt is the
//! script. A turn whose script calls a tool then ends with the provider's error on the following
//! step (`docs/scripted-echo.md` §3); the tool's result is what these tests look at.

use crate::common;

use std::time::Duration;

use common::{Env, Kiwi, alive, wait_until};
use serde_json::{Value, json};

fn call(id: &str, name: &str, args: Value) -> String {
    format!("tool_call: {}", json!({"id": id, "name": name, "arguments": args.to_string()}))
}

fn echo_config(env: &Env) -> std::path::PathBuf {
    let path = env.dir.path().join("echo.json");
    std::fs::write(
        &path,
        r#"{"default_model":"e","models":{"e":{"provider":"p","model":"x","max_context_size":100000}},"providers":{"p":{"type":"_echo"}}}"#,
    )
    .unwrap();
    path
}

fn answer(k: &mut Kiwi, request: &Value, response: &str) {
    let id = request["id"].clone();
    k.send(json!({"jsonrpc":"2.0","id":id,"result":{"request_id":id,"response":response}}));
}

/// The `ToolResult` of call `id` among `events`.
fn result_of<'a>(events: &'a [Value], id: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["params"]["type"] == "ToolResult" && e["params"]["payload"]["tool_call_id"] == id)
        .map(|e| &e["params"]["payload"]["return_value"])
        .unwrap_or_else(|| panic!("no result for {id} in {events:?}"))
}

fn line<'a>(output: &'a str, key: &str) -> &'a str {
    output.lines().find_map(|l| l.strip_prefix(&format!("{key}: "))).unwrap_or_else(|| panic!("no {key} in {output}"))
}

fn read_pid(path: &std::path::Path) -> i32 {
    assert!(
        wait_until(common::TIMEOUT, || std::fs::read_to_string(path).is_ok_and(|s| s.trim().parse::<i32>().is_ok()))
    );
    std::fs::read_to_string(path).unwrap().trim().parse().unwrap()
}

/// Starts `command` in the background (approving it); the task id.
fn start(k: &mut Kiwi, prompt_id: &str, command: &str, description: &str) -> String {
    let script =
        call("bg", "Shell", json!({"command": command, "run_in_background": true, "description": description}));
    k.send(json!({"jsonrpc":"2.0","id":prompt_id,"method":"prompt","params":{"user_input":script}}));
    let (_, request) = k.until_request();
    let payload = &request["params"]["payload"];
    assert_eq!(payload["action"], "run background command");
    assert_eq!(payload["description"], format!("Run background command `{command}`"));
    answer(k, &request, "approve");
    let (events, _) = k.until_response(&json!(prompt_id));
    let rv = result_of(&events, "bg");
    assert_eq!(rv["is_error"], false, "{rv}");
    assert_eq!(rv["message"], "Background task started");
    let output = rv["output"].as_str().unwrap();
    let id = line(output, "task_id").to_string();
    assert!(id.starts_with("bash-") && id.len() == 13, "{id}");
    assert_eq!(line(output, "kind"), "bash");
    assert_eq!(line(output, "status"), "starting");
    assert_eq!(line(output, "command"), command);
    assert_eq!(line(output, "automatic_notification"), "true");
    assert_eq!(
        rv["display"],
        json!([{"type":"brief","text":format!("Started {id}")},
               {"type":"background_task","task_id":id,"kind":"bash","status":"starting","description":description}])
    );
    id
}

#[test]
fn a_background_command_is_listed_read_stopped_and_notified() {
    let env = Env::new();
    let marker = env.dir.path().join("bg-pid");
    let mut k = env.spawn(&echo_config(&env), &[]);
    let command = format!("echo started; echo $$ > {}; exec sleep 30", marker.display());
    let id = start(&mut k, "p0", &command, "sleeper");
    let pid = read_pid(&marker);
    assert!(alive(pid));

    let (events, _) = k.prompt("p1", json!(call("l", "TaskList", json!({}))));
    let rv = result_of(&events, "l");
    assert_eq!(rv["message"], "Task list retrieved.");
    let output = rv["output"].as_str().unwrap();
    assert!(output.starts_with("active_background_tasks: 1\n[1]\n"), "{output}");
    assert_eq!(line(output, "status"), "running");
    assert_eq!(rv["display"][0]["task_id"], id.as_str());

    let (events, _) = k.prompt("p2", json!(call("o", "TaskOutput", json!({"task_id": id}))));
    let rv = result_of(&events, "o");
    assert_eq!(rv["message"], "Task snapshot retrieved.");
    let output = rv["output"].as_str().unwrap();
    assert_eq!(line(output, "retrieval_status"), "not_ready");
    assert!(output.ends_with("[output]\nstarted\n"), "{output}");

    let (events, _) = k.prompt("p3", json!(call("bad", "TaskOutput", json!({"task_id": "bash-nothere"}))));
    assert_eq!(result_of(&events, "bad")["message"], "Task not found: bash-nothere");

    k.send(json!({"jsonrpc":"2.0","id":"p4","method":"prompt","params":{"user_input":call("s", "TaskStop", json!({"task_id": id}))}}));
    let (_, request) = k.until_request();
    let payload = &request["params"]["payload"];
    assert_eq!(
        (payload["sender"].as_str(), payload["action"].as_str()),
        (Some("TaskStop"), Some("stop background task"))
    );
    assert_eq!(payload["description"], format!("Stop background task `{id}`"));
    answer(&mut k, &request, "approve");
    let (events, _) = k.until_response(&json!("p4"));
    let rv = result_of(&events, "s");
    assert_eq!(rv["message"], "Task stop requested.");
    assert_eq!(line(rv["output"].as_str().unwrap(), "status"), "killed");
    assert!(wait_until(Duration::from_secs(5), || !alive(pid)), "the stopped command {pid} survived");

    // The next step tells the client and the model, before it begins (here: the same turn's
    // second step, after the stop).
    let kinds = common::types(&events);
    let at = kinds.iter().position(|t| t == "Notification").expect("a notification");
    assert_eq!(kinds[at - 1], "ToolResult");
    assert_eq!(kinds[at + 1], "StepBegin");
    let n = &events[at]["params"]["payload"];
    assert_eq!(n["type"], "task.killed");
    assert_eq!(n["category"], "task");
    assert_eq!(n["source_kind"], "background_task");
    assert_eq!(n["source_id"], id.as_str());
    assert_eq!(n["title"], "Background task stopped: sleeper");
    assert_eq!(n["severity"], "warning");
    assert_eq!(n["payload"]["task_kind"], "bash");
    let (events, response) = k.prompt("p6", json!("text: again"));
    assert_eq!(response["result"]["status"], "finished");
    assert!(!common::types(&events).contains(&"Notification".to_string()), "each notification once");

    let (events, _) = k.prompt("p7", json!(call("l2", "TaskList", json!({"active_only": false}))));
    let output = result_of(&events, "l2")["output"].as_str().unwrap().to_string();
    assert!(output.starts_with("background_tasks: 1\n"), "{output}");
    let (events, _) = k.prompt("p8", json!(call("l3", "TaskList", json!({}))));
    assert_eq!(result_of(&events, "l3")["output"], "active_background_tasks: 0\n[no tasks]");
}

#[test]
fn a_finished_command_notifies_the_model_with_its_output() {
    let env = Env::new();
    let mut k = env.spawn(&echo_config(&env), &["--yolo"]);
    // Still running when the next prompt's first step begins (a notification there would become
    // the echo provider's script).
    let command = "sleep 2; echo bgdone";
    let script = call("bg", "Shell", json!({"command": command, "run_in_background": true, "description": "quick"}));
    let (events, _) = k.prompt("p0", json!(script));
    let id = line(result_of(&events, "bg")["output"].as_str().unwrap(), "task_id").to_string();
    let (events, _) =
        k.prompt("p1", json!(call("o", "TaskOutput", json!({"task_id": id, "block": true, "timeout": 10}))));
    let rv = result_of(&events, "o");
    assert_eq!(rv["message"], "Task output retrieved.");
    let output = rv["output"].as_str().unwrap();
    assert_eq!(line(output, "retrieval_status"), "success");
    assert_eq!(line(output, "exit_code"), "0");
    assert!(output.ends_with("[output]\nbgdone\n"), "{output}");

    // Delivered at the next step: this turn's second one.
    let n = events.iter().find(|e| e["params"]["type"] == "Notification").expect("a notification");
    let n = &n["params"]["payload"];
    assert_eq!(n["type"], "task.completed");
    assert_eq!(n["severity"], "success");
    assert_eq!(n["title"], "Background task completed: quick");
    assert!(n["body"].as_str().unwrap().contains("Exit code: 0"));
    assert!(n["id"].as_str().unwrap().starts_with('n'));
    k.close_stdin();
    assert!(k.wait_exit(common::TIMEOUT).is_some());
    let sessions = env.session_dir("x").parent().unwrap().to_path_buf();
    let session = std::fs::read_dir(sessions).unwrap().next().unwrap().unwrap().path();
    let context = std::fs::read_to_string(session.join("context.jsonl")).unwrap();
    assert!(context.contains("<notification id=") && context.contains("bgdone"), "the model read it");
}

#[test]
fn exit_kills_a_running_background_command() {
    let env = Env::new();
    let marker = env.dir.path().join("bg-pid");
    let mut k = env.spawn(&echo_config(&env), &["--yolo"]);
    let command = format!("echo $$ > {}; exec sleep 60", marker.display());
    let script = call("bg", "Shell", json!({"command": command, "run_in_background": true, "description": "d"}));
    k.prompt("p0", json!(script));
    let pid = read_pid(&marker);
    k.close_stdin();
    assert!(k.wait_exit(common::TIMEOUT).is_some());
    assert!(wait_until(Duration::from_secs(5), || !alive(pid)), "background command {pid} outlived kiwi");
}

#[test]
fn keep_alive_on_exit_leaves_the_command_running() {
    let env = Env::new();
    let marker = env.dir.path().join("bg-pid");
    let config = env.dir.path().join("keep.json");
    std::fs::write(
        &config,
        r#"{"default_model":"e","models":{"e":{"provider":"p","model":"x","max_context_size":100000}},"providers":{"p":{"type":"_echo"}},"background":{"keep_alive_on_exit":true}}"#,
    )
    .unwrap();
    let mut k = env.spawn(&config, &["--yolo"]);
    let command = format!("echo $$ > {}; exec sleep 60", marker.display());
    let script = call("bg", "Shell", json!({"command": command, "run_in_background": true, "description": "d"}));
    k.prompt("p0", json!(script));
    let pid = read_pid(&marker);
    k.close_stdin();
    assert!(k.wait_exit(common::TIMEOUT).is_some());
    std::thread::sleep(Duration::from_millis(300));
    let survived = alive(pid);
    // SAFETY: plain kill of the process group this test's command leads.
    unsafe { libc::kill(-pid, libc::SIGKILL) };
    assert!(survived, "keep_alive_on_exit: the command should outlive kiwi");
}

#[test]
fn bad_background_calls_are_error_results() {
    let env = Env::new();
    let mut k = env.spawn(&echo_config(&env), &["--yolo"]);
    let cases = [
        ("a", json!({"command": "true", "run_in_background": true})),
        ("b", json!({"command": "true", "run_in_background": true, "description": "  "})),
        ("c", json!({"command": "true", "timeout": 301})),
        ("d", json!({"command": "true", "run_in_background": true, "description": "x", "timeout": 86401})),
    ];
    for (id, args) in cases {
        let (events, _) = k.prompt(id, json!(call(id, "Shell", args)));
        let rv = result_of(&events, id);
        assert_eq!(rv["is_error"], true, "{rv}");
        assert!(rv["message"].as_str().unwrap().starts_with("Error validating JSON arguments:"), "{rv}");
    }
    let (events, _) = k.prompt("e", json!(call("e", "TaskList", json!({"limit": 0}))));
    assert!(result_of(&events, "e")["message"].as_str().unwrap().starts_with("Error validating JSON arguments:"));
    let (events, _) = k.prompt("f", json!(call("f", "TaskStop", json!({"task_id": "bash-00000000"}))));
    assert_eq!(result_of(&events, "f")["message"], "Task not found: bash-00000000");
}

#[test]
fn the_fifth_background_command_is_refused() {
    let env = Env::new();
    let mut k = env.spawn(&echo_config(&env), &["--yolo"]);
    for i in 0..5 {
        let id = format!("bg{i}");
        let args = json!({"command": "sleep 30", "run_in_background": true, "description": format!("s{i}")});
        let (events, _) = k.prompt(&id, json!(call(&id, "Shell", args)));
        let rv = result_of(&events, &id);
        if i < 4 {
            assert_eq!(rv["is_error"], false, "{rv}");
        } else {
            assert_eq!(
                rv["message"],
                "Failed to start background task: Too many background tasks are already running."
            );
            assert_eq!(rv["display"], json!([{"type":"brief","text":"Start failed"}]));
        }
    }
    // A clean exit, so the four sleepers go with kiwi.
    k.close_stdin();
    assert!(k.wait_exit(common::TIMEOUT).is_some());
}

const LONG: &str = "The background subagent finished its investigation and reports that everything it was asked to \
     check is in order; nothing needed changing, and no command failed along the way. This is long enough to need \
     no second round (200 characters or more).";

#[test]
fn a_background_subagent_finishes_and_is_notified() {
    let env = Env::new();
    let agent = call("ag", "Agent", json!({"description": "bg look", "prompt": "look", "run_in_background": true}));
    // The parent's next step and the subagent's first call race for the FIFO: both get LONG.
    let long = format!("text: {LONG}");
    let config = env.scripted_config(&[&agent, &long, &long, "text: after"]);
    let mut k = env.spawn(&config, &["--yolo"]);
    let (events, response) = k.prompt("p0", json!("go"));
    assert_eq!(response["result"]["status"], "finished");
    let rv = result_of(&events, "ag");
    assert_eq!(rv["message"], "Background task started.");
    let output = rv["output"].as_str().unwrap();
    let task_id = line(output, "task_id").to_string();
    assert!(task_id.starts_with("agent-"), "{task_id}");
    assert_eq!(line(output, "kind"), "agent");
    assert_eq!(line(output, "actual_subagent_type"), "coder");
    let agent_id = line(output, "agent_id").to_string();
    assert!(!common::types(&events).contains(&"SubagentEvent".to_string()), "background events are not forwarded");

    let sessions = env.session_dir("x").parent().unwrap().to_path_buf();
    let session = std::fs::read_dir(sessions).unwrap().next().unwrap().unwrap().path();
    let out = session.join("subagents").join(&agent_id).join("output");
    assert!(wait_until(common::TIMEOUT, || out.exists()), "the background subagent never finished");
    // Its end is recorded right after the output; give the task a moment to publish it.
    std::thread::sleep(Duration::from_millis(100));
    let (events, _) = k.prompt("p1", json!("next"));
    let kinds = common::types(&events);
    assert_eq!(kinds[..3], ["TurnBegin", "Notification", "StepBegin"], "{kinds:?}");
    let n = &events[1]["params"]["payload"];
    assert_eq!(n["type"], "task.completed");
    assert_eq!(n["source_id"], task_id.as_str());
    assert_eq!(n["payload"]["task_kind"], "agent");
}

#[test]
fn a_background_subagent_asks_for_approval_as_a_background_agent() {
    let env = Env::new();
    let agent = call("ag", "Agent", json!({"description": "bg", "prompt": "work", "run_in_background": true}));
    // The parent's next step and the subagent's first call race for the FIFO, so both get the
    // same scripts: a Shell call each (two approvals), then a long answer each.
    let shell = call("sh", "Shell", json!({"command": "echo hi"}));
    let long = format!("text: {LONG}");
    let config = env.scripted_config(&[&agent, &shell, &shell, &long, &long]);
    let mut k = env.spawn(&config, &[]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let (mut task_id, mut requests) = (None, Vec::new());
    while task_id.is_none() || requests.len() < 2 {
        let m = k.next();
        let p = &m["params"];
        if p["type"] == "ToolResult" && p["payload"]["tool_call_id"] == "ag" {
            let output = p["payload"]["return_value"]["output"].as_str().unwrap().to_string();
            task_id = Some(line(&output, "task_id").to_string());
        }
        if m["method"] == "request" && p["type"] == "ApprovalRequest" {
            requests.push(m.clone());
        }
    }
    let task_id = task_id.unwrap();
    let payload = |r: &Value| r["params"]["payload"].clone();
    let background = requests.iter().find(|r| payload(r)["source_kind"] == "background_agent").expect("its approval");
    let b = payload(background);
    assert_eq!(b["source_id"], task_id.as_str());
    assert_eq!(b["subagent_type"], "coder");
    assert!(b["agent_id"].as_str().unwrap().starts_with('a'));
    let foreground = requests.iter().find(|r| payload(r)["source_kind"] == "foreground_turn").expect("the parent's");
    assert_eq!(payload(foreground)["agent_id"], Value::Null);
    for r in &requests {
        answer(&mut k, r, "approve");
    }
    let (events, response) = k.until_response(&json!("p0"));
    assert_eq!(response["result"]["status"], "finished", "{response}\n{events:#?}");
    k.close_stdin();
    assert!(k.wait_exit(common::TIMEOUT).is_some());
}

#[test]
fn a_resumed_session_knows_its_tasks_and_hears_about_the_ones_stopped_at_exit() {
    let env = Env::new();
    let mut k = env.spawn(&echo_config(&env), &["--yolo"]);
    let script =
        call("bg", "Shell", json!({"command": "exec sleep 60", "run_in_background": true, "description": "long"}));
    let (events, _) = k.prompt("p0", json!(script));
    let output = result_of(&events, "bg")["output"].as_str().unwrap().to_string();
    let task_id = output.lines().next().unwrap().strip_prefix("task_id: ").unwrap().to_string();
    k.close_stdin();
    assert!(k.wait_exit(common::TIMEOUT).is_some());

    let mut k = env.spawn(&echo_config(&env), &["--yolo", "--continue"]);
    // The notification comes first in the step, so `_echo` then reads it as its script and fails
    // this turn's step; the next turn lists the tasks.
    let (events, _) = k.prompt("p1", json!("text: hi"));
    let notices: Vec<&Value> = events.iter().filter(|e| e["params"]["type"] == "Notification").collect();
    assert_eq!(notices.len(), 1, "{events:?}");
    let n = &notices[0]["params"]["payload"];
    assert_eq!((n["type"].as_str(), n["source_id"].as_str()), (Some("task.killed"), Some(task_id.as_str())));
    assert!(n["body"].as_str().unwrap().contains("Failure reason: Stopped at exit"), "{n}");
    let list = call("l", "TaskList", json!({"active_only": false}));
    let (events, _) = k.prompt("p2", json!(list));
    let listed = result_of(&events, "l")["output"].as_str().unwrap();
    assert!(listed.starts_with("background_tasks: 1\n"), "{listed}");
    assert!(listed.contains(&format!("task_id: {task_id}")) && listed.contains("status: killed"), "{listed}");
    k.close_stdin();
    assert!(k.wait_exit(common::TIMEOUT).is_some());

    // Delivered once: a third process has nothing new to say.
    let mut k = env.spawn(&echo_config(&env), &["--yolo", "--continue"]);
    let (events, _) = k.prompt("p3", json!("text: hi"));
    assert!(!events.iter().any(|e| e["params"]["type"] == "Notification"), "{events:?}");
}
