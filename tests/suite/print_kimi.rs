//! Print mode in kimi's `--print` dialect, end to end (`docs/print-mode.md` Part A): the real binary
//! with the scripted-echo provider.

use crate::common;
use crate::print_support;

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::time::Duration;

use common::Kiwi;
use print_support::{Dirs, Redactor, assert_golden, redacted_lines, run, shell, signal};
use serde_json::json;

fn scripts() -> Vec<String> {
    vec![
        format!("think: plan\ntext: Let me check.\n{}", shell("tool_1", "echo a.py")),
        "text: There is one file.".into(),
    ]
}

fn refs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// stderr without the session line (its id changes) and with the work dir redacted.
fn progress(d: &Dirs, stderr: &str) -> String {
    let r = Redactor::new(&d.work());
    stderr
        .lines()
        .filter(|l| !l.starts_with("To resume this session: kiwi --session "))
        .map(|l| r.text(l))
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

#[test]
fn golden_text_output() {
    let d = Dirs::new();
    let config = d.scripted(&refs(&scripts()));
    let r = run(d.command(&config, &["--print", "-p", "list files"]), "");
    assert_eq!(r.code, Some(0));
    assert_eq!(r.stdout, "There is one file.\n", "stdout carries only the final answer");
    assert_golden("print_kimi_text_progress.txt", &progress(&d, &r.stderr));
    assert!(r.stderr.contains("To resume this session: kiwi --session "));
}

#[test]
fn golden_stream_json_output() {
    let d = Dirs::new();
    let config = d.scripted(&refs(&scripts()));
    let r = run(d.command(&config, &["--print", "--output-format", "stream-json", "-c", "list files"]), "");
    assert_eq!(r.code, Some(0));
    assert_golden("print_kimi_stream.jsonl", &redacted_lines(&r.lines(), &d.work()));
    assert!(!r.stderr.contains("StepBegin"), "no progress in stream-json output");
}

#[test]
fn final_message_only_and_quiet() {
    let d = Dirs::new();
    let config = d.scripted(&refs(&scripts()));
    let r =
        run(d.command(&config, &["--print", "--output-format", "stream-json", "--final-message-only", "-p", "x"]), "");
    assert_eq!(r.stdout, "{\"role\":\"assistant\",\"content\":\"There is one file.\"}\n");
    let config = d.scripted(&refs(&scripts()));
    let r = run(d.command(&config, &["--quiet"]), "list files from stdin\n");
    assert_eq!((r.code, r.stdout.as_str(), r.stderr.as_str()), (Some(0), "There is one file.\n", ""));
}

#[test]
fn multi_turn_stream_json_input() {
    let d = Dirs::new();
    let config = d.scripted(&["text: zero", "text: one", "text: two", "text: three"]);
    let input = [
        r#"{"role":"user","content":"first"}"#,
        "",
        "not json at all",
        r#"{"role":"assistant","content":"skipped"}"#,
        r#"{"role":"user","content":[{"type":"text","text":"second"},{"type":"image_url","image_url":{"url":"data:x"}}]}"#,
        r#"{"role":"user","content":"   "}"#,
        r#"{"type":"user","message":{"role":"user","content":"third, Claude-shaped"}}"#,
    ]
    .join("\n");
    let r = run(
        d.command(
            &config,
            &["--print", "--input-format", "stream-json", "--output-format", "stream-json", "-p", "zero"],
        ),
        &input,
    );
    assert_eq!(r.code, Some(0));
    let contents: Vec<String> = r.lines().iter().map(|l| l["content"].as_str().unwrap().to_string()).collect();
    assert_eq!(contents, ["zero", "one", "two", "three"], "-p first, then each user line, bad lines skipped");
    assert!(r.stderr.contains("skipping an input line that is not JSON"));
    assert!(r.stderr.contains("skipping a Assistant message"));
    assert!(r.stderr.contains("skipping an empty user message"));
    // The scripted provider replays scripts, not the prompts: the prompts are in the session.
    let id = r.stderr.lines().find_map(|l| l.strip_prefix("To resume this session: kiwi --session ")).unwrap();
    let context = std::fs::read_to_string(print_support::session_dir(&d, id).join("context.jsonl")).unwrap();
    for prompt in ["zero", "first", "second", "third, Claude-shaped"] {
        assert!(context.contains(&format!("\"{prompt}\"")), "{prompt} missing from {context}");
    }
}

#[test]
fn exit_codes() {
    let d = Dirs::new();
    // A provider error: its message on stderr, exit 1, nothing more is run.
    let config = d.scripted(&["bad line", "text: never"]);
    let r = run(
        d.command(&config, &["--print", "--input-format", "stream-json", "-p", "x"]),
        "{\"role\":\"user\",\"content\":\"y\"}\n",
    );
    assert_eq!((r.code, r.stdout.as_str()), (Some(1), ""));
    assert!(r.stderr.contains("Invalid echo DSL at line 1: 'bad line'"), "{}", r.stderr);
    // The step limit.
    let config = d.scripted(&[&shell("s1", "echo 1"), &shell("s2", "echo 2")]);
    let r = run(d.command(&config, &["--print", "--max-steps-per-turn", "1", "-p", "x"]), "");
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("Max number of steps reached: 1"));
    // No model.
    let config = d.config(json!({"default_model": ""}));
    let r = run(d.command(&config, &["--print", "-p", "x"]), "");
    assert_eq!(r.code, Some(1));
    assert!(r.stderr.contains("LLM not set"));
    // A provider that cannot be reached: worth retrying later, 75 (EX_TEMPFAIL).
    let config = d.config(json!({
        "default_model": "m",
        "models": {"m": {"provider": "p", "model": "k", "max_context_size": 1000}},
        "providers": {"p": {"type": "kimi", "base_url": "http://127.0.0.1:9/v1", "api_key": "sk"}}
    }));
    let r = run(d.command(&config, &["--print", "--max-retries-per-step", "1", "-p", "x"]), "");
    assert_eq!(r.code, Some(75), "{}", r.stderr);
    // Usage errors: 2, nothing on stdout.
    for bad in [
        &["--print", "-p", "  "][..],
        &["--output-format", "text"],
        &["--print", "--output-format", "xml"],
        &["--quiet", "--output-format", "stream-json"],
        &["--print", "--wire"],
        &["--print", "--session", "../x"],
    ] {
        let r = run(d.command(&config, bad), "");
        assert_eq!((r.code, r.stdout.as_str()), (Some(2), ""), "{bad:?}");
    }
    // Nothing to run (empty stdin): exit 0, no output.
    let config = d.scripted(&[]);
    let r = run(d.command(&config, &["--print"]), "  \n");
    assert_eq!((r.code, r.stdout.as_str()), (Some(0), ""));
}

/// Text input is read up to the line limit, never whole: a longer prompt is
/// refused with one stderr line and exit 1, and nothing is run.
#[test]
fn a_text_prompt_over_the_limit_is_refused() {
    let d = Dirs::new();
    let config = d.scripted(&["text: never"]);
    let r = run(d.command(&config, &["--print", "--max-line-bytes", "1000"]), &"y\n".repeat(5000));
    assert_eq!((r.code, r.stdout.as_str()), (Some(1), ""), "{}", r.stderr);
    assert!(
        r.stderr.contains("kiwi: the prompt on stdin exceeds the maximum length of 1000 bytes and was not run\n"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("never"), "nothing was run: {}", r.stderr);
    // At the limit it runs.
    let config = d.scripted(&["text: ran"]);
    let r = run(d.command(&config, &["--print", "--max-line-bytes", "1000"]), &"y".repeat(1000));
    assert_eq!((r.code, r.stdout.as_str()), (Some(0), "ran\n"), "{}", r.stderr);
}

/// A stream-json line over the limit is skipped with one stderr line in the wire
/// reader's words, and the run goes on.
#[test]
fn a_stream_json_line_over_the_limit_is_skipped() {
    let d = Dirs::new();
    let config = d.scripted(&["text: second ran"]);
    let long = format!("{{\"role\":\"user\",\"content\":\"{}\"}}", "x".repeat(2000));
    let input = format!("{long}\n{{\"role\":\"user\",\"content\":\"second\"}}\n");
    let r = run(d.command(&config, &["--print", "--input-format", "stream-json", "--max-line-bytes", "1000"]), &input);
    assert_eq!((r.code, r.stdout.as_str()), (Some(0), "second ran\n"), "{}", r.stderr);
    let said: Vec<&str> = r.stderr.lines().filter(|l| l.contains("maximum length")).collect();
    assert_eq!(said, ["kiwi: ignoring input: line exceeds the maximum length of 1000 bytes and was skipped"]);
}

/// An answer that only thinks is an error the core retries; when the retries run out, print mode
/// exits 75 (worth retrying later) as for every error the core retries, not 1.
#[test]
fn a_thinking_only_answer_is_worth_retrying_later() {
    let d = Dirs::new();
    let config = d.scripted(&["think: only thinking"]);
    let r = run(d.command(&config, &["--print", "--max-retries-per-step", "1", "-p", "x"]), "");
    assert_eq!(r.code, Some(75), "{}", r.stderr);
    assert!(r.stderr.contains("only thinking content"), "{}", r.stderr);
}

#[test]
fn sigint_cancels_the_turn() {
    let d = Dirs::new();
    let config = d.scripted(&[&shell("s1", "sleep 30")]);
    let mut cmd = d.command(&config, &["--print", "-p", "wait"]);
    cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let stderr = BufReader::new(child.stderr.take().unwrap());
    let mut lines = stderr.lines().map_while(Result::ok);
    // The call's line comes with the step's StatusUpdate, after the model's stream: the tool is
    // running now.
    lines.by_ref().find(|l| l.starts_with("→ Shell(")).expect("progress");
    signal(child.id(), libc::SIGINT);
    let rest: Vec<String> = lines.collect();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1));
    assert!(rest.iter().any(|l| l == "error: Interrupted by user"), "{rest:?}");
}

#[test]
fn resume_between_print_and_wire() {
    let d = Dirs::new();
    let config = d.scripted(&["text: from print"]);
    let r = run(d.command(&config, &["--print", "-p", "first"]), "");
    let id =
        r.stderr.lines().find_map(|l| l.strip_prefix("To resume this session: kiwi --session ")).unwrap().to_string();
    // `-C` finds it too: the last-session pointer was updated.
    let config = d.scripted(&["text: continued"]);
    let r = run(d.command(&config, &["--print", "-C", "-p", "second"]), "");
    assert!(r.stderr.contains(&id), "{}", r.stderr);
    let config = d.scripted(&["text: from wire"]);
    let mut k = Kiwi::spawn(d.command(&config, &["--wire", "--session", &id]));
    k.initialize();
    let (_, response) = k.prompt("p", json!("third"));
    assert_eq!(response["result"]["status"], "finished");
    k.close_stdin();
    k.wait_exit(Duration::from_secs(10));
    let config = d.scripted(&["text: print again"]);
    let r = run(d.command(&config, &["--print", "--session", &id, "-p", "fourth"]), "");
    assert_eq!(r.stdout, "print again\n");
    let dir = print_support::session_dir(&d, &id);
    let context = std::fs::read_to_string(dir.join("context.jsonl")).unwrap();
    for text in ["first", "from print", "second", "continued", "third", "from wire", "fourth", "print again"] {
        assert!(context.contains(&format!("\"{text}\"")), "{text} missing");
    }
    let wire = std::fs::read_to_string(dir.join("wire.jsonl")).unwrap();
    assert_eq!(wire.matches("\"TurnBegin\"").count(), 4);
}

/// A provider error ends a terminal run with one `error:` line naming the model, its provider
/// type and URL, and the HTTP status; the progress before it is text, not event JSON.
#[test]
fn a_provider_error_ends_with_one_error_line_naming_the_model_and_status() {
    let d = Dirs::new();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let mock = rt.block_on(crate::mock_llm::MockLlm::start());
    mock.push(crate::mock_llm::MockResponse::json(401, r#"{"error":{"message":"Invalid API key","type":"auth"}}"#));
    let base_url = format!("{}/v1", mock.base_url());
    let config = d.config(json!({
        "default_model": "m",
        "models": {"m": {"provider": "p", "model": "kimi-k2", "max_context_size": 100000}},
        "providers": {"p": {"type": "kimi", "base_url": base_url, "api_key": "sk"}}
    }));
    let r = run(d.command(&config, &["--print", "-p", "hi"]), "");
    assert_eq!((r.code, r.stdout.as_str()), (Some(1), ""), "{}", r.stderr);
    let errors: Vec<&str> = r.stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{}", r.stderr);
    let line = errors[0];
    assert!(line.starts_with(&format!("error: model m (kimi at {base_url}): ")), "{line}");
    assert!(line.contains("401") && line.contains("Invalid API key"), "{line}");
    assert!(!r.stderr.contains("{\"type\""), "no event JSON in the progress: {}", r.stderr);
}

/// The progress reads as text: each tool call as its name and arguments, each result as a mark
/// and its message, and the answer only once (on stdout).
#[test]
fn progress_reads_as_text() {
    let d = Dirs::new();
    let config = d.scripted(&refs(&scripts()));
    let r = run(d.command(&config, &["--print", "-p", "list files"]), "");
    assert_eq!((r.code, r.stdout.as_str()), (Some(0), "There is one file.\n"), "{}", r.stderr);
    assert!(r.stderr.contains("→ Shell(command=\"echo a.py\")\n  ✓ Command executed successfully.\n"), "{}", r.stderr);
    assert!(!r.stderr.contains("There is one file."), "the answer is not said twice: {}", r.stderr);
    assert!(!r.stderr.contains('{'), "no JSON: {}", r.stderr);
}
