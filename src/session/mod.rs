//! Sessions on disk: the share dir, session folders, append-only JSONL files, `wire.jsonl`.

pub mod catalog;
pub mod context_prompt;
pub mod export;
#[cfg(test)]
pub(crate) mod file_limit;
pub mod fork;
pub mod git_diff;
pub mod id;
pub mod jsonl;
pub mod origin;
pub mod pyjson;
pub mod pyjson_ascii;
pub mod rewind;
pub mod state;
pub mod store;
pub mod uploads;
pub mod wire_log;
pub mod wire_read;
pub mod workspace;

pub use store::{Session, SessionChoice, SessionError};
