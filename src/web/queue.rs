//! The close codes a browser socket may be closed with; its outgoing frames wait in the client
//! queue every many-client transport shares (`rpc::queue`).

pub use crate::rpc::queue::{Frames, Outgoing, QUEUE_BYTES, QUEUE_FRAMES};

/// Server shutdown (1012, service restart).
pub const CLOSE_SHUTDOWN: u16 = 1012;
/// The session's process ended (deleted): 1001, going away.
pub const CLOSE_SESSION_GONE: u16 = 1001;
pub const SESSION_GONE_REASON: &str = "Session process exited";
/// No such session: 4004.
pub const CLOSE_NOT_FOUND: u16 = 4004;
pub const NOT_FOUND_REASON: &str = "Session not found";
