//! The codex exec dialect (`docs/codex-exec.md`, spec codex-exec.md): what
//! `@openai/codex-sdk` programs run as `codex exec --experimental-json`, one process per turn.
//! `args` reads the command line and `config_keys` its `--config` overrides, `input` the prompt,
//! images and output schema, `start` builds the session (a thread is a kiwi session) and runs
//! the turn, `projection` (over the pure `items`, in the shapes of `events`) writes the JSONL
//! lines with `approvals` answering every approval at once, `usage` sums the thread's earlier usage from its record.

pub mod approvals;
pub mod args;
pub mod config_keys;
pub mod events;
pub mod input;
pub mod items;
pub mod projection;
pub mod start;
pub mod usage;

pub use start::main;
