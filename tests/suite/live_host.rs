//! One session, two processes (`docs/host.md`): a `kiwi --wire` holding a session serves it on
//! `<session dir>/live.sock`, and a second `kiwi --wire -S` on the same session attaches to it
//! instead of failing: approvals reach both (first answer wins, the command runs once), both see
//! the turn end, a prompt while the other's turn runs is refused, the attacher's external tools
//! are rejected with the reason, its `initialize` is answered from its own config, and its
//! `replay` returns the history up to its attach. The socket is owner-only in an owner-only
//! folder, a stale file is replaced, and the file goes when the host exits. When the host goes
//! away (its client left, or `kill -9`), an attacher takes the session over or attaches to the
//! one that did, and its client goes on without an error frame.

use std::os::unix::fs::{FileTypeExt as _, PermissionsExt as _};
use std::time::Duration;

use serde_json::{Value, json};

use crate::common::{Env, Kiwi, types, wait_until};

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

/// No message the client got is an error frame.
fn no_errors(k: &Kiwi) {
    let errors: Vec<&Value> = k.seen.iter().filter(|m| m.get("error").is_some()).collect();
    assert!(errors.is_empty(), "{errors:?}");
}

/// The texts of a turn's `ContentPart` events.
fn texts(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m["method"] == "event" && m["params"]["type"] == "ContentPart")
        .filter_map(|m| m["params"]["payload"]["text"].as_str().map(str::to_string))
        .collect()
}

/// The host leaves (its client closed stdin) while its turn waits for an approval: the attacher's
/// client sees that turn end, then this process takes the session over with its own config (its
/// own scripts answer the next prompt) and serves the socket (a third process attaches to it).
/// The approval of the old host, answered late, is ignored without an error frame.
#[test]
fn the_host_leaving_hands_the_session_to_its_attacher() {
    let env = Env::new();
    let ran = env.dir.path().join("ran.txt");
    let host_config = env.named_scripted_config("host", &[shell(&format!("echo ran >> {}", ran.display()))], json!({}));
    let mine = env.named_scripted_config("mine", &["text: mine", "text: for the third"], json!({}));
    let mut host = env.spawn(&host_config, &["--session", "shared"]);
    host.initialize();
    host.send(json!({"jsonrpc": "2.0", "id": "p1", "method": "prompt", "params": {"user_input": "run it"}}));
    host.until_request();
    let mut attached = env.spawn(&mine, &["--session", "shared"]);
    attached.call("init", "initialize", json!({"protocol_version": "1.10"}));
    let (_, asked) = attached.until_request();

    host.close_stdin();
    until_event(&mut attached, "TurnEnd");
    assert!(host.wait_exit(Duration::from_secs(20)).is_some(), "the host outlived its client");
    let id = asked["id"].clone();
    attached.send(json!({"jsonrpc": "2.0", "id": id, "result": {"request_id": id, "response": "approve"}}));
    let (events, answer) = attached.prompt("p2", json!("again"));
    assert_eq!(answer["result"]["status"], "finished", "{answer}");
    assert_eq!(texts(&events), ["mine"]);
    assert!(!ran.exists(), "the cancelled turn's command ran");

    // This process hosts the session now: a third one attaches to it, and its turn runs here.
    let mut third = env.spawn(&host_config, &["--session", "shared"]);
    third.call("init", "initialize", json!({"protocol_version": "1.10"}));
    let (events, answer) = third.prompt("t1", json!("third"));
    assert_eq!(answer["result"]["status"], "finished", "{answer}");
    assert_eq!(texts(&events), ["for the third"]);
    until_event(&mut attached, "TurnEnd");
    no_errors(&attached);
    no_errors(&third);
}

/// kill -9 of the host while the attacher's own prompt waits for an approval: its client gets
/// the turn's end and the cancelled turn's answer, then its next prompt runs in this process.
#[test]
fn a_killed_host_ends_the_attachers_turn_and_the_attacher_takes_over() {
    let env = Env::new();
    let ran = env.dir.path().join("ran.txt");
    let host_config = env.named_scripted_config("host", &[shell(&format!("echo ran >> {}", ran.display()))], json!({}));
    let mine = env.named_scripted_config("mine", &["text: after the kill"], json!({}));
    let mut host = env.spawn(&host_config, &["--session", "shared"]);
    host.initialize();
    let mut attached = env.spawn(&mine, &["--session", "shared"]);
    attached.call("init", "initialize", json!({"protocol_version": "1.10"}));
    attached.send(json!({"jsonrpc": "2.0", "id": "a1", "method": "prompt", "params": {"user_input": "run it"}}));
    host.until_request();
    attached.until_request();

    host.child.kill().unwrap();
    host.child.wait().unwrap();
    let (before, answer) = attached.until_response(&json!("a1"));
    assert_eq!(answer["result"], json!({"status": "cancelled"}), "{answer}");
    assert!(before.iter().any(|m| m["method"] == "event" && m["params"]["type"] == "TurnEnd"), "{before:?}");
    let (events, answer) = attached.prompt("a2", json!("again"));
    assert_eq!(answer["result"]["status"], "finished", "{answer}");
    assert_eq!(texts(&events), ["after the kill"]);
    assert!(!ran.exists());
    no_errors(&attached);
    let socket = env.session_dir("shared").join("live.sock");
    assert!(std::os::unix::net::UnixStream::connect(&socket).is_ok(), "nobody serves the session's socket");
}

/// Two attachers when the host leaves: one takes the session over, the other attaches to it;
/// both go on (each sees the other's turns). When one of them exits, the other goes on too.
#[test]
fn of_two_attachers_one_hosts_and_the_other_attaches_to_it() {
    let env = Env::new();
    let host_config = env.named_scripted_config("host", &["text: first"], json!({}));
    let config = env.named_scripted_config("both", &["text: one", "text: two", "text: three"], json!({}));
    let mut host = env.spawn(&host_config, &["--session", "shared"]);
    host.initialize();
    let mut a = env.spawn(&config, &["--session", "shared"]);
    a.call("init", "initialize", json!({"protocol_version": "1.10"}));
    let mut b = env.spawn(&config, &["--session", "shared"]);
    b.call("init", "initialize", json!({"protocol_version": "1.10"}));
    let (_, first) = host.prompt("h1", json!("first"));
    assert_eq!(first["result"]["status"], "finished");
    until_event(&mut a, "TurnEnd");
    until_event(&mut b, "TurnEnd");

    host.close_stdin();
    assert!(host.wait_exit(Duration::from_secs(20)).is_some());
    let (_, mine) = a.prompt("a1", json!("from a"));
    assert_eq!(mine["result"]["status"], "finished", "{mine}");
    // `b` may attach to `a` after that turn (it then is history for `b`), but not after its own.
    let (_, mine) = b.prompt("b1", json!("from b"));
    assert_eq!(mine["result"]["status"], "finished", "{mine}");
    until_event(&mut a, "TurnEnd");

    // Whichever of them hosts, the other goes on when it leaves.
    b.close_stdin();
    assert!(b.wait_exit(Duration::from_secs(20)).is_some());
    let (_, mine) = a.prompt("a2", json!("still here"));
    assert_eq!(mine["result"]["status"], "finished", "{mine}");
    no_errors(&a);
    no_errors(&b);
}

/// `-C` attaches to the work dir's last session when another process holds it, and takes it
/// over when that process leaves.
#[test]
fn continue_attaches_to_the_last_session_and_takes_it_over() {
    let env = Env::new();
    let config = env.scripted_config(&["text: one", "text: two"]);
    let mut first = env.spawn(&config, &["--session", "last"]);
    first.initialize();
    first.prompt("p", json!("one"));
    first.close_stdin();
    assert!(first.wait_exit(Duration::from_secs(20)).is_some());

    let mut host = env.spawn(&config, &["-C"]);
    host.initialize();
    let mut attached = env.spawn(&config, &["-C"]);
    attached.call("init", "initialize", json!({"protocol_version": "1.10"}));
    let (_, replayed) = attached.call("r", "replay", json!({}));
    assert_eq!(replayed["result"]["status"], "finished", "{replayed}");
    assert!(replayed["result"]["events"].as_u64().unwrap() > 0, "{replayed}");
    let (_, mine) = attached.prompt("a1", json!("two"));
    assert_eq!(mine["result"]["status"], "finished", "{mine}");
    let seen = until_event(&mut host, "TurnEnd");
    assert_eq!(texts(&seen), ["one"], "the host ran the attacher's turn");

    host.close_stdin();
    assert!(host.wait_exit(Duration::from_secs(20)).is_some());
    let (events, mine) = attached.prompt("a2", json!("three"));
    assert_eq!(mine["result"]["status"], "finished", "{mine}");
    assert_eq!(texts(&events), ["one"], "the attacher's own scripts start again");
    no_errors(&attached);
}

/// The attacher's `initialize` is its own: the slash commands of its own skills folder (which the
/// host does not have), answered while the host's turn waits for an approval, in exactly the
/// shape a stdio `kiwi --wire` with that command line gives.
#[test]
fn the_attachers_initialize_is_its_own_and_answered_during_a_turn() {
    let env = Env::new();
    let skills = env.dir.path().join("skills");
    std::fs::create_dir_all(skills.join("mine")).unwrap();
    std::fs::write(
        skills.join("mine/SKILL.md"),
        "---\nname: mine\ndescription: Only the attacher has it\n---\n\nDo it.",
    )
    .unwrap();
    let skills_dir = skills.to_str().unwrap();
    let config = env.scripted_config(&[&shell("true")]);
    let mut host = env.spawn(&config, &["--session", "shared"]);
    let hosts = host.initialize();
    let commands = |answer: &Value| -> Vec<String> {
        answer["result"]["slash_commands"].as_array().unwrap().iter().map(|c| c["name"].to_string()).collect()
    };
    assert!(!commands(&hosts).iter().any(|c| c.contains("skill:mine")), "{hosts}");
    host.send(json!({"jsonrpc": "2.0", "id": "p1", "method": "prompt", "params": {"user_input": "run it"}}));
    host.until_request();

    let params = json!({"protocol_version": "1.10", "client": {"name": "t", "version": "1"}});
    let mut attached = env.spawn(&config, &["--session", "shared", "--skills-dir", skills_dir]);
    let (_, answer) = attached.call("init", "initialize", params.clone());
    assert!(commands(&answer).iter().any(|c| c.contains("skill:mine")), "{answer}");
    let mut stdio = env.spawn(&config, &["--session", "elsewhere", "--skills-dir", skills_dir]);
    let (_, reference) = stdio.call("init", "initialize", params);
    assert_eq!(answer["result"], reference["result"]);
    // The host's turn is still waiting: its approval reaches the attacher after that answer.
    let (_, asked) = attached.until_request();
    assert_eq!(asked["params"]["type"], "ApprovalRequest", "{asked}");
    // Bad params get the stdio server's error, and the connection goes on.
    let bad = json!({"protocol_version": 5});
    let (_, refused) = attached.call("bad", "initialize", bad.clone());
    let (_, reference) = stdio.call("bad", "initialize", bad);
    assert_eq!(refused["error"], reference["error"]);
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
}

/// What the attacher's client negotiated reaches the host (its `tool_output` grant, per
/// connection), and after a take-over this process applies that `initialize` again, silently.
#[test]
fn the_attachers_extensions_hold_in_the_host_and_after_a_take_over() {
    let running = |id: &str| {
        let args = json!({"command": "echo one; echo two"}).to_string();
        format!("tool_call: {}", json!({"id": id, "name": "Shell", "arguments": args}))
    };
    let env = Env::new();
    let host_config = env.named_scripted_config("host", &[running("tc-1"), "text: done".into()], json!({}));
    let mine = env.named_scripted_config("mine", &[running("tc-2"), "text: done".into()], json!({}));
    let mut host = env.spawn(&host_config, &["--yolo", "--session", "out"]);
    host.initialize();
    let mut attached = env.spawn(&mine, &["--yolo", "--session", "out"]);
    let (_, init) =
        attached.call("init", "initialize", json!({"protocol_version": "1.10", "extensions": ["tool_output"]}));
    assert_eq!(init["result"]["extensions"], json!(["tool_output"]), "{init}");
    let (events, r) = attached.prompt("a1", json!("go"));
    assert_eq!(r["result"]["status"], "finished", "{r}");
    assert!(events.iter().any(|e| e["params"]["type"] == "ToolOutput"), "{:?}", types(&events));
    let hosts = until_event(&mut host, "TurnEnd");
    assert!(!hosts.iter().any(|e| e["params"]["type"] == "ToolOutput"), "{:?}", types(&hosts));

    host.close_stdin();
    assert!(host.wait_exit(Duration::from_secs(20)).is_some());
    let (events, r) = attached.prompt("a2", json!("again"));
    assert_eq!(r["result"]["status"], "finished", "{r}");
    assert!(events.iter().any(|e| e["params"]["payload"]["tool_call_id"] == "tc-2"), "{:?}", types(&events));
    assert!(events.iter().any(|e| e["params"]["type"] == "ToolOutput"), "{:?}", types(&events));
    let answers = attached.seen.iter().filter(|m| m.get("method").is_none() && m["id"] == "init").count();
    assert_eq!(answers, 1, "the initialize was answered again");
    no_errors(&attached);
}

/// An attacher that leaves (EOF, or SIGTERM: exit 0 as a wire server) changes nothing for the
/// host and the other attachers.
#[test]
fn an_attacher_that_leaves_changes_nothing_for_the_others() {
    let env = Env::new();
    let config = env.scripted_config(&["text: one", "text: two"]);
    let mut host = env.spawn(&config, &["--session", "shared"]);
    host.initialize();
    let mut stays = env.spawn(&config, &["--session", "shared"]);
    stays.call("init", "initialize", json!({"protocol_version": "1.10"}));
    let mut leaves = env.spawn(&config, &["--session", "shared"]);
    leaves.call("init", "initialize", json!({"protocol_version": "1.10"}));
    let mut signalled = env.spawn(&config, &["--session", "shared"]);
    signalled.call("init", "initialize", json!({"protocol_version": "1.10"}));

    leaves.close_stdin();
    assert!(leaves.wait_exit(Duration::from_secs(20)).expect("exits at EOF").success());
    // SAFETY: a signal to a child of this test.
    assert_eq!(unsafe { libc::kill(signalled.child.id() as i32, libc::SIGTERM) }, 0);
    assert!(signalled.wait_exit(Duration::from_secs(20)).expect("exits after SIGTERM").success());
    let (_, r) = host.prompt("p1", json!("one"));
    assert_eq!(r["result"]["status"], "finished", "{r}");
    let seen = until_event(&mut stays, "TurnEnd");
    assert_eq!(texts(&seen), ["one"]);
    let (_, r) = stays.prompt("s1", json!("two"));
    assert_eq!(r["result"]["status"], "finished", "{r}");
    until_event(&mut host, "TurnEnd");
    no_errors(&stays);
}
