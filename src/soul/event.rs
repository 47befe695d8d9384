//! The soul's one outbound vocabulary and the sink it writes it into.
//!
//! Front ends (wire, ACP, print) read `SoulEvent`s and project them onto their protocol. The
//! soul never sees JSON-RPC: a request to the client is a `Request` plus a oneshot for the answer.

use tokio::sync::{mpsc, oneshot};

use crate::protocol::{ApprovalDecision, Event, Request, ToolReturnValue};

/// How many soul events may wait for the front end before the turn is slowed down.
pub const SOUL_EVENT_CAPACITY: usize = 256;

/// The client's answer to a request, already interpreted by the front end.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientAnswer {
    Approval(ApprovalDecision),
    ToolResult(ToolReturnValue),
}

#[derive(Debug)]
pub enum SoulEvent {
    Event(Event),
    /// A request the client must answer. Dropping `reply` unanswered means the client is gone.
    Request {
        request: Request,
        reply: oneshot::Sender<ClientAnswer>,
    },
    /// Answered once every earlier item has been handed to the writer.
    Flush(oneshot::Sender<()>),
    /// A raw non-JSON line for stdout (the scripted-echo trace switch), kept in event order.
    RawLine(String),
}

/// Where a soul sends its events. Cheap to clone; a slow front end applies backpressure.
#[derive(Clone, Debug)]
pub struct EventSink {
    tx: mpsc::Sender<SoulEvent>,
}

impl EventSink {
    pub fn channel() -> (Self, mpsc::Receiver<SoulEvent>) {
        let (tx, rx) = mpsc::channel(SOUL_EVENT_CAPACITY);
        (Self { tx }, rx)
    }

    /// Sends an event; if the front end is gone the event is dropped (we are shutting down).
    pub async fn emit(&self, event: Event) {
        let _ = self.tx.send(SoulEvent::Event(event)).await;
    }

    /// Sends a request and returns the receiver of its answer.
    pub async fn request(&self, request: Request) -> oneshot::Receiver<ClientAnswer> {
        let (reply, rx) = oneshot::channel();
        let _ = self.tx.send(SoulEvent::Request { request, reply }).await;
        rx
    }

    /// Queues a raw line without waiting; dropped when the queue is full (it is diagnostics).
    pub fn try_raw_line(&self, line: String) {
        let _ = self.tx.try_send(SoulEvent::RawLine(line));
    }

    /// Waits until everything emitted so far has reached the writer.
    pub async fn flush(&self) {
        let (done, rx) = oneshot::channel();
        if self.tx.send(SoulEvent::Flush(done)).await.is_ok() {
            let _ = rx.await;
        }
    }
}
