//! `replay` (`docs/protocol-1.10.md` §2.6): the session's `wire.jsonl` streamed back to the client in the
//! current schema, events as `event` notifications and requests as `request` messages whose id is
//! the payload's id.
//!
//! Invariants: replayed requests are informational (never registered as pending, answers are
//! ignored as unknown ids); the job yields between records and checks its cancel token, so a
//! `cancel` stops it with the counts so far; a slow client slows it down through the writer's
//! bounded queue, never buffering the file in memory.

use std::path::Path;

use tokio_util::sync::CancellationToken;

use super::frames::{event_frame, request_frame, request_id};
use super::params::{ReplayResult, ReplayStatus};
use crate::protocol::WireMessage;
use crate::rpc::Outbound;
use crate::session::wire_read;

/// Records sent between two yields to the dispatcher (which may be waiting to handle `cancel`).
const YIELD_EVERY: u64 = 64;

/// Streams the file at `path`; `Err` with a log-worthy reason on an unexpected failure.
pub async fn replay(path: &Path, outbound: &Outbound, cancel: &CancellationToken) -> Result<ReplayResult, String> {
    let mut result = ReplayResult { status: ReplayStatus::Finished, events: 0, requests: 0 };
    let Some(records) = wire_read::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))? else {
        return Ok(result);
    };
    for (n, record) in records.enumerate() {
        if (n as u64) % YIELD_EVERY == YIELD_EVERY - 1 {
            tokio::task::yield_now().await;
        }
        if cancel.is_cancelled() {
            result.status = ReplayStatus::Cancelled;
            return Ok(result);
        }
        let record = record.map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let frame = match &record {
            WireMessage::Event(event) => {
                result.events += 1;
                event_frame(event)
            }
            WireMessage::Request(request) => match request_frame(&request_id(request), request) {
                Some(frame) => {
                    result.requests += 1;
                    frame
                }
                None => continue,
            },
        };
        if !outbound.send_raw(frame).await {
            return Err("the output closed".into());
        }
    }
    if cancel.is_cancelled() {
        result.status = ReplayStatus::Cancelled;
    }
    Ok(result)
}
