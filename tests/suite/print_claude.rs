//! Print mode in Claude Code's dialect, end to end: the real binary with the scripted-echo
//! provider (`docs/print-mode.md` Part B, C.2-C.4).

use crate::common;
use crate::mcp;
use crate::mock_llm;
use crate::print_support;

use common::Kiwi;
use print_support::{Dirs, assert_golden, redacted_lines, run, shell, signal};
use serde_json::{Value, json};

const STREAM: &[&str] = &["-p", "--verbose", "--output-format", "stream-json"];
const SDK: &[&str] =
    &["--output-format", "stream-json", "--verbose", "--system-prompt", "", "--input-format", "stream-json"];

fn user(text: &str) -> String {
    json!({"type":"user","message":{"role":"user","content":text},"parent_tool_use_id":null,"session_id":""})
        .to_string()
}

fn control(id: &str, request: Value) -> String {
    json!({"type":"control_request","request_id":id,"request":request}).to_string()
}

fn two_step_scripts() -> Vec<String> {
    vec![
        format!("text: Let me check.\n{}\nusage: input_other=900 output=20", shell("tool_1", "echo a.py")),
        "id: x\ntext: There is one file.\nusage: input_other=950 output=8".into(),
    ]
}

fn args<'a>(base: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(more).copied().collect()
}

fn results(lines: &[Value]) -> Vec<&Value> {
    lines.iter().filter(|l| l["type"] == "result").collect()
}

#[test]
fn golden_stream_json() {
    let d = Dirs::new();
    let scripts = two_step_scripts();
    let config = d.scripted(&scripts.iter().map(String::as_str).collect::<Vec<_>>());
    let r = run(d.command(&config, &args(STREAM, &["--dangerously-skip-permissions", "list files"])), "");
    assert_eq!(r.code, Some(0));
    assert_golden("print_claude_stream.jsonl", &redacted_lines(&r.lines(), &d.work()));
}

#[test]
fn golden_partial_messages() {
    let d = Dirs::new();
    let scripts = [
        "think: hmm\ntext: Hel\ntext: lo\ntool_call: {\"id\": \"t1\", \"name\": \"SetTodoList\", \"arguments\": \"{\\\"todos\\\":\"}\ntool_call_part: []}",
        "text: done",
    ];
    let config = d.scripted(&scripts);
    let r = run(d.command(&config, &args(STREAM, &["--include-partial-messages", "go"])), "");
    assert_eq!(r.code, Some(0));
    assert_golden("print_claude_partial.jsonl", &redacted_lines(&r.lines(), &d.work()));
}

#[test]
fn json_and_text_output() {
    let d = Dirs::new();
    let config = d.scripted(&["text: the answer"]);
    let r = run(d.command(&config, &["-p", "--output-format", "json", "q"]), "");
    assert_eq!(r.code, Some(0));
    assert_golden("print_claude_json.jsonl", &redacted_lines(&r.lines(), &d.work()));
    let config = d.scripted(&["text: plain answer"]);
    let r = run(d.command(&config, &["-p"]), "the prompt from stdin\n");
    assert_eq!((r.code, r.stdout.as_str()), (Some(0), "plain answer\n"));
    // An error result in text output: nothing on stdout, the message on stderr, exit 1.
    let config = d.scripted(&["bad line"]);
    let r = run(d.command(&config, &["-p", "q"]), "");
    assert_eq!((r.code, r.stdout.as_str()), (Some(1), ""));
    assert!(r.stderr.contains("API Error: Invalid echo DSL at line 1"), "{}", r.stderr);
}

#[test]
fn multi_turn_input_with_replay() {
    let d = Dirs::new();
    let config = d.scripted(&["text: one", "text: two", "text: three"]);
    let input = [user("first"), r#"{"role":"user","content":"second, kimi-shaped"}"#.into(), user("third")].join("\n");
    let r = run(d.command(&config, &args(SDK, &["--replay-user-messages"])), &input);
    assert_eq!(r.code, Some(0));
    let lines = r.lines();
    let answers: Vec<&str> = results(&lines).iter().map(|l| l["result"].as_str().unwrap()).collect();
    assert_eq!(answers, ["one", "two", "three"]);
    let replays: Vec<&Value> = lines.iter().filter(|l| l["isReplay"] == true).collect();
    assert_eq!(replays.len(), 3);
    assert_eq!(replays[0]["message"]["content"], "first");
    let sessions: std::collections::BTreeSet<&str> = lines.iter().filter_map(|l| l["session_id"].as_str()).collect();
    assert_eq!(sessions.len(), 1, "one session for the whole run");
    assert_eq!(lines.iter().filter(|l| l["subtype"] == "init").count(), 3, "init at every turn");
}

/// Waits for the assistant line with the tool_use block (the tool is about to run).
fn until_tool_use(k: &mut Kiwi) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let m = k.next();
        let found = m["type"] == "assistant" && m["message"]["content"][0]["type"] == "tool_use";
        seen.push(m);
        if found {
            return seen;
        }
    }
}

fn until_result(k: &mut Kiwi) -> (Vec<Value>, Value) {
    let mut seen = Vec::new();
    loop {
        let m = k.next();
        if m["type"] == "result" {
            return (seen, m);
        }
        seen.push(m);
    }
}

#[test]
fn interrupt_by_control_request_then_go_on() {
    let d = Dirs::new();
    let config = d.scripted(&[&shell("s1", "sleep 30"), "text: after"]);
    let mut k = Kiwi::spawn(d.command(&config, &args(SDK, &["--permission-mode", "bypassPermissions"])));
    k.send_raw(&user("run it"));
    until_tool_use(&mut k);
    k.send_raw(&control("int-1", json!({"subtype":"interrupt"})));
    let (before, result) = until_result(&mut k);
    let answer = before.iter().find(|m| m["type"] == "control_response").expect("the interrupt is answered");
    assert_eq!(answer["response"], json!({"subtype":"success","request_id":"int-1","response":{}}));
    assert_eq!(result["subtype"], "error_during_execution");
    assert_eq!(result["errors"], json!(["Interrupted by user"]));
    assert!(result.get("result").is_none());
    k.send_raw(&user("again"));
    let (_, result) = until_result(&mut k);
    assert_eq!(result["result"], "after");
    k.close_stdin();
    assert_eq!(k.wait_exit(common::TIMEOUT).and_then(|s| s.code()), Some(0));
}

#[test]
fn sigint_ends_the_turn_with_one_result() {
    let d = Dirs::new();
    let config = d.scripted(&[&shell("s1", "sleep 30")]);
    let mut k = Kiwi::spawn(d.command(&config, &args(SDK, &["--dangerously-skip-permissions"])));
    k.send_raw(&user("run it"));
    until_tool_use(&mut k);
    signal(k.child.id(), libc::SIGINT);
    let (_, result) = until_result(&mut k);
    assert_eq!(result["subtype"], "error_during_execution");
    assert_eq!(result["errors"], json!(["Interrupted by a signal"]));
    assert_eq!(k.wait_exit(common::TIMEOUT).and_then(|s| s.code()), Some(1));
    assert!(k.next_within(std::time::Duration::from_millis(200)).is_none(), "nothing after the result");
}

#[test]
fn provider_errors_end_with_an_api_error_result() {
    let d = Dirs::new();
    // Multi-thread, so the mock keeps serving while this thread waits for kiwi.
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let mock = rt.block_on(mock_llm::MockLlm::start());
    mock.push(mock_llm::MockResponse::json(401, r#"{"error":{"message":"Token expired","type":"auth"}}"#));
    let config = d.config(json!({
        "default_model": "m",
        "models": {"m": {"provider": "p", "model": "kimi-k2", "max_context_size": 1000}},
        "providers": {"p": {"type": "kimi", "base_url": format!("{}/v1", mock.base_url()), "api_key": "sk"}}
    }));
    let r = run(d.command(&config, &args(STREAM, &["hi"])), "");
    assert_eq!(r.code, Some(1));
    let lines = r.lines();
    let n = lines.len();
    assert_eq!(lines[n - 2]["type"], "assistant");
    assert_eq!(lines[n - 2]["error"], "authentication_failed");
    assert_eq!(lines[n - 2]["api_error_status"], 401);
    assert_eq!(lines[n - 2]["message"]["model"], "<synthetic>");
    let result = &lines[n - 1];
    assert_eq!((result["subtype"].as_str(), result["is_error"].as_bool()), (Some("success"), Some(true)));
    assert!(result["result"].as_str().unwrap().starts_with("API Error: 401 "), "{result}");
    assert!(result.get("errors").is_none());
    assert_eq!(results(&lines).len(), 1);
}

#[test]
fn a_cut_answer_has_the_max_tokens_stop_reason() {
    let d = Dirs::new();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let mock = rt.block_on(mock_llm::MockLlm::start());
    let chunk = json!({"id": "c1", "choices": [{"index": 0, "delta": {"content": "half"}, "finish_reason": "length"}]});
    mock.push(mock_llm::MockResponse::sse(format!("data: {chunk}\n\ndata: [DONE]\n\n")));
    let config = d.config(json!({
        "default_model": "m",
        "models": {"m": {"provider": "p", "model": "kimi-k2", "max_context_size": 1000}},
        "providers": {"p": {"type": "kimi", "base_url": format!("{}/v1", mock.base_url()), "api_key": "sk"}}
    }));
    let r = run(d.command(&config, &args(STREAM, &["hi"])), "");
    assert_eq!(r.code, Some(0));
    let lines = r.lines();
    let result = lines.last().unwrap();
    assert_eq!((result["subtype"].as_str(), result["is_error"].as_bool()), (Some("success"), Some(false)));
    assert_eq!((result["result"].as_str(), result["stop_reason"].as_str()), (Some("half"), Some("max_tokens")));
}

/// B.3: a provider retry shows as `system/api_retry` before the step's answer.
#[test]
fn provider_retries_are_api_retry_lines() {
    let d = Dirs::new();
    let config = d.scripted(&["error: 429 slow down", "text: done"]);
    let r = run(d.command(&config, &args(STREAM, &["go"])), "");
    assert_eq!(r.code, Some(0));
    let lines = r.lines();
    let retry = lines.iter().position(|l| l["subtype"] == "api_retry").expect("an api_retry line");
    let answer = lines.iter().position(|l| l["type"] == "assistant").expect("an assistant line");
    assert!(retry < answer, "the retry comes before the answer");
    let line = &lines[retry];
    assert_eq!((line["type"].as_str(), line["attempt"].as_u64()), (Some("system"), Some(1)));
    assert_eq!((line["error_status"].as_u64(), line["error"].as_str()), (Some(429), Some("rate_limit")));
    assert!(line["max_retries"].as_u64().unwrap() >= 1);
    assert!(line["retry_delay_ms"].is_u64());
    assert_eq!(line["session_id"], results(&lines)[0]["session_id"]);
    assert_eq!(results(&lines)[0]["result"], "done");
}

#[test]
fn max_turns() {
    let d = Dirs::new();
    let config = d.scripted(&[&shell("s1", "echo one"), &shell("s2", "echo two")]);
    let r = run(d.command(&config, &args(STREAM, &["--max-turns", "1", "--dangerously-skip-permissions", "go"])), "");
    assert_eq!(r.code, Some(1));
    let lines = r.lines();
    let result = results(&lines)[0];
    assert_eq!(result["subtype"], "error_max_turns");
    assert_eq!(result["errors"], json!(["Reached the maximum number of turns (1)"]));
    assert_eq!(result["num_turns"], 1);
}

#[test]
fn permissions_over_the_control_channel() {
    let d = Dirs::new();
    let config = d.scripted(&[&shell("c1", "echo original"), &shell("c2", "echo never"), "text: done"]);
    let mut cmd = d.command(&config, &args(SDK, &["--permission-prompt-tool", "stdio"]));
    cmd.env("CLAUDE_CODE_SDK_READS_SESSION_STATE", "1");
    let mut k = Kiwi::spawn(cmd);
    k.send_raw(&user("go"));
    let mut seen = Vec::new();
    let ask = |k: &mut Kiwi, seen: &mut Vec<Value>| loop {
        let m = k.next();
        if m["type"] == "control_request" {
            return m;
        }
        seen.push(m);
    };
    let first = ask(&mut k, &mut seen);
    assert_eq!(first["request"]["subtype"], "can_use_tool");
    assert_eq!(first["request"]["tool_name"], "Shell");
    assert_eq!(first["request"]["tool_use_id"], "c1");
    assert_eq!(first["request"]["input"], json!({"command":"echo original"}));
    let id = first["request_id"].as_str().unwrap();
    k.send_raw(
        &json!({"type":"control_response","response":{"subtype":"success","request_id":id,
            "response":{"behavior":"allow","updatedInput":{"command":"echo edited"}}}})
        .to_string(),
    );
    let second = ask(&mut k, &mut seen);
    let id = second["request_id"].as_str().unwrap();
    k.send_raw(
        &json!({"type":"control_response","response":{"subtype":"success","request_id":id,
            "response":{"behavior":"deny","message":"not this one"}}})
        .to_string(),
    );
    let (rest, result) = until_result(&mut k);
    seen.extend(rest);
    let tool_results: Vec<&Value> =
        seen.iter().filter(|m| m["type"] == "user").map(|m| &m["message"]["content"][0]).collect();
    assert_eq!(tool_results[0]["content"], "Command executed successfully.\nedited\n");
    assert_eq!(tool_results[0]["is_error"], false);
    assert_eq!(tool_results[1]["content"], "not this one");
    assert_eq!(tool_results[1]["is_error"], true);
    assert_eq!(result["result"], "done", "the turn goes on after a deny");
    assert_eq!(
        result["permission_denials"],
        json!([{"tool_name":"Shell","tool_use_id":"c2","tool_input":{"command":"echo never"}}])
    );
    let states: Vec<&str> =
        seen.iter().filter(|m| m["subtype"] == "session_state_changed").map(|m| m["state"].as_str().unwrap()).collect();
    assert_eq!(states, ["running", "requires_action", "running", "requires_action", "running"]);
    assert_eq!(k.next()["state"], "idle");
}

#[test]
fn without_a_prompt_surface_approvals_are_decided_not_waited_for() {
    let d = Dirs::new();
    let config = d.scripted(&[&shell("c1", "echo hi"), "text: denied, fine"]);
    let r = run(d.command(&config, &args(STREAM, &["go"])), "");
    assert_eq!(r.code, Some(0));
    let lines = r.lines();
    let result = results(&lines)[0];
    assert_eq!(result["permission_denials"][0]["tool_use_id"], "c1");
    let tool_result = lines.iter().find(|l| l["type"] == "user").unwrap();
    assert!(tool_result["message"]["content"][0]["content"].as_str().unwrap().contains("nobody can be asked"));
    // An allow-list lets it through.
    let config = d.scripted(&[&shell("c1", "echo hi"), "text: ran"]);
    let r = run(d.command(&config, &args(STREAM, &["--allowedTools", "Shell,ReadFile", "go"])), "");
    let lines = r.lines();
    assert_eq!(results(&lines)[0]["permission_denials"], json!([]));
    assert_eq!(lines.iter().find(|l| l["type"] == "user").unwrap()["message"]["content"][0]["is_error"], false);
}

#[test]
fn bad_input_lines_get_clear_errors_and_the_run_goes_on() {
    let d = Dirs::new();
    let config = d.scripted(&["text: still here"]);
    let input = [
        "this is not json".to_string(),
        r#"{"type":"mystery"}"#.into(),
        r#"{"type":"user","message":{"role":"user","content":[{"type":"audio"}]}}"#.into(),
        control("c-1", json!({"subtype":"no_such_request"})),
        control("c-2", json!({"subtype":"set_permission_mode","mode":"sideways"})),
        control("c-3", json!({"subtype":"set_permission_mode","mode":"acceptEdits"})),
        control("c-4", json!({"subtype":"set_model","model":"default"})),
        control("c-5", json!({"subtype":"set_model","model":"nope"})),
        r#"{"type":"control_response","response":{"subtype":"success","request_id":"unknown","response":{}}}"#.into(),
        r#"{"type":"keep_alive"}"#.into(),
        user("hello"),
    ]
    .join("\n");
    let r = run(d.command(&config, SDK), &input);
    assert_eq!(r.code, Some(0), "the last result was a success");
    assert_golden("print_claude_bad_input.jsonl", &redacted_lines(&r.lines(), &d.work()));
    assert!(r.stderr.contains("kiwi: ignoring input: an input line is not JSON"), "{}", r.stderr);
    assert!(r.stderr.contains("\"mystery\""));
}

/// B.2 `set_model`: another model of the config answers from the next turn on; unknown models
/// are refused and the session keeps its model.
#[test]
fn set_model_switches_from_the_next_turn() {
    let d = Dirs::new();
    let scripts = d.work().join("scripts.json");
    std::fs::write(&scripts, r#"["text: from the first model"]"#).unwrap();
    let config = d.config(json!({
        "default_model": "first",
        "models": {
            "first": {"provider": "s", "model": "scripted-one", "max_context_size": 100000},
            "second": {"provider": "e", "model": "echo-two", "max_context_size": 200000}
        },
        "providers": {
            "s": {"type": "_scripted_echo", "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": scripts.to_str().unwrap()}},
            "e": {"type": "_echo"}
        }
    }));
    let input = [
        user("one"),
        control("m-1", json!({"subtype":"set_model","model":"nope"})),
        control("m-2", json!({"subtype":"set_model","model":"second"})),
        user("text: from the second model"),
    ]
    .join("\n");
    let r = run(d.command(&config, SDK), &input);
    assert_eq!(r.code, Some(0), "{}\n{:#?}", r.stderr, r.lines());
    let lines = r.lines();
    let answers: Vec<&Value> = lines.iter().filter(|l| l["type"] == "control_response").collect();
    assert_eq!(answers[0]["response"]["subtype"], "error");
    assert_eq!(answers[0]["response"]["error"], "Unknown model \"nope\"");
    assert_eq!(answers[1]["response"]["subtype"], "success");
    let models: Vec<&str> =
        lines.iter().filter(|l| l["type"] == "assistant").map(|l| l["message"]["model"].as_str().unwrap()).collect();
    assert_eq!(models, ["scripted_echo", "echo"], "{lines:#?}");
    let texts: Vec<&str> = results(&lines).iter().map(|r| r["result"].as_str().unwrap()).collect();
    assert_eq!(texts, ["from the first model", "from the second model"]);
}

#[test]
fn command_line_choices() {
    let d = Dirs::new();
    let config = d.scripted(&["text: ok"]);
    // Unknown Claude options are accepted and ignored, each named on stderr.
    let r = run(d.command(&config, &args(STREAM, &["--brand-new-flag", "x", "--setting-sources=user", "q"])), "");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stderr.contains("kiwi: ignoring --brand-new-flag x: kiwi has no equivalent"), "{}", r.stderr);
    assert!(
        r.stderr.contains("kiwi: ignoring --setting-sources=user: kiwi reads no Claude Code settings"),
        "{}",
        r.stderr
    );
    // Usage errors exit 2 with nothing on stdout.
    for bad in [
        &["-p", "--resume", "..", "q"][..],
        &["-p", "--session-id=a/b", "q"],
        &["-p", "--max-turns", "0", "q"],
        &["--output-format", "xml", "-p", "q"],
    ] {
        let r = run(d.command(&config, bad), "");
        assert_eq!((r.code, r.stdout.as_str()), (Some(2), ""), "{bad:?}");
    }
    assert!(run(d.command(&config, &["-p", "--resume", "..", "q"]), "").stderr.contains("Invalid session id"));
    // A session to resume must exist: one error result, exit 1.
    let r = run(d.command(&config, &args(STREAM, &["--resume", "no-such-session", "q"])), "");
    assert_eq!(r.code, Some(1));
    let lines = r.lines();
    assert_eq!(lines.len(), 1);
    assert_eq!(lines[0]["errors"], json!(["No conversation found with session ID: no-such-session"]));
    // A bad --mcp-config is one line on stderr and an error result, not a silent run.
    let config = d.scripted(&["text: ok"]);
    let r = run(d.command(&config, &args(STREAM, &["--mcp-config", r#"{"mcpServers":{"x":{"url":5}}}"#, "q"])), "");
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("Invalid MCP config: "), "{}", r.stderr);
}

/// B.1 `--mcp-config`: Claude-shaped server definitions run through kiwi's MCP client; `init`
/// lists them and the model can call their tools.
#[test]
fn mcp_config_servers_are_served() {
    let d = Dirs::new();
    let call =
        format!("tool_call: {}", json!({"id": "m1", "name": "echo", "arguments": json!({"text": "hi"}).to_string()}));
    let config = d.scripted(&[&call, "text: done"]);
    let server = json!({"mcpServers": {"tester": {"type": "stdio", "command": mcp::test_server().to_str().unwrap()}}});
    let server = server.to_string();
    let r = run(
        d.command(
            &config,
            &args(STREAM, &["--mcp-config", &server, "--strict-mcp-config", "--dangerously-skip-permissions", "go"]),
        ),
        "",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let lines = r.lines();
    let init = lines.iter().find(|l| l["subtype"] == "init").unwrap();
    assert_eq!(init["mcp_servers"][0]["name"], "tester");
    let result = lines
        .iter()
        .filter(|l| l["type"] == "user")
        .flat_map(|l| l["message"]["content"].as_array().cloned().unwrap_or_default())
        .find(|b| b["type"] == "tool_result")
        .expect("a tool_result");
    assert_eq!(result["tool_use_id"], "m1");
    assert!(result.to_string().contains("pong:hi"), "{result}");
    assert_eq!(results(&lines)[0]["result"], "done");
}

#[test]
fn tool_filters_and_system_prompt_flags() {
    let d = Dirs::new();
    let config = d.scripted(&["text: ok"]);
    let r = run(
        d.command(
            &config,
            &args(
                STREAM,
                &[
                    "--tools",
                    "Shell,ReadFile,Grep",
                    "--disallowedTools",
                    "Grep",
                    "--append-system-prompt",
                    "Be brief.",
                    "q",
                ],
            ),
        ),
        "",
    );
    let lines = r.lines();
    assert_eq!(lines[0]["tools"], json!(["Shell", "ReadFile"]));
    // Claude's names are kiwi's tools; a name that is neither is a warning.
    let r = run(d.command(&config, &args(STREAM, &["--tools", "Bash,Read,Bsh", "q"])), "");
    let lines = r.lines();
    assert!(lines[0]["message"].as_str().unwrap().contains("no kiwi tool is called \"Bsh\""), "{}", lines[0]);
    assert_eq!(lines[1]["tools"], json!(["Shell", "ReadFile"]));
}

#[test]
fn resume_across_front_ends() {
    let d = Dirs::new();
    // A Claude print session, continued from the wire.
    let config = d.scripted(&["text: from print"]);
    let r = run(d.command(&config, &args(STREAM, &["first"])), "");
    let id = r.lines()[0]["session_id"].as_str().unwrap().to_string();
    let config = d.scripted(&["text: from wire"]);
    let mut k = Kiwi::spawn(d.command(&config, &["--wire", "--session", &id]));
    k.initialize();
    let (_, response) = k.prompt("p", json!("second"));
    assert_eq!(response["result"]["status"], "finished");
    k.close_stdin();
    k.wait_exit(common::TIMEOUT);
    let dir = print_support::session_dir(&d, &id);
    let context = std::fs::read_to_string(dir.join("context.jsonl")).unwrap();
    assert!(context.contains("first") && context.contains("from print") && context.contains("second"), "{context}");
    let wire = std::fs::read_to_string(dir.join("wire.jsonl")).unwrap();
    assert_eq!(wire.matches("\"TurnBegin\"").count(), 2, "one record file for both front ends");
    // And back: the same session resumed in the Claude dialect.
    let config = d.scripted(&["text: print again"]);
    let r = run(d.command(&config, &args(STREAM, &[&format!("--resume={id}"), "third"])), "");
    assert_eq!(r.code, Some(0));
    assert_eq!(r.lines()[0]["session_id"], id.as_str());
    let context = std::fs::read_to_string(dir.join("context.jsonl")).unwrap();
    assert!(context.contains("from wire") && context.contains("print again"));
    // --session-id creates a session with that id, and refuses one that exists.
    let config = d.scripted(&["text: named"]);
    let r = run(d.command(&config, &args(STREAM, &["--session-id", "my-named-session", "q"])), "");
    assert_eq!(r.lines()[0]["session_id"], "my-named-session");
    let r = run(d.command(&config, &args(STREAM, &["--session-id", "my-named-session", "q"])), "");
    assert_eq!(r.code, Some(1));
    assert_eq!(r.lines()[0]["errors"], json!(["Session ID my-named-session is already in use."]));
}

/// A wire run on session `id` (`--wire` and `extra`) whose one Shell call is answered with
/// `answer` when it asks.
fn wire_run(d: &Dirs, id: &str, extra: &[&str], answer: Option<&str>) {
    let config = d.scripted(&[&shell("w1", "echo earlier"), "text: ok"]);
    let mut k = Kiwi::spawn(d.command(&config, &args(&["--wire", "--session", id], extra)));
    k.send(json!({"jsonrpc":"2.0","id":"p","method":"prompt","params":{"user_input":"earlier"}}));
    if let Some(answer) = answer {
        let (_, request) = k.until_request();
        let rid = request["id"].clone();
        k.send(json!({"jsonrpc":"2.0","id":rid,"result":{"request_id":rid,"response":answer}}));
    }
    let (_, response) = k.until_response(&json!("p"));
    assert_eq!(response["result"]["status"], "finished");
    k.close_stdin();
    assert!(k.wait_exit(common::TIMEOUT).expect("exit").success());
}

/// Reads `can_use_tool` requests, answering each with `decide(input)` (allow as shown, or deny),
/// until the turn's result; returns the inputs shown, the requests and the result.
fn host_until_result(k: &mut Kiwi, decide: impl Fn(&Value) -> bool) -> (Vec<Value>, Value) {
    let mut asked = Vec::new();
    loop {
        let m = k.next();
        if m["type"] == "result" {
            return (asked, m);
        }
        if m["type"] != "control_request" {
            continue;
        }
        let request = &m["request"];
        assert_eq!(request["subtype"], "can_use_tool");
        let response = if decide(&request["input"]) {
            json!({"behavior":"allow","updatedInput":request["input"]})
        } else {
            json!({"behavior":"deny","message":"not that one"})
        };
        k.send_raw(
            &json!({"type":"control_response","response":{"subtype":"success","request_id":m["request_id"],
                "response":response}})
            .to_string(),
        );
        asked.push(request.clone());
    }
}

/// Neither a `--yolo` run nor an approve-for-session saved by an earlier
/// run decides anything here: the permission mode, the deny list and the host come first.
#[test]
fn grants_saved_by_earlier_runs_never_override_the_dialects_rules() {
    let d = Dirs::new();
    wire_run(&d, "s1", &["--yolo"], None);
    wire_run(&d, "s1", &[], Some("approve_for_session"));
    let state: Value = serde_json::from_str(
        &std::fs::read_to_string(print_support::session_dir(&d, "s1").join("state.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(state["approval"], json!({"yolo": false, "afk": false, "auto_approve_actions": ["run command"]}));
    let pwned = d.work().join("PWNED");
    let touch = format!("touch {}", pwned.display());
    // (`--disallowedTools` takes the tool out of the toolset: nothing to decide.)
    for mode in [&["--permission-mode", "dontAsk"][..], &[], &["--permission-mode", "plan"]] {
        let config = d.scripted(&[&shell("c1", &touch), "text: done"]);
        let r = run(d.command(&config, &args(STREAM, &args(&["--resume", "s1", "go"], mode))), "");
        assert_eq!(r.code, Some(0), "{mode:?}: {}", r.stderr);
        let lines = r.lines();
        assert_eq!(results(&lines)[0]["permission_denials"][0]["tool_use_id"], "c1", "{mode:?}");
        assert!(!pwned.exists(), "{mode:?}");
    }
    // A host is asked, whatever the session saved.
    let config = d.scripted(&[&shell("c1", &touch), "text: done"]);
    let mut k = Kiwi::spawn(d.command(&config, &args(SDK, &["--resume", "s1", "--permission-prompt-tool", "stdio"])));
    k.send_raw(&user("go"));
    let (asked, result) = host_until_result(&mut k, |_| false);
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["input"], json!({"command": touch}));
    assert_eq!(result["result"], "done");
    assert!(!pwned.exists());
}

/// Two calls with one id each show the host their own input, and what the
/// host allowed is what runs.
#[test]
fn can_use_tool_shows_the_host_the_call_that_asks() {
    let d = Dirs::new();
    let pwned = d.work().join("PWNED");
    let touch = format!("touch {}", pwned.display());
    let config = d.scripted(&[&format!("{}\n{}", shell("dup", &touch), shell("dup", "echo harmless")), "text: done"]);
    let mut k = Kiwi::spawn(d.command(&config, &args(SDK, &["--permission-prompt-tool", "stdio"])));
    k.send_raw(&user("go"));
    let (asked, result) = host_until_result(&mut k, |input| *input == json!({"command": "echo harmless"}));
    let mut shown: Vec<String> = asked.iter().map(|a| a["input"]["command"].as_str().unwrap().to_string()).collect();
    shown.sort();
    assert_eq!(shown, ["echo harmless".to_string(), touch]);
    assert!(asked.iter().all(|a| a["tool_use_id"] == "dup" && a.get("agent_id").is_none()));
    assert_eq!(result["result"], "done");
    assert!(!pwned.exists(), "the host refused exactly this command");
}

/// A subagent's call shows its own input and the SDK's `agent_id`.
#[test]
fn can_use_tool_shows_a_subagents_call_with_its_agent_id() {
    let d = Dirs::new();
    let agent = format!(
        "tool_call: {}",
        json!({"id": "ag-1", "name": "Agent", "arguments": json!({"description": "look", "prompt": "look around",
            "subagent_type": "explore"}).to_string()})
    );
    let summary = "text: The subagent ran its command and found that the work directory holds nothing surprising \
                   at all; the command printed its greeting, no file needed a change, and this summary is deliberately \
                   long enough to be kept as it is.";
    let config = d.scripted(&[&agent, &shell("sub-1", "echo from-sub"), summary, "text: parent done"]);
    let mut k = Kiwi::spawn(d.command(&config, &args(SDK, &["--permission-prompt-tool", "stdio"])));
    k.send_raw(&user("go"));
    let (asked, result) = host_until_result(&mut k, |_| true);
    assert_eq!(result["result"], "parent done");
    let sub: Vec<&Value> = asked.iter().filter(|a| a["tool_use_id"] == "sub-1").collect();
    assert_eq!(sub.len(), 1, "{asked:#?}");
    assert_eq!(sub[0]["input"], json!({"command": "echo from-sub"}));
    let agent_id = sub[0]["agent_id"].as_str().expect("the subagent's id");
    assert!(agent_id.len() == 9 && agent_id.starts_with('a'), "{agent_id}");
}

/// `acceptEdits` approves edits inside the work dir only, links resolved;
/// outside it, and inside `.git/`, the decision goes on down the list (here: nobody to ask).
#[test]
fn accept_edits_covers_the_work_dir_only() {
    let d = Dirs::new();
    let home = d.dir.path().join("home");
    let outside = d.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(d.work().join(".git")).unwrap();
    std::os::unix::fs::symlink(&outside, d.work().join("link")).unwrap();
    let write = |id: &str, path: &str| {
        format!(
            "tool_call: {}",
            json!({"id": id, "name": "WriteFile", "arguments": json!({"path": path, "content": "x\n"}).to_string()})
        )
    };
    let calls = [
        ("inside", "notes.txt".to_string()),
        ("bashrc", home.join(".bashrc").display().to_string()),
        ("tilde", "~/.profile".to_string()),
        ("via-link", "link/escaped.txt".to_string()),
        ("dot-git", ".git/config".to_string()),
        ("climb", d.work().join("../outside/climbed.txt").display().to_string()),
    ];
    let step: Vec<String> = calls.iter().map(|(id, path)| write(id, path)).collect();
    let config = d.scripted(&[&step.join("\n"), "text: done"]);
    let r = run(d.command(&config, &args(STREAM, &["--permission-mode", "acceptEdits", "go"])), "");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let lines = r.lines();
    let mut denied: Vec<&str> = results(&lines)[0]["permission_denials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["tool_use_id"].as_str().unwrap())
        .collect();
    denied.sort();
    assert_eq!(denied, ["bashrc", "climb", "dot-git", "tilde", "via-link"], "{lines:#?}");
    assert_eq!(std::fs::read_to_string(d.work().join("notes.txt")).unwrap(), "x\n");
    assert!(!home.join(".bashrc").exists() && !home.join(".profile").exists());
    assert!(!outside.join("escaped.txt").exists() && !outside.join("climbed.txt").exists());
    assert!(!d.work().join(".git/config").exists());
}

/// `plan` means the core's plan mode, as in ACP: edits are held to the plan file by
/// the core (not every approval refused), the session is in plan mode, and choosing another
/// mode leaves it.
#[test]
fn plan_permission_mode_is_the_cores_plan_mode() {
    let d = Dirs::new();
    let elsewhere = d.work().join("src.rs");
    let write = format!(
        "tool_call: {}",
        json!({"id": "w1", "name": "WriteFile", "arguments": json!({"path": elsewhere, "content": "x"}).to_string()})
    );
    let config = d.scripted(&[&write, "text: planned"]);
    let r = run(d.command(&config, &args(STREAM, &["--permission-mode", "plan", "go"])), "");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let lines = r.lines();
    assert_eq!(lines[0]["permissionMode"], "plan");
    let result = results(&lines)[0];
    assert_eq!(result["permission_denials"], json!([]), "the core blocks it; nobody refused an approval");
    let tool_result = &lines.iter().find(|l| l["type"] == "user").unwrap()["message"]["content"][0];
    assert!(tool_result["content"].as_str().unwrap().contains("Plan mode is active"), "{tool_result}");
    assert!(!elsewhere.exists());
    let id = result["session_id"].as_str().unwrap().to_string();
    let state_of = || -> Value {
        let path = print_support::session_dir(&d, &id).join("state.json");
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
    };
    assert_eq!(state_of()["plan_mode"], true);
    // Resumed, the session is still in plan mode; choosing `default` leaves it.
    let config = d.scripted(&["text: one", "text: two"]);
    let mut k = Kiwi::spawn(d.command(&config, &args(SDK, &["--resume", &id])));
    k.send_raw(&user("one"));
    let (seen, _) = until_result(&mut k);
    assert_eq!(seen.iter().find(|l| l["subtype"] == "init").unwrap()["permissionMode"], "plan");
    k.send_raw(&control("m-1", json!({"subtype":"set_permission_mode","mode":"default"})));
    k.send_raw(&user("two"));
    let (seen, _) = until_result(&mut k);
    assert_eq!(seen.iter().find(|l| l["subtype"] == "init").unwrap()["permissionMode"], "default");
    k.close_stdin();
    assert_eq!(k.wait_exit(common::TIMEOUT).and_then(|s| s.code()), Some(0));
    assert_eq!(state_of()["plan_mode"], false);
}

/// C.3: the host's `updatedPermissions` approves that kind of action for the rest of the run.
#[test]
fn updated_permissions_approve_the_action_for_the_rest_of_the_run() {
    let d = Dirs::new();
    let config = d.scripted(&[&shell("c1", "echo one"), &shell("c2", "echo two"), "text: done"]);
    let mut k = Kiwi::spawn(d.command(&config, &args(SDK, &["--permission-prompt-tool", "stdio"])));
    k.send_raw(&user("go"));
    let mut asked = 0;
    let result = loop {
        let m = k.next();
        if m["type"] == "control_request" {
            asked += 1;
            k.send_raw(
                &json!({"type":"control_response","response":{"subtype":"success","request_id":m["request_id"],
                    "response":{"behavior":"allow","updatedInput":m["request"]["input"],
                        "updatedPermissions":[{"type":"addRules","rules":[{"toolName":"Shell"}],"behavior":"allow","destination":"session"}]}}})
                .to_string(),
            );
            continue;
        }
        if m["type"] == "result" {
            break m;
        }
    };
    assert_eq!(asked, 1, "the second command is not asked about");
    assert_eq!(result["result"], "done");
    assert_eq!(result["permission_denials"], json!([]));
}

/// The sandbox's escalation in the Claude dialect (spec sandbox.md §2.6): the host is asked with
/// `can_use_tool` (tool `Shell`, description `Run command outside the sandbox`, the call's own
/// input); allowed, the one command runs unconfined; denied, nothing runs; under
/// `bypassPermissions` nobody is asked and it is refused.
#[test]
fn the_host_decides_an_escalation_out_of_the_sandbox() {
    // Outside every writable root: the test's folders live under /tmp, which is one.
    let target = std::path::PathBuf::from(format!("/var/tmp/kiwi-escalation-{}", std::process::id()));
    let _ = std::fs::remove_file(&target);
    let command = format!("echo escaped > {}", target.display());
    let escalated = format!(
        "tool_call: {}",
        json!({"id": "e1", "name": "Shell", "arguments": json!({"command": command,
            "sandbox_permissions": "require_escalated", "justification": "needs it"}).to_string()})
    );
    for allow in [true, false] {
        let d = Dirs::new();
        let config = d.scripted(&[&escalated, "text: done"]);
        let mut k = Kiwi::spawn(
            d.command(&config, &args(SDK, &["--permission-prompt-tool", "stdio", "--sandbox", "workspace-write"])),
        );
        k.send_raw(&user("go"));
        let (asked, result) = host_until_result(&mut k, |_| allow);
        assert_eq!(asked.len(), 1, "{asked:?}");
        assert_eq!(asked[0]["tool_name"], "Shell");
        assert_eq!(asked[0]["description"], "Run command outside the sandbox");
        assert_eq!(asked[0]["input"]["sandbox_permissions"], "require_escalated");
        assert_eq!(result["result"], "done");
        assert_eq!(target.exists(), allow, "allowed: {allow}");
        let _ = std::fs::remove_file(&target);
    }
    // bypassPermissions: refused without a question.
    let d = Dirs::new();
    let config = d.scripted(&[&escalated, "text: done"]);
    let r = run(
        d.command(&config, &args(STREAM, &["--dangerously-skip-permissions", "--sandbox", "workspace-write", "go"])),
        "",
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(!r.stdout.contains("control_request"), "{}", r.stdout);
    assert!(r.stdout.contains("Running commands outside the sandbox is not allowed in this session."), "{}", r.stdout);
    assert!(!target.exists());
}
