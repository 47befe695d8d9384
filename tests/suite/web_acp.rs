//! ACP over `kiwi web`'s WebSocket `/api/acp` (`docs/web.md` §6): the official ACP TypeScript
//! SDK (`@agentclientprotocol/sdk`, tests/acp_sdk/ws_check.mjs, its byte streams adapted to
//! Node's WebSocket; skipped with the reason where Node or the npm registry is missing), then a
//! raw client: a
//! session made there is listed by the REST API at once and its turn is seen live by a browser
//! socket on the session (and the ACP client sees a turn the browser starts); the handshake
//! refusals (no token, a wrong token, a foreign Origin); frames that are not JSON-RPC answered
//! as `kiwi acp` answers the same lines on stdin, the socket staying open.

use std::io::{BufRead as _, Write as _};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

use super::web_kit::{Home, Server, Ws, encode, kinds};
use crate::npm;

fn acp(server: &Server) -> Ws {
    let token = server.token.as_deref().expect("a token");
    server.socket(&format!("/api/acp?token={}", encode(token)), &[]).unwrap()
}

/// Sends an ACP request and reads until its answer; the notifications before it.
fn call(ws: &mut Ws, id: i64, method: &str, params: Value) -> (Vec<Value>, Value) {
    ws.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    ws.until(|m| m["id"] == id && m.get("method").is_none())
}

fn initialize(ws: &mut Ws) -> Value {
    let params = json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": false,
        "writeTextFile": false}, "terminal": false}});
    call(ws, 0, "initialize", params).1
}

/// The text of the `agent_message_chunk` updates among `messages`.
fn agent_text(messages: &[Value]) -> String {
    messages
        .iter()
        .filter(|m| m["method"] == "session/update")
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|m| m["params"]["update"]["content"]["text"].as_str())
        .collect()
}

#[test]
fn a_session_opened_over_acp_is_the_browsers_too() {
    let home = Home::new();
    home.scripted(&["text: Hello from ACP".to_string(), "text: Hello from the browser".to_string()]);
    let server = home.serve(&[]);
    let mut ws = acp(&server);
    let init = initialize(&mut ws);
    assert_eq!(init["result"]["agentInfo"]["name"], "kiwi", "{init}");
    assert_eq!(init["result"]["agentCapabilities"]["loadSession"], true);
    let work = home.work().canonicalize().unwrap();
    let (_, opened) = call(&mut ws, 1, "session/new", json!({"cwd": work, "mcpServers": []}));
    let id = opened["result"]["sessionId"].as_str().unwrap_or_else(|| panic!("{opened}")).to_string();

    // Listed by the REST API at once, as running.
    let (status, listed) = server.get_json("/api/sessions/");
    assert_eq!(status, 200);
    let listed = listed.as_array().unwrap().iter().find(|s| s["session_id"] == id).cloned();
    let listed = listed.unwrap_or_else(|| panic!("session {id} not listed"));
    assert_eq!(listed["is_running"], true, "{listed}");
    assert_eq!(listed["status"]["state"], "idle", "{listed}");

    // A browser joins; the ACP client's turn reaches it live.
    let (mut browser, history) = server.join(&id);
    assert!(history.is_empty(), "{history:?}");
    let prompt = json!({"sessionId": id, "prompt": [{"type": "text", "text": "hi"}]});
    let (updates, answer) = call(&mut ws, 2, "session/prompt", prompt);
    assert_eq!(answer["result"]["stopReason"], "end_turn", "{answer}");
    assert_eq!(agent_text(&updates), "Hello from ACP");
    let (seen, idle) = browser.until(|m| m["method"] == "session_status" && m["params"]["state"] == "idle");
    assert_eq!(idle["params"]["reason"], "prompt_complete");
    assert_eq!(seen[0]["params"]["state"], "busy", "{seen:?}");
    let events: Vec<String> = kinds(&seen).into_iter().filter(|k| !k.starts_with("session_status")).collect();
    assert!(events.starts_with(&["TurnBegin".to_string()]), "{events:?}");
    assert!(events.contains(&"TurnEnd".to_string()), "{events:?}");
    let text = seen.iter().find(|m| m["params"]["payload"]["type"] == "text").map(|m| &m["params"]["payload"]["text"]);
    assert_eq!(text, Some(&json!("Hello from ACP")));

    // The browser's turn reaches the ACP client.
    browser.initialize("init");
    browser.send(json!({"jsonrpc": "2.0", "method": "prompt", "id": "b1", "params": {"user_input": "hey"}}));
    let (_, answered) = browser.until(|m| m["id"] == "b1");
    assert_eq!(answered["result"]["status"], "finished", "{answered}");
    let mut watched = Vec::new();
    while agent_text(&watched) != "Hello from the browser" {
        watched.push(ws.next());
    }

    // The ACP client leaves; the session goes on for the browser.
    drop(ws);
    let (_, one) = server.get_json(&format!("/api/sessions/{id}"));
    assert_eq!(one["is_running"], true, "{one}");
}

#[test]
fn the_handshake_is_guarded_like_the_session_socket() {
    let home = Home::new();
    home.scripted(&[]);
    let server = home.serve(&[]);
    let refused = |path: &str, headers: &[(&str, &str)]| match server.socket(path, headers) {
        Err(tungstenite::Error::Http(response)) => response.status().as_u16(),
        Err(e) => panic!("{path}: {e}"),
        Ok(_) => panic!("{path}: accepted"),
    };
    assert_eq!(refused("/api/acp", &[]), 403, "no token");
    assert_eq!(refused("/api/acp?token=wrong", &[]), 403, "a wrong token");
    let token = encode(server.token.as_deref().unwrap());
    let with_token = format!("/api/acp?token={token}");
    assert_eq!(refused(&with_token, &[("Origin", "http://evil.example")]), 403, "a foreign Origin");
    // The bearer header is not the socket's token.
    let bearer = format!("Bearer {}", server.token.as_deref().unwrap());
    assert_eq!(refused("/api/acp", &[("Authorization", &bearer)]), 403);
    let origin = format!("http://127.0.0.1:{}", server.port);
    let mut ws = server.socket(&with_token, &[("Origin", &origin)]).unwrap();
    assert_eq!(initialize(&mut ws)["result"]["agentInfo"]["name"], "kiwi");
}

#[test]
fn frames_that_are_not_json_rpc_get_kiwi_acps_errors() {
    let bad = ["this is not json", "[1, 2]", r#"{"jsonrpc": "1.0", "id": 5, "method": "initialize"}"#];
    let home = Home::new();
    home.scripted(&[]);
    // What `kiwi acp` answers to the same lines on stdin.
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kiwi"));
    for var in crate::common::SCRUBBED_ENV {
        cmd.env_remove(var);
    }
    let mut child = cmd
        .arg("acp")
        .current_dir(home.work())
        .env("HOME", home.home())
        .env("KIMI_SHARE_DIR", home.share())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for line in bad {
        writeln!(stdin, "{line}").unwrap();
    }
    drop(stdin);
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let expected: Vec<Value> = stdout.lines().map(|l| serde_json::from_str(&l.unwrap()).unwrap()).collect();
    child.wait().unwrap();
    assert_eq!(expected.len(), bad.len(), "{expected:?}");
    assert_eq!(expected[0]["error"]["code"], -32700, "{expected:?}");

    let server = home.serve(&[]);
    let mut ws = acp(&server);
    for (line, expected) in bad.iter().zip(&expected) {
        ws.send_text(line);
        assert_eq!(&ws.next(), expected, "for {line}");
    }
    // Still serving.
    assert_eq!(initialize(&mut ws)["result"]["agentInfo"]["name"], "kiwi");
}

#[test]
fn the_official_acp_sdk_works_over_the_socket() {
    let sdk = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp_sdk");
    if let Err(reason) = npm::ready(&sdk, "@agentclientprotocol/sdk") {
        return npm::skip("the ACP SDK WebSocket test", &reason);
    }
    // Node 20 has its WebSocket behind a flag; later versions have it on by default.
    let flag = Command::new("node")
        .args(["--experimental-websocket", "-e", "if (typeof WebSocket !== 'function') process.exit(1)"])
        .status()
        .is_ok_and(|s| s.success());
    let plain = Command::new("node")
        .args(["-e", "if (typeof WebSocket !== 'function') process.exit(1)"])
        .status()
        .is_ok_and(|s| s.success());
    if !flag && !plain {
        return npm::skip("the ACP SDK WebSocket test", "this Node.js has no WebSocket");
    }
    let home = Home::new();
    home.scripted(&["text: Hello over a socket".to_string()]);
    let server = home.serve(&[]);
    let token = server.token.clone().expect("a token");
    let mut node = Command::new("node");
    if flag {
        node.arg("--experimental-websocket");
    }
    let output = node
        .arg(sdk.join("ws_check.mjs"))
        .current_dir(&sdk)
        .env("KIWI_ACP_URL", format!("ws://127.0.0.1:{}/api/acp?token={}", server.port, encode(&token)))
        .env("KIWI_API", format!("http://127.0.0.1:{}", server.port))
        .env("KIWI_TOKEN", &token)
        .env("KIWI_WORK", home.work().canonicalize().unwrap())
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&output.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success() && stdout.contains("5 passed, 0 failed"), "{stdout}");
}
