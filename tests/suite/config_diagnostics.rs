//! Config mistakes are named, not swallowed (`docs/configuration.md` §2.2). Each test checks the exact line a user
//! sees on stderr at start-up (and in the log), and what a prompt then answers.

use crate::common;

use std::path::Path;
use std::process::Stdio;

use common::{Env, types};
use serde_json::json;

fn write(env: &Env, name: &str, text: &str) -> std::path::PathBuf {
    let path = env.dir.path().join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// Starts kiwi on `config`, sends one prompt and waits for its answer, then closes stdin;
/// returns stderr and the answer.
fn run(env: &Env, config: &Path, extra: &[&str]) -> (String, serde_json::Value) {
    let mut cmd = env.command(config, extra);
    cmd.arg("--log-stderr").env("KIWI_LOG", "warn");
    common::prompt_once(cmd)
}

fn warning_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter_map(|l| l.strip_prefix("kiwi: warning: ")).collect()
}

#[test]
fn a_typo_in_a_key_is_named_with_the_likely_fix() {
    let env = Env::new();
    let scripts = write(&env, "s.json", r#"["text: ok"]"#);
    let config = write(
        &env,
        "c.toml",
        &format!(
            "default_model = \"s\"\ndefualt_thinking = true\n[models.s]\nprovider = \"p\"\nmodel = \"m\"\nmax_context_size = 1000\n\
             [providers.p]\ntype = \"_scripted_echo\"\nbsae_url = \"x\"\nenv = {{ KIMI_SCRIPTED_ECHO_SCRIPTS = \"{}\" }}\n",
            scripts.display()
        ),
    );
    let (stderr, answer) = run(&env, &config, &[]);
    let shown = config.display();
    assert_eq!(
        warning_lines(&stderr),
        [
            format!("{shown}: unknown key 'defualt_thinking' is ignored; did you mean 'default_thinking'?"),
            format!("{shown}: unknown key 'providers.p.bsae_url' is ignored; did you mean 'base_url'?"),
        ]
    );
    // The same lines reach the log (here stderr, through tracing) as WARN.
    assert!(stderr.contains("WARN"), "{stderr}");
    assert_eq!(answer["result"]["status"], "finished", "a typo does not stop kiwi");
}

#[test]
fn an_unknown_model_flag_warns_and_every_prompt_says_why() {
    let env = Env::new();
    let config = env.scripted_config(&["text: unused"]);
    let (stderr, answer) = run(&env, &config, &["-m", "gpt-9"]);
    let reason = format!(
        "model 'gpt-9' (from -m/--model) is not a key of [models] in {} (configured: scripted)",
        config.display()
    );
    assert_eq!(warning_lines(&stderr), [format!("{reason}; every prompt will fail with -32001 (LLM is not set)")]);
    // The reason is in the start-up warning only: the error object is the fixed one.
    assert_eq!(answer["error"], json!({"code": -32001, "message": "LLM is not set", "data": null}));
}

#[test]
fn a_provider_without_base_url_or_api_key_is_named() {
    let env = Env::new();
    let config = write(
        &env,
        "c.json",
        r#"{"default_model":"k","models":{"k":{"provider":"moon","model":"kimi-k2","max_context_size":1000}},"providers":{"moon":{"type":"kimi"}}}"#,
    );
    let (stderr, answer) = run(&env, &config, &[]);
    let reason = format!(
        "providers.moon.base_url is empty in {}; a 'kimi' provider needs one (e.g. https://api.moonshot.ai/v1)",
        config.display()
    );
    assert_eq!(warning_lines(&stderr), [format!("{reason}; every prompt will fail with -32001 (LLM is not set)")]);
    assert_eq!(answer["error"], json!({"code": -32001, "message": "LLM is not set", "data": null}));

    let config = write(
        &env,
        "d.json",
        r#"{"default_model":"o","models":{"o":{"provider":"oai","model":"gpt-x","max_context_size":1000}},"providers":{"oai":{"type":"openai_legacy","base_url":"http://127.0.0.1:9/v1"}}}"#,
    );
    let mut cmd = env.command(&config, &["--log-stderr"]);
    cmd.env("KIWI_LOG", "warn").stdin(Stdio::null());
    let out = cmd.output().unwrap();
    assert_eq!(
        warning_lines(&String::from_utf8_lossy(&out.stderr)),
        [format!(
            "providers.oai.api_key is empty in {}; requests to http://127.0.0.1:9/v1 will likely be refused (401): set it or OPENAI_API_KEY",
            config.display()
        )]
    );
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn a_model_pointing_at_a_missing_provider_fails_at_start_up_in_one_line() {
    let env = Env::new();
    let config = write(&env, "c.json", r#"{"models":{"m":{"provider":"nope","model":"x","max_context_size":1}}}"#);
    let out = env.command(&config, &[]).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.lines().next().unwrap(),
        format!("Invalid configuration file {}: Provider nope not found in providers", config.display())
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn no_config_at_all_says_where_the_config_goes() {
    let env = Env::new();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kiwi"));
    cmd.arg("--work-dir").arg(env.work()).env("HOME", env.home()).env("KIMI_SHARE_DIR", env.share());
    let out = cmd.stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let path = env.share().join("config.toml");
    assert_eq!(
        warning_lines(&stderr)[0],
        format!(
            "no config found: wrote a default one with no model to {}; add a model and a provider there (see the README) or pass --config-file",
            path.display()
        )
    );
    assert!(path.is_file());
    // The log file has the same line.
    let log = std::fs::read_to_string(env.share().join("logs/kiwi.log")).unwrap();
    assert!(log.contains("no config found: wrote a default one"), "{log}");
}

#[test]
fn the_start_up_log_line_names_version_config_model_work_dir_and_session() {
    let env = Env::new();
    let config = env.scripted_config(&["text: ok"]);
    let mut k = env.spawn(&config, &["--session", "logged"]);
    let (events, _) = k.prompt("p", json!("go"));
    assert_eq!(types(&events).last().unwrap(), "TurnEnd");
    k.close_stdin();
    k.wait_exit(std::time::Duration::from_secs(5));
    let log = std::fs::read_to_string(env.share().join("logs/kiwi.log")).unwrap();
    let line = log.lines().find(|l| l.contains("session logged")).expect("start-up line");
    assert!(line.contains(&format!("kiwi {}", env!("CARGO_PKG_VERSION"))), "{line}");
    assert!(line.contains("(new)") && line.contains(&env.work().display().to_string()), "{line}");
    assert!(line.contains("model scripted (_scripted_echo at no URL)"), "{line}");
    assert!(line.contains(&format!("config {}", config.display())), "{line}");
}

#[test]
fn a_terminal_on_stdin_gets_one_line_about_the_protocol() {
    // `script` gives kiwi a pseudo-terminal for stdin; the line must be on stderr, never stdout.
    if std::process::Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: the `script` command (util-linux) is not installed");
        return;
    }
    let env = Env::new();
    let config = env.scripted_config(&[]);
    let kiwi = format!(
        "{} --config-file {} --work-dir {} 2>{} </dev/tty",
        env!("CARGO_BIN_EXE_kiwi"),
        config.display(),
        env.work().display(),
        env.dir.path().join("err.txt").display()
    );
    let out = std::process::Command::new("script")
        .args(["-qec", &format!("timeout 5 sh -c '{kiwi} & sleep 1; kill -TERM $!; wait'"), "/dev/null"])
        .env("HOME", env.home())
        .env("KIMI_SHARE_DIR", env.share())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = std::fs::read_to_string(env.dir.path().join("err.txt")).unwrap_or_default();
    assert!(
        err.starts_with(
            "kiwi speaks JSON-RPC 2.0 (the Kimi Wire protocol), one message per line on stdin and stdout; try: "
        ),
        "stderr: {err:?}, script: {out:?}"
    );
}
