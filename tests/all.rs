//! kiwi's integration tests: one binary, so the crate is linked once for all of them.
//!
//! The shared kit lives beside this file: `common` (spawning kiwi, mock servers, the SDK
//! installers), `tools_support`, `print_support` and the wire fuzzer. Each area's tests are a
//! module of `suite`. Only `tools_shell_killall.rs` stays a binary of its own: it kills every
//! process group the process has started, which would hit tests running beside it.

mod common;
mod fuzz_wire;
#[path = "common/provider_harness.rs"]
mod harness;
#[path = "common/mcp.rs"]
mod mcp;
#[path = "common/mock_llm.rs"]
mod mock_llm;
#[path = "common/mock_routes.rs"]
mod mock_routes;
#[path = "common/npm.rs"]
mod npm;
mod print_support;
#[path = "common/pypi.rs"]
mod pypi;
mod tools_support;

mod suite;
