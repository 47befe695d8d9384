//! End-to-end wire tests against each real HTTP provider, served by the mock LLM server.
//!
//! The real binary runs with a config whose provider `base_url` points at the mock on
//! 127.0.0.1; each test checks what reaches the wire and what kiwi sent over HTTP.

use crate::common;
use crate::mock_llm;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{Env, Kiwi, types};
use mock_llm::{MockLlm, MockResponse, RecordedRequest, Split, background_runtime, fixtures_dir};
use serde_json::{Value, json};

const MAX_CONTEXT: u64 = 100_000;
/// A file in the work dir: seeing its name in a tool result proves the tool really ran there.
const MARKER: &str = "marker-e2e.txt";

/// One test's world. Fields drop in order: the server first, then the mock, then the runtime.
struct World {
    kiwi: Kiwi,
    _env: Env,
    mock: MockLlm,
    rt: tokio::runtime::Runtime,
}

#[derive(Clone, Copy)]
struct Provider {
    /// The config `type`.
    kind: &'static str,
    model: &'static str,
    /// Appended to the mock's base URL.
    suffix: &'static str,
    /// The `provider_type` used for this provider in `expected-results.json`.
    expected_as: &'static str,
}

const KIMI: Provider = Provider { kind: "kimi", model: "kimi-k2-turbo-preview", suffix: "/v1", expected_as: "kimi" };
const OPENAI_LEGACY: Provider =
    Provider { kind: "openai_legacy", model: "gpt-4.1", suffix: "/v1", expected_as: "openai_legacy" };
const OPENAI_RESPONSES: Provider =
    Provider { kind: "openai_responses", model: "gpt-5-codex", suffix: "/v1", expected_as: "openai_responses" };
const ANTHROPIC: Provider =
    Provider { kind: "anthropic", model: "claude-sonnet-4-5", suffix: "", expected_as: "anthropic" };
const GEMINI: Provider = Provider { kind: "gemini", model: "gemini-2.5-flash", suffix: "", expected_as: "gemini" };
const VERTEX: Provider = Provider { kind: "vertexai", model: "gemini-2.5-flash", suffix: "", expected_as: "gemini" };

fn write_config(env: &Env, p: Provider, base_url: &str, capabilities: &[&str]) -> PathBuf {
    let mut extra = json!({"models": {"m": {"max_context_size": MAX_CONTEXT, "capabilities": capabilities}}});
    if p.kind == "openai_legacy" {
        // The captures were made without a reasoning key (kiwi's default now reads
        // `reasoning_content`; `providers_kimi.rs` covers that).
        extra["providers"] = json!({"p": {"reasoning_key": ""}});
    }
    env.provider_config(p.kind, p.model, base_url, extra)
}

/// Starts the mock with `responses` queued and kiwi configured for `p` against it.
fn world(p: Provider, responses: Vec<MockResponse>, capabilities: &[&str], args: &[&str]) -> World {
    let rt = background_runtime();
    let mock = rt.block_on(MockLlm::start());
    for r in responses {
        mock.push(r);
    }
    let env = Env::new();
    std::fs::write(env.work().join(MARKER), "hello\n").unwrap();
    let config = write_config(&env, p, &format!("{}{}", mock.base_url(), p.suffix), capabilities);
    let kiwi = env.spawn(&config, args);
    World { kiwi, _env: env, mock, rt }
}

fn expected(fixture: &str, provider_type: &str) -> Value {
    let text = std::fs::read_to_string(fixtures_dir().join("expected-results.json")).unwrap();
    let all: Vec<Value> = serde_json::from_str(&text).unwrap();
    all.into_iter()
        .find(|r| r["fixture"] == fixture && r["provider_type"] == provider_type)
        .unwrap_or_else(|| panic!("no expected result for {fixture} / {provider_type}"))
}

fn strip_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            Value::Object(m.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), strip_nulls(v))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(strip_nulls).collect()),
        v => v.clone(),
    }
}

/// Every string inside `v`, concatenated: a format-independent view of a message's text.
fn all_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(all_text).collect(),
        Value::Object(m) => m.values().map(all_text).collect(),
        _ => String::new(),
    }
}

fn payload(m: &Value) -> &Value {
    &m["params"]["payload"]
}

/// Reads the wire from `events[*at]` on: asserts the step's streamed parts match the reference's
/// `parts`, then its StatusUpdate. Returns the tool call ids seen on the wire.
fn check_step(events: &[Value], at: &mut usize, n: u64, exp: &Value) -> Vec<String> {
    let tys = types(events);
    let fixture = exp["fixture"].as_str().unwrap();
    assert_eq!(tys[*at], "StepBegin", "{fixture}: {tys:?}");
    assert_eq!(payload(&events[*at])["n"], n);
    *at += 1;
    let mut ids = Vec::new();
    for want in exp["parts"].as_array().unwrap() {
        let mut want = want.clone();
        let kind = want.as_object_mut().unwrap().remove("kind").unwrap();
        let wire_type = match kind.as_str().unwrap() {
            "ThinkPart" | "TextPart" => "ContentPart",
            other => other,
        };
        assert_eq!(tys[*at], wire_type, "{fixture}: event {} of {tys:?}", *at);
        let mut got = strip_nulls(payload(&events[*at]));
        if let Some(want_id) = want.get("id").and_then(Value::as_str) {
            let got_id = got["id"].as_str().unwrap().to_string();
            // Gemini ids end in a process-specific suffix, written `<unique>` by the fixture.
            if let Some(prefix) = want_id.strip_suffix("<unique>") {
                assert!(got_id.starts_with(prefix), "{got_id} lacks {prefix}");
                got["id"] = want["id"].clone();
            }
            ids.push(got_id);
        }
        assert_eq!(got, want, "{fixture}: event {}", *at);
        *at += 1;
    }
    assert_eq!(tys[*at], "StatusUpdate", "{fixture}: {tys:?}");
    let status = payload(&events[*at]);
    assert_eq!(status["token_usage"], exp["usage"], "{fixture}");
    assert_eq!(status["message_id"], exp["id"], "{fixture}");
    match exp["usage"].as_object() {
        None => assert_eq!(status["context_usage"], Value::Null),
        Some(u) => {
            let input = ["input_other", "input_cache_read", "input_cache_creation"]
                .iter()
                .map(|k| u[*k].as_u64().unwrap())
                .sum::<u64>();
            let got = status["context_usage"].as_f64().expect("context_usage is a number");
            assert!((got - input as f64 / MAX_CONTEXT as f64).abs() < 1e-9, "{fixture}: context_usage {got}");
        }
    }
    *at += 1;
    ids
}

/// A full turn: step 1 streams `tool_fixture` (tool calls that really run), step 2 `text_fixture`;
/// then a second turn, whose request must carry the whole first turn. Returns the world (for
/// request checks), the tool call ids of step 1 and their results.
fn tool_round_trip(p: Provider, tool_fixture: &str, text_fixture: &str) -> (World, Vec<String>, Vec<Value>) {
    // Odd write sizes: events and JSON objects are split across reads.
    let mut w = world(
        p,
        vec![
            MockResponse::sse_fixture(tool_fixture).split(Split::Random { seed: 11, max: 90 }),
            MockResponse::sse_fixture(text_fixture).split(Split::Every(17)),
        ],
        &[],
        &["--yolo"],
    );
    let (events, resp) = w.kiwi.prompt("p1", json!("What files are here?"));
    assert_eq!(resp["result"], json!({"status": "finished"}), "{:?}", types(&events));
    let tys = types(&events);
    assert_eq!(tys[0], "TurnBegin");
    let mut at = 1;
    let ids = check_step(&events, &mut at, 1, &expected(tool_fixture, p.expected_as));
    let mut results = Vec::new();
    while tys[at] == "ToolResult" {
        results.push(payload(&events[at]).clone());
        at += 1;
    }
    assert_eq!(results.len(), ids.len(), "one ToolResult per call: {tys:?}");
    for id in &ids {
        assert!(results.iter().any(|r| r["tool_call_id"] == *id.as_str()), "no result for {id}");
    }
    check_step(&events, &mut at, 2, &expected(text_fixture, p.expected_as));
    assert_eq!(tys[at..], ["TurnEnd"], "{tys:?}");
    assert_eq!(w.mock.request_count(), 2);

    let (events, resp) = w.kiwi.prompt("p2", json!("Thanks, bye"));
    assert_eq!(resp["result"], json!({"status": "finished"}), "{:?}", types(&events));
    let third = all_text(&w.mock.requests()[2].json());
    let answer = all_text(&expected(text_fixture, p.expected_as)["message"]["content"]);
    for needle in ["What files are here?", answer.as_str(), MARKER, "Thanks, bye"] {
        assert!(third.contains(needle), "{}: the next turn's request lacks {needle:?}", p.kind);
    }
    assert!(third.find(answer.as_str()) < third.find("Thanks, bye"), "history order");
    (w, ids, results)
}

/// The Shell result reached the wire and carries the work dir listing.
fn assert_shell_ran(results: &[Value]) {
    let rv = &results[0]["return_value"];
    assert_eq!(rv["is_error"], false, "{rv}");
    assert!(all_text(&rv["output"]).contains(MARKER), "{rv}");
}

/// The tool result as the provider got it: the success line and the listing.
fn assert_tool_output(v: &Value) {
    let text = all_text(v);
    assert!(text.contains("<system>Command executed successfully.</system>"), "{v}");
    assert!(text.contains(MARKER), "{v}");
}

/// The request of the first turn's second step.
fn second_request(w: &World) -> (RecordedRequest, Value) {
    let r = w.mock.requests()[1].clone();
    let body = r.json();
    (r, body)
}

#[test]
fn kimi_tool_round_trip() {
    let (w, ids, results) = tool_round_trip(KIMI, "kimi-reasoning-and-toolcall.sse", "kimi-text.sse");
    assert_eq!(ids, ["Shell:0"]);
    assert_shell_ran(&results);
    let (r, body) = second_request(&w);
    assert_eq!(r.path, "/v1/chat/completions");
    let msgs = body["messages"].as_array().unwrap();
    let roles: Vec<_> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool"]);
    assert_eq!(msgs[1]["content"], "What files are here?");
    let a = &msgs[2];
    assert_eq!(a["content"], "Let me list the directory.");
    assert_eq!(a["reasoning_content"], "The user asks what files are here; I should run ls.");
    assert_eq!(
        a["tool_calls"],
        json!([{"type": "function", "id": "Shell:0", "function": {"name": "Shell", "arguments": "{\"command\": \"ls -la\"}"}}])
    );
    assert_eq!(msgs[3]["tool_call_id"], "Shell:0");
    assert_tool_output(&msgs[3]["content"]);
}

#[test]
fn kimi_parallel_readfile_round_trip() {
    let (w, ids, results) = tool_round_trip(KIMI, "kimi-parallel-toolcalls.sse", "kimi-text.sse");
    assert_eq!(ids, ["ReadFile:0", "ReadFile:1"]);
    // Neither file exists: both calls fail as tool errors, and the turn goes on.
    for r in &results {
        assert_eq!(r["return_value"]["is_error"], true, "{r}");
    }
    let (_, body) = second_request(&w);
    let msgs = body["messages"].as_array().unwrap();
    let roles: Vec<_> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "tool"]);
    assert_eq!(msgs[2]["content"], "I'll read both files.");
    assert!(msgs[2].get("reasoning_content").is_none(), "{}", msgs[2]);
    let call_ids: Vec<_> = msgs[2]["tool_calls"].as_array().unwrap().iter().map(|c| c["id"].clone()).collect();
    assert_eq!(call_ids, [json!("ReadFile:0"), json!("ReadFile:1")]);
    // Results are stored in call order, whatever order they finished in.
    assert_eq!(msgs[3]["tool_call_id"], "ReadFile:0");
    assert_eq!(msgs[4]["tool_call_id"], "ReadFile:1");
}

#[test]
fn openai_legacy_tool_round_trip() {
    // The legacy provider drops `reasoning_content`; the Shell call still goes through.
    let (w, ids, results) = tool_round_trip(OPENAI_LEGACY, "kimi-reasoning-and-toolcall.sse", "openai-text.sse");
    assert_eq!(ids, ["Shell:0"]);
    assert_shell_ran(&results);
    let (r, body) = second_request(&w);
    assert_eq!(r.path, "/v1/chat/completions");
    let msgs = body["messages"].as_array().unwrap();
    let roles: Vec<_> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool"]);
    assert_eq!(msgs[2]["content"], "Let me list the directory.");
    assert!(msgs[2].get("reasoning_content").is_none(), "{}", msgs[2]);
    assert_eq!(msgs[2]["tool_calls"][0]["id"], "Shell:0");
    assert_eq!(msgs[2]["tool_calls"][0]["function"]["arguments"], "{\"command\": \"ls -la\"}");
    assert_eq!(msgs[3]["tool_call_id"], "Shell:0");
    assert_tool_output(&msgs[3]["content"]);
}

#[test]
fn openai_responses_tool_round_trip() {
    // The `response.failed` fixture is treated as a (partial) success by the reference.
    let (w, ids, results) =
        tool_round_trip(OPENAI_RESPONSES, "openai-responses-reasoning-toolcall.sse", "openai-responses-failed.sse");
    assert_eq!(ids, ["call_mockR1"]);
    assert_shell_ran(&results);
    let (r, body) = second_request(&w);
    assert_eq!(r.path, "/v1/responses");
    let input = body["input"].as_array().unwrap();
    let kinds: Vec<_> = input.iter().map(|i| i["type"].as_str().or(i["role"].as_str()).unwrap()).collect();
    assert_eq!(kinds, ["developer", "message", "reasoning", "message", "function_call", "function_call_output"]);
    assert_eq!(
        input[2],
        json!({"summary": [{"type": "summary_text", "text": "**Checking files**\n\nI need to list the directory first."}],
            "type": "reasoning", "encrypted_content": "gAAAAABmockEncryptedReasoningBlob_0123456789=="})
    );
    assert_eq!(input[3]["role"], "assistant");
    assert_eq!(
        input[3]["content"],
        json!([{"type": "output_text", "text": "Listing the files now.", "annotations": []}])
    );
    assert_eq!(
        input[4],
        json!({"arguments": "{\"command\": \"ls\"}", "call_id": "call_mockR1", "name": "Shell", "type": "function_call"})
    );
    assert_eq!(input[5]["call_id"], "call_mockR1");
    assert_tool_output(&input[5]["output"]);
}

#[test]
fn anthropic_tool_round_trip() {
    let (w, ids, results) = tool_round_trip(ANTHROPIC, "anthropic-thinking-toolcall.sse", "anthropic-text.sse");
    assert_eq!(ids, ["toolu_01MockShellCall"]);
    assert_shell_ran(&results);
    let (r, body) = second_request(&w);
    assert_eq!(r.path, "/v1/messages");
    let msgs = body["messages"].as_array().unwrap();
    let roles: Vec<_> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user"]);
    assert_eq!(
        msgs[1]["content"],
        json!([
            {"type": "thinking", "thinking": "The user wants a directory listing. I will call the Shell tool.",
             "signature": "EqMBCkgIBxABGAIqQMockSignatureBytesForThinkingBlock0123456789abcdefEgwMockSig=="},
            {"type": "text", "text": "I'll list the files."},
            {"type": "tool_use", "id": "toolu_01MockShellCall", "name": "Shell", "input": {"command": "ls -la"}}
        ])
    );
    let result = &msgs[2]["content"][0];
    assert_eq!(result["type"], "tool_result");
    assert_eq!(result["tool_use_id"], "toolu_01MockShellCall");
    assert_tool_output(&result["content"]);
}

fn check_gemini_second_request(w: &World, ids: &[String], path: &str) {
    let (r, body) = second_request(w);
    assert_eq!(r.path, path);
    assert_eq!(r.query, "alt=sse");
    let contents = body["contents"].as_array().unwrap();
    let roles: Vec<_> = contents.iter().map(|c| c["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "model", "user"]);
    // Thoughts are not sent back; the call carries its signature.
    assert_eq!(
        contents[1]["parts"],
        json!([{"functionCall": {"id": ids[0], "args": {"command": "ls -la"}, "name": "Shell"},
            "thoughtSignature": "bW9jay10aG91Z2h0LXNpZ25hdHVyZS1ieXRlcy0wMDAx"}])
    );
    let response = &contents[2]["parts"][0]["functionResponse"];
    assert_eq!(response["id"], ids[0].as_str());
    assert_eq!(response["name"], "Shell");
    assert_tool_output(&response["response"]["output"]);
}

#[test]
fn gemini_tool_round_trip() {
    let (w, ids, results) = tool_round_trip(GEMINI, "gemini-thinking-functioncall.sse", "gemini-text.sse");
    assert!(ids[0].starts_with("Shell_"), "{ids:?}");
    assert_shell_ran(&results);
    check_gemini_second_request(&w, &ids, "/v1beta/models/gemini-2.5-flash:streamGenerateContent");
}

#[test]
fn vertexai_tool_round_trip() {
    let (w, ids, results) = tool_round_trip(VERTEX, "gemini-thinking-functioncall.sse", "gemini-text.sse");
    assert_shell_ran(&results);
    check_gemini_second_request(&w, &ids, "/v1beta1/publishers/google/models/gemini-2.5-flash:streamGenerateContent");
    assert_eq!(w.mock.requests()[0].header("x-goog-api-key"), Some("sk-mock-key"));
}

// ---- error paths ----

/// Runs one prompt that must fail with -32003; returns the events before the error and its message.
fn failing_turn(w: &mut World) -> (Vec<Value>, String) {
    let (events, resp) = w.kiwi.prompt("p1", json!("hi"));
    assert_eq!(resp["error"]["code"], -32003, "{resp}");
    let tys = types(&events);
    assert_eq!(tys.first().map(String::as_str), Some("TurnBegin"), "{tys:?}");
    assert_eq!(tys[1], "StepBegin");
    // `docs/protocol-1.10.md` §4.4: a provider error ends with `StepInterrupted`, then `TurnEnd`.
    assert_eq!(tys[tys.len() - 2..], ["StepInterrupted", "TurnEnd"], "{tys:?}");
    assert_eq!(tys.iter().filter(|t| *t == "StepBegin").count(), 1, "retries add no StepBegin: {tys:?}");
    (events, resp["error"]["message"].as_str().unwrap().to_string())
}

/// After a failed turn the server still serves: a text turn completes.
fn assert_recovers(w: &mut World, text_fixture: &str) {
    w.mock.push(MockResponse::sse_fixture(text_fixture));
    let (events, resp) = w.kiwi.prompt("p2", json!("again"));
    assert_eq!(resp["result"], json!({"status": "finished"}), "{:?}", types(&events));
}

#[test]
fn kimi_429_then_success_is_one_step() {
    let mut w = world(
        KIMI,
        vec![MockResponse::json_fixture(429, "kimi-error-429.json"), MockResponse::sse_fixture("kimi-text.sse")],
        &[],
        &[],
    );
    let (events, resp) = w.kiwi.prompt("p1", json!("hi"));
    assert_eq!(resp["result"], json!({"status": "finished"}));
    assert_eq!(
        types(&events),
        ["TurnBegin", "StepBegin", "ContentPart", "ContentPart", "ContentPart", "StatusUpdate", "TurnEnd"]
    );
    assert_eq!(w.mock.request_count(), 2);
}

#[test]
fn kimi_500_until_retries_run_out() {
    let mut w = world(
        KIMI,
        vec![MockResponse::json(500, "<html>oops</html>").header("content-type", "text/html")],
        &[],
        &["--max-retries-per-step", "2"],
    );
    let (_, message) = failing_turn(&mut w);
    // Like the openai SDK: a body that is not JSON is the whole message.
    assert_eq!(message, "<html>oops</html>");
    // 3 SDK requests per attempt, 2 attempts.
    assert_eq!(w.mock.request_count(), 6);
    assert_recovers(&mut w, "kimi-text.sse");
}

#[test]
fn retry_counts_until_retries_run_out() {
    // (provider, status, fixture, total requests: SDK attempts × kimi-cli attempts, kimi-cli retries)
    for (p, status, fixture, requests, retries) in [
        (KIMI, 429, "kimi-error-429.json", 9, 2),
        (OPENAI_LEGACY, 429, "openai-error-429.json", 9, 2),
        (ANTHROPIC, 429, "anthropic-error-429.json", 9, 2),
        (ANTHROPIC, 529, "anthropic-error-overloaded.json", 3, 0),
        (GEMINI, 429, "gemini-error-429.json", 3, 2),
    ] {
        let mut w = world(p, vec![MockResponse::json_fixture(status, fixture)], &[], &[]);
        let (events, message) = failing_turn(&mut w);
        // `docs/protocol-1.10.md` §4.2: one `StepRetry` before each retry, none after the last attempt.
        let mut want = vec!["TurnBegin", "StepBegin"];
        want.extend(std::iter::repeat_n("StepRetry", retries));
        want.extend(["StepInterrupted", "TurnEnd"]);
        assert_eq!(types(&events), want, "{fixture}");
        let retry = events.iter().find(|e| e["params"]["type"] == "StepRetry");
        if let Some(retry) = retry {
            let r = payload(retry);
            assert_eq!((&r["n"], &r["next_attempt"], &r["max_attempts"]), (&json!(1), &json!(2), &json!(3)));
            assert_eq!((&r["error_type"], &r["status_code"]), (&json!("APIStatusError"), &json!(status)));
            assert!(r["wait_s"].as_f64().unwrap() > 0.0);
        }
        assert_eq!(message, expected(fixture, p.expected_as)["str"].as_str().unwrap(), "{fixture}");
        assert_eq!(w.mock.request_count(), requests, "{fixture}");
    }
}

#[test]
fn empty_responses_are_retried_then_fail() {
    let mut w = world(KIMI, vec![MockResponse::sse("data: [DONE]\n\n")], &[], &[]);
    let (events, message) = failing_turn(&mut w);
    assert_eq!(types(&events), ["TurnBegin", "StepBegin", "StepRetry", "StepRetry", "StepInterrupted", "TurnEnd"]);
    assert_eq!(payload(&events[2])["error_type"], "APIEmptyResponseError");
    assert_eq!(payload(&events[3])["next_attempt"], 3);
    assert_eq!(message, "The API returned an empty response.");
    assert_eq!(w.mock.request_count(), 3);
}

#[test]
fn approved_shell_call_round_trip() {
    let mut w = world(
        ANTHROPIC,
        vec![
            MockResponse::sse_fixture("anthropic-thinking-toolcall.sse"),
            MockResponse::sse_fixture("anthropic-text.sse"),
        ],
        &[],
        &[],
    );
    w.kiwi.send(json!({"jsonrpc": "2.0", "id": "p1", "method": "prompt", "params": {"user_input": "list"}}));
    let (before, request) = w.kiwi.until_request();
    let tys = types(&before);
    assert_eq!(tys.last().map(String::as_str), Some("StatusUpdate"), "{tys:?}");
    let req = &request["params"]["payload"];
    assert_eq!(request["params"]["type"], "ApprovalRequest");
    assert_eq!(req["tool_call_id"], "toolu_01MockShellCall");
    assert_eq!(req["sender"], "Shell");
    w.kiwi.send(
        json!({"jsonrpc": "2.0", "id": request["id"], "result": {"request_id": req["id"], "response": "approve"}}),
    );
    let (after, resp) = w.kiwi.until_response(&json!("p1"));
    assert_eq!(resp["result"], json!({"status": "finished"}));
    let tys = types(&after);
    assert_eq!(tys[..3], ["ApprovalResponse", "ToolResult", "StepBegin"], "{tys:?}");
    assert_eq!(payload(&after[1])["return_value"]["is_error"], false);
    assert_eq!(tys.last().map(String::as_str), Some("TurnEnd"));
    let (_, body) = second_request(&w);
    let result = &body["messages"][2]["content"][0];
    assert_eq!(result["tool_use_id"], "toolu_01MockShellCall");
    assert_tool_output(&result["content"]);
}

#[test]
fn status_errors_that_are_not_retried() {
    for (p, status, fixture, text) in [
        (KIMI, 401, "kimi-error-401.json", "kimi-text.sse"),
        (KIMI, 400, "kimi-error-400-token-limit.json", "kimi-text.sse"),
        (OPENAI_LEGACY, 401, "openai-error-401.json", "openai-text.sse"),
        (GEMINI, 400, "gemini-error-400.json", "gemini-text.sse"),
    ] {
        let mut w = world(p, vec![MockResponse::json_fixture(status, fixture)], &[], &[]);
        let (events, message) = failing_turn(&mut w);
        assert_eq!(types(&events), ["TurnBegin", "StepBegin", "StepInterrupted", "TurnEnd"]);
        assert_eq!(message, expected(fixture, p.expected_as)["str"].as_str().unwrap(), "{fixture}");
        assert_eq!(w.mock.request_count(), 1, "{fixture}");
        assert_recovers(&mut w, text);
    }
}

#[test]
fn mid_stream_errors_keep_the_streamed_fragments() {
    for (p, fixture, text) in [
        (KIMI, "kimi-stream-error.sse", "kimi-text.sse"),
        (ANTHROPIC, "anthropic-stream-error.sse", "anthropic-text.sse"),
    ] {
        let exp = expected(fixture, p.expected_as);
        let mut w = world(p, vec![MockResponse::sse_fixture(fixture)], &[], &[]);
        let (events, message) = failing_turn(&mut w);
        let tys = types(&events);
        let parts: Vec<Value> =
            events.iter().filter(|e| e["params"]["type"] == "ContentPart").map(|e| strip_nulls(payload(e))).collect();
        let want: Vec<Value> = exp["parts"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let mut p = p.clone();
                p.as_object_mut().unwrap().remove("kind");
                p
            })
            .collect();
        assert!(!want.is_empty());
        assert_eq!(parts, want, "{fixture}: {tys:?}");
        assert_eq!(message, exp["str"].as_str().unwrap(), "{fixture}");
        assert_eq!(w.mock.request_count(), 1, "{fixture}: not retried");
        assert_recovers(&mut w, text);
    }
}

#[test]
fn connection_refused_fails_after_retries() {
    let rt = background_runtime();
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let env = Env::new();
    let config = write_config(&env, KIMI, &format!("http://127.0.0.1:{port}/v1"), &[]);
    let mut kiwi = env.spawn(&config, &["--max-retries-per-step", "2"]);
    let started = Instant::now();
    kiwi.send(json!({"jsonrpc": "2.0", "id": "p1", "method": "prompt", "params": {"user_input": "hi"}}));
    let mut events = Vec::new();
    let resp = loop {
        let m = kiwi.next_within(Duration::from_secs(60)).expect("kiwi answers, never hangs");
        if m.get("method").is_none() && m["id"] == "p1" {
            break m;
        }
        events.push(m);
    };
    assert_eq!(resp["error"]["code"], -32003, "{resp}");
    assert_eq!(resp["error"]["message"], "Connection error.");
    assert_eq!(types(&events), ["TurnBegin", "StepBegin", "StepRetry", "StepInterrupted", "TurnEnd"]);
    assert_eq!(payload(&events[2])["error_type"], "APIConnectionError");
    assert_eq!(payload(&events[2])["status_code"], Value::Null);
    assert!(started.elapsed() < Duration::from_secs(60));
    drop(rt);
}

#[test]
fn stream_cut_in_half_fails_the_turn() {
    let body = mock_llm::fixture("kimi-text.sse");
    // Cut right after the second event (the first text delta "Hello").
    let second_event_end = body.windows(2).enumerate().filter(|(_, w)| w == b"\n\n").nth(1).unwrap().0 + 2;
    let mut w = world(KIMI, vec![MockResponse::sse(body).cut_at(second_event_end)], &[], &[]);
    let (events, message) = failing_turn(&mut w);
    // The first event's empty content yields no part, like the reference.
    assert_eq!(types(&events), ["TurnBegin", "StepBegin", "ContentPart", "StepInterrupted", "TurnEnd"]);
    assert_eq!(payload(&events[2]), &json!({"type": "text", "text": "Hello"}));
    assert_eq!(
        message,
        "Error: peer closed connection without sending complete message body (incomplete chunked read)"
    );
    assert_eq!(w.mock.request_count(), 1, "a cut body is not retried");
    assert_recovers(&mut w, "kimi-text.sse");

    // Cut inside an event: still an error, never a hang.
    let body = mock_llm::fixture("kimi-text.sse");
    let mut w = world(KIMI, vec![MockResponse::sse(body).cut_at(second_event_end + 40)], &[], &[]);
    let (events, _) = failing_turn(&mut w);
    assert_eq!(types(&events).last().map(String::as_str), Some("TurnEnd"));
    assert_recovers(&mut w, "kimi-text.sse");
}

// ---- cancel, identity, capabilities ----

#[test]
fn cancel_during_a_slow_first_byte() {
    let mut w = world(
        KIMI,
        vec![MockResponse::sse_fixture("kimi-text.sse").first_byte_delay(Duration::from_secs(30))],
        &[],
        &[],
    );
    w.kiwi.send(json!({"jsonrpc": "2.0", "id": "p1", "method": "prompt", "params": {"user_input": "hi"}}));
    let deadline = Instant::now() + Duration::from_secs(10);
    while w.mock.request_count() == 0 {
        assert!(Instant::now() < deadline, "the request never reached the mock");
        std::thread::sleep(Duration::from_millis(10));
    }
    let sent = Instant::now();
    w.kiwi.send(json!({"jsonrpc": "2.0", "id": "c1", "method": "cancel"}));
    let (events, resp) = w.kiwi.until_response(&json!("p1"));
    let elapsed = sent.elapsed();
    assert_eq!(resp["result"], json!({"status": "cancelled"}));
    assert!(elapsed < Duration::from_secs(2), "cancel took {elapsed:?}");
    let tys = types(&events);
    // `docs/protocol-1.10.md` §4.4: the cancel's answer, then the owed `TurnEnd`; no `StepInterrupted`.
    assert_eq!(tys, ["TurnBegin", "StepBegin", "response", "TurnEnd"], "cancel answered first");
    assert_eq!(events[2]["id"], "c1");
    assert_eq!(events[2]["result"], json!({}));
    assert!(w.rt.block_on(w.mock.wait_disconnects(1, Duration::from_secs(5))), "the mock saw the connection dropped");
}

#[test]
fn initialize_client_info_sets_the_kimi_user_agent() {
    let mut w = world(KIMI, vec![MockResponse::sse_fixture("kimi-text.sse")], &[], &[]);
    let (_, init) = w.kiwi.call(
        "i1",
        "initialize",
        json!({"protocol_version": "1.2", "client": {"name": "mockclient", "version": "0.1"}}),
    );
    assert!(init.get("result").is_some(), "{init}");
    // The kimi-cli version kiwi presents itself as, from the request the reference sent.
    let captured: Value = serde_json::from_slice(&mock_llm::fixture("requests/kimi-wire-e2e.json")).unwrap();
    let reference_agent = captured["request"]["headers"]["User-Agent"].as_str().unwrap();
    let version = reference_agent.strip_prefix("KimiCLI/").unwrap().split(' ').next().unwrap().to_string();
    w.kiwi.prompt("p1", json!("hi"));
    let (_, init) = w.kiwi.call("i2", "initialize", json!({"protocol_version": "1.2", "client": {"name": "bare"}}));
    assert!(init.get("result").is_some(), "{init}");
    w.kiwi.prompt("p2", json!("hi"));
    w.kiwi.call("i3", "initialize", json!({"protocol_version": "1.2"}));
    w.kiwi.prompt("p3", json!("hi"));
    let agents: Vec<_> =
        w.mock.requests().iter().map(|r| r.header("user-agent").unwrap_or_default().to_string()).collect();
    assert_eq!(
        agents,
        [
            format!("KimiCLI/{version} (mockclient 0.1)"),
            format!("KimiCLI/{version} (bare)"),
            format!("KimiCLI/{version}")
        ]
    );
    let first = &w.mock.requests()[0];
    assert_eq!(first.header("x-msh-platform"), Some("kimi_cli"));
    assert_eq!(first.header("x-msh-version"), Some(version.as_str()));
}

const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

fn image_input() -> Value {
    json!([{"type": "text", "text": "What is in this image?"},
        {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG}")}}])
}

#[test]
fn image_input_without_image_in_is_refused() {
    let mut w = world(KIMI, vec![MockResponse::sse_fixture("kimi-text.sse")], &[], &[]);
    let (events, resp) = w.kiwi.prompt("p1", image_input());
    assert_eq!(resp["error"]["code"], -32002, "{resp}");
    assert_eq!(
        resp["error"]["message"],
        "LLM model 'kimi-k2-turbo-preview' does not support required capability: image_in."
    );
    assert_eq!(types(&events), ["TurnBegin", "TurnEnd"]);
    assert_eq!(w.mock.request_count(), 0);
}

#[test]
fn image_input_reaches_each_provider_in_its_format() {
    let url = format!("data:image/png;base64,{PNG}");
    let cases: [(Provider, &str, Value); 4] = [
        (KIMI, "kimi-text.sse", json!({"type": "image_url", "image_url": {"url": url, "id": null}})),
        (
            OPENAI_RESPONSES,
            "openai-responses-failed.sse",
            json!({"type": "input_image", "detail": "auto", "image_url": url}),
        ),
        (
            ANTHROPIC,
            "anthropic-text.sse",
            json!({"type": "image", "source": {"type": "base64", "data": PNG, "media_type": "image/png"},
                "cache_control": {"type": "ephemeral"}}),
        ),
        (
            GEMINI,
            "gemini-text.sse",
            json!({"inlineData": {"data": PNG.replace('+', "-").replace('/', "_"), "mimeType": "image/png"}}),
        ),
    ];
    for (p, fixture, want) in cases {
        let mut w = world(p, vec![MockResponse::sse_fixture(fixture)], &["image_in"], &[]);
        let (events, resp) = w.kiwi.prompt("p1", image_input());
        assert_eq!(resp["result"], json!({"status": "finished"}), "{}: {:?}", p.kind, types(&events));
        let body = w.mock.requests()[0].json();
        let last_user = match p.kind {
            "openai_responses" => body["input"].as_array().unwrap().last().unwrap()["content"].clone(),
            "gemini" => body["contents"].as_array().unwrap().last().unwrap()["parts"].clone(),
            _ => body["messages"].as_array().unwrap().last().unwrap()["content"].clone(),
        };
        let parts = last_user.as_array().unwrap_or_else(|| panic!("{}: {last_user}", p.kind));
        assert_eq!(parts.last().unwrap(), &want, "{}", p.kind);
        assert!(all_text(&parts[0]).contains("What is in this image?"), "{}: {last_user}", p.kind);
    }
}

// ---- cancellation while streaming, in backoff and in a tool; step limits ----

/// A kimi SSE body: one text delta, then a Shell call running `command`, then usage.
fn kimi_shell_call(command: &str) -> String {
    let args = serde_json::to_string(&json!({"command": command})).unwrap();
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-e2e", "object": "chat.completion.chunk", "model": "kimi-k2-turbo-preview",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    [
        chunk(json!({"role": "assistant", "content": "Running it."}), Value::Null),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "Shell:0", "type": "function",
                "function": {"name": "Shell", "arguments": args}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!("tool_calls")),
    ]
    .iter()
    .map(|c| format!("data: {c}\n\n"))
    .chain(["data: [DONE]\n\n".to_string()])
    .collect()
}

fn roles(body: &Value) -> Vec<String> {
    body["messages"].as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap().to_string()).collect()
}

/// Sends `cancel` and reads to the prompt's response; asserts it is prompt and `cancelled`, that
/// no `StepInterrupted` went out and that `TurnEnd` came last (`docs/protocol-1.10.md` §4.4). Returns the
/// events since the cancel.
fn cancel_now(w: &mut World) -> Vec<Value> {
    let sent = Instant::now();
    w.kiwi.send(json!({"jsonrpc": "2.0", "id": "c1", "method": "cancel"}));
    let (events, resp) = w.kiwi.until_response(&json!("p1"));
    let elapsed = sent.elapsed();
    assert_eq!(resp["result"], json!({"status": "cancelled"}), "{resp}");
    assert!(elapsed < Duration::from_secs(2), "cancel took {elapsed:?}");
    let tys = types(&events);
    assert!(tys.contains(&"response".to_string()), "the cancel is answered before the prompt: {tys:?}");
    assert!(!tys.iter().any(|t| t == "StepInterrupted"), "{tys:?}");
    assert_eq!(tys.last().map(String::as_str), Some("TurnEnd"), "{tys:?}");
    events
}

#[test]
fn cancel_mid_stream_stores_only_the_user_message() {
    let body = mock_llm::fixture("kimi-text.sse");
    let bounds: Vec<usize> = body.windows(2).enumerate().filter(|(_, w)| w == b"\n\n").map(|(i, _)| i + 2).collect();
    let slow = MockResponse::sse(body).split(Split::At(bounds)).write_delay(Duration::from_millis(500));
    let mut w = world(KIMI, vec![slow], &[], &[]);
    w.kiwi.send(json!({"jsonrpc": "2.0", "id": "p1", "method": "prompt", "params": {"user_input": "hi"}}));
    let (before, first_part) = loop {
        let m = w.kiwi.next();
        if m["params"]["type"] == "ContentPart" {
            break (w.kiwi.seen.clone(), m);
        }
    };
    assert_eq!(payload(&first_part)["text"], "Hello");
    assert_eq!(types(&before), ["TurnBegin", "StepBegin", "ContentPart"]);
    cancel_now(&mut w);
    assert!(w.rt.block_on(w.mock.wait_disconnects(1, Duration::from_secs(5))), "the stream was dropped");

    w.mock.push(MockResponse::sse_fixture("kimi-text.sse"));
    let (_, resp) = w.kiwi.prompt("p2", json!("again"));
    assert_eq!(resp["result"], json!({"status": "finished"}));
    let body = w.mock.requests()[1].json();
    assert_eq!(roles(&body), ["system", "user", "user"], "no partial assistant message is stored");
    assert_eq!(body["messages"][1]["content"], "hi");
}

#[test]
fn cancel_during_retry_backoff() {
    // The SDK would wait 20 s before its retry.
    let mut w = world(KIMI, vec![MockResponse::json(500, "busy").header("retry-after-ms", "20000")], &[], &[]);
    w.kiwi.send(json!({"jsonrpc": "2.0", "id": "p1", "method": "prompt", "params": {"user_input": "hi"}}));
    let deadline = Instant::now() + Duration::from_secs(10);
    while w.mock.request_count() == 0 {
        assert!(Instant::now() < deadline, "the request never reached the mock");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200));
    cancel_now(&mut w);
    assert_eq!(w.mock.request_count(), 1, "no retry after the cancel");
}

#[test]
fn cancel_while_a_tool_runs() {
    let mut w = world(KIMI, vec![MockResponse::sse(kimi_shell_call("sleep 3"))], &[], &["--yolo"]);
    w.kiwi.send(json!({"jsonrpc": "2.0", "id": "p1", "method": "prompt", "params": {"user_input": "nap"}}));
    loop {
        if w.kiwi.next()["params"]["type"] == "StatusUpdate" {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    let events = cancel_now(&mut w);
    assert!(!types(&events).contains(&"ToolResult".to_string()), "{:?}", types(&events));

    w.mock.push(MockResponse::sse_fixture("kimi-text.sse"));
    let (_, resp) = w.kiwi.prompt("p2", json!("again"));
    assert_eq!(resp["result"], json!({"status": "finished"}));
    let body = w.mock.requests()[1].json();
    assert_eq!(roles(&body), ["system", "user", "user"], "the cancelled step is not stored");
}

#[test]
fn step_limit_with_a_real_provider() {
    let mut w = world(
        KIMI,
        vec![MockResponse::sse_fixture("kimi-reasoning-and-toolcall.sse")],
        &[],
        &["--yolo", "--max-steps-per-turn", "1"],
    );
    let (events, resp) = w.kiwi.prompt("p1", json!("list"));
    assert_eq!(resp["result"], json!({"status": "max_steps_reached", "steps": 1}));
    let tys = types(&events);
    // `docs/protocol-1.10.md` §4.4: max steps ends with the last results, then `TurnEnd`.
    assert_eq!(tys[tys.len() - 2..], ["ToolResult", "TurnEnd"], "{tys:?}");
    assert!(!tys.iter().any(|t| t == "StepInterrupted"), "{tys:?}");
    assert_eq!(w.mock.request_count(), 1);
}

// ---- configuration reaching the request ----

#[test]
fn kimi_thinking_headers_and_env_overrides() {
    let rt = background_runtime();
    let mock = rt.block_on(MockLlm::start());
    mock.push(MockResponse::sse_fixture("kimi-text.sse"));
    let env = Env::new();
    // The configured base_url and model are replaced by the KIMI_* variables.
    let config = json!({
        "default_model": "m",
        "models": {"m": {"provider": "p", "model": "configured-model", "max_context_size": MAX_CONTEXT,
            "capabilities": ["thinking"]}},
        "providers": {"p": {"type": "kimi", "base_url": "http://127.0.0.1:9/v1", "api_key": "sk-config",
            "custom_headers": {"X-Custom": "yes"}}}
    });
    let path = env.dir.path().join("config.json");
    std::fs::write(&path, serde_json::to_string(&config).unwrap()).unwrap();
    let mut cmd = env.command(&path, &["--thinking"]);
    cmd.env("KIMI_BASE_URL", format!("{}/v1", mock.base_url()))
        .env("KIMI_API_KEY", "sk-env")
        .env("KIMI_MODEL_NAME", "kimi-k2-turbo-preview")
        .env("KIMI_MODEL_TEMPERATURE", "0.6");
    let mut kiwi = Kiwi::spawn(cmd);
    for id in ["p1", "p2"] {
        let (events, resp) = kiwi.prompt(id, json!("hi"));
        assert_eq!(resp["result"], json!({"status": "finished"}), "{:?}", types(&events));
    }
    let requests = mock.requests();
    let r = &requests[0];
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.header("authorization"), Some("Bearer sk-env"));
    assert_eq!(r.header("x-custom"), Some("yes"));
    let body = r.json();
    assert_eq!(body["model"], "kimi-k2-turbo-preview");
    assert_eq!(body["reasoning_effort"], "high");
    assert_eq!(body["thinking"], json!({"type": "enabled"}));
    assert_eq!(body["temperature"], 0.6);
    // The session id is the cache key, the same for every request of the session.
    let key = body["prompt_cache_key"].as_str().expect("prompt_cache_key").to_string();
    assert!(!key.is_empty());
    assert_eq!(requests[1].json()["prompt_cache_key"], key.as_str());
    drop(kiwi);
}

#[test]
fn anthropic_thinking_flag_sets_the_budget() {
    let mut w = world(ANTHROPIC, vec![MockResponse::sse_fixture("anthropic-text.sse")], &["thinking"], &["--thinking"]);
    let (_, resp) = w.kiwi.prompt("p1", json!("hi"));
    assert_eq!(resp["result"], json!({"status": "finished"}));
    let body = w.mock.requests()[0].json();
    assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": 32000}));
    assert_eq!(w.mock.requests()[0].header("x-api-key"), Some("sk-mock-key"));
}

// ---- history survives a restart ----

/// Removes Anthropic's `cache_control` markers: they move to whichever message is last.
fn without_cache_control(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| *k != "cache_control")
                .map(|(k, v)| (k.clone(), without_cache_control(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_cache_control).collect()),
        v => v.clone(),
    }
}

/// The history part of a request body, without the system prompt and cache markers.
fn history_of(p: Provider, body: &Value) -> Vec<Value> {
    let list = match p.kind {
        "openai_responses" => &body["input"],
        "gemini" | "vertexai" => &body["contents"],
        _ => &body["messages"],
    };
    let list = list.as_array().unwrap();
    let skip = usize::from(matches!(p.kind, "kimi" | "openai_legacy" | "openai_responses"));
    list[skip..].iter().map(without_cache_control).collect()
}

#[test]
fn continued_session_sends_the_same_history() {
    for (p, tool_fixture, text_fixture) in [
        (KIMI, "kimi-reasoning-and-toolcall.sse", "kimi-text.sse"),
        (OPENAI_RESPONSES, "openai-responses-reasoning-toolcall.sse", "openai-responses-failed.sse"),
        (ANTHROPIC, "anthropic-thinking-toolcall.sse", "anthropic-text.sse"),
        (GEMINI, "gemini-thinking-functioncall.sse", "gemini-text.sse"),
    ] {
        let mut w = world(
            p,
            vec![MockResponse::sse_fixture(tool_fixture), MockResponse::sse_fixture(text_fixture)],
            &[],
            &["--yolo"],
        );
        let (_, resp) = w.kiwi.prompt("p1", json!("What files are here?"));
        assert_eq!(resp["result"], json!({"status": "finished"}), "{}", p.kind);
        w.kiwi.close_stdin();
        assert!(w.kiwi.wait_exit(Duration::from_secs(10)).expect("exit").success());

        // The same history, read back from disk, plus the new message.
        let config = w._env.dir.path().join("config.json");
        w.kiwi = w._env.spawn(&config, &["--yolo", "--continue"]);
        let (_, resp) = w.kiwi.prompt("p2", json!("Thanks, bye"));
        assert_eq!(resp["result"], json!({"status": "finished"}), "{}", p.kind);
        let requests = w.mock.requests();
        assert_eq!(requests.len(), 3, "{}", p.kind);
        let before = history_of(p, &requests[1].json());
        let after = history_of(p, &requests[2].json());
        assert_eq!(after[..before.len()], before[..], "{}: history after --continue", p.kind);
        let rest = all_text(&Value::Array(after[before.len()..].to_vec()));
        let answer = all_text(&expected(text_fixture, p.expected_as)["message"]["content"]);
        assert!(rest.contains(&answer) && rest.contains("Thanks, bye"), "{}: {rest}", p.kind);
    }
}

// ---- malformed streams and shutdown ----

#[test]
fn torn_json_event_at_the_end_fails_the_turn() {
    // The body ends cleanly (terminating chunk sent) in the middle of a JSON event.
    let mut body = String::from_utf8(mock_llm::fixture("kimi-text.sse")).unwrap();
    let cut = body.find("\n\ndata: ").unwrap() + 2;
    let next = body[cut..].find("\n\n").unwrap() + cut;
    body.truncate(next - 20);
    let mut w = world(KIMI, vec![MockResponse::sse(body)], &[], &[]);
    let (events, message) = failing_turn(&mut w);
    assert!(!message.is_empty());
    assert_eq!(types(&events).last().map(String::as_str), Some("TurnEnd"));
    assert_recovers(&mut w, "kimi-text.sse");
}

#[test]
fn a_stream_without_done_still_completes() {
    let body = String::from_utf8(mock_llm::fixture("kimi-text.sse")).unwrap().replace("data: [DONE]\n\n", "");
    let mut w = world(KIMI, vec![MockResponse::sse(body)], &[], &[]);
    let (events, resp) = w.kiwi.prompt("p1", json!("hi"));
    assert_eq!(resp["result"], json!({"status": "finished"}), "{:?}", types(&events));
    let exp = expected("kimi-text.sse", "kimi");
    let status = events.iter().find(|e| e["params"]["type"] == "StatusUpdate").unwrap();
    assert_eq!(payload(status)["token_usage"], exp["usage"]);
}

#[test]
fn eof_during_a_slow_request_exits_promptly() {
    let mut w = world(
        KIMI,
        vec![MockResponse::sse_fixture("kimi-text.sse").first_byte_delay(Duration::from_secs(30))],
        &[],
        &[],
    );
    w.kiwi.send(json!({"jsonrpc": "2.0", "id": "p1", "method": "prompt", "params": {"user_input": "hi"}}));
    let deadline = Instant::now() + Duration::from_secs(10);
    while w.mock.request_count() == 0 {
        assert!(Instant::now() < deadline, "the request never reached the mock");
        std::thread::sleep(Duration::from_millis(10));
    }
    w.kiwi.close_stdin();
    let status = w.kiwi.wait_exit(Duration::from_secs(5)).expect("kiwi exits after EOF, without waiting for the LLM");
    assert!(status.success(), "{status:?}");
    assert!(w.rt.block_on(w.mock.wait_disconnects(1, Duration::from_secs(5))));
}

// ---- media in tool results ----

#[test]
fn image_tool_results_reach_each_provider() {
    use base64::Engine as _;
    let png = base64::engine::general_purpose::STANDARD.decode(PNG).unwrap();
    // The tool-call fixtures, turned into a ReadMediaFile call on `pic.png`.
    let to_read_media = |fixture: &str| {
        String::from_utf8(mock_llm::fixture(fixture))
            .unwrap()
            .replace("\"Shell\"", "\"ReadMediaFile\"")
            .replace("{\\\"command\\\": \\\"ls -la\\\"}", "{\\\"path\\\": \\\"pic.png\\\"}")
            .replace("{\\\"command\\\": \\\"ls\\\"}", "{\\\"path\\\": \\\"pic.png\\\"}")
            .replace("{\\\"command\\\": ", "{\\\"path\\\": ")
            .replace("{\\\"command\\\":", "{\\\"path\\\":")
            .replace("\\\"ls -la\\\"}", "\\\"pic.png\\\"}")
            .replace(" \\\"ls\\\"}", " \\\"pic.png\\\"}")
            .replace("{\"command\": \"ls -la\"}", "{\"path\": \"pic.png\"}")
    };
    for (p, tool_fixture, text_fixture) in [
        (KIMI, "kimi-reasoning-and-toolcall.sse", "kimi-text.sse"),
        (OPENAI_RESPONSES, "openai-responses-reasoning-toolcall.sse", "openai-responses-failed.sse"),
        (ANTHROPIC, "anthropic-thinking-toolcall.sse", "anthropic-text.sse"),
        (GEMINI, "gemini-thinking-functioncall.sse", "gemini-text.sse"),
    ] {
        let body = to_read_media(tool_fixture);
        assert!(body.contains("pic.png") && !body.contains("command"), "{}: {body}", p.kind);
        let mut w = world(
            p,
            vec![MockResponse::sse(body), MockResponse::sse_fixture(text_fixture)],
            &["image_in"],
            &["--yolo"],
        );
        std::fs::write(w._env.work().join("pic.png"), &png).unwrap();
        let (events, resp) = w.kiwi.prompt("p1", json!("look at pic.png"));
        assert_eq!(resp["result"], json!({"status": "finished"}), "{}: {:?}", p.kind, types(&events));
        let result = events.iter().find(|e| e["params"]["type"] == "ToolResult").unwrap();
        assert_eq!(payload(result)["return_value"]["is_error"], false, "{}: {result}", p.kind);
        let history = history_of(p, &w.mock.requests()[1].json());
        let tool_item = history.last().unwrap();
        let data = if p.kind == "gemini" { PNG.replace('+', "-").replace('/', "_") } else { PNG.to_string() };
        assert!(all_text(tool_item).contains(&data), "{}: image missing from {tool_item}", p.kind);
        let marker = match p.kind {
            "kimi" => r#"{"type":"image_url","image_url":{"url":"data:image/png;base64,"#,
            "openai_responses" => r#"{"type":"input_image","image_url":"data:image/png;base64,"#,
            "anthropic" => r#"{"type":"image","source":{"type":"base64","data":"#,
            _ => r#""parts":[{"inlineData":{"data":"#,
        };
        assert!(tool_item.to_string().contains(marker), "{}: {tool_item}", p.kind);
    }
}

/// `docs/soul.md` §7.2: arguments to `/compact` are ignored in 1.2 (custom compaction instructions
/// are a later-version feature), so they never reach the compaction request.
#[test]
fn compact_arguments_become_the_summary_focus() {
    // The last response repeats: both prompts and the compaction call get the same text.
    let mut w = world(KIMI, vec![MockResponse::sse_fixture("kimi-text.sse")], &[], &[]);
    w.kiwi.prompt("p1", json!("first"));
    w.kiwi.prompt("p2", json!("second"));
    let (events, resp) = w.kiwi.prompt("p3", json!("/compact ZEBRA-FOCUS-WORDS"));
    assert_eq!(resp["result"], json!({"status": "finished"}), "{:?}", types(&events));
    assert_eq!(types(&events)[..3], ["TurnBegin", "CompactionBegin", "CompactionEnd"]);
    let requests = w.mock.requests();
    assert_eq!(requests.len(), 3);
    let body = requests[2].json().to_string();
    // Protocol 1.2 ignores the argument; kiwi (as later versions) passes it on as the focus.
    assert!(body.contains("ZEBRA-FOCUS-WORDS"), "the /compact focus did not reach the LLM: {body}");
}

/// `docs/providers.md` §3.8: with the kimi provider a video read by ReadMediaFile is uploaded to
/// `POST {base}/files` (multipart, purpose `video`) and referenced as `ms://<id>`.
#[test]
fn kimi_uploads_videos_and_references_them_by_id() {
    let body = String::from_utf8(mock_llm::fixture("kimi-reasoning-and-toolcall.sse"))
        .unwrap()
        .replace("\"Shell\"", "\"ReadMediaFile\"")
        .replace("{\\\"command\\\": ", "{\\\"path\\\": ")
        .replace("{\\\"command\\\":", "{\\\"path\\\":")
        .replace("\\\"ls -la\\\"}", "\\\"clip.mp4\\\"}")
        .replace(" \\\"ls\\\"}", " \\\"clip.mp4\\\"}");
    assert!(body.contains("clip.mp4"), "{body}");
    let mut w = world(
        KIMI,
        vec![
            MockResponse::sse(body),
            MockResponse::json(200, r#"{"id":"file-video-42","object":"file","purpose":"video"}"#),
            MockResponse::sse_fixture("kimi-text.sse"),
        ],
        &["video_in"],
        &["--yolo"],
    );
    let mut video = b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2".to_vec();
    video.extend_from_slice(&[0u8; 64]);
    std::fs::write(w._env.work().join("clip.mp4"), &video).unwrap();
    let (events, resp) = w.kiwi.prompt("p1", json!("watch clip.mp4"));
    assert_eq!(resp["result"], json!({"status": "finished"}), "{:?}", types(&events));
    let result = events.iter().find(|e| e["params"]["type"] == "ToolResult").unwrap();
    assert_eq!(payload(result)["return_value"]["is_error"], false, "{result}");
    assert_eq!(payload(result)["return_value"]["output"][1]["video_url"]["url"], "ms://file-video-42");
    let requests = w.mock.requests();
    assert_eq!(requests.len(), 3);
    let upload = &requests[1];
    assert_eq!((upload.method.as_str(), upload.path.as_str()), ("POST", "/v1/files"));
    assert!(upload.header("content-type").unwrap_or_default().starts_with("multipart/form-data; boundary="));
    assert_eq!(upload.header("authorization"), Some("Bearer sk-mock-key"));
    let form = String::from_utf8_lossy(&upload.body);
    assert!(form.contains("name=\"purpose\"\r\n\r\nvideo\r\n"), "{form}");
    assert!(form.contains("name=\"file\"; filename=\"upload.mp4\"\r\nContent-Type: video/mp4\r\n"), "{form}");
    assert!(requests[2].json().to_string().contains("ms://file-video-42"));
}

/// One log line per LLM request (URL, status, duration, retry), each retry with its
/// wait, and no secret in the log.
#[test]
fn llm_requests_and_retries_are_logged_without_secrets() {
    let mut w = world(
        KIMI,
        vec![MockResponse::json_fixture(429, "kimi-error-429.json"), MockResponse::sse_fixture("kimi-text.sse")],
        &[],
        &[],
    );
    let (_, resp) = w.kiwi.prompt("p1", json!("hi"));
    assert_eq!(resp["result"], json!({"status": "finished"}));
    w.kiwi.close_stdin();
    w.kiwi.wait_exit(Duration::from_secs(5));
    let log = std::fs::read_to_string(w._env.share().join("logs/kiwi.log")).unwrap();
    let url = format!("{}/v1/chat/completions", w.mock.base_url());
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("LLM request") || l.contains("retrying")).collect();
    assert_eq!(lines.len(), 3, "{log}");
    assert!(
        lines[0].contains(&format!("LLM request POST {url}: failed in "))
            && lines[0].contains("(retry 0): Error code: 429")
    );
    assert!(
        lines[1].contains("retrying the LLM request in ") && lines[1].ends_with(" s (1 of 2 retries)"),
        "{}",
        lines[1]
    );
    assert!(lines[2].contains(&format!("LLM request POST {url}: 200 OK in ")) && lines[2].ends_with("(retry 1)"));
    assert!(!log.contains("sk-mock-key"), "the API key reached the log");
}

/// The wire has no word for a cut answer: a turn whose answer hit the token limit is `finished`
/// as before (only ACP and Claude print report the reason).
#[test]
fn a_cut_answer_still_finishes_on_the_wire() {
    let sse = [
        ("message_start", json!({"type": "message_start", "message": {"id": "msg_1", "usage": {"input_tokens": 5}}})),
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ),
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "half"}}),
        ),
        ("content_block_stop", json!({"type": "content_block_stop", "index": 0})),
        (
            "message_delta",
            json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": 9}}),
        ),
        ("message_stop", json!({"type": "message_stop"})),
    ];
    let body: String = sse.iter().map(|(event, data)| format!("event: {event}\ndata: {data}\n\n")).collect();
    let mut w = world(ANTHROPIC, vec![MockResponse::sse(body)], &[], &[]);
    let (events, resp) = w.kiwi.prompt("p1", json!("hi"));
    assert_eq!(resp["result"], json!({"status": "finished"}), "{:?}", types(&events));
    // The block's empty start and its delta: two parts, then nothing new before `TurnEnd`.
    assert_eq!(types(&events), ["TurnBegin", "StepBegin", "ContentPart", "ContentPart", "StatusUpdate", "TurnEnd"]);
}
