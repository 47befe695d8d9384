//! Sessions on disk: the share dir, session folders, append-only JSONL files, `wire.jsonl`.

pub mod context_prompt;
#[cfg(test)]
pub(crate) mod file_limit;
pub mod fork;
pub mod id;
pub mod jsonl;
pub mod pyjson;
pub mod pyjson_ascii;
pub mod state;
pub mod store;
pub mod wire_log;
pub mod wire_read;

pub use store::{Session, SessionChoice, SessionError};
