//! kiwi driven by the official Python `claude-agent-sdk` through its CLI-path option
//! (tests/print_sdk/check.py): a one-shot `query()`, a multi-turn client, a `can_use_tool`
//! callback, an interrupt, an in-process MCP tool, hooks, structured output, a custom agent, a
//! background agent (on its own model, waking the main agent when it ends),
//! the context-usage and MCP-status queries, and `total_cost_usd` with `max_budget_usd`.
//!
//! The pinned SDK is installed with pip into a venv under `target/tmp/` on first use. Where
//! Python or the registry is not available the test is skipped with the reason printed, unless
//! `KIWI_REQUIRE_SDK_TESTS=1` (CI sets it), where a skip is a failure.

use crate::pypi;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The SDK version whose command line and control protocol kiwi was checked against.
const SDK_VERSION: &str = "0.2.187";

fn sdk_ready(python: &Path) -> bool {
    Command::new(python)
        .args(["-c", &format!("import claude_agent_sdk as s; assert s.__version__ == {SDK_VERSION:?}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The venv's python with the pinned SDK, installing it if needed; `Err` says why not.
fn python_with_sdk() -> Result<PathBuf, String> {
    pypi::venv_with("print-sdk-venv", &format!("claude-agent-sdk=={SDK_VERSION}"), sdk_ready)
}

#[test]
fn the_python_sdk_drives_kiwi() {
    run_check("check.py", "11 passed, 0 failed");
}

/// Runs the SDK check script `script` of tests/print_sdk/ against kiwi, in a fresh work and share
/// dir, and asserts its closing line says `expected`; skipped with the reason where the SDK
/// cannot be had (a failure under `KIWI_REQUIRE_SDK_TESTS=1`).
pub(crate) fn run_check(script: &str, expected: &str) {
    let python = match python_with_sdk() {
        Ok(p) => p,
        Err(reason) => return crate::npm::skip(&format!("the claude-agent-sdk check {script}"), &reason),
    };
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    let share = dir.path().join("share");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&share).unwrap();
    let check = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/print_sdk").join(script);
    let output = Command::new(python)
        .arg(check)
        .env("KIWI_BIN", env!("CARGO_BIN_EXE_kiwi"))
        .env("KIWI_WORK", &work)
        .env("KIWI_DIR", dir.path())
        .env("KIMI_SHARE_DIR", &share)
        .env("HOME", dir.path())
        .env_remove("KIMI_DIALECT")
        .env_remove("KIWI_SDK_CHECKS")
        .env_remove("CLAUDE_CODE_ENABLE_SDK_FILE_CHECKPOINTING")
        .output()
        .expect("run the SDK check");
    let stdout = String::from_utf8_lossy(&output.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the SDK check {script} failed:\n{stdout}");
    assert!(stdout.contains(expected), "{stdout}");
}
