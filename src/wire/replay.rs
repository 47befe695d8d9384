//! A session's history as the wire sends it, over the one history replay (`live::history`):
//!
//! - `replay` (`docs/protocol-1.10.md` §2.6): every record in the current schema, events as
//!   `event` notifications and requests as `request` messages whose id is the payload's id;
//! - a joining browser socket's history (`docs/web.md` §4.3.1): every record's message as it was
//!   stored (not upgraded, its bytes spliced in, never parsed into a tree).
//!
//! Invariants: replayed requests are informational (never registered as pending, answers are
//! ignored as unknown ids); `replay` checks its cancel token between frames, so a `cancel` stops
//! it with the counts so far; frames are made on the reading thread and sent paced (a slow client
//! slows the reading down, never buffering the file in memory, never closed as too slow).

use tokio_util::sync::CancellationToken;

use super::frames::{event_frame, request_frame, request_id};
use super::params::{ReplayResult, ReplayStatus};
use crate::live::History;
use crate::protocol::WireMessage;
use crate::rpc::Outbound;
use crate::session::wire_read;

/// Frames made per batch of the reading thread.
pub const BATCH: usize = 512;

/// One replayed frame: whether it is a request, and its bytes.
type Replayed = (bool, Vec<u8>);

/// Streams `history` to `outbound`; `Err` with a log-worthy reason on an unexpected failure.
pub async fn replay(history: History, outbound: &Outbound, cancel: &CancellationToken) -> Result<ReplayResult, String> {
    let mut result = ReplayResult { status: ReplayStatus::Finished, events: 0, requests: 0 };
    let mut batches = history.stream(BATCH, |line| -> Option<Replayed> {
        match wire_read::parse(line)? {
            WireMessage::Event(event) => Some((false, event_frame(&event))),
            WireMessage::Request(request) => request_frame(&request_id(&request), &request).map(|f| (true, f)),
        }
    });
    while let Some(batch) = batches.next().await {
        for (request, frame) in batch? {
            if cancel.is_cancelled() {
                result.status = ReplayStatus::Cancelled;
                return Ok(result);
            }
            if request {
                result.requests += 1;
            } else {
                result.events += 1;
            }
            if !outbound.send_paced(frame).await {
                return Err("the output closed".into());
            }
        }
        // The dispatcher (which may be waiting to handle `cancel`) gets its turn.
        tokio::task::yield_now().await;
    }
    if cancel.is_cancelled() {
        result.status = ReplayStatus::Cancelled;
    }
    Ok(result)
}

/// The `type`s a `wire.jsonl` record's message may have (`docs/web.md` §4.3.1): the events
/// (with the legacy `ApprovalRequestResolved`) and the requests of the wire protocol.
const EVENT_TYPES: &[&str] = &[
    "TurnBegin",
    "TurnEnd",
    "StepBegin",
    "StepInterrupted",
    "StepRetry",
    "SteerInput",
    "CompactionBegin",
    "CompactionEnd",
    "StatusUpdate",
    "ContentPart",
    "ToolCall",
    "ToolCallPart",
    "ToolResult",
    "ApprovalResponse",
    "ApprovalRequestResolved",
    "PlanDisplay",
    "HookTriggered",
    "HookResolved",
    "MCPLoadingBegin",
    "MCPLoadingEnd",
    "Notification",
    "SubagentEvent",
    "BtwBegin",
    "BtwEnd",
];
const REQUEST_TYPES: &[&str] = &["ApprovalRequest", "ToolCallRequest", "QuestionRequest", "HookRequest"];

/// A `wire.jsonl` record, its message kept as the bytes it was stored as.
#[derive(serde::Deserialize)]
struct StoredRecord<'a> {
    #[serde(borrow)]
    message: &'a serde_json::value::RawValue,
}

/// What the replay needs of a stored message: its type, and a request's payload id.
#[derive(serde::Deserialize)]
struct StoredMessage<'a> {
    #[serde(rename = "type", borrow)]
    kind: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    payload: Option<&'a serde_json::value::RawValue>,
}

#[derive(serde::Deserialize)]
struct StoredRequest<'a> {
    #[serde(borrow)]
    id: std::borrow::Cow<'a, str>,
}

/// One `wire.jsonl` record as the socket's replay sends it (`docs/web.md` §4.3.1): the stored
/// message as it is (not upgraded, its bytes spliced in, never parsed into a tree) as an
/// `event`, or as a `request` with its payload's id; `None` for the header, blank lines and
/// records whose message has no wire message `type`.
pub fn history_frame(line: &str) -> Option<String> {
    let line = line.trim();
    if line.is_empty() {
        return None;
    }
    let record: StoredRecord = serde_json::from_str(line).ok()?;
    let raw = record.message.get();
    // kiwi writes the `type` first, so an event's message needs no second parse (the hot path
    // of a replay); a message in another order, and every request, is parsed for it.
    let leading = leading_type(raw);
    let message = match leading {
        Some(kind) if EVENT_TYPES.contains(&kind) => None,
        _ => Some(serde_json::from_str::<StoredMessage>(raw).ok()?),
    };
    let mut frame = String::with_capacity(raw.len() + 64);
    match message {
        None => frame.push_str(EVENT_HEAD),
        Some(message) if EVENT_TYPES.contains(&message.kind.as_ref()) => frame.push_str(EVENT_HEAD),
        Some(message) if REQUEST_TYPES.contains(&message.kind.as_ref()) => {
            let request: StoredRequest = serde_json::from_str(message.payload?.get()).ok()?;
            frame.push_str(r#"{"jsonrpc":"2.0","method":"request","id":"#);
            frame.push_str(&serde_json::to_string(&request.id).ok()?);
            frame.push_str(r#","params":"#);
        }
        Some(_) => return None,
    }
    frame.push_str(raw);
    frame.push('}');
    Some(frame)
}

const EVENT_HEAD: &str = r#"{"jsonrpc":"2.0","method":"event","params":"#;

/// The `type` of a message that is a JSON object whose first member is `"type"` with a string
/// value without escapes; `None` otherwise. `raw` is a JSON value already checked by the parser,
/// so only JSON whitespace can sit between its tokens, and a first member is a top-level one.
fn leading_type(raw: &str) -> Option<&str> {
    let rest = raw.strip_prefix('{')?.trim_start();
    let rest = rest.strip_prefix(r#""type""#)?.trim_start();
    let rest = rest.strip_prefix(':')?.trim_start();
    let rest = rest.strip_prefix('"')?;
    let end = rest.find(['"', '\\'])?;
    (rest.as_bytes()[end] == b'"').then(|| &rest[..end])
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn history_records_are_sent_as_stored() {
        let header = r#"{"type":"metadata","protocol_version":"1.10"}"#;
        assert_eq!(history_frame(header), None);
        assert_eq!(history_frame("  \n"), None);
        assert_eq!(history_frame("not json"), None);
        assert_eq!(history_frame(r#"{"timestamp":1,"message":{"type":"Nope","payload":{}}}"#), None);
        let event =
            r#"{"timestamp":1.5,"message":{"type":"ContentPart","payload":{"type":"text","text":"Hello web"}}}"#;
        assert_eq!(
            history_frame(event).unwrap(),
            r#"{"jsonrpc":"2.0","method":"event","params":{"type":"ContentPart","payload":{"type":"text","text":"Hello web"}}}"#
        );
        let question = r#"{"timestamp":2,"message":{"type":"QuestionRequest","payload":{"id":"q\"1","tool_call_id":"t","questions":[]}}}"#;
        assert_eq!(
            history_frame(question).unwrap(),
            r#"{"jsonrpc":"2.0","method":"request","id":"q\"1","params":{"type":"QuestionRequest","payload":{"id":"q\"1","tool_call_id":"t","questions":[]}}}"#
        );
        // The stored bytes go out as they are, spaces and member order included.
        let spaced =
            r#"{"timestamp": 1.5, "message": {"payload": {"type": "text", "text": "a\u00e9"}, "type": "ContentPart"}}"#;
        let frame = history_frame(spaced).unwrap();
        assert_eq!(
            frame,
            r#"{"jsonrpc":"2.0","method":"event","params":{"payload": {"type": "text", "text": "a\u00e9"}, "type": "ContentPart"}}"#
        );
        let value: Value = serde_json::from_str(&frame).unwrap();
        assert_eq!(value["params"]["payload"]["text"], "a\u{e9}");
        // A request without an id, a message that is not an object, a record without one.
        assert_eq!(history_frame(r#"{"message":{"type":"ApprovalRequest","payload":{}}}"#), None);
        assert_eq!(history_frame(r#"{"message":"ContentPart"}"#), None);
        assert_eq!(history_frame(r#"{"timestamp":1}"#), None);
        assert_eq!(history_frame(r#"{"message":{"type":"TurnEnd","payload":{}}"#), None, "cut short");
        // The type first (as kiwi writes it) or not, spaced or not, the frame is the same splice.
        let first = r#"{"timestamp": 1, "message": {"type" : "TurnEnd", "payload": {}}}"#;
        assert_eq!(
            history_frame(first).unwrap(),
            r#"{"jsonrpc":"2.0","method":"event","params":{"type" : "TurnEnd", "payload": {}}}"#
        );
        // A type that only looks like one at the start, an escaped type, a payload's `type`.
        assert_eq!(history_frame(r#"{"message":{"type":"Nope","payload":{"type":"TurnEnd"}}}"#), None);
        assert_eq!(history_frame(r#"{"message":{"payload":{"type":"TurnEnd"},"type":"Nope"}}"#), None);
        assert_eq!(
            history_frame(r#"{"message":{"type":"Turn\u0045nd","payload":{}}}"#).unwrap(),
            r#"{"jsonrpc":"2.0","method":"event","params":{"type":"Turn\u0045nd","payload":{}}}"#
        );
        assert_eq!(leading_type(r#"{"type":"TurnEnd"}"#), Some("TurnEnd"));
        assert_eq!(leading_type(r#"{ "type" :"A\"B"}"#), None);
        assert_eq!(leading_type(r#"{"typed":"TurnEnd"}"#), None);
        assert_eq!(leading_type(r#"["type"]"#), None);
    }

    /// Every message type of the protocol's schema is known to the replay, as an event or a
    /// request, and nothing else is.
    #[test]
    fn the_replay_knows_every_message_type() {
        fn names(schema: &Value, out: &mut Vec<String>) {
            for key in ["oneOf", "anyOf"] {
                for variant in schema[key].as_array().into_iter().flatten() {
                    let kind = &variant["properties"]["type"];
                    if let Some(name) = kind["const"].as_str() {
                        out.push(name.to_string());
                    }
                    for name in kind["enum"].as_array().into_iter().flatten() {
                        out.push(name.as_str().unwrap().to_string());
                    }
                }
            }
        }
        let mut events = Vec::new();
        names(&serde_json::to_value(schemars::schema_for!(crate::protocol::Event)).unwrap(), &mut events);
        let mut requests = Vec::new();
        names(&serde_json::to_value(schemars::schema_for!(crate::protocol::Request)).unwrap(), &mut requests);
        assert!(events.len() > 10 && requests.len() == 4, "{events:?} {requests:?}");
        let known: Vec<&str> = EVENT_TYPES.iter().copied().filter(|n| *n != "ApprovalRequestResolved").collect();
        events.sort();
        let mut known: Vec<String> = known.iter().map(|n| n.to_string()).collect();
        known.sort();
        assert_eq!(events, known);
        requests.sort();
        let mut known_requests: Vec<String> = REQUEST_TYPES.iter().map(|n| n.to_string()).collect();
        known_requests.sort();
        assert_eq!(requests, known_requests);
    }
}
