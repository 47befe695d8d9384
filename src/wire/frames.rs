//! The wire's frames around the core's vocabulary: events as `{"method":"event"}` notifications
//! and requests as `{"method":"request"}` requests whose JSON-RPC id is the payload's id.

use serde::Serialize;

use crate::protocol::{Event, Request, StatusUpdate, StepCost};
use crate::rpc::{Outbound, RequestId};

/// What the client sees when an event cannot be serialized (a bug, logged by the encoder): the
/// step is reported interrupted rather than silently dropped.
const FALLBACK_EVENT: &[u8] =
    b"{\"jsonrpc\":\"2.0\",\"method\":\"event\",\"params\":{\"type\":\"StepInterrupted\",\"payload\":{}}}\n";

pub fn event_frame(event: &Event) -> Vec<u8> {
    Outbound::notification_frame("event", event).unwrap_or_else(|| FALLBACK_EVENT.to_vec())
}

/// [`event_frame`] for a client granted the `cost` extension: a priced step's `StatusUpdate`
/// carries a `cost` member after the reference's seven; every other event is the same frame.
pub fn event_frame_with_cost(event: &Event) -> Vec<u8> {
    #[derive(Serialize)]
    struct WithCost<'a> {
        #[serde(flatten)]
        status: &'a StatusUpdate,
        cost: StepCost,
    }
    #[derive(Serialize)]
    struct Params<'a> {
        #[serde(rename = "type")]
        kind: &'static str,
        payload: WithCost<'a>,
    }
    if let Event::StatusUpdate(status) = event
        && let Some(cost) = status.cost
        && let Some(frame) =
            Outbound::notification_frame("event", &Params { kind: "StatusUpdate", payload: WithCost { status, cost } })
    {
        return frame;
    }
    event_frame(event)
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
    fn only_a_granted_client_sees_the_cost_member() {
        let cost = StepCost { step_usd: 0.5, turn_usd: 0.75, session_usd: 2.0 };
        let priced =
            Event::StatusUpdate(StatusUpdate { context_tokens: Some(5), cost: Some(cost), ..Default::default() });
        let plain = String::from_utf8(event_frame(&priced)).unwrap();
        assert!(!plain.contains("cost"), "{plain}");
        let with = String::from_utf8(event_frame_with_cost(&priced)).unwrap();
        assert_eq!(
            with,
            format!(
                "{}{}",
                plain.trim_end().strip_suffix("}}}").unwrap(),
                ",\"cost\":{\"step_usd\":0.5,\"turn_usd\":0.75,\"session_usd\":2.0}}}}\n"
            )
        );
        // An unpriced step, and every other event, is the reference's frame for everyone.
        let unpriced = Event::StatusUpdate(StatusUpdate { context_tokens: Some(5), ..Default::default() });
        assert_eq!(event_frame_with_cost(&unpriced), event_frame(&unpriced));
        let begin = Event::TurnBegin { user_input: UserInput::Text("hi".into()) };
        assert_eq!(event_frame_with_cost(&begin), event_frame(&begin));
    }

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
