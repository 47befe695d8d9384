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

use std::path::Path;
use std::process::Command;

fn main() {
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
