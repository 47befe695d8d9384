//! `_echo`: the script is the text of the last history message (`docs/scripted-echo.md` §3).
//!
//! Invariants: stateless; the system prompt and tools are ignored; every error is raised by the
//! call's future, before any fragment, as a non-retryable `ChatError::Other` with the reference's
//! wording.

use futures::future::BoxFuture;

use crate::llm::{ChatError, ChatProvider, ChatRequest, ChatStream, Role};

use super::dsl::parse_script;
use super::stream::into_stream;

const NO_PARTS: &str = "EchoChatProvider DSL produced no streamable parts.";

#[derive(Debug, Clone, Copy, Default)]
pub struct EchoProvider;

impl EchoProvider {
    pub fn new() -> Self {
        Self
    }

    fn start(request: ChatRequest<'_>) -> Result<ChatStream, ChatError> {
        let Some(last) = request.history.last() else {
            return Err(ChatError::Other("EchoChatProvider requires at least one message in history.".into()));
        };
        if last.role != Role::User {
            return Err(ChatError::Other("EchoChatProvider expects the last history message to be user.".into()));
        }
        into_stream(parse_script(&last.text())?, NO_PARTS)
    }
}

impl ChatProvider for EchoProvider {
    fn model_name(&self) -> &str {
        "echo"
    }

    fn stream<'a>(&'a self, request: ChatRequest<'a>) -> BoxFuture<'a, Result<ChatStream, ChatError>> {
        Box::pin(async move { Self::start(request) })
    }
}

#[cfg(test)]
mod tests {
    use futures::StreamExt as _;
    use futures::executor::block_on;

    use super::*;
    use crate::llm::{Message, StreamEvent};
    use crate::protocol::{ContentPart, MediaUrl, TokenUsage, ToolCall, ToolCallPart};

    fn run(history: &[Message]) -> Result<Vec<Result<StreamEvent, ChatError>>, ChatError> {
        let provider = EchoProvider::new();
        let request = ChatRequest { system_prompt: "ignored", tools: &[], history };
        let stream = block_on(provider.stream(request))?;
        Ok(block_on(stream.collect::<Vec<_>>()))
    }

    fn error(history: &[Message]) -> String {
        match run(history) {
            Err(ChatError::Other(message)) => message,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn model_name() {
        assert_eq!(EchoProvider::new().model_name(), "echo");
    }

    #[test]
    fn history_errors() {
        assert_eq!(error(&[]), "EchoChatProvider requires at least one message in history.");
        let assistant = Message::new(Role::Assistant, vec![ContentPart::text("text: x")]);
        assert_eq!(
            error(&[Message::user_text("text: a"), assistant]),
            "EchoChatProvider expects the last history message to be user."
        );
        let tool = Message::tool("tc-1", vec![ContentPart::text("text: x")]);
        assert_eq!(error(&[tool]), "EchoChatProvider expects the last history message to be user.");
        assert_eq!(error(&[Message::user_text("# nothing")]), "EchoChatProvider DSL produced no streamable parts.");
        assert_eq!(error(&[Message::user(vec![])]), "EchoChatProvider DSL produced no streamable parts.");
        assert_eq!(error(&[Message::user_text("hi")]), "Invalid echo DSL at line 1: 'hi'");
    }

    #[test]
    fn script_is_the_concatenated_text_parts() {
        let user = Message::user(vec![
            ContentPart::text("text: a"),
            ContentPart::ImageUrl { image_url: MediaUrl::new("data:x") },
            ContentPart::text("b\ntext: c"),
        ]);
        let items = run(&[Message::user_text("text: old"), user]).unwrap();
        assert_eq!(
            items,
            vec![Ok(StreamEvent::Content(ContentPart::text("ab"))), Ok(StreamEvent::Content(ContentPart::text("c")))]
        );
    }

    #[test]
    fn fixture_prompt_streams_the_expected_parts() {
        let prompt = super::super::test_fixture("echo-prompt.txt");
        let items = run(&[Message::user_text(prompt)]).unwrap();
        let part = |p: &str| Ok(StreamEvent::ToolCallPart(ToolCallPart { arguments_part: Some(p.into()) }));
        assert_eq!(
            items,
            vec![
                Ok(StreamEvent::Content(ContentPart::think("thinking..."))),
                Ok(StreamEvent::Content(ContentPart::text("Hello,"))),
                Ok(StreamEvent::Content(ContentPart::text(" world!"))),
                Ok(StreamEvent::ToolCall(ToolCall::new("call-1", "search", Some("{\"query".into())))),
                part("\": \"what time is"),
                part(" it?\"}"),
                Ok(StreamEvent::MessageId("echo-42".into())),
                Ok(StreamEvent::Usage(TokenUsage {
                    input_other: 10,
                    output: 2,
                    input_cache_read: 0,
                    input_cache_creation: 0
                })),
            ]
        );
    }
}
