//! JSON-RPC classification and method errors, over real pipes.

use crate::common;

use common::{Env, types};
use serde_json::json;
use std::time::Duration;

#[test]
fn classification_errors_and_server_keeps_serving() {
    let env = Env::new();
    let config = env.scripted_config(&[]);
    let mut k = env.spawn(&config, &[]);
    let cases: Vec<(&str, serde_json::Value)> = vec![
        (
            "{not-json}",
            json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Invalid JSON format","data":null}}),
        ),
        ("", json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Invalid JSON format","data":null}})),
        ("[1,2]", json!({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request","data":null}})),
        (
            r#"{"jsonrpc":"2.1","id":"bad"}"#,
            json!({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request","data":null}}),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"x","method":null}"#,
            json!({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid response","data":null}}),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"n1","method":"nope"}"#,
            json!({"jsonrpc":"2.0","id":"n1","error":{"code":-32601,"message":"Unexpected method received: nope","data":null}}),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"n2","method":"event"}"#,
            json!({"jsonrpc":"2.0","id":"n2","error":{"code":-32601,"message":"Unexpected method received: event","data":null}}),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"n3","method":"btw"}"#,
            json!({"jsonrpc":"2.0","id":"n3","error":{"code":-32601,"message":"Unexpected method received: btw","data":null}}),
        ),
        // `docs/protocol-1.10.md` §2.6: no `wire.jsonl` yet → finished with nothing sent.
        (
            r#"{"jsonrpc":"2.0","id":"rp","method":"replay"}"#,
            json!({"jsonrpc":"2.0","id":"rp","result":{"status":"finished","events":0,"requests":0}}),
        ),
        // `docs/protocol-1.10.md` §2.1/§2.4: the new methods' parameter and state errors.
        (
            r#"{"jsonrpc":"2.0","id":"s1","method":"steer","params":{}}"#,
            json!({"jsonrpc":"2.0","id":"s1","error":{"code":-32602,"message":"Invalid parameters for method `steer`","data":null}}),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"s2","method":"steer","params":{"user_input":[{"type":"bogus"}]}}"#,
            json!({"jsonrpc":"2.0","id":"s2","error":{"code":-32602,"message":"Invalid parameters for method `steer`","data":null}}),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"s3","method":"steer","params":{"user_input":"more"}}"#,
            json!({"jsonrpc":"2.0","id":"s3","error":{"code":-32000,"message":"No agent turn is in progress","data":null}}),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"m1","method":"set_plan_mode"}"#,
            json!({"jsonrpc":"2.0","id":"m1","error":{"code":-32602,"message":"Invalid parameters for method `set_plan_mode`","data":null}}),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"m2","method":"set_plan_mode","params":{"enabled":"yes"}}"#,
            json!({"jsonrpc":"2.0","id":"m2","error":{"code":-32602,"message":"Invalid parameters for method `set_plan_mode`","data":null}}),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"i2","method":"initialize","params":{"protocol_version":"1.10","capabilities":{"supports_question":1}}}"#,
            json!({"jsonrpc":"2.0","id":"i2","error":{"code":-32602,"message":"Invalid parameters for method `initialize`","data":null}}),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"i3","method":"initialize","params":{"protocol_version":"1.10","hooks":[{"event":"Stop"}]}}"#,
            json!({"jsonrpc":"2.0","id":"i3","error":{"code":-32602,"message":"Invalid parameters for method `initialize`","data":null}}),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"p1","method":"prompt","params":{}}"#,
            json!({"jsonrpc":"2.0","id":"p1","error":{"code":-32602,"message":"Invalid parameters for method `prompt`","data":null}}),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"p2","method":"prompt","params":{"user_input":[{"type":"bogus"}]}}"#,
            json!({"jsonrpc":"2.0","id":"p2","error":{"code":-32602,"message":"Invalid parameters for method `prompt`","data":null}}),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"p3","method":"prompt","params":{"user_input":7}}"#,
            json!({"jsonrpc":"2.0","id":"p3","error":{"code":-32602,"message":"Invalid parameters for method `prompt`","data":null}}),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"i1","method":"initialize","params":{}}"#,
            json!({"jsonrpc":"2.0","id":"i1","error":{"code":-32602,"message":"Invalid parameters for method `initialize`","data":null}}),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"c1","method":"cancel"}"#,
            json!({"jsonrpc":"2.0","id":"c1","error":{"code":-32000,"message":"No agent turn is in progress","data":null}}),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"c2","method":"cancel","params":[1]}"#,
            json!({"jsonrpc":"2.0","id":"c2","error":{"code":-32000,"message":"No agent turn is in progress","data":null}}),
        ),
        (
            r#"{"jsonrpc":"2.0","id":42,"method":"cancel"}"#,
            json!({"jsonrpc":"2.0","id":42,"error":{"code":-32000,"message":"No agent turn is in progress","data":null}}),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"r1","method":"run","params":{"input":5}}"#,
            json!({"jsonrpc":"2.0","id":"r1","error":{"code":-32602,"message":"Invalid parameters for method `run`","data":null}}),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"r2","method":"run"}"#,
            json!({"jsonrpc":"2.0","id":"r2","error":{"code":-32602,"message":"Invalid parameters for method `run`","data":null}}),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"q1","method":"interrupt"}"#,
            json!({"jsonrpc":"2.0","id":"q1","result":{"status":"idle"}}),
        ),
    ];
    for (line, expected) in cases {
        k.send_raw(line);
        assert_eq!(k.next(), expected, "for input {line:?}");
    }
    // Messages that get no answer at all, then proof the server still answers.
    for line in [
        "{}",
        r#"{"jsonrpc":"2.0"}"#,
        r#"{"jsonrpc":"2.0","id":"r3"}"#,
        r#"{"jsonrpc":"2.0","id":"unknown","result":null}"#,
        r#"{"jsonrpc":"2.0","method":"nope"}"#,
        r#"{"jsonrpc":"2.0","method":"cancel"}"#,
        r#"{"jsonrpc":"2.0","method":"interrupt"}"#,
    ] {
        k.send_raw(line);
    }
    let (before, init) = k.call("ok", "initialize", json!({"protocol_version": "1.2"}));
    assert!(before.is_empty(), "unexpected answers: {before:?}");
    assert_eq!(init["result"]["protocol_version"], "1.10", "never the client's version (docs/protocol-1.10.md §2.2)");
}

#[test]
fn invalid_utf8_and_random_bytes_never_crash() {
    let env = Env::new();
    let config = env.scripted_config(&[]);
    let mut k = env.spawn(&config, &[]);
    k.send_bytes(b"\xff\xfe\xfd garbage\n");
    assert_eq!(k.next()["error"]["code"], -32700);
    let mut seed: u64 = 0x9E3779B97F4A7C15;
    let mut noise = Vec::with_capacity(64 * 1024);
    for _ in 0..64 * 1024 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let b = (seed & 0xff) as u8;
        noise.push(if b == b'\n' { b'x' } else { b });
    }
    noise.push(b'\n');
    k.send_bytes(&noise);
    let reply = k.next();
    assert!(reply["error"]["code"] == -32700 || reply["error"]["code"] == -32600, "{reply}");
    let (_, init) = k.call("after", "initialize", json!({"protocol_version": "1.2"}));
    assert_eq!(init["result"]["server"]["name"], "Kimi Code CLI");
}

#[test]
fn over_long_line_is_rejected_and_skipped() {
    let env = Env::new();
    let config = env.scripted_config(&[]);
    let mut k = env.spawn(&config, &["--max-line-bytes", "1048576"]);
    let big = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":\"big\",\"method\":\"prompt\",\"params\":{{\"user_input\":\"{}\"}}}}",
        "a".repeat(3 * 1024 * 1024)
    );
    k.send_raw(&big);
    let reply = k.next();
    assert_eq!(reply["error"]["code"], -32600);
    assert_eq!(reply["id"], serde_json::Value::Null);
    let (_, init) = k.call("after", "initialize", json!({"protocol_version": "1.2"}));
    assert_eq!(init["result"]["protocol_version"], "1.10");
}

#[test]
fn fifty_mib_line_within_the_default_limit_is_served() {
    let env = Env::new();
    let config = env.scripted_config(&["text: got it"]);
    let mut k = env.spawn(&config, &[]);
    let text = "b".repeat(50 * 1024 * 1024);
    let line = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":\"big\",\"method\":\"prompt\",\"params\":{{\"user_input\":\"{text}\"}}}}"
    );
    k.send_raw(&line);
    // A debug build takes seconds to read, record and echo 50 MiB, more on a busy machine: this
    // waits longer than the kit's per-message timeout.
    let mut events = Vec::new();
    let response = loop {
        let m = k.next_within(Duration::from_secs(120)).expect("kiwi answers the 50 MiB prompt");
        if m.get("method").is_none() && m["id"] == "big" {
            break m;
        }
        events.push(m);
    };
    assert_eq!(response["result"]["status"], "finished", "{response}");
    assert_eq!(types(&events), ["TurnBegin", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd"]);
    assert_eq!(events[0]["params"]["payload"]["user_input"].as_str().unwrap().len(), text.len());
}

#[test]
fn llm_not_set_and_capability_errors() {
    let env = Env::new();
    let config = env.dir.path().join("empty.json");
    std::fs::write(&config, r#"{"default_model":"k","models":{"k":{"provider":"p","model":"","max_context_size":1000}},"providers":{"p":{"type":"kimi","base_url":"","api_key":""}}}"#).unwrap();
    let mut k = env.spawn(&config, &[]);
    let (events, response) = k.prompt("p", json!("hi"));
    // `docs/protocol-1.10.md` §4.4: `TurnEnd` follows every `TurnBegin`, errors included.
    assert_eq!(types(&events), ["TurnBegin", "TurnEnd"]);
    // The whole error object is the interface: the fixed message and no `data` (why is in the
    // log and the start-up warning).
    assert_eq!(response["error"], json!({"code":-32001,"message":"LLM is not set","data":null}));

    let config = env.scripted_config(&["text: x"]);
    let mut k = env.spawn(&config, &[]);
    let (events, response) = k.prompt(
        "p",
        json!([{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]),
    );
    assert_eq!(types(&events), ["TurnBegin", "TurnEnd"]);
    assert_eq!(
        response["error"],
        json!({"code":-32002,"message":"LLM model 'scripted_echo' does not support required capability: image_in.","data":null})
    );
    assert_eq!(events[0]["params"]["payload"]["user_input"][1]["image_url"]["id"], serde_json::Value::Null);
}

#[test]
fn provider_errors_are_32003_with_step_interrupted() {
    let env = Env::new();
    let config = env.scripted_config(&["bad line without colon"]);
    let mut k = env.spawn(&config, &[]);
    let (events, response) = k.prompt("p", json!("go"));
    assert_eq!(types(&events), ["TurnBegin", "StepBegin", "StepInterrupted", "TurnEnd"]);
    assert_eq!(
        response["error"],
        json!({"code":-32003,"message":"Invalid echo DSL at line 1: 'bad line without colon'","data":null})
    );
    let (_, response) = k.prompt("p2", json!("again"));
    assert_eq!(response["error"]["message"], "ScriptedEchoChatProvider exhausted at turn 2.");
}
