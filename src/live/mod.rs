//! What every front end stands on: the live session (one session's lifecycle and the fan-out of
//! its event stream to the clients watching it) and the process shell (runtime, signals, the
//! writer, stdout-closed detection, drain and the exit sweep).
//!
//! Front ends (wire, ACP, both print dialects, and a web server with many clients per session)
//! open and close sessions only through [`LiveSession`] and run only inside [`shell::run`], so the
//! lifecycle is written once and cannot drift apart between them.

pub mod fanout;
pub mod history;
pub mod ops;
pub mod session;
pub mod shell;

pub use fanout::{Fanout, SubscriberId};
pub use history::History;
pub use ops::OpError;
pub use session::{CloseReason, LiveSession, SESSION_END_BOUND, SHUTDOWN_GRACE, Sessions};
pub use shell::{NoRuntime, Process, Runtime};
