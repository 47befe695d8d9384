//! Link settings of the `kiwi` binary.
//!
//! 1. Non-PIE (Linux): the loader then has no ~30,000 relative relocations to apply at every
//!    start and no relocated pages to dirty, which roughly halves the time from exec to the first
//!    answered request and trims the idle footprint.
//! 2. Start-up code together (release builds linked by LLD, the default linker of Rust ≥ 1.90 on
//!    x86_64 Linux): the kernel maps a binary's code in 64 KiB windows around each page fault,
//!    and the ~1,100 functions a start-up and a first turn run were spread over ~75 such windows
//!    of a 15 MB text segment, most of the idle footprint. `startup.order` (made by
//!    `benches/startup-order.py`, see there) lists them; LLD lays them out first, side by side.
//!    Names it lists that a build no longer has are skipped, so a stale list only costs memory.
//!    The link map (`$OUT_DIR/kiwi.map`) is what the script reads addresses back with.
//! 3. The built-in agent files, parsed here: they are written in YAML like any agent file, but
//!    parsing YAML cost a start-up more than anything else it did (~340,000 instructions for the
//!    default agent's 1.2 KB); the binary carries them as JSON (`$OUT_DIR/agents/*.json`),
//!    which parses ten times faster into the same document.

use std::path::Path;
use std::process::Command;

/// The built-in agent files under `src/blueprint/agents/` (`crate::blueprint::spec` lists them too).
const BUILTIN_AGENT_FILES: &[&str] =
    &["default/agent.yaml", "default/sub.yaml", "default/explore.yaml", "default/plan.yaml", "okabe/agent.yaml"];

fn main() {
    builtin_agents_as_json();
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" {
        println!("cargo:rustc-link-arg-bins=-no-pie");
    }
    println!("cargo:rerun-if-changed=startup.order");
    println!("cargo:rerun-if-changed=build.rs");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let target = std::env::var("TARGET").unwrap_or_default();
    if !release || target != "x86_64-unknown-linux-gnu" || !linked_by_lld() {
        return;
    }
    let out = std::env::var("OUT_DIR").unwrap_or_default();
    println!("cargo:rustc-link-arg-bin=kiwi=-Wl,-Map={out}/kiwi.map");
    let order = Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default()).join("startup.order");
    if order.is_file() {
        println!("cargo:rustc-link-arg-bin=kiwi=-Wl,--symbol-ordering-file={}", order.display());
        println!("cargo:rustc-link-arg-bin=kiwi=-Wl,--no-warn-symbol-ordering");
    }
}

/// Whether rustc links with its own LLD by default (1.90 and later on x86_64 Linux), unless the
/// build chose a linker of its own.
fn linked_by_lld() -> bool {
    if std::env::var_os("RUSTFLAGS").is_some_and(|f| !f.is_empty())
        || std::env::var_os("CARGO_ENCODED_RUSTFLAGS").is_some_and(|f| !f.is_empty())
        || std::env::var_os("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER").is_some()
    {
        return false;
    }
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let Ok(out) = Command::new(rustc).arg("--version").output() else {
        return false;
    };
    let version = String::from_utf8_lossy(&out.stdout);
    // "rustc 1.95.0 (…)"
    let minor = version.split_whitespace().nth(1).and_then(|v| v.split('.').nth(1)).and_then(|m| m.parse::<u32>().ok());
    minor.is_some_and(|m| m >= 90)
}

/// Writes each built-in agent file as JSON to `$OUT_DIR/agents/<name>.json`.
fn builtin_agents_as_json() {
    println!("cargo:rerun-if-changed=src/blueprint/agents");
    let root = Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default()).join("src/blueprint/agents");
    let out = Path::new(&std::env::var("OUT_DIR").unwrap_or_default()).join("agents");
    for name in BUILTIN_AGENT_FILES {
        let source = root.join(name);
        let text = std::fs::read_to_string(&source).unwrap_or_else(|e| panic!("{}: {e}", source.display()));
        let doc: serde_json::Value =
            serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", source.display()));
        let target = out.join(name).with_extension("json");
        if let Some(dir) = target.parent() {
            std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        }
        std::fs::write(&target, doc.to_string()).unwrap_or_else(|e| panic!("{}: {e}", target.display()));
    }
}
