//! Claude Code's headless stream-json dialect (`docs/print-mode.md` Part B, C.2-C.4): `args` reads
//! the command line, `start` builds the session, `run` serves input lines and control requests,
//! `projection` (over the pure `turn`) writes the lines, `permission` decides approvals (with
//! `tool_names`: Claude's names and rules); `sdk` serves what SDK programs add (`sdk_mcp`, hooks,
//! agents, `structured`) through the control requests of `control`. The session APIs: `resume`
//! (`--fork-session`, `--resume-session-at`) and `rewind_files` find messages through `ledger`;
//! `mcp_control` turns the session's MCP servers off, on, or connects them anew. `attached` runs
//! the dialect on a session another kiwi process hosts (`wire::remote`).

pub mod args;
pub mod attached;
pub mod control;
pub mod input;
pub mod ledger;
pub mod lines;
pub mod mcp;
pub mod mcp_control;
pub mod permission;
pub mod projection;
pub mod resume;
pub mod retry;
pub mod rewind_files;
pub mod run;
pub mod sandbox_settings;
pub mod sdk;
pub mod sdk_mcp;
pub mod start;
pub mod structured;
pub mod tool_names;
pub mod turn;

pub use start::main;
