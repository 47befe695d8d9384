//! What Claude Agent SDK programs add to the Claude dialect, driven by a host written here
//! (`docs/print-mode.md` B.3a): in-process MCP servers over `mcp_message`, hook callbacks, the
//! control queries, `--json-schema`, `--agents`, Claude's tool names and rules, and the flags
//! kiwi refuses or ignores. The pinned Python SDK drives the same features in `print_sdk`.

use crate::common;
use crate::print_support;

use common::Kiwi;
use print_support::{Dirs, run, shell};
use serde_json::{Value, json};

const SDK: &[&str] =
    &["--output-format", "stream-json", "--verbose", "--system-prompt", "", "--input-format", "stream-json"];

fn args<'a>(more: &[&'a str]) -> Vec<&'a str> {
    SDK.iter().chain(more).copied().collect()
}

fn user(text: &str) -> String {
    json!({"type":"user","message":{"role":"user","content":text},"parent_tool_use_id":null,"session_id":""})
        .to_string()
}

fn control(id: &str, request: Value) -> String {
    json!({"type":"control_request","request_id":id,"request":request}).to_string()
}

fn answer(k: &mut Kiwi, request_id: &Value, response: Value) {
    k.send_raw(
        &json!({"type":"control_response","response":{"subtype":"success","request_id":request_id,"response":response}})
            .to_string(),
    );
}

fn call(id: &str, name: &str, arguments: Value) -> String {
    format!("tool_call: {}", json!({"id": id, "name": name, "arguments": arguments.to_string()}))
}

/// A scripted config with `extra` laid over it.
fn scripted_with(d: &Dirs, scripts: &[&str], extra: Value) -> std::path::PathBuf {
    let path = d.scripted(scripts);
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    common::merge(&mut config, extra);
    d.config(config)
}

/// Reads lines until one satisfies `stop`; returns those before it and it.
fn until(k: &mut Kiwi, stop: impl Fn(&Value) -> bool) -> (Vec<Value>, Value) {
    let mut seen = Vec::new();
    loop {
        let m = k.next();
        if stop(&m) {
            return (seen, m);
        }
        seen.push(m);
    }
}

fn is_response(id: &str) -> impl Fn(&Value) -> bool + '_ {
    move |m| m["type"] == "control_response" && m["response"]["request_id"] == id
}

fn mcp_request(m: &Value) -> bool {
    m["type"] == "control_request" && m["request"]["subtype"] == "mcp_message"
}

/// Serves the in-process server `calc` through kiwi's handshake; returns what came before
/// the answer to the host's `initialize`.
fn serve_calc_handshake(k: &mut Kiwi) -> Value {
    k.send_raw(&control("init", json!({"subtype":"initialize","hooks":null})));
    let (_, m) = until(k, mcp_request);
    assert_eq!(m["request"]["server_name"], "calc");
    let message = &m["request"]["message"];
    assert_eq!(
        (message["method"].as_str(), message["params"]["protocolVersion"].as_str()),
        (Some("initialize"), Some("2025-11-25"))
    );
    let reply = json!({"jsonrpc":"2.0","id":message["id"],"result":{"protocolVersion":"2025-06-18",
        "capabilities":{"tools":{}},"serverInfo":{"name":"calc","version":"1"}}});
    answer(k, &m["request_id"], json!({"mcp_response": reply}));
    let (_, m) = until(k, mcp_request);
    assert_eq!(m["request"]["message"]["method"], "notifications/initialized");
    assert!(m["request"]["message"].get("id").is_none(), "a notification has no id");
    answer(k, &m["request_id"], json!({"mcp_response": {"jsonrpc":"2.0","result":{}}}));
    let (_, m) = until(k, mcp_request);
    let message = &m["request"]["message"];
    assert_eq!(message["method"], "tools/list");
    let schema =
        json!({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]});
    let tools = json!([
        {"name":"add","description":"Adds","inputSchema":schema},
        {"name":"broken","description":"Fails","inputSchema":{"type":"object"}},
        {"name":"slow","description":"Never answers","inputSchema":{"type":"object"}},
    ]);
    answer(k, &m["request_id"], json!({"mcp_response": {"jsonrpc":"2.0","id":message["id"],"result":{"tools":tools}}}));
    let (_, init) = until(k, is_response("init"));
    init
}

#[test]
fn sdk_mcp_servers_are_served_over_the_control_channel() {
    let d = Dirs::new();
    let scripts = [
        [
            call("m1", "mcp__calc__add", json!({"a": 2, "b": 3})),
            call("m2", "mcp__calc__broken", json!({})),
            call("m3", "mcp__calc__slow", json!({})),
            call("m4", "mcp__calc__add", json!({"a": "two"})),
        ]
        .join("\n"),
        "text: done".into(),
    ];
    let scripts: Vec<&str> = scripts.iter().map(String::as_str).collect();
    let config = scripted_with(&d, &scripts, json!({"mcp": {"client": {"tool_call_timeout_ms": 1500}}}));
    let mcp = r#"{"mcpServers":{"calc":{"type":"sdk","name":"calc"}}}"#;
    let mut k = Kiwi::spawn(d.command(
        &config,
        &args(&["--mcp-config", mcp, "--allowedTools", "mcp__calc__add,mcp__calc__broken,mcp__calc__slow"]),
    ));
    let init = serve_calc_handshake(&mut k);
    assert_eq!(init["response"]["subtype"], "success", "{init}");
    k.send_raw(&control("status", json!({"subtype":"mcp_status"})));
    let (_, status) = until(&mut k, is_response("status"));
    let calc = &status["response"]["response"]["mcpServers"][0];
    assert_eq!(
        (calc["name"].as_str(), calc["status"].as_str(), calc["source"].as_str()),
        (Some("calc"), Some("connected"), Some("sdk"))
    );
    assert_eq!(calc["tools"][0]["name"], "mcp__calc__add");

    k.send_raw(&user("compute"));
    let mut lines = Vec::new();
    let mut cancelled = Vec::new();
    let mut calls = Vec::new();
    let result = loop {
        let m = k.next();
        if mcp_request(&m) {
            let message = m["request"]["message"].clone();
            assert_eq!(message["method"], "tools/call");
            let name = message["params"]["name"].as_str().unwrap().to_string();
            let use_id = message["params"]["_meta"]["claudecode/toolUseId"].as_str().unwrap().to_string();
            calls.push((name.clone(), use_id));
            match name.as_str() {
                "add" => answer(
                    &mut k,
                    &m["request_id"],
                    json!({"mcp_response": {"jsonrpc":"2.0","id":message["id"],
                    "result":{"content":[{"type":"text","text":"5"}]}}}),
                ),
                "broken" => k.send_raw(
                    &json!({"type":"control_response","response":{"subtype":"error",
                    "request_id":m["request_id"],"error":"the handler broke"}})
                    .to_string(),
                ),
                _ => {} // `slow` never answers.
            }
            continue;
        }
        if m["type"] == "control_cancel_request" {
            cancelled.push(m["request_id"].clone());
            continue;
        }
        if m["type"] == "result" {
            break m;
        }
        lines.push(m);
    };
    calls.sort();
    assert_eq!(calls, [("add".into(), "m1".into()), ("broken".into(), "m2".into()), ("slow".into(), "m3".into())]);
    assert_eq!(cancelled.len(), 1, "the call that timed out is withdrawn");
    let init_line = lines.iter().find(|l| l["subtype"] == "init").unwrap();
    assert!(
        init_line["mcp_servers"]
            .as_array()
            .unwrap()
            .contains(&json!({"name":"calc","status":"connected","source":"sdk"}))
    );
    assert!(init_line["tools"].as_array().unwrap().contains(&json!("mcp__calc__add")));
    let tool_results: std::collections::BTreeMap<String, Value> = lines
        .iter()
        .filter(|l| l["type"] == "user")
        .map(|l| l["message"]["content"][0].clone())
        .map(|b| (b["tool_use_id"].as_str().unwrap().to_string(), b))
        .collect();
    assert_eq!(
        (tool_results["m1"]["content"].as_str(), tool_results["m1"]["is_error"].as_bool()),
        (Some("5"), Some(false))
    );
    assert!(tool_results["m2"]["content"].as_str().unwrap().contains("the handler broke"), "{}", tool_results["m2"]);
    assert!(
        tool_results["m3"]["content"].as_str().unwrap().contains("Timeout while calling MCP tool `mcp__calc__slow`."),
        "{}",
        tool_results["m3"]
    );
    assert!(
        tool_results["m4"]["content"].as_str().unwrap().contains("Error validating JSON arguments"),
        "{}",
        tool_results["m4"]
    );
    assert_eq!((result["subtype"].as_str(), result["result"].as_str()), (Some("success"), Some("done")));
    k.close_stdin();
    assert!(k.wait_exit(std::time::Duration::from_secs(30)).is_some_and(|s| s.success()));
}

/// Issue 30 item 10: the host's SDK servers are connected side by side: the second server's
/// `initialize` is asked while the first one's is still unanswered (one after the other, it came
/// only after the first timed out).
#[test]
fn sdk_servers_connect_side_by_side() {
    let d = Dirs::new();
    let config = d.scripted(&["text: fine"]);
    let mcp = r#"{"mcpServers":{"a":{"type":"sdk","name":"a"},"b":{"type":"sdk","name":"b"}}}"#;
    let mut k = Kiwi::spawn(d.command(&config, &args(&["--mcp-config", mcp])));
    k.send_raw(&control("init", json!({"subtype":"initialize"})));
    let (_, first) = until(&mut k, mcp_request);
    // The first is not answered: the second asks anyway.
    let (before, second) = until(&mut k, |m| mcp_request(m) || is_response("init")(m));
    assert!(mcp_request(&second), "the second server waited for the first: {second} after {before:?}");
    let names = [&first, &second].map(|m| m["request"]["server_name"].as_str().unwrap_or_default().to_string());
    assert!(names.contains(&"a".to_string()) && names.contains(&"b".to_string()), "{names:?}");
    for m in [&first, &second] {
        k.send_raw(
            &json!({"type":"control_response","response":{"subtype":"error","request_id":m["request_id"],
            "error":"No such server"}})
            .to_string(),
        );
    }
    let (_, init) = until(&mut k, is_response("init"));
    assert_eq!(init["response"]["subtype"], "success");
    k.send_raw(&user("hi"));
    let (lines, _) = until(&mut k, |m| m["type"] == "result");
    let init_line = lines.iter().find(|l| l["subtype"] == "init").unwrap();
    let statuses: Vec<&str> =
        init_line["mcp_servers"].as_array().unwrap().iter().map(|s| s["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["failed", "failed"], "{init_line}");
}

#[test]
fn an_sdk_server_that_fails_its_handshake_is_failed_and_the_run_goes_on() {
    let d = Dirs::new();
    let config = d.scripted(&["text: fine"]);
    let mcp = r#"{"mcpServers":{"calc":{"type":"sdk","name":"calc"}}}"#;
    let mut k = Kiwi::spawn(d.command(&config, &args(&["--mcp-config", mcp])));
    k.send_raw(&control("init", json!({"subtype":"initialize"})));
    let (_, m) = until(&mut k, mcp_request);
    k.send_raw(
        &json!({"type":"control_response","response":{"subtype":"error","request_id":m["request_id"],
        "error":"No SDK MCP server named calc"}})
        .to_string(),
    );
    let (_, init) = until(&mut k, is_response("init"));
    assert_eq!(init["response"]["subtype"], "success");
    k.send_raw(&control("again", json!({"subtype":"initialize"})));
    let (_, again) = until(&mut k, is_response("again"));
    assert_eq!(again["response"]["error"], "Already initialized");
    k.send_raw(&user("hi"));
    let (lines, result) = until(&mut k, |m| m["type"] == "result");
    let init_line = lines.iter().find(|l| l["subtype"] == "init").unwrap();
    assert_eq!(init_line["mcp_servers"], json!([{"name":"calc","status":"failed","source":"sdk"}]));
    assert_eq!(result["result"], "fine");
}

#[test]
fn hook_callbacks_decide_and_time_out_open() {
    let d = Dirs::new();
    let scripts = [shell("h1", "echo one"), shell("h2", "echo two"), shell("h3", "echo three"), "text: done".into()];
    let scripts: Vec<&str> = scripts.iter().map(String::as_str).collect();
    let config = d.scripted(&scripts);
    // No permission surface: only the hook's `allow` lets a call run.
    let mut k = Kiwi::spawn(d.command(&config, &args(&[])));
    let hooks = json!({"PreToolUse": [{"matcher": "Bash|Shell", "hookCallbackIds": ["pre"], "timeout": 1}],
                       "UserPromptSubmit": [{"matcher": null, "hookCallbackIds": ["prompt"]}]});
    k.send_raw(&control("init", json!({"subtype":"initialize","hooks":hooks})));
    until(&mut k, is_response("init"));
    k.send_raw(&user("go"));
    let mut lines = Vec::new();
    let mut cancelled = 0;
    let result = loop {
        let m = k.next();
        if m["type"] == "control_request" && m["request"]["subtype"] == "hook_callback" {
            let input = &m["request"]["input"];
            match m["request"]["callback_id"].as_str().unwrap() {
                "prompt" => {
                    assert_eq!(
                        (input["hook_event_name"].as_str(), input["prompt"].as_str()),
                        (Some("UserPromptSubmit"), Some("go"))
                    );
                    answer(&mut k, &m["request_id"], json!({}));
                }
                _ => {
                    assert_eq!(input["permission_mode"], "default");
                    assert!(input["transcript_path"].is_string());
                    match m["request"]["tool_use_id"].as_str().unwrap() {
                        "h1" => answer(
                            &mut k,
                            &m["request_id"],
                            json!({"hookSpecificOutput":{"permissionDecision":"allow"}}),
                        ),
                        "h2" => {
                            answer(&mut k, &m["request_id"], json!({"hookSpecificOutput":{"permissionDecision":"ask"}}))
                        }
                        _ => {} // h3: never answered, the hook times out and allows.
                    }
                }
            }
            continue;
        }
        if m["type"] == "control_cancel_request" {
            cancelled += 1;
            continue;
        }
        if m["type"] == "result" {
            break m;
        }
        lines.push(m);
    };
    assert_eq!(cancelled, 1, "the unanswered hook question is withdrawn");
    let contents: Vec<(String, bool)> = lines
        .iter()
        .filter(|l| l["type"] == "user")
        .map(|l| &l["message"]["content"][0])
        .map(|b| (b["content"].as_str().unwrap().to_string(), b["is_error"].as_bool().unwrap()))
        .collect();
    assert!(contents[0].0.contains("one") && !contents[0].1, "allowed by the hook: {contents:?}");
    // `ask` and a timed-out hook leave the call to the usual rules: nobody can be asked here.
    assert!(contents[1].0.contains("nobody can be asked") && contents[1].1, "{contents:?}");
    assert!(contents[2].0.contains("nobody can be asked") && contents[2].1, "{contents:?}");
    assert_eq!(result["result"], "done");
}

/// Issue 30 item 6: a hook's `allow` is for the call it was given for; a later call that reuses
/// the id (here a Shell call after a ReadFile one that needed no approval) is checked again.
#[test]
fn a_hook_allow_is_not_inherited_by_a_call_reusing_its_id() {
    let d = Dirs::new();
    std::fs::write(d.work().join("notes.txt"), "hello\n").unwrap();
    let read = call("dup", "ReadFile", json!({"path": "notes.txt"}));
    let scripts = [read, shell("dup", "echo pwned-by-reuse"), "text: done".into()];
    let scripts: Vec<&str> = scripts.iter().map(String::as_str).collect();
    let config = d.scripted(&scripts);
    // No permission surface: a call that needs approval and has none is refused.
    let mut k = Kiwi::spawn(d.command(&config, &args(&[])));
    let hooks = json!({"PreToolUse": [{"matcher": ".*", "hookCallbackIds": ["pre"], "timeout": 5}]});
    k.send_raw(&control("init", json!({"subtype":"initialize","hooks":hooks})));
    until(&mut k, is_response("init"));
    k.send_raw(&user("go"));
    let mut lines = Vec::new();
    let result = loop {
        let m = k.next();
        if m["type"] == "control_request" && m["request"]["subtype"] == "hook_callback" {
            let tool = m["request"]["input"]["tool_name"].as_str().unwrap_or_default().to_string();
            let verdict = if tool == "ReadFile" {
                json!({"hookSpecificOutput":{"permissionDecision":"allow"}})
            } else {
                json!({})
            };
            answer(&mut k, &m["request_id"], verdict);
            continue;
        }
        if m["type"] == "result" {
            break m;
        }
        lines.push(m);
    };
    let contents: Vec<(String, bool)> = lines
        .iter()
        .filter(|l| l["type"] == "user")
        .map(|l| &l["message"]["content"][0])
        .map(|b| (b["content"].to_string(), b["is_error"].as_bool().unwrap_or(false)))
        .collect();
    assert_eq!(contents.len(), 2, "{contents:?}");
    assert!(contents[0].0.contains("hello") && !contents[0].1, "{contents:?}");
    assert!(!contents[1].0.contains("pwned-by-reuse"), "the reused id ran unchecked: {contents:?}");
    assert!(contents[1].0.contains("nobody can be asked") && contents[1].1, "{contents:?}");
    assert_eq!(result["result"], "done");
}

#[test]
fn control_queries_and_mode_changes() {
    let d = Dirs::new();
    let scripts =
        ["text: counted\nusage: input_other=900 output=20".to_string(), shell("w1", "echo hi"), "text: after".into()];
    let scripts: Vec<&str> = scripts.iter().map(String::as_str).collect();
    let config = d.scripted(&scripts);
    let mut k = Kiwi::spawn(d.command(&config, &args(&["--permission-prompt-tool", "stdio"])));
    k.send_raw(&control("init", json!({"subtype":"initialize"})));
    let (_, init) = until(&mut k, is_response("init"));
    let payload = &init["response"]["response"];
    assert_eq!(payload["output_style"], "default");
    assert!(payload["commands"].as_array().unwrap().iter().any(|c| c["name"] == "compact"), "{payload}");
    assert_eq!(payload["models"][0]["value"], "scripted");
    k.send_raw(&user("count"));
    until(&mut k, |m| m["type"] == "result");
    k.send_raw(&control("ctx", json!({"subtype":"get_context_usage"})));
    let (_, usage) = until(&mut k, is_response("ctx"));
    let usage = &usage["response"]["response"];
    assert_eq!((usage["maxTokens"].as_u64(), usage["model"].as_str()), (Some(100000), Some("scripted_echo")));
    assert!(usage["totalTokens"].as_u64().unwrap() > 0, "{usage}");
    assert!(usage["percentage"].as_f64().unwrap() > 0.0, "{usage}");

    k.send_raw(&control("bad-mode", json!({"subtype":"set_permission_mode","mode":"sometimes"})));
    let (_, bad) = until(&mut k, is_response("bad-mode"));
    assert_eq!(
        bad["response"]["error"],
        "Cannot set permission mode: must be one of acceptEdits, auto, bypassPermissions, default, dontAsk, plan"
    );
    k.send_raw(&control("mode", json!({"subtype":"set_permission_mode","mode":"dontAsk"})));
    let (_, mode) = until(&mut k, is_response("mode"));
    assert_eq!(mode["response"]["response"], json!({"mode":"dontAsk"}));
    let status = k.next();
    assert_eq!((status["subtype"].as_str(), status["permissionMode"].as_str()), (Some("status"), Some("dontAsk")));
    assert!(status["status"].is_null());
    // dontAsk: denied without a can_use_tool question, and said so.
    k.send_raw(&user("write"));
    let (lines, result) = until(&mut k, |m| m["type"] == "result");
    assert!(!lines.iter().any(|l| l["type"] == "control_request"), "nobody is asked in dontAsk");
    let denied = lines.iter().find(|l| l["subtype"] == "permission_denied").expect("a permission_denied line");
    assert_eq!((denied["tool_name"].as_str(), denied["tool_use_id"].as_str()), (Some("Shell"), Some("w1")));
    assert_eq!(denied["decision_reason_type"], "mode");
    assert_eq!(result["permission_denials"][0]["tool_use_id"], "w1");
    k.send_raw(&control("model", json!({"subtype":"set_model","model":null})));
    let (_, model) = until(&mut k, is_response("model"));
    assert_eq!(model["response"]["response"], json!({"model": null}));
    // Requests kiwi does not serve are refused by name (the session APIs are served:
    // print_claude_sessions).
    for (id, request) in [
        ("odd", json!({"subtype":"no_such_request"})),
        ("feedback", json!({"subtype":"submit_feedback","description":"x"})),
    ] {
        k.send_raw(&control(id, request.clone()));
        let (_, odd) = until(&mut k, is_response(id));
        assert_eq!(
            odd["response"]["error"],
            format!("Unsupported control request subtype: {}", request["subtype"].as_str().unwrap())
        );
    }
}

#[test]
fn structured_output_ends_the_turn_with_the_object() {
    let d = Dirs::new();
    let schema = r#"{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}"#;
    let scripts = [
        call("s1", "StructuredOutput", json!({"n": "x"})),
        call("s2", "StructuredOutput", json!({"n": 4})),
        "text: never".into(),
    ];
    let scripts: Vec<&str> = scripts.iter().map(String::as_str).collect();
    let config = d.scripted(&scripts);
    let r = run(
        d.command(&config, &["-p", "--verbose", "--output-format", "stream-json", "--json-schema", schema, "q"]),
        "",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let lines = r.lines();
    let results: Vec<&Value> =
        lines.iter().filter(|l| l["type"] == "user").map(|l| &l["message"]["content"][0]).collect();
    assert_eq!(results[0]["is_error"], true);
    assert!(
        results[0]["content"].as_str().unwrap().contains("Output does not match required schema: /n"),
        "{}",
        results[0]
    );
    let result = lines.last().unwrap();
    assert_eq!(result["structured_output"], json!({"n": 4}));
    assert_eq!((result["result"].as_str(), result["num_turns"].as_u64()), (Some(r#"{"n":4}"#), Some(2)));
    assert_eq!(result["stop_reason"], "tool_use");
    // A schema kiwi cannot use is a usage error before anything runs.
    for (schema, why) in
        [("{", "--json-schema is not valid JSON"), (r#"{"type":"array"}"#, "must describe a JSON object")]
    {
        let r = run(d.command(&config, &["-p", "--json-schema", schema, "q"]), "");
        assert_eq!((r.code, r.stdout.as_str()), (Some(2), ""));
        assert!(r.stderr.contains(why), "{}", r.stderr);
    }
}

/// Issue: the Claude dialect hands the parent a subagent's final text as Claude Code does — no
/// kimi "elaborate your summary" round after a short answer (one model call fewer), and the
/// `tool_result` content a list of text blocks holding exactly that text.
#[test]
fn a_short_subagent_answer_is_the_result_without_an_elaborate_round() {
    let d = Dirs::new();
    let scripts = [
        call(
            "ag1",
            "Agent",
            json!({"description":"check it","prompt":"Check a.txt","subagent_type":"checker","run_in_background":false}),
        ),
        "text: All good.".into(),
        "text: parent done".into(),
        "text: an elaborate round would take this".into(),
    ];
    let scripts: Vec<&str> = scripts.iter().map(String::as_str).collect();
    let config = d.scripted(&scripts);
    let agents = r#"{"checker":{"description":"Checks files","prompt":"You check files."}}"#;
    let args = [
        "-p",
        "--verbose",
        "--output-format",
        "stream-json",
        "--dangerously-skip-permissions",
        "--agents",
        agents,
        "go",
    ];
    let r = run(d.command(&config, &args), "");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let lines = r.lines();
    let result_block = lines
        .iter()
        .filter(|l| l["type"] == "user" && l["parent_tool_use_id"].is_null())
        .flat_map(|l| l["message"]["content"].as_array().cloned().unwrap_or_default())
        .find(|b| b["tool_use_id"] == "ag1")
        .expect("the Agent call's tool_result");
    assert_eq!(result_block["content"], json!([{"type": "text", "text": "All good."}]), "{result_block}");
    assert_eq!(result_block["is_error"], false);
    let result = lines.last().unwrap();
    assert_eq!(result["result"], "parent done", "{result}");
    // The parent's two calls; the subagent asked nothing more.
    let inside: Vec<&Value> =
        lines.iter().filter(|l| l["parent_tool_use_id"] == "ag1" && l["type"] == "user").collect();
    assert_eq!(inside.len(), 1, "only the subagent's prompt, no elaborate request: {inside:?}");
}

#[test]
fn agents_flag_defines_subagent_types_whose_lines_carry_the_call() {
    let d = Dirs::new();
    let long = "Nothing to fix here. ".repeat(12);
    let scripts = [
        call(
            "ag1",
            "Agent",
            json!({"description":"check it","prompt":"Check a.txt","subagent_type":"checker","run_in_background":false}),
        ),
        shell("in1", "echo inside"),
        format!("text: {long}"),
        "text: checked".into(),
    ];
    let scripts: Vec<&str> = scripts.iter().map(String::as_str).collect();
    let config = d.scripted(&scripts);
    let agents = r#"{"checker":{"description":"Checks files","prompt":"You check files.","tools":["Bash","Read"]}}"#;
    let r = run(
        d.command(
            &config,
            &[
                "-p",
                "--verbose",
                "--output-format",
                "stream-json",
                "--dangerously-skip-permissions",
                "--agents",
                agents,
                "go",
            ],
        ),
        "",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let lines = r.lines();
    assert!(lines[0]["agents"].as_array().unwrap().contains(&json!("checker")), "{}", lines[0]);
    let started: Vec<&Value> = lines.iter().filter(|l| l["subtype"] == "task_started").collect();
    assert_eq!(started.len(), 1);
    assert_eq!(
        (started[0]["tool_use_id"].as_str(), started[0]["subagent_type"].as_str()),
        (Some("ag1"), Some("checker"))
    );
    assert_eq!(
        (started[0]["task_type"].as_str(), started[0]["description"].as_str()),
        (Some("local_agent"), Some("check it"))
    );
    let task_id = started[0]["task_id"].clone();
    let inside: Vec<&Value> = lines.iter().filter(|l| l["parent_tool_use_id"] == "ag1").collect();
    let kinds: Vec<String> = inside
        .iter()
        .map(|l| {
            format!("{}:{}", l["type"].as_str().unwrap(), l["message"]["content"][0]["type"].as_str().unwrap_or("text"))
        })
        .collect();
    assert_eq!(kinds, ["user:text", "assistant:tool_use", "user:tool_result", "assistant:text"], "{inside:?}");
    assert!(inside.iter().all(|l| l["agent_id"] == task_id && l["subagent_type"] == "checker"));
    let notified: Vec<&Value> = lines.iter().filter(|l| l["subtype"] == "task_notification").collect();
    assert_eq!(notified.len(), 1);
    assert_eq!((notified[0]["status"].as_str(), &notified[0]["task_id"]), (Some("completed"), &task_id));
    assert_eq!(notified[0]["usage"]["tool_uses"], 1);
    assert_eq!(lines.last().unwrap()["result"], "checked");
    // A model that names none of the config's: said on stderr, and the type runs on the session's.
    let config = d.scripted(&scripts);
    let sonnet = r#"{"checker":{"description":"Checks files","prompt":"You check files.","model":"sonnet"}}"#;
    let r = run(
        d.command(
            &config,
            &[
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--dangerously-skip-permissions",
                "--agents",
                sonnet,
                "go",
            ],
        ),
        "",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stderr.contains(
            "kiwi: agent checker: model \"sonnet\" matches none of the config's models; it runs on the session's model"
        ),
        "{}",
        r.stderr
    );
    assert_eq!(r.lines().last().unwrap()["result"], "checked");
    // Bad definitions are a usage error.
    let r = run(d.command(&config, &["-p", "--agents", "[1]", "q"]), "");
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.contains("--agents is not a JSON object of agent definitions"), "{}", r.stderr);
}

#[test]
fn claude_tool_names_rules_and_flags() {
    let d = Dirs::new();
    let scripts = [shell("g1", "echo allowed"), shell("g2", "touch nope"), "text: done".into()];
    let scripts: Vec<&str> = scripts.iter().map(String::as_str).collect();
    let config = d.scripted(&scripts);
    let r = run(
        d.command(
            &config,
            &[
                "-p",
                "--verbose",
                "--output-format",
                "stream-json",
                "--allowedTools",
                "Bash(echo:*) Read",
                "--disallowedTools",
                "Write",
                "--task-budget",
                "2",
                "go",
            ],
        ),
        "",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stderr.contains("kiwi: ignoring --task-budget=2: kiwi keeps one dollar budget per session"),
        "{}",
        r.stderr
    );
    let lines = r.lines();
    assert!(!lines[0]["tools"].as_array().unwrap().contains(&json!("WriteFile")), "Write is kiwi's WriteFile");
    let results: Vec<&Value> =
        lines.iter().filter(|l| l["type"] == "user").map(|l| &l["message"]["content"][0]).collect();
    assert_eq!(results[0]["is_error"], false, "Bash(echo:*) allows echo: {}", results[0]);
    assert_eq!(results[1]["is_error"], true, "but not touch: {}", results[1]);
    assert_eq!(lines.last().unwrap()["permission_denials"][0]["tool_use_id"], "g2");
    assert!(!d.work().join("nope").exists());
    // A fork needs a session to copy.
    let r = run(d.command(&config, &["-p", "--fork-session", "--resume", "x", "q"]), "");
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("No conversation found with session ID: x"), "{}", r.stderr);
}

/// A config whose default model reads `main` and whose model `helper` (another provider, so
/// another script queue) reads `helper`: a background subagent on `helper` takes its scripts in
/// its own order, whatever the main agent does meanwhile.
fn two_model_config(d: &Dirs, main: &[&str], helper: &[&str]) -> std::path::PathBuf {
    let helper_path = d.dir.path().join(format!("helper-{}.json", uuid::Uuid::new_v4()));
    std::fs::write(&helper_path, serde_json::to_string(helper).unwrap()).unwrap();
    scripted_with(
        d,
        main,
        json!({"models": {"helper": {"provider": "q", "model": "helper_echo", "max_context_size": 50000}},
               "providers": {"q": {"type": "_scripted_echo", "base_url": "", "api_key": "",
                   "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": helper_path.to_str().unwrap()}}}}),
    )
}

/// A subagent that waits until the test creates `go` in the work dir, then answers.
const WAITER: &str = r#"{"waiter":{"description":"Waits","prompt":"You wait.","tools":["Bash"],"model":"helper"}}"#;

fn background_agent_call(id: &str) -> String {
    call(
        id,
        "Agent",
        json!({"description":"wait for go","prompt":"Wait for go","subagent_type":"waiter","run_in_background":true}),
    )
}

fn wait_for_go() -> String {
    shell("w1", "while [ ! -f go ]; do sleep 0.05; done; echo went")
}

#[test]
fn background_agents_show_their_lines_end_with_a_terminal_frame_and_wake_the_main_agent() {
    let d = Dirs::new();
    let long = "The wait is over and all is well. ".repeat(8);
    let config = two_model_config(
        &d,
        &[&background_agent_call("bg1"), "text: started it", "text: got the news"],
        &[&wait_for_go(), &format!("text: {long}")],
    );
    let mut cmd = d.command(&config, &args(&["--dangerously-skip-permissions", "--agents", WAITER]));
    cmd.env("CLAUDE_CODE_SDK_READS_SESSION_STATE", "1");
    let mut k = Kiwi::spawn(cmd);
    k.send_raw(&user("start a waiter"));
    let (first, result) = until(&mut k, |m| m["type"] == "result");
    assert_eq!(result["result"], "started it");
    let started: Vec<&Value> = first.iter().filter(|l| l["subtype"] == "task_started").collect();
    assert_eq!(started.len(), 1, "{first:?}");
    let task_id = started[0]["task_id"].as_str().unwrap().to_string();
    assert!(task_id.starts_with("agent-"), "the background task's id: {task_id}");
    assert_eq!(
        (started[0]["tool_use_id"].as_str(), started[0]["task_type"].as_str(), started[0]["is_backgrounded"].as_bool()),
        (Some("bg1"), Some("local_agent"), Some(true))
    );
    assert_eq!(
        (started[0]["subagent_type"].as_str(), started[0]["prompt"].as_str()),
        (Some("waiter"), Some("Wait for go"))
    );
    assert!(!first.iter().any(|l| l["subtype"] == "task_notification"), "the subagent still waits");
    // With a subagent still running the session is not idle (the SDK keeps its input open).
    assert!(!first.iter().any(|l| l["subtype"] == "session_state_changed" && l["state"] == "idle"));

    std::fs::write(d.work().join("go"), "").unwrap();
    let (later, result) = until(&mut k, |m| m["type"] == "result");
    let all: Vec<&Value> = first.iter().chain(&later).collect();
    let inside: Vec<String> = all
        .iter()
        .filter(|l| l["parent_tool_use_id"] == "bg1")
        .map(|l| {
            format!("{}:{}", l["type"].as_str().unwrap(), l["message"]["content"][0]["type"].as_str().unwrap_or("text"))
        })
        .collect();
    assert_eq!(inside, ["user:text", "assistant:tool_use", "user:tool_result", "assistant:text"], "{all:?}");
    assert!(all.iter().filter(|l| l["parent_tool_use_id"] == "bg1").all(|l| l["subagent_type"] == "waiter"));
    let progress = all.iter().find(|l| l["subtype"] == "task_progress").expect("a task_progress line");
    assert_eq!(
        (progress["task_id"].as_str(), progress["last_tool_name"].as_str()),
        (Some(task_id.as_str()), Some("Shell"))
    );
    let updated = later.iter().find(|l| l["subtype"] == "task_updated").expect("a task_updated line");
    assert_eq!(
        (updated["task_id"].as_str(), &updated["patch"]),
        (Some(task_id.as_str()), &json!({"status":"completed"}))
    );
    let notified = later.iter().position(|l| l["subtype"] == "task_notification").expect("a task_notification");
    assert_eq!(
        (later[notified]["task_id"].as_str(), later[notified]["status"].as_str()),
        (Some(task_id.as_str()), Some("completed"))
    );
    assert!(later[notified]["output_file"].as_str().unwrap().ends_with("output.log"), "{}", later[notified]);
    // The end woke the main agent: a follow-up turn whose input is the task's notification.
    let init = later.iter().position(|l| l["subtype"] == "init").expect("the follow-up turn's init");
    assert!(init > notified);
    // (Its answers came from the `helper` model's queue: the one its definition names.)
    assert_eq!(result["result"], "got the news");
    let idle = k.next();
    assert_eq!((idle["subtype"].as_str(), idle["state"].as_str()), (Some("session_state_changed"), Some("idle")));
    k.close_stdin();
    assert_eq!(k.wait_exit(std::time::Duration::from_secs(20)).and_then(|s| s.code()), Some(0));
}

#[test]
fn tasks_still_running_when_the_run_ends_are_stopped_and_reported() {
    let d = Dirs::new();
    let background_shell = shell_in_background("sh1", "sleep 30", "sleep a while");
    let config = two_model_config(
        &d,
        &[&background_agent_call("bg1"), &background_shell, "text: both started"],
        &[&wait_for_go(), "text: never"],
    );
    let mut cmd = d.command(&config, &args(&["--dangerously-skip-permissions", "--agents", WAITER]));
    cmd.env("CLAUDE_CODE_PRINT_BG_WAIT_CEILING_MS", "300");
    let mut k = Kiwi::spawn(cmd);
    k.send_raw(&user("start both"));
    let (first, result) = until(&mut k, |m| m["type"] == "result");
    assert_eq!(result["result"], "both started");
    let started: Vec<(&str, &str)> = first
        .iter()
        .filter(|l| l["subtype"] == "task_started")
        .map(|l| (l["tool_use_id"].as_str().unwrap(), l["task_type"].as_str().unwrap()))
        .collect();
    assert_eq!(started, [("bg1", "local_agent"), ("sh1", "local_bash")]);
    let shell_task = first.iter().find(|l| l["tool_use_id"] == "sh1" && l["subtype"] == "task_started").unwrap();
    assert!(shell_task["task_id"].as_str().unwrap().starts_with("bash-"), "{shell_task}");
    assert_eq!(shell_task["description"], "sleep a while");
    assert!(shell_task.get("subagent_type").is_none() && shell_task.get("prompt").is_none(), "{shell_task}");
    // The host stops the shell task; a task that does not exist or ended is refused.
    let shell_id = shell_task["task_id"].clone();
    k.send_raw(&control("stop", json!({"subtype":"stop_task","task_id":shell_id})));
    let (before, stopped) = until(&mut k, is_response("stop"));
    assert_eq!(stopped["response"]["subtype"], "success", "{stopped}");
    // The terminal frames may come before the answer or after it.
    let end = match before.into_iter().find(|m| m["subtype"] == "task_notification") {
        Some(end) => end,
        None => until(&mut k, |m| m["subtype"] == "task_notification").1,
    };
    assert_eq!((&end["task_id"], end["status"].as_str()), (&shell_id, Some("stopped")));
    k.send_raw(&control("again", json!({"subtype":"stop_task","task_id":shell_id})));
    let (_, again) = until(&mut k, is_response("again"));
    assert_eq!(
        again["response"]["error"],
        format!("Task {} is not running (status: killed)", shell_id.as_str().unwrap())
    );
    k.send_raw(&control("none", json!({"subtype":"stop_task","task_id":"bash-nothere0"})));
    let (_, none) = until(&mut k, is_response("none"));
    assert_eq!(none["response"]["error"], "No task found with ID: bash-nothere0");
    k.send_raw(&control("bad", json!({"subtype":"stop_task"})));
    let (_, bad) = until(&mut k, is_response("bad"));
    assert!(bad["response"]["error"].as_str().unwrap().starts_with("Invalid stop_task request"), "{bad}");
    // The input ends; the subagent never finishes: after the wait's ceiling it is stopped, and
    // its terminal frames say so.
    k.close_stdin();
    let mut ends = Vec::new();
    while let Some(line) = k.next_within(std::time::Duration::from_secs(20)) {
        if line["subtype"] == "task_notification" {
            ends.push((
                line["tool_use_id"].as_str().unwrap().to_string(),
                line["status"].as_str().unwrap().to_string(),
            ));
        }
        if line["subtype"] == "task_updated" {
            assert_eq!(line["patch"], json!({"status":"killed"}));
        }
    }
    assert_eq!(ends, [("bg1".to_string(), "stopped".to_string())]);
    assert_eq!(k.wait_exit(std::time::Duration::from_secs(20)).and_then(|s| s.code()), Some(0));
}

fn shell_in_background(id: &str, command: &str, description: &str) -> String {
    call(id, "Shell", json!({"command": command, "run_in_background": true, "description": description}))
}
