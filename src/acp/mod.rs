//! The Agent Client Protocol front end (`kiwi acp`, `docs/acp.md`): IDEs such as Zed spawn kiwi and
//! speak ACP v1 over stdio. It is a second projection of the same core as the wire front end:
//! sessions come from the session builder, turns run on the soul's driver, and every session is
//! recorded into its `wire.jsonl`, so wire and ACP can resume each other's sessions.
//!
//! The JSON-RPC loop is kiwi's own (`rpc`: reader, writer, pending map); the message types are
//! the `agent-client-protocol` crate's typed v1 schema.

pub mod attached;
pub mod client_calls;
pub mod client_fs;
pub mod client_profile;
pub mod errors;
pub mod history;
pub mod host;
pub mod mapping;
pub mod mcp_servers;
pub mod methods;
pub mod modes;
pub mod permission;
pub mod projection;
pub mod prompt_input;
pub mod questions;
pub mod serve;
pub mod server;
pub mod session;
pub mod terminal_shell;
pub mod tool_view;
