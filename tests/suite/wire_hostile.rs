//! A hostile or buggy client: races, odd ids and payloads, floods, signals, a client that stops
//! reading. The server must answer every request once, keep serving, print only JSON on stdout,
//! stay bounded in memory, and exit 0 (promptly) on EOF or a signal.

use crate::common;

use std::io::{Read, Write};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{Env, Kiwi, types};
use serde_json::{Value, json};

fn tool_call(id: &str, name: &str, arguments: Value) -> String {
    format!("tool_call: {}", json!({"id": id, "name": name, "arguments": arguments}))
}

fn shell(id: &str, command: &str) -> String {
    tool_call(id, "Shell", json!(serde_json::to_string(&json!({ "command": command })).unwrap()))
}

fn request(id: Value, method: &str, params: Value) -> String {
    serde_json::to_string(&json!({"jsonrpc":"2.0","id":id,"method":method,"params":params})).unwrap()
}

/// Proves the server still serves, then closes stdin and expects exit 0 with only JSON seen.
fn still_serving_then_eof(k: &mut Kiwi) {
    let init = k.initialize();
    assert_eq!(init["result"]["protocol_version"], "1.10", "{init}");
    k.close_stdin();
    while k.next_within(Duration::from_secs(5)).is_some() {}
    let status = k.wait_exit(Duration::from_secs(10)).expect("exit after EOF");
    assert!(status.success(), "{status:?}");
    assert!(k.raw.is_empty(), "non-JSON on stdout: {:?}", k.raw);
}

/// Reads every message until the responses to all `ids` arrived; asserts each came exactly once.
fn responses_for(k: &mut Kiwi, ids: &[Value]) -> Vec<Value> {
    let mut got: Vec<Value> = Vec::new();
    while ids.iter().any(|id| !got.iter().any(|r| &r["id"] == id)) {
        let m = k.next();
        if m.get("method").is_none() {
            assert!(!got.iter().any(|r| r["id"] == m["id"]), "second response for {}", m["id"]);
            got.push(m);
        }
    }
    got
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// A server whose stdout nobody reads (the pipe fills up and stays full).
fn spawn_unread(env: &Env, config: &std::path::Path, args: &[&str]) -> Child {
    let mut cmd = env.command(config, args);
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null());
    cmd.spawn().expect("spawn kiwi")
}

fn wait_child(child: &mut Child, timeout: Duration) -> Option<std::process::ExitStatus> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

fn signal(pid: u32, sig: i32) {
    // SAFETY: plain kill(2) on a child we spawned and have not reaped.
    unsafe { libc::kill(pid as i32, sig) };
}

/// A turn long enough to fill any pipe: 20,000 parts of about 1 KB.
fn long_turn() -> String {
    (0..20_000).map(|i| format!("text: {}{i}", "y".repeat(1000))).collect::<Vec<_>>().join("\n")
}

#[test]
fn prompt_and_cancels_in_one_write_are_each_answered_once() {
    let env = Env::new();
    let config = env.scripted_config(&["text: one", "text: two"]);
    let mut k = env.spawn(&config, &[]);
    let batch = [
        request(json!("p1"), "prompt", json!({"user_input":"go"})),
        request(json!("c1"), "cancel", json!({})),
        request(json!("c2"), "cancel", json!({})),
        request(json!("p2"), "prompt", json!({"user_input":"again"})),
        request(json!(7), "interrupt", json!({})),
    ]
    .join("\n");
    k.send_raw(&batch);
    let ids = [json!("p1"), json!("c1"), json!("c2"), json!("p2"), json!(7)];
    let got = responses_for(&mut k, &ids);
    let p1 = got.iter().find(|r| r["id"] == "p1").unwrap();
    assert!(p1["result"]["status"] == "cancelled" || p1["result"]["status"] == "finished", "{p1}");
    // Nothing more for these ids shows up later.
    while let Some(m) = k.next_within(Duration::from_millis(500)) {
        assert!(m.get("method").is_some(), "unexpected extra response {m}");
    }
    still_serving_then_eof(&mut k);
}

#[test]
fn cancel_then_prompt_at_once_then_a_normal_turn() {
    let env = Env::new();
    let config = env.scripted_config(&[&shell("tc-1", "echo hi"), "text: after"]);
    let mut k = env.spawn(&config, &[]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    k.until_request();
    // interrupt as a notification during the approval, then cancel + prompt in one write.
    k.send_raw(r#"{"jsonrpc":"2.0","method":"interrupt"}"#);
    let batch = [request(json!("c"), "cancel", json!(null)), request(json!("p1"), "prompt", json!({"user_input":"x"}))]
        .join("\n");
    k.send_raw(&batch);
    let got = responses_for(&mut k, &[json!("p0"), json!("c"), json!("p1")]);
    let p0 = got.iter().find(|r| r["id"] == "p0").unwrap();
    assert_eq!(p0["result"]["status"], "cancelled");
    // p1 raced the unwinding turn: either busy or a real turn, but answered once.
    let p1 = got.iter().find(|r| r["id"] == "p1").unwrap();
    assert!(p1["error"]["code"] == -32000 || p1["result"]["status"] == "finished", "{p1}");
    still_serving_then_eof(&mut k);
}

#[test]
fn odd_answers_to_an_approval_never_confuse_the_server() {
    let env = Env::new();
    let config = env.scripted_config(&[&shell("tc-1", "touch never-approved"), "text: done"]);
    let mut k = env.spawn(&config, &[]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let (_, req) = k.until_request();
    let rid = req["id"].clone();
    // A request that reuses the pending id but has a method is a request, not an answer.
    k.send(json!({"jsonrpc":"2.0","id":rid,"method":"bogus"}));
    let e = k.next();
    assert_eq!((e["id"].clone(), e["error"]["code"].clone()), (rid.clone(), json!(-32601)));
    // Answers with integer ids (one out of range) and unknown ids are ignored / rejected.
    k.send_raw(r#"{"jsonrpc":"2.0","id":-5,"result":{}}"#);
    k.send_raw(r#"{"jsonrpc":"2.0","id":"not-pending","result":{"request_id":"x","response":"approve"}}"#);
    k.send_raw(r#"{"jsonrpc":"2.0","id":18446744073709551616,"result":{}}"#);
    assert_eq!(k.next()["error"]["code"], -32600);
    // A ToolCallRequest-shaped result for an approval counts as reject; the later approve is late.
    let tool_result =
        json!({"tool_call_id":"tc-1","return_value":{"is_error":false,"output":"x","message":"","display":[]}});
    k.send(json!({"jsonrpc":"2.0","id":rid,"result":tool_result}));
    k.send(json!({"jsonrpc":"2.0","id":rid,"result":{"request_id":rid,"response":"approve"}}));
    let (events, response) = k.until_response(&json!("p0"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(types(&events), ["ApprovalResponse", "ToolResult", "TurnEnd"]);
    assert_eq!(events[0]["params"]["payload"]["response"], "reject");
    assert!(!env.work().join("never-approved").exists());
    // And the answer of a finished request, once more.
    k.send(json!({"jsonrpc":"2.0","id":rid,"result":{"request_id":rid,"response":"approve"}}));
    still_serving_then_eof(&mut k);
}

#[test]
fn approval_result_for_an_external_tool_call_is_an_invalid_result() {
    let env = Env::new();
    let config = env.scripted_config(&[&tool_call("ext-1", "ext", json!("{}")), "text: done"]);
    let mut k = env.spawn(&config, &[]);
    let tools = json!([{"name":"ext","description":"","parameters":{"type":"object"}}]);
    k.call("i", "initialize", json!({"protocol_version":"1.2","external_tools":tools}));
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let (_, req) = k.until_request();
    assert_eq!(req["params"]["type"], "ToolCallRequest");
    k.send(json!({"jsonrpc":"2.0","id":req["id"],"result":{"request_id":req["id"],"response":"approve"}}));
    let (events, response) = k.until_response(&json!("p0"));
    assert_eq!(response["result"]["status"], "finished");
    let result = events.iter().find(|m| m["params"]["type"] == "ToolResult").unwrap();
    assert_eq!(result["params"]["payload"]["return_value"]["message"], "Invalid tool result payload from client.");
    still_serving_then_eof(&mut k);
}

#[test]
fn eof_right_after_a_prompt_exits_zero() {
    let env = Env::new();
    let config = env.scripted_config(&[&shell("tc-1", "echo hi")]);
    let mut k = env.spawn(&config, &[]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    k.close_stdin();
    let status = k.wait_exit(Duration::from_secs(10)).expect("exit after EOF");
    assert!(status.success());
    while k.next_within(Duration::from_millis(200)).is_some() {}
    assert!(k.raw.is_empty(), "{:?}", k.raw);
}

#[test]
fn odd_ids_are_echoed_with_their_type() {
    let env = Env::new();
    let config = env.scripted_config(&[]);
    let mut k = env.spawn(&config, &[]);
    let long = "i".repeat(100_000);
    let ids = [
        json!(""),
        json!(long),
        json!("ünï😀\u{2028}"),
        json!("\u{0}"),
        json!(-1),
        json!(i64::MAX),
        json!(i64::MIN),
        json!(0),
    ];
    for id in &ids {
        k.send_raw(&request(id.clone(), "cancel", json!(null)));
        let r = k.next();
        assert_eq!(&r["id"], id);
        assert_eq!(r["error"]["code"], -32000);
    }
    // Numbers that are not i64 ids: a clear -32600 with id null.
    for id in ["18446744073709551615", "1.0", "1e3"] {
        k.send_raw(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"cancel"}}"#));
        assert_eq!(
            k.next(),
            json!({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid request","data":null}})
        );
    }
    still_serving_then_eof(&mut k);
}

#[test]
fn odd_payloads_and_framing_keep_the_server_serving() {
    let env = Env::new();
    let config = env.scripted_config(&["text: a", "text: b"]);
    let mut k = env.spawn(&config, &[]);
    let parse_error =
        json!({"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Invalid JSON format","data":null}});
    // 10,000 levels of nesting, arrays and objects.
    k.send_bytes(format!("{}{}\n", "[".repeat(10_000), "]".repeat(10_000)).as_bytes());
    assert_eq!(k.next(), parse_error);
    k.send_bytes(format!("{}1{}\n", "{\"a\":".repeat(10_000), "}".repeat(10_000)).as_bytes());
    assert_eq!(k.next(), parse_error);
    // A BOM is not whitespace; out-of-range numbers do not parse.
    k.send_bytes(b"\xef\xbb\xbf{\"jsonrpc\":\"2.0\",\"id\":\"bom\",\"method\":\"cancel\"}\n");
    assert_eq!(k.next(), parse_error);
    k.send_raw(r#"{"jsonrpc":"2.0","id":"big","method":"cancel","params":{"n":1e400}}"#);
    assert_eq!(k.next(), parse_error);
    // Duplicate keys: the last one wins. CRLF endings. Many blank lines (each a parse error).
    k.send_raw(r#"{"jsonrpc":"2.0","id":"d1","id":"d2","method":"cancel"}"#);
    assert_eq!(k.next()["id"], "d2");
    k.send_bytes(b"{\"jsonrpc\":\"2.0\",\"id\":\"crlf\",\"method\":\"cancel\"}\r\n");
    assert_eq!(k.next()["id"], "crlf");
    k.send_bytes(&b"\n".repeat(500));
    for _ in 0..500 {
        assert_eq!(k.next(), parse_error);
    }
    // NUL inside a string, 100-level nested extra params, and 100,000 content parts.
    k.send_raw(&request(json!("nul"), "prompt", json!({"user_input":"a\u{0}b","x":[[[[[[[[[[{}]]]]]]]]]]})));
    assert_eq!(k.until_response(&json!("nul")).1["result"]["status"], "finished");
    let parts: Vec<Value> = (0..100_000).map(|i| json!({"type":"text","text":format!("p{i}")})).collect();
    k.send_raw(&request(json!("parts"), "prompt", json!({ "user_input": parts })));
    let (events, response) = k.until_response(&json!("parts"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(events[0]["params"]["payload"]["user_input"].as_array().unwrap().len(), 100_000);
    // A final line without a newline before EOF is still served.
    k.send_bytes(br#"{"jsonrpc":"2.0","id":"last","method":"cancel"}"#);
    k.close_stdin();
    assert_eq!(k.next()["id"], "last");
    assert!(k.wait_exit(Duration::from_secs(10)).expect("exit").success());
    assert!(k.raw.is_empty(), "{:?}", k.raw);
}

/// Regression: `"\ud800"` (what Python's json.dumps makes of a surrogate-escaped name) is valid
/// JSON; it was answered -32700 with id null, so the prompt never got its own response.
#[test]
fn lone_surrogate_escapes_are_served_with_replacement_characters() {
    let env = Env::new();
    let config = env.scripted_config(&["text: ok"]);
    let mut k = env.spawn(&config, &[]);
    k.send_raw(r#"{"jsonrpc":"2.0","id":"s","method":"prompt","params":{"user_input":"a\ud800b\udfffc\ud83d\ude00"}}"#);
    let (events, response) = k.until_response(&json!("s"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(events[0]["params"]["payload"]["user_input"], "a\u{fffd}b\u{fffd}c\u{1f600}");
    still_serving_then_eof(&mut k);
}

#[test]
fn hostile_external_tools_and_results() {
    let env = Env::new();
    let config = env.scripted_config(&[
        &tool_call("t1", "ext0", json!(r#"{"a":1}"#)),
        "text: ok1",
        &tool_call("t2", "ext1", json!("{}")),
        "text: ok2",
    ]);
    let mut k = env.spawn(&config, &[]);
    let mut tools: Vec<Value> = (0..1000)
        .map(|i| json!({"name":format!("ext{i}"),"description":"d","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}))
        .collect();
    // Remote references are never fetched: the tool is rejected with a reason.
    tools.push(json!({"name":"remote","description":"","parameters":{"$ref":"http://127.0.0.1:9/schema.json"}}));
    tools.push(json!({"name":"Shell","description":"","parameters":{}}));
    let (_, init) = k.call("i", "initialize", json!({"protocol_version":"1.2","external_tools":tools}));
    let outcome = &init["result"]["external_tools"];
    assert_eq!(outcome["accepted"].as_array().unwrap().len(), 1000);
    let rejected: Vec<&str> =
        outcome["rejected"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(rejected, ["remote", "Shell"]);

    // A 10 MB output with display blocks of unknown types and nested data.
    k.send(json!({"jsonrpc":"2.0","id":"p1","method":"prompt","params":{"user_input":"go"}}));
    let (_, req) = k.until_request();
    let big = "x".repeat(10 * 1024 * 1024);
    let display = json!([{"type":"weird","nested":{"a":[1,{"b":null}]}},{"type":"brief","text":"b"}]);
    k.send(json!({"jsonrpc":"2.0","id":req["id"],"result":{"tool_call_id":"t1","return_value":{"is_error":false,"output":big,"message":"","display":display}}}));
    let (events, response) = k.until_response(&json!("p1"));
    assert_eq!(response["result"]["status"], "finished");
    let result = &events.iter().find(|m| m["params"]["type"] == "ToolResult").unwrap()["params"]["payload"];
    assert_eq!(result["return_value"]["output"].as_str().unwrap().len(), big.len());
    assert_eq!(result["return_value"]["display"][0], json!({"type":"weird","data":{"nested":{"a":[1,{"b":null}]}}}));

    // An output list with an unknown part type is an invalid result, not a crash.
    k.send(json!({"jsonrpc":"2.0","id":"p2","method":"prompt","params":{"user_input":"go"}}));
    let (_, req) = k.until_request();
    let output = json!([{"type":"bogus","x":1},{"type":"text","text":"t"}]);
    k.send(json!({"jsonrpc":"2.0","id":req["id"],"result":{"tool_call_id":"t2","return_value":{"is_error":false,"output":output,"message":"","display":[]}}}));
    let (events, response) = k.until_response(&json!("p2"));
    assert_eq!(response["result"]["status"], "finished");
    let result = &events.iter().find(|m| m["params"]["type"] == "ToolResult").unwrap()["params"]["payload"];
    assert_eq!(result["return_value"]["message"], "Invalid tool result payload from client.");
    still_serving_then_eof(&mut k);
}

#[test]
fn scripts_with_thousands_of_calls_and_broken_calls() {
    let env = Env::new();
    let many: Vec<String> = (0..5000)
        .map(|i| tool_call(&format!("c{i}"), if i % 2 == 0 { "SetTodoList" } else { "Nope" }, json!(r#"{"todos":[]}"#)))
        .collect();
    let long_name = "N".repeat(10 * 1024);
    let broken = [
        tool_call("a", "ReadFile", json!("{not json")),
        tool_call("b", "", json!("{}")),
        tool_call("c", &long_name, json!("{}")),
        tool_call("d", "ReadFile", json!("[1,2]")),
        tool_call("e", "ReadFile", Value::Null),
        tool_call("f", "Shell", json!(r#"{"command":5}"#)),
    ]
    .join("\n");
    let config = env.scripted_config(&[&many.join("\n"), "text: ok", &broken, "text: ok2"]);
    let mut k = env.spawn(&config, &[]);
    let (events, response) = k.prompt("p1", json!("go"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(types(&events).iter().filter(|t| *t == "ToolResult").count(), 5000);
    let (events, response) = k.prompt("p2", json!("go"));
    assert_eq!(response["result"]["status"], "finished");
    let results: Vec<&Value> = events.iter().filter(|m| m["params"]["type"] == "ToolResult").collect();
    assert_eq!(results.len(), 6);
    assert!(results.iter().all(|r| r["params"]["payload"]["return_value"]["is_error"] == true));
    still_serving_then_eof(&mut k);
}

#[test]
fn sigterm_and_sigint_while_an_approval_is_pending_exit_zero() {
    for sig in [libc::SIGTERM, libc::SIGINT] {
        let env = Env::new();
        let config = env.scripted_config(&[&shell("tc-1", "touch signalled")]);
        let mut k = env.spawn(&config, &[]);
        k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
        k.until_request();
        signal(k.child.id(), sig);
        let status = k.wait_exit(Duration::from_secs(10)).expect("exit after a signal");
        assert!(status.success(), "{status:?}");
        while k.next_within(Duration::from_millis(200)).is_some() {}
        assert!(k.raw.is_empty());
        assert!(!env.work().join("signalled").exists());
    }
}

#[test]
fn closing_stdout_mid_stream_exits_promptly() {
    let env = Env::new();
    let script = (0..20_000).map(|i| format!("text: part{i}")).collect::<Vec<_>>().join("\n");
    let config = env.scripted_config(&[&script]);
    let mut child = spawn_unread(&env, &config, &[]);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(format!("{}\n", request(json!("p"), "prompt", json!({"user_input":"go"}))).as_bytes()).unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut head = vec![0u8; 10_000];
    stdout.read_exact(&mut head).unwrap();
    drop(stdout);
    let status = wait_child(&mut child, Duration::from_secs(10)).expect("exit after stdout closed");
    assert!(status.success(), "{status:?}");
}

/// Regression: with a client that stopped reading stdout, SIGTERM / SIGINT / EOF hung forever
/// (the dispatcher or the shutdown flush waited on a writer that could never write).
#[test]
fn a_client_that_stopped_reading_cannot_keep_the_server_alive() {
    let env = Env::new();
    let config = env.scripted_config(&[&long_turn()]);
    // A turn streaming into a full pipe, then a signal.
    for sig in [Some(libc::SIGTERM), Some(libc::SIGINT), None] {
        let mut child = spawn_unread(&env, &config, &[]);
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(format!("{}\n", request(json!("p"), "prompt", json!({"user_input":"go"}))).as_bytes()).unwrap();
        std::thread::sleep(Duration::from_millis(500));
        match sig {
            Some(sig) => signal(child.id(), sig),
            None => drop(stdin),
        }
        let status = wait_child(&mut child, Duration::from_secs(15));
        assert!(status.is_some_and(|s| s.success()), "{sig:?}: {status:?}");
    }
    // An idle server whose replies to a flood of requests fill the pipe, then a signal.
    let mut child = spawn_unread(&env, &config, &[]);
    let mut stdin = child.stdin.take().unwrap();
    let flood = std::thread::spawn(move || {
        let line = format!("{}\n", request(json!("c".repeat(1000)), "cancel", json!(null)));
        for _ in 0..3000 {
            if stdin.write_all(line.as_bytes()).is_err() {
                break;
            }
        }
    });
    std::thread::sleep(Duration::from_millis(1500));
    signal(child.id(), libc::SIGTERM);
    let status = wait_child(&mut child, Duration::from_secs(15));
    assert!(status.is_some_and(|s| s.success()), "{status:?}");
    flood.join().unwrap();
}

/// Regression: big lines sent by a client that does not read replies were queued 256 deep, so
/// memory grew by gigabytes; the inbound queue is now bounded in bytes too.
#[test]
fn flooding_big_lines_without_reading_keeps_memory_bounded() {
    let env = Env::new();
    let config = env.scripted_config(&[&long_turn()]);
    let mut child = spawn_unread(&env, &config, &[]);
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(format!("{}\n", request(json!("p"), "prompt", json!({"user_input":"go"}))).as_bytes()).unwrap();
    let line = format!("{}\n", request(json!("q"), "prompt", json!({"user_input": "z".repeat(20 * 1024 * 1024)})));
    let flood = std::thread::spawn(move || {
        for _ in 0..40 {
            if stdin.write_all(line.as_bytes()).is_err() {
                break;
            }
        }
    });
    // 800 MB offered; the server may hold the byte budget plus a line or two, not all of it.
    let deadline = Instant::now() + Duration::from_secs(6);
    let mut peak = 0;
    while Instant::now() < deadline {
        peak = peak.max(rss_kib(pid));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(peak > 0);
    assert!(peak < 450 * 1024, "RSS grew to {} MiB", peak / 1024);
    let _ = child.kill();
    let _ = child.wait();
    flood.join().unwrap();
}

/// A slow client that reads its backlog only after closing stdin still gets whole JSON lines,
/// and the server exits 0.
#[test]
fn backlog_read_after_eof_is_whole_json_lines() {
    let env = Env::new();
    let script = (0..20_000).map(|i| format!("text: part{i}")).collect::<Vec<_>>().join("\n");
    let config = env.scripted_config(&[&script]);
    let mut child = spawn_unread(&env, &config, &[]);
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(format!("{}\n", request(json!("p"), "prompt", json!({"user_input":"go"}))).as_bytes()).unwrap();
    // Close stdin once a backlog has built up in the pipe (a loaded machine may take longer than
    // any fixed sleep to start the turn; closing earlier ends the session before it).
    let stdout = child.stdout.take().unwrap();
    let waiting = |fd: i32| {
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int through the pointer; the fd is our open pipe end.
        unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) };
        n
    };
    let started = std::time::Instant::now();
    while waiting(std::os::fd::AsRawFd::as_raw_fd(&stdout)) < 32 * 1024 && started.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(stdin);
    let mut out = String::new();
    let mut stdout = stdout;
    stdout.read_to_string(&mut out).unwrap();
    let status = wait_child(&mut child, Duration::from_secs(10)).expect("exit");
    assert!(status.success());
    assert!(out.ends_with('\n'));
    for line in out.lines() {
        let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        assert!(v.is_object());
    }
    assert!(out.lines().count() > 100);
}
