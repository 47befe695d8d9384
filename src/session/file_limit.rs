//! Test support: real short writes. A test re-runs its own binary with only itself selected and a
//! path in an environment variable; the child puts a file-size limit (`RLIMIT_FSIZE`) on itself,
//! so the kernel cuts writes short, and nothing else in the test run is limited.

use std::path::Path;

/// In the child: writes to regular files stop at `bytes` (EFBIG instead of SIGXFSZ).
pub(crate) fn limit_file_size(bytes: u64) {
    // SAFETY: plain syscalls in a single-purpose child process; SIGXFSZ would kill it.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
        let limit = libc::rlimit { rlim_cur: bytes, rlim_max: libc::RLIM_INFINITY };
        assert_eq!(libc::setrlimit(libc::RLIMIT_FSIZE, &limit), 0);
    }
}

/// In the parent: runs the test `test` (its full path) in a child with `var` set to `path`, and
/// fails with the child's report when the child fails.
pub(crate) fn run_child(test: &str, var: &str, path: &Path) {
    let exe = std::env::current_exe().expect("the test binary");
    let out = std::process::Command::new(exe)
        .args(["--exact", test, "--nocapture"])
        .env(var, path)
        // Pipes, not inherited: under the limit, the child's report to a regular file (a CI log)
        // would itself fail.
        .output()
        .expect("the child runs");
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}
