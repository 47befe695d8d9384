//! MCP over the wire: kiwi connects to the MCP test server (`examples/mcp_test_server.rs`) and
//! offers its tools; approval, results, failures, the loading bracket and `mcp_status`.

use crate::common;

use crate::mcp;

use std::time::Duration;

use common::{Env, alive, types};
use mcp::{approve, call, payloads, tool_results};
use serde_json::{Value, json};

#[test]
fn a_tool_call_round_trip_with_approval_and_the_loading_bracket() {
    let env = Env::new();
    let config = env.scripted_config(&[&call("c1", "echo", json!({"text": "hi"})), "text: done", "text: again"]);
    let servers = mcp::config_arg(&[("srv", mcp::stdio_entry(&[]))]);
    let mut k = env.spawn(&config, &["--mcp-config", &servers]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let (before, request) = k.until_request();
    assert_eq!(
        types(&before),
        [
            "TurnBegin",
            "StatusUpdate",
            "MCPLoadingBegin",
            "StatusUpdate",
            "MCPLoadingEnd",
            "StepBegin",
            "ToolCall",
            "StatusUpdate"
        ]
    );
    let statuses = payloads(&before, "StatusUpdate");
    let first = &statuses[0]["mcp_status"];
    assert_eq!(
        *first,
        json!({"loading": true, "connected": 0, "total": 1, "tools": 0,
        "servers": [{"name": "srv", "status": "connecting", "tools": []}]})
    );
    assert_eq!(statuses[0]["plan_mode"], Value::Null);
    let last = &statuses[1]["mcp_status"];
    assert_eq!(last["loading"], false);
    assert_eq!(last["connected"], 1);
    assert_eq!(last["servers"][0]["status"], "connected");
    assert_eq!(last["tools"], 9);
    assert_eq!(last["servers"][0]["tools"][0], "echo");
    // Every other StatusUpdate carries mcp_status null.
    assert_eq!(statuses[2]["mcp_status"], Value::Null);

    let payload = &request["params"]["payload"];
    assert_eq!(payload["sender"], "echo");
    assert_eq!(payload["action"], "mcp:echo");
    assert_eq!(payload["description"], "Call MCP tool `echo`.");
    assert_eq!(payload["display"], json!([]));
    approve(&mut k, &request);
    let (events, response) = k.until_response(&json!("p0"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(
        tool_results(&events),
        [
            json!({"is_error": false, "output": [{"type": "text", "text": "pong:hi"}], "message": "", "display": [], "extras": null})
        ]
    );
    // Connected before the second turn: no bracket.
    let (events, response) = k.prompt("p1", json!("more"));
    assert_eq!(response["result"]["status"], "finished");
    assert!(!types(&events).iter().any(|t| t.starts_with("MCPLoading")), "{:?}", types(&events));
}

#[test]
fn image_is_error_and_server_error_results() {
    let env = Env::new();
    let config = env.scripted_config_with(
        &[
            &call("c1", "image", json!({})),
            &call("c2", "fail", json!({})),
            &call("c3", "boom", json!({})),
            &call("c4", "echo", json!({"text": 5})),
            "text: done",
        ],
        json!({"models": {"scripted": {"capabilities": ["image_in"]}}}),
    );
    let servers = mcp::config_arg(&[("srv", mcp::stdio_entry(&[]))]);
    let mut k = env.spawn(&config, &["--yolo", "--mcp-config", &servers]);
    let (events, response) = k.prompt("p0", json!("go"));
    assert_eq!(response["result"]["status"], "finished", "{events:?}");
    let results = tool_results(&events);
    let image = &results[0]["output"][0];
    assert_eq!(image["type"], "image_url");
    assert!(image["image_url"]["url"].as_str().unwrap().starts_with("data:image/png;base64,iVBOR"));
    assert_eq!(results[0]["output"][1], json!({"type": "text", "text": "a picture"}));
    assert_eq!(results[1]["is_error"], true);
    assert_eq!(results[1]["message"], "Tool returned an error. The output may be error message or incomplete output");
    assert_eq!(results[1]["output"], json!([{"type": "text", "text": "it went wrong"}]));
    assert_eq!(results[1]["display"], json!([]));
    assert_eq!(results[2]["message"], "Error running tool: server exploded");
    assert_eq!(results[2]["display"], json!([{"type": "brief", "text": "Tool runtime error"}]));
    // Arguments are checked against the server's schema before anything is sent.
    assert!(results[3]["message"].as_str().unwrap().starts_with("Error validating JSON arguments: "), "{}", results[3]);
}

#[test]
fn a_server_that_dies_mid_call_is_an_error_and_comes_back() {
    let env = Env::new();
    let config = env.scripted_config(&[
        &call("c1", "crash", json!({})),
        &call("c2", "echo", json!({"text": "back"})),
        "text: done",
    ]);
    let servers = mcp::config_arg(&[("srv", mcp::stdio_entry(&[]))]);
    let mut k = env.spawn(&config, &["--yolo", "--mcp-config", &servers]);
    let (events, response) = k.prompt("p0", json!("go"));
    assert_eq!(response["result"]["status"], "finished");
    let results = tool_results(&events);
    assert_eq!(results[0]["is_error"], true);
    assert!(results[0]["message"].as_str().unwrap().starts_with("Error running tool: "), "{}", results[0]);
    assert_eq!(results[1]["output"], json!([{"type": "text", "text": "pong:back"}]), "{results:?}");
}

#[test]
fn a_hanging_call_times_out_and_the_turn_goes_on() {
    let env = Env::new();
    let config = env.scripted_config_with(
        &[&call("c1", "sleep", json!({"ms": 30000})), &call("c2", "echo", json!({"text": "x"})), "text: done"],
        json!({"mcp": {"client": {"tool_call_timeout_ms": 1000}}}),
    );
    let servers = mcp::config_arg(&[("srv", mcp::stdio_entry(&[]))]);
    let mut k = env.spawn(&config, &["--yolo", "--mcp-config", &servers]);
    let (events, response) = k.prompt("p0", json!("go"));
    assert_eq!(response["result"]["status"], "finished");
    let results = tool_results(&events);
    assert_eq!(
        results[0],
        json!({"is_error": true, "output": "", "message": "Timeout while calling MCP tool `sleep`. You may explain to the user that the timeout config is set too low.",
            "display": [{"type": "brief", "text": "Timeout"}], "extras": null})
    );
    assert_eq!(results[1]["output"][0]["text"], "pong:x");
}

#[test]
fn a_failed_server_fails_exactly_one_turn() {
    let env = Env::new();
    let config = env.scripted_config(&["text: first", &call("c1", "echo", json!({"text": "ok"})), "text: done"]);
    let servers = mcp::config_arg(&[
        ("bad", json!({"command": "/nonexistent/mcp-server"})),
        ("dies", mcp::stdio_entry(&["--exit"])),
        ("srv", mcp::stdio_entry(&[])),
    ]);
    let mut k = env.spawn(&config, &["--yolo", "--mcp-config", &servers]);
    let (events, response) = k.prompt("p0", json!("go"));
    assert_eq!(
        types(&events),
        ["TurnBegin", "StatusUpdate", "MCPLoadingBegin", "StatusUpdate", "MCPLoadingEnd", "TurnEnd"]
    );
    assert_eq!(response["error"]["code"], -32603);
    let message = response["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("MCPRuntimeError: Failed to connect MCP servers: {"), "{message}");
    assert!(message.contains("\"bad\"") && message.contains("\"dies\"") && !message.contains("\"srv\""), "{message}");
    let last = &payloads(&events, "StatusUpdate")[1]["mcp_status"];
    let states: Vec<&str> = last["servers"].as_array().unwrap().iter().map(|s| s["status"].as_str().unwrap()).collect();
    assert_eq!(states, ["failed", "failed", "connected"]);
    assert_eq!((last["connected"].as_u64(), last["total"].as_u64()), (Some(1), Some(3)));
    // The error is collected once; the next turns run with the tools that did connect.
    let (events, response) = k.prompt("p1", json!("again"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(types(&events)[..2], ["TurnBegin", "StepBegin"]);
    let (events, _) = k.prompt("p2", json!("call"));
    assert_eq!(tool_results(&events)[0]["output"][0]["text"], "pong:ok");
}

#[test]
fn hanging_and_garbage_servers_fail_instead_of_blocking() {
    let env = Env::new();
    let config = env.scripted_config_with(&["text: never"], json!({"mcp": {"client": {"tool_call_timeout_ms": 1000}}}));
    let servers =
        mcp::config_arg(&[("hang", mcp::stdio_entry(&["--hang"])), ("garbage", mcp::stdio_entry(&["--garbage"]))]);
    let mut k = env.spawn(&config, &["--mcp-config", &servers]);
    let (events, response) = k.prompt("p0", json!("go"));
    assert_eq!(response["error"]["code"], -32603, "{events:?}");
    let last = &payloads(&events, "StatusUpdate")[1]["mcp_status"];
    assert_eq!(last["servers"][0]["status"], "failed");
    assert_eq!(last["servers"][1]["status"], "failed");
}

#[test]
fn stdio_servers_get_a_whitelisted_environment_and_the_work_dir() {
    let env = Env::new();
    let config = env.scripted_config(&[
        &call("c1", "env", json!({"name": "FOO"})),
        &call("c2", "env", json!({"name": "KIMI_SHARE_DIR"})),
        &call("c3", "cwd", json!({})),
        "text: done",
    ]);
    let mut entry = mcp::stdio_entry(&[]);
    entry["env"] = json!({"FOO": "bar"});
    let servers = mcp::config_arg(&[("srv", entry)]);
    let mut k = env.spawn(&config, &["--yolo", "--mcp-config", &servers]);
    let (events, _) = k.prompt("p0", json!("go"));
    let texts: Vec<Value> = tool_results(&events).iter().map(|r| r["output"][0]["text"].clone()).collect();
    let work = std::fs::canonicalize(env.work()).unwrap();
    assert_eq!(texts, [json!("bar"), json!("<unset>"), json!(work.to_str().unwrap())]);
}

#[test]
fn invalid_configs_stop_the_start_up() {
    let env = Env::new();
    let config = env.scripted_config(&["text: x"]);
    let out = env.command(&config, &["--mcp-config", r#"{"mcpServers": {"x": {"args": []}}}"#]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("Invalid MCP config: x: a server needs"), "{stderr}");
    // The default file is read when no --mcp-config-file is given.
    std::fs::create_dir_all(env.share()).unwrap();
    std::fs::write(env.share().join("mcp.json"), r#"{"mcpServers": {"y": {"command": 1}}}"#).unwrap();
    let out = env.command(&config, &[]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Invalid MCP config: y.command"));
    std::fs::write(env.share().join("mcp.json"), "{nope").unwrap();
    let out = env.command(&config, &[]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn no_server_process_outlives_kiwi() {
    let env = Env::new();
    let config = env.scripted_config(&["text: hello"]);
    let pid_file = env.dir.path().join("server.pid");
    let servers = mcp::config_arg(&[("srv", mcp::stdio_entry(&["--pid-file", pid_file.to_str().unwrap()]))]);
    let mut k = env.spawn(&config, &["--mcp-config", &servers]);
    let (_, response) = k.prompt("p0", json!("go"));
    assert_eq!(response["result"]["status"], "finished");
    let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    assert!(alive(pid));
    k.close_stdin();
    assert!(k.wait_exit(Duration::from_secs(10)).is_some());
    // The server is killed with kiwi (a zombie until its new parent reaps it counts as gone).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while alive(pid) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(pid), "MCP server {pid} outlived kiwi");
}

#[test]
fn cancelling_the_wait_leaves_the_servers_connecting() {
    let env = Env::new();
    let config = env.scripted_config(&["text: after", &call("c1", "echo", json!({"text": "late"})), "text: done"]);
    // Slow enough that the second prompt starts while the server is still connecting.
    let servers = mcp::config_arg(&[("slow", mcp::stdio_entry(&["--delay-ms", "3000"]))]);
    let mut k = env.spawn(&config, &["--yolo", "--mcp-config", &servers]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    loop {
        let m = k.next();
        if m["params"]["type"] == "MCPLoadingBegin" {
            break;
        }
    }
    k.send(json!({"jsonrpc":"2.0","id":"c0","method":"cancel","params":{}}));
    let (_, response) = k.until_response(&json!("p0"));
    assert_eq!(response["result"]["status"], "cancelled");
    // The next turn waits again, and the server does connect.
    let (events, response) = k.prompt("p1", json!("again"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(types(&events)[..3], ["TurnBegin", "StatusUpdate", "MCPLoadingBegin"]);
    assert_eq!(payloads(&events, "StatusUpdate")[1]["mcp_status"]["servers"][0]["status"], "connected");
    let (events, _) = k.prompt("p2", json!("call"));
    assert_eq!(tool_results(&events)[0]["output"][0]["text"], "pong:late");
}

#[test]
fn streamable_http_servers_with_a_bearer_token_and_headers() {
    let server = mcp::HttpServer::start(&["--require-header", "authorization:Bearer tok"]);
    let headers = mcp::HttpServer::start(&["--require-header", "x-team:kiwi"]);
    let env = Env::new();
    let config = env.scripted_config_with(
        &[&call("c1", "echo", json!({"text": "over http"})), &call("c2", "image", json!({})), "text: done"],
        json!({"models": {"scripted": {"capabilities": ["image_in"]}}}),
    );
    let servers = mcp::config_arg(&[
        ("bearer", json!({"url": server.url, "transport": "http", "auth": "tok"})),
        ("headers", json!({"url": headers.url, "headers": {"X-Team": "kiwi"}})),
        ("denied", json!({"url": server.url, "transport": "streamable-http"})),
    ]);
    let mut k = env.spawn(&config, &["--mcp-config", &servers]);
    let (events, response) = k.prompt("p0", json!("first"));
    // The server without the token was refused (401) and fails this one turn.
    assert_eq!(response["error"]["code"], -32603, "{events:?}");
    let last = &payloads(&events, "StatusUpdate")[1]["mcp_status"];
    let states: Vec<&str> = last["servers"].as_array().unwrap().iter().map(|s| s["status"].as_str().unwrap()).collect();
    assert_eq!(states, ["connected", "connected", "failed"]);
    k.send(json!({"jsonrpc":"2.0","id":"p1","method":"prompt","params":{"user_input":"go"}}));
    let (_, request) = k.until_request();
    assert_eq!(request["params"]["payload"]["action"], "mcp:echo");
    approve(&mut k, &request);
    let (mut events, request) = k.until_request();
    approve(&mut k, &request);
    let (rest, response) = k.until_response(&json!("p1"));
    assert_eq!(response["result"]["status"], "finished");
    events.extend(rest);
    let results = tool_results(&events);
    assert_eq!(results[0]["output"], json!([{"type": "text", "text": "pong:over http"}]));
    assert_eq!(results[1]["output"][1]["text"], "a picture");
}

/// kiwi's log of the session run in `env`.
fn log_text(env: &Env) -> String {
    std::fs::read_to_string(env.share().join("logs/kiwi.log")).unwrap_or_default()
}

#[test]
fn a_server_cannot_take_a_built_in_tool_name_and_odd_names_are_refused() {
    let env = Env::new();
    let target = env.work().join("written.txt");
    let path = target.to_str().unwrap();
    let config = env.scripted_config(&[
        &call("c1", "WriteFile", json!({"path": path, "content": "by the built-in"})),
        &call("c2", "dotted.name-1", json!({})),
        "text: done",
    ]);
    let servers = mcp::config_arg(&[("srv", mcp::stdio_entry(&["--impostor", "--odd-names"]))]);
    let mut k = env.spawn(&config, &["--mcp-config", &servers]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    // The built-in asks as the built-in does (an MCP tool would ask `mcp:WriteFile`).
    let (before, request) = k.until_request();
    assert_eq!(request["params"]["payload"]["sender"], "WriteFile");
    assert_ne!(request["params"]["payload"]["action"], "mcp:WriteFile", "{request}");
    approve(&mut k, &request);
    let (_, request) = k.until_request();
    assert_eq!(request["params"]["payload"]["action"], "mcp:dotted.name-1");
    approve(&mut k, &request);
    let (events, response) = k.until_response(&json!("p0"));
    assert_eq!(response["result"]["status"], "finished", "{events:?}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "by the built-in");
    let results = tool_results(&events);
    assert!(!results[0].to_string().contains("impostor"), "{results:?}");
    // Refused tools are not offered, so `mcp_status` does not list them either.
    let status = &payloads(&before, "StatusUpdate")[1]["mcp_status"];
    let listed: Vec<&str> =
        status["servers"][0]["tools"].as_array().unwrap().iter().map(|t| t.as_str().unwrap()).collect();
    assert_eq!(listed.len(), 10, "{listed:?}");
    assert!(listed.contains(&"dotted.name-1") && !listed.contains(&"WriteFile") && !listed.contains(&"Shell"));
    assert_eq!(status["tools"], 10);
    // Each refusal is a log line naming the server and the tool.
    for shown in ["\"WriteFile\"", "\"Shell\"", "\"two words\"", "\"bell\\u{7}\"", &format!("\"{}\"", "a".repeat(65))] {
        let line = format!("MCP server srv: tool {shown} is not offered");
        assert!(
            common::wait_until(Duration::from_secs(10), || log_text(&env).contains(&line)),
            "{line}: {}",
            log_text(&env)
        );
    }
}

/// In Claude's dialect `acceptEdits` approves the built-in file tools by name: a server's tool of
/// that name must not get that approval.
#[test]
fn accept_edits_does_not_approve_a_servers_write_file() {
    use crate::print_support::{Dirs, run};
    let d = Dirs::new();
    let target = d.work().join("written.txt");
    let call = call("m1", "WriteFile", json!({"path": target.to_str().unwrap(), "content": "by the built-in"}));
    let config = d.scripted(&[&call, "text: done"]);
    let server = json!({"mcpServers": {"srv": {"type": "stdio", "command": mcp::test_server().to_str().unwrap(), "args": ["--impostor"]}}});
    let server = server.to_string();
    let args = ["-p", "--verbose", "--output-format", "stream-json", "--mcp-config", &server, "--strict-mcp-config"];
    let r = run(d.command(&config, &[&args[..], &["--permission-mode", "acceptEdits", "go"]].concat()), "");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(!r.stdout.contains("impostor"), "{}", r.stdout);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "by the built-in");
}

#[test]
fn endless_tool_list_paging_and_too_many_tools_fail_that_server_only() {
    let env = Env::new();
    let config = env.scripted_config_with(
        &["text: first", &call("c1", "echo", json!({"text": "still here"})), "text: done"],
        // Before the page limit existed, paging went on until this limit.
        json!({"mcp": {"client": {"tool_call_timeout_ms": 20000}}}),
    );
    let servers = mcp::config_arg(&[
        ("pages", mcp::stdio_entry(&["--endless-pages"])),
        ("many", mcp::stdio_entry(&["--many-tools", "1001"])),
        ("srv", mcp::stdio_entry(&[])),
    ]);
    let mut k = env.spawn(&config, &["--yolo", "--mcp-config", &servers]);
    let (events, response) = k.prompt("p0", json!("go"));
    assert_eq!(response["error"]["code"], -32603, "{events:?}");
    let message = response["error"]["message"].as_str().unwrap();
    assert!(message.contains("past 100 pages") && message.contains("more than 1000 tools"), "{message}");
    let last = &payloads(&events, "StatusUpdate")[1]["mcp_status"];
    let states: Vec<&str> = last["servers"].as_array().unwrap().iter().map(|s| s["status"].as_str().unwrap()).collect();
    assert_eq!(states, ["failed", "failed", "connected"]);
    assert_eq!(last["tools"], 9);
    // The log is written behind the session: wait for the lines.
    for line in [
        "MCP server pages failed to connect: tools/list: the server's list goes on past 100 pages",
        "MCP server many failed to connect: tools/list: the server lists more than 1000 tools",
    ] {
        assert!(common::wait_until(Duration::from_secs(10), || log_text(&env).contains(line)), "{}", log_text(&env));
    }
    // kiwi goes on with the server that behaved.
    let (_, response) = k.prompt("p1", json!("again"));
    assert_eq!(response["result"]["status"], "finished");
    let (events, _) = k.prompt("p2", json!("call"));
    assert_eq!(tool_results(&events)[0]["output"][0]["text"], "pong:still here");
}

#[test]
fn a_servers_stderr_is_logged_within_bounds() {
    let env = Env::new();
    let config = env.scripted_config(&[&call("c1", "echo", json!({"text": "alive"})), "text: done"]);
    // One 2 MiB line, then 1.6 MB of 4,000-byte lines: more than kiwi keeps of either.
    let servers = mcp::config_arg(&[("srv", mcp::stdio_entry(&["--stderr-line", "2097152", "--stderr-lines", "400"]))]);
    let mut k = env.spawn(&config, &["--yolo", "--mcp-config", &servers]);
    let (events, response) = k.prompt("p0", json!("go"));
    assert_eq!(response["result"]["status"], "finished", "{events:?}");
    assert_eq!(tool_results(&events)[0]["output"][0]["text"], "pong:alive");
    let dropped = "bytes of this server's stderr logged: the rest is dropped]";
    assert!(common::wait_until(Duration::from_secs(20), || log_text(&env).contains(dropped)), "no end marker");
    let log = log_text(&env);
    let cut = format!("MCP server srv (stderr): {} [line cut: longer than 4096 bytes]", "x".repeat(4096));
    assert!(log.contains(&cut), "no cut marker");
    assert!(!log.contains("flood done"));
    // About 1 MiB of stderr reached the log, not 3.6 MB.
    assert!(log.len() < 1536 * 1024, "{} bytes of log", log.len());
    k.close_stdin();
    assert!(k.wait_exit(Duration::from_secs(10)).is_some());
}
