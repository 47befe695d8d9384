//! `session_status`, the session socket's status frame (`docs/web.md` §3.1): its vocabulary
//! (stopped, idle, busy, restarting, error, with a strictly increasing `seq`) and the
//! [`StatusBoard`] a host sends it through on `live.sock` (`docs/host.md`): the current status
//! to every connection right after `history_complete`, then each change.
//!
//! Invariants: a connection joins the board and gets the current frame under the board's lock,
//! so it sees each later change exactly once and never an older status after a newer one.

use std::sync::{Arc, Mutex, MutexGuard, Weak};

use serde::Serialize;

use crate::rpc::Outbound;
use crate::rpc::queue::Outgoing;

/// `session_status.state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Stopped,
    Idle,
    Busy,
    Restarting,
    Error,
}

/// The SessionStatus object (`docs/web.md` §3.1), members in the reference's order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionStatus {
    pub session_id: String,
    pub state: State,
    pub seq: u64,
    pub worker_id: Option<String>,
    pub reason: Option<String>,
    pub detail: Option<String>,
    pub updated_at: String,
}

impl SessionStatus {
    /// The status of a session nothing runs for (`stopped`, seq 0), as new sessions report it.
    pub fn stopped(session_id: &str) -> Self {
        Self {
            session_id: session_id.to_string(),
            state: State::Stopped,
            seq: 0,
            worker_id: None,
            reason: None,
            detail: None,
            updated_at: timestamp(chrono::Utc::now()),
        }
    }

    /// `{"jsonrpc":"2.0","method":"session_status","params":<status>}`.
    pub fn frame(&self) -> String {
        let line = Outbound::notification_frame("session_status", self).unwrap_or_default();
        String::from_utf8_lossy(line.strip_suffix(b"\n").unwrap_or(&line)).into_owned()
    }

    /// The next status: `state` with `reason`, `seq` one more, stamped now.
    pub fn next(&self, state: State, reason: &str, detail: Option<String>) -> Self {
        Self {
            state,
            seq: self.seq + 1,
            reason: Some(reason.to_string()),
            detail,
            updated_at: timestamp(chrono::Utc::now()),
            ..self.clone()
        }
    }
}

/// RFC 3339 in UTC with `Z`, microseconds only when there are any
/// (`2026-11-27T02:18:22.182242Z`, `2023-11-14T22:13:20Z`).
pub fn timestamp(at: chrono::DateTime<chrono::Utc>) -> String {
    use chrono::Timelike as _;
    if at.nanosecond() / 1000 == 0 {
        at.format("%Y-%m-%dT%H:%M:%SZ").to_string()
    } else {
        at.format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string()
    }
}

/// The status a host publishes to its `live.sock` connections. Cheap to share (`Arc`).
#[derive(Default)]
pub struct StatusBoard {
    inner: Mutex<Board>,
}

#[derive(Default)]
struct Board {
    /// The last frame published.
    current: Option<String>,
    connections: Vec<Weak<Outgoing>>,
}

impl StatusBoard {
    fn lock(&self) -> MutexGuard<'_, Board> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new status frame: kept as the current one and queued to every connection.
    pub fn publish(&self, frame: String) {
        let mut board = self.lock();
        board.connections.retain(|c| c.upgrade().is_some_and(|out| out.push(frame.clone())));
        board.current = Some(frame);
    }

    /// A connection that wants the status: the current frame is queued to it now (behind what
    /// it holds already), every later one as it is published.
    pub fn join(&self, out: &Arc<Outgoing>) {
        let mut board = self.lock();
        if let Some(frame) = &board.current {
            out.push(frame.clone());
        }
        board.connections.push(Arc::downgrade(out));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::queue::Frames;

    #[test]
    fn timestamps() {
        use chrono::TimeZone as _;
        let whole = chrono::Utc.timestamp_opt(1_700_000_000, 0).unwrap();
        assert_eq!(timestamp(whole), "2023-11-14T22:13:20Z");
        let micros = chrono::Utc.timestamp_opt(1_700_000_000, 182_242_000).unwrap();
        assert_eq!(timestamp(micros), "2023-11-14T22:13:20.182242Z");
    }

    #[test]
    fn status_frames_keep_the_reference_member_order() {
        let status = SessionStatus { updated_at: "t".into(), ..SessionStatus::stopped("s") };
        assert_eq!(
            status.frame(),
            r#"{"jsonrpc":"2.0","method":"session_status","params":{"session_id":"s","state":"stopped","seq":0,"worker_id":null,"reason":null,"detail":null,"updated_at":"t"}}"#
        );
        let next = status.next(State::Idle, "start", None);
        assert_eq!((next.state, next.seq, next.reason.as_deref()), (State::Idle, 1, Some("start")));
    }

    fn drained(frames: &mut Frames) -> Vec<String> {
        std::iter::from_fn(|| frames.try_recv()).collect()
    }

    #[test]
    fn a_connection_gets_the_current_status_then_each_change() {
        let board = StatusBoard::default();
        board.publish("one".into());
        let (out, mut frames) = Outgoing::new(16, 1 << 16);
        let out = Arc::new(out);
        board.join(&out);
        board.publish("two".into());
        assert_eq!(drained(&mut frames), ["one", "two"]);
        drop(out);
        board.publish("three".into());
        assert!(board.lock().connections.is_empty());
    }
}
