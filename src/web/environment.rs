//! The `KIMI_WEB_*` settings (`docs/web.md` §1.2). `src/main.rs` takes them out of the process
//! environment at start, while the process has one thread (every process-wide change happens
//! there), and hands them here; `kiwi web` reads them from here.
//!
//! Invariants: no tool, hook or MCP server of any mode ever sees a `KIMI_WEB_*` variable (the
//! reference leaked its token to the agent's Shell this way); kept values are only read.

use std::sync::OnceLock;

/// The prefix of the variables taken.
pub const PREFIX: &str = "KIMI_WEB_";

/// Whether `name` is one of `kiwi web`'s variables: `KIMI_WEB_*`, and kiwi's own token variable.
pub fn is_web_variable(name: &str) -> bool {
    name.starts_with(PREFIX) || name == super::settings::TOKEN_VARIABLE
}

static KEPT: OnceLock<Vec<(String, String)>> = OnceLock::new();

/// Keeps the variables `src/main.rs` took out of the environment (the first call wins).
pub fn keep(variables: Vec<(String, String)>) {
    let _ = KEPT.set(variables);
}

/// The value of `name` as the process was started with it. Without [`keep`] (kiwi used as a
/// library), the environment itself.
pub fn web_variable(name: &str) -> Option<String> {
    match KEPT.get() {
        Some(kept) => kept.iter().find(|(n, _)| n == name).map(|(_, v)| v.clone()),
        None => std::env::var(name).ok(),
    }
}
