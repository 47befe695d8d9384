//! kimi 1.49's command line (`docs/configuration.md` §1.1): `-r`/`--resume`, `--add-dir`, `--afk`,
//! and the session token budget (`--max-tokens-per-session`, `loop_control.max_session_tokens`)
//! as every front end reports it.

use crate::common;
use crate::print_support;

use std::path::Path;
use std::time::Duration;

use common::{Env, types};
use print_support::{Dirs, run, shell};
use serde_json::{Value, json};

fn todo_call(id: &str) -> String {
    format!(
        r#"tool_call: {{"id": "{id}", "name": "SetTodoList", "arguments": "{{\"todos\": [{{\"title\": \"a\", \"status\": \"pending\"}}]}}"}}"#
    )
}

fn state_of(dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("state.json")).unwrap()).unwrap()
}

#[test]
fn wire_takes_kimis_short_resume_flag() {
    let env = Env::new();
    let config = env.scripted_config(&["text: one", "text: two"]);
    let mut k = env.spawn(&config, &["-r", "r-session"]);
    k.initialize();
    let (_, response) = k.prompt("p0", json!("hello"));
    assert_eq!(response["result"], json!({"status":"finished"}));
    k.close_stdin();
    assert!(k.wait_exit(Duration::from_secs(20)).unwrap().success());
    assert!(env.session_dir("r-session").join("context.jsonl").is_file());
    // `--resume ID` comes back to it.
    let mut k = env.spawn(&config, &["--resume", "r-session"]);
    k.initialize();
    let (_, response) = k.prompt("p1", json!("again"));
    assert_eq!(response["result"], json!({"status":"finished"}));
    k.close_stdin();
    assert!(k.wait_exit(Duration::from_secs(20)).unwrap().success());
    let context = std::fs::read_to_string(env.session_dir("r-session").join("context.jsonl")).unwrap();
    assert!(context.contains("hello") && context.contains("again"));
}

#[test]
fn kimi_print_takes_resume_and_a_bare_resume_is_claudes() {
    let d = Dirs::new();
    let config = d.scripted(&["text: first"]);
    let r = run(d.command(&config, &["--print", "-r", "p-session", "-p", "hi"]), "");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.stdout, "first\n");
    assert!(r.stderr.contains("To resume this session: kiwi --session p-session"));
    // Without kimi's print options, `--resume ID -p` is Claude Code's: its result line.
    let r = run(d.command(&config, &["--resume", "p-session", "-p", "--output-format", "json", "again"]), "");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let result: Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(result["type"], "result");
    assert_eq!(result["result"], "first", "each process starts the script file over");
    assert_eq!(result["session_id"], "p-session");
}

#[test]
fn add_dir_is_added_like_slash_add_dir_and_saved() {
    let env = Env::new();
    let extra = env.dir.path().join("extra");
    std::fs::create_dir_all(extra.join("docs")).unwrap();
    let config = env.scripted_config(&["text: ok"]);
    let extra_arg = extra.to_str().unwrap();
    let mut k = env.spawn(&config, &["-S", "s-add", "--add-dir", extra_arg, "--add-dir", extra_arg]);
    k.initialize();
    let (_, response) = k.call("c1", "prompt", json!({"user_input": "/add-dir"}));
    assert_eq!(response["result"], json!({"status":"finished"}));
    k.close_stdin();
    assert!(k.wait_exit(Duration::from_secs(20)).unwrap().success());
    let canonical = std::fs::canonicalize(&extra).unwrap().display().to_string();
    let dir = env.session_dir("s-add");
    assert_eq!(state_of(&dir)["additional_dirs"], json!([canonical]), "added once, saved");
    let context = std::fs::read_to_string(dir.join("context.jsonl")).unwrap();
    assert_eq!(context.matches("to the workspace").count(), 1, "the model is told once: {context}");
    assert!(context.contains("docs/"));
    // Given again on resume: already there, nothing added twice.
    let mut k = env.spawn(&config, &["-S", "s-add", "--add-dir", extra_arg]);
    k.initialize();
    k.close_stdin();
    assert!(k.wait_exit(Duration::from_secs(20)).unwrap().success());
    assert_eq!(state_of(&dir)["additional_dirs"], json!([canonical]));
    let context = std::fs::read_to_string(dir.join("context.jsonl")).unwrap();
    assert_eq!(context.matches("to the workspace").count(), 1);
}

#[test]
fn add_dir_that_does_not_exist_is_a_usage_error() {
    let env = Env::new();
    let config = env.scripted_config(&[]);
    let out = env.command(&config, &["--add-dir", "/no/such/dir/for/kiwi"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Invalid value for --add-dir"));
    assert!(out.stdout.is_empty());
}

#[test]
fn afk_approves_for_this_run_only() {
    let env = Env::new();
    let config = env.scripted_config(&[&shell("sh1", "echo afk-ran"), "text: done", &shell("sh2", "echo asks")]);
    let mut k = env.spawn(&config, &["-S", "s-afk", "--afk"]);
    k.initialize();
    let (events, response) = k.prompt("p0", json!("go"));
    assert_eq!(response["result"], json!({"status":"finished"}));
    assert!(!events.iter().any(|e| e["method"] == "request"), "no approval asked with --afk");
    let result = events.iter().find(|e| e["params"]["type"] == "ToolResult").unwrap();
    assert!(result["params"]["payload"]["return_value"]["output"].as_str().unwrap().contains("afk-ran"));
    k.close_stdin();
    assert!(k.wait_exit(Duration::from_secs(20)).unwrap().success());
    let dir = env.session_dir("s-afk");
    assert_eq!(state_of(&dir)["approval"]["afk"], json!(false), "the flag is never saved");
    // The next run without the flag asks again.
    let mut k = env.spawn(&config, &["-S", "s-afk"]);
    k.initialize();
    k.send(json!({"jsonrpc":"2.0","id":"p1","method":"prompt","params":{"user_input":"again"}}));
    let (_, request) = k.until_request();
    assert_eq!(request["params"]["type"], "ApprovalRequest");
}

#[test]
fn kimi_print_implies_afk_so_questions_are_dismissed() {
    let d = Dirs::new();
    let ask = r#"tool_call: {"id": "q1", "name": "AskUserQuestion", "arguments": "{\"questions\": [{\"question\": \"Which?\", \"header\": \"Pick\", \"options\": [{\"label\": \"A\", \"description\": \"a\"}, {\"label\": \"B\", \"description\": \"b\"}]}]}"}"#;
    let config = d.scripted(&[ask, "text: decided"]);
    let r = run(d.command(&config, &["--print", "--output-format", "stream-json", "-p", "choose"]), "");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let tool = r.lines().into_iter().find(|l| l["role"] == "tool").unwrap();
    assert!(tool["content"].to_string().contains("afk mode"), "{tool}");
}

fn budget_scripts() -> Vec<String> {
    vec![format!("text: working\n{}\nusage: input_other=8 output=4", todo_call("t1")), "text: never".into()]
}

#[test]
fn wire_ends_the_turn_when_the_token_budget_is_used_up() {
    let env = Env::new();
    let scripts = budget_scripts();
    let config = env.scripted_config(&scripts.iter().map(String::as_str).collect::<Vec<_>>());
    let mut k = env.spawn(&config, &["--max-tokens-per-session", "10"]);
    k.initialize();
    let (events, response) = k.prompt("p0", json!("go"));
    assert_eq!(response["result"], json!({"status":"token_budget_reached","tokens":12,"max_session_tokens":10}));
    assert_eq!(
        types(&events),
        ["TurnBegin", "StepBegin", "ContentPart", "ToolCall", "StatusUpdate", "ToolResult", "TurnEnd"]
    );
    // The budget stays spent: the next prompt ends before any model call.
    let (events, response) = k.prompt("p1", json!("more"));
    assert_eq!(response["result"]["status"], "token_budget_reached");
    assert_eq!(types(&events), ["TurnBegin", "TurnEnd"]);
}

#[test]
fn the_config_budget_ends_kimi_print_and_claude_turns() {
    let d = Dirs::new();
    let scripts = budget_scripts();
    let scripts: Vec<&str> = scripts.iter().map(String::as_str).collect();
    let budget = json!({"loop_control": {"max_session_tokens": 10}});
    let config = d.scripted_with(&scripts, budget.clone());
    let r = run(d.command(&config, &["--print", "-p", "go"]), "");
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("Session token budget reached: 12 of 10 tokens"), "{}", r.stderr);
    // Claude's dialect: the budget stop's result shape.
    let config = d.scripted_with(&scripts, budget);
    let r = run(
        d.command(
            &config,
            &["-p", "--verbose", "--output-format", "stream-json", "--dangerously-skip-permissions", "go"],
        ),
        "",
    );
    assert_eq!(r.code, Some(1));
    let result = r.lines().into_iter().find(|l| l["type"] == "result").unwrap();
    assert_eq!(result["subtype"], "error_max_budget_usd");
    assert_eq!(result["is_error"], true);
    assert_eq!(result["errors"], json!(["Reached the session's token budget (12 of 10 tokens)"]));
}

fn background_shell(id: &str, command: &str) -> String {
    let args = json!({"command": command, "run_in_background": true, "description": "bg work"}).to_string();
    format!("tool_call: {}", json!({"id": id, "name": "Shell", "arguments": args}))
}

#[test]
fn kimi_print_waits_for_its_background_tasks() {
    let d = Dirs::new();
    let marker = d.dir.path().join("bg-done");
    let command = format!("sleep 1; echo done > '{}'", marker.display());
    let config = d.scripted(&[&background_shell("b1", &command), "text: started it"]);
    let r = run(d.command(&config, &["--print", "-p", "go"]), "");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(r.stdout, "started it\n");
    assert!(r.stderr.contains("Waiting for 1 background task(s) to finish"), "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "done\n", "the task ran to its end before exit");
}

#[test]
fn kimi_print_waits_no_longer_than_its_ceiling() {
    let d = Dirs::new();
    let marker = d.dir.path().join("never");
    let command = format!("sleep 30; touch '{}'", marker.display());
    let config = d.scripted_with(
        &[&background_shell("b1", &command), "text: started it"],
        json!({"background": {"print_wait_ceiling_s": 1}}),
    );
    let r = run(d.command(&config, &["--print", "-p", "go"]), "");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stderr.contains("(at most 1 s)"));
    assert!(!marker.exists(), "the task was stopped at exit, after the ceiling");
}

#[test]
fn stream_deltas_come_before_the_whole_message() {
    let d = Dirs::new();
    let config = d.scripted(&["think: hm\ntext: Hel\ntext: lo"]);
    let r = run(d.command(&config, &["--print", "--output-format", "stream-json", "--stream-deltas", "-p", "hi"]), "");
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert_eq!(
        r.lines(),
        [
            json!({"type":"delta","part":{"type":"think","think":"hm","encrypted":null}}),
            json!({"type":"delta","part":{"type":"text","text":"Hel"}}),
            json!({"type":"delta","part":{"type":"text","text":"lo"}}),
            json!({"role":"assistant","content":[{"type":"think","think":"hm","encrypted":null},{"type":"text","text":"Hello"}]}),
        ]
    );
    // Without the flag: only the whole message.
    let r = run(d.command(&config, &["--print", "--output-format", "stream-json", "-p", "hi"]), "");
    assert_eq!(r.lines().len(), 1);
    // Only with stream-json output.
    let r = run(d.command(&config, &["--print", "--stream-deltas", "-p", "hi"]), "");
    assert_eq!(r.code, Some(2));
    assert!(r.stderr.contains("--stream-deltas needs --print --output-format stream-json"));
}
