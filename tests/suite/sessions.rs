//! Sessions on disk: create, resume, continue, locking, torn lines, clear, compaction, skills,
//! flows and agent files.

use crate::common;

use std::path::PathBuf;
use std::time::Duration;

use common::{Env, types};
use serde_json::json;

fn lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap_or_default().lines().map(str::to_string).collect()
}

fn finish(mut k: common::Kiwi) {
    k.close_stdin();
    assert!(k.wait_exit(Duration::from_secs(5)).expect("exit").success());
}

#[test]
fn session_files_and_continue_appends() {
    let env = Env::new();
    let config = env.scripted_config(&["text: one", "text: two"]);
    let mut k = env.spawn(&config, &["--session", "e2e-session"]);
    k.prompt("p", json!("first"));
    finish(k);
    let dir = env.session_dir("e2e-session");
    let mut names: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into()).collect();
    names.sort();
    // `docs/protocol-1.10.md` §10.4: a simple session holds exactly these three files.
    assert_eq!(names, ["context.jsonl", "state.json", "wire.jsonl"]);
    let state: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("state.json")).unwrap()).unwrap();
    assert_eq!(state["custom_title"], "first", "the first prompt titles the session (§10.2)");
    // `docs/protocol-1.10.md` §10.3 (VERIFIED counts): `_system_prompt`, checkpoint, user, checkpoint,
    // assistant.
    let context = lines(&dir.join("context.jsonl"));
    assert_eq!(context.len(), 5);
    assert!(context[0].starts_with(r#"{"role": "_system_prompt", "content": ""#));
    assert_eq!(lines(&dir.join("wire.jsonl")).len(), 6);
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(env.share().join("kimi.json")).unwrap()).unwrap();
    assert_eq!(meta["work_dirs"][0]["last_session_id"], "e2e-session");
    assert_eq!(meta["work_dirs"][0]["path"], env.work().to_str().unwrap());

    // A new process starts the scripts again from the first one.
    let mut k = env.spawn(&config, &["--continue"]);
    let (events, _) = k.prompt("p", json!("second"));
    assert_eq!(events[2]["params"]["payload"]["text"], "one");
    finish(k);
    assert_eq!(lines(&dir.join("context.jsonl")).len(), 9, "a resumed turn adds 4, the prompt is not repeated");
    assert_eq!(lines(&dir.join("context.jsonl"))[0], context[0], "the recorded prompt is reused");
    assert_eq!(lines(&dir.join("wire.jsonl")).len(), 11);
}

#[test]
fn continue_without_a_session_is_a_usage_error() {
    let env = Env::new();
    let config = env.scripted_config(&[]);
    let out = env.command(&config, &["--continue"]).stdin(std::process::Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("No previous session found for the working directory"));
    assert!(out.stdout.is_empty());
}

#[test]
fn empty_sessions_are_removed_at_exit() {
    let env = Env::new();
    let config = env.scripted_config(&[]);
    let mut k = env.spawn(&config, &["--session", "empty"]);
    k.initialize();
    finish(k);
    assert!(!env.session_dir("empty").exists());
}

#[test]
fn resume_after_kill_with_a_torn_last_line() {
    let env = Env::new();
    let config = env.scripted_config(&["text: remembered", "text: after resume"]);
    let mut k = env.spawn(&config, &["--session", "torn"]);
    k.prompt("p", json!("keep this"));
    k.child.kill().unwrap();
    k.child.wait().unwrap();
    let dir = env.session_dir("torn");
    // Simulate a crash in the middle of writing the next line.
    let context = dir.join("context.jsonl");
    let mut text = std::fs::read_to_string(&context).unwrap();
    text.push_str("{\"role\":\"user\",\"content\":\"half");
    std::fs::write(&context, text).unwrap();
    std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join("wire.jsonl"))
        .and_then(|mut f| {
            use std::io::Write;
            f.write_all(b"{\"timestamp\": 1.0, \"mess")
        })
        .unwrap();

    let config2 = env.scripted_config(&["text: after resume"]);
    let mut k = env.spawn(&config2, &["--session", "torn"]);
    let (_, r) = k.prompt("p", json!("and this"));
    assert_eq!(r["result"]["status"], "finished");
    finish(k);
    let context_lines = lines(&context);
    assert!(context_lines.contains(&"{\"role\":\"user\",\"content\":\"keep this\"}".to_string()));
    assert!(
        context_lines.contains(&"{\"role\":\"user\",\"content\":\"half".to_string()),
        "the fragment stays on its own line"
    );
    assert!(context_lines.contains(&"{\"role\":\"user\",\"content\":\"and this\"}".to_string()));
    let wire = lines(&dir.join("wire.jsonl"));
    assert!(
        wire.iter()
            .filter(|l| !l.contains("\"mess") || l.ends_with('}'))
            .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok())
    );
}

#[test]
fn resumed_history_is_sent_to_the_model() {
    let env = Env::new();
    let echo = env.dir.path().join("echo.json");
    std::fs::write(&echo, r#"{"default_model":"e","models":{"e":{"provider":"p","model":"x","max_context_size":1000}},"providers":{"p":{"type":"_echo"}}}"#).unwrap();
    let mut k = env.spawn(&echo, &["--session", "echo"]);
    let (_, r) = k.prompt("p", json!("text: first answer"));
    assert_eq!(r["result"]["status"], "finished");
    finish(k);
    let context = lines(&env.session_dir("echo").join("context.jsonl"));
    // The tiny window compacts before the step; compaction records its estimate (`_usage`).
    assert_eq!(context.last().unwrap(), r#"{"role":"assistant","content":"first answer"}"#);
}

#[test]
fn clear_rotates_and_compact_events() {
    let env = Env::new();
    let config = env.scripted_config(&["text: a", "text: b"]);
    let mut k = env.spawn(&config, &["--session", "c"]);
    k.prompt("p1", json!("hello"));
    let (events, _) = k.prompt("p2", json!("/compact"));
    assert_eq!(
        types(&events),
        ["TurnBegin", "CompactionBegin", "CompactionEnd", "ContentPart", "StatusUpdate", "TurnEnd"]
    );
    assert_eq!(events[3]["params"]["payload"]["text"], "The context has been compacted.");
    // `docs/protocol-1.10.md` §4.5: no LLM call for two messages; the estimate is ⌊chars/4⌋ ("hello"+"a").
    assert_eq!(
        events[4]["params"]["payload"],
        json!({"context_usage":1e-05,"context_tokens":1,"max_context_tokens":100000,"token_usage":null,"message_id":null,"plan_mode":null,"mcp_status":null})
    );
    // Nothing was summarized, so no script was consumed: the next answer is the second script.
    let (events, _) = k.prompt("p3", json!("next"));
    assert_eq!(events[2]["params"]["payload"]["text"], "b");
    let (events, _) = k.prompt("p4", json!("/clear"));
    assert_eq!(types(&events), ["TurnBegin", "ContentPart", "StatusUpdate", "TurnEnd"]);
    finish(k);
    let dir = env.session_dir("c");
    // §10.3: the fresh file starts with the `_system_prompt` record, and holds nothing else.
    let fresh = lines(&dir.join("context.jsonl"));
    assert_eq!(fresh.len(), 1);
    assert!(fresh[0].starts_with(r#"{"role": "_system_prompt""#));
    assert!(dir.join("context_1.jsonl").exists() && dir.join("context_2.jsonl").exists());
}

#[test]
fn compact_summarizes_and_persists() {
    let env = Env::new();
    let config = env.scripted_config(&["text: a1", "text: a2", "text: SUMMARY OF EARLIER WORK"]);
    let mut k = env.spawn(&config, &["--session", "s"]);
    k.prompt("p1", json!("u1"));
    k.prompt("p2", json!("u2"));
    let (events, r) = k.prompt("p3", json!("/compact keep the names"));
    assert_eq!(r["result"]["status"], "finished");
    assert_eq!(
        types(&events),
        ["TurnBegin", "CompactionBegin", "CompactionEnd", "ContentPart", "StatusUpdate", "TurnEnd"]
    );
    finish(k);
    let context = lines(&env.session_dir("s").join("context.jsonl"));
    // §10.3: compaction starts the fresh file with the `_system_prompt` record too.
    assert!(context[0].starts_with(r#"{"role": "_system_prompt""#));
    assert_eq!(context[1], r#"{"role": "_checkpoint", "id": 0}"#);
    assert!(context[2].contains("SUMMARY OF EARLIER WORK") && context[2].starts_with(r#"{"role":"user""#));
    assert_eq!(context[3], r#"{"role":"user","content":"u2"}"#);
    assert_eq!(context[4], r#"{"role":"assistant","content":"a2"}"#);
}

#[test]
fn auto_compaction_from_usage() {
    let env = Env::new();
    let config =
        env.scripted_config(&["usage: input_other=60000 output=10\ntext: big", "text: the summary", "text: after"]);
    let mut k = env.spawn(&config, &[]);
    k.prompt("p1", json!("u1"));
    let (events, r) = k.prompt("p2", json!("u2"));
    assert_eq!(r["result"]["status"], "finished");
    assert_eq!(
        types(&events),
        ["TurnBegin", "StepBegin", "CompactionBegin", "CompactionEnd", "ContentPart", "StatusUpdate", "TurnEnd"]
    );
    assert_eq!(events[4]["params"]["payload"]["text"], "after");
}

fn write_skill(dir: &std::path::Path, name: &str, text: &str) {
    std::fs::create_dir_all(dir.join(name)).unwrap();
    std::fs::write(dir.join(name).join("SKILL.md"), text).unwrap();
}

#[test]
fn skills_are_listed_and_injected() {
    let env = Env::new();
    let skills = env.dir.path().join("skills");
    let skill_text = "---\nname: test\ndescription: A test skill\n---\n\nDo the test thing.";
    write_skill(&skills, "test", skill_text);
    write_skill(
        &skills,
        "test-flow",
        "---\nname: test-flow\ndescription: A flow\ntype: flow\n---\n```mermaid\nflowchart TD\nA([BEGIN]) --> B[Say hello]\nB --> C([END])\n```\n",
    );
    let config = env.scripted_config(&["text: skill done", "text: hello!"]);
    let mut k = env.spawn(&config, &["--skills-dir", skills.to_str().unwrap(), "--session", "sk"]);
    let init = k.initialize();
    let commands: Vec<(String, String)> = init["result"]["slash_commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["name"].as_str().unwrap().to_string(), c["description"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(
        commands[9..],
        [
            ("skill:test".to_string(), "A test skill".to_string()),
            ("skill:test-flow".to_string(), "A flow".to_string()),
            ("flow:test-flow".to_string(), "A flow".to_string())
        ]
    );
    let (events, r) = k.prompt("p1", json!("/skill:test"));
    assert_eq!(r["result"]["status"], "finished");
    assert_eq!(types(&events), ["TurnBegin", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd"]);
    let (events, r) = k.prompt("p2", json!("/flow:test-flow"));
    assert_eq!(r["result"]["status"], "finished");
    assert_eq!(
        types(&events),
        ["TurnBegin", "TurnBegin", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd", "TurnEnd"]
    );
    assert_eq!(events[1]["params"]["payload"]["user_input"], "Say hello");
    finish(k);
    let context = lines(&env.session_dir("sk").join("context.jsonl"));
    let stored: serde_json::Value = serde_json::from_str(&context[2]).unwrap();
    assert_eq!(stored["content"], skill_text);
}

#[test]
fn agent_file_excludes_a_tool() {
    let env = Env::new();
    let agent = env.dir.path().join("agent.yaml");
    std::fs::write(
        &agent,
        "version: 1\nagent:\n  extend: default\n  exclude_tools:\n    - kimi_cli.tools.shell:Shell\n",
    )
    .unwrap();
    let shell = r#"tool_call: {"id": "s", "name": "Shell", "arguments": "{\"command\": \"echo hi\"}"}"#;
    let config = env.scripted_config(&[shell, "text: ok"]);
    let mut k = env.spawn(&config, &["--agent-file", agent.to_str().unwrap()]);
    let (events, _) = k.prompt("p", json!("go"));
    let result = events.iter().find(|e| e["params"]["type"] == "ToolResult").unwrap();
    assert_eq!(result["params"]["payload"]["return_value"]["message"], "Tool `Shell` not found");
    // Excluded tools are not builtins any more, so a client may register one of that name.
    let init = k.call("i", "initialize", json!({"protocol_version":"1.2","external_tools":[{"name":"Shell","description":"mine","parameters":{"type":"object"}}]})).1;
    assert_eq!(init["result"]["external_tools"]["accepted"], json!(["Shell"]));
}

#[test]
fn ralph_loop_runs_until_max_iterations() {
    let env = Env::new();
    let config = env.scripted_config(&["text: did it", "text: <choice>CONTINUE</choice>", "text: never"]);
    let mut k = env.spawn(&config, &["--max-ralph-iterations", "1"]);
    let (events, r) = k.prompt("p", json!("work"));
    assert_eq!(r["result"], json!({"status":"max_steps_reached","steps":2}));
    assert_eq!(events[1]["params"]["payload"]["user_input"], json!([{"type":"text","text":"work"}]));
    assert_eq!(types(&events).iter().filter(|t| *t == "TurnBegin").count(), 3);
}

#[test]
fn init_runs_a_nested_turn_and_records_agents_md() {
    let env = Env::new();
    let path = env.work().join("AGENTS.md");
    let write = format!(
        "tool_call: {}",
        json!({"id":"w","name":"WriteFile","arguments": json!({"path": path, "content": "# Project notes\n"}).to_string()})
    );
    let config = env.scripted_config(&[&write, "text: wrote it"]);
    let mut k = env.spawn(&config, &["--yolo", "--session", "init"]);
    let (events, r) = k.prompt("p", json!("/init"));
    assert_eq!(r["result"]["status"], "finished");
    assert_eq!(
        types(&events),
        [
            "TurnBegin",
            "TurnBegin",
            "StepBegin",
            "ToolCall",
            "StatusUpdate",
            "ToolResult",
            "StepBegin",
            "ContentPart",
            "StatusUpdate",
            "TurnEnd",
            "TurnEnd"
        ]
    );
    assert_ne!(events[1]["params"]["payload"]["user_input"], "/init");
    finish(k);
    let context = lines(&env.session_dir("init").join("context.jsonl"));
    assert_eq!(context.len(), 2, "the prompt record, then only the note: {context:?}");
    assert!(context[1].contains("# Project notes"));
}

#[test]
fn dmail_rewinds_the_context() {
    let env = Env::new();
    let send = r#"tool_call: {"id": "d", "name": "SendDMail", "arguments": "{\"message\": \"skip the detour\", \"checkpoint_id\": 1}"}"#;
    let bad =
        r#"tool_call: {"id": "b", "name": "SendDMail", "arguments": "{\"message\": \"x\", \"checkpoint_id\": 99}"}"#;
    let config = env.scripted_config(&["text: first", send, "text: after the mail", bad, "text: ok"]);
    let mut k = env.spawn(&config, &["--agent", "okabe", "--session", "dm"]);
    k.prompt("p1", json!("one"));
    let (events, r) = k.prompt("p2", json!("two"));
    assert_eq!(r["result"]["status"], "finished");
    assert_eq!(
        types(&events),
        [
            "TurnBegin",
            "StepBegin",
            "ToolCall",
            "StatusUpdate",
            "ToolResult",
            "StepBegin",
            "ContentPart",
            "StatusUpdate",
            "TurnEnd"
        ]
    );
    assert_eq!(
        events[4]["params"]["payload"]["return_value"]["display"],
        json!([{"type":"brief","text":"El Psy Kongroo"}])
    );
    let (events, _) = k.prompt("p3", json!("three"));
    let result = events.iter().find(|e| e["params"]["type"] == "ToolResult").unwrap();
    assert_eq!(
        result["params"]["payload"]["return_value"]["message"],
        "Failed to send D-Mail. Error: There is no checkpoint with the given ID"
    );
    finish(k);
    let dir = env.session_dir("dm");
    assert!(dir.join("context_1.jsonl").exists(), "the rewound context is archived");
    let context = lines(&dir.join("context.jsonl"));
    assert!(context[0].starts_with(r#"{"role": "_system_prompt""#), "kept by the rewind");
    assert_eq!(context[1], r#"{"role": "_checkpoint", "id": 0}"#);
    assert_eq!(context[2], r#"{"role":"user","content":"<system>CHECKPOINT 0</system>"}"#);
    assert_eq!(context[3], r#"{"role":"user","content":"one"}"#);
    let text = context.join("\n");
    assert!(text.contains("skip the detour"));
    assert!(!text.contains(r#""content":"two""#), "the rewound prompt is gone");
    assert!(text.contains("after the mail"));
}

/// `docs/soul.md` §9: the nested `/init` run enters through the normal entry point, so with the Ralph
/// loop enabled it runs as the R1/R2 flow inside the `/init` sub-turn.
#[test]
fn init_is_subject_to_the_ralph_loop() {
    let env = Env::new();
    let config = env.scripted_config(&["text: wrote it", "text: <choice>STOP</choice>"]);
    let mut k = env.spawn(&config, &["--max-ralph-iterations", "1"]);
    let (events, r) = k.prompt("p", json!("/init"));
    assert_eq!(r["result"], json!({"status":"finished"}), "{:?}", types(&events));
    assert_eq!(
        types(&events),
        [
            "TurnBegin",
            "TurnBegin",
            "TurnBegin",
            "StepBegin",
            "ContentPart",
            "StatusUpdate",
            "TurnEnd",
            "TurnBegin",
            "StepBegin",
            "ContentPart",
            "StatusUpdate",
            "TurnEnd",
            "TurnEnd",
            "TurnEnd"
        ]
    );
    let init_prompt = events[1]["params"]["payload"]["user_input"].clone();
    assert!(init_prompt.is_string());
    assert_eq!(events[2]["params"]["payload"]["user_input"], json!([{"type":"text","text":init_prompt}]));
}

/// Safety: a session id is a name. `--session ..` once removed every session of every project at
/// exit, and `--session /some/dir` that directory.
#[test]
fn path_like_session_ids_are_usage_errors_and_delete_nothing() {
    let env = Env::new();
    let config = env.scripted_config(&[]);
    // Another project's session, and a directory outside the share dir.
    let other = env.share().join("sessions").join("0123").join("kept");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("context.jsonl"), "{}\n").unwrap();
    let outside = env.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("precious.txt"), "mine").unwrap();
    for id in ["..", ".", "../..", outside.to_str().unwrap(), "a/b", "a\\b"] {
        let out = env.command(&config, &["--session", id]).stdin(std::process::Stdio::null()).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{id}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains("Invalid session id"), "{id}: {stderr}");
        assert!(out.stdout.is_empty());
    }
    assert!(other.join("context.jsonl").exists());
    assert!(outside.join("precious.txt").exists());
}

/// Safety (`docs/sessions.md` §7.1): `--session <id>` resumes a folder that holds a `context.jsonl` even
/// when `kimi.json` has no entry for the work dir; the reference (`docs/sessions.md` §3) says "not found"
/// and the reference then truncated the history.
#[test]
fn session_without_a_kimi_json_entry_is_resumed_not_truncated() {
    let env = Env::new();
    let config = env.scripted_config(&["text: one", "text: two"]);
    let mut k = env.spawn(&config, &["--session", "kept"]);
    k.prompt("p", json!("first"));
    finish(k);
    let context = env.session_dir("kept").join("context.jsonl");
    // `_system_prompt` (`docs/protocol-1.10.md` §10.3), then the turn's four records.
    assert_eq!(lines(&context).len(), 5);
    // kimi.json forgets the work dir (another tool rewrote it, or it was moved aside).
    std::fs::write(env.share().join("kimi.json"), "{\"work_dirs\": []}").unwrap();
    let mut k = env.spawn(&config, &["--session", "kept"]);
    k.prompt("p", json!("second"));
    finish(k);
    let after = lines(&context);
    assert_eq!(after.len(), 9, "{after:#?}");
    assert_eq!(after[2], "{\"role\":\"user\",\"content\":\"first\"}");
}

/// An unreadable `kimi.json` is moved aside (`kimi.json.bad-<time>`) with a warning, never
/// silently replaced; one bad entry in `work_dirs` does not drop the good ones.
#[test]
fn a_broken_kimi_json_is_kept_aside_and_bad_entries_do_not_drop_good_ones() {
    let env = Env::new();
    let config = env.scripted_config(&["text: one", "text: two"]);
    std::fs::create_dir_all(env.share()).unwrap();
    let kimi_json = env.share().join("kimi.json");
    std::fs::write(&kimi_json, "{\"work_dirs\": [ {\"path\": \"/x\",").unwrap();
    let mut k = env.spawn(&config, &["--session", "s1"]);
    k.prompt("p", json!("first"));
    finish(k);
    let bad_files = || -> Vec<PathBuf> {
        std::fs::read_dir(env.share())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("kimi.json.bad-"))
            .collect()
    };
    let aside = bad_files();
    assert_eq!(aside.len(), 1, "{aside:?}");
    let log = std::fs::read_to_string(env.share().join("logs").join("kiwi.log")).unwrap();
    assert!(log.lines().any(|l| l.contains("WARN") && l.contains("kimi.json.bad-")), "{log}");
    assert_eq!(std::fs::read_to_string(&aside[0]).unwrap(), "{\"work_dirs\": [ {\"path\": \"/x\",");
    let meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&kimi_json).unwrap()).unwrap();
    assert_eq!(meta["work_dirs"][0]["last_session_id"], "s1");

    // One entry of the wrong shape among good ones.
    let work = env.work().to_str().unwrap().to_string();
    let text = serde_json::to_string_pretty(&json!({"work_dirs": [
        {"path": "/elsewhere", "kaos": "local", "last_session_id": "theirs"},
        {"path": 42, "kaos": ["odd"]},
        {"path": work, "kaos": "local", "last_session_id": "s1"},
    ]}))
    .unwrap();
    std::fs::write(&kimi_json, text).unwrap();
    let mut k = env.spawn(&config, &["--continue"]);
    let (_, r) = k.prompt("p", json!("again"));
    assert_eq!(r["result"]["status"], "finished");
    finish(k);
    // `_system_prompt` plus two turns of four records (`docs/protocol-1.10.md` §10.3).
    assert_eq!(lines(&env.session_dir("s1").join("context.jsonl")).len(), 9);
    let meta: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&kimi_json).unwrap()).unwrap();
    let entries = meta["work_dirs"].as_array().unwrap();
    assert!(entries.contains(&json!({"path": "/elsewhere", "kaos": "local", "last_session_id": "theirs"})), "{meta}");
    // The entry kiwi cannot read is kept as it was, for whoever wrote it.
    assert!(entries.contains(&json!({"path": 42, "kaos": ["odd"]})), "{meta}");
    assert_eq!(bad_files(), aside, "a readable file is not moved aside");
}

/// Safety (`docs/sessions.md` §7.2): a session write that fails midway does not poison the session.
/// kiwi runs under a file-size limit (`RLIMIT_FSIZE`, the kernel's "disk full" for one process):
/// the record that crosses it fails, is cut back, is logged with a WARN naming the file and
/// cause, and the client gets a -32603 answer saying so; the next turn's records are written
/// clean and a resume loses only the failed record.
#[test]
fn a_failed_session_write_is_cut_back_logged_and_reported() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::process::CommandExt;
    use std::sync::{Arc, Mutex, mpsc};

    let env = Env::new();
    let config = env.scripted_config(&["text: one", "text: two", "text: three"]);
    let mut cmd = env.command(&config, &["--session", "full", "--log-stderr"]);
    // SAFETY: async-signal-safe calls only (signal, setrlimit) between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let limit = libc::rlimit { rlim_cur: 4000, rlim_max: libc::RLIM_INFINITY };
            if libc::setrlimit(libc::RLIMIT_FSIZE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.stdin(std::process::Stdio::piped()).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let (tx, rx) = mpsc::channel::<serde_json::Value>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str(&line) {
                let _ = tx.send(v);
            }
        }
    });
    let log = Arc::new(Mutex::new(String::new()));
    let stderr = child.stderr.take().unwrap();
    let sink = log.clone();
    let logger = std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            sink.lock().unwrap().push_str(&(line + "\n"));
        }
    });
    let mut prompt = move |id: &str, input: String| -> serde_json::Value {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "prompt", "params": {"user_input": input}});
        stdin.write_all(format!("{request}\n").as_bytes()).unwrap();
        loop {
            let m = rx.recv_timeout(common::TIMEOUT).expect("an answer");
            if m.get("method").is_none() && m["id"] == id {
                return m;
            }
        }
    };
    // The user message (and its wire record) is larger than the limit.
    let big = "x".repeat(5000);
    let r = prompt("p1", big);
    let context = env.session_dir("full").join("context.jsonl");
    assert_eq!(r["error"]["code"], -32603, "{r}");
    let message = r["error"]["message"].as_str().unwrap();
    // `docs/protocol-1.10.md` §2.3: -32603 is `<Kind>: <text>`.
    assert!(
        message.starts_with(&format!("OSError: Failed to write the session file {}: ", context.display())),
        "{message}"
    );
    let r = prompt("p2", "small".into());
    assert_eq!(r["result"]["status"], "finished", "{r}");
    drop(prompt);
    assert!(child.wait().unwrap().success());
    logger.join().unwrap();
    let log = log.lock().unwrap().clone();
    assert!(
        log.lines()
            .any(|l| l.contains("WARN") && l.contains(&context.display().to_string()) && l.contains("too large")),
        "{log}"
    );
    // Every line of both files is whole; nothing of the failed records is left.
    for name in ["context.jsonl", "wire.jsonl"] {
        for line in lines(&env.session_dir("full").join(name)) {
            assert!(serde_json::from_str::<serde_json::Value>(&line).is_ok(), "{name}: {line:.80}");
            assert!(!line.contains("xxxx"), "{name}: {line:.80}");
        }
    }
    assert!(lines(&context).contains(&"{\"role\":\"user\",\"content\":\"small\"}".to_string()));
    // A resume sees the rest of the history.
    let mut k = env.spawn(&config, &["--session", "full"]);
    let (_, r) = k.prompt("p3", json!("again"));
    assert_eq!(r["result"]["status"], "finished");
    finish(k);
    let after = lines(&context);
    assert_eq!(after.iter().filter(|l| l.contains("\"role\":\"user\"")).count(), 2, "{after:#?}");
}

fn shell_call(id: &str, command: &str) -> String {
    let args = serde_json::to_string(&json!({ "command": command })).unwrap();
    format!("tool_call: {}", json!({"id": id, "name": "Shell", "arguments": args}))
}

fn saved_approval(env: &Env, id: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(env.session_dir(id).join("state.json")).unwrap();
    serde_json::from_str::<serde_json::Value>(&text).unwrap()["approval"].clone()
}

/// `docs/protocol-1.10.md` §10.2 (corrected): `--yolo`, and the yolo print mode implies, hold for their
/// run only; `state.json` keeps what the user chose inside the session.
#[test]
fn an_invocation_flag_is_never_saved_with_the_session() {
    let env = Env::new();
    let pwned = env.work().join("PWNED");
    let touch = format!("touch {}", pwned.display());
    // One `--yolo` run: its command runs without a request.
    let config = env.named_scripted_config("yolo", &[&shell_call("a", "echo first"), "text: ok"], json!({}));
    let mut k = env.spawn(&config, &["--yolo", "--session", "s1"]);
    let (events, response) = k.prompt("p", json!("first"));
    assert_eq!(response["result"]["status"], "finished");
    assert!(!types(&events).iter().any(|t| t.starts_with("request")));
    finish(k);
    assert_eq!(saved_approval(&env, "s1"), json!({"yolo": false, "afk": false, "auto_approve_actions": []}));
    // The next run without it asks.
    let config = env.named_scripted_config("later", &[&shell_call("b", &touch), "text: never"], json!({}));
    let mut k = env.spawn(&config, &["--session", "s1"]);
    k.send(json!({"jsonrpc":"2.0","id":"p","method":"prompt","params":{"user_input":"again"}}));
    let (_, request) = k.until_request();
    assert_eq!(request["params"]["type"], "ApprovalRequest");
    let id = request["id"].clone();
    k.send(json!({"jsonrpc":"2.0","id":id,"result":{"request_id":id,"response":"reject"}}));
    k.until_response(&json!("p"));
    finish(k);
    assert!(!pwned.exists());
    // kimi's print mode implies yolo, for its own run.
    let config = env.named_scripted_config("print", &["text: printed"], json!({}));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kiwi"))
        .args(["--print", "--session", "s2", "-p", "hello", "--config-file"])
        .arg(&config)
        .arg("--work-dir")
        .arg(env.work())
        .env("HOME", env.home())
        .env("KIMI_SHARE_DIR", env.share())
        .env_remove("KIMI_SCRIPTED_ECHO_TRACE")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(saved_approval(&env, "s2")["yolo"], false);
}
