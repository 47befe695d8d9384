//! The session WebSocket of `kiwi web` against the scripted provider: the reference's
//! transcript (history_complete, the status snapshot, initialize, prompt, the live events, the
//! answer, idle), the handshake refusals, a second client joining mid-turn (history once, then
//! live, the pending approval re-sent), two clients answering one approval (first wins), the
//! busy prompt, the idle cancel, a malformed frame, a client that never reads, a session made
//! over REST starting as a new one, REST changes refused while a turn runs, a config change
//! restarting the running sessions under their sockets, and a socket that dies mid-turn.

use std::time::Duration;

use serde_json::{Value, json};

use super::web_kit::{Home, Ws, kinds, shell_script, wait_until};

fn home_with(scripts: &[String]) -> Home {
    let home = Home::new();
    home.scripted(scripts);
    home
}

fn prompt(ws: &mut Ws, id: &str, text: &str) {
    ws.send(json!({"jsonrpc": "2.0", "method": "prompt", "id": id, "params": {"user_input": text}}));
}

fn status(m: &Value) -> (String, String, u64) {
    assert_eq!(m["method"], "session_status", "{m}");
    let p = &m["params"];
    (p["state"].as_str().unwrap().into(), p["reason"].as_str().unwrap_or("").into(), p["seq"].as_u64().unwrap())
}

#[test]
fn the_reference_transcript() {
    let home = home_with(&["text: Hello web\nid: m1\nusage: input_other=5, output=2".to_string()]);
    let id = home.new_session();
    let server = home.serve(&[]);
    let mut ws = server.ws(&id, "", &[]).unwrap();
    let marker = ws.next();
    assert_eq!(marker["method"], "history_complete");
    assert!(marker["id"].as_str().is_some_and(|s| s.len() == 36), "{marker}");
    let (first, second) = (ws.next(), ws.next());
    assert_eq!(status(&first), ("idle".into(), "start".into(), 1));
    assert_eq!(first, second, "a fresh start: the broadcast and the snapshot");
    assert_eq!(first["params"]["session_id"], id);
    let init = ws.initialize("init-1");
    assert_eq!(init["result"]["protocol_version"], "1.10");
    prompt(&mut ws, "p1", "hello");
    let (before, answer) = ws.until(|m| m["id"] == "p1");
    assert_eq!(answer["result"], json!({"status": "finished"}));
    assert_eq!(status(&before[0]), ("busy".into(), "prompt".into(), 2));
    assert_eq!(kinds(&before[1..]), ["TurnBegin", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd"], "{before:?}");
    assert_eq!(before[1]["params"]["payload"]["user_input"], json!([{"type": "text", "text": "hello"}]));
    assert_eq!(before[3]["params"]["payload"], json!({"type": "text", "text": "Hello web"}));
    assert_eq!(status(&ws.next()), ("idle".into(), "prompt_complete".into(), 3));
    // The first prompt made it the work dir's last session.
    let meta = super::web_kit::read(&home.share().join("kimi.json"));
    assert!(meta.contains(&format!("\"last_session_id\": \"{id}\"")), "{meta}");
    // A reconnect: the history as stored, the marker, one snapshot.
    drop(ws);
    let (mut again, history) = server.join(&id);
    assert_eq!(kinds(&history), ["TurnBegin", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd"]);
    assert_eq!(status(again.seen.last().unwrap()), ("idle".into(), "prompt_complete".into(), 3));
    assert!(again.quiet_for(Duration::from_millis(300)));
}

#[test]
fn handshakes_are_refused_with_403_and_unknown_sessions_close_4004() {
    let home = home_with(&[]);
    let id = home.new_session();
    let server = home.serve(&["--auth-token", "tok"]);
    let refused = |r: Result<Ws, tungstenite::Error>| match r {
        Err(tungstenite::Error::Http(response)) => response.status().as_u16(),
        Err(e) => panic!("{e}"),
        Ok(_) => 101,
    };
    assert_eq!(refused(server.ws_as(&id, "", &[])), 403, "no token");
    assert_eq!(refused(server.ws(&id, "?token=nope", &[])), 403, "wrong token");
    assert_eq!(refused(server.ws_as(&id, "", &[("Authorization", "Bearer tok")])), 403, "the header does not count");
    assert_eq!(refused(server.ws("not-a-uuid", "?token=tok", &[])), 403);
    let evil = [("Origin", "http://evil.example")];
    assert_eq!(refused(server.ws(&id, "?token=tok", &evil)), 403, "origin checked in local mode too");
    let own = [("Origin", "http://localhost:3000")];
    let mut ws = server.ws(&id, "?token=tok", &own).unwrap();
    assert_eq!(ws.next()["method"], "history_complete");
    let mut unknown = server.ws(&uuid::Uuid::new_v4().to_string(), "?token=tok", &[]).unwrap();
    assert_eq!(unknown.until_closed(), (4004, "Session not found".to_string()));
}

#[test]
fn a_second_client_joins_mid_turn_and_the_first_answer_wins() {
    let home = home_with(&[shell_script("tc-1", "echo hi"), "text: done".to_string()]);
    let id = home.new_session();
    let server = home.serve(&[]);
    let (mut a, _) = server.join(&id);
    a.initialize("a-init");
    prompt(&mut a, "p1", "run it");
    let (a_before, request) = a.until(|m| m["method"] == "request");
    assert_eq!(request["params"]["type"], "ApprovalRequest");
    let request_id = request["id"].clone();
    // B joins while the approval waits: the history so far, the marker, then live: the
    // pending request again and the busy snapshot.
    let mut b = server.ws(&id, "", &[]).unwrap();
    let (history, _) = b.until(|m| m["method"] == "history_complete");
    let history_kinds = kinds(&history);
    assert_eq!(history_kinds.first().map(String::as_str), Some("TurnBegin"), "{history_kinds:?}");
    assert!(history_kinds.contains(&"ToolCall".to_string()), "{history_kinds:?}");
    let mut after = Vec::new();
    while !(after.iter().any(|m: &Value| m["method"] == "request")
        && after.iter().any(|m| m["method"] == "session_status"))
    {
        after.push(b.next());
    }
    let resent = after.iter().find(|m| m["method"] == "request").unwrap();
    assert_eq!(resent["id"], request_id);
    let snapshot = after.iter().find(|m| m["method"] == "session_status").unwrap();
    assert_eq!(status(snapshot).0, "busy");
    // B approves first; A's later reject changes nothing.
    b.send(json!({"jsonrpc": "2.0", "id": request_id, "result": {"request_id": request_id, "response": "approve"}}));
    let (_, a_resolved) = a.until(|m| m["params"]["type"] == "ApprovalResponse");
    assert_eq!(a_resolved["params"]["payload"]["response"], "approve");
    a.send(json!({"jsonrpc": "2.0", "id": request_id, "result": {"request_id": request_id, "response": "reject"}}));
    let (a_rest, a_answer) = a.until(|m| m["id"] == "p1");
    let (b_rest, b_answer) = b.until(|m| m["id"] == "p1");
    assert_eq!(a_answer["result"], json!({"status": "finished"}));
    assert_eq!(b_answer, a_answer, "the prompt's answer reaches every client");
    let result = a_rest.iter().find(|m| m["params"]["type"] == "ToolResult").unwrap();
    assert_eq!(result["params"]["payload"]["return_value"]["is_error"], false, "{result}");
    assert_eq!(status(&a.next()).1, "prompt_complete");
    assert_eq!(status(&b.next()).1, "prompt_complete");
    // Nothing doubled at B's seam: one TurnBegin, one ToolCall, one TurnEnd in all it saw.
    let all_b: Vec<Value> = history.iter().chain(after.iter()).chain(b_rest.iter()).cloned().collect();
    let count = |k: &str| kinds(&all_b).iter().filter(|x| *x == k).count();
    assert_eq!((count("TurnBegin"), count("ToolCall"), count("TurnEnd")), (1, 1, 1), "{:?}", kinds(&all_b));
    let a_all: Vec<Value> = a_before.iter().chain(a_rest.iter()).cloned().collect();
    assert_eq!(kinds(&a_all).iter().filter(|k| *k == "TurnEnd").count(), 1);
}

#[test]
fn busy_prompts_idle_cancels_and_malformed_frames() {
    let home = home_with(&[shell_script("tc-1", "echo hi"), "text: done".to_string()]);
    let id = home.new_session();
    let server = home.serve(&[]);
    let (mut a, _) = server.join(&id);
    let (mut b, _) = server.join(&id);
    // An idle cancel is answered by the server, to every client.
    a.send(json!({"jsonrpc": "2.0", "method": "cancel", "id": "c0"}));
    assert_eq!(a.until(|m| m["id"] == "c0").1, json!({"jsonrpc": "2.0", "id": "c0", "result": {}}));
    assert_eq!(b.until(|m| m["id"] == "c0").1["result"], json!({}));
    // A malformed frame: the stdio server's error, to this client only; the socket stays open.
    a.send_text("{not json");
    let error = a.next();
    assert_eq!(error["error"]["code"], -32700, "{error}");
    a.send(json!({"jsonrpc": "2.0", "method": "bogus", "id": "x1"}));
    assert_eq!(a.until(|m| m["id"] == "x1").1["error"]["code"], -32601);
    assert!(b.quiet_for(Duration::from_millis(300)), "B hears nothing of A's mistakes");
    // A prompt while another is in flight: -32000 to its sender only.
    prompt(&mut a, "p1", "run it");
    a.until(|m| m["method"] == "request");
    prompt(&mut b, "p2", "me too");
    let (_, busy) = b.until(|m| m["id"] == "p2");
    assert_eq!(
        busy["error"],
        json!({"code": -32000, "message": "Session is busy; wait for completion before sending a new prompt.", "data": null})
    );
    // A cancel while busy: answered to its sender, then the prompt ends cancelled for all.
    b.send(json!({"jsonrpc": "2.0", "method": "cancel", "id": "c1"}));
    assert_eq!(b.until(|m| m["id"] == "c1").1["result"], json!({}));
    assert_eq!(a.until(|m| m["id"] == "p1").1["result"], json!({"status": "cancelled"}));
    assert_eq!(b.until(|m| m["id"] == "p1").1["result"], json!({"status": "cancelled"}));
    assert!(!a.seen.iter().any(|m| m["id"] == "c1"), "the cancel's answer went to B only");
    assert_eq!(status(&a.next()).0, "idle");
}

#[test]
fn a_client_that_never_reads_is_disconnected_and_the_others_go_on() {
    // Four turns of 5,000 one-kilobyte parts each: far more than a socket may fall behind.
    let part = "x".repeat(1000);
    let script: String = (0..5000).map(|i| format!("text: {i} {part}\n")).collect();
    let home = home_with(&[script.clone(), script.clone(), script.clone(), script]);
    let id = home.new_session();
    let server = home.serve(&[]);
    let (mut slow, _) = server.join(&id);
    let (mut fast, _) = server.join(&id);
    for turn in 0..4 {
        let pid = format!("p{turn}");
        prompt(&mut fast, &pid, "go");
        let (events, answer) = fast.until(|m| m["id"] == pid.as_str());
        assert_eq!(answer["result"], json!({"status": "finished"}), "{answer}");
        let parts = events.iter().filter(|m| m["params"]["type"] == "ContentPart").count();
        assert_eq!(parts, 5000, "the reading client got every part of turn {turn}");
    }
    // The slow client finds what its connection still held, then the end: the 1008 close frame
    // when it could leave, else the connection just ends (issue 30 item 7: a close frame never
    // waits behind a backlog the peer does not read).
    let (code, reason) = slow.until_closed();
    assert!(matches!((code, reason.as_str()), (1008, "Client too slow") | (1006, "")), "{code} {reason}");
    assert!(wait_until(Duration::from_secs(5), || server.http("GET", "/healthz", &[], None).status == 200));
}

#[test]
fn shutdown_closes_every_socket_with_1012() {
    let home = home_with(&[]);
    let id = home.new_session();
    let mut server = home.serve(&[]);
    let (mut a, _) = server.join(&id);
    let status = server.terminate().expect("exits");
    assert!(status.success(), "{status:?}");
    assert_eq!(a.until_closed().0, 1012);
}

#[test]
fn web_settings_never_reach_a_tool() {
    let home = home_with(&[
        shell_script(
            "tc-1",
            "echo tok=$KIMI_WEB_SESSION_TOKEN depth=$KIMI_WEB_MAX_PUBLIC_PATH_DEPTH kiwi=$KIWI_WEB_AUTH_TOKEN",
        ),
        "text: done".to_string(),
    ]);
    let id = home.new_session();
    let port = super::web_kit::free_port().to_string();
    let mut cmd = home.command(&["-p", &port, "--auth-token", "secret-token-1"]);
    cmd.env("KIMI_WEB_SESSION_TOKEN", "secret-env-2").env("KIMI_WEB_MAX_PUBLIC_PATH_DEPTH", "9");
    cmd.env("KIWI_WEB_AUTH_TOKEN", "secret-env-3");
    let server = super::web_kit::Server::start(cmd);
    let mut ws = server.ws(&id, "?token=secret-token-1", &[]).unwrap();
    ws.until(|m| m["method"] == "history_complete");
    ws.initialize("i");
    prompt(&mut ws, "p1", "show me");
    let (_, request) = ws.until(|m| m["method"] == "request");
    let rid = request["id"].clone();
    ws.send(json!({"jsonrpc": "2.0", "id": rid, "result": {"request_id": rid, "response": "approve"}}));
    let (_, result) = ws.until(|m| m["params"]["type"] == "ToolResult");
    let output = result["params"]["payload"]["return_value"]["output"].as_str().unwrap_or_default().to_string();
    assert!(output.contains("tok= depth= kiwi="), "{output}");
    assert!(!output.contains("secret"), "{output}");
}

/// The reference's config file of the kit with `default_plan_mode` on.
fn plan_mode_home(scripts: &[String]) -> Home {
    let home = home_with(scripts);
    let config = home.share().join("config.toml");
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("default_plan_mode = true\n{text}")).unwrap();
    home
}

/// The `plan_mode` of the last `StatusUpdate` among `messages`.
fn plan_mode(messages: &[Value]) -> Option<bool> {
    messages
        .iter()
        .rev()
        .find(|m| m["params"]["type"] == "StatusUpdate")
        .and_then(|m| m["params"]["payload"]["plan_mode"].as_bool())
}

#[test]
fn a_session_made_over_rest_starts_as_a_new_one() {
    let home = plan_mode_home(&["text: hi".to_string()]);
    let server = home.serve(&[]);
    let work = home.work();
    let body = json!({"work_dir": work}).to_string();
    let created = server.http("POST", "/api/sessions/", &[], Some(&body));
    assert_eq!(created.status, 200, "{}", created.body);
    let id = created.json()["session_id"].as_str().unwrap().to_string();
    let (mut ws, _) = server.join(&id);
    ws.initialize("i1");
    prompt(&mut ws, "p1", "hello");
    let (events, answer) = ws.until(|m| m["id"] == "p1");
    assert_eq!(answer["result"], json!({"status": "finished"}), "{answer}");
    assert_eq!(plan_mode(&events), Some(true), "default_plan_mode applies to a new session: {events:?}");
    // A session with a state file is a resumed one: the default leaves it alone.
    let resumed = home.new_session();
    std::fs::write(home.session_dir(&resumed).join("state.json"), "{}").unwrap();
    let (mut ws, _) = server.join(&resumed);
    ws.initialize("i2");
    prompt(&mut ws, "p2", "hello");
    let (events, _) = ws.until(|m| m["id"] == "p2");
    assert_eq!(plan_mode(&events), Some(false), "{events:?}");
}

fn upload(server: &super::web_kit::Server, id: &str) -> super::web_kit::Response {
    let body = "--XBOUNDX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.txt\"\r\n\
                Content-Type: text/plain\r\n\r\nhello\r\n--XBOUNDX--\r\n";
    let headers = [("Content-Type", "multipart/form-data; boundary=XBOUNDX")];
    server.http("POST", &format!("/api/sessions/{id}/files"), &headers, Some(body))
}

#[test]
fn rest_changes_are_refused_while_a_turn_runs() {
    let home = home_with(&[shell_script("tc-1", "echo hi"), "text: done".to_string()]);
    let id = home.new_session();
    let server = home.serve(&[]);
    let (mut ws, _) = server.join(&id);
    ws.initialize("i1");
    prompt(&mut ws, "p1", "run it");
    let (_, request) = ws.until(|m| m["method"] == "request");
    let busy = "Session is busy. Please wait for it to complete before modifying.";
    let path = format!("/api/sessions/{id}");
    let refused = [
        ("PATCH", path.clone(), Some(r#"{"title": "x"}"#)),
        ("DELETE", path.clone(), None),
        ("POST", format!("{path}/fork"), Some(r#"{"turn_index": 0}"#)),
        ("POST", format!("{path}/generate-title"), Some("{}")),
    ];
    for (method, url, body) in &refused {
        let r = server.http(method, url, &[], *body);
        assert_eq!((r.status, r.json()["detail"].as_str()), (400, Some(busy)), "{method} {url}: {}", r.body);
    }
    let r = upload(&server, &id);
    assert_eq!((r.status, r.json()["detail"].as_str()), (400, Some(busy)), "upload: {}", r.body);
    // Reading is fine while busy; the session is untouched.
    let (st, got) = server.get_json(&path);
    assert_eq!(
        (st, got["session_id"].as_str(), got["status"]["state"].as_str()),
        (200, Some(id.as_str()), Some("busy"))
    );
    assert_ne!(got["title"], "x");
    assert!(home.session_dir(&id).is_dir());
    // Once the turn is over the same changes go through.
    let request_id = request["id"].clone();
    ws.send(json!({"jsonrpc": "2.0", "id": request_id, "result": {"request_id": request_id, "response": "approve"}}));
    let (_, answer) = ws.until(|m| m["id"] == "p1");
    assert_eq!(answer["result"], json!({"status": "finished"}));
    assert_eq!(status(&ws.next()).0, "idle");
    let r = server.http("PATCH", &path, &[], Some(r#"{"title": "Renamed"}"#));
    assert_eq!((r.status, r.json()["title"].as_str()), (200, Some("Renamed")), "{}", r.body);
    assert_eq!(upload(&server, &id).status, 200);
}

#[test]
fn a_config_change_restarts_running_sessions_under_their_sockets() {
    let home = home_with(&[shell_script("tc-1", "echo hi"), "text: done".to_string()]);
    let idle_id = home.new_session();
    let busy_id = home.new_session();
    let server = home.serve(&[]);
    let (mut idle, _) = server.join(&idle_id);
    idle.initialize("i1");
    let (mut busy, _) = server.join(&busy_id);
    busy.initialize("i2");
    prompt(&mut busy, "p1", "run it");
    let (_, request) = busy.until(|m| m["method"] == "request");

    let r = server.http("PATCH", "/api/config/", &[], Some("{}"));
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    assert_eq!(v["restarted_session_ids"], json!([idle_id]));
    assert_eq!(v["skipped_busy_session_ids"], json!([busy_id]));
    // The idle session's socket stays open and hears the restart.
    let restarting = idle.next();
    assert_eq!(status(&restarting).0, "restarting");
    assert_eq!(status(&restarting).1, "config_update");
    let done = idle.next();
    let (state, reason, _) = status(&done);
    assert_eq!((state.as_str(), reason.as_str()), ("idle", "config_update"));
    assert!(done["params"]["detail"].as_str().unwrap().starts_with("restart_ms="), "{done}");
    assert_ne!(done["params"]["worker_id"], restarting["params"]["worker_id"], "a new run");
    let notice = idle.next();
    assert_eq!(notice["params"]["type"], "SessionNotice", "{notice}");
    assert_eq!(notice["params"]["payload"]["reason"], "config_update");
    assert!(
        notice["params"]["payload"]["text"]
            .as_str()
            .unwrap()
            .starts_with("Session restarted due to config update \u{b7} ")
    );
    // The restarted session answers prompts on the same socket (each session reads its scripts
    // from the first: this one is asked to run a command again).
    prompt(&mut idle, "p2", "again");
    let (_, again) = idle.until(|m| m["method"] == "request");
    assert_eq!(again["params"]["type"], "ApprovalRequest", "the restarted session was initialized again");

    // A forced change restarts the busy one too: its prompt is lost, its socket stays.
    let r = server.http("PATCH", "/api/config/", &[], Some(r#"{"force_restart_busy_sessions": true}"#));
    assert_eq!(r.status, 200, "{}", r.body);
    let mut restarted = r.json()["restarted_session_ids"].as_array().unwrap().clone();
    restarted.sort_by_key(|v| v.as_str().unwrap().to_string());
    let mut both = vec![json!(idle_id), json!(busy_id)];
    both.sort_by_key(|v| v.as_str().unwrap().to_string());
    assert_eq!(restarted, both);
    let (_, done) = busy.until(|m| m["method"] == "session_status" && m["params"]["state"] == "idle");
    assert_eq!(done["params"]["reason"], "config_update");
    assert_eq!(busy.next()["params"]["type"], "SessionNotice");
    assert!(!busy.seen.iter().any(|m| m["id"] == "p1" && m.get("method").is_none()), "the lost prompt gets no answer");
    assert!(!busy.seen.iter().any(|m| m["params"]["type"] == "ApprovalResponse"), "{request}");
    let r = server.http("GET", &format!("/api/sessions/{busy_id}"), &[], None);
    assert_eq!(r.json()["status"]["state"], "idle");
    prompt(&mut busy, "p3", "hello");
    let (_, asked) = busy.until(|m| m["method"] == "request");
    let asked_id = asked["id"].clone();
    busy.send(json!({"jsonrpc": "2.0", "id": asked_id, "result": {"request_id": asked_id, "response": "approve"}}));
    let (_, answer) = busy.until(|m| m["id"] == "p3" && m.get("method").is_none());
    assert_eq!(answer["result"], json!({"status": "finished"}), "{answer}");
}

#[test]
fn a_socket_that_dies_mid_turn_never_holds_up_the_others() {
    let home = home_with(&[shell_script("tc-1", "echo hi"), "text: done".to_string()]);
    let id = home.new_session();
    let server = home.serve(&[]);
    let (mut live, _) = server.join(&id);
    live.initialize("i1");
    let (mut dead, _) = server.join(&id);
    prompt(&mut live, "p1", "run it");
    let (_, request) = live.until(|m| m["method"] == "request");
    let (_, asked) = dead.until(|m| m["method"] == "request");
    assert_eq!(asked["id"], request["id"], "both were asked");
    // The second client's connection goes away without a close handshake while it is asked.
    let _ = dead.socket.get_mut().shutdown(std::net::Shutdown::Both);
    drop(dead);
    let request_id = request["id"].clone();
    live.send(json!({"jsonrpc": "2.0", "id": request_id, "result": {"request_id": request_id, "response": "approve"}}));
    let (events, answer) = live.until(|m| m["id"] == "p1" && m.get("method").is_none());
    assert_eq!(answer["result"], json!({"status": "finished"}), "{answer}");
    assert!(events.iter().any(|m| m["params"]["type"] == "ToolResult"), "{events:?}");
    assert_eq!(status(&live.next()).1, "prompt_complete");
    // The session goes on for a new client, which replays the whole turn.
    let (_, history) = server.join(&id);
    assert_eq!(kinds(&history).iter().filter(|k| *k == "TurnEnd").count(), 1);
}

/// The server's open sockets (its descriptors that are sockets).
fn open_sockets(pid: i32) -> usize {
    let Ok(entries) = std::fs::read_dir(format!("/proc/{pid}/fd")) else { return 0 };
    entries
        .filter_map(Result::ok)
        .filter(|e| std::fs::read_link(e.path()).is_ok_and(|t| t.to_string_lossy().starts_with("socket:")))
        .count()
}

/// Issue 30 item 7: a peer that joins and then never reads is dropped by the server (its write
/// is bounded in time) instead of holding its connection and everything queued for it for ever.
#[test]
fn a_peer_that_stops_reading_is_dropped_while_it_stays_silent() {
    let home = home_with(&[]);
    let id = home.new_session();
    // A history far larger than what the connection's buffers hold (~40 MB).
    let mut text = String::from("{\"type\": \"metadata\", \"protocol_version\": \"1.10\"}\n");
    text.push_str(
        "{\"timestamp\": 1.0, \"message\": {\"type\": \"TurnBegin\", \"payload\": {\"user_input\": \"go\"}}}\n",
    );
    let part = "y".repeat(400);
    for n in 0..100_000 {
        text.push_str(&format!(
            "{{\"timestamp\": 1.5, \"message\": {{\"type\": \"ContentPart\", \"payload\": {{\"type\": \"text\", \"text\": \"{n} {part}\"}}}}}}\n"
        ));
    }
    std::fs::write(home.session_dir(&id).join("wire.jsonl"), text).unwrap();
    let server = home.serve(&[]);
    let before = open_sockets(server.pid());
    let silent = server.ws(&id, "", &[]).unwrap();
    // The session it opened stays open, listening on its `live.sock`: one socket more.
    let listening = home.session_dir(&id).join("live.sock");
    assert!(wait_until(super::web_kit::WAIT, || listening.exists()), "the session is served");
    assert!(open_sockets(server.pid()) > before + 1, "the connection is open");
    let dropped = wait_until(super::web_kit::WAIT * 2, || open_sockets(server.pid()) <= before + 1);
    assert!(dropped, "the silent peer's connection is still held");
    assert_eq!(server.http("GET", "/healthz", &[], None).status, 200);
    drop(silent);
}

/// Closes a client's socket with the close handshake.
fn leave(mut ws: Ws) {
    let _ = ws.socket.close(None);
    ws.until_closed();
}

#[test]
fn deleted_sessions_close_4004_also_when_the_deletion_races_the_connection() {
    let home = home_with(&[]);
    let server = home.serve(&[]);
    let id = home.new_session();
    assert_eq!(server.http("DELETE", &format!("/api/sessions/{id}"), &[], None).status, 200);
    let mut late = server.ws(&id, "", &[]).unwrap();
    assert_eq!(late.until_closed(), (4004, "Session not found".to_string()));
    // Sockets connecting while the session is deleted: each one either joined before the
    // deletion (then it hears `stopped` and closes 1001) or finds it gone (4004); none keeps
    // the session open, and nothing brings its folder back.
    for round in 0..8 {
        let body = json!({"work_dir": home.work()}).to_string();
        let created = server.http("POST", "/api/sessions/", &[], Some(&body));
        let id = created.json()["session_id"].as_str().unwrap().to_string();
        let port = server.port;
        let sid = id.clone();
        let query =
            server.token.as_deref().map(|t| format!("?token={}", super::web_kit::encode(t))).unwrap_or_default();
        let connecting = std::thread::spawn(move || {
            use tungstenite::client::IntoClientRequest as _;
            let stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
            let request =
                format!("ws://127.0.0.1:{port}/api/sessions/{sid}/stream{query}").into_client_request().unwrap();
            let (socket, _) = tungstenite::client(request, stream).map_err(|_| "handshake failed").unwrap();
            Ws { socket, seen: Vec::new(), closed: None }.until_closed()
        });
        let deleted = server.http("DELETE", &format!("/api/sessions/{id}"), &[], None);
        assert_eq!(deleted.status, 200, "round {round}: {}", deleted.body);
        let (code, reason) = connecting.join().unwrap();
        assert!(
            (code, reason.as_str()) == (4004, "Session not found")
                || (code, reason.as_str()) == (1001, "Session process exited"),
            "round {round}: {code} {reason}"
        );
        assert!(!home.session_dir(&id).exists(), "round {round}: the deleted session came back");
        assert_eq!(server.get_json(&format!("/api/sessions/{id}")).1, Value::Null);
    }
}

#[test]
fn a_client_that_leaves_mid_approval_does_not_pin_the_session() {
    let home = home_with(&[shell_script("tc-1", "echo hi"), shell_script("tc-2", "echo again")]);
    let path = |id: &str| format!("/api/sessions/{id}");
    // Left mid-approval, then deleted: the turn is cancelled and the session goes.
    let id = home.new_session();
    let server = home.serve(&[]);
    let (mut ws, _) = server.join(&id);
    ws.initialize("i1");
    prompt(&mut ws, "p1", "run it");
    ws.until(|m| m["method"] == "request");
    let r = server.http("DELETE", &path(&id), &[], None);
    assert_eq!(r.status, 400, "a client is still there to answer: {}", r.body);
    leave(ws);
    let mut last = None;
    assert!(
        wait_until(Duration::from_secs(10), || {
            let r = server.http("DELETE", &path(&id), &[], None);
            last = Some((r.status, r.body));
            last.as_ref().is_some_and(|(s, _)| *s == 200)
        }),
        "{last:?}"
    );
    assert!(!home.session_dir(&id).exists());
    let mut gone = server.ws(&id, "", &[]).unwrap();
    assert_eq!(gone.until_closed(), (4004, "Session not found".to_string()));

    // Left mid-approval, then a new socket joins: it is asked again and can cancel the turn.
    let other = home.new_session();
    let (mut first, _) = server.join(&other);
    first.initialize("i1");
    prompt(&mut first, "p1", "run it");
    let (_, asked) = first.until(|m| m["method"] == "request");
    leave(first);
    let (mut second, _) = server.join(&other);
    let (_, again) = second.until(|m| m["method"] == "request");
    assert_eq!(again["id"], asked["id"], "the pending request is put to the new socket");
    let (_, cancelled) = second.call("c1", "cancel", json!({}));
    assert_eq!(cancelled["result"], json!({}), "{cancelled}");
    let (_, idle) = second.until(|m| m["method"] == "session_status" && m["params"]["state"] == "idle");
    assert_eq!(idle["params"]["session_id"], other.as_str());
    let r = server.http("DELETE", &path(&other), &[], None);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(second.until_closed(), (1001, "Session process exited".to_string()));
}

/// kiwi's additions for its own UI reach only clients that ask (`docs/compatibility.md`): a
/// socket granted `tool_output` gets a running command's lines as `ToolOutput` events, one that
/// asks nothing gets the reference's frames; the answered approval and the stopped turn are kept
/// on the records (kiwi's members) and served by `GET …/kiwi-marks`, never in the history frames.
#[test]
fn kiwi_additions_reach_only_the_sockets_and_calls_that_ask() {
    let home = home_with(&[
        shell_script("tc-1", "echo one; echo two"),
        "text: done".to_string(),
        shell_script("tc-2", "echo never"),
    ]);
    let id = home.new_session();
    let server = home.serve(&[]);
    let (mut asks, _) = server.join(&id);
    let (mut plain, _) = server.join(&id);
    let params = json!({"protocol_version": "1.10", "extensions": ["tool_output"]});
    let (_, granted) = asks.call("a-init", "initialize", params);
    assert_eq!(granted["result"]["extensions"], json!(["tool_output"]), "{granted}");
    plain.initialize("b-init");
    prompt(&mut asks, "p1", "run it");
    let (_, request) = asks.until(|m| m["method"] == "request");
    let request_id = request["id"].clone();
    asks.send(json!({"jsonrpc": "2.0", "id": request_id, "result": {"request_id": request_id, "response": "approve"}}));
    let (seen, _) = asks.until(|m| m["id"] == "p1");
    let text: String = seen
        .iter()
        .filter(|m| m["params"]["type"] == "ToolOutput")
        .map(|m| m["params"]["payload"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "one\ntwo\n", "{:?}", kinds(&seen));
    let (plain_seen, _) = plain.until(|m| m["id"] == "p1");
    assert!(!kinds(&plain_seen).contains(&"ToolOutput".to_string()), "{:?}", kinds(&plain_seen));
    let marks = |server: &super::web_kit::Server| server.get_json(&format!("/api/sessions/{id}/kiwi-marks"));
    assert_eq!(
        marks(&server),
        (
            200,
            json!({"approvals": [{"turn_index": 0, "tool_call_id": "tc-1", "response": "approve", "feedback": ""}], "stopped": []})
        )
    );
    // The second turn is stopped while its approval waits.
    prompt(&mut plain, "p2", "again");
    plain.until(|m| m["method"] == "request");
    plain.call("c1", "cancel", json!({}));
    plain.until(|m| m["id"] == "p2");
    assert!(wait_until(Duration::from_secs(10), || marks(&server).1["stopped"] == json!([1])), "{:?}", marks(&server));
    assert_eq!(
        marks(&server).1["approvals"].as_array().unwrap().len(),
        1,
        "the cancel's reject has no result to sit on"
    );
    // The record holds the marks as kiwi's members; a joining socket's history frames do not.
    let record = std::fs::read_to_string(home.session_dir(&id).join("wire.jsonl")).unwrap();
    assert!(record.contains(r#""kiwi_approval": {"response": "approve", "feedback": ""}"#), "{record}");
    assert!(record.contains(r#""kiwi_stopped": true"#), "{record}");
    assert!(!record.contains("ToolOutput"), "{record}");
    let (_, history) = server.join(&id);
    assert!(history.iter().all(|m| !m.to_string().contains("kiwi_")), "{history:?}");
    let (status, body) = server.get_json(&format!("/api/sessions/{}/kiwi-marks", uuid::Uuid::new_v4()));
    assert_eq!((status, body), (404, json!({"detail": "Session not found"})));
}

/// A print run marks the session it creates (`origin.json`); the session list names it only for
/// a client that asks with `kiwi_origin`, and a print run that resumes a session marks nothing.
#[test]
fn print_runs_are_marked_and_listed_only_when_asked() {
    let home = home_with(&["text: from print".to_string(), "text: resumed".to_string()]);
    let own = home.new_session();
    let print = |extra: &[&str]| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kiwi"));
        cmd.args(["--print", "-p", "hi", "--work-dir"]).arg(home.work()).args(extra);
        cmd.env("HOME", home.home()).env("KIMI_SHARE_DIR", home.share());
        for var in crate::common::SCRUBBED_ENV {
            cmd.env_remove(var);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    };
    print(&[]);
    print(&["--session", &own]);
    assert!(!home.session_dir(&own).join("origin.json").exists(), "a resumed session is not marked");
    let server = home.serve(&[]);
    let (status, plain) = server.get_json("/api/sessions/");
    assert_eq!(status, 200);
    assert_eq!(plain.as_array().unwrap().len(), 2, "{plain}");
    assert!(plain.as_array().unwrap().iter().all(|s| s.get("kiwi_origin").is_none()), "{plain}");
    let (_, asked) = server.get_json("/api/sessions/?kiwi_origin=1");
    let origins: Vec<(bool, Value)> =
        asked.as_array().unwrap().iter().map(|s| (s["session_id"] == own.as_str(), s["kiwi_origin"].clone())).collect();
    assert!(origins.contains(&(true, Value::Null)) && origins.contains(&(false, json!("print"))), "{asked}");
    let made = asked.as_array().unwrap().iter().find(|s| s["session_id"] != own.as_str()).unwrap();
    let marker = std::fs::read_to_string(home.session_dir(made["session_id"].as_str().unwrap()).join("origin.json"));
    assert_eq!(marker.unwrap(), r#"{"origin":"print","dialect":"kimi"}"#);
}

/// A `replay` longer than the socket's queue (8,192 frames) is paced by the socket, never closed
/// as too slow, and answered to the requesting socket only; the history of a joining socket
/// comes from the same streamed replay, as stored.
#[test]
fn a_replay_longer_than_the_socket_queue_arrives_whole() {
    let home = home_with(&[]);
    let id = home.new_session();
    let events = 10_000;
    let mut text = String::from("{\"type\": \"metadata\", \"protocol_version\": \"1.10\"}\n");
    text.push_str(
        "{\"timestamp\": 1.0, \"message\": {\"type\": \"TurnBegin\", \"payload\": {\"user_input\": \"go\"}}}\n",
    );
    for n in 0..events - 2 {
        text.push_str(&format!(
            "{{\"timestamp\": 1.5, \"message\": {{\"type\": \"ContentPart\", \"payload\": {{\"type\": \"text\", \"text\": \"part {n}\"}}}}}}\n"
        ));
    }
    text.push_str("{\"timestamp\": 2.0, \"message\": {\"type\": \"TurnEnd\", \"payload\": {}}}\n");
    std::fs::write(home.session_dir(&id).join("wire.jsonl"), text).unwrap();
    let server = home.serve(&[]);
    let (mut a, history) = server.join(&id);
    assert_eq!(history.len(), events);
    assert_eq!(history[1]["params"]["payload"]["text"], "part 0");
    let (mut b, _) = server.join(&id);
    a.send(json!({"jsonrpc": "2.0", "method": "replay", "id": "r1"}));
    let (replayed, answer) = a.until(|m| m["id"] == "r1");
    assert_eq!(answer["result"], json!({"status": "finished", "events": events, "requests": 0}), "{answer}");
    // (The first join started the session: its second `idle`/`start` status is still queued.)
    let replayed: Vec<&Value> = replayed.iter().filter(|m| m["method"] != "session_status").collect();
    assert_eq!(replayed.len(), events);
    assert_eq!(replayed[events - 2]["params"]["payload"]["text"], format!("part {}", events - 3));
    // The other socket saw none of it, and both sockets are still served.
    prompt(&mut b, "p1", "hi");
    let (seen, _) = b.until(|m| m["id"] == "p1" && m.get("method").is_none());
    assert!(
        seen.iter().all(|m| m["method"] != "event"
            || m["params"]["type"] != "ContentPart"
            || !m["params"]["payload"]["text"].as_str().is_some_and(|t| t.starts_with("part "))),
        "{seen:?}"
    );
    a.until(|m| m["id"] == "p1" && m.get("method").is_none());
}
