//! Plan mode end to end (`docs/protocol-1.10.md` §6, §2.5, §4.5 `/plan`, §10.2), over real pipes.

use crate::common;
use crate::mock_llm;

use std::path::PathBuf;
use std::time::Duration;

use common::{Env, Kiwi, types};
use mock_llm::{MockLlm, MockResponse};
use serde_json::{Value, json};

const SLUG: &str = "kiwi-wren-fig";

fn session_dir(env: &Env, id: &str) -> PathBuf {
    use md5::{Digest, Md5};
    let key: String = Md5::digest(env.work().to_str().unwrap().as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    env.share().join("sessions").join(key).join(id)
}

/// A session whose saved state has plan mode on with a known plan file; returns its path.
fn planning_session(env: &Env, id: &str) -> PathBuf {
    let dir = session_dir(env, id);
    std::fs::create_dir_all(&dir).unwrap();
    let state =
        json!({"version":1,"plan_mode":true,"plan_session_id":"0123456789abcdef0123456789abcdef","plan_slug":SLUG});
    std::fs::write(dir.join("state.json"), state.to_string()).unwrap();
    let plans = env.home().join(".kimi").join("plans");
    std::fs::create_dir_all(&plans).unwrap();
    plans.join(format!("{SLUG}.md"))
}

fn call(id: &str, name: &str, arguments: Value) -> String {
    format!("tool_call: {}", json!({"id": id, "name": name, "arguments": arguments.to_string()}))
}

fn initialize(k: &mut Kiwi, question: bool, plan_mode: bool) {
    let caps = json!({"supports_question": question, "supports_plan_mode": plan_mode});
    k.call("init", "initialize", json!({"protocol_version":"1.10","capabilities":caps}));
}

fn answer_question(k: &mut Kiwi, request: &Value, answers: Value) {
    let id = request["id"].clone();
    k.send(json!({"jsonrpc":"2.0","id":id,"result":{"request_id":id,"answers":answers}}));
}

fn status(event: &Value) -> &Value {
    assert_eq!(event["params"]["type"], "StatusUpdate", "{event}");
    &event["params"]["payload"]
}

/// §6.3: only the plan file may be written (without approval); §6.4 (VERIFIED sequence): the
/// plan is shown, then approved, and plan mode ends with its own status update.
#[test]
fn write_the_plan_then_get_it_approved() {
    let env = Env::new();
    let plan_file = planning_session(&env, "plan");
    let elsewhere = env.work().join("src.rs");
    let config = env.scripted_config(&[
        &format!(
            "{}\n{}",
            call("w1", "WriteFile", json!({"path": elsewhere, "content": "fn main() {}"})),
            call("w2", "WriteFile", json!({"path": plan_file, "content": "# Plan\n1. do it\n"}))
        ),
        &call("x", "ExitPlanMode", json!({})),
        "text: carrying it out",
    ]);
    let mut k = env.spawn(&config, &["--session", "plan"]);
    initialize(&mut k, true, true);
    k.send(json!({"jsonrpc":"2.0","id":"p","method":"prompt","params":{"user_input":"plan it"}}));
    let (before, question) = k.until_request();
    assert_eq!(
        types(&before),
        [
            "TurnBegin",
            "StepBegin",
            "ToolCall",
            "ToolCall",
            "StatusUpdate",
            "ToolResult",
            "ToolResult",
            "StepBegin",
            "ToolCall",
            "StatusUpdate",
            "PlanDisplay"
        ],
        "no approval for the plan file"
    );
    assert_eq!(status(&before[4])["plan_mode"], true, "restored from state.json");
    let blocked = before.iter().find(|e| e["params"]["payload"]["tool_call_id"] == "w1").unwrap();
    assert_eq!(
        blocked["params"]["payload"]["return_value"],
        json!({"is_error":true,"output":"","message":format!("Plan mode is active. You may only edit the current plan file: `{}`.", plan_file.display()),"display":[{"type":"brief","text":"Plan mode restriction"}],"extras":null})
    );
    assert!(!elsewhere.exists());
    assert_eq!(std::fs::read_to_string(&plan_file).unwrap(), "# Plan\n1. do it\n");
    assert_eq!(
        before[10]["params"]["payload"],
        json!({"content":"# Plan\n1. do it\n","file_path":plan_file.to_str().unwrap()})
    );
    let q = &question["params"]["payload"];
    assert_eq!(question["params"]["type"], "QuestionRequest");
    assert_eq!(q["tool_call_id"], "x");
    let item = &q["questions"][0];
    assert_eq!(
        (&item["question"], &item["header"], &item["other_label"]),
        (&json!("Approve this plan"), &json!("Plan"), &json!("Revise"))
    );
    let labels: Vec<&str> = item["options"].as_array().unwrap().iter().map(|o| o["label"].as_str().unwrap()).collect();
    assert_eq!(labels, ["Approve", "Reject", "Reject and Exit"]);
    answer_question(&mut k, &question, json!({"Approve this plan": "Approve"}));
    let (events, response) = k.until_response(&json!("p"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(types(&events), ["ToolResult", "StatusUpdate", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd"]);
    assert_eq!(events[0]["params"]["payload"]["return_value"]["message"], "Plan approved");
    assert!(events[0]["params"]["payload"]["return_value"]["output"].as_str().unwrap().contains("1. do it"));
    assert_eq!(
        status(&events[1]),
        &json!({"context_usage":null,"context_tokens":null,"max_context_tokens":null,"token_usage":null,"message_id":null,"plan_mode":false,"mcp_status":null})
    );
    assert_eq!(status(&events[4])["plan_mode"], false);
    k.close_stdin();
    k.wait_exit(Duration::from_secs(5));
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(session_dir(&env, "plan").join("state.json")).unwrap()).unwrap();
    assert_eq!((&state["plan_mode"], &state["plan_slug"]), (&json!(false), &Value::Null), "persisted (§10.2)");
}

/// §6.4: the answers that keep plan mode on, end the turn, or ask for a revision.
#[test]
fn reject_reject_and_exit_and_revise() {
    let env = Env::new();
    let plan_file = planning_session(&env, "r");
    std::fs::write(&plan_file, "# Plan\n").unwrap();
    let exit = call("x", "ExitPlanMode", json!({"options":[{"label":"Fast","description":"f"},{"label":"Safe"}]}));
    let config = env.scripted_config(&[&exit, &exit, &exit]);
    let mut k = env.spawn(&config, &["--session", "r"]);
    initialize(&mut k, true, false);
    // Revise: free text goes back to the model, the turn goes on, plan mode stays.
    k.send(json!({"jsonrpc":"2.0","id":"p1","method":"prompt","params":{"user_input":"go"}}));
    let (_, question) = k.until_request();
    let labels: Vec<&str> = question["params"]["payload"]["questions"][0]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["Fast", "Safe", "Reject", "Reject and Exit"]);
    answer_question(&mut k, &question, json!({"Approve this plan": "add tests first"}));
    let (events, question) = k.until_request();
    let result = &events[0]["params"]["payload"]["return_value"];
    assert_eq!(result["message"], "Plan revision requested");
    assert!(result["output"].as_str().unwrap().contains("add tests first"));
    assert_eq!(types(&events)[..2], ["ToolResult", "StepBegin"], "no plan-mode switch");
    // Reject: a rejection, the turn ends, plan mode stays on.
    answer_question(&mut k, &question, json!({"Approve this plan": "Reject"}));
    let (events, response) = k.until_response(&json!("p1"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(types(&events), ["ToolResult", "TurnEnd"]);
    assert_eq!(
        events[0]["params"]["payload"]["return_value"]["display"],
        json!([{"type":"brief","text":"Plan rejected"}])
    );
    // Reject and Exit: ends the turn and plan mode.
    k.send(json!({"jsonrpc":"2.0","id":"p2","method":"prompt","params":{"user_input":"again"}}));
    let (_, question) = k.until_request();
    answer_question(&mut k, &question, json!({"Approve this plan": "Reject and Exit"}));
    let (events, _) = k.until_response(&json!("p2"));
    assert_eq!(types(&events), ["ToolResult", "StatusUpdate", "TurnEnd"]);
    assert_eq!(status(&events[1])["plan_mode"], false);
}

/// §6.4: a dismissed approval keeps plan mode; entering asks first and answers `Yes` switch.
#[test]
fn enter_plan_mode_asks_and_a_dismissal_changes_nothing() {
    let env = Env::new();
    let config = env.scripted_config(&[
        &call("e", "EnterPlanMode", json!({})),
        "text: planning",
        &call("e2", "EnterPlanMode", json!({})),
        "text: ok",
    ]);
    let mut k = env.spawn(&config, &[]);
    initialize(&mut k, true, true);
    k.send(json!({"jsonrpc":"2.0","id":"p1","method":"prompt","params":{"user_input":"big change"}}));
    let (_, question) = k.until_request();
    let item = &question["params"]["payload"]["questions"][0];
    assert_eq!((&item["question"], &item["header"]), (&json!("Enter plan mode?"), &json!("Plan Mode")));
    answer_question(&mut k, &question, json!({"Enter plan mode?": "Yes"}));
    let (events, _) = k.until_response(&json!("p1"));
    assert_eq!(types(&events)[..3], ["ToolResult", "StatusUpdate", "StepBegin"]);
    assert_eq!(events[0]["params"]["payload"]["return_value"]["message"], "Plan mode on");
    assert_eq!(status(&events[1])["plan_mode"], true);
    // Already on: an error, no question.
    let (events, _) = k.prompt("p2", json!("again"));
    let result = events.iter().find(|e| e["params"]["type"] == "ToolResult").unwrap();
    assert_eq!(
        result["params"]["payload"]["return_value"]["message"],
        "Already in plan mode. Use ExitPlanMode when your plan is ready."
    );
}

/// §6.4/§7.3: without question support both tools fail and nothing is asked.
#[test]
fn plan_tools_need_a_client_that_shows_questions() {
    let env = Env::new();
    let plan_file = planning_session(&env, "n");
    std::fs::write(&plan_file, "# Plan\n").unwrap();
    let script = format!(
        "{}\n{}",
        call("x", "ExitPlanMode", json!({})),
        call(
            "a",
            "AskUserQuestion",
            json!({"questions":[{"question":"Which?","options":[{"label":"A"},{"label":"B"}]}]})
        )
    );
    let config = env.scripted_config(&[&script, "text: asking in text then"]);
    let mut k = env.spawn(&config, &["--session", "n"]);
    let (events, response) = k.prompt("p", json!("go"));
    assert_eq!(response["result"]["status"], "finished");
    assert!(!types(&events).iter().any(|t| t.starts_with("request") || t == "PlanDisplay"), "{:?}", types(&events));
    let result = |id: &str| {
        events.iter().find(|e| e["params"]["payload"]["tool_call_id"] == id).unwrap()["params"]["payload"]["return_value"].clone()
    };
    assert_eq!(
        result("x"),
        json!({"is_error":true,"output":"","message":"The connected client does not support plan mode. Do NOT call this tool again.","display":[{"type":"brief","text":"Client unsupported"}],"extras":null})
    );
    assert_eq!(
        result("a"),
        json!({"is_error":true,"output":"","message":"The connected client does not support interactive questions. Do NOT call this tool again. Ask the user directly in your text response instead.","display":[{"type":"brief","text":"Client unsupported"}],"extras":null})
    );
}

/// §4.5 `/plan [on|off|view|clear]` and §2.5 `set_plan_mode`, persisted across processes.
#[test]
fn plan_command_and_persistence() {
    let env = Env::new();
    let config = env.scripted_config(&["text: hi"]);
    let mut k = env.spawn(&config, &["--session", "pc"]);
    let text = |events: &[Value]| events[1]["params"]["payload"]["text"].as_str().unwrap().to_string();
    let (events, _) = k.prompt("a", json!("/plan"));
    assert_eq!(types(&events), ["TurnBegin", "ContentPart", "StatusUpdate", "TurnEnd"]);
    let on = text(&events);
    let path = on.strip_prefix("Plan mode ON. Write your plan to: ").unwrap().split('\n').next().unwrap().to_string();
    assert_eq!(
        on,
        format!("Plan mode ON. Write your plan to: {path}\nUse ExitPlanMode when done, or /plan off to exit manually.")
    );
    assert!(path.starts_with(env.home().join(".kimi").join("plans").to_str().unwrap()) && path.ends_with(".md"));
    assert_eq!(status(&events[2])["plan_mode"], true);
    let (events, _) = k.prompt("b", json!("/plan view"));
    assert_eq!(types(&events), ["TurnBegin", "ContentPart", "TurnEnd"]);
    assert_eq!(text(&events), "No plan file found for this session.");
    std::fs::write(&path, "# the plan").unwrap();
    let (events, _) = k.prompt("c", json!("/plan  VIEW "));
    assert_eq!(text(&events), "# the plan");
    let (events, _) = k.prompt("d", json!("/plan clear"));
    assert_eq!((types(&events).len(), text(&events)), (3, "Plan cleared.".to_string()));
    assert!(!std::path::Path::new(&path).exists());
    let (events, _) = k.prompt("e", json!("/plan on"));
    assert_eq!(text(&events), format!("Plan mode ON. Plan file: {path}"), "the same file while it stays on");
    k.close_stdin();
    k.wait_exit(Duration::from_secs(5));
    // Restored on resume: the step's status says so.
    let mut k = env.spawn(&config, &["--session", "pc"]);
    let (events, _) = k.prompt("f", json!("hello"));
    assert_eq!(status(&events[3])["plan_mode"], true);
    let (events, _) = k.prompt("g", json!("/plan off"));
    assert_eq!(text(&events), "Plan mode OFF. All tools are now available.");
    assert_eq!(status(&events[2])["plan_mode"], false);
    let (events, _) = k.prompt("h", json!("/plan"));
    assert!(text(&events).starts_with("Plan mode ON. Write your plan to: "));
    assert_ne!(text(&events), on, "a new activation gets a new plan file");
}

/// §2.2 step 4: which tools the model is offered depends on the client's capabilities.
#[test]
fn tool_visibility_follows_the_capabilities() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let mock = rt.block_on(MockLlm::start());
    let env = Env::new();
    let config = env.dir.path().join("config.json");
    let cfg = json!({"default_model":"m","models":{"m":{"provider":"p","model":"kimi-k2-turbo-preview","max_context_size":100000}},
        "providers":{"p":{"type":"kimi","base_url":format!("{}/v1", mock.base_url()),"api_key":"sk"}}});
    std::fs::write(&config, cfg.to_string()).unwrap();
    let mut k = env.spawn(&config, &[]);
    let offered = |k: &mut Kiwi, id: &str| -> Vec<String> {
        mock.push(MockResponse::sse_fixture("kimi-text.sse"));
        let (_, response) = k.prompt(id, json!("hi"));
        assert_eq!(response["result"]["status"], "finished", "{response}");
        let body = mock.requests().last().unwrap().json();
        body["tools"].as_array().unwrap().iter().map(|t| t["function"]["name"].as_str().unwrap().to_string()).collect()
    };
    let has = |tools: &[String], name: &str| tools.iter().any(|t| t == name);
    let tools = offered(&mut k, "p1");
    assert!(
        ["AskUserQuestion", "EnterPlanMode", "ExitPlanMode"].iter().all(|n| has(&tools, n)),
        "nothing hidden before initialize"
    );
    initialize(&mut k, false, false);
    let tools = offered(&mut k, "p2");
    assert!(!has(&tools, "AskUserQuestion") && !has(&tools, "EnterPlanMode") && !has(&tools, "ExitPlanMode"));
    assert!(has(&tools, "Shell"));
    initialize(&mut k, true, false);
    let tools = offered(&mut k, "p3");
    assert!(has(&tools, "AskUserQuestion") && !has(&tools, "ExitPlanMode"));
    k.call("i", "initialize", json!({"protocol_version":"1.10"}));
    let tools = offered(&mut k, "p4");
    assert!(has(&tools, "AskUserQuestion"), "an initialize without capabilities keeps them");
    initialize(&mut k, false, true);
    let tools = offered(&mut k, "p5");
    assert!(!has(&tools, "AskUserQuestion") && has(&tools, "EnterPlanMode") && has(&tools, "ExitPlanMode"));
    drop(k);
    drop(rt);
}

/// §6.1: `default_plan_mode` starts new sessions (not resumed ones) in plan mode.
#[test]
fn default_plan_mode_applies_to_new_sessions() {
    let env = Env::new();
    let config = env.scripted_config_with(&["text: one", "text: two"], json!({"default_plan_mode": true}));
    let mut k = env.spawn(&config, &["--session", "d"]);
    let (events, _) = k.prompt("p", json!("hi"));
    assert_eq!(status(&events[3])["plan_mode"], true);
    k.prompt("off", json!("/plan off"));
    k.close_stdin();
    k.wait_exit(Duration::from_secs(5));
    let mut k = env.spawn(&config, &["--session", "d"]);
    let (events, _) = k.prompt("p", json!("hi"));
    assert_eq!(status(&events[3])["plan_mode"], false, "a resumed session keeps its own state");
}

/// §6.1: `--plan` does what `default_plan_mode` does, for this run's new sessions.
#[test]
fn plan_flag_starts_new_sessions_in_plan_mode() {
    let env = Env::new();
    let config = env.scripted_config(&["text: one", "text: two"]);
    let mut k = env.spawn(&config, &["--plan", "--session", "f"]);
    let (events, _) = k.prompt("p", json!("hi"));
    assert_eq!(status(&events[3])["plan_mode"], true);
    k.prompt("off", json!("/plan off"));
    k.close_stdin();
    k.wait_exit(Duration::from_secs(5));
    let mut k = env.spawn(&config, &["--plan", "--session", "f"]);
    let (events, _) = k.prompt("p", json!("hi"));
    assert_eq!(status(&events[3])["plan_mode"], false, "a resumed session keeps its own state");
}

/// §6.3: the plan-file write needs no approval — that call's, not its id's: a Shell call that
/// carries the same id in the same step still asks.
#[test]
fn plan_mode_grants_the_call_not_its_id() {
    let env = Env::new();
    let plan_file = planning_session(&env, "same-id");
    let pwned = env.work().join("PWNED");
    let config = env.scripted_config(&[
        &format!(
            "{}\n{}",
            call("w", "WriteFile", json!({"path": plan_file, "content": "# Plan\n"})),
            call("w", "Shell", json!({"command": format!("touch {}", pwned.display())}))
        ),
        "text: never",
    ]);
    let mut k = env.spawn(&config, &["--session", "same-id"]);
    initialize(&mut k, true, true);
    k.send(json!({"jsonrpc":"2.0","id":"p","method":"prompt","params":{"user_input":"plan it"}}));
    let (_, request) = k.until_request();
    assert_eq!(request["params"]["type"], "ApprovalRequest");
    assert_eq!(
        (&request["params"]["payload"]["sender"], &request["params"]["payload"]["tool_call_id"]),
        (&json!("Shell"), &json!("w"))
    );
    let id = request["id"].clone();
    k.send(json!({"jsonrpc":"2.0","id":id,"result":{"request_id":id,"response":"reject"}}));
    let (_, response) = k.until_response(&json!("p"));
    assert_eq!(response["result"]["status"], "finished");
    assert!(!pwned.exists());
    assert_eq!(std::fs::read_to_string(&plan_file).unwrap(), "# Plan\n", "the plan file was written unasked");
}
