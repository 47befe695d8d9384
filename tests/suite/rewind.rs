//! Undo (`docs/sessions.md` §9): the wire's `undo` extension, `/undo` and ACP's `_kiwi/undo` take
//! the session back to before a turn and restore the files kiwi's edit tools changed in it; the
//! context, `wire.jsonl` and the state end up as if the undone turns never happened.

use crate::common::{Env, Kiwi};
use crate::mcp::{approve, call, payloads};

use std::path::Path;

use serde_json::{Value, json};

fn turn_begins(wire: &Path) -> Vec<String> {
    std::fs::read_to_string(wire)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["message"]["type"] == "TurnBegin")
        .map(|v| v["message"]["payload"]["user_input"].as_str().unwrap_or("").to_string())
        .collect()
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn said(events: &[Value]) -> String {
    payloads(events, "ContentPart").iter().map(|p| p["text"].as_str().unwrap_or("")).collect()
}

fn names(list: &Value) -> Vec<String> {
    list.as_array()
        .unwrap()
        .iter()
        .map(|p| Path::new(p.as_str().unwrap()).file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

/// Two turns edit files; `undo` takes the last back (files, context, record), the next prompt
/// goes on from there, and a `turn_index` undo takes the rest; bad targets are refused.
#[test]
fn the_wire_undo_restores_files_context_and_record() {
    let env = Env::new();
    let work = env.work();
    std::fs::write(work.join("keep.txt"), "original\n").unwrap();
    let config = env.scripted_config(&[
        &call("w1", "WriteFile", json!({"path": "keep.txt", "content": "turn one\n"})),
        "text: wrote one",
        &call("e1", "StrReplaceFile", json!({"path": "keep.txt", "edit": {"old": "one", "new": "two"}})),
        &call("w2", "WriteFile", json!({"path": "new.txt", "content": "fresh"})),
        "text: edited two",
        "text: re three",
    ]);
    let mut k = env.spawn(&config, &["--yolo", "--session", "undo-wire"]);
    let (_, init) = k.call("init", "initialize", json!({"protocol_version": "1.10", "extensions": ["fork", "undo"]}));
    assert_eq!(init["result"]["extensions"], json!(["fork", "undo"]), "{init}");
    let (_, r) = k.call("u0", "undo", json!({}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert_eq!(r["error"]["message"], "Nothing to undo: the session has no turns");
    k.prompt("p1", json!("first"));
    k.prompt("p2", json!("second"));
    assert_eq!(read(&work.join("keep.txt")), "turn two\n");
    assert_eq!(read(&work.join("new.txt")), "fresh");

    let (_, r) = k.call("u1", "undo", json!({}));
    let result = &r["result"];
    assert_eq!((result["turn_index"].clone(), result["turns_undone"].clone()), (json!(1), json!(1)), "{r}");
    assert_eq!(names(&result["restored"]), ["keep.txt"], "{r}");
    assert_eq!(names(&result["deleted"]), ["new.txt"], "{r}");
    assert_eq!(result["not_restored"], json!([]));
    assert_eq!(result["state_restored"], true);
    assert!(result["message"].as_str().unwrap().contains("what Shell commands"), "{r}");
    assert_eq!(read(&work.join("keep.txt")), "turn one\n");
    assert!(!work.join("new.txt").exists());
    let dir = env.session_dir("undo-wire");
    assert_eq!(turn_begins(&dir.join("wire.jsonl")), ["first"]);
    let context = read(&dir.join("context.jsonl"));
    assert!(context.contains("wrote one") && !context.contains("second") && !context.contains("edited two"));

    // The next prompt goes on from turn 0: its context lacks the undone turn.
    k.prompt("p3", json!("third"));
    assert_eq!(turn_begins(&dir.join("wire.jsonl")), ["first", "third"]);
    let context = read(&dir.join("context.jsonl"));
    assert!(context.contains("re three") && !context.contains("second"), "{context}");
    // `replay` shows the history as it now is.
    let (events, _) = k.call("r1", "replay", json!({}));
    let inputs: Vec<&Value> = payloads(&events, "TurnBegin").into_iter().map(|p| &p["user_input"]).collect();
    assert_eq!(inputs, [&json!("first"), &json!("third")]);

    // Bad targets: nothing changes.
    for (params, message) in [
        (json!({"turn_index": 5}), "turn_index 5 out of range (max turn: 1)"),
        (json!({"turns": 3}), "cannot undo 3 turns: the session has 2"),
        (json!({"turns": 0}), "the number of turns to undo must be at least 1"),
        (json!({"turns": 1, "turn_index": 0}), "Invalid parameters for method `undo`"),
        (json!({"turns": "two"}), "Invalid parameters for method `undo`"),
    ] {
        let (_, r) = k.call("bad", "undo", params.clone());
        assert_eq!(r["error"]["code"], -32602, "{params}: {r}");
        assert_eq!(r["error"]["message"], message, "{params}");
    }
    assert_eq!(turn_begins(&dir.join("wire.jsonl")), ["first", "third"]);

    // From turn 0 on: everything, back to the original file.
    let (_, r) = k.call("u2", "undo", json!({"turn_index": 0}));
    assert_eq!((r["result"]["turn_index"].clone(), r["result"]["turns_undone"].clone()), (json!(0), json!(2)), "{r}");
    assert_eq!(read(&work.join("keep.txt")), "original\n");
    assert_eq!(turn_begins(&dir.join("wire.jsonl")), Vec::<String>::new());
    // The context is as it was before the first turn: the system prompt record only.
    let context = read(&dir.join("context.jsonl"));
    assert_eq!(context.lines().count(), 1, "{context}");
    assert!(context.starts_with("{\"role\": \"_system_prompt\""), "{context}");
    // The before-images of undone turns are gone with them.
    assert_eq!(std::fs::read_dir(dir.join("rewind")).unwrap().count(), 0);
}

/// `/undo`: a file changed by someone else after kiwi's edit is left alone and reported, the
/// command's own turn leaves no record, a failed `/undo` neither, the state (plan mode) comes back,
/// and the before-images outlive the process (undo after a resume).
#[test]
fn the_undo_command_reports_skips_and_survives_a_resume() {
    let env = Env::new();
    let work = env.work();
    let config = env.scripted_config(&[
        &call("w1", "WriteFile", json!({"path": "a.txt", "content": "A1"})),
        "text: made a",
        &call("w2", "WriteFile", json!({"path": "b.txt", "content": "B1"})),
        &call("w3", "WriteFile", json!({"path": "a.txt", "content": "A2"})),
        "text: made b",
    ]);
    let mut k = env.spawn(&config, &["--yolo", "--session", "undo-cmd"]);
    k.prompt("p1", json!("make a"));
    k.prompt("p2", json!("make b"));
    std::fs::write(work.join("b.txt"), "the user's").unwrap();
    let dir = env.session_dir("undo-cmd");

    let (events, r) = k.prompt("p3", json!("/undo"));
    assert_eq!(r["result"]["status"], "finished", "{r}");
    let text = said(&events);
    assert!(text.starts_with("Undid 1 turn (from turn 1)"), "{text}");
    assert!(text.contains("Restored 1 file: ") && text.contains("a.txt"), "{text}");
    assert!(text.contains("b.txt (it was changed after kiwi's last edit; left as it is)"), "{text}");
    assert!(text.contains("Shell commands"), "{text}");
    assert_eq!(read(&work.join("a.txt")), "A1");
    assert_eq!(read(&work.join("b.txt")), "the user's");
    assert_eq!(turn_begins(&dir.join("wire.jsonl")), ["make a"]);

    // Undoing `/plan on` puts plan mode back off.
    k.prompt("p4", json!("/plan on"));
    let state: Value = serde_json::from_str(&read(&dir.join("state.json"))).unwrap();
    assert_eq!(state["plan_mode"], true);
    let (events, _) = k.prompt("p5", json!("/undo"));
    assert!(said(&events).starts_with("Undid 1 turn (from turn 1)"), "{}", said(&events));
    let state: Value = serde_json::from_str(&read(&dir.join("state.json"))).unwrap();
    assert_eq!(state["plan_mode"], false, "{state}");

    // Failed ones say why and leave nothing behind.
    let (events, _) = k.prompt("p6", json!("/undo x"));
    assert!(said(&events).starts_with("Usage: /undo [N]"), "{}", said(&events));
    let (events, _) = k.prompt("p7", json!("/undo 5"));
    assert_eq!(said(&events), "Nothing was undone: cannot undo 5 turns: the session has 1");
    assert_eq!(turn_begins(&dir.join("wire.jsonl")), ["make a"]);
    drop(k);

    // A new process on the same session: turn 0 made a.txt, so undoing it deletes the file.
    let mut k = env.spawn(&config, &["--session", "undo-cmd"]);
    let (events, _) = k.prompt("p8", json!("/undo"));
    let text = said(&events);
    assert!(text.contains("Deleted 1 file kiwi had created: ") && text.contains("a.txt"), "{text}");
    assert!(!work.join("a.txt").exists());
    assert_eq!(turn_begins(&dir.join("wire.jsonl")), Vec::<String>::new());
    let (events, _) = k.prompt("p9", json!("/undo"));
    assert_eq!(said(&events), "Nothing was undone: Nothing to undo: the session has no turns");
}

/// While a turn runs (here: waiting for an approval) `undo` is refused with the busy error of
/// `prompt`, and nothing changes.
#[test]
fn undo_is_refused_while_a_turn_runs() {
    let env = Env::new();
    let work = env.work();
    let config = env.scripted_config(&[
        "text: first",
        &call("w1", "WriteFile", json!({"path": "x.txt", "content": "x"})),
        "text: wrote",
    ]);
    let mut k = env.spawn(&config, &["--session", "undo-busy"]);
    k.prompt("p1", json!("one"));
    k.send(json!({"jsonrpc": "2.0", "id": "p2", "method": "prompt", "params": {"user_input": "two"}}));
    let (_, request) = k.until_request();
    let (_, r) = k.call("u1", "undo", json!({}));
    assert_eq!(r["error"]["code"], -32000, "{r}");
    assert_eq!(r["error"]["message"], "An agent turn is already in progress");
    approve(&mut k, &request);
    let (_, done) = k.until_response(&json!("p2"));
    assert_eq!(done["result"]["status"], "finished", "{done}");
    assert_eq!(read(&work.join("x.txt")), "x");
    let (_, r) = k.call("u2", "undo", json!({"turns": 1}));
    assert_eq!(names(&r["result"]["deleted"]), ["x.txt"], "{r}");
    assert_eq!(turn_begins(&env.session_dir("undo-busy").join("wire.jsonl")), ["one"]);
}

fn acp(env: &Env, config: &Path) -> (Kiwi, Value) {
    let mut k = Kiwi::spawn(env.acp_command(config, &[]));
    let caps = json!({"_meta": {"kiwi": {"extensions": ["undo"]}}});
    let (_, init) = k.call("init", "initialize", json!({"protocolVersion": 1, "clientCapabilities": caps}));
    (k, init)
}

/// ACP's `_kiwi/undo` (advertised under `agentCapabilities._meta.kiwi`).
#[test]
fn the_acp_undo_method() {
    let env = Env::new();
    let work = env.work();
    std::fs::write(work.join("doc.md"), "v0\n").unwrap();
    let config = env.scripted_config(&[
        &call("e1", "StrReplaceFile", json!({"path": "doc.md", "edit": {"old": "v0", "new": "v1"}})),
        "text: edited",
        "text: after",
        "text: raced",
        "text: still",
    ]);
    let (mut k, init) = acp(&env, &config);
    assert_eq!(init["result"]["agentCapabilities"]["_meta"]["kiwi"]["undo"]["method"], "_kiwi/undo", "{init}");
    let (_, r) = k.call("new", "session/new", json!({"cwd": work, "mcpServers": []}));
    let session = r["result"]["sessionId"].as_str().unwrap().to_string();
    let (_, r) = k.call("m", "session/set_mode", json!({"sessionId": session, "modeId": "yolo"}));
    assert!(r.get("result").is_some(), "{r}");
    let (_, r) = k.call("u0", "_kiwi/undo", json!({"sessionId": session}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(r.to_string().contains("Nothing to undo"), "{r}");
    let prompt = |k: &mut Kiwi, id: &str, text: &str| {
        k.call(id, "session/prompt", json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}))
    };
    prompt(&mut k, "p1", "edit it");
    assert_eq!(read(&work.join("doc.md")), "v1\n");
    let (_, r) = k.call("u1", "_kiwi/undo", json!({"sessionId": session, "turns": 1}));
    assert_eq!(r["result"]["turnIndex"], 0, "{r}");
    assert_eq!(r["result"]["turnsUndone"], 1);
    assert_eq!(names(&r["result"]["restored"]), ["doc.md"]);
    assert!(r["result"]["message"].as_str().unwrap().contains("Shell"), "{r}");
    assert_eq!(read(&work.join("doc.md")), "v0\n");
    let dir = env.session_dir(&session);
    assert_eq!(turn_begins(&dir.join("wire.jsonl")), Vec::<String>::new());
    prompt(&mut k, "p2", "again");
    assert!(!read(&dir.join("context.jsonl")).contains("edit it"));
    // Bad inputs.
    let (_, r) = k.call("u2", "_kiwi/undo", json!({"sessionId": session, "turnIndex": 4}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(r.to_string().contains("turn_index 4 out of range (max turn: 0)"), "{r}");
    let (_, r) = k.call("u3", "_kiwi/undo", json!({"sessionId": session, "turnIndex": 0, "turns": 1}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    let (_, r) = k.call("u4", "_kiwi/undo", json!({"sessionId": "no-such-session"}));
    assert!(r.get("error").is_some(), "{r}");
    let (_, r) = k.call("u5", "_kiwi/undo", json!({}));
    assert_eq!(r["error"]["code"], -32602, "{r}");
    // An undo and a prompt sent together: whichever takes the session's slot first, the other
    // is answered too (a prompt queued behind the undo's claim starts when the claim ends,
    // although no turn ends then).
    k.send(json!({"jsonrpc": "2.0", "id": "u6", "method": "_kiwi/undo", "params": {"sessionId": session}}));
    k.send(json!({"jsonrpc": "2.0", "id": "p4", "method": "session/prompt",
        "params": {"sessionId": session, "prompt": [{"type": "text", "text": "raced"}]}}));
    let mut answered = std::collections::HashMap::new();
    while answered.len() < 2 {
        let m = k.next();
        if let Some(id @ ("u6" | "p4")) = m["id"].as_str()
            && m.get("method").is_none()
        {
            answered.insert(id.to_string(), m);
        }
    }
    assert_eq!(answered["p4"]["result"]["stopReason"], "end_turn", "{:?}", answered["p4"]);
    let undo = &answered["u6"];
    assert!(undo.get("result").is_some() || undo.to_string().contains("undo after the turn"), "{undo}");
    // The session still serves.
    let (_, r) = prompt(&mut k, "p3", "still here");
    assert!(r.get("result").is_some(), "{r}");
}

/// Answers kiwi's `fs/*` requests from `buffers` (an editor's unsaved buffers) until the
/// response to `id` arrives.
fn serve_files(k: &mut Kiwi, id: &str, buffers: &mut std::collections::HashMap<String, String>) -> Value {
    loop {
        let m = k.next();
        if m["id"] == json!(id) && m.get("method").is_none() {
            return m;
        }
        let path = m["params"]["path"].as_str().unwrap_or("").to_string();
        match m["method"].as_str() {
            Some("fs/read_text_file") => {
                let answer = match buffers.get(&path) {
                    Some(text) => json!({"jsonrpc": "2.0", "id": m["id"], "result": {"content": text}}),
                    None => json!({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32002, "message": "not found"}}),
                };
                k.send(answer);
            }
            Some("fs/write_text_file") => {
                buffers.insert(path, m["params"]["content"].as_str().unwrap().to_string());
                k.send(json!({"jsonrpc": "2.0", "id": m["id"], "result": {}}));
            }
            _ => {}
        }
    }
}

/// An editor that serves its buffers: the edit and its undo both go through them, the disk is
/// not touched.
#[test]
fn acp_undo_restores_through_the_editors_buffers() {
    let env = Env::new();
    let work = env.work();
    std::fs::write(work.join("doc.md"), "on disk\n").unwrap();
    let config = env.scripted_config(&[
        &call("e1", "StrReplaceFile", json!({"path": "doc.md", "edit": {"old": "v0", "new": "v1"}})),
        "text: edited",
    ]);
    let mut k = Kiwi::spawn(env.acp_command(&config, &[]));
    let caps = json!({"fs": {"readTextFile": true, "writeTextFile": true}});
    k.call("init", "initialize", json!({"protocolVersion": 1, "clientCapabilities": caps}));
    let (_, r) = k.call("new", "session/new", json!({"cwd": work, "mcpServers": []}));
    let session = r["result"]["sessionId"].as_str().unwrap().to_string();
    k.call("m", "session/set_mode", json!({"sessionId": session, "modeId": "yolo"}));
    let doc = std::fs::canonicalize(work.join("doc.md")).unwrap().display().to_string();
    let mut buffers = std::collections::HashMap::from([(doc.clone(), "v0 in the editor\n".to_string())]);
    let prompt = json!({"sessionId": session, "prompt": [{"type": "text", "text": "edit"}]});
    k.send(json!({"jsonrpc": "2.0", "id": "p1", "method": "session/prompt", "params": prompt}));
    let r = serve_files(&mut k, "p1", &mut buffers);
    assert_eq!(r["result"]["stopReason"], "end_turn", "{r}");
    assert_eq!(buffers[&doc], "v1 in the editor\n");
    k.send(json!({"jsonrpc": "2.0", "id": "u1", "method": "_kiwi/undo", "params": {"sessionId": session}}));
    let r = serve_files(&mut k, "u1", &mut buffers);
    assert_eq!(names(&r["result"]["restored"]), ["doc.md"], "{r}");
    assert_eq!(buffers[&doc], "v0 in the editor\n");
    assert_eq!(read(&work.join("doc.md")), "on disk\n");
}

/// Undoing past a `/clear` brings the archived context back as the live one.
#[test]
fn undo_across_a_clear_brings_the_old_context_back() {
    let env = Env::new();
    let config = env.scripted_config(&["text: re one", "text: re two"]);
    let mut k = env.spawn(&config, &["--session", "undo-clear"]);
    k.prompt("p1", json!("one"));
    k.prompt("p2", json!("/clear"));
    k.prompt("p3", json!("two"));
    let dir = env.session_dir("undo-clear");
    assert!(dir.join("context_1.jsonl").exists());
    assert!(!read(&dir.join("context.jsonl")).contains("re one"));
    let (_, r) = k.call("u1", "undo", json!({"turns": 2}));
    assert_eq!(r["result"]["turn_index"], 1, "{r}");
    let context = read(&dir.join("context.jsonl"));
    assert!(context.contains("re one") && !context.contains("re two"), "{context}");
    assert!(!dir.join("context_1.jsonl").exists());
    assert_eq!(turn_begins(&dir.join("wire.jsonl")), ["one"]);
}

/// Past `undo.max_bytes` a before-image is not kept: the undo says which file it could not
/// restore and why, and restores the rest.
#[test]
fn files_past_the_bound_are_reported_not_restored() {
    let env = Env::new();
    let work = env.work();
    std::fs::write(work.join("big.txt"), "0123456789abcdef").unwrap();
    std::fs::write(work.join("small.txt"), "tiny").unwrap();
    let config = env.scripted_config_with(
        &[
            &call("w1", "WriteFile", json!({"path": "big.txt", "content": "replaced"})),
            &call("w2", "WriteFile", json!({"path": "small.txt", "content": "changed"})),
            "text: done",
        ],
        json!({"undo": {"max_bytes": 8}}),
    );
    let mut k = env.spawn(&config, &["--yolo", "--session", "undo-bound"]);
    k.prompt("p1", json!("write both"));
    let (_, r) = k.call("u1", "undo", json!({}));
    assert_eq!(names(&r["result"]["restored"]), ["small.txt"], "{r}");
    let skipped = &r["result"]["not_restored"];
    assert_eq!(skipped.as_array().unwrap().len(), 1, "{r}");
    assert!(skipped[0]["path"].as_str().unwrap().ends_with("big.txt"), "{r}");
    assert!(skipped[0]["reason"].as_str().unwrap().contains("larger than undo.max_bytes"), "{r}");
    assert!(r["result"]["message"].as_str().unwrap().contains("Not restored: "), "{r}");
    assert_eq!(read(&work.join("small.txt")), "tiny");
    assert_eq!(read(&work.join("big.txt")), "replaced");
}

/// `kiwi web`'s session socket serves the same `undo`; a client joining afterwards gets the
/// history without the undone turn.
#[test]
fn the_web_socket_serves_undo() {
    use super::web_kit::{Home, kinds};
    let home = Home::new();
    home.scripted(&["text: re one".to_string(), "text: re two".to_string()]);
    let id = home.new_session();
    let server = home.serve(&[]);
    let (mut ws, _) = server.join(&id);
    for (n, text) in ["one", "two"].iter().enumerate() {
        let pid = format!("p{n}");
        ws.send(json!({"jsonrpc": "2.0", "method": "prompt", "id": pid, "params": {"user_input": text}}));
        ws.until(|m| m["id"] == json!(pid));
    }
    let (_, r) = ws.call("u1", "undo", json!({}));
    assert_eq!((r["result"]["turn_index"].clone(), r["result"]["turns_undone"].clone()), (json!(1), json!(1)), "{r}");
    let (_, r) = ws.call("u2", "undo", json!({"turn_index": 3}));
    assert_eq!(r["error"]["message"], "turn_index 3 out of range (max turn: 0)", "{r}");
    drop(ws);
    let (_, history) = server.join(&id);
    assert_eq!(kinds(&history).iter().filter(|k| *k == "TurnBegin").count(), 1, "{history:?}");
    assert!(!read(&home.session_dir(&id).join("context.jsonl")).contains("re two"));
}

/// Issue 30, also found: undo trusted the paths of a session's `rewind/` manifests; a manifest
/// edited by someone else now cannot make it delete or write a file outside the session's
/// folders (it is reported, not touched).
#[test]
fn a_tampered_manifest_cannot_reach_outside_the_work_dir() {
    use sha2::Digest as _;
    let env = Env::new();
    let work = env.work();
    let config =
        env.scripted_config(&[&call("w1", "WriteFile", json!({"path": "a.txt", "content": "A1"})), "text: made a"]);
    let mut k = env.spawn(&config, &["--yolo", "--session", "tampered"]);
    k.prompt("p1", json!("make a"));
    let outside = env.dir.path().join("outside.txt");
    std::fs::write(&outside, "precious").unwrap();
    let sha: String = sha2::Sha256::digest(b"precious").iter().map(|b| format!("{b:02x}")).collect();
    let rewind = env.session_dir("tampered").join("rewind");
    let turn = std::fs::read_dir(&rewind).unwrap().flatten().next().expect("the turn's folder").path();
    let mut manifest: Value = serde_json::from_str(&read(&turn.join("manifest.json"))).unwrap();
    manifest["files"]
        .as_array_mut()
        .unwrap()
        .push(json!({"path": outside, "before": {"kind": "absent"}, "after_sha256": sha}));
    std::fs::write(turn.join("manifest.json"), manifest.to_string()).unwrap();
    let (events, _) = k.prompt("p2", json!("/undo"));
    let text = said(&events);
    assert!(outside.exists(), "a file outside the work dir was deleted: {text}");
    assert!(text.contains("outside.txt (it is outside the session's folders; left as it is)"), "{text}");
    assert!(!work.join("a.txt").exists(), "{text}");
}

/// Issue 30: undoing, in a fork, turns it was forked with says they were made before the fork
/// (their file changes are the source session's, and are not restored here); the fork's own
/// turns undo as usual.
#[test]
fn undo_in_a_fork_says_which_turns_came_before_the_fork() {
    let env = Env::new();
    let work = env.work();
    let config = env.scripted_config(&[
        &call("w1", "WriteFile", json!({"path": "a.txt", "content": "source\n"})),
        "text: wrote a",
        "text: two",
        "text: in the fork",
    ]);
    let mut k = env.spawn(&config, &["--yolo", "--session", "fork-src"]);
    k.initialize();
    k.prompt("p1", json!("one"));
    k.prompt("p2", json!("two"));
    let (_, r) = k.call("f", "fork", json!({}));
    let fork = r["result"]["session_id"].as_str().expect("forked").to_string();
    k.close_stdin();
    let _ = k.wait_exit(crate::common::TIMEOUT);
    let mut f = env.spawn(&config, &["--yolo", "--session", &fork]);
    f.initialize();
    f.prompt("p3", json!("three"));
    // The fork's own turn: no word of the fork.
    let (_, r) = f.call("u1", "undo", json!({}));
    let message = r["result"]["message"].as_str().unwrap_or_default().to_string();
    assert!(message.starts_with("Undid 1 turn (from turn 2)"), "{r}");
    assert!(!message.contains("before the fork"), "{message}");
    // Into the turns it was forked with: said, and the source's file is left as it is.
    let (_, r) = f.call("u2", "undo", json!({"turn_index": 0}));
    let message = r["result"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("Turns 0 to 1 were made before the fork"), "{r}");
    assert_eq!(std::fs::read_to_string(work.join("a.txt")).unwrap(), "source\n");
}
