//! Writes `state.json` for [`super::state::SessionState`]: one write at a time, always of the
//! newest state, on a thread of its own.
//!
//! Why: every write is atomic and durable (temp file, fsync, rename), and on a virtual disk that
//! costs ~0.3 ms of CPU and a millisecond or more of waiting. `SetTodoList` changes the state on
//! every step of a long turn; done inline, those writes were most of a step's cost and stalled
//! the event stream behind each fsync. Here a change waits only when its caller needs it on disk
//! ([`StateWriter::save`]); a deferred change ([`StateWriter::save_later`]) is written by the
//! writer thread, and changes that arrive while a write is under way are merged into the next
//! one. Each state that reaches the disk still gets its own fsync; nothing is ever written out of
//! order, because the slot only ever holds the newest state.

use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::session::state::{self as file, SessionStateFile};

#[derive(Default)]
struct Slot {
    /// The newest state not yet handed to a write.
    pending: Option<SessionStateFile>,
    /// A write is under way (on the writer thread or inline).
    writing: bool,
}

pub struct StateWriter {
    dir: PathBuf,
    slot: Mutex<Slot>,
    idle: Condvar,
}

impl StateWriter {
    pub fn new(dir: PathBuf) -> Arc<Self> {
        Arc::new(Self { dir, slot: Mutex::new(Slot::default()), idle: Condvar::new() })
    }

    fn lock(&self) -> MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `state` and returns at once; the caller must hold the lock that orders its changes,
    /// so the slot never goes back to an older state.
    pub fn save_later(self: &Arc<Self>, state: SessionStateFile) {
        let mut slot = self.lock();
        slot.pending = Some(state);
        if slot.writing {
            return;
        }
        slot.writing = true;
        drop(slot);
        let writer = self.clone();
        let spawned = std::thread::Builder::new().name("kiwi-state".into()).spawn(move || writer.drain());
        if spawned.is_err() {
            // No thread to be had: write here rather than not at all.
            self.drain();
        }
    }

    /// Queues `state` and waits until it (or a newer state) is on disk.
    pub fn save(self: &Arc<Self>, state: SessionStateFile) {
        self.save_later(state);
        self.flush();
    }

    /// Waits until every queued state is on disk.
    pub fn flush(&self) {
        let mut slot = self.lock();
        while slot.writing || slot.pending.is_some() {
            slot = self.idle.wait(slot).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Writes until the slot is empty, then says so to whoever waits.
    fn drain(&self) {
        loop {
            let mut next = {
                let mut slot = self.lock();
                match slot.pending.take() {
                    Some(state) => state,
                    None => {
                        slot.writing = false;
                        self.idle.notify_all();
                        return;
                    }
                }
            };
            if let Err(e) = file::save_keeping_web_members(&self.dir, &mut next) {
                tracing::warn!("cannot save {}: {e}", file::state_path(&self.dir).display());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{TodoItem, TodoStatus};

    fn with_todos(n: usize) -> SessionStateFile {
        SessionStateFile {
            todos: (0..n).map(|i| TodoItem { title: format!("t{i}"), status: TodoStatus::Pending }).collect(),
            ..SessionStateFile::default()
        }
    }

    #[test]
    fn the_newest_state_is_the_one_on_disk_after_a_flush() {
        let dir = tempfile::tempdir().unwrap();
        let writer = StateWriter::new(dir.path().to_path_buf());
        for n in 1..=50 {
            writer.save_later(with_todos(n));
        }
        writer.flush();
        assert_eq!(file::load(dir.path()).todos.len(), 50);
    }

    #[test]
    fn save_returns_with_its_state_on_disk() {
        let dir = tempfile::tempdir().unwrap();
        let writer = StateWriter::new(dir.path().to_path_buf());
        writer.save_later(with_todos(3));
        writer.save(with_todos(7));
        assert_eq!(file::load(dir.path()).todos.len(), 7);
        // Nothing left behind but state.json (no temp files).
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names, ["state.json"]);
    }

    #[test]
    fn a_failed_write_does_not_wedge_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        let writer = StateWriter::new(dir.path().join("gone"));
        writer.save(with_todos(1));
        writer.flush();
    }
}
