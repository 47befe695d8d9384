//! A short, seeded, deterministic run of the wire fuzzer (`tests/fuzz_wire`): 20,000 random and
//! mutated frames against the real binary, in four processes so every mode runs once (approvals
//! asked or `--yolo`, a slow reader, an EOF in the middle of a turn). It fails on any finding (a crash, a request answered
//! zero or two times, non-JSON on stdout, a panic) or on an absurd peak RSS (> 1 GiB). The full
//! run is `cargo bench --bench fuzz_wire`; `KIWI_FUZZ_SEED` / `KIWI_FUZZ_FRAMES` apply to both.

use crate::fuzz_wire;

#[test]
fn twenty_thousand_fuzzed_frames_are_each_answered_as_the_protocol_says() {
    let config =
        fuzz_wire::Config::from_env(env!("CARGO_BIN_EXE_kiwi"), 20_000, 5_000, env!("CARGO_TARGET_TMPDIR"), false);
    let report = fuzz_wire::run(&config);
    println!("{report}");
    assert!(report.findings.is_empty(), "the wire fuzzer found problems:\n{report}");
    // The run must have exercised the paths it claims to, or it proves nothing.
    assert!(report.frames >= config.frames, "{report}");
    assert!(report.answers > 0 && report.null_errors > 0 && report.events > 0, "{report}");
    assert!(report.peak_rss_kib < 1024 * 1024, "{report}");
}
