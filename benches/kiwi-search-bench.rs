//! Benchmarks the in-process Grep and Glob against the `rg` binary on a generated tree.
//!
//! Usage: `cargo bench --bench kiwi-search-bench [-- FILES [RUNS]]`, or the variables
//! `KIWI_SEARCH_BENCH_FILES` / `KIWI_SEARCH_BENCH_RUNS` (arguments win; defaults 10,000 files and
//! 5 runs, so a plain `cargo bench` runs it too). Prints the median wall time of each variant;
//! `rg` rows are skipped when it is not installed.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use kiwi::tools::glob::glob_paths;
use kiwi::tools::grep::{GrepParams, search};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time<F: FnMut() -> usize>(runs: usize, mut f: F) -> (Duration, usize) {
    let mut times = Vec::with_capacity(runs);
    let mut size = 0;
    f(); // warm the page cache
    for _ in 0..runs {
        let start = Instant::now();
        size = f();
        times.push(start.elapsed());
    }
    (median(times), size)
}

fn generate(root: &Path, files: usize) -> std::io::Result<()> {
    let exts = ["rs", "py", "txt", "md", "js"];
    for i in 0..files {
        let dir = root.join(format!("d{}", i % 50)).join(format!("s{}", (i / 50) % 20));
        std::fs::create_dir_all(&dir)?;
        let mut body = String::new();
        for line in 0..40 {
            if line == 17 && i % 7 == 0 {
                body.push_str(&format!("let needle_{i} = compute({line});\n"));
            } else {
                body.push_str(&format!("fn function_{i}_{line}(x: u32) -> u32 {{ x * {line} + {i} }}\n"));
            }
        }
        std::fs::write(dir.join(format!("file{i}.{}", exts[i % exts.len()])), body)?;
    }
    Ok(())
}

/// The `n`th positional argument, else the variable `var`, else `default`. Flags are skipped:
/// `cargo bench` adds `--bench` to every bench's arguments.
fn setting(n: usize, var: &str, default: usize) -> std::io::Result<usize> {
    let arg = std::env::args().skip(1).filter(|a| !a.starts_with('-')).nth(n);
    match arg.or_else(|| std::env::var(var).ok()) {
        None => Ok(default),
        Some(v) => {
            v.parse().map_err(|_| std::io::Error::other(format!("not a count: {v} (argument {} or {var})", n + 1)))
        }
    }
}

fn main() -> std::io::Result<()> {
    let files = setting(0, "KIWI_SEARCH_BENCH_FILES", 10_000)?;
    let runs = setting(1, "KIWI_SEARCH_BENCH_RUNS", 5)?.max(1);
    let tmp = tempfile::tempdir()?;
    let root = tmp.path().canonicalize()?;
    generate(&root, files)?;
    let have_rg = Command::new("rg").arg("--version").output().is_ok_and(|o| o.status.success());
    let report = |name: &str, d: Duration, size: usize| {
        println!("{name:<48} {:>9.2} ms  ({size} bytes/entries)", d.as_secs_f64() * 1000.0);
    };
    println!("tree: {files} files under {}, median of {runs} runs", root.display());

    let grep_cases: [(&str, serde_json::Value, Vec<&str>); 3] = [
        (
            "files_with_matches needle_\\d+",
            serde_json::json!({"pattern": "needle_\\d+"}),
            vec!["--files-with-matches", "needle_\\d+", "."],
        ),
        (
            "content -n needle_\\d+",
            serde_json::json!({"pattern": "needle_\\d+", "output_mode": "content", "-n": true}),
            vec!["--line-number", "needle_\\d+", "."],
        ),
        (
            "content -i FUNCTION_10_1\\b --type rust",
            serde_json::json!({"pattern": "FUNCTION_10_1\\b", "output_mode": "content", "-i": true, "type": "rust"}),
            vec!["--ignore-case", "--type", "rust", "FUNCTION_10_1\\b", "."],
        ),
    ];
    for (label, params, rg_args) in grep_cases {
        let params: GrepParams = serde_json::from_value(params).map_err(std::io::Error::other)?;
        let (d, n) = time(runs, || search(&root, &params).stdout.len());
        report(&format!("Grep (in-process) {label}"), d, n);
        if have_rg {
            let (d, n) = time(runs, || {
                Command::new("rg").args(&rg_args).current_dir(&root).output().map_or(0, |o| o.stdout.len())
            });
            report(&format!("rg {label}"), d, n);
        }
    }

    let glob_cases = [("d1*/**/*.rs", "d1*/**/*.rs"), ("d*/s1/*.py", "d*/s1/*.py")];
    for (pattern, rg_glob) in glob_cases {
        let (d, n) = time(runs, || glob_paths(&root, pattern).map_or(0, |v| v.len()));
        report(&format!("Glob (in-process) {pattern}"), d, n);
        if have_rg {
            let (d, n) = time(runs, || {
                Command::new("rg")
                    .args(["--files", "-g", rg_glob])
                    .current_dir(&root)
                    .output()
                    .map_or(0, |o| o.stdout.iter().filter(|&&b| b == b'\n').count())
            });
            report(&format!("rg --files -g {rg_glob}"), d, n);
        }
    }
    tmp.close()
}
