//! kiwi driven by the published `@openai/codex-sdk` through `codexPathOverride`
//! (tests/codex_sdk/check.mjs): text, streamed events, a command, a file change, a todo list,
//! an MCP tool, multi-turn, resume in a new instance, structured output, a provider error,
//! usage, cancel and an image input — each as `docs/codex-exec.md` maps it.
//!
//! The SDK comes from the npm registry (`npm ci` in tests/codex_sdk, on first use; its `.npmrc`
//! leaves out the ~400 MB codex binary, an optional dependency the SDK does not need with
//! `codexPathOverride`). Where Node.js is missing or the registry does not answer, the test
//! prints why and passes without running; with `KIWI_REQUIRE_SDK_TESTS=1` a skip fails.

use crate::npm;

use std::path::Path;
use std::process::Command;

const PACKAGE: &str = "@openai/codex-sdk";

#[test]
fn the_codex_sdk_drives_kiwi() {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/codex_sdk");
    if let Err(reason) = npm::ready(&sdk, PACKAGE) {
        return npm::skip("the codex SDK check", &reason);
    }
    assert!(
        !sdk.join("node_modules/@openai/codex-linux-x64").exists(),
        "the codex binary was installed: tests/codex_sdk/.npmrc must omit optional dependencies"
    );
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let share = dir.path().join("share");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&share).unwrap();
    let output = Command::new("node")
        .arg(sdk.join("check.mjs"))
        .current_dir(&sdk)
        .env("KIWI_BIN", env!("CARGO_BIN_EXE_kiwi"))
        .env("KIWI_WORK", &work)
        .env("KIWI_DIR", dir.path())
        .env("KIWI_MCP_SERVER", crate::mcp::test_server())
        .env("KIMI_SHARE_DIR", &share)
        .env("HOME", dir.path())
        .env_remove("KIMI_DIALECT")
        .env_remove("CODEX_API_KEY")
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&output.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the codex SDK check failed:\n{stdout}");
    assert!(stdout.contains("24 passed, 0 failed"), "{stdout}");
}
