//! Published npm SDKs for the tests that drive kiwi through them: installed by the test itself
//! (`npm ci` in the SDK's folder under `tests/`, on first use). Where Node.js is missing or the
//! registry does not answer, the test prints why on stderr and passes without running, so an
//! offline laptop still gets a green `cargo test`; with `KIWI_REQUIRE_SDK_TESTS=1` (set by
//! `.ci/run` under CI) such a skip fails instead.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

/// Set (to anything but empty or `0`) where the SDK tests must run: a skip then fails.
pub const REQUIRE_VAR: &str = "KIWI_REQUIRE_SDK_TESTS";

/// Gives up on `test`: prints the reason, or fails when the environment demands the test.
pub fn skip(test: &str, reason: &str) {
    let required = std::env::var(REQUIRE_VAR).is_ok_and(|v| !v.is_empty() && v != "0");
    assert!(!required, "{test} cannot run ({reason}) and {REQUIRE_VAR} is set");
    eprintln!("skipping {test}: {reason} (set {REQUIRE_VAR}=1 to make this a failure)");
}

/// Node.js runs and `package` is installed under `dir/node_modules`; the reason to skip
/// otherwise. A registry that answers but an install that fails is a failure, not a skip.
pub fn ready(dir: &Path, package: &str) -> Result<(), String> {
    Command::new("node").arg("--version").output().map_err(|e| format!("Node.js cannot be run: {e}"))?;
    if dir.join("node_modules").join(package).exists() {
        return Ok(());
    }
    // A short ping first: `npm ci` alone would retry for minutes before saying the registry is gone.
    let ping = Command::new("npm")
        .args(["ping", "--fetch-timeout=10000", "--fetch-retries=0", "--loglevel=error"])
        .current_dir(dir)
        .output()
        .map_err(|e| format!("npm cannot be run: {e}"))?;
    if !ping.status.success() {
        return Err(format!("the npm registry is not reachable: {}", first_line(&ping.stderr)));
    }
    let status = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(dir)
        .status()
        .expect("run npm ci");
    assert!(status.success(), "npm ci failed in {}", dir.display());
    Ok(())
}

/// The first line npm printed (`--loglevel=error` keeps it to the error), minus npm's notes
/// about unknown user config.
fn first_line(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.contains("Unknown user config"))
        .unwrap_or("no output")
        .to_string()
}
