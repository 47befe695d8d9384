//! `kiwi web` and other kiwi processes on one session (`docs/host.md`, `docs/web.md` §3.8): a
//! browser socket on a session a `kiwi --wire` hosts is relayed to that process's `live.sock`
//! (history then live, approvals answered from the browser, prompts run on the host, the
//! host's exit seen as `stopped`, after which the server opens the session itself); a
//! `kiwi --wire -S` attaches to a session `kiwi web` hosts (the browser's turn reaches it, its
//! approval answer wins); the two 409s of REST changes; `session_status` on `live.sock`.

use std::io::{BufRead as _, BufReader};
use std::os::unix::net::UnixStream;
use std::process::Command;

use serde_json::{Value, json};

use super::web_kit::{Home, Server, WAIT, Ws, kinds, shell_script, wait_until};
use crate::common::{Kiwi, SCRUBBED_ENV};

/// `kiwi --wire --session <id>` in the home's work dir, with its default config.
fn wire(home: &Home, id: &str) -> Kiwi {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kiwi"));
    cmd.args(["--wire", "--session", id]).arg("--work-dir").arg(home.work()).current_dir(home.work());
    cmd.env("HOME", home.home()).env("KIMI_SHARE_DIR", home.share());
    for var in SCRUBBED_ENV {
        cmd.env_remove(var);
    }
    Kiwi::spawn(cmd)
}

/// `(state, reason, seq)` of a `session_status` frame.
fn status(m: &Value) -> (String, String, u64) {
    assert_eq!(m["method"], "session_status", "{m}");
    let p = &m["params"];
    (p["state"].as_str().unwrap().into(), p["reason"].as_str().unwrap_or("").into(), p["seq"].as_u64().unwrap())
}

fn prompt(ws: &mut Ws, id: &str, text: &str) {
    ws.send(json!({"jsonrpc": "2.0", "method": "prompt", "id": id, "params": {"user_input": text}}));
}

/// Reads a wire process until a message matches; the messages before it and the match.
fn wire_until(k: &mut Kiwi, mut done: impl FnMut(&Value) -> bool) -> (Vec<Value>, Value) {
    let mut before = Vec::new();
    loop {
        let m = k.next();
        if done(&m) {
            return (before, m);
        }
        before.push(m);
    }
}

fn is_event(m: &Value, kind: &str) -> bool {
    m["method"] == "event" && m["params"]["type"] == kind
}

fn delete(server: &Server, id: &str) -> (u16, Value) {
    let r = server.http("DELETE", &format!("/api/sessions/{id}"), &[], None);
    (r.status, serde_json::from_str(&r.body).unwrap_or(Value::Null))
}

fn archive(server: &Server, id: &str) -> (u16, Value) {
    let body = r#"{"archived": true}"#;
    let r = server.http("PATCH", &format!("/api/sessions/{id}"), &[("Content-Type", "application/json")], Some(body));
    (r.status, serde_json::from_str(&r.body).unwrap_or(Value::Null))
}

#[test]
fn a_browser_joins_a_session_a_wire_process_hosts() {
    let home = Home::new();
    let ran = home.dir.path().join("ran.txt");
    home.scripted(&[
        "text: first".to_string(),
        shell_script("tc-1", &format!("echo ran >> {}", ran.display())),
        "text: done".to_string(),
        "text: from the browser".to_string(),
    ]);
    let id = home.new_session();
    let mut host = wire(&home, &id);
    host.initialize();
    host.prompt("p0", json!("first"));
    let server = home.serve(&[]);

    // The browser: the host's history, the marker, then the host's status.
    let mut browser = server.ws(&id, "", &[]).unwrap();
    let (history, _) = browser.until(|m| m["method"] == "history_complete");
    let history_kinds = kinds(&history);
    assert_eq!(history_kinds.first().map(String::as_str), Some("TurnBegin"), "{history_kinds:?}");
    assert!(history_kinds.contains(&"TurnEnd".to_string()), "{history_kinds:?}");
    let (state, _, first_seq) = status(&browser.next());
    assert_eq!(state, "idle");

    // Changes that need the session here are refused while another process hosts it.
    let hosted_elsewhere = json!({"detail": "Session is hosted by another process"});
    assert_eq!(delete(&server, &id), (409, hosted_elsewhere.clone()));
    assert_eq!(archive(&server, &id), (409, hosted_elsewhere));

    // Frames go to the host as lines: one with line breaks is re-encoded on one line, and a
    // malformed one is answered by the host (to this socket only) with the socket kept.
    browser.send_text("{\n  \"jsonrpc\": \"2.0\",\n  \"id\": \"i1\",\n  \"method\": \"initialize\",\n  \"params\": {\"protocol_version\": \"1.10\"}\n}");
    let (_, init) = browser.until(|m| m["id"] == "i1");
    assert!(init["result"].is_object(), "{init}");
    browser.send_text("not json\nat all");
    let (_, malformed) = browser.until(|m| m.get("error").is_some());
    assert_eq!(malformed["error"]["code"], -32700, "{malformed}");

    // A wire-started turn: its approval reaches the browser, which answers it.
    host.send(json!({"jsonrpc": "2.0", "id": "p1", "method": "prompt", "params": {"user_input": "run it"}}));
    let (_, asked_host) = host.until_request();
    let (live, asked_browser) = browser.until(|m| m["method"] == "request");
    assert_eq!(asked_browser["id"], asked_host["id"]);
    assert_eq!(asked_browser["params"]["type"], "ApprovalRequest");
    let busy = live.iter().find(|m| m["method"] == "session_status").expect("the busy status");
    let (state, _, busy_seq) = status(busy);
    assert_eq!(state, "busy");
    assert!(busy_seq > first_seq);
    let request_id = asked_browser["id"].clone();
    browser
        .send(json!({"jsonrpc": "2.0", "id": request_id, "result": {"request_id": request_id, "response": "approve"}}));
    let (host_turn, answer) = wire_until(&mut host, |m| m["id"] == "p1");
    assert_eq!(answer["result"]["status"], "finished", "{answer}");
    let resolved = host_turn.iter().find(|m| is_event(m, "ApprovalResponse")).expect("the approval's answer");
    assert_eq!(resolved["params"]["payload"]["response"], "approve");
    assert!(host_turn.iter().any(|m| is_event(m, "TurnEnd")));
    let (_, end) = browser.until(|m| m["params"]["type"] == "TurnEnd");
    assert_eq!(end["method"], "event");
    let (_, idle) = browser.until(|m| m["method"] == "session_status");
    assert_eq!(status(&idle).0, "idle");
    assert_eq!(std::fs::read_to_string(&ran).unwrap(), "ran\n", "the command ran once");

    // A prompt from the browser runs on the host.
    prompt(&mut browser, "b1", "hello");
    let (browser_turn, answer) = browser.until(|m| m["id"] == "b1" && m.get("method").is_none());
    assert_eq!(answer["result"]["status"], "finished", "{answer}");
    assert!(kinds(&browser_turn).contains(&"TurnBegin".to_string()), "{:?}", kinds(&browser_turn));
    let (host_saw, _) = wire_until(&mut host, |m| is_event(m, "TurnEnd"));
    let text: String = host_saw
        .iter()
        .filter(|m| is_event(m, "ContentPart"))
        .filter_map(|m| m["params"]["payload"]["text"].as_str())
        .collect();
    assert_eq!(text, "from the browser");
    let begin = host_saw.iter().find(|m| is_event(m, "TurnBegin")).expect("the browser's turn began on the host");
    assert_eq!(begin["params"]["payload"]["user_input"], "hello");

    // The host exits: the browser's stream ends as a stopped session.
    host.close_stdin();
    assert!(host.wait_exit(WAIT).is_some_and(|s| s.success()));
    let (_, stopped) = browser.until(|m| m["method"] == "session_status" && m["params"]["state"] != "idle");
    let (state, reason, seq) = status(&stopped);
    assert_eq!((state.as_str(), reason.as_str()), ("stopped", "stop"));
    assert!(seq > busy_seq);
    assert_eq!(browser.until_closed(), (1001, "Session process exited".to_string()));
    // The lock is free now: the next socket opens the session in the server, history intact.
    let (mut again, history) = server.join(&id);
    assert_eq!(kinds(&history).iter().filter(|k| *k == "TurnEnd").count(), 3, "{:?}", kinds(&history));
    again.initialize("i");
    assert_eq!(server.get_json(&format!("/api/sessions/{id}")).1["is_running"], true);
}

#[test]
fn a_wire_process_attaches_to_a_session_kiwi_web_hosts() {
    let home = Home::new();
    let ran = home.dir.path().join("ran.txt");
    home.scripted(&[shell_script("tc-1", &format!("echo ran >> {}", ran.display())), "text: done".to_string()]);
    let id = home.new_session();
    let server = home.serve(&[]);
    let (mut browser, _) = server.join(&id);
    browser.initialize("b-init");
    let mut attached = wire(&home, &id);
    let init = attached.initialize();
    assert!(init["result"].is_object(), "{init}");

    // Changes that would pull the session from the attached process are refused.
    let other_clients = json!({"detail": "Session has clients in other processes"});
    assert_eq!(delete(&server, &id), (409, other_clients.clone()));
    assert_eq!(archive(&server, &id), (409, other_clients.clone()));
    let patch = server.http(
        "PATCH",
        "/api/config/",
        &[("Content-Type", "application/json")],
        Some(r#"{"default_thinking": true}"#),
    );
    assert_eq!((patch.status, patch.json()), (409, other_clients));

    // The API document lists the 409s.
    let (_, document) = server.get_json("/openapi.json");
    for (path, method) in
        [("/api/sessions/{session_id}", "delete"), ("/api/sessions/{session_id}", "patch"), ("/api/config/", "patch")]
    {
        assert!(document["paths"][path][method]["responses"]["409"].is_object(), "{method} {path}");
    }

    // The browser's turn reaches the attached process; its approval answer wins.
    prompt(&mut browser, "p1", "run it");
    let (before, asked) = wire_until(&mut attached, |m| m["method"] == "request");
    assert!(before.iter().any(|m| is_event(m, "TurnBegin")), "{before:?}");
    let (_, asked_browser) = browser.until(|m| m["method"] == "request");
    assert_eq!(asked["id"], asked_browser["id"]);
    let request_id = asked["id"].clone();
    attached
        .send(json!({"jsonrpc": "2.0", "id": request_id, "result": {"request_id": request_id, "response": "approve"}}));
    let (_, resolved) = browser.until(|m| m["params"]["type"] == "ApprovalResponse");
    assert_eq!(resolved["params"]["payload"]["response"], "approve");
    browser
        .send(json!({"jsonrpc": "2.0", "id": request_id, "result": {"request_id": request_id, "response": "reject"}}));
    let (turn, answer) = browser.until(|m| m["id"] == "p1" && m.get("method").is_none());
    assert_eq!(answer["result"]["status"], "finished", "{answer}");
    let result = turn.iter().find(|m| m["params"]["type"] == "ToolResult").expect("the tool ran");
    assert_eq!(result["params"]["payload"]["return_value"]["is_error"], false, "{result}");
    let (_, end) = wire_until(&mut attached, |m| is_event(m, "TurnEnd"));
    assert_eq!(end["method"], "event");
    assert_eq!(std::fs::read_to_string(&ran).unwrap(), "ran\n", "the command ran once");

    // Once the attached process left, the session may be deleted.
    attached.close_stdin();
    assert!(attached.wait_exit(WAIT).is_some_and(|s| s.success()));
    assert!(wait_until(WAIT, || delete(&server, &id).0 == 200), "deleted once no process is attached");
}

/// Reads `live.sock` lines until one matches; the ones before it and the match.
fn raw_until(
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
    done: impl Fn(&Value) -> bool,
) -> (Vec<Value>, Value) {
    let mut before = Vec::new();
    for line in lines {
        let m: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if done(&m) {
            return (before, m);
        }
        before.push(m);
    }
    panic!("the stream ended; before: {before:?}")
}

fn raw_client(dir: &std::path::Path) -> std::io::Lines<BufReader<UnixStream>> {
    // The folder is too deep for a socket path (`sun_path`): reached through its descriptor.
    let folder = std::fs::File::open(dir).unwrap();
    let fd = std::os::fd::AsRawFd::as_raw_fd(&folder);
    let stream = UnixStream::connect(format!("/proc/self/fd/{fd}/live.sock")).unwrap();
    stream.set_read_timeout(Some(WAIT)).unwrap();
    BufReader::new(stream).lines()
}

#[test]
fn session_status_on_live_sock_after_history_complete_and_on_each_change() {
    let home = Home::new();
    home.scripted(&["text: one".to_string(), "text: two".to_string()]);
    let id = home.new_session();

    // Hosted by `kiwi --wire`: idle/busy from the turn driver.
    let mut host = wire(&home, &id);
    host.initialize();
    let mut raw = raw_client(&home.session_dir(&id));
    raw_until(&mut raw, |m| m["method"] == "history_complete");
    let (_, first) = raw_until(&mut raw, |_| true);
    let (state, reason, seq) = status(&first);
    assert_eq!((state.as_str(), reason.as_str()), ("idle", "start"));
    host.prompt("p0", json!("go"));
    let (_, busy) = raw_until(&mut raw, |m| m["method"] == "session_status");
    let (_, idle) = raw_until(&mut raw, |m| m["method"] == "session_status");
    assert_eq!(status(&busy).0, "busy");
    assert_eq!(status(&idle).0, "idle");
    assert_eq!(status(&idle).1, "prompt_complete");
    assert!(seq < status(&busy).2 && status(&busy).2 < status(&idle).2);
    drop(raw);
    host.close_stdin();
    assert!(host.wait_exit(WAIT).is_some());

    // Hosted by `kiwi web`: the same frames the browser sockets get.
    let server = home.serve(&[]);
    let (mut browser, _) = server.join(&id);
    let mut raw = raw_client(&home.session_dir(&id));
    raw_until(&mut raw, |m| m["method"] == "history_complete");
    let (_, now) = raw_until(&mut raw, |m| m["method"] == "session_status");
    assert_eq!(status(&now).0, "idle");
    prompt(&mut browser, "p1", "again");
    let (_, browser_busy) = browser.until(|m| m["method"] == "session_status" && m["params"]["state"] == "busy");
    let (_, raw_busy) = raw_until(&mut raw, |m| m["method"] == "session_status");
    assert_eq!(raw_busy, browser_busy);
    assert_eq!(status(&raw_busy).0, "busy");
    let (_, raw_idle) = raw_until(&mut raw, |m| m["method"] == "session_status");
    assert_eq!(status(&raw_idle).0, "idle");
}

#[test]
fn a_host_that_cannot_be_reached_keeps_todays_error() {
    let home = Home::new();
    home.scripted(&[]);
    let id = home.new_session();
    let dir = home.session_dir(&id);
    let server = home.serve(&[]);
    // This test process holds the session's lock and serves nothing: a stale file is all there is.
    let folder = std::fs::File::open(&dir).unwrap();
    // SAFETY: flock on a descriptor this test owns.
    let locked = unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(&folder), libc::LOCK_EX | libc::LOCK_NB) };
    assert_eq!(locked, 0);
    std::fs::write(dir.join("live.sock"), "").unwrap();
    let mut browser = server.ws(&id, "", &[]).unwrap();
    let (state, reason, _) = status(&browser.next());
    assert_eq!((state.as_str(), reason.as_str()), ("error", "initialization_failed"));
    assert_eq!(browser.seen[0]["params"]["detail"], format!("Session {id} is in use by another process"));
    assert_eq!(browser.until_closed().0, 1005, "closed without a code, as for a session that cannot start");
    assert_eq!(delete(&server, &id), (409, json!({"detail": "Session is hosted by another process"})));
    // The lock is free again: the next socket opens the session here, and the stale file is
    // replaced by the server's socket.
    drop(folder);
    let (_, history) = server.join(&id);
    assert!(history.is_empty(), "{history:?}");
    use std::os::unix::fs::FileTypeExt as _;
    assert!(std::fs::metadata(dir.join("live.sock")).unwrap().file_type().is_socket());
}
