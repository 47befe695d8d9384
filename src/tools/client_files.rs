//! Files the client reads and writes for the file tools (ACP's `fs/read_text_file` and
//! `fs/write_text_file`, `docs/acp.md` §12.4): an editor hands out its buffers, unsaved edits included,
//! and takes writes into them. Everything else (stat, type detection, resolving paths, approvals
//! and diffs) stays local.
//!
//! The file tools do their work on blocking threads; [`ClientFileAccess`] bridges those threads
//! to the client's async answers through the runtime's handle.

use std::path::Path;
use std::sync::Arc;

use futures::future::BoxFuture;

/// A client that serves file contents. Paths are absolute.
pub trait ClientFiles: Send + Sync {
    fn can_read(&self) -> bool;
    fn can_write(&self) -> bool;
    fn read_text<'a>(&'a self, path: &'a Path) -> BoxFuture<'a, Result<String, String>>;
    fn write_text<'a>(&'a self, path: &'a Path, content: String) -> BoxFuture<'a, Result<(), String>>;
}

/// The client's files, usable from a blocking thread.
#[derive(Clone)]
pub struct ClientFileAccess {
    files: Arc<dyn ClientFiles>,
    handle: tokio::runtime::Handle,
}

impl ClientFileAccess {
    /// Must be called on the runtime (it keeps the runtime's handle).
    pub fn new(files: Arc<dyn ClientFiles>) -> Self {
        Self { files, handle: tokio::runtime::Handle::current() }
    }

    pub fn can_read(&self) -> bool {
        self.files.can_read()
    }

    pub fn can_write(&self) -> bool {
        self.files.can_write()
    }

    /// Blocks the calling (non-runtime) thread until the client answered.
    pub fn read_text(&self, path: &Path) -> std::io::Result<String> {
        self.handle.block_on(self.files.read_text(path)).map_err(std::io::Error::other)
    }

    pub fn write_text(&self, path: &Path, content: String) -> std::io::Result<()> {
        self.handle.block_on(self.files.write_text(path, content)).map_err(std::io::Error::other)
    }
}
