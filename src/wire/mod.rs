//! The wire front end: the Kimi Wire protocol (JSON-RPC 2.0 over stdio, protocol 1.10).
//!
//! `methods` is the method table, `params` the wire-only params and results, `server` the
//! dispatcher, `projection` (with `frames` and `answers`) the soul's events as wire frames,
//! `replay` streams a session's record back, `schema` describes all of it as a JSON Schema, and
//! `serve` puts them together on a pair of byte streams.

pub mod answers;
pub mod attach;
pub mod errors;
pub mod extensions;
pub mod frames;
pub mod host;
pub mod methods;
pub mod params;
pub mod projection;
pub mod remote;
pub mod replay;
pub mod schema;
pub mod serve;
pub mod server;
pub mod status;
