//! One session, two processes (`docs/host.md`): a `kiwi --wire` holding a session serves it on
//! `<session dir>/live.sock`, and a second `kiwi --wire -S` on the same session attaches to it
//! instead of failing: approvals reach both (first answer wins, the command runs once), both see
//! the turn end, a prompt while the other's turn runs is refused, the attacher's external tools
//! are rejected with the reason, and its `replay` returns the history up to its attach. The socket is owner-only in an owner-only folder, a stale file
//! is replaced, and the file goes when the host exits.

use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Env, Kiwi, wait_until};

fn shell(command: &str) -> String {
    let args = json!({"command": command}).to_string();
    format!("tool_call: {}", json!({"id": "tc-1", "name": "Shell", "arguments": args}))
}

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// Each file of a folder with its length and modification time.
fn listing(dir: &std::path::Path) -> Vec<(String, u64, std::time::SystemTime)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let meta = e.metadata().unwrap();
            (e.file_name().to_string_lossy().into_owned(), meta.len(), meta.modified().unwrap())
        })
        .collect();
    files.sort();
    files
}

/// Reads until an event of `kind`; the messages before it.
fn until_event(k: &mut Kiwi, kind: &str) -> Vec<Value> {
    let mut before = Vec::new();
    loop {
        let m = k.next();
        if m["method"] == "event" && m["params"]["type"] == kind {
            return before;
        }
        before.push(m);
    }
}

#[test]
fn a_second_wire_process_joins_the_session_of_the_first() {
    let env = Env::new();
    let ran = env.dir.path().join("ran.txt");
    let command = format!("echo ran >> {}", ran.display());
    let config = env.scripted_config(&["text: first", &shell(&command), "text: done", "text: again"]);
    let mut host = env.spawn(&config, &["--session", "shared"]);
    host.initialize();
    let (first_turn, _) = host.prompt("p0", json!("first"));
    let first_events = first_turn.iter().filter(|m| m["method"] == "event").count();
    let mut attached = env.spawn(&config, &["--session", "shared"]);
    let tool = json!({"name": "mine", "description": "d", "parameters": {"type": "object", "properties": {}}});
    let (_, init) = attached.call("init", "initialize", json!({"protocol_version": "1.10", "external_tools": [tool]}));
    assert_eq!(
        init["result"]["external_tools"],
        json!({"accepted": [], "rejected": [{"name": "mine", "reason": "session is hosted by another process"}]}),
        "{init}"
    );

    host.send(json!({"jsonrpc": "2.0", "id": "p1", "method": "prompt", "params": {"user_input": "run it"}}));
    let (_, asked_host) = host.until_request();
    let (_, asked_attached) = attached.until_request();
    assert_eq!(asked_host["id"], asked_attached["id"]);
    assert_eq!(asked_attached["params"]["type"], "ApprovalRequest");

    // The host's turn waits for the approval: the attacher's prompt is refused, to it only.
    let (_, busy) = attached.call("b1", "prompt", json!({"user_input": "me too"}));
    assert_eq!(busy["error"]["code"], -32000, "{busy}");
    // Its `replay` works meanwhile and returns the history as it stood when it attached.
    let (_, replayed) = attached.call("r1", "replay", json!({}));
    assert_eq!(replayed["result"]["status"], "finished", "{replayed}");
    assert_eq!(replayed["result"]["events"], first_events, "{replayed}");

    let id = asked_attached["id"].clone();
    attached.send(json!({"jsonrpc": "2.0", "id": id, "result": {"request_id": id, "response": "approve"}}));
    let (_, answer) = host.until_response(&json!("p1"));
    assert_eq!(answer["result"]["status"], "finished", "{answer}");
    until_event(&mut attached, "TurnEnd");
    assert_eq!(std::fs::read_to_string(&ran).unwrap(), "ran\n", "the command ran once");
    // No response to the host's `p1` reached the attacher: its ids are its own.
    assert!(!attached.seen.iter().any(|m| m.get("method").is_none() && m["id"] == "p1"));

    // The attacher may start the next turn now; the host sees its events.
    let (_, mine) = attached.prompt("b2", json!("again"));
    assert_eq!(mine["result"]["status"], "finished", "{mine}");
    until_event(&mut host, "TurnEnd");
}

#[test]
fn the_socket_is_owner_only_and_a_stale_one_is_replaced() {
    let env = Env::new();
    let config = env.scripted_config(&["text: a"]);
    let dir = env.session_dir("stale");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let socket = dir.join("live.sock");
    // What a crashed host leaves behind: a socket file nobody listens on.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    assert!(std::os::unix::net::UnixStream::connect(&socket).is_err());

    let mut host = env.spawn(&config, &["--session", "stale"]);
    host.initialize();
    assert_eq!(mode(&dir), 0o700);
    assert!(std::fs::metadata(&socket).unwrap().file_type().is_socket());
    assert_eq!(mode(&socket), 0o600);
    let before = listing(&dir);
    let mut attached = env.spawn(&config, &["--session", "stale"]);
    let (_, init) = attached.call("init", "initialize", json!({"protocol_version": "1.10"}));
    assert_eq!(init["result"]["protocol_version"], "1.10", "{init}");
    // A line that is no message gets the stdio server's error, and the connection stays.
    attached.send_raw("{not json");
    let error = attached.next();
    assert_eq!(error["error"]["code"], -32700, "{error}");
    let (_, replayed) = attached.call("r", "replay", json!({}));
    assert_eq!(replayed["result"]["status"], "finished", "{replayed}");

    attached.close_stdin();
    assert!(attached.wait_exit(Duration::from_secs(20)).is_some(), "the attacher outlived its client");
    assert_eq!(listing(&dir), before, "the attacher wrote to the session folder");
    host.close_stdin();
    assert!(host.wait_exit(Duration::from_secs(20)).is_some());
    assert!(wait_until(Duration::from_secs(5), || !socket.exists()), "the socket outlived its host");
}

#[test]
fn an_unreachable_host_keeps_todays_error_and_names_the_reason() {
    let env = Env::new();
    let config = env.scripted_config(&["text: a"]);
    let mut host = env.spawn(&config, &["--session", "shared"]);
    host.initialize();
    std::fs::remove_file(env.session_dir("shared").join("live.sock")).unwrap();
    let out = env.command(&config, &["--session", "shared"]).stdin(std::process::Stdio::null()).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("Cannot attach to session shared: "), "{stderr}");
    assert!(stderr.contains("Session shared is in use by another process"), "{stderr}");
    assert!(out.stdout.is_empty());
    let (_, r) = host.prompt("p", json!("still mine"));
    assert_eq!(r["result"]["status"], "finished");
}
