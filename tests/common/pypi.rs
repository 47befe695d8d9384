//! Published PyPI packages for the tests that drive kiwi through them (the Claude Agent SDK,
//! Playwright): a venv of the test's own under the target dir, the pinned package installed by
//! the test on first use. Where Python or the registry is missing the test skips
//! (`npm::skip`, the same rule for every published client).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The python of venv `name` with `requirement` (`package==version`) installed, making the venv
/// and installing it when `ready` (asked with that python) says it is not there yet; `Err` says
/// why it cannot be.
pub fn venv_with(name: &str, requirement: &str, ready: impl Fn(&Path) -> bool) -> Result<PathBuf, String> {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let python = venv.join("bin/python");
    if ready(&python) {
        return Ok(python);
    }
    let created = Command::new("python3").args(["-m", "venv"]).arg(&venv).output();
    match created {
        Ok(o) if o.status.success() => {}
        Ok(o) => return Err(format!("python3 -m venv failed: {}", String::from_utf8_lossy(&o.stderr))),
        Err(e) => return Err(format!("python3 is not available: {e}")),
    }
    let pip = Command::new(&python)
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", requirement])
        .output()
        .map_err(|e| format!("cannot run pip: {e}"))?;
    if !pip.status.success() {
        return Err(format!("pip could not install {requirement}: {}", String::from_utf8_lossy(&pip.stderr)));
    }
    if !ready(&python) {
        return Err(format!("{requirement} installed but does not import"));
    }
    Ok(python)
}
