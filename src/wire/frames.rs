//! The wire's frames around the core's vocabulary: events as `{"method":"event"}` notifications
//! and requests as `{"method":"request"}` requests whose JSON-RPC id is the payload's id.

use crate::protocol::{Event, Request};
use crate::rpc::{Outbound, RequestId};

/// What the client sees when an event cannot be serialized (a bug, logged by the encoder): the
/// step is reported interrupted rather than silently dropped.
const FALLBACK_EVENT: &[u8] =
    b"{\"jsonrpc\":\"2.0\",\"method\":\"event\",\"params\":{\"type\":\"StepInterrupted\",\"payload\":{}}}\n";

pub fn event_frame(event: &Event) -> Vec<u8> {
    Outbound::notification_frame("event", event).unwrap_or_else(|| FALLBACK_EVENT.to_vec())
}

/// kiwi's `tool_output` extension (`docs/compatibility.md`): a running tool's output so far, as
/// an `event` of the kiwi-only type `ToolOutput`; sent only to clients granted the extension.
pub fn tool_output_frame(tool_call_id: &str, text: &str) -> Option<Vec<u8>> {
    #[derive(serde::Serialize)]
    struct Payload<'a> {
        tool_call_id: &'a str,
        text: &'a str,
    }
    #[derive(serde::Serialize)]
    struct Params<'a> {
        #[serde(rename = "type")]
        kind: &'static str,
        payload: Payload<'a>,
    }
    Outbound::notification_frame("event", &Params { kind: "ToolOutput", payload: Payload { tool_call_id, text } })
}

/// The JSON-RPC id of a request we send: the payload's id, so the client may answer by either.
pub fn request_id(request: &Request) -> RequestId {
    RequestId::Str(request.id().to_string())
}

pub fn request_frame(id: &RequestId, request: &Request) -> Option<Vec<u8>> {
    Outbound::request_frame(id, "request", request)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{ToolCallRequest, UserInput};

    #[test]
    fn frames_match_the_spec() {
        let frame = event_frame(&Event::TurnBegin { user_input: UserInput::Text("hi".into()) });
        assert_eq!(
            String::from_utf8(frame).unwrap(),
            "{\"jsonrpc\":\"2.0\",\"method\":\"event\",\"params\":{\"type\":\"TurnBegin\",\"payload\":{\"user_input\":\"hi\"}}}\n"
        );
        let request =
            Request::ToolCallRequest(ToolCallRequest { id: "tc-1".into(), name: "T".into(), arguments: None });
        let id = request_id(&request);
        assert_eq!(
            String::from_utf8(request_frame(&id, &request).unwrap()).unwrap(),
            "{\"jsonrpc\":\"2.0\",\"method\":\"request\",\"id\":\"tc-1\",\"params\":{\"type\":\"ToolCallRequest\",\"payload\":{\"id\":\"tc-1\",\"name\":\"T\",\"arguments\":null}}}\n"
        );
        assert_eq!(
            String::from_utf8(tool_output_frame("tc-1", "a\n").unwrap()).unwrap(),
            "{\"jsonrpc\":\"2.0\",\"method\":\"event\",\"params\":{\"type\":\"ToolOutput\",\"payload\":{\"tool_call_id\":\"tc-1\",\"text\":\"a\\n\"}}}\n"
        );
    }
}
