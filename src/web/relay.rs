//! A browser socket on a session another kiwi process hosts (`docs/web.md` §3.6,
//! `docs/host.md`): instead of opening the session (its lock is held elsewhere), the socket is
//! relayed to the host's `<session dir>/live.sock`, whose frames are the session WebSocket
//! protocol already (history, `history_complete`, live frames, the requests still waiting,
//! `session_status`). The browser's frames go to the host as lines; the host's lines come back
//! as text frames, unchanged.
//!
//! Invariants: this server writes nothing to the session folder while relaying (one writer: the
//! host); when the host's stream ends the browser hears `session_status` `stopped` (its `seq`
//! one past the last the host sent) and the socket closes with 1001, so the browser's next
//! socket finds the lock free and the session is opened here; nothing here waits on another
//! socket.

use std::path::Path;
use std::time::{Duration, Instant};

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket};
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt as _, StreamExt as _};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, Lines};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio_util::sync::CancellationToken;

use super::queue::{CLOSE_SESSION_GONE, CLOSE_SHUTDOWN, SESSION_GONE_REASON};
use crate::session::store::lock_folder;
use crate::wire::host::Address;
use crate::wire::status::{SessionStatus, State};

/// How long the host may take to send its first frame (a host that refuses the peer closes the
/// connection without one).
const FIRST_FRAME: Duration = Duration::from_secs(2);
/// How long one frame to the browser may take; a browser that stops reading is dropped then.
const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
/// A browser is pinged this often; one that sent nothing (no pong) since the last ping is
/// dropped, as on a socket this server serves itself (`docs/web.md` §3.5).
const PING_INTERVAL: Duration = Duration::from_secs(30);

/// A connection to a session's host, its first frame read.
pub struct Host {
    first: String,
    lines: Lines<BufReader<OwnedReadHalf>>,
    to_host: OwnedWriteHalf,
}

/// Connects to the host of the session in `dir` and reads its first frame; `Err` when the
/// socket cannot be reached or the host closes the connection without a frame (a stale file,
/// a refused peer).
pub async fn connect(dir: &Path) -> std::io::Result<Host> {
    let stream = UnixStream::connect(Address::of(dir)?.path()).await?;
    let (read, to_host) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    match tokio::time::timeout(FIRST_FRAME, lines.next_line()).await {
        Ok(Ok(Some(first))) => Ok(Host { first, lines, to_host }),
        Ok(Ok(None)) => {
            Err(std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "the host closed the connection"))
        }
        Ok(Err(e)) => Err(e),
        Err(_) => Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "the host sent nothing")),
    }
}

/// Waits up to `wire::attach::LOCK_WAIT` for the session's lock to be free (its host gone);
/// whether it is.
pub async fn wait_for_lock(dir: &Path) -> bool {
    let deadline = Instant::now() + crate::wire::attach::LOCK_WAIT;
    loop {
        if !matches!(lock_folder(dir), Ok(None)) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Relays between the browser and the host until either leaves or the server shuts down.
pub async fn run(
    host: Host,
    mut sink: SplitSink<WebSocket, Message>,
    mut stream: SplitStream<WebSocket>,
    session_id: &str,
    closing: CancellationToken,
) {
    let Host { first, mut lines, mut to_host } = host;
    let mut seq = 0;
    let mut next = Some(first);
    let mut ping = tokio::time::interval_at(tokio::time::Instant::now() + PING_INTERVAL, PING_INTERVAL);
    let mut answered = true;
    tracing::info!("a client joined; relaying to the process that hosts the session");
    loop {
        if let Some(frame) = next.take() {
            seq = status_seq(&frame).unwrap_or(seq);
            // Frames the host sent together (the history) go out with one flush.
            let more = !lines.get_ref().buffer().is_empty();
            let message = Message::Text(frame.into());
            let sent = async {
                sink.feed(message).await?;
                if more { Ok(()) } else { sink.flush().await }
            };
            if !matches!(tokio::time::timeout(WRITE_TIMEOUT, sent).await, Ok(Ok(()))) {
                break;
            }
        }
        tokio::select! {
            _ = ping.tick() => {
                if !std::mem::take(&mut answered) || !to_browser(&mut sink, Message::Ping(Default::default())).await {
                    tracing::info!("a WebSocket client stopped answering; closing it");
                    break;
                }
            }
            () = closing.cancelled() => {
                let close = CloseFrame { code: CLOSE_SHUTDOWN, reason: Utf8Bytes::from_static("Server shutting down") };
                let _ = to_browser(&mut sink, Message::Close(Some(close))).await;
                break;
            }
            line = lines.next_line() => match line {
                Ok(Some(line)) => next = Some(line),
                Ok(None) | Err(_) => {
                    host_gone(&mut sink, session_id, seq).await;
                    break;
                }
            },
            message = stream.next() => match message.inspect(|m| answered |= m.is_ok()) {
                Some(Ok(Message::Text(text))) => {
                    let mut line = one_line(text.as_str());
                    line.push('\n');
                    if to_host.write_all(line.as_bytes()).await.is_err() {
                        host_gone(&mut sink, session_id, seq).await;
                        break;
                    }
                }
                Some(Ok(Message::Binary(_))) => tracing::info!("ignoring a binary WebSocket frame"),
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                Some(Ok(Message::Close(_)) | Err(_)) | None => break,
            },
        }
    }
    // The host detaches this connection; the session goes on there.
    let _ = to_host.shutdown().await;
    tracing::info!("a client left");
}

async fn to_browser(sink: &mut SplitSink<WebSocket, Message>, message: Message) -> bool {
    matches!(tokio::time::timeout(WRITE_TIMEOUT, sink.send(message)).await, Ok(Ok(())))
}

/// The host's stream ended: the session is `stopped` here (`stop`), and the socket closes as
/// one whose session process exited.
async fn host_gone(sink: &mut SplitSink<WebSocket, Message>, session_id: &str, seq: u64) {
    tracing::info!("the process that hosted the session ended the stream");
    let status = SessionStatus { seq, ..SessionStatus::stopped(session_id) }.next(
        State::Stopped,
        "stop",
        Some("The process that hosted the session exited".into()),
    );
    if to_browser(sink, Message::Text(status.frame().into())).await {
        let close = CloseFrame { code: CLOSE_SESSION_GONE, reason: Utf8Bytes::from_static(SESSION_GONE_REASON) };
        let _ = to_browser(sink, Message::Close(Some(close))).await;
    }
}

/// The `seq` of a `session_status` frame.
fn status_seq(frame: &str) -> Option<u64> {
    if !frame.contains("\"session_status\"") {
        return None;
    }
    let value: serde_json::Value = serde_json::from_str(frame).ok()?;
    (value["method"] == "session_status").then(|| value["params"]["seq"].as_u64())?
}

/// A browser frame as one line for the host: JSON re-encoded on one line; anything else with
/// its line breaks made spaces (the host answers it as the malformed line it is, once).
fn one_line(text: &str) -> String {
    if !text.contains('\n') {
        return text.to_string();
    }
    match serde_json::from_str::<serde_json::Value>(text) {
        Ok(value) => value.to_string(),
        Err(_) => text.replace(['\r', '\n'], " "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_become_single_lines() {
        assert_eq!(one_line(r#"{"a": 1}"#), r#"{"a": 1}"#);
        assert_eq!(one_line("{\n \"a\": 1\n}"), r#"{"a":1}"#);
        assert_eq!(one_line("not\njson"), "not json");
    }

    #[test]
    fn the_seq_of_status_frames_only() {
        let status = SessionStatus { seq: 7, ..SessionStatus::stopped("s") };
        assert_eq!(status_seq(&status.frame()), Some(7));
        assert_eq!(status_seq(r#"{"jsonrpc":"2.0","method":"event","params":{"session_status":1}}"#), None);
        assert_eq!(status_seq("nope"), None);
    }
}
