//! `kiwi acp` driven by the official ACP TypeScript SDK, `@agentclientprotocol/sdk`
//! (tests/acp_sdk/check.mjs): prompt, permission, cancel during a permission, load with replay,
//! modes, session/list without a cwd, session/fork, `AskUserQuestion` as an elicitation form
//! or a permission card, and ACP's newer stable surface for a client of the current schema:
//! `additionalDirectories`, `messageId` on chunks, `thinking` as a boolean option,
//! `session/delete` (twice: idempotent for the SDK), `logout`, and the turn's `usage` (through
//! the SDK's unstable entry point, where v1 keeps it).
//!
//! The SDK comes from the npm registry (`npm ci` in tests/acp_sdk, on first use). Where Node.js
//! is missing or the registry does not answer, the test prints why and passes without running;
//! with `KIWI_REQUIRE_SDK_TESTS=1` (set by `.ci/run` under CI) such a skip fails instead.

use crate::npm;

use std::path::Path;
use std::process::Command;

use serde_json::json;

const PACKAGE: &str = "@agentclientprotocol/sdk";

/// A throw-away home for one check: `work/`, and `share/config.toml` whose scripted model plays
/// `scripts` (also written as `scripts.json`, the path returned last).
struct CheckHome {
    dir: tempfile::TempDir,
    work: std::path::PathBuf,
    share: std::path::PathBuf,
}

impl CheckHome {
    fn new(scripts: &serde_json::Value) -> (Self, String) {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path().join("work");
        let share = dir.path().join("share");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::create_dir_all(&share).unwrap();
        let scripts_path = dir.path().join("scripts.json");
        std::fs::write(&scripts_path, scripts.to_string()).unwrap();
        let config = crate::common::scripted_config_toml(&scripts_path);
        std::fs::write(share.join("config.toml"), &config).unwrap();
        (Self { dir, work, share }, config)
    }

    /// Runs `sdk/check.mjs` against kiwi with `extra` variables; asserts it passed whole.
    fn run_check(&self, sdk: &Path, what: &str, extra: &[(&str, &Path)]) {
        let mut cmd = Command::new("node");
        cmd.arg(sdk.join("check.mjs"))
            .current_dir(sdk)
            .env("KIWI_BIN", env!("CARGO_BIN_EXE_kiwi"))
            .env("KIWI_WORK", &self.work)
            .env("KIMI_SHARE_DIR", &self.share)
            .env("HOME", self.dir.path());
        for (name, value) in extra {
            cmd.env(name, value);
        }
        let output = cmd.output().expect("run node");
        let stdout = String::from_utf8_lossy(&output.stdout);
        eprintln!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "{what} failed:\n{stdout}");
        assert!(stdout.contains(" passed, 0 failed"));
        assert!(!self.work.join("nope").exists(), "the cancelled command ran");
    }
}

/// A scripted `Shell` call.
fn shell(id: &str, command: &str) -> String {
    let args = json!({ "command": command }).to_string();
    format!("tool_call: {}", json!({"id": id, "name": "Shell", "arguments": args}))
}

#[test]
fn official_acp_sdk_drives_kiwi_acp() {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp_sdk");
    if let Err(reason) = npm::ready(&sdk, PACKAGE) {
        return npm::skip("the ACP SDK test", &reason);
    }
    // The second step reports its tokens: the turn's `usage` check reads them.
    let scripts = json!([
        shell("s1", "echo hi"),
        "usage: {\"input_other\": 5, \"output\": 2}\ntext: shell done",
        shell("s2", "touch nope"),
        "text: never"
    ]);
    let (home, config) = CheckHome::new(&scripts);
    let scripts_path = home.dir.path().join("scripts.json");
    // The question checks run on a config of their own: each process asks once, then says "noted".
    let question = json!({"questions": [{"question": "Which editor?", "header": "Editor", "options": [
        {"label": "Zed", "description": ""}, {"label": "Vim", "description": ""}]}]});
    let ask = json!({"id": "q1", "name": "AskUserQuestion", "arguments": question.to_string()});
    let questions_scripts = home.dir.path().join("questions.json");
    std::fs::write(&questions_scripts, json!([format!("tool_call: {ask}"), "text: noted"]).to_string()).unwrap();
    let questions_config = home.dir.path().join("questions.toml");
    std::fs::write(
        &questions_config,
        config.replace(scripts_path.to_str().unwrap(), questions_scripts.to_str().unwrap()),
    )
    .unwrap();
    home.run_check(&sdk, "the ACP SDK check", &[("KIWI_QUESTIONS_CONFIG", &questions_config)]);
}

/// The older published SDK, `@zed-industries/agent-client-protocol` 0.4 (tests/acp_sdk_04/check.mjs),
/// which knows eight update kinds and reports anything else as a schema error: a prompt with an
/// approved permission and one cancelled during its permission, and not one message it cannot
/// parse (`docs/compatibility.md`).
#[test]
fn the_acp_sdk_0_4_parses_everything_kiwi_sends() {
    const OLD_PACKAGE: &str = "@zed-industries/agent-client-protocol";
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/acp_sdk_04");
    if let Err(reason) = npm::ready(&sdk, OLD_PACKAGE) {
        return npm::skip("the ACP SDK 0.4 test", &reason);
    }
    let todo = json!({"id": "t1", "name": "SetTodoList", "arguments": json!({"todos": [{"title": "a", "status": "done"}]}).to_string()});
    let scripts = json!([
        format!("think: planning\n{}", shell("s1", "echo hi")),
        format!("tool_call: {todo}"),
        "text: shell done",
        shell("s2", "touch nope"),
        "text: never"
    ]);
    let (home, _) = CheckHome::new(&scripts);
    home.run_check(&sdk, "the ACP SDK 0.4 check", &[]);
}
