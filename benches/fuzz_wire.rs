//! The full wire fuzz run: `cargo bench --bench fuzz_wire` feeds the release `kiwi` 1,000,000
//! random and mutated frames (`tests/fuzz_wire`) and prints frames/s, peak RSS and findings;
//! it exits 1 when there are findings. `KIWI_FUZZ_FRAMES`, `KIWI_FUZZ_SEED`,
//! `KIWI_FUZZ_FRAMES_PER_PROCESS`, `KIWI_FUZZ_DIR` and `KIWI_FUZZ_STALL_SECS` override the
//! defaults. Run by `cargo test --benches` (no `--bench` argument), it does a quick 2,000 frames.

#[path = "../tests/fuzz_wire/mod.rs"]
mod fuzz_wire;

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --all-targets` does not and must stay quick.
    let full = std::env::args().any(|a| a == "--bench");
    let frames = if full { 1_000_000 } else { 2_000 };
    let config =
        fuzz_wire::Config::from_env(env!("CARGO_BIN_EXE_kiwi"), frames, 100_000, env!("CARGO_TARGET_TMPDIR"), full);
    let report = fuzz_wire::run(&config);
    println!("{report}");
    if !report.findings.is_empty() {
        std::process::exit(1);
    }
}
