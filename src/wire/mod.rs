//! The wire front end: JSON-RPC 2.0 over stdio, protocol 1.2.

pub mod projection;
pub mod server;
