//! The command line as a person meets it (`docs/subcommands.md` §0.1): `kiwi --help` lists every
//! subcommand, `kiwi help SUB` and `SUB --help` are the subcommand's help, and a mistyped command
//! is a usage error with a suggestion: exit 2, nothing read or written, no turn.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Output, Stdio};

use common::Env;
use serde_json::Value;

fn kiwi(env: &Env, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kiwi"))
        .args(args)
        .current_dir(env.work())
        .env("HOME", env.home())
        .env("KIMI_SHARE_DIR", env.share())
        .env_remove("KIMI_DIALECT")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_mistyped_command_is_a_usage_error_that_runs_nothing() {
    let env = Env::new();
    for (typed, meant) in [
        (&["sesions"][..], "sessions"),
        (&["wbe"], "web"),
        (&["Sessions", "--json"], "sessions"),
        (&["loign"], "login"),
        (&["exprot", "-y"], "export"),
        (&["mpc"], "mcp"),
        (&["shcema"], "schema"),
        (&["hlep"], "help"),
    ] {
        let out = kiwi(&env, typed);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{typed:?}: {stderr}");
        assert!(
            stderr.contains(&format!("Error: No such command '{}'. Did you mean '{meant}'?", typed[0])),
            "{typed:?}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{typed:?}");
    }
    // Nothing was created: no share dir, so no config, no session, no log.
    assert!(!env.share().exists(), "the typos touched {}", env.share().display());
}

#[test]
fn a_real_prompt_is_still_a_prompt() {
    let env = Env::new();
    let config = env.scripted_config(&["text: ran"]);
    let config = config.to_str().unwrap();
    // A word far from every command, and a near one after -p, are prompts (Claude's dialect).
    for args in [&["hello", "--config-file", config][..], &["-p", "sesions", "--config-file", config]] {
        let out = kiwi(&env, args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", text(&out.stderr));
        assert_eq!(text(&out.stdout), "ran\n", "{args:?}");
    }
}

#[test]
fn help_lists_every_command_and_each_has_its_own() {
    let env = Env::new();
    let help = text(&kiwi(&env, &["--help"]).stdout);
    for command in ["login", "logout", "info", "sessions", "export", "mcp", "web", "acp", "schema", "help"] {
        assert!(help.lines().any(|l| l.trim_start().starts_with(&format!("{command} "))), "{command} in\n{help}");
    }
    for sub in [&["sessions"][..], &["web"], &["mcp", "add"], &["schema"], &["acp"]] {
        let via_help = kiwi(&env, &[&["help"], sub].concat());
        let via_flag = kiwi(&env, &[sub, &["--help"]].concat());
        assert_eq!(via_help.status.code(), Some(0), "{sub:?}: {}", text(&via_help.stderr));
        assert_eq!(text(&via_help.stdout), text(&via_flag.stdout), "{sub:?}");
        let usage = format!("Usage: kiwi {}", sub.join(" "));
        assert!(text(&via_flag.stdout).contains(&usage), "{sub:?}: {}", text(&via_flag.stdout));
    }
    let acp = text(&kiwi(&env, &["acp", "--config-file", "x.toml", "--help"]).stdout);
    assert!(acp.contains("Agent Client Protocol") && acp.contains("top-level options"), "{acp}");
    assert!(!acp.contains("Commands:"), "acp's help is not the top-level help: {acp}");
    let schema_help = text(&kiwi(&env, &["schema", "--help"]).stdout);
    assert!(!schema_help.trim_start().starts_with('{'), "help, not the schema: {schema_help}");
    let schema: Value = serde_json::from_slice(&kiwi(&env, &["schema"]).stdout).unwrap();
    assert_eq!(schema["protocol_version"], "1.10");
    // The subcommands' descriptions are their own, not an internal comment.
    for sub in ["sessions", "export", "web", "info", "login"] {
        let first = text(&kiwi(&env, &[sub, "--help"]).stdout);
        assert!(!first.starts_with('`'), "{sub}: {first}");
    }
}

/// Options before `acp` make it `--acp` as much as options after it.
#[test]
fn options_before_acp_still_serve_acp() {
    let env = Env::new();
    let config = env.scripted_config(&["text: hi"]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_kiwi"))
        .arg("--config-file")
        .arg(&config)
        .arg("acp")
        .env("HOME", env.home())
        .env("KIMI_SHARE_DIR", env.share())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":1}}}}"#).unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    drop(stdin);
    let answer: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(answer["result"]["protocolVersion"], 1, "{answer}");
    assert!(child.wait().unwrap().success());
}
