//! The relay between a wire client and the host of its session (`docs/host.md`): the client's
//! messages go to the host, except `initialize`, which this process answers itself
//! ([`super::initialize`]) and passes on under an id of its own so that the host knows what the
//! connection negotiated (its answer is dropped). The host's frames come back, without the
//! history before `history_complete` (a wire client asks for it with `replay`, as over stdio)
//! and without `session_status` (not a wire 1.10 frame).
//!
//! Invariants: the client sees every frame of a wire server and nothing else; a line that is no
//! message is answered here as the stdio server answers it; the requests the host has not
//! answered and the turns it has begun and not ended are tracked, so that when the host goes
//! away the client can be given what it waits for ([`Relay::host_gone`]).

use serde::Deserialize;
use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::unix::OwnedWriteHalf;
use tokio_util::sync::CancellationToken;

use super::Target;
use super::initialize::answer;
use crate::builder::AgentSetup;
use crate::rpc::reader::Inbound;
use crate::rpc::{Incoming, Outbound, RequestId};
use crate::wire::methods::ClientRequest;
use crate::wire::params::{Empty, InitializeParams, PromptResult};

/// Why relaying stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The client closed its input (or its output): this process is done.
    ClientGone,
    /// The host's stream ended while the client is still there.
    HostGone,
}

/// A request of the client the host has not answered yet.
struct Outstanding {
    id: RequestId,
    method: String,
    /// As it went to the host, to send it again to a new one.
    frame: Vec<u8>,
}

/// What the relay knows about its client, across hosts.
pub struct Relay<'a> {
    setup: &'a AgentSetup,
    target: &'a Target,
    version: String,
    /// The `params` of the client's last `initialize`, passed on to every new host.
    initialize: Option<Option<Value>>,
    outstanding: Vec<Outstanding>,
    /// Turns the host began and did not end yet (a nested turn counts too).
    turns: u32,
    /// The id under which the client's `initialize` goes to the host.
    internal: RequestId,
    /// The client has sent a message (normally `initialize`): until then the host's frames wait.
    spoke: bool,
}

/// Host frames held for a client that has not sent its first message yet; past this many they
/// go out anyway (a client that never speaks still gets the stream).
const HOLD_FRAMES: usize = 1024;

impl<'a> Relay<'a> {
    pub fn new(setup: &'a AgentSetup, target: &'a Target, version: String) -> Self {
        let internal = RequestId::Str(format!("kiwi-attach-{}", uuid::Uuid::new_v4()));
        Self { setup, target, version, initialize: None, outstanding: Vec::new(), turns: 0, internal, spoke: false }
    }

    /// Relays between `lines` / `client` and the host on `host` (already past its first byte)
    /// until one side ends (`stop`: the client's output is gone, or a signal came). A new host is first told the client's last `initialize` and given
    /// the requests the old host never answered.
    pub async fn run(
        &mut self,
        host: std::io::BufReader<std::os::unix::net::UnixStream>,
        lines: &mut Inbound,
        client: &Outbound,
        stop: &CancellationToken,
    ) -> Ended {
        let ahead = host.buffer().to_vec();
        let stream = host.into_inner();
        let stream = match stream.set_nonblocking(true).and_then(|()| tokio::net::UnixStream::from_std(stream)) {
            Ok(stream) => stream,
            Err(e) => {
                tracing::warn!("cannot use the connection to the session's host: {e}");
                return Ended::HostGone;
            }
        };
        let (read, mut to_host) = stream.into_split();
        let mut from_host = tokio::io::BufReader::new(std::io::Cursor::new(ahead).chain(read));
        if let Some(params) = &self.initialize {
            send(&mut to_host, &request(&self.internal, "initialize", params.clone())).await;
        }
        for request in &self.outstanding {
            send(&mut to_host, &request.frame).await;
        }
        let mut client_open = true;
        let mut in_history = true;
        let mut line = Vec::new();
        // The requests still waiting in the host come right after the history; a client that
        // attached gets them after its `initialize` is answered (`docs/host.md`).
        let mut held = Vec::new();
        loop {
            tokio::select! {
                () = stop.cancelled() => return Ended::ClientGone,
                item = lines.recv(), if client_open => match item {
                    Some(item) => {
                        self.client_message(item, &mut to_host, client).await;
                        self.spoke = true;
                        self.release(&mut held, client).await;
                    }
                    None => {
                        // The client left: the host detaches this connection and ends its stream.
                        client_open = false;
                        let _ = to_host.shutdown().await;
                    }
                },
                // `read_until` keeps what it read when another branch wins; `line` is cleared
                // only once it holds a whole frame.
                read = from_host.read_until(b'\n', &mut line) => {
                    let ended = match read {
                        Ok(0) => true,
                        Err(e) => {
                            tracing::info!("the session's host stream failed: {e}");
                            true
                        }
                        Ok(_) => false,
                    };
                    if ended {
                        self.release(&mut held, client).await;
                        return if client_open { Ended::HostGone } else { Ended::ClientGone };
                    }
                    // A torn last frame of a killed host is not passed on.
                    if line.ends_with(b"\n") {
                        if in_history {
                            in_history = !is_history_complete(&line);
                        } else if !self.spoke && held.len() < HOLD_FRAMES {
                            held.push(std::mem::take(&mut line));
                        } else {
                            self.release(&mut held, client).await;
                            self.host_frame(&line, client).await;
                        }
                    }
                    line.clear();
                }
            }
        }
    }

    /// Passes on the host frames held for a client that had not spoken yet.
    async fn release(&mut self, held: &mut Vec<Vec<u8>>, client: &Outbound) {
        for line in std::mem::take(held) {
            self.host_frame(&line, client).await;
        }
    }

    async fn client_message(&mut self, item: Incoming, to_host: &mut OwnedWriteHalf, client: &Outbound) {
        let frame = match item {
            Incoming::Request { id, method, params } if method == "initialize" => {
                match ClientRequest::parse(&method, params.clone()) {
                    Ok(ClientRequest::Initialize(parsed)) => {
                        client.respond(&id, &answer(self.setup, self.target, parsed, &self.version)).await;
                        let frame = request(&self.internal, "initialize", params.clone());
                        self.initialize = Some(params);
                        frame
                    }
                    Ok(_) => return,
                    Err(error) => return client.error(Some(&id), &error).await,
                }
            }
            Incoming::Request { id, method, params } => {
                let frame = request(&id, &method, params);
                self.outstanding.push(Outstanding { id, method, frame: frame.clone() });
                frame
            }
            Incoming::Notification { method, params } => notification(&method, params),
            Incoming::Response { id, outcome } => response(&id, outcome),
            // What the stdio server answers for a line that is no message.
            Incoming::Reject { id, error } => return client.error(id.as_ref(), &error).await,
            Incoming::Ignore => return,
        };
        // A host that is gone is noticed on its stream; the requests are kept for the next one.
        send(to_host, &frame).await;
    }

    async fn host_frame(&mut self, line: &[u8], client: &Outbound) {
        match sort(line) {
            HostFrame::NotForWire => return,
            HostFrame::TurnBegin => self.turns += 1,
            HostFrame::TurnEnd => self.turns = self.turns.saturating_sub(1),
            HostFrame::Answer(id) if id == self.internal => return,
            HostFrame::Answer(id) => {
                if let Some(at) = self.outstanding.iter().position(|r| r.id == id) {
                    let answered = self.outstanding.remove(at);
                    if is_prompt(&answered.method) {
                        // Its turn is over, whatever nested turns left unbalanced.
                        self.turns = 0;
                    }
                }
            }
            HostFrame::Other => {}
        }
        client.send_raw(line.to_vec()).await;
    }

    /// The host went away: the client gets what it waited for. A turn that was running gets its
    /// `TurnEnd` (a killed host sent none), a `prompt` in flight the cancelled turn's answer,
    /// a `cancel` of that turn `{}`. The other requests go to the next host.
    pub async fn host_gone(&mut self, client: &Outbound) {
        let running = self.turns > 0 || self.outstanding.iter().any(|r| is_prompt(&r.method));
        if self.turns > 0 {
            self.turns = 0;
            if let Some(frame) = Outbound::notification_frame("event", &json!({"type": "TurnEnd", "payload": {}})) {
                client.send_raw(frame).await;
            }
        }
        let mut kept = Vec::new();
        for request in std::mem::take(&mut self.outstanding) {
            if is_prompt(&request.method) {
                client.respond(&request.id, &PromptResult::Cancelled).await;
            } else if request.method == "cancel" && running {
                client.respond(&request.id, &Empty {}).await;
            } else {
                kept.push(request);
            }
        }
        self.outstanding = kept;
    }

    /// The client's last `initialize` as this process applies it when it takes the session
    /// over: its external tools left out (they were rejected, and the client was told so).
    pub fn initialize_to_apply(&self) -> Option<InitializeParams> {
        let params = self.initialize.clone()?;
        match ClientRequest::parse("initialize", params) {
            Ok(ClientRequest::Initialize(mut parsed)) => {
                parsed.external_tools = None;
                Some(parsed)
            }
            _ => None,
        }
    }

    /// The requests no host answered, as the wire handler reads them.
    pub fn unanswered(&self) -> Vec<Incoming> {
        self.outstanding.iter().map(|r| crate::rpc::message::classify(r.frame.trim_ascii_end())).collect()
    }
}

fn is_prompt(method: &str) -> bool {
    method == "prompt" || method == "run"
}

/// Writes one frame to the host; a failure shows on the host's stream.
async fn send(to_host: &mut OwnedWriteHalf, frame: &[u8]) {
    if let Err(e) = to_host.write_all(frame).await {
        tracing::info!("writing to the session's host failed: {e}");
    }
}

fn frame(mut object: Map<String, Value>) -> Vec<u8> {
    object.insert("jsonrpc".into(), Value::from("2.0"));
    let mut bytes = serde_json::to_vec(&object).unwrap_or_default();
    bytes.push(b'\n');
    bytes
}

fn request(id: &RequestId, method: &str, params: Option<Value>) -> Vec<u8> {
    let mut object = Map::new();
    object.insert("id".into(), json!(id));
    object.insert("method".into(), Value::from(method));
    if let Some(params) = params {
        object.insert("params".into(), params);
    }
    frame(object)
}

fn notification(method: &str, params: Option<Value>) -> Vec<u8> {
    let mut object = Map::new();
    object.insert("method".into(), Value::from(method));
    if let Some(params) = params {
        object.insert("params".into(), params);
    }
    frame(object)
}

fn response(id: &RequestId, outcome: Result<Value, crate::rpc::ErrorObject>) -> Vec<u8> {
    let mut object = Map::new();
    object.insert("id".into(), json!(id));
    match outcome {
        Ok(result) => object.insert("result".into(), result),
        Err(error) => object.insert("error".into(), json!(error)),
    };
    frame(object)
}

/// What a host frame is to the relay.
#[derive(Debug, PartialEq)]
enum HostFrame {
    /// `session_status`: the session socket's, never a wire 1.10 frame.
    NotForWire,
    TurnBegin,
    TurnEnd,
    /// A response to the request with this id.
    Answer(RequestId),
    Other,
}

fn sort(line: &[u8]) -> HostFrame {
    let Ok(head) = serde_json::from_slice::<Head>(line) else { return HostFrame::Other };
    match (head.method.as_deref(), head.id) {
        (Some("session_status"), _) => HostFrame::NotForWire,
        (Some("event"), _) => match head.params.and_then(|p| p.kind).as_deref() {
            Some("TurnBegin") => HostFrame::TurnBegin,
            Some("TurnEnd") => HostFrame::TurnEnd,
            _ => HostFrame::Other,
        },
        (None, Some(id)) => HostFrame::Answer(id),
        _ => HostFrame::Other,
    }
}

/// What the relay reads of a host frame.
#[derive(Deserialize)]
struct Head<'a> {
    #[serde(borrow)]
    method: Option<std::borrow::Cow<'a, str>>,
    id: Option<RequestId>,
    #[serde(borrow)]
    params: Option<ParamsHead<'a>>,
}

#[derive(Deserialize)]
struct ParamsHead<'a> {
    #[serde(borrow, rename = "type")]
    kind: Option<std::borrow::Cow<'a, str>>,
}

/// Whether a frame is the host's `history_complete`.
pub fn is_history_complete(line: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Method<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    serde_json::from_slice::<Method>(line).is_ok_and(|h| h.method.as_deref() == Some("history_complete"))
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

    #[test]
    fn host_frames_are_sorted_by_what_the_relay_does_with_them() {
        let status = br#"{"jsonrpc":"2.0","method":"session_status","params":{"session_id":"s","state":"busy"}}"#;
        assert_eq!(sort(status), HostFrame::NotForWire);
        assert_eq!(
            sort(br#"{"jsonrpc":"2.0","method":"event","params":{"type":"TurnBegin","payload":{"user_input":"x"}}}"#),
            HostFrame::TurnBegin
        );
        assert_eq!(
            sort(br#"{"jsonrpc":"2.0","method":"event","params":{"type":"TurnEnd","payload":{}}}"#),
            HostFrame::TurnEnd
        );
        assert_eq!(
            sort(br#"{"jsonrpc":"2.0","id":3,"result":{"status":"finished"}}"#),
            HostFrame::Answer(RequestId::Int(3))
        );
        assert_eq!(
            sort(br#"{"jsonrpc":"2.0","id":"x","error":{"code":-32000,"message":"busy"}}"#),
            HostFrame::Answer(RequestId::Str("x".into()))
        );
        // A request of the host carries an id too; it is passed on as it is.
        assert_eq!(
            sort(br#"{"jsonrpc":"2.0","id":"a","method":"request","params":{"type":"ApprovalRequest"}}"#),
            HostFrame::Other
        );
        assert_eq!(sort(b"not json"), HostFrame::Other);
    }

    #[test]
    fn frames_to_the_host_keep_what_the_client_sent() {
        let sent = request(&RequestId::Int(7), "replay", None);
        assert_eq!(
            serde_json::from_slice::<Value>(&sent).unwrap(),
            json!({"jsonrpc": "2.0", "id": 7, "method": "replay"})
        );
        assert!(sent.ends_with(b"\n"));
        let answered = response(&RequestId::Str("a".into()), Ok(json!({"response": "approve"})));
        assert_eq!(
            serde_json::from_slice::<Value>(&answered).unwrap(),
            json!({"jsonrpc": "2.0", "id": "a", "result": {"response": "approve"}})
        );
        assert_eq!(
            classify_back(&notification("interrupt", None)),
            Incoming::Notification { method: "interrupt".into(), params: None }
        );
    }

    fn classify_back(frame: &[u8]) -> Incoming {
        crate::rpc::message::classify(frame.trim_ascii_end())
    }
}
