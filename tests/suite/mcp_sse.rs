//! MCP servers over the legacy SSE transport (`docs/subcommands.md` §2.2, §2.7, §2.8, §1.5): kiwi
//! talks to the MCP test server's `--sse` mode over the wire and in `kiwi mcp test`; tool calls,
//! headers and tokens, and every way a connection or a call can fail without hanging.

use crate::common;

use crate::mcp;

use std::time::{Duration, Instant};

use common::{Env, types};
use mcp::{approve, call, payloads, tool_results};

fn kiwi(share: &std::path::Path, args: &[&str]) -> std::process::Output {
    mcp::subcommand(share, args, &[])
}
use serde_json::{Value, json};

/// The statuses of the closing `mcp_status` of a turn's loading bracket.
fn states(events: &[Value]) -> Vec<String> {
    let last = &payloads(events, "StatusUpdate")[1]["mcp_status"];
    last["servers"].as_array().unwrap().iter().map(|s| s["status"].as_str().unwrap().to_string()).collect()
}

/// The server's URL with another path (same origin).
fn with_path(url: &str, path: &str) -> String {
    format!("{}{path}", url.strip_suffix("/sse").unwrap())
}

#[test]
fn a_tool_call_round_trip_over_an_inferred_sse_url() {
    let server = mcp::HttpServer::start_sse(&[]);
    assert!(server.url.ends_with("/sse"), "{}", server.url);
    let env = Env::new();
    let config = env.scripted_config_with(
        &[&call("c1", "echo", json!({"text": "over sse"})), &call("c2", "image", json!({})), "text: done"],
        json!({"models": {"scripted": {"capabilities": ["image_in"]}}}),
    );
    // No `transport`: the `/sse` path makes it SSE.
    let servers = mcp::config_arg(&[("srv", json!({"url": server.url}))]);
    let mut k = env.spawn(&config, &["--mcp-config", &servers]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let (before, request) = k.until_request();
    assert_eq!(types(&before)[..5], ["TurnBegin", "StatusUpdate", "MCPLoadingBegin", "StatusUpdate", "MCPLoadingEnd"]);
    let last = &payloads(&before, "StatusUpdate")[1]["mcp_status"];
    assert_eq!(
        (last["loading"].as_bool(), last["connected"].as_u64(), last["total"].as_u64(), last["tools"].as_u64()),
        (Some(false), Some(1), Some(1), Some(9))
    );
    assert_eq!(last["servers"][0]["name"], "srv");
    assert_eq!(last["servers"][0]["status"], "connected");
    assert_eq!(last["servers"][0]["tools"][0], "echo");
    // Approval as for every MCP tool.
    let payload = &request["params"]["payload"];
    assert_eq!((payload["sender"].as_str(), payload["action"].as_str()), (Some("echo"), Some("mcp:echo")));
    assert_eq!(payload["description"], "Call MCP tool `echo`.");
    approve(&mut k, &request);
    let (mut events, request) = k.until_request();
    approve(&mut k, &request);
    let (rest, response) = k.until_response(&json!("p0"));
    assert_eq!(response["result"]["status"], "finished");
    events.extend(rest);
    let results = tool_results(&events);
    assert_eq!(
        results[0],
        json!({"is_error": false, "output": [{"type": "text", "text": "pong:over sse"}], "message": "", "display": [], "extras": null})
    );
    assert!(results[1]["output"][0]["image_url"]["url"].as_str().unwrap().starts_with("data:image/png;base64,"));
    assert_eq!(results[1]["output"][1]["text"], "a picture");
}

#[test]
fn headers_and_a_bearer_token_reach_the_server() {
    let bearer = mcp::HttpServer::start_sse(&["--require-header", "authorization:Bearer tok"]);
    let team = mcp::HttpServer::start_sse(&["--require-header", "x-team:kiwi"]);
    let env = Env::new();
    let config = env.scripted_config(&[&call("c1", "echo", json!({"text": "auth"})), "text: done"]);
    // An explicit transport on a URL that does not look like SSE.
    let events_url = with_path(&bearer.url, "/events");
    let servers = mcp::config_arg(&[
        ("bearer", json!({"url": events_url, "transport": "sse", "auth": "tok"})),
        ("team", json!({"url": team.url, "headers": {"X-Team": "kiwi"}})),
        ("denied", json!({"url": events_url, "transport": "sse"})),
    ]);
    let mut k = env.spawn(&config, &["--yolo", "--mcp-config", &servers]);
    let (events, response) = k.prompt("p0", json!("first"));
    assert_eq!(states(&events), ["connected", "connected", "failed"]);
    assert_eq!(response["error"]["code"], -32603, "{events:?}");
    let message = response["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("MCPRuntimeError: Failed to connect MCP servers: {\"denied\": "), "{message}");
    assert!(message.contains(&format!("Client error '401 Unauthorized' for url '{events_url}'")), "{message}");
    // The POSTs carry them too: the call goes through (either server answers it).
    let (events, response) = k.prompt("p1", json!("call"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(tool_results(&events)[0]["output"][0]["text"], "pong:auth");
}

#[test]
fn connection_failures_fail_the_server_and_the_turn_goes_on() {
    let good = mcp::HttpServer::start_sse(&[]);
    let silent = mcp::HttpServer::start_sse(&["--no-endpoint"]);
    let elsewhere = mcp::HttpServer::start_sse(&["--endpoint", "http://example.com/messages?session_id=x"]);
    let json_only = mcp::HttpServer::start_sse(&["--content-type", "application/json"]);
    let env = Env::new();
    let config = env.scripted_config(&[&call("c1", "echo", json!({"text": "still"})), "text: done"]);
    let servers = mcp::config_arg(&[
        ("missing", json!({"url": with_path(&good.url, "/nope/sse")})),
        ("silent", json!({"url": silent.url, "sse_read_timeout": 1})),
        ("elsewhere", json!({"url": elsewhere.url})),
        ("json", json!({"url": json_only.url})),
        ("refused", json!({"url": "http://127.0.0.1:1/sse"})),
        ("good", json!({"url": good.url})),
    ]);
    let mut k = env.spawn(&config, &["--yolo", "--mcp-config", &servers]);
    let started = Instant::now();
    let (events, response) = k.prompt("p0", json!("go"));
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    assert_eq!(states(&events), ["failed", "failed", "failed", "failed", "failed", "connected"]);
    let message = response["error"]["message"].as_str().unwrap();
    for part in [
        format!("\"missing\": \"Client error '404 Not Found' for url '{}'", with_path(&good.url, "/nope/sse")),
        format!("\"silent\": \"the SSE stream of {} sent no `endpoint` event within 1 s\"", silent.url),
        "\"elsewhere\": \"refusing the endpoint 'http://example.com/messages?session_id=x': it is not on the origin of"
            .to_string(),
        format!("\"json\": \"GET {} answered with content type 'application/json', not an event stream", json_only.url),
        "\"refused\": \"Client failed to connect: ".to_string(),
    ] {
        assert!(message.contains(&part), "{part}\n  not in\n{message}");
    }
    assert!(!message.contains("\"good\""), "{message}");
    let (events, response) = k.prompt("p1", json!("call"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(tool_results(&events)[0]["output"][0]["text"], "pong:still");
}

#[test]
fn a_stream_that_ends_mid_call_fails_the_call_and_the_next_call_reconnects() {
    let server = mcp::HttpServer::start_sse(&[]);
    let env = Env::new();
    let config = env.scripted_config(&[
        &call("c1", "crash", json!({})),
        &call("c2", "echo", json!({"text": "back"})),
        "text: done",
    ]);
    let servers = mcp::config_arg(&[("srv", json!({"url": server.url}))]);
    let mut k = env.spawn(&config, &["--yolo", "--mcp-config", &servers]);
    let (events, response) = k.prompt("p0", json!("go"));
    assert_eq!(response["result"]["status"], "finished");
    let results = tool_results(&events);
    assert_eq!(results[0]["is_error"], true);
    assert_eq!(results[0]["message"], "Error running tool: Connection closed");
    assert_eq!(results[0]["display"], json!([{"type": "brief", "text": "Tool runtime error"}]));
    assert_eq!(results[1]["output"], json!([{"type": "text", "text": "pong:back"}]), "{results:?}");
}

#[test]
fn a_refused_post_fails_the_call_with_its_status() {
    let server = mcp::HttpServer::start_sse(&["--call-status", "503"]);
    let env = Env::new();
    let config = env.scripted_config(&[
        &call("c1", "echo", json!({"text": "x"})),
        &call("c2", "echo", json!({"text": "y"})),
        "text: done",
    ]);
    let servers = mcp::config_arg(&[("srv", json!({"url": server.url}))]);
    let mut k = env.spawn(&config, &["--yolo", "--mcp-config", &servers]);
    let (events, response) = k.prompt("p0", json!("go"));
    assert_eq!(response["result"]["status"], "finished");
    let results = tool_results(&events);
    assert_eq!(results.len(), 2);
    for result in results {
        assert_eq!(result["is_error"], true);
        let message = result["message"].as_str().unwrap();
        assert!(message.starts_with("Error running tool: "), "{message}");
        assert!(
            message.contains("the message endpoint answered the POST with HTTP 503 Service Unavailable"),
            "{message}"
        );
    }
}

#[test]
fn messages_that_are_not_json_rpc_are_skipped() {
    let server = mcp::HttpServer::start_sse(&["--garbage"]);
    let env = Env::new();
    let config = env.scripted_config(&[&call("c1", "echo", json!({"text": "clean"})), "text: done"]);
    let servers = mcp::config_arg(&[("srv", json!({"url": server.url}))]);
    let mut k = env.spawn(&config, &["--yolo", "--mcp-config", &servers]);
    let (events, response) = k.prompt("p0", json!("go"));
    assert_eq!(response["result"]["status"], "finished", "{events:?}");
    assert_eq!(states(&events), ["connected"]);
    assert_eq!(tool_results(&events)[0]["output"][0]["text"], "pong:clean");
    // The log is written behind the turn, by the logger's own thread.
    let read_log = || std::fs::read_to_string(env.share().join("logs/kiwi.log")).unwrap_or_default();
    let logged =
        common::wait_until(Duration::from_secs(10), || read_log().contains("skipped a message that is not JSON-RPC"));
    assert!(logged, "{}", read_log());
}

#[test]
fn a_silent_stream_ends_the_session_after_sse_read_timeout() {
    let server = mcp::HttpServer::start_sse(&[]);
    let env = Env::new();
    let config = env.scripted_config_with(
        &[&call("c1", "sleep", json!({"ms": 8000})), &call("c2", "echo", json!({"text": "again"})), "text: done"],
        json!({"mcp": {"client": {"tool_call_timeout_ms": 30000}}}),
    );
    let servers = mcp::config_arg(&[("srv", json!({"url": server.url, "sse_read_timeout": 1}))]);
    let mut k = env.spawn(&config, &["--yolo", "--mcp-config", &servers]);
    let started = Instant::now();
    let (events, response) = k.prompt("p0", json!("go"));
    assert_eq!(response["result"]["status"], "finished");
    // The silent stream, not the sleep nor the tool call limit, ended the call.
    assert!(started.elapsed() < Duration::from_secs(7), "{:?}", started.elapsed());
    let results = tool_results(&events);
    assert_eq!(results[0]["message"], "Error running tool: Connection closed");
    assert_eq!(results[1]["output"][0]["text"], "pong:again");
}

#[test]
fn comments_keep_a_slow_call_alive_past_sse_read_timeout() {
    let server = mcp::HttpServer::start_sse(&["--ping-ms", "200"]);
    let env = Env::new();
    let config = env.scripted_config(&[&call("c1", "sleep", json!({"ms": 2500})), "text: done"]);
    let servers = mcp::config_arg(&[("srv", json!({"url": server.url, "sse_read_timeout": 1}))]);
    let mut k = env.spawn(&config, &["--yolo", "--mcp-config", &servers]);
    let (events, response) = k.prompt("p0", json!("go"));
    assert_eq!(response["result"]["status"], "finished");
    // The limit is per read, not per call: the pings every 200 ms keep the stream alive.
    let results = tool_results(&events);
    assert_eq!(results[0]["output"][0]["text"], "slept 2500", "{results:?}");
}

#[test]
fn kiwi_mcp_test_connects_to_an_sse_server() {
    let server = mcp::HttpServer::start_sse(&["--require-header", "x-team:kiwi"]);
    let silent = mcp::HttpServer::start_sse(&["--no-endpoint"]);
    let env = Env::new();
    let share = env.share();
    std::fs::create_dir_all(&share).unwrap();
    let doc = json!({"mcpServers": {
        "srv": {"url": server.url, "headers": {"X-Team": "kiwi"}},
        "denied": {"url": server.url},
        "silent": {"url": silent.url, "transport": "sse", "sse_read_timeout": 1},
    }});
    std::fs::write(share.join("mcp.json"), doc.to_string()).unwrap();
    let o = kiwi(&share, &["mcp", "test", "srv"]);
    assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "Testing connection to 'srv'...\n✓ Connected to 'srv'\n  Available tools: 9\n  Tools:\n\
         \x20   - echo: Answers pong with the text.\n\
         \x20   - image: Returns a tiny picture.\n\
         \x20   - audio: Returns a short sound.\n\
         \x20   - fail: Always reports a failure.\n\
         \x20   - boom: \n\
         \x20   - crash: Makes the server exit in the middle of the call.\n\
         \x20   - sleep: Waits the given number of milliseconds and then...\n\
         \x20   - env: Reads an environment variable.\n\
         \x20   - cwd: The working directory.\n"
    );
    let o = kiwi(&share, &["mcp", "test", "denied"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "Testing connection to 'denied'...\n");
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "✗ Connection failed: HTTPStatusError: Client error '401 Unauthorized' for url '{}'\nFor more information check: https://developer.mozilla.org/en-US/docs/Web/HTTP/Status/401\n",
            server.url
        )
    );
    let started = Instant::now();
    let o = kiwi(&share, &["mcp", "test", "silent"]);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "✗ Connection failed: McpError: the SSE stream of {} sent no `endpoint` event within 1 s\n",
            silent.url
        )
    );
}
