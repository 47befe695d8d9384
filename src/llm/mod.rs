//! The model side: a `ChatProvider` turns (system prompt, tools, history) into a stream of
//! fragments. Providers know nothing of the wire; the soul forwards what they stream.

pub mod build;
pub mod echo;
pub mod error;
pub mod message;
pub mod providers;
pub mod pyfmt;
pub mod settings;

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use serde_json::{Map, Value};

pub use error::ChatError;
pub use message::{Message, Role};

use crate::protocol::{ContentPart, TokenUsage, ToolCall, ToolCallPart};

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    /// Shared, like `parameters`: the same text in every session of the process (`kiwi web`
    /// hosts hundreds) is stored once.
    pub description: std::sync::Arc<str>,
    /// JSON Schema of the arguments object; shared, because every toolset that offers the tool
    /// (the session's, each subagent type's, every session's) lists the same schema.
    pub parameters: std::sync::Arc<Map<String, Value>>,
}

/// One LLM call's input. Borrowed so a step builds nothing it does not send.
#[derive(Debug, Clone, Copy)]
pub struct ChatRequest<'a> {
    pub system_prompt: &'a str,
    pub tools: &'a [ToolSpec],
    pub history: &'a [Message],
}

/// What a provider streams, in generation order.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    Content(ContentPart),
    ToolCall(ToolCall),
    ToolCallPart(ToolCallPart),
    /// The provider's message id (last one wins).
    MessageId(String),
    /// Token usage of the call (last one wins).
    Usage(TokenUsage),
    /// The model stopped for a reason other than finishing its answer or calling tools (last
    /// one wins). A normal stop reports nothing.
    Stop(ModelStop),
}

/// Why the model stopped early, as far as a client needs to know (ACP's `max_tokens` /
/// `refusal` stop reasons).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelStop {
    /// The answer was cut off at the output token limit.
    MaxTokens,
    /// The provider refused or filtered the answer.
    Refusal,
}

pub type ChatStream = BoxStream<'static, Result<StreamEvent, ChatError>>;

/// Model capabilities that gate user input, tool results and some tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Capability {
    ImageIn,
    VideoIn,
    Thinking,
    AlwaysThinking,
}

impl Capability {
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::ImageIn => "image_in",
            Capability::VideoIn => "video_in",
            Capability::Thinking => "thinking",
            Capability::AlwaysThinking => "always_thinking",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "image_in" => Capability::ImageIn,
            "video_in" => Capability::VideoIn,
            "thinking" => Capability::Thinking,
            "always_thinking" => Capability::AlwaysThinking,
            _ => return None,
        })
    }
}

/// Information about the client, learned from `initialize` (providers put it in the User-Agent).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClientIdentity {
    pub name: String,
    pub version: Option<String>,
}

pub trait ChatProvider: Send + Sync {
    /// The model name reported in capability errors (`echo`, `scripted_echo`, or the configured id).
    fn model_name(&self) -> &str;

    /// Starts one call. Errors before the first fragment come from the future; errors in the
    /// middle of the stream come from the stream.
    fn stream<'a>(&'a self, request: ChatRequest<'a>) -> BoxFuture<'a, Result<ChatStream, ChatError>>;

    /// Called on `initialize` with the client's identity (or `None` to reset it).
    fn set_client(&self, _client: Option<ClientIdentity>) {}

    /// Uploads a video for a later `video_url` part. `Ok(None)` means this provider takes videos
    /// inline (as a `data:` URL); `Ok(Some(url))` is the URL to reference instead.
    fn upload_video<'a>(&'a self, _data: &'a [u8], _mime: &'a str) -> BoxFuture<'a, Result<Option<String>, ChatError>> {
        Box::pin(async { Ok(None) })
    }
}

pub type SharedProvider = Arc<dyn ChatProvider>;
