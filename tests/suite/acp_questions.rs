//! `AskUserQuestion` in `kiwi acp` over raw JSON lines (`docs/acp.md` §5.6): an
//! `elicitation/create` form for clients that offer one, permission cards (one option per answer)
//! for single-choice questions otherwise, and a tool result saying nobody could answer when a
//! multi-select question meets a client without forms.

use crate::common::{Env, Kiwi};

use std::path::Path;

use serde_json::{Value, json};

fn acp(env: &Env, config: &Path, capabilities: Value) -> Kiwi {
    let mut k = Kiwi::spawn(env.acp_command(config, &[]));
    let (_, init) = k.call("init", "initialize", json!({"protocolVersion": 1, "clientCapabilities": capabilities}));
    assert!(init.get("result").is_some(), "{init}");
    k
}

fn new_session(k: &mut Kiwi, cwd: &Path) -> String {
    let (_, r) = k.call("new", "session/new", json!({"cwd": cwd, "mcpServers": []}));
    r["result"]["sessionId"].as_str().expect("a session id").to_string()
}

fn send_prompt(k: &mut Kiwi, id: &str, session: &str) {
    k.send(json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "ask me"}]}}));
}

/// A scripted `AskUserQuestion` call with `questions`.
fn ask(id: &str, questions: Value) -> String {
    let arguments = json!({ "questions": questions }).to_string();
    format!("tool_call: {}", json!({"id": id, "name": "AskUserQuestion", "arguments": arguments}))
}

fn db_question() -> Value {
    json!({"question": "Which database?", "header": "Database", "options": [
        {"label": "Postgres", "description": "a server"}, {"label": "SQLite", "description": "a file"}]})
}

fn tests_question() -> Value {
    json!({"question": "Which tests?", "header": "Tests", "multi_select": true, "options": [
        {"label": "unit", "description": ""}, {"label": "e2e", "description": ""}]})
}

/// Reads until kiwi sends a request with `method`; returns what came before and the request.
fn until_method(k: &mut Kiwi, method: &str) -> (Vec<Value>, Value) {
    let mut before = Vec::new();
    loop {
        let m = k.next();
        if m["method"] == method && m.get("id").is_some() {
            return (before, m);
        }
        assert!(m["method"] != "session/request_permission" && m["method"] != "elicitation/create", "{m}");
        before.push(m);
    }
}

fn respond(k: &mut Kiwi, request: &Value, result: Value) {
    k.send(json!({"jsonrpc": "2.0", "id": request["id"], "result": result}));
}

/// The ACP id kiwi gave the scripted call `id` (from its `tool_call` update).
fn acp_call_id(messages: &[Value], name: &str) -> String {
    messages
        .iter()
        .filter(|m| m["method"] == "session/update" && m["params"]["update"]["sessionUpdate"] == "tool_call")
        .map(|m| m["params"]["update"]["toolCallId"].as_str().unwrap().to_string())
        .find(|id| id.contains(name))
        .unwrap_or_else(|| panic!("no tool_call for {name}"))
}

/// What the model was told for its call `id`, from the session's context.
fn tool_result(env: &Env, session: &str, id: &str) -> Value {
    let context = std::fs::read_to_string(env.session_dir(session).join("context.jsonl")).unwrap();
    let line = context
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .unwrap_or_else(|| panic!("no result for {id} in {context}"));
    let text: String = match &line["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        other => panic!("{other}"),
    };
    let json = text.trim_start_matches("<system>").split("</system>").last().unwrap().trim().to_string();
    serde_json::from_str(&json).unwrap_or(Value::String(text))
}

#[test]
fn a_client_with_forms_gets_one_elicitation_per_call() {
    let env = Env::new();
    let work = env.work();
    let config = env.scripted_config(&[
        &ask("q1", json!([db_question(), tests_question()])),
        &ask("q2", json!([db_question()])),
        "text: thanks",
    ]);
    let mut k = acp(&env, &config, json!({"elicitation": {"form": {}}}));
    let session = new_session(&mut k, &work);
    send_prompt(&mut k, "p1", &session);

    let (before, form) = until_method(&mut k, "elicitation/create");
    let call_id = acp_call_id(&before, "q1");
    assert_eq!(
        form["params"],
        json!({"mode": "form", "sessionId": session, "toolCallId": call_id,
            "message": "Please answer these 2 questions.",
            "requestedSchema": {"type": "object", "required": ["question_1", "question_2"], "properties": {
                "question_1": {"type": "string", "title": "Database", "description": "Which database?", "oneOf": [
                    {"const": "Postgres", "title": "Postgres", "description": "a server"},
                    {"const": "SQLite", "title": "SQLite", "description": "a file"}]},
                "question_2": {"type": "array", "title": "Tests", "description": "Which tests?", "minItems": 1,
                    "items": {"anyOf": [{"const": "unit", "title": "unit"}, {"const": "e2e", "title": "e2e"}]}}}}})
    );
    respond(
        &mut k,
        &form,
        json!({"action": "accept", "content": {"question_1": "SQLite", "question_2": ["unit", "e2e"]}}),
    );

    // The second call's form is declined: dismissed.
    let (_, form) = until_method(&mut k, "elicitation/create");
    assert_eq!(form["params"]["message"], "Which database?");
    respond(&mut k, &form, json!({"action": "decline"}));
    let (_, done) = k.until_response(&json!("p1"));
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");

    assert_eq!(
        tool_result(&env, &session, "q1"),
        json!({"answers": {"Which database?": "SQLite", "Which tests?": "unit, e2e"}})
    );
    assert_eq!(
        tool_result(&env, &session, "q2"),
        json!({"answers": {}, "note": "User dismissed the question without answering."})
    );
}

#[test]
fn without_forms_single_choice_questions_become_permission_cards() {
    let env = Env::new();
    let work = env.work();
    let second = json!({"question": "Which port?", "header": "", "options": [
        {"label": "8080", "description": ""}, {"label": "9090", "description": ""}]});
    let config = env.scripted_config(&[
        &ask("q1", json!([db_question(), second])),
        &ask("q2", json!([db_question()])),
        "text: thanks",
    ]);
    let mut k = acp(&env, &config, json!({}));
    let session = new_session(&mut k, &work);
    send_prompt(&mut k, "p1", &session);

    let (before, card) = until_method(&mut k, "session/request_permission");
    let call_id = acp_call_id(&before, "q1");
    assert_eq!(
        card["params"],
        json!({"sessionId": session,
            "toolCall": {"toolCallId": call_id, "title": "Database", "content": [{"type": "content",
                "content": {"type": "text", "text": "Which database?\n- Postgres: a server\n- SQLite: a file"}}]},
            "options": [
                {"optionId": "answer_1", "name": "Postgres", "kind": "allow_once"},
                {"optionId": "answer_2", "name": "SQLite", "kind": "allow_once"},
                {"optionId": "dismiss", "name": "Dismiss", "kind": "reject_once"}]})
    );
    respond(&mut k, &card, json!({"outcome": {"outcome": "selected", "optionId": "answer_2"}}));
    let (_, card) = until_method(&mut k, "session/request_permission");
    assert_eq!(card["params"]["toolCall"]["title"], "Which port?");
    respond(&mut k, &card, json!({"outcome": {"outcome": "selected", "optionId": "answer_1"}}));

    // The next call's card is dismissed.
    let (_, card) = until_method(&mut k, "session/request_permission");
    respond(&mut k, &card, json!({"outcome": {"outcome": "selected", "optionId": "dismiss"}}));
    let (_, done) = k.until_response(&json!("p1"));
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");

    assert_eq!(
        tool_result(&env, &session, "q1"),
        json!({"answers": {"Which database?": "SQLite", "Which port?": "8080"}})
    );
    assert_eq!(
        tool_result(&env, &session, "q2"),
        json!({"answers": {}, "note": "User dismissed the question without answering."})
    );
}

#[test]
fn a_multi_select_question_without_forms_is_not_asked_and_the_model_hears_why() {
    let env = Env::new();
    let work = env.work();
    let config = env.scripted_config(&[&ask("q1", json!([db_question(), tests_question()])), "text: ok"]);
    let mut k = acp(&env, &config, json!({}));
    let session = new_session(&mut k, &work);
    send_prompt(&mut k, "p1", &session);
    let (during, done) = k.until_response(&json!("p1"));
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert!(during.iter().all(|m| m.get("id").is_none()), "nothing was asked: {during:?}");
    let result = tool_result(&env, &session, "q1");
    assert_eq!(result["answers"], json!({}));
    assert_eq!(
        result["note"],
        "Nobody could answer: the questions were not shown to the user. This editor can show single-choice questions only (it offers no elicitation form); a multi-select question cannot be answered here. Ask the user directly in your text response instead, or ask single-choice questions."
    );
}

#[test]
fn a_refused_form_falls_back_to_cards_and_a_cancel_stops_the_asking() {
    let env = Env::new();
    let work = env.work();
    let config = env.scripted_config(&[&ask("q1", json!([db_question()])), "text: never"]);
    let mut k = acp(&env, &config, json!({"elicitation": {"form": {}}}));
    let session = new_session(&mut k, &work);
    send_prompt(&mut k, "p1", &session);
    let (_, form) = until_method(&mut k, "elicitation/create");
    k.send(json!({"jsonrpc": "2.0", "id": form["id"], "error": {"code": -32601, "message": "Method not found"}}));
    let (_, card) = until_method(&mut k, "session/request_permission");
    assert_eq!(card["params"]["options"][1]["name"], "SQLite");

    // The turn is cancelled while the card waits; the late answer finds nobody.
    k.send(json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}}));
    let (_, done) = k.until_response(&json!("p1"));
    assert_eq!(done["result"]["stopReason"], "cancelled", "{done}");
    respond(&mut k, &card, json!({"outcome": {"outcome": "selected", "optionId": "answer_1"}}));
    let (_, listed) = k.call("l", "session/list", json!({}));
    assert!(listed.get("result").is_some(), "kiwi still serves: {listed}");
}

/// `EnterPlanMode` asks through the same path: its Yes/No question is a card, and "Yes" switches
/// the session to the `plan` mode.
#[test]
fn entering_plan_mode_is_asked_through_a_card() {
    let env = Env::new();
    let work = env.work();
    let enter = format!("tool_call: {}", json!({"id": "e1", "name": "EnterPlanMode", "arguments": "{}"}));
    let config = env.scripted_config(&[&enter, "text: planning"]);
    let mut k = acp(&env, &config, json!({}));
    let session = new_session(&mut k, &work);
    send_prompt(&mut k, "p1", &session);
    let (_, card) = until_method(&mut k, "session/request_permission");
    assert_eq!(card["params"]["toolCall"]["title"], "Plan Mode");
    let names: Vec<&str> =
        card["params"]["options"].as_array().unwrap().iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["Yes", "No", "Dismiss"]);
    respond(&mut k, &card, json!({"outcome": {"outcome": "selected", "optionId": "answer_1"}}));
    let (during, done) = k.until_response(&json!("p1"));
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let modes: Vec<&Value> = during
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "current_mode_update")
        .map(|m| &m["params"]["update"]["currentModeId"])
        .collect();
    assert_eq!(modes, [&json!("plan")], "{during:?}");
}
