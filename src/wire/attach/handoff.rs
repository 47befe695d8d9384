//! When the host goes away (`docs/host.md`, "When the host goes away"): an attacher whose client
//! is still there either takes the session over (the first to get its lock) or attaches to the
//! process that did.
//!
//! Invariants: the lock, not the socket file, says who hosts; the wait is bounded; the client's
//! output is shared by this process's relay and, after a take-over, its own wire server, one at
//! a time.

use std::io::{BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::connect;
use crate::session::store::lock_folder;

/// How long an attacher whose host went away waits for the lock or a new host: the old host
/// releases the lock only after its `SessionEnd` hooks (at most `live::SESSION_END_BOUND`),
/// and a new host serves once its session is open.
pub const TAKEOVER_WAIT: Duration = Duration::from_secs(15);
/// How often the lock and the socket are tried meanwhile.
const RETRY: Duration = Duration::from_millis(50);

/// Who serves the session next.
pub enum Next {
    /// Another process hosts it now; the connection is past its first byte.
    Attach(BufReader<UnixStream>),
    /// Its lock is free: this process opens the session (and may still lose the race for it).
    Host,
    /// Neither within [`TAKEOVER_WAIT`].
    GaveUp,
}

/// Waits until the session in `dir` can be taken over or a new host serves it.
pub fn next_host(dir: &Path) -> Next {
    let deadline = Instant::now() + TAKEOVER_WAIT;
    loop {
        // Taken and dropped: opening the session takes it again.
        if matches!(lock_folder(dir), Ok(Some(_))) {
            return Next::Host;
        }
        if let Ok(stream) = connect(dir) {
            return Next::Attach(stream);
        }
        if Instant::now() >= deadline {
            return Next::GaveUp;
        }
        std::thread::sleep(RETRY);
    }
}

/// Whether another process holds the lock of `dir` (it won the race for the session).
pub fn held_by_another(dir: &Path) -> bool {
    matches!(lock_folder(dir), Ok(None))
}

/// The client's output, written by one writer at a time: the relay's, then (after a take-over)
/// the wire server's.
pub struct Shared<W>(Arc<Mutex<W>>);

impl<W> Shared<W> {
    pub fn new(inner: W) -> Self {
        Self(Arc::new(Mutex::new(inner)))
    }
}

impl<W> Clone for Shared<W> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<W: Write> Write for Shared<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).flush()
    }
}
