//! Protocol 1.10 basics over real pipes: `initialize` (`docs/protocol-1.10.md` §2.2), the busy table
//! (§2.1), error rules (§2.3, §4.4), `StepRetry` (§4.2) and the scripted-echo additions
//! (`docs/scripted-echo.md` §5).

use crate::common;

use common::{Env, types};
use serde_json::{Value, json};

/// The `result` of a call that must succeed.
fn result_of(k: &mut common::Kiwi, id: &str, method: &str, params: Value) -> Value {
    let response = k.call(id, method, params).1;
    assert!(response.get("error").is_none(), "{response}");
    response["result"].clone()
}

/// §2.2: subscriptions are appended (never removed, duplicates counted), unknown events
/// skipped; config hooks come first in `configured`, by first appearance.
#[test]
fn initialize_counts_config_hooks_and_subscriptions() {
    let env = Env::new();
    let config = env.scripted_config_with(
        &[],
        json!({"hooks":[
            {"event":"UserPromptSubmit","command":"true"},
            {"event":"PreToolUse","command":"true","matcher":"Shell"},
            {"event":"PostToolUse","command":"true"},
            {"event":"Stop","command":"true"}
        ]}),
    );
    let mut k = env.spawn(&config, &[]);
    let init = result_of(&mut k, "i1", "initialize", json!({"protocol_version":"1.0"}));
    assert_eq!(init["protocol_version"], "1.10", "never the client's version");
    assert_eq!(init["hooks"]["configured"], json!({"UserPromptSubmit":1,"PreToolUse":1,"PostToolUse":1,"Stop":1}));
    let subscribe = json!({"protocol_version":"1.10","hooks":[
        {"id":"a","event":"Stop"},
        {"id":"b","event":"Notification","matcher":"task","timeout":5},
        {"id":"c","event":"NoSuchEvent"}
    ]});
    let init = result_of(&mut k, "i2", "initialize", subscribe.clone());
    let configured = &init["hooks"]["configured"];
    assert_eq!(*configured, json!({"UserPromptSubmit":1,"PreToolUse":1,"PostToolUse":1,"Stop":2,"Notification":1}));
    let keys: Vec<&String> = configured.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "Notification"]);
    let init = result_of(&mut k, "i3", "initialize", subscribe);
    assert_eq!(init["hooks"]["configured"]["Stop"], 3);
    assert_eq!(init["capabilities"], json!({"supports_question": true}), "whatever the client declared");
}

#[test]
fn two_initialize_calls_each_subscribing_stop_count_one_then_two() {
    let env = Env::new();
    let config = env.scripted_config(&[]);
    let mut k = env.spawn(&config, &[]);
    let params = json!({"protocol_version":"1.7","hooks":[{"id":"s","event":"Stop"}],"capabilities":null});
    assert_eq!(result_of(&mut k, "a", "initialize", params.clone())["hooks"]["configured"], json!({"Stop":1}));
    assert_eq!(result_of(&mut k, "b", "initialize", params)["hooks"]["configured"], json!({"Stop":2}));
}

#[test]
fn bad_hook_config_is_a_start_up_failure() {
    let env = Env::new();
    for hooks in [json!([{"event":"Sometimes","command":"true"}]), json!([{"event":"Stop","command":"x","timeout":0}])]
    {
        let config = env.scripted_config_with(&[], json!({ "hooks": hooks }));
        let out = env.command(&config, &[]).stdin(std::process::Stdio::null()).output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{hooks}");
        assert!(out.stdout.is_empty());
    }
}

/// §2.1, idle column.
#[test]
fn busy_table_when_idle() {
    let env = Env::new();
    let config = env.scripted_config(&[]);
    let mut k = env.spawn(&config, &[]);
    let idle = json!({"code":-32000,"message":"No agent turn is in progress","data":null});
    assert_eq!(k.call("s", "steer", json!({"user_input":"x"})).1["error"], idle);
    assert_eq!(k.call("c", "cancel", json!({})).1["error"], idle);
    assert_eq!(result_of(&mut k, "r", "replay", json!({})), json!({"status":"finished","events":0,"requests":0}));
    let (events, answer) = k.call("m", "set_plan_mode", json!({"enabled": true}));
    assert_eq!(answer["result"], json!({"status":"ok","plan_mode":true}));
    // §2.5: the status update goes out before the answer, only `plan_mode` set.
    assert_eq!(types(&events), ["StatusUpdate"]);
    assert_eq!(
        events[0]["params"]["payload"],
        json!({"context_usage":null,"context_tokens":null,"max_context_tokens":null,"token_usage":null,"message_id":null,"plan_mode":true,"mcp_status":null})
    );
    let (_, answer) = k.call("m2", "set_plan_mode", json!({"enabled": "false"}));
    assert_eq!(answer["result"], json!({"status":"ok","plan_mode":false}));
    assert_eq!(result_of(&mut k, "i", "initialize", json!({"protocol_version":"1.10"}))["protocol_version"], "1.10");
}

fn shell(id: &str, command: &str) -> String {
    let args = serde_json::to_string(&json!({ "command": command })).unwrap();
    format!("tool_call: {}", json!({"id": id, "name": "Shell", "arguments": args}))
}

/// §2.1, turn column: everything but `steer`, `cancel` and `set_plan_mode` is busy.
#[test]
fn busy_table_during_a_turn() {
    let env = Env::new();
    let config = env.scripted_config(&[&shell("tc-1", "echo hi"), "text: done"]);
    let mut k = env.spawn(&config, &[]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let (_, request) = k.until_request();
    let busy = json!({"code":-32000,"message":"An agent turn is already in progress","data":null});
    for (id, method, params) in [
        ("p1", "prompt", json!({"user_input":"x"})),
        ("i1", "initialize", json!({"protocol_version":"1.10"})),
        ("r1", "replay", json!(null)),
    ] {
        assert_eq!(k.call(id, method, params).1["error"], busy, "{method}");
    }
    let (_, answer) = k.call("m", "set_plan_mode", json!({"enabled": false}));
    assert_eq!(answer["result"], json!({"status":"ok","plan_mode":false}));
    let (_, answer) = k.call("s", "steer", json!({"user_input":"later"}));
    assert_eq!(answer["result"], json!({"status":"steered"}));
    k.send(json!({"jsonrpc":"2.0","id":"c","method":"cancel"}));
    let (events, response) = k.until_response(&json!("p0"));
    assert_eq!(response["result"]["status"], "cancelled");
    assert_eq!(types(&events), ["response", "TurnEnd", "ApprovalResponse"]);
    assert_eq!(events[2]["params"]["payload"]["request_id"], request["id"]);
}

/// Writes a `wire.jsonl` of `turns` recorded turns for session `id` (5 events each).
fn recorded_session(env: &Env, id: &str, turns: usize) -> std::path::PathBuf {
    use md5::{Digest, Md5};
    let key: String = Md5::digest(env.work().to_str().unwrap().as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    let dir = env.share().join("sessions").join(key).join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let mut text = String::from("{\"type\": \"metadata\", \"protocol_version\": \"1.10\"}\n");
    for i in 0..turns {
        for message in [
            json!({"type":"TurnBegin","payload":{"user_input":format!("turn {i}")}}),
            json!({"type":"StepBegin","payload":{"n":1}}),
            json!({"type":"ContentPart","payload":{"type":"text","text":"answer"}}),
            json!({"type":"StatusUpdate","payload":{"context_usage":null,"token_usage":null,"message_id":null}}),
            json!({"type":"TurnEnd","payload":{}}),
        ] {
            text.push_str(&json!({"timestamp": 1.0, "message": message}).to_string());
            text.push('\n');
        }
    }
    std::fs::write(dir.join("wire.jsonl"), text).unwrap();
    dir
}

/// §2.1, replay column (with the recommended -32000 for `steer`), and §2.6 cancel.
#[test]
fn busy_table_during_a_replay() {
    let env = Env::new();
    recorded_session(&env, "big", 20_000);
    let config = env.scripted_config(&[]);
    let mut k = env.spawn(&config, &["--session", "big"]);
    let line = |id: &str, method: &str, params: Value| {
        serde_json::to_string(&json!({"jsonrpc":"2.0","id":id,"method":method,"params":params})).unwrap()
    };
    // One write: the replay is still streaming when the others are handled.
    let batch = [
        line("r", "replay", json!({})),
        line("p", "prompt", json!({"user_input":"x"})),
        line("i", "initialize", json!({"protocol_version":"1.10"})),
        line("r2", "replay", json!({})),
        line("s", "steer", json!({"user_input":"x"})),
        line("m", "set_plan_mode", json!({"enabled": true})),
        line("c", "cancel", json!({})),
    ]
    .join("\n");
    k.send_raw(&batch);
    let mut answers = std::collections::HashMap::new();
    let mut replayed = 0;
    while answers.len() < 7 {
        let m = k.next();
        match m["method"].as_str() {
            Some(_) => replayed += 1,
            None => {
                answers.insert(m["id"].as_str().unwrap().to_string(), m);
            }
        }
    }
    let code = |id: &str| answers[id]["error"]["code"].clone();
    for id in ["p", "i", "r2"] {
        assert_eq!(code(id), -32000, "{id}: {}", answers[id]);
        assert_eq!(answers[id]["error"]["message"], "An agent turn is already in progress");
    }
    assert_eq!(answers["s"]["error"]["message"], "No agent turn is in progress");
    assert_eq!(answers["m"]["result"], json!({"status":"ok","plan_mode":true}));
    assert_eq!(answers["c"]["result"], json!({}));
    let replay = &answers["r"]["result"];
    assert_eq!(replay["status"], "cancelled", "{replay}");
    assert_eq!(replay["requests"], 0);
    let events = replay["events"].as_u64().unwrap();
    assert!(events < 100_000, "stopped early: {events}");
    // Everything sent was counted (the plan-mode update is not part of the replay).
    assert_eq!(replayed, events + 1, "{replay}");
    // Idle again: a prompt runs.
    let (_, response) = k.prompt("after", json!("hi"));
    assert_eq!(response["error"]["code"], -32003, "the script is empty, but the turn ran: {response}");
}

/// §2.3/§4.4 and `docs/scripted-echo.md` §5.3: an internal failure is -32603 `<Kind>: <text>`, after
/// `StepInterrupted` and `TurnEnd`.
#[test]
fn internal_failures_are_32603_with_their_kind() {
    let env = Env::new();
    let config = env.scripted_config(&["tool_call_part: 5"]);
    let mut k = env.spawn(&config, &[]);
    let (events, response) = k.prompt("p", json!("go"));
    assert_eq!(types(&events), ["TurnBegin", "StepBegin", "StepInterrupted", "TurnEnd"]);
    assert_eq!(response["error"]["code"], -32603);
    assert_eq!(
        response["error"]["message"],
        "ValidationError: tool_call_part.arguments_part must be a string at line 1, got int"
    );
}

/// §4.2 and `docs/scripted-echo.md` §5.1 (VERIFIED sequence): two retries, then the last error.
#[test]
fn retries_emit_step_retry_then_the_last_error() {
    let env = Env::new();
    let config = env.scripted_config(&["error: 503 a", "error: 503 b", "error: 503 c"]);
    let mut k = env.spawn(&config, &[]);
    let (events, response) = k.prompt("p", json!("go"));
    assert_eq!(types(&events), ["TurnBegin", "StepBegin", "StepRetry", "StepRetry", "StepInterrupted", "TurnEnd"]);
    for (event, attempt) in [(&events[2], 2), (&events[3], 3)] {
        let p = &event["params"]["payload"];
        assert_eq!(p["n"], 1);
        assert_eq!(p["next_attempt"], attempt);
        assert_eq!(p["max_attempts"], 3);
        assert_eq!(p["error_type"], "APIStatusError");
        assert_eq!(p["status_code"], 503);
        let wait = p["wait_s"].as_f64().unwrap();
        assert!(wait > 0.0 && wait <= 5.0, "{wait}");
    }
    assert_eq!(response["error"], json!({"code":-32003,"message":"c","data":null}));
}

#[test]
fn a_retry_that_succeeds_is_one_step() {
    let env = Env::new();
    let config = env.scripted_config(&["error: connection Server unreachable", "text: ok"]);
    let mut k = env.spawn(&config, &["--max-retries-per-step", "2"]);
    let (events, response) = k.prompt("p", json!("go"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(types(&events), ["TurnBegin", "StepBegin", "StepRetry", "ContentPart", "StatusUpdate", "TurnEnd"]);
    let p = &events[2]["params"]["payload"];
    assert_eq!(
        (&p["error_type"], &p["status_code"], &p["max_attempts"]),
        (&json!("APIConnectionError"), &Value::Null, &json!(2))
    );
}

#[test]
fn non_retryable_simulated_errors_and_bad_specs() {
    let env = Env::new();
    let config = env.scripted_config(&["error: 401 Token expired", "text: a\nerror: nope", "error:", "error: timeout"]);
    let mut k = env.spawn(&config, &["--max-retries-per-step", "1"]);
    let (events, response) = k.prompt("p1", json!("go"));
    assert_eq!(types(&events), ["TurnBegin", "StepBegin", "StepInterrupted", "TurnEnd"], "nothing streamed");
    assert_eq!(response["error"], json!({"code":-32003,"message":"Token expired","data":null}));
    let (_, response) = k.prompt("p2", json!("go"));
    assert_eq!(
        response["error"]["message"],
        "Invalid error spec at line 2: expected status code or 'connection'/'timeout', got 'nope'"
    );
    let (_, response) = k.prompt("p3", json!("go"));
    assert_eq!(response["error"]["message"], "Empty error payload at line 1: 'error:'");
    let (events, response) = k.prompt("p4", json!("go"));
    assert!(!types(&events).contains(&"StepRetry".to_string()), "one attempt: nothing to retry");
    assert_eq!(response["error"]["message"], "Simulated timeout error");
}

/// `docs/scripted-echo.md` §5.2: a response with only thinking is retried like an empty one.
#[test]
fn thinking_only_responses_are_retried() {
    let env = Env::new();
    let config = env.scripted_config(&["think: only thinking", "think: again", "think: x\ntext:"]);
    let mut k = env.spawn(&config, &[]);
    let (events, response) = k.prompt("p", json!("go"));
    let tys = types(&events);
    assert_eq!(tys.iter().filter(|t| *t == "StepRetry").count(), 2, "{tys:?}");
    assert_eq!(events[3]["params"]["payload"]["error_type"], "APIEmptyResponseError");
    assert_eq!(
        response["error"]["message"],
        "The API returned a response containing only thinking content without any text or tool calls. This usually indicates the stream was interrupted or the output token budget was exhausted during reasoning."
    );
}

/// `kiwi schema` prints the committed JSON Schema (`docs/wire-schema-1.10.json`).
#[test]
fn schema_command_prints_the_committed_schema() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kiwi")).arg("schema").output().unwrap();
    assert!(out.status.success());
    let committed =
        std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/wire-schema-1.10.json")).unwrap();
    assert!(out.stdout == committed, "`kiwi schema` and the committed schema differ");
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let methods: Vec<&String> = doc["methods"].as_object().unwrap().keys().collect();
    assert_eq!(
        methods,
        ["initialize", "prompt", "steer", "replay", "set_plan_mode", "cancel", "run", "fork", "undo", "interrupt"]
    );
}
