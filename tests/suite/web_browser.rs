//! The browser UI of `kiwi web` in a real headless Chromium (tests/web_browser/check.py, driven
//! with Playwright for Python and the system's Chromium): open the UI, start a session, send a
//! prompt and see the answer while the turn runs, approve a shell command, reload, join the
//! running turn from a second page, use a phone-sized screen, fork. Screenshots land in
//! `target/web-screenshots/`.
//!
//! Playwright (pinned) is installed with pip into a venv under `target/tmp/` on first use; it
//! cannot download a browser here, so the test uses Debian's `chromium` (or `KIWI_CHROMIUM`).
//! Where Chromium, Python or the registry is missing the test is skipped with the reason
//! printed, unless `KIWI_REQUIRE_SDK_TESTS=1` (CI sets it), where a skip is a failure.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use crate::{npm, pypi};

/// The reference release whose browser UI is loaded against `kiwi web`.
const REFERENCE_VERSION: &str = "1.49.0";

/// The Playwright release the check was written against.
const PLAYWRIGHT_VERSION: &str = "1.65.2";

fn chromium() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os("KIWI_CHROMIUM") {
        return Ok(PathBuf::from(path));
    }
    ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/lib/chromium/chromium", "/usr/bin/google-chrome"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .ok_or_else(|| "Chromium is not installed (apt-get install chromium, or set KIWI_CHROMIUM)".to_string())
}

fn playwright_ready(python: &Path) -> bool {
    Command::new(python)
        .args([
            "-c",
            &format!("import importlib.metadata as m; assert m.version('playwright') == {PLAYWRIGHT_VERSION:?}"),
        ])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The venv's python with the pinned Playwright, installing it if needed; `Err` says why not.
/// Both tests of this file call it at once: one installs while the other waits.
fn python_with_playwright() -> Result<PathBuf, String> {
    static INSTALL: Mutex<()> = Mutex::new(());
    let _one_at_a_time = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    pypi::venv_with("web-browser-venv", &format!("playwright=={PLAYWRIGHT_VERSION}"), playwright_ready)
}

#[test]
fn the_browser_ui_works_in_chromium() {
    let chromium = match chromium() {
        Ok(p) => p,
        Err(reason) => return npm::skip("the browser UI test", &reason),
    };
    let python = match python_with_playwright() {
        Ok(p) => p,
        Err(reason) => return npm::skip("the browser UI test", &reason),
    };
    let dir = tempfile::tempdir().unwrap();
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/web-screenshots");
    let check = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/web_browser/check.py");
    let output = Command::new(python)
        .arg(check)
        .env("KIWI_BIN", env!("CARGO_BIN_EXE_kiwi"))
        .env("KIWI_DIR", dir.path())
        .env("KIWI_CHROMIUM", &chromium)
        .env("KIWI_SCREENSHOTS", &shots)
        .output()
        .expect("run the browser check");
    let stdout = String::from_utf8_lossy(&output.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the browser check failed:\n{stdout}");
    assert!(stdout.contains(" passed, 0 failed"), "{stdout}");
}

/// The reference's built UI (`kimi_cli/web/static/` of its wheel), downloaded with pip into
/// `target/tmp/` on first use (never committed or shipped); `Err` says why not.
fn reference_ui(python: &Path) -> Result<PathBuf, String> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("kimi-cli-{REFERENCE_VERSION}"));
    let static_dir = dir.join("kimi_cli/web/static");
    if static_dir.join("index.html").exists() {
        return Ok(static_dir);
    }
    let pip = Command::new(python)
        .args(["-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps"])
        .args(["--only-binary=:all:", "--python-version", "3.12", "-d"])
        .arg(&dir)
        .arg(format!("kimi-cli=={REFERENCE_VERSION}"))
        .output()
        .map_err(|e| format!("cannot run pip: {e}"))?;
    if !pip.status.success() {
        return Err(format!(
            "pip could not download kimi-cli=={REFERENCE_VERSION}: {}",
            String::from_utf8_lossy(&pip.stderr)
        ));
    }
    let unpack = Command::new(python)
        .args([
            "-c",
            "import glob, sys, zipfile\n\
             z = zipfile.ZipFile(glob.glob(sys.argv[1] + '/kimi_cli-*.whl')[0])\n\
             [z.extract(n, sys.argv[1]) for n in z.namelist() if n.startswith('kimi_cli/web/static/')]",
        ])
        .arg(&dir)
        .output()
        .map_err(|e| format!("cannot run python: {e}"))?;
    if !unpack.status.success() || !static_dir.join("index.html").exists() {
        return Err(format!("the wheel has no web UI: {}", String::from_utf8_lossy(&unpack.stderr)));
    }
    Ok(static_dir)
}

/// The reference's own UI, unchanged, against `kiwi web` (tests/web_browser/reference_ui.py).
#[test]
fn the_reference_ui_works_against_kiwi_web() {
    let chromium = match chromium() {
        Ok(p) => p,
        Err(reason) => return npm::skip("the reference UI test", &reason),
    };
    let python = match python_with_playwright() {
        Ok(p) => p,
        Err(reason) => return npm::skip("the reference UI test", &reason),
    };
    let static_dir = match reference_ui(&python) {
        Ok(p) => p,
        Err(reason) => return npm::skip("the reference UI test", &reason),
    };
    let dir = tempfile::tempdir().unwrap();
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/web-screenshots");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/web_browser/reference_ui.py");
    let output = Command::new(python)
        .arg(script)
        .env("KIWI_BIN", env!("CARGO_BIN_EXE_kiwi"))
        .env("KIWI_DIR", dir.path())
        .env("KIWI_CHROMIUM", &chromium)
        .env("KIWI_SCREENSHOTS", &shots)
        .env("KIWI_REFERENCE_UI", &static_dir)
        .output()
        .expect("run the reference UI check");
    let stdout = String::from_utf8_lossy(&output.stdout);
    eprintln!("{stdout}{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "the reference UI check failed:\n{stdout}");
    assert!(stdout.contains("1 passed, 0 failed"), "{stdout}");
}
