//! The deterministic test providers `_echo` and `_scripted_echo` (`docs/scripted-echo.md`).
//!
//! Invariants: both providers speak the same line-oriented DSL (`dsl`), whose error texts are
//! wire-visible and match the reference verbatim; a call either fails before streaming anything
//! or streams one event per part line, then the message id and usage (`stream`). Python string
//! and JSON semantics the DSL relies on live in `crate::llm::pyfmt` and `pyjson`.

mod dsl;
#[allow(clippy::module_inception)]
mod echo;
mod pyjson;
mod scripted;
mod simulated;
mod stream;

pub use dsl::{ParsedScript, parse_script};
pub use echo::EchoProvider;
pub use scripted::{ScriptedEchoProvider, TraceFn, load_scripts, trace_enabled};

/// Reads a file of the LLM fixtures the integration tests also serve. They live inside the
/// repository so that a fresh clone tests on its own.
#[cfg(test)]
fn test_fixture(name: &str) -> String {
    let path = format!("{}/tests/fixtures/llm/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("fixture {path}: {e}"))
}
