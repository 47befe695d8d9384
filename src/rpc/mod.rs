//! JSON-RPC over stdio: the only layer that sees bytes.

pub mod error_code;
pub mod message;
pub mod peer;
pub mod pending;
pub mod queue;
pub mod reader;
pub mod writer;

pub use error_code::{ErrorCode, ErrorObject};
pub use message::{Incoming, RequestId};
pub use peer::Peer;
pub use writer::Outbound;
