//! Hooks end to end (`docs/protocol-1.10.md` §5) over real pipes: command hooks from the config file and
//! client subscriptions, every decision path, the events around them, and that no hook can hang a
//! turn or the exit.

use crate::common;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{Env, Kiwi, types};
use serde_json::{Value, json};

fn call(id: &str, name: &str, arguments: Value) -> String {
    format!("tool_call: {}", json!({"id": id, "name": name, "arguments": arguments.to_string()}))
}

fn hooked(env: &Env, scripts: &[&str], hooks: Value) -> PathBuf {
    env.scripted_config_with(scripts, json!({ "hooks": hooks }))
}

fn initialize(k: &mut Kiwi, hooks: Value) -> Value {
    k.call("init", "initialize", json!({"protocol_version":"1.10","hooks":hooks})).1
}

/// Waits for a file a fire-and-forget hook writes.
fn wait_for(path: &Path) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && !text.is_empty()
        {
            return text;
        }
        assert!(Instant::now() < deadline, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn payload(e: &Value) -> &Value {
    &e["params"]["payload"]
}

/// §5.3 (VERIFIED): a blocking `UserPromptSubmit` hook answers before any step, and the prompt
/// never reaches the context; the matcher is a regex search.
#[test]
fn a_blocking_prompt_hook() {
    let env = Env::new();
    let config = hooked(
        &env,
        &["text: fine"],
        json!([{"event":"UserPromptSubmit","command":"echo 'no way' >&2; exit 2","matcher":"forbid+en"}]),
    );
    let mut k = env.spawn(&config, &["--session", "ups"]);
    initialize(&mut k, json!([]));
    let (events, response) = k.prompt("p1", json!("this is forbidden"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(types(&events), ["HookTriggered", "HookResolved", "TurnBegin", "ContentPart", "TurnEnd"]);
    assert_eq!(payload(&events[0]), &json!({"event":"UserPromptSubmit","target":"this is forbidden","hook_count":1}));
    let resolved = payload(&events[1]);
    assert_eq!((&resolved["action"], &resolved["reason"]), (&json!("block"), &json!("no way")));
    assert!(resolved["duration_ms"].is_u64());
    assert_eq!(payload(&events[3])["text"], "no way");
    let (events, _) = k.prompt("p2", json!("this is fine"));
    assert_eq!(
        types(&events),
        ["TurnBegin", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd"],
        "no match, no events"
    );
    k.close_stdin();
    k.wait_exit(Duration::from_secs(5));
    let dir = std::fs::read_dir(env.share().join("sessions")).unwrap().next().unwrap().unwrap().path().join("ups");
    let context = std::fs::read_to_string(dir.join("context.jsonl")).unwrap();
    assert!(!context.contains("forbidden"), "a blocked prompt is not stored");
    let wire = std::fs::read_to_string(dir.join("wire.jsonl")).unwrap();
    assert!(wire.contains("\"HookTriggered\"") && wire.contains("\"HookResolved\""), "hook events are recorded");
}

/// §5.3 (VERIFIED result shape): a `PreToolUse` deny on stdout blocks the tool before its
/// approval; an empty reason gets the default message.
#[test]
fn pre_tool_use_deny_blocks_the_call() {
    let env = Env::new();
    let deny = r#"echo '{"hookSpecificOutput":{"permissionDecision":"deny","permissionDecisionReason":"use rg"}}'"#;
    let script = format!(
        "{}\n{}",
        call("a", "Shell", json!({"command":"grep -r x ."})),
        call("b", "Glob", json!({"pattern":"*"}))
    );
    let config = hooked(
        &env,
        &[&script, "text: ok"],
        json!([{"event":"PreToolUse","command":deny,"matcher":"^Shell$"},{"event":"PreToolUse","command":"exit 2","matcher":"Glob"}]),
    );
    let mut k = env.spawn(&config, &[]);
    initialize(&mut k, json!([]));
    let (events, response) = k.prompt("p", json!("search"));
    assert_eq!(response["result"]["status"], "finished", "a blocked call does not end the turn");
    assert!(!types(&events).iter().any(|t| t.starts_with("request")), "blocked before its approval");
    let result = |id: &str| {
        payload(
            events.iter().find(|e| e["params"]["type"] == "ToolResult" && payload(e)["tool_call_id"] == id).unwrap(),
        )["return_value"]
            .clone()
    };
    assert_eq!(
        result("a"),
        json!({"is_error":true,"output":"","message":"use rg","display":[{"type":"brief","text":"Hook blocked"}],"extras":null})
    );
    assert_eq!(result("b")["message"], "Blocked by PreToolUse hook");
    let triggered: Vec<&Value> =
        events.iter().filter(|e| e["params"]["type"] == "HookTriggered").map(payload).collect();
    assert_eq!(triggered.len(), 2);
    assert!(triggered.iter().all(|t| t["event"] == "PreToolUse" && t["hook_count"] == 1));
}

/// §5.1/§5.3: what a command hook gets on stdin, and `PostToolUse` after the result.
#[test]
fn hook_inputs_and_post_tool_use() {
    let env = Env::new();
    let pre = env.dir.path().join("pre.json");
    let post = env.dir.path().join("post.json");
    let script = call("c1", "Shell", json!({"command":"echo hé"}));
    let config = hooked(
        &env,
        &[&script, "text: done"],
        json!([
            {"event":"PreToolUse","command":format!("cat > {}", pre.display())},
            {"event":"PostToolUse","command":format!("cat > {}.tmp && mv {0}.tmp {0}", post.display()),"matcher":"Shell"}
        ]),
    );
    let mut k = env.spawn(&config, &["--yolo", "--session", "in"]);
    let (events, response) = k.prompt("p", json!("go"));
    assert_eq!(response["result"]["status"], "finished");
    assert!(!types(&events).iter().any(|t| t.starts_with("Hook")), "before initialize config hooks run silently");
    let text = std::fs::read_to_string(&pre).unwrap();
    assert!(text.starts_with(r#"{"hook_event_name": "PreToolUse", "session_id": "in", "cwd": ""#), "{text}");
    assert!(text.contains(r#""tool_input": {"command": "echo h\u00e9"}"#), "ASCII-escaped: {text}");
    let input: Value = serde_json::from_str(&text).unwrap();
    assert_eq!((&input["tool_name"], &input["tool_call_id"]), (&json!("Shell"), &json!("c1")));
    assert_eq!(input["cwd"], env.work().to_str().unwrap());
    let input: Value = serde_json::from_str(&wait_for(&post)).unwrap();
    assert_eq!(input["hook_event_name"], "PostToolUse");
    assert_eq!(
        input["tool_output"],
        "is_error=False output='hé\\n' message='Command executed successfully.' display=[] extras=None"
    );
}

/// §5.4: client subscriptions get a `HookRequest` (not recorded); a block answer blocks, an error
/// answer and a timeout allow.
#[test]
fn client_hooks_block_and_fail_open() {
    let env = Env::new();
    let shell = |id: &str| call(id, "Shell", json!({"command":"echo ran"}));
    let config = env.scripted_config(&[&shell("a"), "text: one", &shell("b"), "text: two", &shell("c"), "text: three"]);
    let mut k = env.spawn(&config, &["--yolo", "--session", "ch"]);
    let init = initialize(&mut k, json!([{"id":"sub-1","event":"PreToolUse","matcher":"Shell","timeout":1}]));
    assert_eq!(init["result"]["hooks"]["configured"], json!({"PreToolUse":1}));
    let hook_turn = |k: &mut Kiwi, id: &str, answer: Option<Value>| -> Vec<Value> {
        k.send(json!({"jsonrpc":"2.0","id":id,"method":"prompt","params":{"user_input":"go"}}));
        let (before, request) = k.until_request();
        assert_eq!(types(&before).last().unwrap(), "HookTriggered");
        assert_eq!(request["params"]["type"], "HookRequest");
        let p = payload(&request);
        assert_eq!(request["id"], p["id"]);
        assert!(p["id"].as_str().unwrap().len() == 12);
        assert_eq!(
            (&p["subscription_id"], &p["event"], &p["target"]),
            (&json!("sub-1"), &json!("PreToolUse"), &json!("Shell"))
        );
        assert_eq!(p["input_data"]["hook_event_name"], "PreToolUse");
        if let Some(answer) = answer {
            k.send(json!({"jsonrpc":"2.0","id":request["id"],"result":answer}));
        }
        k.until_response(&json!(id)).0
    };
    let events = hook_turn(&mut k, "p1", Some(json!({"request_id":"x","action":"block","reason":"not now"})));
    assert_eq!(payload(&events[0])["action"], "block");
    let result = events.iter().find(|e| e["params"]["type"] == "ToolResult").unwrap();
    assert_eq!(payload(result)["return_value"]["message"], "not now");
    let events = hook_turn(&mut k, "p2", Some(json!({"oops": true})));
    let result = events.iter().find(|e| e["params"]["type"] == "ToolResult").unwrap();
    assert_eq!(payload(result)["return_value"]["output"], "ran\n", "an invalid answer allows");
    let events = hook_turn(&mut k, "p3", None);
    assert_eq!(payload(&events[0])["action"], "allow", "no answer within 1 s allows");
    let result = events.iter().find(|e| e["params"]["type"] == "ToolResult").unwrap();
    assert_eq!(payload(result)["return_value"]["output"], "ran\n");
    k.close_stdin();
    k.wait_exit(Duration::from_secs(5));
    let dir = std::fs::read_dir(env.share().join("sessions")).unwrap().next().unwrap().unwrap().path().join("ch");
    let wire = std::fs::read_to_string(dir.join("wire.jsonl")).unwrap();
    assert!(!wire.contains("HookRequest"), "hook requests are not recorded (§10.1)");
}

/// §5.1: a blocking `Stop` hook with a reason runs the agent once more (steps from 1 again, no new
/// `TurnBegin`), and only once per prompt.
#[test]
fn a_stop_hook_keeps_the_agent_going_once() {
    let env = Env::new();
    let config = hooked(
        &env,
        &["text: done?", "text: now with tests"],
        json!([{"event":"Stop","command":"echo 'write the tests too' >&2; exit 2"}]),
    );
    let mut k = env.spawn(&config, &["--session", "stop"]);
    initialize(&mut k, json!([]));
    let (events, response) = k.prompt("p", json!("implement it"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(
        types(&events),
        [
            "TurnBegin",
            "StepBegin",
            "ContentPart",
            "StatusUpdate",
            "HookTriggered",
            "HookResolved",
            "StepBegin",
            "ContentPart",
            "StatusUpdate",
            "TurnEnd"
        ]
    );
    assert_eq!(payload(&events[6]), &json!({"n": 1}));
    assert_eq!(payload(&events[4])["target"], "");
    k.close_stdin();
    k.wait_exit(Duration::from_secs(5));
    let dir = std::fs::read_dir(env.share().join("sessions")).unwrap().next().unwrap().unwrap().path().join("stop");
    let context = std::fs::read_to_string(dir.join("context.jsonl")).unwrap();
    assert!(context.contains(r#"{"role":"user","content":"write the tests too"}"#));
}

/// A `PreToolUse` hook that exits 2 while a background child keeps its
/// stdout and stderr open blocks the call (its exit decides, not the end of its output), with the
/// reason it wrote; the child is killed. Before, this waited for the timeout and allowed the call.
#[test]
fn a_hook_that_exits_2_blocks_even_if_its_child_holds_the_output() {
    let env = Env::new();
    let marker = format!("kiwi-hook-bg-{}", std::process::id());
    let proof = env.work().join("ran");
    let script = call("a", "Shell", json!({"command": format!("touch {}", proof.display())}));
    let hook = format!("sh -c 'sleep 60; echo {marker}' & echo 'not while I live' >&2; exit 2");
    let config = hooked(&env, &[&script, "text: ok"], json!([{"event":"PreToolUse","command":hook,"timeout":2}]));
    let mut k = env.spawn(&config, &["--yolo"]);
    initialize(&mut k, json!([]));
    let (events, response) = k.prompt("p", json!("touch it"));
    assert_eq!(response["result"]["status"], "finished");
    let resolved = events.iter().find(|e| e["params"]["type"] == "HookResolved").map(payload).unwrap();
    assert_eq!((&resolved["action"], &resolved["reason"]), (&json!("block"), &json!("not while I live")));
    let result = events.iter().find(|e| e["params"]["type"] == "ToolResult").map(payload).unwrap();
    assert_eq!(result["return_value"]["is_error"], true);
    assert_eq!(result["return_value"]["message"], "not while I live");
    assert!(!proof.exists(), "the blocked call ran");
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive_with(&marker) {
        assert!(Instant::now() < deadline, "the hook's background child was left running");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A hook that hangs is killed with its process group when its time is up; the turn goes on.
#[test]
fn a_hanging_hook_is_killed_and_allows() {
    let env = Env::new();
    let marker = format!("kiwi-hook-hang-{}", std::process::id());
    let config = hooked(
        &env,
        &["text: went on"],
        json!([{"event":"UserPromptSubmit","command":format!("sleep 60 & sleep 61; echo {marker}"),"timeout":1}]),
    );
    let mut k = env.spawn(&config, &[]);
    initialize(&mut k, json!([]));
    let (events, response) = k.prompt("p", json!("go"));
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(payload(&events[1])["action"], "allow");
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive_with(&marker) {
        assert!(Instant::now() < deadline, "the hook's processes survived its timeout");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// EOF while a hook runs: the server exits promptly and the hook dies with it.
#[test]
fn a_running_hook_never_keeps_the_server_alive() {
    let env = Env::new();
    let marker = format!("kiwi-hook-eof-{}", std::process::id());
    let config = hooked(
        &env,
        &[],
        json!([{"event":"UserPromptSubmit","command":format!("sleep 60; echo {marker}"),"timeout":600}]),
    );
    let mut k = env.spawn(&config, &[]);
    k.send(json!({"jsonrpc":"2.0","id":"p","method":"prompt","params":{"user_input":"go"}}));
    let deadline = Instant::now() + Duration::from_secs(5);
    while !alive_with(&marker) {
        assert!(Instant::now() < deadline, "the hook did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    k.close_stdin();
    assert!(k.wait_exit(Duration::from_secs(10)).expect("exits").success());
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive_with(&marker) {
        assert!(Instant::now() < deadline, "the hook outlived the server");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn alive_with(marker: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        let pid = e.file_name();
        let Some(pid) = pid.to_str().filter(|p| p.chars().all(|c| c.is_ascii_digit())) else { return false };
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let zombie = stat.rsplit(')').next().is_some_and(|r| r.trim_start().starts_with('Z'));
        !zombie && String::from_utf8_lossy(&cmd).contains(marker) && !String::from_utf8_lossy(&cmd).contains("cargo")
    })
}

/// §5.1: session hooks run at start-up and exit, never visible on the wire; compaction and step
/// failures have their hooks too.
#[test]
fn session_compaction_and_failure_hooks() {
    let env = Env::new();
    let dir = env.dir.path().join("hooks");
    std::fs::create_dir_all(&dir).unwrap();
    let save = |event: &str| json!({"event": event, "command": format!("cat > {}/{event}.json", dir.display())});
    let config = hooked(
        &env,
        &["text: a", "text: b", "text: c", "text: summary", "error: 400 nope"],
        json!([save("SessionStart"), save("SessionEnd"), save("PreCompact"), save("PostCompact"), save("StopFailure")]),
    );
    let mut k = env.spawn(&config, &["--session", "sess"]);
    initialize(&mut k, json!([{"id":"s","event":"SessionEnd"}]));
    k.prompt("p1", json!("one"));
    k.prompt("p2", json!("two"));
    k.prompt("p3", json!("three"));
    let (events, _) = k.prompt("c", json!("/compact keep names"));
    // PostCompact resolves on its own time; everything else is in order.
    let tys: Vec<String> =
        types(&events).into_iter().enumerate().filter(|(i, t)| *i < 3 || t != "HookResolved").map(|(_, t)| t).collect();
    assert_eq!(
        tys,
        [
            "TurnBegin",
            "HookTriggered",
            "HookResolved",
            "CompactionBegin",
            "CompactionEnd",
            "HookTriggered",
            "ContentPart",
            "StatusUpdate",
            "TurnEnd"
        ]
    );
    assert_eq!(payload(&events[1])["target"], "manual-with-prompt");
    let (events, response) = k.prompt("f", json!("fail"));
    assert_eq!(response["error"]["code"], -32003);
    assert!(types(&events).contains(&"StepInterrupted".to_string()));
    k.close_stdin();
    let started = Instant::now();
    assert!(k.wait_exit(Duration::from_secs(10)).unwrap().success());
    assert!(started.elapsed() < Duration::from_secs(5), "a SessionEnd subscription does not delay the exit");
    assert!(!k.seen.iter().any(|m| m["params"]["type"] == "HookRequest"), "session hooks never reach the client");
    let read = |event: &str| -> Value { serde_json::from_str(&wait_for(&dir.join(format!("{event}.json")))).unwrap() };
    assert_eq!(read("SessionStart")["source"], "startup");
    assert_eq!(read("SessionEnd")["reason"], "exit");
    let pre = read("PreCompact");
    assert_eq!(pre["trigger"], "manual-with-prompt");
    assert!(pre["token_count"].is_u64());
    assert!(read("PostCompact")["estimated_token_count"].is_u64());
    let failure = read("StopFailure");
    assert_eq!((&failure["error_type"], &failure["error_message"]), (&json!("APIStatusError"), &json!("nope")));
}

/// §4.4: a cancel that lands while the `UserPromptSubmit` hooks run answers `cancelled` with
/// neither `TurnBegin` nor `TurnEnd`, and the hook dies with the turn.
#[test]
fn cancel_before_turn_begin() {
    let env = Env::new();
    let marker = format!("kiwi-hook-cancel-{}", std::process::id());
    let config = hooked(
        &env,
        &["text: later"],
        json!([{"event":"UserPromptSubmit","command":format!("sleep 60; echo {marker}")}]),
    );
    let mut k = env.spawn(&config, &[]);
    initialize(&mut k, json!([]));
    k.send(json!({"jsonrpc":"2.0","id":"p","method":"prompt","params":{"user_input":"go"}}));
    assert_eq!(k.next()["params"]["type"], "HookTriggered");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !alive_with(&marker) {
        assert!(Instant::now() < deadline, "the hook did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    k.send(json!({"jsonrpc":"2.0","id":"c","method":"cancel"}));
    let (events, response) = k.until_response(&json!("p"));
    assert_eq!(response["result"], json!({"status":"cancelled"}));
    assert_eq!(types(&events), ["response"], "only the cancel's answer: {events:?}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive_with(&marker) {
        assert!(Instant::now() < deadline, "the hook outlived its cancelled turn");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// §5.1: `SessionStart` says `resume` when a session is resumed.
#[test]
fn session_start_on_resume() {
    let env = Env::new();
    let dir = env.dir.path().join("start");
    std::fs::create_dir_all(&dir).unwrap();
    let config = hooked(
        &env,
        &["text: a"],
        json!([{"event":"SessionStart","command":format!("cat >> {}/s.jsonl; echo >> {0}/s.jsonl", dir.display())}]),
    );
    let mut k = env.spawn(&config, &["--session", "again"]);
    k.prompt("p", json!("hi"));
    k.close_stdin();
    k.wait_exit(Duration::from_secs(5));
    let mut k = env.spawn(&config, &["--session", "again"]);
    k.initialize();
    k.close_stdin();
    k.wait_exit(Duration::from_secs(5));
    let text = std::fs::read_to_string(dir.join("s.jsonl")).unwrap();
    let sources: Vec<String> = text
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str::<Value>(l).unwrap()["source"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(sources, ["startup", "resume"]);
}
