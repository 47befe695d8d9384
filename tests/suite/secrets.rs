//! Safety (`docs/tools.md` §19.2): secrets stay home. Shell commands do not inherit the provider API
//! keys kiwi read from its environment or the config's provider `env` tables, and API keys never
//! appear in logs or frames.

use crate::common;

use common::Env;
use serde_json::{Value, json};

fn shell(id: &str, command: &str) -> String {
    let args = serde_json::to_string(&json!({ "command": command })).unwrap();
    format!("tool_call: {}", json!({"id": id, "name": "Shell", "arguments": args}))
}

/// Every secret a test puts anywhere, to be looked for everywhere.
const SECRETS: &[&str] = &[
    "sk-secret-kimi-env",
    "sk-secret-openai-env",
    "sk-secret-gemini-env",
    "sk-secret-google-env",
    "sk-secret-provider-table",
    "sk-secret-config-key",
    "sk-secret-other-provider-table",
    "sk-secret-search-key",
];

fn assert_clean(what: &str, text: &str) {
    for secret in SECRETS {
        assert!(!text.contains(secret), "{what} leaks {secret}:\n{text}");
    }
}

#[test]
fn shell_commands_do_not_inherit_api_keys_or_provider_env_secrets() {
    let env = Env::new();
    let config = env.scripted_config_with(
        &[&shell("tc-1", "env; echo END"), "text: done"],
        json!({
            "providers": {
                "scripted_provider": {
                    "api_key": "sk-secret-config-key",
                    "env": {"KIWI_TEST_PROVIDER_TOKEN": "sk-secret-provider-table"}
                },
                "unused": {"type": "vertexai", "base_url": "", "api_key": "",
                           "env": {"KIWI_TEST_OTHER_TOKEN": "sk-secret-other-provider-table"}}
            },
            "services": {"moonshot_search": {"base_url": "http://127.0.0.1:1", "api_key": "sk-secret-search-key"}}
        }),
    );
    let mut cmd = env.command(&config, &["--yolo", "--debug"]);
    cmd.env("KIMI_API_KEY", "sk-secret-kimi-env")
        .env("OPENAI_API_KEY", "sk-secret-openai-env")
        .env("GEMINI_API_KEY", "sk-secret-gemini-env")
        .env("GOOGLE_API_KEY", "sk-secret-google-env")
        // Set by the user for their own reasons, holding a key kiwi holds too.
        .env("MY_COPY_OF_THE_KEY", "sk-secret-config-key")
        .env("KIWI_TEST_OTHER_TOKEN", "sk-secret-other-provider-table")
        .env("KIWI_TEST_HARMLESS", "visible");
    let mut k = common::Kiwi::spawn(cmd);
    let (events, r) = k.prompt("p", json!("go"));
    assert_eq!(r["result"]["status"], "finished");
    let result: Vec<&Value> = events.iter().filter(|m| m["params"]["type"] == "ToolResult").collect();
    let output = result[0]["params"]["payload"]["return_value"]["output"].as_str().unwrap();
    assert!(output.contains("KIWI_TEST_HARMLESS=visible\n"), "{output}");
    assert!(output.ends_with("END\n"), "{output}");
    for name in ["KIMI_API_KEY=", "OPENAI_API_KEY=", "KIWI_TEST_PROVIDER_TOKEN=", "MY_COPY_OF_THE_KEY="] {
        assert!(!output.lines().any(|l| l.starts_with(name)), "{name} reached the command:\n{output}");
    }
    assert_clean("the Shell output", output);
    k.close_stdin();
    assert!(k.wait_exit(common::TIMEOUT).expect("exit").success());
    let frames: Vec<String> = k.seen.iter().map(Value::to_string).collect();
    assert_clean("the frames", &frames.join("\n"));
    let log = std::fs::read_to_string(env.share().join("logs").join("kiwi.log")).unwrap_or_default();
    assert_clean("the log", &log);
}

/// A key in the provider's base URL (user info or a `key=` query parameter) is not written to
/// the log when the connection fails, even at trace level.
#[test]
fn a_key_in_the_base_url_is_not_logged() {
    let env = Env::new();
    let config = env.dir.path().join("kimi.json");
    std::fs::write(
        &config,
        serde_json::to_string(&json!({
            "default_model": "m",
            "models": {"m": {"provider": "p", "model": "kimi-k2", "max_context_size": 100000}},
            "providers": {"p": {"type": "kimi",
                "base_url": "http://user:sk-secret-config-key@127.0.0.1:1/v1?key=sk-secret-search-key",
                "api_key": "sk-secret-provider-table"}},
            "loop_control": {"max_retries_per_step": 1}
        }))
        .unwrap(),
    )
    .unwrap();
    let mut k = env.spawn(&config, &["--debug"]);
    let (_, r) = k.prompt("p", json!("hi"));
    assert!(r.get("error").is_some(), "{r}");
    k.close_stdin();
    assert!(k.wait_exit(common::TIMEOUT).expect("exit").success());
    let frames: Vec<String> = k.seen.iter().map(Value::to_string).collect();
    assert_clean("the frames", &frames.join("\n"));
    let log = std::fs::read_to_string(env.share().join("logs").join("kiwi.log")).unwrap();
    assert!(log.contains("LLM connection error"), "{log}");
    assert_clean("the log", &log);
}
