//! What the sandbox costs per command (spec sandbox.md §5.4; goal ≤ 1 ms over a plain spawn):
//! medians of `fork`+`exec`+`wait` of `/bin/true`, plain and sandboxed (`workspace-write`, the
//! network blocked), with the policy computed and prepared for every command as a Shell call
//! does, and with a prepared policy reused. Rounds alternate so both see the same load.
//!
//! `cargo bench --bench sandbox-bench` (`SANDBOX_BENCH_N` spawns per variant, default 300).

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use kiwi::sandbox::{Sandbox, SandboxMode, SandboxSettings};

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1000.0
}

fn spawn(policy: Option<&kiwi::sandbox::CommandPolicy>, dir: &std::path::Path) -> Duration {
    let start = Instant::now();
    let mut cmd = Command::new("/bin/true");
    cmd.current_dir(dir);
    if let Some(p) = policy {
        p.apply_std(&mut cmd);
    }
    let status = cmd.status().expect("spawn /bin/true");
    assert!(status.success());
    start.elapsed()
}

fn main() {
    let n: usize = std::env::var("SANDBOX_BENCH_N").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    let dir = tempfile::tempdir().expect("temp dir");
    let work: PathBuf = dir.path().join("work");
    std::fs::create_dir_all(work.join(".git/hooks")).expect("work dir");
    let mut sandbox = Sandbox::new(
        SandboxSettings::default(),
        Some(SandboxMode::WorkspaceWrite),
        false,
        dir.path().join("share"),
        Vec::new(),
    );
    if let Err(e) = sandbox.probe(&work, &[]) {
        eprintln!("sandbox-bench: {e}");
        std::process::exit(1);
    }
    let reused = sandbox.policy_for(&work, &[]).expect("policy");
    let (mut plain, mut fresh, mut kept, mut prepare) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        plain.push(spawn(None, &work));
        let start = Instant::now();
        let policy = sandbox.policy_for(&work, &[]).expect("policy");
        let prepared = start.elapsed();
        prepare.push(prepared);
        fresh.push(prepared + spawn(Some(&policy), &work));
        kept.push(spawn(Some(&reused), &work));
    }
    let base = median(plain.clone());
    println!("sandbox-bench: median of {n} spawns of /bin/true");
    println!("  plain spawn                          {base:.3} ms");
    let f = median(fresh);
    println!("  sandboxed, policy per command        {f:.3} ms  (+{:.3} ms)", f - base);
    let k = median(kept);
    println!("  sandboxed, policy reused             {k:.3} ms  (+{:.3} ms)", k - base);
    println!("  policy_for alone                     {:.3} ms", median(prepare));
}
