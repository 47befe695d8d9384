//! File-tool safety over the wire (`docs/tools.md` §19.3, §19.4, §19.5, §19.6): edits are atomic and see
//! the file as it is after the approval, only regular files are read, nothing blocks the
//! dispatcher, sizes are capped, and "inside the work dir" is decided on the resolved path.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::{Duration, Instant};

use common::{Env, Kiwi, types};
use serde_json::{Value, json};

fn call(id: &str, name: &str, args: Value) -> String {
    format!("tool_call: {}", json!({"id": id, "name": name, "arguments": args.to_string()}))
}

fn answer(k: &mut Kiwi, request: &Value, response: &str) {
    let id = request["id"].clone();
    k.send(json!({"jsonrpc":"2.0","id":id,"result":{"request_id":id,"response":response}}));
}

fn start(k: &mut Kiwi, id: &str) {
    k.send(json!({"jsonrpc":"2.0","id":id,"method":"prompt","params":{"user_input":"go"}}));
}

/// The `return_value` of the `ToolResult` for `call_id` among `events`.
fn result_of<'a>(events: &'a [Value], call_id: &str) -> &'a Value {
    events
        .iter()
        .find(|e| e["params"]["type"] == "ToolResult" && e["params"]["payload"]["tool_call_id"] == call_id)
        .map(|e| &e["params"]["payload"]["return_value"])
        .unwrap_or_else(|| panic!("no ToolResult for {call_id} in {:?}", types(events)))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap()
}

/// No temp file of an edit is left next to the target.
fn no_leftovers(dir: &Path) {
    let names: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(!names.iter().any(|n| n.contains(".kiwi-")), "leftover temp files: {names:?}");
}

// ---------- item 3: edits see the file as it is after the approval ----------

#[test]
fn an_edit_made_while_the_approval_is_pending_is_kept() {
    let env = Env::new();
    let f = env.work().join("f.txt");
    std::fs::write(&f, "a\nb\nc\n").unwrap();
    let edit = |id: &str, old: &str, new: &str| {
        call(id, "StrReplaceFile", json!({"path": f, "edit": {"old": old, "new": new}}))
    };
    let config = env.scripted_config(&[
        &edit("e1", "b", "B"),
        "text: ok",
        &edit("e2", "c", "C"),
        "text: ok",
        &call("w1", "WriteFile", json!({"path": f, "content": "whole\n"})),
        "text: ok",
        &call("w2", "WriteFile", json!({"path": f, "content": "tail\n", "mode": "append"})),
        "text: ok",
    ]);
    let mut k = env.spawn(&config, &[]);

    // The user adds a line above while the edit waits: the edit is re-applied to the new text.
    start(&mut k, "p1");
    let (_, request) = k.until_request();
    std::fs::write(&f, "top\na\nb\nc\n").unwrap();
    answer(&mut k, &request, "approve");
    let (events, _) = k.until_response(&json!("p1"));
    let r = result_of(&events, "e1");
    assert_eq!(r["is_error"], false, "{r}");
    assert_eq!(read(&f), "top\na\nB\nc\n");

    // The user removes the text the edit replaces: nothing is written, the model must re-read.
    start(&mut k, "p2");
    let (_, request) = k.until_request();
    std::fs::write(&f, "top\na\nB\n").unwrap();
    answer(&mut k, &request, "approve");
    let (events, _) = k.until_response(&json!("p2"));
    let r = result_of(&events, "e2");
    assert_eq!(r["is_error"], true);
    assert!(r["message"].as_str().unwrap().contains("Read the file again"), "{r}");
    assert_eq!(read(&f), "top\na\nB\n");

    // An overwrite approved against an older content does not discard the user's change.
    start(&mut k, "p3");
    let (_, request) = k.until_request();
    std::fs::write(&f, "user\n").unwrap();
    answer(&mut k, &request, "approve");
    let (events, _) = k.until_response(&json!("p3"));
    let r = result_of(&events, "w1");
    assert_eq!(r["is_error"], true);
    assert!(r["message"].as_str().unwrap().contains("Read the file again"), "{r}");
    assert_eq!(read(&f), "user\n");

    // An append goes to the end of the file as it is when it is written.
    start(&mut k, "p4");
    let (_, request) = k.until_request();
    std::fs::write(&f, "user\nmore\n").unwrap();
    answer(&mut k, &request, "approve");
    let (events, _) = k.until_response(&json!("p4"));
    assert_eq!(result_of(&events, "w2")["is_error"], false);
    assert_eq!(read(&f), "user\nmore\ntail\n");
    no_leftovers(&env.work());
}

/// A write that fails half-way (here: the file size limit, as a full disk would) leaves the
/// original untouched, and the answer says so.
#[test]
fn a_failed_write_leaves_the_original_intact() {
    let env = Env::new();
    let big = env.work().join("big.txt");
    let original: String = (0..40_000).map(|i| format!("line {i}\n")).collect();
    assert!(original.len() > 300_000);
    std::fs::write(&big, &original).unwrap();
    let config = env.scripted_config(&[
        &call("e", "StrReplaceFile", json!({"path": big, "edit": {"old": "line 39999", "new": "last"}})),
        &call("a", "WriteFile", json!({"path": big, "content": "more\n", "mode": "append"})),
        "text: ok",
    ]);
    let mut cmd = env.command(&config, &["--yolo"]);
    // SAFETY: setrlimit and signal are async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit { rlim_cur: 256 << 10, rlim_max: 256 << 10 };
            libc::setrlimit(libc::RLIMIT_FSIZE, &limit);
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            Ok(())
        });
    }
    let mut k = Kiwi::spawn(cmd);
    let (events, _) = k.prompt("p", json!("go"));
    for (id, prefix) in [("e", "Failed to edit."), ("a", "Failed to write to")] {
        let r = result_of(&events, id);
        assert_eq!(r["is_error"], true, "{r}");
        let message = r["message"].as_str().unwrap();
        assert!(message.starts_with(prefix) && message.contains("left unchanged"), "{message}");
    }
    assert_eq!(read(&big), original);
    no_leftovers(&env.work());
}

#[test]
fn an_edit_keeps_the_mode_and_writes_through_links() {
    let env = Env::new();
    let script = env.work().join("run.sh");
    std::fs::write(&script, "echo a\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o751)).unwrap();
    let link = env.work().join("link.sh");
    std::os::unix::fs::symlink("run.sh", &link).unwrap();
    let config = env.scripted_config(&[
        &call("e", "StrReplaceFile", json!({"path": script, "edit": {"old": "a", "new": "b"}})),
        &call("w", "WriteFile", json!({"path": link, "content": "echo c\n"})),
        "text: ok",
    ]);
    let mut k = env.spawn(&config, &["--yolo"]);
    let (events, _) = k.prompt("p", json!("go"));
    assert_eq!(result_of(&events, "e")["is_error"], false);
    assert_eq!(result_of(&events, "w")["is_error"], false);
    assert_eq!(read(&script), "echo c\n");
    assert_eq!(std::fs::metadata(&script).unwrap().permissions().mode() & 0o7777, 0o751);
    assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link is kept");
    no_leftovers(&env.work());
}

// ---------- item 4: only regular files ----------

#[test]
fn non_regular_files_are_refused_without_blocking() {
    let env = Env::new();
    let fifo = env.work().join("pipe");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let targets = ["pipe", "/dev/zero", "/dev/stdin", "/dev/stdout"];
    let mut lines = Vec::new();
    for (i, t) in targets.iter().enumerate() {
        lines.push(call(&format!("w{i}"), "WriteFile", json!({"path": t, "content": "x"})));
        lines.push(call(&format!("a{i}"), "WriteFile", json!({"path": t, "content": "x", "mode": "append"})));
        lines.push(call(&format!("s{i}"), "StrReplaceFile", json!({"path": t, "edit": {"old": "a", "new": "b"}})));
    }
    let step = lines.join("\n");
    let config = env.scripted_config(&[&step, "text: ok", "text: still here"]);
    let mut k = env.spawn(&config, &[]);
    let (events, response) = k.prompt("p", json!("go"));
    assert_eq!(response["result"]["status"], "finished");
    assert!(!types(&events).iter().any(|t| t.starts_with("request")), "no approval for a non-file");
    for (i, t) in targets.iter().enumerate() {
        for id in [format!("w{i}"), format!("a{i}"), format!("s{i}")] {
            let r = result_of(&events, &id);
            assert_eq!(r["message"], format!("`{t}` is not a file."), "{id}");
            assert_eq!(r["display"][0], json!({"type": "brief", "text": "Invalid path"}));
        }
    }
    let (_, response) = k.prompt("p2", json!("again"));
    assert_eq!(response["result"]["status"], "finished");
}

// ---------- item 5: nothing blocks the dispatcher ----------

/// Three large diffs in one step, then `cancel`: the cancel is answered and the server keeps
/// serving. The latency is printed (run with `--nocapture`), not asserted.
#[test]
fn cancel_is_answered_while_large_diffs_are_computed() {
    let env = Env::new();
    let mut lines = Vec::new();
    for n in 0..3 {
        let path = env.work().join(format!("big{n}.txt"));
        let old: String = (0..100_000).map(|i| format!("old line {i} {n}\n")).collect();
        std::fs::write(&path, old).unwrap();
        let new: String = (0..100_000)
            .map(|i| if i % 2 == 0 { format!("new line {i}\n") } else { format!("old line {i} {n}\n") })
            .collect();
        lines.push(call(&format!("w{n}"), "WriteFile", json!({"path": path, "content": new})));
    }
    let step = lines.join("\n");
    let config = env.scripted_config(&[&step, "text: after"]);
    let mut k = env.spawn(&config, &[]);
    start(&mut k, "p");
    // Tools start right after the step's StatusUpdate.
    loop {
        let m = k.next_within(Duration::from_secs(120)).expect("the step's events");
        if m["params"]["type"] == "StatusUpdate" {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    let sent = Instant::now();
    k.send(json!({"jsonrpc":"2.0","id":"c","method":"cancel"}));
    let mut answered = None;
    let mut cancelled = false;
    while answered.is_none() || !cancelled {
        let m = k.next_within(Duration::from_secs(120)).expect("kiwi answers");
        if m["id"] == "c" && m.get("method").is_none() {
            answered = Some(sent.elapsed());
            assert!(m.get("result").is_some(), "{m}");
        }
        if m["id"] == "p" && m.get("method").is_none() {
            assert_eq!(m["result"]["status"], "cancelled");
            cancelled = true;
        }
    }
    eprintln!("cancel answered after {:?}", answered.unwrap_or_default());
    let (events, response) = k.prompt("p2", json!("again"));
    assert_eq!(response["result"]["status"], "finished");
    assert!(types(&events).contains(&"ContentPart".to_string()));
}

// ---------- item 6: sizes are capped ----------

/// Files above the limit and edits whose result would exceed it (the content limit is tested in
/// `tools_files.rs`, in process: a 10 MiB script is slow to parse in a debug build).
#[test]
fn oversized_edits_are_refused() {
    let env = Env::new();
    let huge = env.work().join("huge.txt");
    std::fs::write(&huge, "x\n".repeat(6 << 20)).unwrap();
    let small = env.work().join("small.txt");
    std::fs::write(&small, "a".repeat(1 << 20)).unwrap();
    let config = env.scripted_config(&[
        &[
            call("o", "WriteFile", json!({"path": huge, "content": "short"})),
            call("s", "StrReplaceFile", json!({"path": huge, "edit": {"old": "x", "new": "z"}})),
            // 1 MiB of `a`, each replaced by 100 bytes: a 100 MiB result.
            call(
                "r",
                "StrReplaceFile",
                json!({"path": small, "edit": {"old": "a", "new": "b".repeat(100), "replace_all": true}}),
            ),
        ]
        .join("\n"),
        "text: ok",
    ]);
    let mut k = env.spawn(&config, &["--yolo"]);
    let (events, _) = k.prompt("p", json!("go"));
    for id in ["o", "s", "r"] {
        let r = result_of(&events, id);
        assert_eq!(r["is_error"], true, "{id}: {r}");
        assert!(r["message"].as_str().unwrap().contains("10 MiB"), "{id}: {r}");
        assert_eq!(r["display"][0], json!({"type": "brief", "text": "File too large"}));
    }
    assert_eq!(std::fs::metadata(&huge).unwrap().len(), 12 << 20);
    assert_eq!(std::fs::metadata(&small).unwrap().len(), 1 << 20);
}

#[test]
fn diff_displays_are_truncated_with_a_marker() {
    let env = Env::new();
    // Under the 10,000-line summary rule (`docs/protocol-1.10.md` §3.3), over the display cap.
    let content: String = (0..9_000).map(|i| format!("line number {i} {}\n", "w".repeat(120))).collect();
    assert!(content.len() > 1 << 20);
    let config =
        env.scripted_config(&[&call("w", "WriteFile", json!({"path": "big.txt", "content": content})), "text: ok"]);
    let mut k = env.spawn(&config, &[]);
    start(&mut k, "p");
    let (_, request) = k.until_request();
    let frame = serde_json::to_string(&request).unwrap();
    assert!(frame.len() < 1 << 20, "ApprovalRequest frame of {} bytes", frame.len());
    let display = request["params"]["payload"]["display"].as_array().unwrap();
    let last = display.last().unwrap();
    assert!(last["new_text"].as_str().unwrap().ends_with("[...diff truncated: too large to display]"), "{last}");
    answer(&mut k, &request, "approve");
    let (events, _) = k.until_response(&json!("p"));
    let r = result_of(&events, "w");
    assert_eq!(r["is_error"], false);
    assert!(serde_json::to_string(r).unwrap().len() < 1 << 20);
    assert_eq!(read(&env.work().join("big.txt")), content);
}

// ---------- item 10: symlinks and encodings ----------

/// A session-wide approval for edits inside the work dir does not cover a link pointing out of
/// it; the approval names the real target.
#[test]
fn inside_the_work_dir_is_decided_on_the_resolved_path() {
    let env = Env::new();
    let outside = env.dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("t.txt"), "secret\n").unwrap();
    std::os::unix::fs::symlink(outside.join("t.txt"), env.work().join("link.txt")).unwrap();
    std::os::unix::fs::symlink(&outside, env.work().join("sub")).unwrap();
    std::os::unix::fs::symlink(outside.join("none.txt"), env.work().join("dangling")).unwrap();
    let config = env.scripted_config(&[
        &call("a", "WriteFile", json!({"path": "a.txt", "content": "1\n"})),
        "text: ok",
        // A rejection ends the turn after its step: no closing script for these.
        &call("l", "StrReplaceFile", json!({"path": "link.txt", "edit": {"old": "secret", "new": "pwned"}})),
        &call("s", "WriteFile", json!({"path": "sub/new.txt", "content": "x\n"})),
        &call("d", "WriteFile", json!({"path": "dangling", "content": "x\n"})),
    ]);
    let mut k = env.spawn(&config, &[]);
    start(&mut k, "p0");
    let (_, request) = k.until_request();
    assert_eq!(request["params"]["payload"]["action"], "edit file");
    answer(&mut k, &request, "approve_for_session");
    k.until_response(&json!("p0"));

    let cases = [
        ("p1", outside.join("t.txt"), "Edit file"),
        ("p2", outside.join("new.txt"), "Write file"),
        ("p3", outside.join("none.txt"), "Write file"),
    ];
    for (id, real, verb) in cases {
        start(&mut k, id);
        let (_, request) = k.until_request();
        let p = &request["params"]["payload"];
        assert_eq!(p["action"], "edit file outside of working directory", "{id}");
        assert_eq!(p["description"], format!("{verb} `{}`", real.display()), "{id}");
        assert_eq!(p["display"][0]["path"], real.to_str().unwrap(), "{id}");
        answer(&mut k, &request, "reject");
        k.until_response(&json!(id));
    }
    assert_eq!(read(&outside.join("t.txt")), "secret\n");
    assert!(!outside.join("new.txt").exists() && !outside.join("none.txt").exists());
}

#[test]
fn files_that_are_not_utf8_are_not_edited() {
    let env = Env::new();
    let latin = env.work().join("latin.txt");
    let bytes = b"caf\xe9\nna\xefve\n".to_vec();
    std::fs::write(&latin, &bytes).unwrap();
    let config = env.scripted_config(&[
        &[
            call("s", "StrReplaceFile", json!({"path": latin, "edit": {"old": "na", "new": "NA"}})),
            call("a", "WriteFile", json!({"path": latin, "content": "more\n", "mode": "append"})),
        ]
        .join("\n"),
        "text: ok",
    ]);
    let mut k = env.spawn(&config, &["--yolo"]);
    let (events, _) = k.prompt("p", json!("go"));
    for id in ["s", "a"] {
        let r = result_of(&events, id);
        assert_eq!(r["is_error"], true, "{id}: {r}");
        assert!(r["message"].as_str().unwrap().contains("not valid UTF-8"), "{id}: {r}");
    }
    assert_eq!(std::fs::read(&latin).unwrap(), bytes);
}
