//! Turns a parsed script into the stream one call yields (`docs/scripted-echo.md` §4.4).
//!
//! Invariants: a script with no parts never becomes a stream (the caller's "no streamable parts"
//! error comes from the call's future); otherwise every part is its own stream item, in script
//! order. A successful stream ends with the message id, then the usage, when the script set them.
//! A script made only of orphan `tool_call_part`s still streams those fragments (they stay on the
//! wire) and then ends with the retryable `EmptyResponse` instead of id and usage, because the
//! reference discards that message.

use futures::StreamExt as _;
use futures::stream;

use crate::llm::{ChatError, ChatStream, StreamEvent};

use super::dsl::ParsedScript;

/// The stream of `parsed`, or `ChatError::Other(no_parts_message)` when it has no parts.
pub fn into_stream(parsed: ParsedScript, no_parts_message: &str) -> Result<ChatStream, ChatError> {
    if parsed.events.is_empty() {
        return Err(ChatError::Other(no_parts_message.to_string()));
    }
    let tail: Vec<Result<StreamEvent, ChatError>> = if parsed.only_orphan_parts() {
        vec![Err(ChatError::EmptyResponse)]
    } else {
        parsed
            .message_id
            .map(StreamEvent::MessageId)
            .into_iter()
            .chain(parsed.usage.map(StreamEvent::Usage))
            .map(Ok)
            .collect()
    };
    Ok(stream::iter(parsed.events.into_iter().map(Ok).chain(tail)).boxed())
}

#[cfg(test)]
mod tests {
    use futures::executor::block_on;

    use super::super::dsl::parse_script;
    use super::*;
    use crate::protocol::{ContentPart, TokenUsage, ToolCallPart};

    fn collect(script: &str) -> Result<Vec<Result<StreamEvent, ChatError>>, ChatError> {
        let stream = into_stream(parse_script(script)?, "none")?;
        Ok(block_on(stream.collect::<Vec<_>>()))
    }

    #[test]
    fn parts_then_id_then_usage() {
        let items = collect("usage: output=2\nid: m\ntext: a\ntext: b").unwrap();
        assert_eq!(
            items,
            vec![
                Ok(StreamEvent::Content(ContentPart::text("a"))),
                Ok(StreamEvent::Content(ContentPart::text("b"))),
                Ok(StreamEvent::MessageId("m".into())),
                Ok(StreamEvent::Usage(TokenUsage {
                    input_other: 0,
                    output: 2,
                    input_cache_read: 0,
                    input_cache_creation: 0
                })),
            ]
        );
    }

    #[test]
    fn no_parts_is_an_error_before_streaming() {
        let err = collect("id: x\nusage: output=1\n# c\n\n```\necho").err();
        assert_eq!(err, Some(ChatError::Other("none".into())));
        assert_eq!(collect("").err(), Some(ChatError::Other("none".into())));
    }

    #[test]
    fn orphan_parts_stream_then_fail_as_empty_response() {
        let items = collect("id: x\ntool_call_part: a\ntool_call_part:").unwrap();
        assert_eq!(
            items,
            vec![
                Ok(StreamEvent::ToolCallPart(ToolCallPart { arguments_part: Some("a".into()) })),
                Ok(StreamEvent::ToolCallPart(ToolCallPart { arguments_part: None })),
                Err(ChatError::EmptyResponse),
            ]
        );
        assert!(ChatError::EmptyResponse.is_retryable());
    }

    #[test]
    fn large_scripts_stream_every_line() {
        let script: String = (0..20_000).map(|i| format!("text: {i}\n")).collect();
        let items = collect(&script).unwrap();
        assert_eq!(items.len(), 20_000);
        assert!(items.iter().all(Result::is_ok));
    }
}
