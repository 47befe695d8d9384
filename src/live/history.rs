//! The one history replay: a session's `wire.jsonl` streamed from disk to a client, for every
//! front end that sends history (a joining browser socket, the wire `replay`, ACP
//! `session/load`). Each front end only says what one record becomes (a frame as stored, a frame
//! in the current schema, an event to map).
//!
//! Invariants: the file is read on a blocking thread in batches, and at most [`AHEAD`] batches
//! wait for the client: memory stays flat for any history and a slow client slows the reading
//! down (never the reverse: no queue the stream could overflow); a joining client's history ends
//! at its seam (everything later reaches it live, each message exactly once); a line that is not
//! UTF-8 is skipped like any unreadable record; the reading stops as soon as the client stops
//! taking batches.

use std::io::{BufRead as _, Read as _};
use std::path::PathBuf;

use tokio::sync::mpsc;

/// Batches read ahead of the client.
const AHEAD: usize = 2;
/// The file is read in chunks of this size.
const READ_BUFFER: usize = 256 * 1024;

/// A history to stream: `wire.jsonl` up to `len` bytes.
#[derive(Debug, Clone)]
pub struct History {
    pub path: PathBuf,
    pub len: u64,
}

/// The batches of a streamed history; `Err` (once, last) when the file could not be read.
pub struct Batches<T> {
    rx: mpsc::Receiver<Result<Vec<T>, String>>,
}

impl<T> Batches<T> {
    /// The next batch; `None` at the end.
    pub async fn next(&mut self) -> Option<Result<Vec<T>, String>> {
        self.rx.recv().await
    }
}

impl History {
    /// The whole file as it is when the stream starts (`replay`, `session/load`).
    pub fn whole(path: PathBuf) -> Self {
        Self { path, len: u64::MAX }
    }

    /// Streams the records: each line (without its end) becomes an item through `item`, on a
    /// blocking thread, in batches of up to `batch` items. A missing file is an empty history.
    pub fn stream<T, F>(self, batch: usize, mut item: F) -> Batches<T>
    where
        T: Send + 'static,
        F: FnMut(&str) -> Option<T> + Send + 'static,
    {
        let (tx, rx) = mpsc::channel(AHEAD);
        tokio::task::spawn_blocking(move || {
            let file = match std::fs::File::open(&self.path) {
                Ok(file) => file,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
                Err(e) => {
                    let _ = tx.blocking_send(Err(format!("cannot open {}: {e}", self.path.display())));
                    return;
                }
            };
            let mut lines = std::io::BufReader::with_capacity(READ_BUFFER, file.take(self.len));
            let mut items = Vec::with_capacity(batch);
            let mut line = Vec::with_capacity(4096);
            loop {
                line.clear();
                match lines.read_until(b'\n', &mut line) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) => {
                        let _ = tx.blocking_send(Err(format!("cannot read {}: {e}", self.path.display())));
                        return;
                    }
                }
                let Ok(text) = std::str::from_utf8(&line) else { continue };
                if let Some(one) = item(text) {
                    items.push(one);
                    if items.len() == batch
                        && tx.blocking_send(Ok(std::mem::replace(&mut items, Vec::with_capacity(batch)))).is_err()
                    {
                        return;
                    }
                }
            }
            if !items.is_empty() {
                let _ = tx.blocking_send(Ok(items));
            }
        });
        Batches { rx }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn records_up_to_the_seam_in_batches() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wire.jsonl");
        let mut text = String::new();
        for n in 0..10 {
            text.push_str(&format!("{n}\n"));
        }
        text.push_str("\u{0}bad\n");
        std::fs::write(&path, &text).unwrap();
        let mut bytes = text.into_bytes();
        bytes.extend_from_slice(b"\xff\xfe\n10\n");
        std::fs::write(&path, &bytes).unwrap();
        let numbers = |history: History| async move {
            let mut batches = history.stream(3, |line| line.trim().parse::<u32>().ok());
            let mut all = Vec::new();
            while let Some(batch) = batches.next().await {
                let batch = batch.unwrap();
                assert!(batch.len() <= 3);
                all.extend(batch);
            }
            all
        };
        assert_eq!(numbers(History::whole(path.clone())).await, (0..=10).collect::<Vec<_>>(), "bad lines skipped");
        assert_eq!(numbers(History { path: path.clone(), len: 10 }).await, [0, 1, 2, 3, 4], "up to the seam");
        assert!(numbers(History::whole(dir.path().join("none"))).await.is_empty());
    }

    #[tokio::test]
    async fn a_client_that_stops_taking_stops_the_reading() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wire.jsonl");
        std::fs::write(&path, "x\n".repeat(10_000)).unwrap();
        let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = seen.clone();
        let mut batches =
            History::whole(path).stream(10, move |_| Some(counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
        assert!(batches.next().await.is_some());
        drop(batches);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        // At most the batches read ahead and the one being filled were read.
        assert!(seen.load(std::sync::atomic::Ordering::Relaxed) <= 10 * (AHEAD + 3));
    }
}
