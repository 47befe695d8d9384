//! Questions (`docs/protocol-1.10.md` §7), persistence (§10), the new slash commands (§4.5) and a
//! 1.2-era client running a whole session against the 1.10 server, over real pipes.

use crate::common;

use std::path::PathBuf;
use std::time::Duration;

use common::{Env, Kiwi, types};
use serde_json::{Value, json};

fn session_dir(env: &Env, id: &str) -> PathBuf {
    use md5::{Digest, Md5};
    let key: String = Md5::digest(env.work().to_str().unwrap().as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    env.share().join("sessions").join(key).join(id)
}

fn call(id: &str, name: &str, arguments: Value) -> String {
    format!("tool_call: {}", json!({"id": id, "name": name, "arguments": arguments.to_string()}))
}

fn ask(id: &str) -> String {
    call(
        id,
        "AskUserQuestion",
        json!({"questions":[{"question":"Which database?","header":"DB","options":[{"label":"Postgres","description":"relational"},{"label":"SQLite"}]}]}),
    )
}

fn finish(mut k: Kiwi) {
    k.close_stdin();
    assert!(k.wait_exit(Duration::from_secs(5)).expect("exit").success());
}

fn result_of<'a>(events: &'a [Value], call: &str) -> &'a Value {
    &events.iter().find(|e| e["params"]["payload"]["tool_call_id"] == call).unwrap()["params"]["payload"]["return_value"]
}

fn texts(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["params"]["type"] == "ContentPart")
        .map(|e| e["params"]["payload"]["text"].as_str().unwrap().to_string())
        .collect()
}

/// §7.2: asked, answered, dismissed (by an error answer and by `{}`); recorded and replayable.
#[test]
fn questions_answered_and_dismissed() {
    let env = Env::new();
    let config = env.scripted_config(&[
        &ask("q1"),
        "text: postgres it is",
        &ask("q2"),
        "text: deciding myself",
        &ask("q3"),
        "text: again",
    ]);
    let mut k = env.spawn(&config, &["--session", "q"]);
    k.call("i", "initialize", json!({"protocol_version":"1.10","capabilities":{"supports_question":true}}));
    k.send(json!({"jsonrpc":"2.0","id":"p1","method":"prompt","params":{"user_input":"pick a db"}}));
    let (_, request) = k.until_request();
    assert_eq!(request["id"], request["params"]["payload"]["id"]);
    assert_eq!(
        request["params"]["payload"]["questions"],
        json!([{"question":"Which database?","header":"DB","options":[{"label":"Postgres","description":"relational"},{"label":"SQLite","description":""}],"multi_select":false,"body":"","other_label":"","other_description":""}])
    );
    assert_eq!(request["params"]["payload"]["tool_call_id"], "q1");
    let id = request["id"].clone();
    k.send(json!({"jsonrpc":"2.0","id":id,"result":{"request_id":id,"answers":{"Which database?":"Postgres"}}}));
    let (events, _) = k.until_response(&json!("p1"));
    assert_eq!(
        result_of(&events, "q1"),
        &json!({"is_error":false,"output":"{\"answers\": {\"Which database?\": \"Postgres\"}}","message":"User has answered.","display":[{"type":"brief","text":"User answered"}],"extras":null})
    );
    let dismissed = json!({"is_error":false,"output":"{\"answers\": {}, \"note\": \"User dismissed the question without answering.\"}","message":"User dismissed the question without answering.","display":[{"type":"brief","text":"User dismissed"}],"extras":null});
    k.send(json!({"jsonrpc":"2.0","id":"p2","method":"prompt","params":{"user_input":"again"}}));
    let (_, request) = k.until_request();
    k.send(json!({"jsonrpc":"2.0","id":request["id"],"error":{"code":-1,"message":"closed the dialog"}}));
    let (events, _) = k.until_response(&json!("p2"));
    assert_eq!(result_of(&events, "q2"), &dismissed);
    k.send(json!({"jsonrpc":"2.0","id":"p3","method":"prompt","params":{"user_input":"and again"}}));
    let (_, request) = k.until_request();
    k.send(json!({"jsonrpc":"2.0","id":request["id"],"result":{}}));
    let (events, _) = k.until_response(&json!("p3"));
    assert_eq!(result_of(&events, "q3"), &dismissed);
    // Questions travel through the turn's stream: recorded, and replayed as requests.
    let (_, replayed) = k.call("r", "replay", json!({}));
    assert_eq!(replayed["result"]["requests"], 3);
    finish(k);
}

/// §7.2 step 1 and §4.5 `/afk`: nobody present means no question and no approval.
#[test]
fn afk_dismisses_questions_and_approves() {
    let env = Env::new();
    let shell = call("s", "Shell", json!({"command":"echo afk"}));
    let config = env.scripted_config(&[&format!("{}\n{shell}", ask("q")), "text: done"]);
    let mut k = env.spawn(&config, &["--session", "afk"]);
    k.call("i", "initialize", json!({"protocol_version":"1.10","capabilities":{"supports_question":true}}));
    let (events, _) = k.prompt("a", json!("/afk"));
    assert_eq!(
        texts(&events),
        ["afk mode enabled. AskUserQuestion will be auto-dismissed and tool calls auto-approved."]
    );
    let (events, response) = k.prompt("p", json!("go"));
    assert_eq!(response["result"]["status"], "finished");
    assert!(!types(&events).iter().any(|t| t.starts_with("request")), "{:?}", types(&events));
    assert_eq!(
        result_of(&events, "q"),
        &json!({"is_error":false,"output":"{\"answers\": {}, \"note\": \"Running in afk mode. No user is present. Make your own decision.\"}","message":"Afk mode, auto-dismissed.","display":[{"type":"brief","text":"Auto-dismissed (afk)"}],"extras":null})
    );
    assert_eq!(result_of(&events, "s")["output"], "afk\n");
    let (events, _) = k.prompt("y", json!("/yolo"));
    assert_eq!(texts(&events), ["You only live once! All actions will be auto-approved."]);
    let (events, _) = k.prompt("a2", json!("/afk"));
    assert_eq!(texts(&events), ["afk mode disabled. You are back at the terminal. Yolo is still on."]);
    let (_, _) = k.prompt("a3", json!("/afk"));
    let (events, _) = k.prompt("y2", json!("/yolo"));
    assert_eq!(
        texts(&events),
        ["Yolo disabled, but afk is still on — tool calls remain auto-approved. Use /afk to turn off afk."]
    );
    let (events, _) = k.prompt("a4", json!("/afk"));
    assert_eq!(texts(&events), ["afk mode disabled. You are back at the terminal."]);
    finish(k);
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(session_dir(&env, "afk").join("state.json")).unwrap()).unwrap();
    assert_eq!(state["approval"], json!({"yolo":false,"afk":false,"auto_approve_actions":[]}));
    assert_eq!(state["custom_title"], "go");
}

/// §10.2: the todo list, yolo and the title live in `state.json` and come back on `--continue`;
/// §11: `SetTodoList` without `todos` reads the list back.
#[test]
fn state_survives_continue() {
    let env = Env::new();
    let set = call("t1", "SetTodoList", json!({"todos":[{"title":"write tests","status":"in_progress"}]}));
    let read = call("t2", "SetTodoList", json!({}));
    let config = env.scripted_config(&[&set, "text: ok", &read, "text: ok"]);
    let mut k = env.spawn(&config, &["--session", "st"]);
    k.prompt("p", json!("  plan   the\twork  "));
    k.prompt("y", json!("/yolo"));
    finish(k);
    let text = std::fs::read_to_string(session_dir(&env, "st").join("state.json")).unwrap();
    assert!(text.starts_with("{\n  \"version\": 1,\n  \"approval\": {\n    \"yolo\": true,"), "{text}");
    assert!(!text.ends_with('\n'));
    let state: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(state["custom_title"], "plan the work");
    assert_eq!(state["todos"], json!([{"title":"write tests","status":"in_progress"}]));
    // A new process reads its scripts from the first again.
    let config = env.scripted_config(&[&read, "text: ok"]);
    let mut k = env.spawn(&config, &["--continue"]);
    let (events, _) = k.prompt("p2", json!("what is left?"));
    assert_eq!(result_of(&events, "t2")["output"], "Current todo list:\n- [in_progress] write tests");
    assert!(!types(&events).iter().any(|t| t.starts_with("request")), "yolo came back");
    finish(k);
}

/// §10.2: a session whose only prompt failed has no `state.json`.
#[test]
fn a_failed_only_prompt_writes_no_state() {
    let env = Env::new();
    let config = env.scripted_config(&["error: 400 bad request"]);
    let mut k = env.spawn(&config, &["--session", "gone"]);
    let (_, response) = k.prompt("p", json!("hi"));
    assert_eq!(response["error"]["code"], -32003);
    assert!(!session_dir(&env, "gone").join("state.json").exists());
    finish(k);
    // The turn was recorded (wire.jsonl), so the folder stays; its state file never appeared.
    assert!(!session_dir(&env, "gone").join("state.json").exists());
}

/// §4.5 `/add-dir`.
#[test]
fn add_dir_lists_adds_refuses_and_persists() {
    let env = Env::new();
    let extra = env.dir.path().join("extra");
    std::fs::create_dir_all(extra.join("docs")).unwrap();
    std::fs::write(extra.join("README.md"), "x").unwrap();
    let extra = std::fs::canonicalize(&extra).unwrap();
    let config = env.scripted_config(&[]);
    let mut k = env.spawn(&config, &["--session", "ad"]);
    let say = |k: &mut Kiwi, id: &str, input: &str| texts(&k.prompt(id, json!(input)).0);
    assert_eq!(say(&mut k, "1", "/add-dir"), ["No additional directories. Usage: /add-dir <path>"]);
    assert_eq!(
        say(&mut k, "2", &format!("/add-dir \"{}\"", extra.display())),
        [format!("Added directory to workspace: {}", extra.display())]
    );
    assert_eq!(
        say(&mut k, "3", &format!("/add-dir {}", extra.display())),
        [format!("Directory already in workspace: {}", extra.display())]
    );
    assert_eq!(
        say(&mut k, "4", "/add-dir ."),
        [format!(
            "Directory is already within the working directory: {}",
            std::fs::canonicalize(env.work()).unwrap().display()
        )]
    );
    assert_eq!(say(&mut k, "5", "/add-dir /definitely/not/here"), ["Directory does not exist: /definitely/not/here"]);
    assert_eq!(say(&mut k, "6", "/add-dir"), [format!("Additional directories:\n  - {}", extra.display())]);
    finish(k);
    let dir = session_dir(&env, "ad");
    let state: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("state.json")).unwrap()).unwrap();
    assert_eq!(state["additional_dirs"], json!([extra.to_str().unwrap()]));
    let context = std::fs::read_to_string(dir.join("context.jsonl")).unwrap();
    assert!(context.contains("README.md") && context.contains("docs/"), "the model sees the listing");
    // A directory that vanished is pruned on resume.
    std::fs::remove_dir_all(&extra).unwrap();
    let mut k = env.spawn(&config, &["--session", "ad"]);
    assert_eq!(say(&mut k, "7", "/add-dir"), ["No additional directories. Usage: /add-dir <path>"]);
    finish(k);
}

/// §4.5 `/export` and `/import`.
#[test]
fn export_and_import() {
    let env = Env::new();
    let config = env.scripted_config(&["text: the answer is 42", "text: seen"]);
    let mut k = env.spawn(&config, &["--session", "ex"]);
    assert_eq!(texts(&k.prompt("e0", json!("/export")).0), ["No messages to export."]);
    k.prompt("p", json!("what is the answer?"));
    let (events, _) = k.prompt("e0b", json!("/export missing/"));
    assert!(texts(&events)[0].starts_with("Failed to write export file: "), "{:?}", texts(&events));
    std::fs::create_dir_all(env.work().join("out")).unwrap();
    let (events, _) = k.prompt("e1", json!("/export out/"));
    let said = texts(&events);
    assert!(said[0].starts_with("Exported 2 messages to "), "{said:?}");
    assert_eq!(
        said[1],
        "  Note: The exported file may contain sensitive information. Please be cautious when sharing it externally."
    );
    let (events, _) = k.prompt("e2", json!("/export notes.md"));
    let path = env.work().join("notes.md");
    assert!(texts(&events)[0].ends_with("notes.md"));
    let exported = std::fs::read_to_string(&path).unwrap();
    assert!(exported.starts_with("---\nsession_id: ex\n") && exported.contains("the answer is 42"));
    finish(k);

    let mut k = env.spawn(&config, &["--session", "im"]);
    let say = |k: &mut Kiwi, id: &str, input: &str| texts(&k.prompt(id, json!(input)).0);
    assert_eq!(say(&mut k, "1", "/import"), ["Usage: /import <file_path or session_id>"]);
    assert_eq!(say(&mut k, "2", "/import nope"), ["'nope' is not a valid file path or session ID."]);
    assert_eq!(say(&mut k, "3", "/import im"), ["Cannot import the current session into itself."]);
    std::fs::write(env.work().join("empty.md"), "  \n").unwrap();
    assert_eq!(say(&mut k, "4", "/import empty.md"), ["The file is empty, nothing to import."]);
    assert_eq!(
        say(&mut k, "5", "/import notes.md"),
        [format!("Imported context from file 'notes.md' ({} chars).", exported.chars().count())]
    );
    let imported = say(&mut k, "6", "/import ex");
    assert!(imported[0].starts_with("Imported context from session 'ex' ("), "{imported:?}");
    finish(k);
    let context = std::fs::read_to_string(session_dir(&env, "im").join("context.jsonl")).unwrap();
    assert!(context.contains("<imported_context source=\\\"session:ex\\\">"));
    assert!(context.contains("the answer is 42"));
}

/// A client written for 1.2: `initialize` without capabilities or hooks, answers approvals the
/// 1.2 way (no feedback), never answers anything else, ignores unknown fields. It runs a whole
/// session: approvals, a question the model tries to ask, slash commands, cancel, resume.
#[test]
fn a_1_2_client_runs_a_whole_session() {
    let env = Env::new();
    let shell = call("s", "Shell", json!({"command":"echo old"}));
    let config = env.scripted_config(&[
        &shell,
        "text: ran it",
        &ask("q"),
        "text: asked in text instead",
        &shell,
        "text: resumed",
    ]);
    let mut k = env.spawn(&config, &["--session", "old"]);
    let (_, init) =
        k.call("i", "initialize", json!({"protocol_version":"1.2","client":{"name":"legacy","version":"0.9"}}));
    assert!(init["result"]["slash_commands"].is_array() && init["result"]["server"].is_object());
    k.send(json!({"jsonrpc":"2.0","id":"p1","method":"prompt","params":{"user_input":"run"}}));
    let (_, request) = k.until_request();
    assert_eq!(request["params"]["type"], "ApprovalRequest");
    k.send(json!({"jsonrpc":"2.0","id":request["id"],"result":{"request_id":request["id"],"response":"approve"}}));
    let (events, response) = k.until_response(&json!("p1"));
    assert_eq!(response["result"], json!({"status":"finished"}));
    assert_eq!(result_of(&events, "s")["output"], "old\n");
    // The model tries to ask; a 1.2 client is never sent a QuestionRequest.
    let (events, response) = k.prompt("p2", json!("ask me"));
    assert_eq!(response["result"]["status"], "finished");
    assert!(!types(&events).iter().any(|t| t.starts_with("request")));
    assert_eq!(result_of(&events, "q")["display"], json!([{"type":"brief","text":"Client unsupported"}]));
    let (events, _) = k.prompt("p3", json!("/yolo"));
    assert_eq!(types(&events), ["TurnBegin", "ContentPart", "TurnEnd"]);
    k.prompt("p4", json!("/yolo"));
    k.send(json!({"jsonrpc":"2.0","id":"p5","method":"prompt","params":{"user_input":"run again"}}));
    k.until_request();
    k.send(json!({"jsonrpc":"2.0","id":"c","method":"cancel"}));
    let (_, response) = k.until_response(&json!("p5"));
    assert_eq!(response["result"], json!({"status":"cancelled"}));
    finish(k);
    let config = env.scripted_config(&["text: resumed"]);
    let mut k = env.spawn(&config, &["--continue"]);
    k.call("i", "initialize", json!({"protocol_version":"1.2"}));
    let (_, response) = k.prompt("p6", json!("continue"));
    assert_eq!(response["result"]["status"], "finished");
    finish(k);
}
