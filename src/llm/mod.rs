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
    pub parameters: Parameters,
}

/// A tool's parameter schema: given, or derived when something first reads it. A built-in
/// tool's schema is derived from its Rust type, which costs more than the rest of building a
/// session, and only a model request reads it: a server that is started and never prompted
/// (or not yet) does not pay for it.
#[derive(Clone)]
pub struct Parameters {
    schema: Arc<std::sync::OnceLock<SharedSchema>>,
    derive: Option<fn() -> SharedSchema>,
}

/// A JSON Schema object, shared by every toolset that lists it.
pub type SharedSchema = Arc<Map<String, Value>>;

impl Parameters {
    /// A schema that `derive` makes at the first read (once per value and its clones).
    pub fn derived(derive: fn() -> SharedSchema) -> Self {
        Self { schema: Arc::default(), derive: Some(derive) }
    }

    pub fn schema(&self) -> &Map<String, Value> {
        self.schema.get_or_init(|| self.derive.map(|derive| derive()).unwrap_or_default())
    }
}

impl std::ops::Deref for Parameters {
    type Target = Map<String, Value>;

    fn deref(&self) -> &Map<String, Value> {
        self.schema()
    }
}

impl From<Map<String, Value>> for Parameters {
    fn from(schema: Map<String, Value>) -> Self {
        Self { schema: Arc::new(std::sync::OnceLock::from(Arc::new(schema))), derive: None }
    }
}

impl Default for Parameters {
    fn default() -> Self {
        Map::new().into()
    }
}

impl std::fmt::Debug for Parameters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.schema().fmt(f)
    }
}

impl PartialEq for Parameters {
    fn eq(&self, other: &Self) -> bool {
        self.schema() == other.schema()
    }
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
