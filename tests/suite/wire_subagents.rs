//! The `Agent` tool over the wire (`docs/protocol-1.10.md` §8): a foreground subagent's wrapped events,
//! its approvals with source members, its result, its files, cancel, resume and bad arguments.
//! The scripted-echo FIFO drives the parent and the subagent alike (`docs/scripted-echo.md` §2).

use crate::common;

use std::time::{Duration, Instant};

use common::{Env, alive, types, wait_until};
use serde_json::{Value, json};

fn call(id: &str, name: &str, args: Value) -> String {
    format!("tool_call: {}", json!({"id": id, "name": name, "arguments": args.to_string()}))
}

fn agent(id: &str, args: Value) -> String {
    call(id, "Agent", args)
}

fn answer(k: &mut common::Kiwi, request: &Value, response: &str) {
    let id = request["id"].clone();
    k.send(json!({"jsonrpc":"2.0","id":id,"result":{"request_id":id,"response":response}}));
}

const LONG: &str = "The subagent looked at everything it was asked to look at and found that the work directory \
     holds nothing surprising; the command printed its greeting, and no file needed a change. \
     This summary is deliberately long enough.";

/// The wrapped event types of `events`, as `Sub:<type>`, others as their own type.
fn shape(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            let p = &e["params"];
            match p["type"].as_str() {
                Some("SubagentEvent") => format!("Sub:{}", p["payload"]["event"]["type"].as_str().unwrap()),
                Some(t) => t.to_string(),
                None => e["method"].as_str().unwrap_or("?").to_string(),
            }
        })
        .collect()
}

#[test]
fn a_foreground_subagent_runs_a_tool_with_an_approval_and_returns_its_summary() {
    let env = Env::new();
    let shell = call("sub-1", "Shell", json!({"command": "echo from-sub"}));
    let config = env.scripted_config(&[
        &agent("ag-1", json!({"description": "look", "prompt": "look around", "subagent_type": "explore"})),
        &shell,
        "text: short",
        &format!("text: {LONG}"),
        "text: parent done",
    ]);
    let mut k = env.spawn(&config, &[]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let (before, request) = k.until_request();
    assert_eq!(
        shape(&before),
        [
            "TurnBegin",
            "StepBegin",
            "ToolCall",
            "StatusUpdate",
            "Sub:TurnBegin",
            "Sub:StepBegin",
            "Sub:ToolCall",
            "Sub:StatusUpdate"
        ]
    );
    let wrapped = &before[4]["params"]["payload"];
    assert_eq!(wrapped["parent_tool_call_id"], "ag-1");
    assert_eq!(wrapped["subagent_type"], "explore");
    let agent_id = wrapped["agent_id"].as_str().unwrap().to_string();
    assert!(agent_id.len() == 9 && agent_id.starts_with('a'), "{agent_id}");
    assert_eq!(wrapped["event"], json!({"type":"TurnBegin","payload":{"user_input":"look around"}}));

    let payload = &request["params"]["payload"];
    assert_eq!(request["params"]["type"], "ApprovalRequest");
    assert_eq!(payload["tool_call_id"], "sub-1");
    assert_eq!(payload["source_kind"], "foreground_turn");
    assert_eq!(payload["agent_id"], agent_id.as_str());
    assert_eq!(payload["subagent_type"], "explore");
    let source = payload["source_id"].as_str().unwrap();
    assert!(source.len() == 32 && source.chars().all(|c| c.is_ascii_hexdigit()));
    answer(&mut k, &request, "approve");

    let (events, response) = k.until_response(&json!("p0"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(
        shape(&events),
        [
            "ApprovalResponse",
            "Sub:ToolResult",
            "Sub:StepBegin",
            "Sub:ContentPart",
            "Sub:StatusUpdate",
            "Sub:TurnEnd",
            "Sub:TurnBegin",
            "Sub:StepBegin",
            "Sub:ContentPart",
            "Sub:StatusUpdate",
            "Sub:TurnEnd",
            "ToolResult",
            "StepBegin",
            "ContentPart",
            "StatusUpdate",
            "TurnEnd"
        ]
    );
    assert_eq!(events[1]["params"]["payload"]["event"]["payload"]["return_value"]["output"], "from-sub\n");
    let result = &events[11]["params"]["payload"];
    assert_eq!(result["tool_call_id"], "ag-1");
    let rv = &result["return_value"];
    assert_eq!(rv["is_error"], false);
    assert_eq!(rv["message"], "");
    assert_eq!(rv["display"], json!([]));
    assert_eq!(
        rv["output"],
        format!(
            "agent_id: {agent_id}\nresumed: false\nactual_subagent_type: explore\nstatus: completed\n\n[summary]\n{LONG}"
        )
    );

    // Its own files under the session; the parent's wire.jsonl holds the wrapped records.
    let session = env.session_dir(&session_id(&env));
    let dir = session.join("subagents").join(&agent_id);
    let sub_wire = std::fs::read_to_string(dir.join("wire.jsonl")).unwrap();
    assert!(sub_wire.lines().nth(1).unwrap().contains(r#""type": "TurnBegin""#), "{sub_wire}");
    assert!(!sub_wire.contains("SubagentEvent"), "the subagent's own records are unwrapped");
    let sub_context = std::fs::read_to_string(dir.join("context.jsonl")).unwrap();
    assert!(sub_context.starts_with(r#"{"role": "_system_prompt""#));
    assert!(sub_context.contains("look around"));
    assert_eq!(std::fs::read_to_string(dir.join("output")).unwrap(), LONG);
    let main_wire = std::fs::read_to_string(session.join("wire.jsonl")).unwrap();
    assert!(main_wire.contains("SubagentEvent"));
    assert!(!main_wire.contains("ApprovalRequest"));
}

/// The one session of the test's work dir.
fn session_id(env: &Env) -> String {
    let parent = env.session_dir("x").parent().unwrap().to_path_buf();
    let mut ids: Vec<String> = std::fs::read_dir(parent)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    assert_eq!(ids.len(), 1, "{ids:?}");
    ids.pop().unwrap()
}

#[test]
fn a_rejected_subagent_call_does_not_end_its_run() {
    let env = Env::new();
    let config = env.scripted_config(&[
        &agent("ag-1", json!({"description": "d", "prompt": "p"})),
        &call("sub-1", "Shell", json!({"command": "touch never"})),
        &format!("text: {LONG}"),
        "text: parent done",
    ]);
    let mut k = env.spawn(&config, &[]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let (_, request) = k.until_request();
    assert_eq!(request["params"]["payload"]["subagent_type"], "coder");
    answer(&mut k, &request, "reject");
    let (events, response) = k.until_response(&json!("p0"));
    assert_eq!(response["result"]["status"], "finished");
    let sub_result = events
        .iter()
        .find(|e| e["params"]["payload"]["event"]["type"] == "ToolResult")
        .map(|e| &e["params"]["payload"]["event"]["payload"]["return_value"])
        .unwrap();
    assert_eq!(sub_result["is_error"], true);
    assert_eq!(sub_result["display"], json!([{"type":"brief","text":"Rejected by user"}]));
    assert!(!env.work().join("never").exists());
    let last = events.iter().rev().find(|e| e["params"]["type"] == "ToolResult").unwrap();
    assert_eq!(last["params"]["payload"]["return_value"]["is_error"], false, "the subagent went on and finished");
}

#[test]
fn cancel_stops_a_foreground_subagent_and_its_process() {
    let env = Env::new();
    let marker = env.dir.path().join("sleeper-pid");
    let command = format!("echo $$ > {}; exec sleep 30", marker.display());
    let config = env.scripted_config(&[
        &agent("ag-1", json!({"description": "d", "prompt": "p"})),
        &call("sub-1", "Shell", json!({"command": command})),
        "text: must not be consumed by the subagent",
    ]);
    let mut k = env.spawn(&config, &["--yolo"]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let deadline = Instant::now() + common::TIMEOUT;
    let pid = loop {
        if let Some(pid) = std::fs::read_to_string(&marker).ok().and_then(|s| s.trim().parse::<i32>().ok()) {
            break pid;
        }
        assert!(Instant::now() < deadline, "the subagent's command never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    k.send(json!({"jsonrpc":"2.0","id":"c0","method":"cancel","params":{}}));
    let (_, response) = k.until_response(&json!("p0"));
    assert_eq!(response["result"]["status"], "cancelled");
    let gone = wait_until(Duration::from_secs(5), || !alive(pid));
    assert!(gone, "the subagent's shell process {pid} survived the cancel");
    // The script meant for the next prompt is still there: no model call after the cancel.
    let (_, response) = k.prompt("p1", json!("again"));
    assert_eq!(response["result"]["status"], "finished");
    let text: Vec<&Value> = k.seen.iter().filter(|e| e["params"]["type"] == "ContentPart").collect();
    assert_eq!(text.last().unwrap()["params"]["payload"]["text"], "must not be consumed by the subagent");
}

#[test]
fn bad_agent_calls_are_error_results() {
    let env = Env::new();
    let config = env.scripted_config(&[
        &agent("b-1", json!({"description": "d", "prompt": "p", "subagent_type": "nope"})),
        &agent("b-2", json!({"description": "d", "prompt": "p", "model": "no-such-model"})),
        &agent("b-3", json!({"description": "d", "prompt": "p", "resume": "a00000000"})),
        &agent("b-4", json!({"description": "d", "prompt": "p", "timeout": 5})),
        &agent("b-5", json!({"description": "d"})),
        &agent("b-6", json!({"description": "d", "prompt": "p", "resume": "../../etc"})),
        "text: done",
    ]);
    let mut k = env.spawn(&config, &[]);
    let (events, response) = k.prompt("p0", json!("go"));
    assert_eq!(response["result"]["status"], "finished");
    let results: Vec<(String, String)> = events
        .iter()
        .filter(|e| e["params"]["type"] == "ToolResult")
        .map(|e| {
            let rv = &e["params"]["payload"]["return_value"];
            assert_eq!(rv["is_error"], true, "{rv}");
            (
                e["params"]["payload"]["tool_call_id"].as_str().unwrap().to_string(),
                rv["message"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(results.len(), 6, "{results:?}");
    let message = |id: &str| results.iter().find(|(i, _)| i == id).unwrap().1.clone();
    assert_eq!(message("b-1"), "Failed to run agent: 'Builtin subagent type not found: nope'");
    assert_eq!(message("b-2"), "Unknown model alias: no-such-model");
    assert_eq!(message("b-3"), "Agent instance not found: a00000000");
    assert!(message("b-4").starts_with("Error validating JSON arguments: timeout"), "{}", message("b-4"));
    assert!(message("b-5").starts_with("Error validating JSON arguments:"), "{}", message("b-5"));
    assert_eq!(message("b-6"), "Agent instance not found: ../../etc");
    assert_eq!(types(&events).iter().filter(|t| *t == "SubagentEvent").count(), 0);
}

#[test]
fn a_subagent_instance_can_be_resumed_with_its_context() {
    let env = Env::new();
    let config = env.scripted_config(&[
        &agent("ag-1", json!({"description": "d", "prompt": "first task", "subagent_type": "plan"})),
        &format!("text: {LONG}"),
        "text: parent one",
    ]);
    let mut k = env.spawn(&config, &[]);
    let (events, _) = k.prompt("p0", json!("go"));
    let first = events.iter().find(|e| e["params"]["type"] == "SubagentEvent").unwrap();
    let agent_id = first["params"]["payload"]["agent_id"].as_str().unwrap().to_string();
    k.close_stdin();
    assert!(k.wait_exit(common::TIMEOUT).is_some());

    let config = env.named_scripted_config(
        "second",
        &[
            agent(
                "ag-2",
                json!({"description": "d", "prompt": "second task", "resume": agent_id, "subagent_type": "coder"}),
            ),
            format!("text: {LONG}"),
            "text: parent two".to_string(),
        ],
        json!({}),
    );
    let mut k = env.spawn(&config, &["--continue"]);
    let (events, _) = k.prompt("p1", json!("again"));
    let result = events.iter().rev().find(|e| e["params"]["type"] == "ToolResult").unwrap();
    let output = result["params"]["payload"]["return_value"]["output"].as_str().unwrap();
    assert!(
        output.starts_with(&format!(
            "agent_id: {agent_id}\nresumed: true\nrequested_subagent_type: coder\nactual_subagent_type: plan\n"
        )),
        "{output}"
    );
    let dir = env.session_dir(&session_id(&env)).join("subagents").join(&agent_id);
    let context = std::fs::read_to_string(dir.join("context.jsonl")).unwrap();
    assert!(context.contains("first task") && context.contains("second task"));
}

#[test]
fn an_agent_file_written_for_1_2_with_the_task_tool_still_delegates() {
    let env = Env::new();
    let dir = env.dir.path().join("agents");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("system.md"), "You are a test agent. ${ROLE_ADDITIONAL}").unwrap();
    std::fs::write(
        dir.join("agent.yaml"),
        "version: 1\nagent:\n  name: old\n  system_prompt_path: ./system.md\n  system_prompt_args:\n    ROLE_ADDITIONAL: ''\n  tools:\n    - kimi_cli.tools.multiagent:Task\n    - kimi_cli.tools.shell:Shell\n  subagents:\n    helper:\n      path: ./sub.yaml\n      description: Helps.\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("sub.yaml"),
        "version: 1\nagent:\n  extend: ./agent.yaml\n  system_prompt_args:\n    ROLE_ADDITIONAL: You are a helper.\n  exclude_tools:\n    - kimi_cli.tools.multiagent:Task\n  subagents:\n",
    )
    .unwrap();
    let config = env.scripted_config(&[
        &agent("ag-1", json!({"description": "d", "prompt": "help", "subagent_type": "helper"})),
        &agent("ag-2", json!({"description": "nested", "prompt": "p", "subagent_type": "helper"})),
        &format!("text: {LONG}"),
        "text: parent done",
    ]);
    let agent_file = dir.join("agent.yaml");
    let mut k = env.spawn(&config, &["--agent-file", agent_file.to_str().unwrap()]);
    let (events, response) = k.prompt("p0", json!("go"));
    assert_eq!(response["result"]["status"], "finished");
    // The subagent has no Agent tool of its own (excluded): calling it is an unknown tool.
    let nested = events
        .iter()
        .find(|e| e["params"]["payload"]["event"]["type"] == "ToolResult")
        .map(|e| &e["params"]["payload"]["event"]["payload"]["return_value"])
        .unwrap();
    assert_eq!(nested["message"], "Tool `Agent` not found");
    let result = events.iter().rev().find(|e| e["params"]["type"] == "ToolResult").unwrap();
    let output = result["params"]["payload"]["return_value"]["output"].as_str().unwrap();
    assert!(output.contains("actual_subagent_type: helper\nstatus: completed"), "{output}");
}

#[test]
fn a_subagent_that_keeps_the_agent_tool_cannot_nest() {
    let env = Env::new();
    let dir = env.dir.path().join("agents");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("system.md"), "Test agent.").unwrap();
    std::fs::write(
        dir.join("agent.yaml"),
        "version: 1\nagent:\n  name: a\n  system_prompt_path: ./system.md\n  tools:\n    - kimi_cli.tools.agent:Agent\n  subagents:\n    same:\n      path: ./agent.yaml\n      description: Itself.\n",
    )
    .unwrap();
    let config = env.scripted_config(&[
        &agent("ag-1", json!({"description": "d", "prompt": "p", "subagent_type": "same"})),
        &agent("ag-2", json!({"description": "d", "prompt": "p", "subagent_type": "same"})),
        &format!("text: {LONG}"),
        "text: parent done",
    ]);
    let agent_file = dir.join("agent.yaml");
    let mut k = env.spawn(&config, &["--agent-file", agent_file.to_str().unwrap()]);
    let (events, _) = k.prompt("p0", json!("go"));
    let nested = events
        .iter()
        .find(|e| e["params"]["payload"]["event"]["type"] == "ToolResult")
        .map(|e| &e["params"]["payload"]["event"]["payload"]["return_value"])
        .unwrap();
    assert_eq!(nested["message"], "Subagents cannot launch other subagents.");
}

#[test]
fn a_subagent_runs_on_the_model_its_call_names() {
    let env = Env::new();
    // The `_echo` model answers with the subagent's own prompt; `scripted-too` is another alias
    // of the session's model, so it keeps drawing from the session's script.
    let echo_answer = format!("text: echo model says {LONG}");
    let config = env.scripted_config_with(
        &[
            &agent("m-1", json!({"description": "d", "prompt": echo_answer, "model": "echo"})),
            &agent("m-2", json!({"description": "d", "prompt": "p", "model": "scripted-too"})),
            &format!("text: scripted says {LONG}"),
            "text: parent done",
        ],
        json!({
            "models": {
                "echo": {"provider": "echo_provider", "model": "echo", "max_context_size": 100000},
                "scripted-too": {"provider": "scripted_provider", "model": "scripted_echo", "max_context_size": 100000}
            },
            "providers": {"echo_provider": {"type": "_echo", "base_url": "", "api_key": ""}}
        }),
    );
    let mut k = env.spawn(&config, &["--yolo"]);
    let (events, response) = k.prompt("p0", json!("go"));
    assert_eq!(response["result"]["status"], "finished", "{events:?}");
    let output = |id: &str| {
        let result = events
            .iter()
            .find(|e| e["params"]["type"] == "ToolResult" && e["params"]["payload"]["tool_call_id"] == id)
            .unwrap_or_else(|| panic!("no result for {id}: {events:?}"));
        let rv = &result["params"]["payload"]["return_value"];
        assert_eq!(rv["is_error"], false, "{rv}");
        rv["output"].as_str().unwrap().to_string()
    };
    assert!(output("m-1").ends_with(&format!("[summary]\necho model says {LONG}")), "{}", output("m-1"));
    assert!(output("m-2").ends_with(&format!("[summary]\nscripted says {LONG}")), "{}", output("m-2"));
}

#[test]
fn a_subagent_model_that_cannot_be_built_is_an_error_result() {
    let env = Env::new();
    let config = env.scripted_config_with(
        &[&agent("m-1", json!({"description": "d", "prompt": "p", "model": "broken"})), "text: parent done"],
        json!({
            "models": {"broken": {"provider": "lost_scripts", "model": "x", "max_context_size": 100000}},
            "providers": {"lost_scripts": {"type": "_scripted_echo", "base_url": "", "api_key": "",
                "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": "/nonexistent/kiwi-scripts.json"}}}
        }),
    );
    let mut k = env.spawn(&config, &[]);
    let (events, response) = k.prompt("p0", json!("go"));
    assert_eq!(response["result"]["status"], "finished");
    let result = events.iter().find(|e| e["params"]["type"] == "ToolResult").unwrap();
    let rv = &result["params"]["payload"]["return_value"];
    assert_eq!(rv["is_error"], true);
    let message = rv["message"].as_str().unwrap();
    assert!(message.starts_with("Failed to run agent: cannot use model broken: "), "{message}");
    assert!(message.contains("/nonexistent/kiwi-scripts.json"), "{message}");
    assert_eq!(types(&events).iter().filter(|t| *t == "SubagentEvent").count(), 0);
}
