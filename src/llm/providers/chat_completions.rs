//! Chat Completions providers: `kimi` (§3), `openai_legacy` (§4) and `_chaos` (§8.3).
//!
//! Invariants:
//! * the body is serialized straight from the borrowed history, keys in the SDK's order;
//!   `content` is a string for exactly one text part, think parts move to `reasoning_content`
//!   (Kimi) or are left out (OpenAI, where the reference would crash instead);
//! * the stream mapping ignores tool-call `index`: a delta with a name starts a new call and
//!   argument-only deltas extend the latest one (§3.4);
//! * Kimi reads reasoning and Moonshot's in-choice usage / top-level `cached_tokens`; OpenAI reads
//!   neither.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::RwLock;

use bytes::Bytes;
use futures::StreamExt as _;
use futures::future::BoxFuture;
use reqwest::header::{HeaderMap, USER_AGENT};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use super::chaos::Chaos;
use super::http::{self, ErrorStyle, PreparedRequest, STAINLESS_RETRIES};
use super::sse::{ChunkMapper, Flow, SseEvent, SseStream};
use super::{KIMI_CLI_COMPAT_VERSION, identity};
use crate::llm::settings::ThinkingEffort;
use crate::llm::settings::{GenerationOverrides, LlmSettings};
use crate::llm::{
    ChatError, ChatProvider, ChatRequest, ChatStream, ClientIdentity, Message, ModelStop, Role, StreamEvent, ToolSpec,
};
use crate::protocol::{ContentPart, TokenUsage, ToolCall, ToolCallPart};

const KIMI_DEFAULT_MAX_TOKENS: u64 = 32_000;
/// Kimi's reasoning key, and `openai_legacy`'s default one.
const REASONING_CONTENT: &str = "reasoning_content";
const OPENAI_USER_AGENT: &str = "AsyncOpenAI/Python 2.14.0";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dialect {
    Kimi,
    OpenAi,
}

pub(crate) struct ChatCompletions {
    client: reqwest::Client,
    url: String,
    /// `{base}/files`: where Kimi takes video uploads.
    files_url: String,
    model: String,
    /// What `model_name` reports (`chaos(<model>)` for `_chaos`).
    display_name: String,
    dialect: Dialect,
    headers: HeaderMap,
    /// Whether `set_client` changes the User-Agent (only `kimi`).
    client_suffix: bool,
    client_identity: RwLock<Option<ClientIdentity>>,
    prompt_cache_key: Option<String>,
    thinking: ThinkingEffort,
    generation: GenerationOverrides,
    max_tokens: Option<u64>,
    chaos: Option<Chaos>,
    /// Where thinking travels in messages and deltas (`docs/providers.md` §3.3, §4).
    reasoning_key: Option<String>,
}

/// `{base}/` + `chat/completions`, as the openai SDK joins them.
pub(crate) fn openai_url(base: &str, path: &str) -> String {
    format!("{}/{path}", base.trim_end_matches('/'))
}

fn base_headers(settings: &LlmSettings, kimi_identity: bool) -> Result<HeaderMap, String> {
    let mut pairs: Vec<(&str, String)> =
        vec![("Accept", "application/json".into()), ("Content-Type", "application/json".into())];
    if !settings.provider.api_key.is_empty() {
        pairs.push(("Authorization", format!("Bearer {}", settings.provider.api_key)));
    }
    if kimi_identity {
        if identity::device_headers_enabled(settings) {
            pairs.extend(identity::msh_headers());
        }
        pairs.extend(settings.provider.custom_headers.iter().map(|(k, v)| (k.as_str(), v.clone())));
    } else {
        pairs.push(("User-Agent", OPENAI_USER_AGENT.into()));
    }
    http::header_map(pairs)
}

impl ChatCompletions {
    pub fn kimi(client: reqwest::Client, settings: &LlmSettings, session_id: &str) -> Result<Self, String> {
        Ok(Self {
            client,
            url: openai_url(&settings.provider.base_url, "chat/completions"),
            files_url: openai_url(&settings.provider.base_url, "files"),
            model: settings.model.model.clone(),
            display_name: settings.model.model.clone(),
            dialect: Dialect::Kimi,
            headers: base_headers(settings, true)?,
            client_suffix: true,
            client_identity: RwLock::new(None),
            prompt_cache_key: (!session_id.is_empty()).then(|| session_id.to_string()),
            thinking: settings.thinking,
            generation: settings.generation,
            max_tokens: Some(settings.generation.max_tokens.unwrap_or(KIMI_DEFAULT_MAX_TOKENS)),
            chaos: None,
            reasoning_key: Some(REASONING_CONTENT.to_string()),
        })
    }

    pub fn chaos(client: reqwest::Client, settings: &LlmSettings) -> Result<Self, String> {
        Ok(Self {
            display_name: format!("chaos({})", settings.model.model),
            client_suffix: false,
            prompt_cache_key: None,
            generation: GenerationOverrides::default(),
            max_tokens: Some(KIMI_DEFAULT_MAX_TOKENS),
            chaos: Some(Chaos),
            ..Self::kimi(client, settings, "")?
        })
    }

    pub fn openai(client: reqwest::Client, settings: &LlmSettings) -> Result<Self, String> {
        Ok(Self {
            client,
            url: openai_url(&settings.provider.base_url, "chat/completions"),
            files_url: openai_url(&settings.provider.base_url, "files"),
            model: settings.model.model.clone(),
            display_name: settings.model.model.clone(),
            dialect: Dialect::OpenAi,
            headers: base_headers(settings, false)?,
            client_suffix: false,
            client_identity: RwLock::new(None),
            prompt_cache_key: None,
            thinking: settings.thinking,
            generation: GenerationOverrides::default(),
            max_tokens: None,
            chaos: None,
            // Unset: `reasoning_content`; an empty key: reasoning is neither read nor sent.
            reasoning_key: match settings.provider.reasoning_key.as_deref() {
                None => Some(REASONING_CONTENT.to_string()),
                Some("") => None,
                Some(key) => Some(key.to_string()),
            },
        })
    }

    fn user_agent(&self) -> String {
        let mut ua = format!("KimiCLI/{KIMI_CLI_COMPAT_VERSION}");
        if self.client_suffix {
            let guard = self.client_identity.read().unwrap_or_else(|p| p.into_inner());
            if let Some(client) = guard.as_ref() {
                match &client.version {
                    Some(v) => ua.push_str(&format!(" ({} {v})", client.name)),
                    None => ua.push_str(&format!(" ({})", client.name)),
                }
            }
        }
        ua
    }

    /// The JSON body of one call.
    fn body(&self, request: &ChatRequest<'_>) -> Result<Bytes, ChatError> {
        let kimi = self.dialect == Dialect::Kimi;
        let (reasoning_effort, thinking) = match self.thinking {
            ThinkingEffort::Off => (Some(None), kimi.then_some(Toggle { kind: "disabled" })),
            ThinkingEffort::High => (Some(Some("high")), kimi.then_some(Toggle { kind: "enabled" })),
            ThinkingEffort::Unchanged => (None, None),
        };
        let body = Body {
            messages: Messages {
                system: request.system_prompt,
                history: request.history,
                reasoning: self.reasoning_key.as_deref(),
            },
            model: &self.model,
            max_tokens: self.max_tokens,
            prompt_cache_key: self.prompt_cache_key.as_deref(),
            reasoning_effort,
            stream: true,
            stream_options: StreamOptions { include_usage: true },
            temperature: self.generation.temperature,
            tools: Tools { tools: request.tools, builtins: kimi },
            top_p: self.generation.top_p,
            thinking,
        };
        http::encode_body(&body)
    }
}

impl ChatProvider for ChatCompletions {
    fn model_name(&self) -> &str {
        &self.display_name
    }

    fn stream<'a>(&'a self, request: ChatRequest<'a>) -> BoxFuture<'a, Result<ChatStream, ChatError>> {
        Box::pin(async move {
            let body = self.body(&request)?;
            let mut headers = self.headers.clone();
            if self.dialect == Dialect::Kimi && !headers.contains_key(USER_AGENT) {
                let ua = self.user_agent();
                let value = ua.parse().map_err(|_| ChatError::Other(format!("Error: invalid User-Agent {ua:?}")))?;
                headers.insert(USER_AGENT, value);
            }
            let response = http::send(PreparedRequest {
                client: &self.client,
                url: &self.url,
                headers,
                body,
                policy: STAINLESS_RETRIES,
                style: ErrorStyle::Stainless,
                chaos: self.chaos.as_ref(),
            })
            .await?;
            let mapper = ChatMapper::new(self.dialect == Dialect::Kimi).reasoning_key(self.reasoning_key.as_deref());
            let stream = SseStream::new(response, mapper);
            Ok(match self.chaos {
                Some(_) => stream.map(|r| r.map(|e| Chaos.corrupt(e))).boxed(),
                None => stream.boxed(),
            })
        })
    }

    fn set_client(&self, client: Option<ClientIdentity>) {
        *self.client_identity.write().unwrap_or_else(|p| p.into_inner()) = client;
    }

    /// Kimi takes videos through its files API (`docs/providers.md` §3.8); others inline them.
    fn upload_video<'a>(&'a self, data: &'a [u8], mime: &'a str) -> BoxFuture<'a, Result<Option<String>, ChatError>> {
        Box::pin(async move {
            if self.dialect != Dialect::Kimi || self.chaos.is_some() {
                return Ok(None);
            }
            let part = reqwest::multipart::Part::bytes(data.to_vec())
                .file_name(format!("upload.{}", video_extension(mime)))
                .mime_str(mime)
                .map_err(|e| ChatError::Other(format!("Error: invalid media type {mime:?}: {e}")))?;
            let form = reqwest::multipart::Form::new().text("purpose", "video").part("file", part);
            let mut headers = self.headers.clone();
            // The multipart body brings its own content type.
            headers.remove(reqwest::header::CONTENT_TYPE);
            if !headers.contains_key(USER_AGENT) {
                let ua = self.user_agent();
                if let Ok(value) = ua.parse() {
                    headers.insert(USER_AGENT, value);
                }
            }
            let response = self
                .client
                .post(&self.files_url)
                .headers(headers)
                .multipart(form)
                .send()
                .await
                .map_err(|e| http::transport_error(&e))?;
            let status = response.status().as_u16();
            let body = response.bytes().await.map_err(|e| http::body_error(&e))?;
            if !(200..300).contains(&status) {
                return Err(ChatError::Status {
                    status,
                    message: http::stainless_message(status, &body),
                    retry_after: None,
                });
            }
            #[derive(serde::Deserialize)]
            struct FileObject {
                id: String,
            }
            let file: FileObject = serde_json::from_slice(&body)
                .map_err(|e| ChatError::Other(format!("Error: unexpected answer from the files API: {e}")))?;
            Ok(Some(format!("ms://{}", file.id)))
        })
    }
}

/// The file extension the upload's name gets, from the video's media type.
fn video_extension(mime: &str) -> &str {
    match mime {
        "video/quicktime" => "mov",
        "video/x-matroska" => "mkv",
        "video/x-msvideo" => "avi",
        "video/x-ms-wmv" => "wmv",
        "video/mpeg" => "mpeg",
        "video/3gpp" => "3gp",
        other => other.strip_prefix("video/").filter(|s| s.chars().all(|c| c.is_ascii_alphanumeric())).unwrap_or("bin"),
    }
}

// ----- request body -----------------------------------------------------------------------------

#[derive(Serialize)]
struct Body<'a> {
    messages: Messages<'a>,
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
    /// `Some(None)` is an explicit `null` (thinking off).
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<Option<&'static str>>,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    tools: Tools<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Toggle>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct Toggle {
    #[serde(rename = "type")]
    kind: &'static str,
}

struct Tools<'a> {
    tools: &'a [ToolSpec],
    /// Kimi sends `$`-prefixed tools as built-ins.
    builtins: bool,
}

#[derive(Serialize)]
struct ToolOut<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionDef<'a>,
}

#[derive(Serialize)]
struct FunctionDef<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<&'a Map<String, Value>>,
}

impl Serialize for Tools<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.tools.iter().map(|t| {
            if self.builtins && t.name.starts_with('$') {
                ToolOut {
                    kind: "builtin_function",
                    function: FunctionDef { name: &t.name, description: None, parameters: None },
                }
            } else {
                ToolOut {
                    kind: "function",
                    function: FunctionDef {
                        name: &t.name,
                        description: Some(&*t.description),
                        parameters: Some(&t.parameters),
                    },
                }
            }
        }))
    }
}

/// The system prompt plus the history, encoded as kosong's Message dump (§3.3).
pub(crate) struct Messages<'a> {
    pub system: &'a str,
    pub history: &'a [Message],
    /// The key think parts move to (Kimi: `reasoning_content`; `openai_legacy`: its
    /// `reasoning_key`); `None` drops them.
    pub reasoning: Option<&'a str>,
}

#[derive(Serialize)]
struct MessageOut<'a> {
    role: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    content: ContentOut<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_calls: Option<ToolCallsOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    partial: Option<bool>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    reasoning: Option<Reasoning<'a>>,
}

/// The model's reasoning under its provider's key: one more member of the message.
struct Reasoning<'a> {
    key: &'a str,
    text: String,
}

impl Serialize for Reasoning<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(1))?;
        map.serialize_entry(self.key, &self.text)?;
        map.end()
    }
}

#[derive(Serialize)]
#[serde(untagged)]
enum ContentOut<'a> {
    Text(&'a str),
    Parts(Vec<&'a ContentPart>),
}

struct ToolCallsOut<'a>(&'a [ToolCall]);

#[derive(Serialize)]
struct ToolCallOut<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    id: &'a str,
    function: FunctionCallOut<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    extras: Option<&'a Map<String, Value>>,
}

#[derive(Serialize)]
struct FunctionCallOut<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<&'a str>,
}

impl Serialize for ToolCallsOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|c| ToolCallOut {
            kind: &c.kind,
            id: &c.id,
            function: FunctionCallOut { name: &c.function.name, arguments: c.function.arguments.as_deref() },
            extras: c.extras.as_ref(),
        }))
    }
}

pub(crate) fn role_str(role: Role) -> &'static str {
    match role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    }
}

fn message_out<'a>(m: &'a Message, reasoning: Option<&'a str>) -> MessageOut<'a> {
    let parts: Vec<&ContentPart> = m.content.iter().filter(|p| !p.is_think()).collect();
    let content = match parts.as_slice() {
        [ContentPart::Text { text }] => ContentOut::Text(text),
        _ => ContentOut::Parts(parts),
    };
    let reasoning = if let Some(key) = reasoning {
        let joined: String = m
            .content
            .iter()
            .filter_map(|p| match p {
                ContentPart::Think { think, .. } => Some(think.as_str()),
                _ => None,
            })
            .collect();
        (!joined.is_empty()).then_some(Reasoning { key, text: joined })
    } else {
        None
    };
    MessageOut {
        role: role_str(m.role),
        name: m.name.as_deref(),
        content,
        tool_calls: m.tool_calls.as_deref().map(ToolCallsOut),
        tool_call_id: m.tool_call_id.as_deref(),
        partial: m.partial,
        reasoning,
    }
}

impl Serialize for Messages<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let system = (!self.system.is_empty()).then_some(MessageOut {
            role: "system",
            name: None,
            content: ContentOut::Text(self.system),
            tool_calls: None,
            tool_call_id: None,
            partial: None,
            reasoning: None,
        });
        s.collect_seq(system.into_iter().chain(self.history.iter().map(|m| message_out(m, self.reasoning))))
    }
}

// ----- stream mapping ---------------------------------------------------------------------------

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    choices: Option<Vec<Choice<'a>>>,
    #[serde(default)]
    usage: Option<ChatUsage>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
    #[serde(default)]
    usage: Option<ChatUsage>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(borrow, default)]
    reasoning_content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    content: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    tool_calls: Option<Vec<ToolCallDelta<'a>>>,
}

#[derive(Deserialize)]
struct ToolCallDelta<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    function: Option<FunctionDelta<'a>>,
}

#[derive(Deserialize)]
struct FunctionDelta<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ChatUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    /// Moonshot's top-level counter; `Some(None)` when present but null.
    #[serde(default, deserialize_with = "present")]
    cached_tokens: Option<Option<u64>>,
    #[serde(default)]
    prompt_tokens_details: Option<PromptDetails>,
}

#[derive(Deserialize)]
struct PromptDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

/// Distinguishes a present-but-null key from a missing one.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<u64>>, D::Error> {
    Option::<u64>::deserialize(d).map(Some)
}

impl ChatUsage {
    fn to_usage(&self, moonshot: bool) -> TokenUsage {
        let prompt = self.prompt_tokens.unwrap_or(0);
        let details = || self.prompt_tokens_details.as_ref().and_then(|d| d.cached_tokens).unwrap_or(0);
        let cached = match self.cached_tokens {
            Some(top) if moonshot => top.unwrap_or(0),
            _ => details(),
        };
        TokenUsage {
            input_other: prompt.saturating_sub(cached),
            output: self.completion_tokens.unwrap_or(0),
            input_cache_read: cached,
            input_cache_creation: 0,
        }
    }
}

/// Maps `chat.completion.chunk` events. `moonshot` enables Kimi's reasoning and usage quirks.
pub(crate) struct ChatMapper {
    moonshot: bool,
    /// The delta key read as thinking (Kimi: `reasoning_content`; `openai_legacy`: its
    /// `reasoning_key`); `None` ignores reasoning.
    reasoning_key: Option<String>,
    id: Option<String>,
    usage: Option<TokenUsage>,
}

impl ChatMapper {
    pub fn new(moonshot: bool) -> Self {
        Self { moonshot, reasoning_key: moonshot.then(|| REASONING_CONTENT.to_string()), id: None, usage: None }
    }

    /// Reads thinking from `key` (`None`: none).
    pub fn reasoning_key(mut self, key: Option<&str>) -> Self {
        self.reasoning_key = key.map(str::to_string);
        self
    }
}

/// `choices[0].finish_reason`: only a limit or a content filter is reported.
fn model_stop(reason: &str) -> Option<ModelStop> {
    match reason {
        "length" => Some(ModelStop::MaxTokens),
        "content_filter" => Some(ModelStop::Refusal),
        _ => None,
    }
}

/// The openai SDK's in-stream error: `Error: {message}`.
pub(crate) fn stream_error(error: &Value) -> ChatError {
    let message = error.get("message").and_then(Value::as_str).unwrap_or("An error occurred during streaming");
    ChatError::Other(format!("Error: {message}"))
}

pub(crate) fn json_error(e: &serde_json::Error) -> ChatError {
    ChatError::Other(format!("Error: invalid JSON in the response stream: {e}"))
}

/// Python truthiness of a JSON value (the SDK checks `data.get("error")`).
pub(crate) fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

impl ChunkMapper for ChatMapper {
    fn on_event(&mut self, event: SseEvent<'_>, out: &mut VecDeque<StreamEvent>) -> Result<Flow, ChatError> {
        let data = event.data;
        if data.starts_with("[DONE]") {
            return Ok(Flow::Done);
        }
        if data.trim().is_empty() {
            return Ok(Flow::Continue);
        }
        let chunk: Chunk<'_> = serde_json::from_str(data).map_err(|e| json_error(&e))?;
        // A reasoning key other than the usual one is looked up in the raw delta.
        let other_reasoning = match self.reasoning_key.as_deref() {
            Some(key) if key != REASONING_CONTENT => serde_json::from_str::<Value>(data)
                .ok()
                .and_then(|v| v.pointer("/choices/0/delta").and_then(|d| d.get(key)).cloned())
                .and_then(|v| v.as_str().map(str::to_string)),
            _ => None,
        };
        if let Some(error) = chunk.error.as_ref().filter(|e| truthy(e)) {
            return Err(stream_error(error));
        }
        if let Some(id) = chunk.id.filter(|id| !id.is_empty())
            && self.id.as_deref() != Some(&id)
        {
            self.id = Some(id.into_owned());
        }
        let mut choices = chunk.choices.unwrap_or_default();
        if let Some(usage) = &chunk.usage {
            self.usage = Some(usage.to_usage(self.moonshot));
        } else if self.moonshot
            && let Some(usage) = choices.first().and_then(|c| c.usage.as_ref())
        {
            self.usage = Some(usage.to_usage(true));
        }
        if choices.is_empty() {
            return Ok(Flow::Continue);
        }
        let choice = choices.swap_remove(0);
        let stop = choice.finish_reason.as_deref().and_then(model_stop);
        let Some(delta) = choice.delta else {
            out.extend(stop.map(StreamEvent::Stop));
            return Ok(Flow::Continue);
        };
        let think = match self.reasoning_key.as_deref() {
            Some(REASONING_CONTENT) => delta.reasoning_content.map(Cow::into_owned),
            Some(_) => other_reasoning,
            None => None,
        };
        if let Some(think) = think.filter(|t| !t.is_empty()) {
            out.push_back(StreamEvent::Content(ContentPart::Think { think, encrypted: None }));
        }
        if let Some(text) = delta.content.filter(|t| !t.is_empty()) {
            out.push_back(StreamEvent::Content(ContentPart::Text { text: text.into_owned() }));
        }
        for call in delta.tool_calls.unwrap_or_default() {
            let Some(function) = call.function else { continue };
            match function.name.filter(|n| !n.is_empty()) {
                Some(name) => {
                    let id = match call.id.filter(|id| !id.is_empty()) {
                        Some(id) => id.into_owned(),
                        None => uuid::Uuid::new_v4().to_string(),
                    };
                    out.push_back(StreamEvent::ToolCall(ToolCall::new(
                        id,
                        name.into_owned(),
                        function.arguments.map(Cow::into_owned),
                    )));
                }
                None => {
                    if let Some(args) = function.arguments.filter(|a| !a.is_empty()) {
                        out.push_back(StreamEvent::ToolCallPart(ToolCallPart {
                            arguments_part: Some(args.into_owned()),
                        }));
                    }
                }
            }
        }
        out.extend(stop.map(StreamEvent::Stop));
        Ok(Flow::Continue)
    }

    fn finish(&mut self, out: &mut VecDeque<StreamEvent>) {
        super::sse::push_trailer(out, self.id.take(), self.usage.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(moonshot: bool, data: &str) -> (Vec<StreamEvent>, Result<Flow, ChatError>) {
        let mut m = ChatMapper::new(moonshot);
        let mut out = VecDeque::new();
        let r = m.on_event(SseEvent { event: "", data }, &mut out);
        m.finish(&mut out);
        (out.into_iter().collect(), r)
    }

    #[test]
    fn moonshot_usage_inside_the_choice() {
        let data = r#"{"id":"c1","choices":[{"index":0,"delta":{},"usage":{"prompt_tokens":1200,"completion_tokens":8,"cached_tokens":1024}}]}"#;
        let (events, _) = map(true, data);
        assert_eq!(
            events,
            vec![
                StreamEvent::MessageId("c1".into()),
                StreamEvent::Usage(TokenUsage {
                    input_other: 176,
                    output: 8,
                    input_cache_read: 1024,
                    input_cache_creation: 0
                })
            ]
        );
        let (events, _) = map(false, data);
        assert_eq!(events, vec![StreamEvent::MessageId("c1".into())]);
    }

    #[test]
    fn limit_and_filter_finishes_are_reported() {
        for moonshot in [true, false] {
            let (events, _) = map(
                moonshot,
                r#"{"id":"c1","choices":[{"index":0,"delta":{"content":"cut"},"finish_reason":"length"}]}"#,
            );
            assert_eq!(
                events,
                vec![
                    StreamEvent::Content(ContentPart::Text { text: "cut".into() }),
                    StreamEvent::Stop(ModelStop::MaxTokens),
                    StreamEvent::MessageId("c1".into()),
                ]
            );
            let (events, _) = map(moonshot, r#"{"choices":[{"index":0,"delta":{},"finish_reason":"content_filter"}]}"#);
            assert_eq!(events, vec![StreamEvent::Stop(ModelStop::Refusal)]);
            let (events, _) = map(moonshot, r#"{"choices":[{"index":0,"finish_reason":"content_filter"}]}"#);
            assert_eq!(events, vec![StreamEvent::Stop(ModelStop::Refusal)]);
            for normal in ["stop", "tool_calls", "function_call"] {
                let (events, _) =
                    map(moonshot, &format!(r#"{{"choices":[{{"index":0,"delta":{{}},"finish_reason":"{normal}"}}]}}"#));
                assert_eq!(events, vec![], "{normal}");
            }
            let (events, _) = map(moonshot, r#"{"choices":[{"index":0,"delta":{},"finish_reason":null}]}"#);
            assert_eq!(events, vec![]);
        }
    }

    #[test]
    fn tool_call_deltas_and_errors() {
        let (events, _) = map(
            true,
            r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"Shell","arguments":null}},{"index":0,"function":{"arguments":"{}"}},{"index":1}]}}]}"#,
        );
        assert!(
            matches!(&events[0], StreamEvent::ToolCall(c) if c.function.name == "Shell" && c.id.len() == 36 && c.function.arguments.is_none())
        );
        assert_eq!(events[1], StreamEvent::ToolCallPart(ToolCallPart { arguments_part: Some("{}".into()) }));
        let (_, r) = map(true, r#"{"error":{"type":"x"}}"#);
        assert_eq!(r, Err(ChatError::Other("Error: An error occurred during streaming".into())));
        let (_, r) = map(true, r#"{"error":null,"choices":[]}"#);
        assert_eq!(r, Ok(Flow::Continue));
        assert_eq!(map(true, "[DONE]").1, Ok(Flow::Done));
    }

    #[test]
    fn body_encodes_think_and_builtins() {
        let history: Vec<Message> = serde_json::from_str(
            r#"[{"role":"assistant","content":[{"type":"think","think":"a","encrypted":null},{"type":"think","think":"b","encrypted":null}]}]"#,
        )
        .unwrap();
        let json =
            serde_json::to_string(&Messages { system: "", history: &history, reasoning: Some("reasoning_content") })
                .unwrap();
        assert_eq!(json, r#"[{"role":"assistant","content":[],"reasoning_content":"ab"}]"#);
        let tools = [ToolSpec { name: "$web".into(), description: "d".into(), parameters: Default::default() }];
        let json = serde_json::to_string(&Tools { tools: &tools, builtins: true }).unwrap();
        assert_eq!(json, r#"[{"type":"builtin_function","function":{"name":"$web"}}]"#);
    }
}
