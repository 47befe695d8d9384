//! The README's examples run as written. Its provider config blocks are real: each one, with only
//! its host swapped for a local mock server, runs a prompt to the end, and the request goes to the
//! path that provider type expects under the `base_url` the README shows. The set-up commands
//! (the demo, and its wire frames piped from `examples/demo.jsonl`) print what the README says,
//! and the `kiwi web` Python script gets a turn from a real server that wants a token.

use crate::common;
use crate::mock_llm;

use common::Env;
use mock_llm::{MockLlm, MockResponse};
use serde_json::json;

/// The TOML blocks of the README that configure a provider.
fn provider_blocks() -> Vec<toml::Table> {
    let readme = include_str!("../../README.md");
    let section = readme.split("## From clone to a real provider").nth(1).expect("the section exists");
    let section = section.split("\n## ").next().unwrap();
    let mut blocks = Vec::new();
    let mut rest = section;
    while let Some(start) = rest.find("```toml\n") {
        let body = &rest[start + 8..];
        let end = body.find("```").unwrap();
        let table: toml::Table = toml::from_str(&body[..end]).expect("README TOML parses");
        if table.get("providers").and_then(|p| p.as_table()).is_some_and(|p| !p.is_empty()) {
            blocks.push(table);
        }
        rest = &body[end..];
    }
    blocks
}

#[test]
fn every_provider_block_in_the_readme_runs_a_prompt() {
    let blocks = provider_blocks();
    let types: Vec<String> = blocks
        .iter()
        .map(|b| {
            let providers = b["providers"].as_table().unwrap();
            providers.values().next().unwrap()["type"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(types, ["kimi", "openai_legacy", "openai_legacy", "anthropic", "gemini"], "the README's blocks changed");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    for mut block in blocks {
        let model_name = block["default_model"].as_str().unwrap().to_string();
        let model_id = block["models"][&model_name]["model"].as_str().unwrap().to_string();
        let providers = block.get_mut("providers").unwrap().as_table_mut().unwrap();
        let key = providers.keys().next().unwrap().clone();
        let provider = providers.get_mut(&key).unwrap().as_table_mut().unwrap();
        let kind = provider["type"].as_str().unwrap().to_string();
        let shown = provider["base_url"].as_str().unwrap().to_string();
        // Keep the README's path, swap scheme and host for the mock's.
        let path = shown.splitn(4, '/').nth(3).map(|p| format!("/{p}")).unwrap_or_default();
        let mock = rt.block_on(MockLlm::start());
        provider.insert("base_url".into(), toml::Value::String(format!("{}{path}", mock.base_url())));
        let fixture = match kind.as_str() {
            "kimi" => "kimi-text.sse",
            "openai_legacy" => "openai-text.sse",
            "anthropic" => "anthropic-text.sse",
            _ => "gemini-text.sse",
        };
        mock.push(MockResponse::sse_fixture(fixture));
        let env = Env::new();
        let config = env.dir.path().join("config.toml");
        std::fs::write(&config, toml::to_string(&block).unwrap()).unwrap();
        let mut k = env.spawn(&config, &[]);
        let (_, answer) = k.prompt("p", json!("hi"));
        assert_eq!(answer["result"]["status"], "finished", "{kind}: {answer}");
        let request = &mock.requests()[0];
        let want = match kind.as_str() {
            "kimi" | "openai_legacy" => format!("{path}/chat/completions"),
            "anthropic" => "/v1/messages".to_string(),
            _ => format!("/v1beta/models/{model_id}:streamGenerateContent"),
        };
        assert_eq!(request.path, want, "{kind}");
        drop(k);
    }
}

/// The README's section `heading` (up to the next `## `).
fn readme_section(heading: &str) -> &'static str {
    let readme = include_str!("../../README.md");
    let section = readme.split(&format!("## {heading}\n")).nth(1).expect("the section exists");
    section.split("\n## ").next().unwrap()
}

/// The bodies of the section's fenced blocks of `language`, in order.
fn blocks(section: &str, language: &str) -> Vec<String> {
    let fence = format!("```{language}\n");
    section.split(&fence).skip(1).map(|rest| rest.split("```").next().unwrap().to_string()).collect()
}

/// Splits a command line the way `sh` does for plain words and double-quoted ones.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let (mut quoted, mut started) = (false, false);
    for c in line.trim().chars() {
        if c == '"' {
            quoted = !quoted;
            started = true;
        } else if c == ' ' && !quoted {
            if started {
                out.push(std::mem::take(&mut word));
            }
            started = false;
        } else {
            word.push(c);
            started = true;
        }
    }
    if started {
        out.push(word);
    }
    out
}

fn repo() -> &'static std::path::Path {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The two set-up commands: the demo, which builds only the binary (`cargo run --release -- …`)
/// and prints what the README shows, and `cargo test`.
#[test]
fn the_first_set_up_command_runs_the_demo_as_shown() {
    let section = readme_section("Set-up");
    let commands = blocks(section, "sh");
    assert_eq!(commands[1].trim(), "cargo test");
    let demo = commands[0].trim();
    let args = demo.strip_prefix("cargo run --release -- ").expect("the demo builds only the binary");
    let env = Env::new();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kiwi"))
        .args(words(args))
        .current_dir(repo())
        .env("HOME", env.home())
        .env("KIMI_SHARE_DIR", env.share())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap());
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    // On a terminal: the progress (stderr), the answer (stdout), then the resume line (stderr).
    let (progress, resume) = stderr.trim_end().rsplit_once('\n').unwrap();
    let id = resume.strip_prefix("To resume this session: kiwi --session ").expect(resume);
    let seen = format!("{progress}\n{stdout}{}\n", resume.replace(id, "<id>"));
    assert_eq!(blocks(section, "text")[0], seen, "the README shows what the demo prints");
}

/// Piping `examples/demo.jsonl` as the README writes it shows the turn's events and its answer.
#[test]
fn piping_the_demo_jsonl_shows_a_turn() {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    let section = readme_section("Set-up");
    let pipe = blocks(section, "sh").into_iter().find(|c| c.contains("examples/demo.jsonl")).expect("the pipe example");
    let line = pipe.trim().replace("cargo run --release --", env!("CARGO_BIN_EXE_kiwi"));
    let env = Env::new();
    let mut child = std::process::Command::new("sh")
        .args(["-c", &line])
        .current_dir(repo())
        .env("HOME", env.home())
        .env("KIMI_SHARE_DIR", env.share())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let mut frames = Vec::new();
    for line in std::io::BufReader::new(child.stdout.take().unwrap()).lines() {
        let frame: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        let done = frame["id"] == "p1";
        frames.push(frame);
        if done {
            break;
        }
    }
    // SAFETY: kill(2) on the process group this test started (sh, tail and kiwi).
    unsafe { libc::kill(-(child.id() as i32), libc::SIGTERM) };
    let _ = child.wait();
    let events: Vec<&str> = frames.iter().filter_map(|f| f["params"]["type"].as_str()).collect();
    for event in ["TurnBegin", "ContentPart", "ToolCall", "ToolResult", "TurnEnd"] {
        assert!(events.contains(&event), "{event} in {events:?}");
    }
    assert_eq!(frames[0]["id"], "init");
    assert_eq!(frames.last().unwrap()["result"]["status"], "finished", "{frames:?}");
}

/// The README's `kiwi web` script, as written, against a real `kiwi web` that wants a token:
/// it creates its session, opens the socket and gets a turn's events and the prompt's answer.
#[test]
fn the_web_script_runs_as_written() {
    let python = match crate::pypi::venv_with("readme-websockets-venv", "websockets==15.0.1", |python| {
        std::process::Command::new(python).args(["-c", "import websockets"]).output().is_ok_and(|o| o.status.success())
    }) {
        Ok(p) => p,
        Err(reason) => return crate::npm::skip("the README's kiwi web script", &reason),
    };
    let script = blocks(readme_section("kiwi web"), "python").into_iter().next().expect("the script");
    let home = crate::suite::web_kit::Home::new();
    home.scripted(&["text: hello from kiwi web".to_string()]);
    let server = home.serve(&["--auth-token", "readme-token"]);
    let path = home.dir.path().join("script.py");
    std::fs::write(&path, script).unwrap();
    let out = std::process::Command::new(python)
        .arg(&path)
        .env("KIWI_URL", format!("http://127.0.0.1:{}", server.port))
        .env("KIWI_TOKEN", "readme-token")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let frames: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let last = frames.last().unwrap();
    assert_eq!((&last["id"], &last["result"]["status"]), (&json!("2"), &json!("finished")), "{stdout}");
    assert!(stdout.contains("hello from kiwi web"), "{stdout}");
}
