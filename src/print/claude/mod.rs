//! Claude Code's headless stream-json dialect (`docs/print-mode.md` Part B, C.2-C.4): `args` reads
//! the command line, `start` builds the session, `run` serves input lines and control requests,
//! `projection` (over the pure `turn`) writes the lines, `permission` decides approvals.

pub mod args;
pub mod input;
pub mod lines;
pub mod mcp;
pub mod permission;
pub mod projection;
pub mod retry;
pub mod run;
pub mod start;
pub mod turn;

pub use start::main;
