//! Request delivery at 1.10 (`docs/protocol-1.10.md` §3.5-§3.6) and `steer` (§2.4), over real pipes.

use crate::common;

use std::time::Duration;

use common::{Env, Kiwi, types};
use serde_json::{Value, json};

fn shell(id: &str, command: &str) -> String {
    let args = serde_json::to_string(&json!({ "command": command })).unwrap();
    format!("tool_call: {}", json!({"id": id, "name": "Shell", "arguments": args}))
}

fn answer(k: &mut Kiwi, request: &Value, response: &str, feedback: &str) {
    let id = request["id"].clone();
    k.send(json!({"jsonrpc":"2.0","id":id,"result":{"request_id":id,"response":response,"feedback":feedback}}));
}

/// Reads until `n` requests arrived; returns (everything before the last, the requests).
fn until_requests(k: &mut Kiwi, n: usize) -> (Vec<Value>, Vec<Value>) {
    let mut before = Vec::new();
    let mut requests = Vec::new();
    while requests.len() < n {
        let (events, request) = k.until_request();
        before.extend(events);
        requests.push(request);
    }
    (before, requests)
}

fn tool_result<'a>(events: &'a [Value], call: &str) -> &'a Value {
    let found =
        events.iter().find(|e| e["params"]["type"] == "ToolResult" && e["params"]["payload"]["tool_call_id"] == call);
    &found.unwrap_or_else(|| panic!("no result for {call}: {:?}", types(events)))["params"]["payload"]["return_value"]
}

/// §3.6: two approvals of one step are outstanding at once and may be answered in any order.
#[test]
fn several_requests_outstanding_answered_out_of_order() {
    let env = Env::new();
    let config = env.scripted_config(&[&format!("{}\n{}", shell("a", "echo a"), shell("b", "echo b")), "text: done"]);
    let mut k = env.spawn(&config, &[]);
    k.send(json!({"jsonrpc":"2.0","id":"p","method":"prompt","params":{"user_input":"go"}}));
    let (_, requests) = until_requests(&mut k, 2);
    let by_call =
        |call: &str| requests.iter().find(|r| r["params"]["payload"]["tool_call_id"] == call).unwrap().clone();
    let (a, b) = (by_call("a"), by_call("b"));
    // Both carry the turn's id.
    assert_eq!(a["params"]["payload"]["source_id"], b["params"]["payload"]["source_id"]);
    answer(&mut k, &b, "approve", "");
    answer(&mut k, &a, "approve", "");
    let (events, response) = k.until_response(&json!("p"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(tool_result(&events, "a")["output"], "a\n");
    assert_eq!(tool_result(&events, "b")["output"], "b\n");
    // Each ApprovalResponse precedes its tool's result.
    let at = |ty: &str, key: &str, id: &Value| {
        events.iter().position(|e| e["params"]["type"] == ty && &e["params"]["payload"][key] == id).unwrap()
    };
    for (request, call) in [(&a, "a"), (&b, "b")] {
        assert!(at("ApprovalResponse", "request_id", &request["id"]) < at("ToolResult", "tool_call_id", &json!(call)));
    }
}

/// §3.6: `approve_for_session` resolves every pending request with the same action (announced
/// with its own `ApprovalResponse`); a later answer to a resolved request is ignored.
#[test]
fn approve_for_session_resolves_covered_siblings() {
    let env = Env::new();
    let config = env.scripted_config(&[&format!("{}\n{}", shell("a", "echo a"), shell("b", "echo b")), "text: done"]);
    let mut k = env.spawn(&config, &["--session", "afs"]);
    k.send(json!({"jsonrpc":"2.0","id":"p","method":"prompt","params":{"user_input":"go"}}));
    let (_, requests) = until_requests(&mut k, 2);
    answer(&mut k, &requests[0], "approve_for_session", "");
    let (events, response) = k.until_response(&json!("p"));
    assert_eq!(response["result"]["status"], "finished");
    let responses: Vec<&Value> =
        events.iter().filter(|e| e["params"]["type"] == "ApprovalResponse").map(|e| &e["params"]["payload"]).collect();
    assert_eq!(responses.len(), 2, "{:?}", types(&events));
    assert_eq!(responses[0], &json!({"request_id":requests[0]["id"],"response":"approve_for_session","feedback":""}));
    assert_eq!(responses[1], &json!({"request_id":requests[1]["id"],"response":"approve","feedback":""}));
    // The sibling's own request was forgotten: this answer changes nothing.
    answer(&mut k, &requests[1], "reject", "too late");
    let (events, response) = k.prompt("p2", json!("/yolo"));
    assert_eq!(response["result"]["status"], "finished");
    assert!(!types(&events).contains(&"ApprovalResponse".to_string()));
}

/// §3.5: a rejection with feedback goes back to the model and the turn goes on; a plain one
/// ends it.
#[test]
fn rejection_with_feedback_continues_the_turn() {
    let env = Env::new();
    let config = env.scripted_config(&[&shell("a", "grep -r x ."), "text: using rg instead"]);
    let mut k = env.spawn(&config, &[]);
    k.send(json!({"jsonrpc":"2.0","id":"p","method":"prompt","params":{"user_input":"go"}}));
    let (_, request) = k.until_request();
    answer(&mut k, &request, "reject", "use rg");
    let (events, response) = k.until_response(&json!("p"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(
        types(&events),
        ["ApprovalResponse", "ToolResult", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd"]
    );
    assert_eq!(events[0]["params"]["payload"]["feedback"], "use rg");
    assert_eq!(
        tool_result(&events, "a"),
        &json!({"is_error":true,"output":"","message":"The tool call is rejected by the user. User feedback: use rg","display":[{"type":"brief","text":"Rejected: use rg"}],"extras":null})
    );
}

/// §3.6 (a fix of the reference): approvals reach a client that never sent `initialize`.
#[test]
fn approvals_reach_a_client_that_skipped_initialize() {
    let env = Env::new();
    let config = env.scripted_config(&[&shell("a", "echo hi"), "text: ok"]);
    let mut k = env.spawn(&config, &[]);
    k.send(json!({"jsonrpc":"2.0","id":"p","method":"prompt","params":{"user_input":"go"}}));
    let (_, request) = k.until_request();
    assert_eq!(request["params"]["type"], "ApprovalRequest");
    answer(&mut k, &request, "approve", "");
    assert_eq!(k.until_response(&json!("p")).1["result"]["status"], "finished");
}

/// §2.7/§3.6: requests left when a turn ends are resolved (approvals rejected, announced).
#[test]
fn stale_approvals_are_rejected_when_the_turn_ends() {
    let env = Env::new();
    let config = env.scripted_config(&[&format!("{}\n{}", shell("a", "echo a"), shell("b", "echo b"))]);
    let mut k = env.spawn(&config, &[]);
    k.send(json!({"jsonrpc":"2.0","id":"p","method":"prompt","params":{"user_input":"go"}}));
    let (_, requests) = until_requests(&mut k, 2);
    k.send(json!({"jsonrpc":"2.0","id":"c","method":"cancel"}));
    let (events, response) = k.until_response(&json!("p"));
    assert_eq!(response["result"]["status"], "cancelled");
    assert_eq!(types(&events), ["response", "TurnEnd", "ApprovalResponse", "ApprovalResponse"]);
    for request in &requests {
        assert!(
            events.iter().any(
                |e| e["params"]["payload"] == json!({"request_id":request["id"],"response":"reject","feedback":""})
            )
        );
    }
}

/// §10.2: `approve_for_session` outlives the process.
#[test]
fn session_approvals_survive_a_restart() {
    let env = Env::new();
    let config = env.scripted_config(&[&shell("a", "echo a"), "text: ok"]);
    let mut k = env.spawn(&config, &["--session", "keep"]);
    k.send(json!({"jsonrpc":"2.0","id":"p","method":"prompt","params":{"user_input":"go"}}));
    let (_, request) = k.until_request();
    answer(&mut k, &request, "approve_for_session", "");
    k.until_response(&json!("p"));
    k.close_stdin();
    assert!(k.wait_exit(Duration::from_secs(5)).unwrap().success());
    let mut k = env.spawn(&config, &["--session", "keep"]);
    let (events, response) = k.prompt("p", json!("again"));
    assert_eq!(response["result"]["status"], "finished");
    assert!(!types(&events).iter().any(|t| t.starts_with("request")), "{:?}", types(&events));
}

/// §2.4 (VERIFIED order): two steers while an approval is pending are taken after the step's
/// results, each its own user message, before the next step.
#[test]
fn steers_are_injected_at_the_step_boundary() {
    let env = Env::new();
    let config = env.scripted_config(&[&shell("a", "echo a"), "text: done"]);
    let mut k = env.spawn(&config, &["--session", "steer"]);
    k.send(json!({"jsonrpc":"2.0","id":"p","method":"prompt","params":{"user_input":"go"}}));
    let (_, request) = k.until_request();
    let (_, r) = k.call("s1", "steer", json!({"user_input":"also do this"}));
    assert_eq!(r["result"], json!({"status":"steered"}));
    let parts = json!([{"type":"text","text":"and this"}]);
    let (_, r) = k.call("s2", "steer", json!({ "user_input": parts }));
    assert_eq!(r["result"], json!({"status":"steered"}));
    answer(&mut k, &request, "approve", "");
    let (events, response) = k.until_response(&json!("p"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(
        types(&events),
        [
            "ApprovalResponse",
            "ToolResult",
            "SteerInput",
            "SteerInput",
            "StepBegin",
            "ContentPart",
            "StatusUpdate",
            "TurnEnd"
        ]
    );
    assert_eq!(events[2]["params"]["payload"], json!({"user_input":"also do this"}));
    assert_eq!(events[3]["params"]["payload"], json!({ "user_input": parts }));
    k.close_stdin();
    k.wait_exit(Duration::from_secs(5));
    let dir = std::fs::read_dir(env.share().join("sessions")).unwrap().next().unwrap().unwrap().path().join("steer");
    let context = std::fs::read_to_string(dir.join("context.jsonl")).unwrap();
    let lines: Vec<&str> = context.lines().collect();
    let tool = lines.iter().position(|l| l.starts_with(r#"{"role":"tool""#)).unwrap();
    assert_eq!(lines[tool + 1], r#"{"role":"user","content":"also do this"}"#);
    // One text part is stored in the string form, like any user message.
    assert_eq!(lines[tool + 2], r#"{"role":"user","content":"and this"}"#);
    let wire = std::fs::read_to_string(dir.join("wire.jsonl")).unwrap();
    assert_eq!(wire.matches("\"SteerInput\"").count(), 2, "steers are recorded");
    assert!(!wire.contains("ApprovalRe"), "approvals are not recorded (§10.1)");
}

/// §2.4: a step that would end the turn (here a plain rejection) runs one more step when it took
/// a steer.
#[test]
fn a_steer_keeps_an_ending_turn_going() {
    let env = Env::new();
    let config = env.scripted_config(&[&shell("a", "rm -rf build"), "text: ok, keeping build"]);
    let mut k = env.spawn(&config, &[]);
    k.send(json!({"jsonrpc":"2.0","id":"p","method":"prompt","params":{"user_input":"clean"}}));
    let (_, request) = k.until_request();
    k.call("s", "steer", json!({"user_input":"keep the build dir"}));
    answer(&mut k, &request, "reject", "");
    let (events, response) = k.until_response(&json!("p"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(
        types(&events),
        ["ApprovalResponse", "ToolResult", "SteerInput", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd"]
    );
}

/// §2.4: a steered input the model cannot take fails the turn with -32002, without `SteerInput`.
/// It is taken between steps, so there is no step to interrupt.
#[test]
fn a_steer_the_model_cannot_take_fails_the_turn() {
    let env = Env::new();
    let config = env.scripted_config(&[&shell("a", "echo a"), "text: never"]);
    let mut k = env.spawn(&config, &[]);
    k.send(json!({"jsonrpc":"2.0","id":"p","method":"prompt","params":{"user_input":"go"}}));
    let (_, request) = k.until_request();
    let image = json!([{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]);
    k.call("s", "steer", json!({ "user_input": image }));
    answer(&mut k, &request, "approve", "");
    let (events, response) = k.until_response(&json!("p"));
    assert_eq!(response["error"]["code"], -32002, "{response}");
    assert_eq!(types(&events), ["ApprovalResponse", "ToolResult", "TurnEnd"]);
}
