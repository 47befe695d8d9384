//! Attaching a wire client to a session another kiwi process holds (`docs/host.md`): instead
//! of failing on the session lock, `kiwi --wire -S/-r/-C` connects to the holder's
//! `live.sock` and relays: the client's lines go to the host, where the one wire handler serves
//! them as this connection's (`wire::host`); the host's frames come back, the history before
//! `history_complete` left out (a wire client asks for it with `replay`, as over stdio).
//!
//! Invariants: this process writes nothing to the session folder (one writer: the host); the
//! client's frames pass unchanged in both directions after the history, so ids stay the
//! client's own (the host keeps each connection's ids apart).

use std::io::{BufRead as _, BufReader, BufWriter, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use crate::session::store::{Metadata, SessionChoice, lock_folder, sessions_dir};

/// How long an opener whose host cannot be reached waits for the lock.
pub const LOCK_WAIT: Duration = Duration::from_secs(2);

/// The id and folder of the stored session `choice` names when another process holds its
/// lock; `None` for a new session, an unknown one, or one nobody holds. Reads only.
pub fn held_elsewhere(share: &Path, work_dir: &Path, choice: &SessionChoice) -> Option<(String, PathBuf)> {
    let id = match choice {
        SessionChoice::Id(id) => id.clone(),
        SessionChoice::Continue => Metadata::load(share).entry(&work_dir.to_string_lossy())?.last_session_id.clone()?,
        SessionChoice::New | SessionChoice::Hosted(_) => return None,
    };
    crate::session::id::check_session_id(&id).ok()?;
    let dir = sessions_dir(share, work_dir).join(&id);
    if !dir.join("context.jsonl").is_file() {
        return None;
    }
    // Taken and dropped at once: only whether someone else holds it matters here.
    matches!(lock_folder(&dir), Ok(None)).then_some((id, dir))
}

/// How long the host may take to send its first frame (a host that refuses the peer closes
/// the connection without one).
const FIRST_FRAME: Duration = Duration::from_secs(2);

/// Connects to the host of the session in `dir` and waits for its first frame: a peer the host
/// refuses is closed without a byte, and counts as a host that cannot be reached.
pub fn connect(dir: &Path) -> std::io::Result<BufReader<UnixStream>> {
    let stream = UnixStream::connect(super::host::Address::of(dir)?.path())?;
    stream.set_read_timeout(Some(FIRST_FRAME))?;
    let mut reader = BufReader::new(stream);
    if reader.fill_buf()?.is_empty() {
        return Err(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "the host closed the connection"));
    }
    reader.get_ref().set_read_timeout(None)?;
    Ok(reader)
}

/// Waits up to [`LOCK_WAIT`] for the session's lock to be free (its host gone); whether it is.
pub fn wait_for_lock(dir: &Path) -> bool {
    let deadline = Instant::now() + LOCK_WAIT;
    loop {
        if !matches!(lock_folder(dir), Ok(None)) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Relays `input` to the host and the host's frames (after the history) to `output` until the
/// host's stream ends; `Err` when the connection cannot be shared by the two directions.
pub fn relay<R, W>(mut from_host: BufReader<UnixStream>, mut input: R, output: W) -> std::io::Result<ExitCode>
where
    R: Read + Send + 'static,
    W: Write,
{
    let mut to_host = from_host.get_ref().try_clone()?;
    std::thread::spawn(move || {
        if let Err(e) = std::io::copy(&mut input, &mut to_host) {
            tracing::info!("relaying the client's input stopped: {e}");
        }
        // The client left: the host detaches this connection and ends its stream.
        let _ = to_host.shutdown(std::net::Shutdown::Write);
    });
    let mut out = BufWriter::new(output);
    let mut line = Vec::new();
    let mut in_history = true;
    loop {
        line.clear();
        match from_host.read_until(b'\n', &mut line) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                tracing::info!("the session's host stream failed: {e}");
                break;
            }
        }
        if in_history {
            in_history = !is_history_complete(&line);
            continue;
        }
        if out.write_all(&line).is_err() {
            break;
        }
        if from_host.buffer().is_empty() && out.flush().is_err() {
            break;
        }
    }
    let _ = out.flush();
    tracing::info!("the session's host ended the stream");
    Ok(ExitCode::SUCCESS)
}

/// Whether a frame is the host's `history_complete`.
fn is_history_complete(line: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Head<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    serde_json::from_slice::<Head>(line).is_ok_and(|h| h.method.as_deref() == Some("history_complete"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_marker_ends_the_history() {
        assert!(is_history_complete(br#"{"jsonrpc":"2.0","method":"history_complete","id":"x"}"#));
        assert!(!is_history_complete(br#"{"jsonrpc":"2.0","method":"event","params":{}}"#));
        assert!(!is_history_complete(b"not json"));
    }
}
