//! The `kiwi` binary: everything lives in the library; see `kiwi::app`.

fn main() -> std::process::ExitCode {
    // `kiwi web` holds a descriptor per connection: its soft limit is raised to the hard one
    // before any thread exists (process-global; other commands keep what they were given, and
    // so do the programs they start).
    if std::env::args_os().nth(1).is_some_and(|a| a == "web") {
        kiwi::web::listen::raise_fd_limit();
    }
    kiwi::web::environment::keep(take_web_variables());
    kiwi::app::main()
}

/// Takes every `KIMI_WEB_*` variable and `KIWI_WEB_AUTH_TOKEN` out of the environment
/// (`docs/web.md` §1.2): they configure `kiwi web` only, and no tool, hook or MCP server may see
/// them (the tokens among them).
fn take_web_variables() -> Vec<(String, String)> {
    let taken: Vec<(std::ffi::OsString, std::ffi::OsString)> = std::env::vars_os()
        .filter(|(name, _)| kiwi::web::environment::is_web_variable(&name.to_string_lossy()))
        .collect();
    for (name, _) in &taken {
        // SAFETY: the first thing `main` does: no other thread exists yet, so nothing reads the
        // environment concurrently.
        unsafe { std::env::remove_var(name) };
    }
    taken.into_iter().map(|(n, v)| (n.to_string_lossy().into_owned(), v.to_string_lossy().into_owned())).collect()
}

/// C's `pow`, the only libm function the program calls (tokio's multi-thread scheduler, which
/// `kiwi web` runs on, weighs its poll times with `powf`). Defining it here, in Rust, leaves the
/// linker nothing to take from libm, so libm is not loaded at all: loading it cost every start
/// ~0.3 MB of resident memory (the loader runs its IFUNC resolvers and reads its symbol tables)
/// and a dozen system calls, for one function that an idle server never calls.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[unsafe(no_mangle)]
pub extern "C" fn pow(x: f64, y: f64) -> f64 {
    libm::pow(x, y)
}
