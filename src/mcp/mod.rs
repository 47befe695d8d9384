//! The MCP client (`docs/tools.md` §10, `docs/subcommands.md` §2): server definitions, connections to
//! stdio, Streamable HTTP and (legacy) SSE servers, their tools as kiwi tools, the per-session
//! status the turns report, and OAuth for remote servers (the flow, the token store, refresh).
//!
//! Layer: after `tools` (MCP tools are tools) and before `soul` (a turn waits for the servers).

pub mod config;
pub mod content;
pub mod error;
pub mod link;
pub mod manager;
pub mod names;
pub mod oauth;
pub mod oauth_store;
pub mod sse;
pub mod stderr;
pub mod tool;

pub use config::{ServerEntry, ServerTable, server_table};
pub use error::LinkError;
pub use link::{LinkEnv, ServerLink, StderrTo};
pub use manager::{McpManager, RegisterTools};
