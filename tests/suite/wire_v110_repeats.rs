//! Repeated tool calls (`docs/protocol-1.10.md` §11): identical calls of one step run once, and a streak
//! of identical calls across steps gets reminders and finally ends the turn.

use crate::common;

use common::{Env, types};
use serde_json::{Value, json};

fn shell(id: &str, command: &str) -> String {
    let args = serde_json::to_string(&json!({ "command": command })).unwrap();
    format!("tool_call: {}", json!({"id": id, "name": "Shell", "arguments": args}))
}

fn results(events: &[Value]) -> Vec<&Value> {
    events.iter().filter(|e| e["params"]["type"] == "ToolResult").map(|e| &e["params"]["payload"]).collect()
}

fn output(result: &Value) -> &str {
    result["return_value"]["output"].as_str().unwrap_or("")
}

#[test]
fn identical_calls_of_one_step_run_once() {
    let env = Env::new();
    let log = env.work().join("runs.log");
    let command = format!("echo run >> {}", log.display());
    // The same call twice (the second with its keys in another order and other spacing), and a different one.
    let second = format!(
        "tool_call: {}",
        json!({"id": "b", "name": "Shell", "arguments": format!("{{ \"command\" : {} }}", json!(command))})
    );
    let step = [shell("a", &command), second, shell("c", "echo other")].join("\n");
    let config = env.scripted_config(&[&step, "text: done"]);
    let mut k = env.spawn(&config, &["--yolo"]);
    let (events, response) = k.prompt("p", json!("go"));
    assert_eq!(response["result"]["status"], "finished");
    let results = results(&events);
    let ids: Vec<&str> = results.iter().map(|r| r["tool_call_id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 3);
    assert!(ids.contains(&"a") && ids.contains(&"b") && ids.contains(&"c"));
    let by_id = |id: &str| *results.iter().find(|r| r["tool_call_id"] == id).unwrap();
    assert_eq!(by_id("a")["return_value"], by_id("b")["return_value"]);
    assert_eq!(std::fs::read_to_string(&log).unwrap(), "run\n", "the command ran once");
}

#[test]
fn a_streak_of_identical_calls_gets_reminders_then_ends_the_turn() {
    let env = Env::new();
    let steps: Vec<String> = (1..=13).map(|n| shell(&format!("t{n}"), "echo same")).collect();
    let mut scripts: Vec<&str> = steps.iter().map(String::as_str).collect();
    scripts.push("text: never reached");
    let config = env.scripted_config(&scripts);
    let mut k = env.spawn(&config, &["--yolo"]);
    let (events, response) = k.prompt("p", json!("go"));
    assert_eq!(response["result"]["status"], "finished");
    let steps = types(&events).iter().filter(|t| *t == "StepBegin").count();
    assert_eq!(steps, 12, "the turn ends after the 12th identical call");
    let results = results(&events);
    assert_eq!(results.len(), 12);
    for (n, result) in results.iter().enumerate() {
        let n = n + 1;
        let reminded = output(result).contains("<system-reminder>");
        assert_eq!(reminded, n >= 3, "call {n}: {}", output(result));
        if reminded {
            assert!(output(result).starts_with("same\n"), "the output comes first: {}", output(result));
            assert!(output(result).contains(&format!("call number {n} in a row")));
        }
    }
}

#[test]
fn a_different_call_breaks_the_streak() {
    let env = Env::new();
    let config = env.scripted_config(&[
        &shell("a1", "echo a"),
        &shell("a2", "echo a"),
        &shell("b1", "echo b"),
        &shell("a3", "echo a"),
        "text: done",
    ]);
    let mut k = env.spawn(&config, &["--yolo"]);
    let (events, _) = k.prompt("p", json!("go"));
    assert!(results(&events).iter().all(|r| !output(r).contains("<system-reminder>")));
}
