//! Whole turns over real pipes with the scripted echo provider.

use crate::common;

use std::time::{Duration, Instant};

use common::{Env, types};
use serde_json::{Value, json};

fn todo_call(id: &str) -> String {
    format!(
        r#"tool_call: {{"id": "{id}", "name": "SetTodoList", "arguments": "{{\"todos\": [{{\"title\": \"a\", \"status\": \"pending\"}}]}}"}}"#
    )
}

/// A turn of one tool call and a closing answer, as every client that asks nothing sees it.
const ONE_TOOL_STEP_TURN: [&str; 9] = [
    "TurnBegin",
    "StepBegin",
    "ToolCall",
    "StatusUpdate",
    "ToolResult",
    "StepBegin",
    "ContentPart",
    "StatusUpdate",
    "TurnEnd",
];

/// `docs/protocol-1.10.md` §2.2 and `docs/compatibility.md`: a client that asks for nothing gets
/// the reference's answer member for member — "1.10" whatever it sent, the nine built-in commands
/// with their exact descriptions, `hooks` and `capabilities`, and no kiwi-only member. The whole
/// object is pinned, so that no later addition can change it unnoticed.
#[test]
fn initialize_is_the_reference_answer_for_a_client_that_asks_nothing() {
    let env = Env::new();
    let config = env.scripted_config(&[]);
    let mut k = env.spawn(&config, &[]);
    let init = k.initialize();
    let cmd = |name: &str, description: &str| json!({"name": name, "description": description, "aliases": []});
    let expected = json!({
        "protocol_version": "1.10",
        "server": {"name": "Kimi Code CLI", "version": env!("CARGO_PKG_VERSION")},
        "slash_commands": [
            cmd("init", "Analyze the codebase and generate an `AGENTS.md` file"),
            cmd("compact", "Compact the context (optionally with a custom focus, e.g. /compact keep db discussions)"),
            {"name": "clear", "description": "Clear the context", "aliases": ["reset"]},
            cmd("yolo", "Toggle YOLO mode (auto-approve all actions)"),
            cmd("afk", "Toggle afk mode (auto-dismiss AskUserQuestion, auto-approve tool calls)"),
            cmd("plan", "Toggle plan mode. Usage: /plan [on|off|view|clear]"),
            cmd("add-dir", "Add a directory to the workspace. Usage: /add-dir <path>. Run without args to list added dirs"),
            cmd("export", "Export current session context to a markdown file"),
            cmd("import", "Import context from a file or session ID"),
        ],
        "hooks": {
            "supported_events": ["PreToolUse","PostToolUse","PostToolUseFailure","UserPromptSubmit","Stop","StopFailure",
                "SessionStart","SessionEnd","SubagentStart","SubagentStop","PreCompact","PostCompact","Notification"],
            "configured": {}
        },
        "capabilities": {"supports_question": true}
    });
    assert_eq!(init["result"], expected, "{init}");
    // Key order too (harnesses compare the text).
    let keys: Vec<&String> = init["result"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["protocol_version", "server", "slash_commands", "hooks", "capabilities"]);
    // The same for a 1.10 client with capabilities, hooks and an explicit `extensions: null`.
    let (_, again) = k.call(
        "init2",
        "initialize",
        json!({"protocol_version": "1.10", "capabilities": {"supports_question": true}, "extensions": null}),
    );
    assert_eq!(again["result"], expected, "{again}");
    // Typed kiwi commands still work for this client.
    let (events, r) = k.prompt("p1", json!("/undo"));
    assert_eq!(r["result"], json!({"status": "finished"}), "{r}");
    let said: String = events.iter().filter_map(|e| e["params"]["payload"]["text"].as_str()).collect();
    assert_eq!(said, "Nothing was undone: Nothing to undo: the session has no turns", "{events:?}");
}

/// A client that asks for kiwi's extensions gets them listed: `extensions` names what was granted
/// (unknown names dropped) and `/fork` and `/undo` join the command list; asking for none gives an
/// empty grant. A wrong type is -32602 like any bad `initialize` param.
#[test]
fn initialize_lists_extensions_only_for_clients_that_ask() {
    let env = Env::new();
    let config = env.scripted_config(&[]);
    let mut k = env.spawn(&config, &[]);
    let (_, r) = k.call("i1", "initialize", json!({"protocol_version": "1.10", "extensions": ["undo", "teleport"]}));
    assert_eq!(r["result"]["extensions"], json!(["undo"]), "{r}");
    let names = |r: &Value| -> Vec<String> {
        r["result"]["slash_commands"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&r).last().map(String::as_str), Some("undo"));
    assert!(!names(&r).contains(&"fork".to_string()));
    let keys: Vec<String> = r["result"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys.last().map(String::as_str), Some("extensions"));
    let (_, r) = k.call("i2", "initialize", json!({"protocol_version": "1.10", "extensions": ["fork", "undo"]}));
    assert_eq!(r["result"]["extensions"], json!(["fork", "undo"]), "{r}");
    assert_eq!(&names(&r)[9..], ["fork", "undo"]);
    let (_, r) = k.call("i3", "initialize", json!({"protocol_version": "1.10", "extensions": []}));
    assert_eq!(r["result"]["extensions"], json!([]), "{r}");
    assert_eq!(names(&r).len(), 9);
    let (_, r) = k.call("i4", "initialize", json!({"protocol_version": "1.10", "extensions": "undo"}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(r["error"]["message"], "Invalid parameters for method `initialize`", "{r}");
}

#[test]
fn plain_turn_event_order_and_shapes() {
    let env = Env::new();
    let config =
        env.scripted_config(&["id: scripted-1\nusage: {\"input_other\": 5, \"output\": 2}\ntext: Hello\ntext:  wire"]);
    let mut k = env.spawn(&config, &[]);
    let (events, response) = k.prompt("p0", json!("go"));
    assert_eq!(response, json!({"jsonrpc":"2.0","id":"p0","result":{"status":"finished"}}));
    assert_eq!(types(&events), ["TurnBegin", "StepBegin", "ContentPart", "ContentPart", "StatusUpdate", "TurnEnd"]);
    assert_eq!(
        events[0],
        json!({"jsonrpc":"2.0","method":"event","params":{"type":"TurnBegin","payload":{"user_input":"go"}}})
    );
    assert_eq!(events[3]["params"]["payload"], json!({"type":"text","text":" wire"}));
    // `docs/protocol-1.10.md` §3.2: seven members; a step's update carries the plan mode, never null.
    assert_eq!(
        events[4]["params"]["payload"],
        json!({"context_usage":5e-05,"context_tokens":5,"max_context_tokens":100000,"token_usage":{"input_other":5,"output":2,"input_cache_read":0,"input_cache_creation":0},"message_id":"scripted-1","plan_mode":false,"mcp_status":null})
    );
    assert_eq!(events[5]["params"]["payload"], json!({}));
}

#[test]
fn tool_turn_then_max_steps() {
    let env = Env::new();
    let call = todo_call("tc-1");
    let config = env.scripted_config(&[&format!("text: start\n{call}"), "text: done", &todo_call("tc-2")]);
    let mut k = env.spawn(&config, &["--max-steps-per-turn", "1"]);
    let (events, response) = k.prompt("p0", json!("go"));
    assert_eq!(response["result"], json!({"status":"max_steps_reached","steps":1}));
    // `docs/protocol-1.10.md` §4.4: max steps now ends with `TurnEnd` too.
    assert_eq!(
        types(&events),
        ["TurnBegin", "StepBegin", "ContentPart", "ToolCall", "StatusUpdate", "ToolResult", "TurnEnd"]
    );
    assert_eq!(
        events[5]["params"]["payload"],
        // `docs/protocol-1.10.md` §11: the output says it too.
        json!({"tool_call_id":"tc-1","return_value":{"is_error":false,"output":"Todo list updated","message":"Todo list updated","display":[{"type":"todo","items":[{"title":"a","status":"pending"}]}],"extras":null}})
    );
}

#[test]
fn two_step_tool_turn_and_context_file() {
    let env = Env::new();
    let config = env.scripted_config(&[&todo_call("tc-1"), "text: done"]);
    let mut k = env.spawn(&config, &["--session", "s1"]);
    let (events, response) = k.prompt("p0", json!("go"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(types(&events), ONE_TOOL_STEP_TURN);
    k.close_stdin();
    assert!(k.wait_exit(Duration::from_secs(5)).unwrap().success());
    let dir = env.session_dir("s1");
    let context = std::fs::read_to_string(dir.join("context.jsonl")).unwrap();
    // `docs/protocol-1.10.md` §10.3: the file opens with the `_system_prompt` record.
    let all: Vec<&str> = context.lines().collect();
    assert!(all[0].starts_with(r#"{"role": "_system_prompt", "content": ""#));
    let lines = &all[1..];
    assert_eq!(lines[0], r#"{"role": "_checkpoint", "id": 0}"#);
    assert_eq!(lines[1], r#"{"role":"user","content":"go"}"#);
    assert_eq!(lines[2], r#"{"role": "_checkpoint", "id": 1}"#);
    assert!(lines[3].starts_with(r#"{"role":"assistant","content":[],"tool_calls":[{"type":"function","id":"tc-1""#));
    assert_eq!(
        lines[4],
        r#"{"role":"tool","content":[{"type":"text","text":"<system>Todo list updated</system>"},{"type":"text","text":"Todo list updated"}],"tool_call_id":"tc-1"}"#
    );
    assert_eq!(lines[5], r#"{"role": "_checkpoint", "id": 2}"#);
    assert_eq!(lines[6], r#"{"role":"assistant","content":"done"}"#);
    let wire = std::fs::read_to_string(dir.join("wire.jsonl")).unwrap();
    assert_eq!(wire.lines().next().unwrap(), r#"{"type": "metadata", "protocol_version": "1.10"}"#);
    assert_eq!(wire.lines().count(), 1 + events.len());
}

#[test]
fn tool_call_part_streaming() {
    let env = Env::new();
    let script = "text: start\ntool_call: {\"id\": \"tc-1\", \"name\": \"SetTodoList\", \"arguments\": null}\ntool_call_part: {\"arguments_part\": \"{\"}\ntool_call_part: {\"arguments_part\": \"\\\"todos\\\":[{\\\"title\\\":\\\"a\\\",\\\"status\\\":\\\"pending\\\"}]\"}\ntool_call_part: {\"arguments_part\": \"}\"}\ntool_call_part:";
    let config = env.scripted_config(&[script, "text: ok"]);
    let mut k = env.spawn(&config, &[]);
    let (events, response) = k.prompt("p0", json!("go"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(
        &types(&events)[..8],
        [
            "TurnBegin",
            "StepBegin",
            "ContentPart",
            "ToolCall",
            "ToolCallPart",
            "ToolCallPart",
            "ToolCallPart",
            "ToolCallPart"
        ]
    );
    assert_eq!(events[7]["params"]["payload"], json!({"arguments_part": null}));
    assert_eq!(events[9]["params"]["payload"]["return_value"]["message"], "Todo list updated");
}

#[test]
fn unknown_tool_and_bad_arguments_are_tool_errors() {
    let env = Env::new();
    let script = "tool_call: {\"id\": \"a\", \"name\": \"SendDMail\", \"arguments\": \"{}\"}\ntool_call: {\"id\": \"b\", \"name\": \"SetTodoList\", \"arguments\": \"{nope\"}\ntool_call: {\"id\": \"c\", \"name\": \"SetTodoList\", \"arguments\": \"{\\\"todos\\\": 5}\"}";
    let config = env.scripted_config(&[script, "text: ok"]);
    let mut k = env.spawn(&config, &[]);
    let (events, response) = k.prompt("p0", json!("go"));
    assert_eq!(response["result"]["status"], "finished");
    let results: Vec<&Value> =
        events.iter().filter(|e| e["params"]["type"] == "ToolResult").map(|e| &e["params"]["payload"]).collect();
    assert_eq!(results.len(), 3);
    let by_id = |id: &str| results.iter().find(|r| r["tool_call_id"] == id).unwrap()["return_value"].clone();
    assert_eq!(by_id("a")["message"], "Tool `SendDMail` not found");
    assert_eq!(by_id("a")["display"], json!([{"type":"brief","text":"Tool `SendDMail` not found"}]));
    assert!(by_id("b")["message"].as_str().unwrap().starts_with("Error parsing JSON arguments: "));
    assert_eq!(by_id("b")["display"], json!([{"type":"brief","text":"Invalid arguments"}]));
    assert!(by_id("c")["message"].as_str().unwrap().starts_with("Error validating JSON arguments: "));
}

#[test]
fn slash_commands() {
    let env = Env::new();
    let config = env.scripted_config(&["text: hello"]);
    let mut k = env.spawn(&config, &[]);
    let (events, r) = k.prompt("a", json!("/foo bar"));
    assert_eq!(r["result"]["status"], "finished");
    assert_eq!(types(&events), ["TurnBegin", "ContentPart", "TurnEnd"]);
    assert_eq!(events[1]["params"]["payload"]["text"], "Unknown slash command \"/foo\".");
    let (events, _) = k.prompt("b", json!("/yolo"));
    assert_eq!(events[1]["params"]["payload"]["text"], "You only live once! All actions will be auto-approved.");
    let (events, _) = k.prompt("c", json!("/yolo"));
    assert_eq!(events[1]["params"]["payload"]["text"], "You only die once! Actions will require approval.");
    let (events, _) = k.prompt("d", json!("/compact"));
    assert_eq!(types(&events), ["TurnBegin", "ContentPart", "TurnEnd"]);
    assert_eq!(events[1]["params"]["payload"]["text"], "The context is empty.");
    let (_, r) = k.prompt("e", json!("hi"));
    assert_eq!(r["result"]["status"], "finished");
    let (events, _) = k.prompt("f", json!("/reset"));
    assert_eq!(types(&events), ["TurnBegin", "ContentPart", "StatusUpdate", "TurnEnd"]);
    // `docs/protocol-1.10.md` §3.2: `/clear` reports the context's fill with its token members.
    assert_eq!(
        events[2]["params"]["payload"],
        json!({"context_usage":0.0,"context_tokens":0,"max_context_tokens":100000,"token_usage":null,"message_id":null,"plan_mode":null,"mcp_status":null})
    );
}

fn register_external(k: &mut common::Kiwi) -> Value {
    k.call(
        "init",
        "initialize",
        json!({"protocol_version":"1.2","client":{"name":"test","version":"1"},"external_tools":[
            {"name":"ext","description":"","parameters":{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}},
            {"name":"SetTodoList","description":"clash","parameters":{"type":"object"}},
            {"name":"bad","description":"d","parameters":{"type":"nope"}}
        ]}),
    )
    .1
}

#[test]
fn external_tool_round_trip() {
    let env = Env::new();
    let call = r#"tool_call: {"id": "ext-1", "name": "ext", "arguments": "{\"q\": \"x\"}"}"#;
    let invalid = r#"tool_call: {"id": "ext-2", "name": "ext", "arguments": "{}"}"#;
    let config = env.scripted_config(&[&format!("{call}\n{invalid}"), "text: done"]);
    let mut k = env.spawn(&config, &[]);
    let init = register_external(&mut k);
    let ext = &init["result"]["external_tools"];
    assert_eq!(ext["accepted"], json!(["ext"]));
    assert_eq!(ext["rejected"][0], json!({"name":"SetTodoList","reason":"conflicts with builtin tool"}));
    assert_eq!(ext["rejected"][1]["name"], "bad");

    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let (before, request) = k.until_request();
    assert_eq!(types(&before)[..5], ["TurnBegin", "StepBegin", "ToolCall", "ToolCall", "StatusUpdate"]);
    assert_eq!(request["id"], "ext-1");
    assert_eq!(
        request["params"],
        json!({"type":"ToolCallRequest","payload":{"id":"ext-1","name":"ext","arguments":"{\"q\": \"x\"}"}})
    );
    k.send(json!({"jsonrpc":"2.0","id":"ext-1","result":{"tool_call_id":"ext-1","return_value":{"is_error":false,"output":"pong","message":"m","display":[{"type":"custom","foo":1}]}}}));
    let (mut events, response) = k.until_response(&json!("p0"));
    assert_eq!(response["result"]["status"], "finished");
    // The invalid call's result does not wait for the client; results come in completion order.
    let mut all = before[5..].to_vec();
    all.append(&mut events);
    let events = all;
    assert_eq!(types(&events), ["ToolResult", "ToolResult", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd"]);
    let invalid = events.iter().find(|e| e["params"]["payload"]["tool_call_id"] == "ext-2").unwrap();
    assert!(
        invalid["params"]["payload"]["return_value"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Error validating JSON arguments")
    );
    let answered = events.iter().find(|e| e["params"]["payload"]["tool_call_id"] == "ext-1").unwrap();
    assert_eq!(
        answered["params"]["payload"],
        json!({"tool_call_id":"ext-1","return_value":{"is_error":false,"output":"pong","message":"m","display":[{"type":"custom","data":{"foo":1}}],"extras":null}})
    );
}

#[test]
fn external_tool_error_answer_and_cancel_while_waiting() {
    let env = Env::new();
    let call = |id: &str| format!(r#"tool_call: {{"id": "{id}", "name": "ext", "arguments": "{{\"q\": \"x\"}}"}}"#);
    let config = env.scripted_config(&[&call("e1"), "text: after error", &call("e2"), "text: next turn"]);
    let mut k = env.spawn(&config, &[]);
    register_external(&mut k);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let (_, request) = k.until_request();
    k.send(json!({"jsonrpc":"2.0","id":request["id"],"error":{"code":-1,"message":"client broke"}}));
    let (events, response) = k.until_response(&json!("p0"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(
        events[0]["params"]["payload"]["return_value"],
        json!({"is_error":true,"output":"","message":"client broke","display":[{"type":"brief","text":"External tool error"}],"extras":null})
    );

    k.send(json!({"jsonrpc":"2.0","id":"p1","method":"prompt","params":{"user_input":"again"}}));
    let (_, request) = k.until_request();
    let started = Instant::now();
    k.send(json!({"jsonrpc":"2.0","id":"c1","method":"cancel"}));
    let cancel_response = k.next();
    assert_eq!(cancel_response, json!({"jsonrpc":"2.0","id":"c1","result":{}}));
    let (events, response) = k.until_response(&json!("p1"));
    assert!(started.elapsed() < Duration::from_secs(2));
    // `docs/protocol-1.10.md` §4.4: only the owed `TurnEnd` after the cancel.
    assert_eq!(types(&events), ["TurnEnd"], "{events:?}");
    assert_eq!(response["result"]["status"], "cancelled");
    // A late answer is ignored; the next prompt works and the LLM was not called again for p1.
    k.send(json!({"jsonrpc":"2.0","id":request["id"],"result":{"tool_call_id":"e2","return_value":{"is_error":false,"output":"late","message":"","display":[]}}}));
    let (events, response) = k.prompt("p2", json!("third"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(events[2]["params"]["payload"]["text"], "next turn");
}

#[test]
fn concurrent_prompt_and_initialize_are_busy() {
    let env = Env::new();
    let call = r#"tool_call: {"id": "e1", "name": "ext", "arguments": "{\"q\": \"x\"}"}"#;
    let config = env.scripted_config(&[call, "text: done"]);
    let mut k = env.spawn(&config, &[]);
    register_external(&mut k);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let (_, request) = k.until_request();
    let (_, busy) = k.call("p1", "prompt", json!({"user_input":"x"}));
    assert_eq!(busy["error"], json!({"code":-32000,"message":"An agent turn is already in progress","data":null}));
    let (_, busy) = k.call("i1", "initialize", json!({"protocol_version":"1.2"}));
    assert_eq!(busy["error"]["code"], -32000);
    // A flood of requests while the turn waits: each answered, the turn unaffected.
    for i in 0..10_000 {
        k.send(json!({"jsonrpc":"2.0","id":i,"method":"prompt","params":{"user_input":"x"}}));
    }
    for i in 0..10_000 {
        let m = k.next();
        assert_eq!(m["id"], json!(i));
        assert_eq!(m["error"]["code"], -32000);
    }
    k.send(json!({"jsonrpc":"2.0","id":request["id"],"result":{"tool_call_id":"e1","return_value":{"is_error":false,"output":"","message":"","display":[]}}}));
    let (_, response) = k.until_response(&json!("p0"));
    assert_eq!(response["result"]["status"], "finished");
}

#[test]
fn legacy_run_interrupt_and_integer_ids() {
    let env = Env::new();
    let call = r#"tool_call: {"id": "e1", "name": "ext", "arguments": "{\"q\": \"x\"}"}"#;
    let config = env.scripted_config(&["text: legacy", call]);
    let mut k = env.spawn(&config, &[]);
    k.send(json!({"jsonrpc":"2.0","id":7,"method":"run","params":{"prompt":"hello"}}));
    let (events, response) = k.until_response(&json!(7));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(events[2]["params"]["payload"]["text"], "legacy");
    register_external(&mut k);
    k.send(json!({"jsonrpc":"2.0","id":8,"method":"run","params":{"input":"go"}}));
    k.until_request();
    k.send(json!({"jsonrpc":"2.0","method":"interrupt"}));
    let (_, response) = k.until_response(&json!(8));
    assert_eq!(response["result"]["status"], "cancelled");
}

#[test]
fn eof_mid_turn_exits_cleanly() {
    let env = Env::new();
    let call = r#"tool_call: {"id": "e1", "name": "ext", "arguments": "{\"q\": \"x\"}"}"#;
    let config = env.scripted_config(&[call]);
    let mut k = env.spawn(&config, &[]);
    register_external(&mut k);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    k.until_request();
    let started = Instant::now();
    k.close_stdin();
    let status = k.wait_exit(Duration::from_secs(3)).expect("exits after EOF");
    assert!(status.success());
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[test]
fn sigterm_exits_zero() {
    let env = Env::new();
    let config = env.scripted_config(&[]);
    let mut k = env.spawn(&config, &[]);
    k.initialize();
    unsafe { libc_kill(k.child.id() as i32, 15) };
    let status = k.wait_exit(Duration::from_secs(3)).expect("exits after SIGTERM");
    assert!(status.success());
}

unsafe extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

#[test]
fn closed_stdout_ends_the_process() {
    let env = Env::new();
    let config = env.scripted_config(&[]);
    let mut cmd = env.command(&config, &[]);
    cmd.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    drop(child.stdout.take());
    let mut stdin = child.stdin.take().unwrap();
    use std::io::Write;
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        // Keep stdin open; each request makes the server write to the closed pipe.
        let _ = stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"method\":\"cancel\"}\n");
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success());
            break;
        }
        assert!(Instant::now() < deadline, "kiwi kept running with stdout closed");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn startup_failures_exit_nonzero_with_nothing_on_stdout() {
    let env = Env::new();
    let bad = env.dir.path().join("bad.toml");
    std::fs::write(&bad, "default_model = [").unwrap();
    let out = env.command(&bad, &[]).stdin(std::process::Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("Invalid TOML in configuration file"));

    let config = env.scripted_config(&[]);
    let out = env.command(&config, &["--bogus-flag"]).stdin(std::process::Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());

    let missing = env.dir.path().join("nope.json");
    std::fs::write(&missing, r#"{"default_model":"s","models":{"s":{"provider":"p","model":"m","max_context_size":10}},"providers":{"p":{"type":"_scripted_echo","env":{"KIMI_SCRIPTED_ECHO_SCRIPTS":"/definitely/missing.json"}}}}"#).unwrap();
    let out = env.command(&missing, &[]).stdin(std::process::Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("Scripted echo file not found: /definitely/missing.json"));
    assert!(out.stdout.is_empty());
}

#[test]
fn scripted_echo_trace_lines_keep_their_place() {
    let env = Env::new();
    let config = env.scripted_config(&["text: traced"]);
    let mut cmd = env.command(&config, &[]);
    cmd.env("KIMI_SCRIPTED_ECHO_TRACE", " On ");
    let mut k = common::Kiwi::spawn(cmd);
    let (events, _) = k.prompt("p", json!("go"));
    assert_eq!(types(&events), ["TurnBegin", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd"]);
    assert_eq!(k.raw, vec![(2, "SCRIPTED_ECHO TURN 1: \"text: traced\"".to_string())]);
}

/// `docs/configuration.md` §1.1/§1.2: `--work-dir` is validated with the other flags (a usage
/// error, exit 2) before any config is read, so a bad config does not mask it.
#[test]
fn missing_work_dir_is_a_usage_error_even_with_a_bad_config() {
    let env = Env::new();
    let bad = env.dir.path().join("bad.toml");
    std::fs::write(&bad, "default_model = [").unwrap();
    let missing = env.dir.path().join("no-such-dir");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kiwi"));
    cmd.arg("--wire").arg("--config-file").arg(&bad).arg("--work-dir").arg(&missing);
    cmd.env("HOME", env.home()).env("KIMI_SHARE_DIR", env.share());
    let out = cmd.stdin(std::process::Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
    assert!(out.stdout.is_empty());
}

/// kiwi's `tool_output` extension: a client that asks gets `ToolOutput` events with a running
/// Shell command's lines, all before the call's `ToolResult`, and the record keeps none of them;
/// a client that asks nothing gets the turn it always got, frame for frame.
#[test]
fn running_shell_output_reaches_only_clients_that_ask() {
    let shell = |id: &str| {
        let args = serde_json::to_string(&json!({"command": "echo one; sleep 0.3; echo two >&2; echo three"})).unwrap();
        format!("tool_call: {}", json!({"id": id, "name": "Shell", "arguments": args}))
    };
    let env = Env::new();
    let config = env.scripted_config(&[&shell("tc-1"), "text: done", &shell("tc-2"), "text: done"]);
    let mut k = env.spawn(&config, &["--yolo", "--session", "out"]);
    let (_, r) = k.call("i1", "initialize", json!({"protocol_version": "1.10", "extensions": ["tool_output"]}));
    assert_eq!(r["result"]["extensions"], json!(["tool_output"]), "{r}");
    let (events, r) = k.prompt("p1", json!("go"));
    assert_eq!(r["result"]["status"], "finished", "{r}");
    let outputs: Vec<&Value> = events.iter().filter(|e| e["params"]["type"] == "ToolOutput").collect();
    assert!(!outputs.is_empty(), "{events:?}");
    let text: String = outputs.iter().map(|e| e["params"]["payload"]["text"].as_str().unwrap()).collect();
    // Whole lines; stdout and stderr are two pipes, so only each one's own order is fixed.
    let mut lines: Vec<&str> = text.lines().collect();
    assert!(text.ends_with('\n') && text.find("one") < text.find("three"), "{text:?}");
    lines.sort();
    assert_eq!(lines, ["one", "three", "two"]);
    assert!(outputs.iter().all(|e| e["params"]["payload"]["tool_call_id"] == "tc-1"));
    let keys: Vec<&String> = outputs[0]["params"]["payload"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["tool_call_id", "text"]);
    let last_output = events.iter().rposition(|e| e["params"]["type"] == "ToolOutput").unwrap();
    let result = events.iter().position(|e| e["params"]["type"] == "ToolResult").unwrap();
    assert!(last_output < result, "{:?}", types(&events));
    let without: Vec<String> = types(&events).into_iter().filter(|t| t != "ToolOutput").collect();
    // The same client asking nothing again: the reference's turn, nothing else.
    let (_, r) = k.call("i2", "initialize", json!({"protocol_version": "1.10"}));
    assert!(r["result"].get("extensions").is_none(), "{r}");
    let (events, r) = k.prompt("p2", json!("again"));
    assert_eq!(r["result"]["status"], "finished", "{r}");
    assert_eq!(types(&events), without);
    assert_eq!(types(&events), ONE_TOOL_STEP_TURN);
    assert!(events.iter().all(|e| !e.to_string().contains("ToolOutput")));
    let record = std::fs::read_to_string(env.session_dir("out").join("wire.jsonl")).unwrap();
    assert!(!record.contains("ToolOutput"), "{record}");
}
