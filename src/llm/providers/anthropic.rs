//! `anthropic`: the Messages API (`docs/providers.md` §6).
//!
//! Invariants:
//! * history is encoded as kosong does: system messages become `<system>…</system>` user text,
//!   each tool message its own user `tool_result` message, think parts only with a signature,
//!   tool-call arguments parsed into objects (order kept); the last tool and the last block of the
//!   last message (unless a thinking block) carry `cache_control: ephemeral`;
//! * the stream is driven by the `event:` name; usage counters from `message_start` are
//!   overwritten by the present, non-null ones of `message_delta`; an `error` event fails the call
//!   with status 200 (not retried), as the reference does.

use std::borrow::Cow;
use std::collections::VecDeque;

use bytes::Bytes;
use futures::StreamExt as _;
use futures::future::BoxFuture;
use reqwest::header::HeaderMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::chat_completions::json_error;
use super::http::{self, ErrorStyle, PreparedRequest, STAINLESS_RETRIES};
use super::pyrepr;
use super::responses::split_data_url;
use super::sse::{ChunkMapper, Flow, SseEvent, SseStream};
use crate::llm::settings::LlmSettings;
use crate::llm::settings::ThinkingEffort;
use crate::llm::{ChatError, ChatProvider, ChatRequest, ChatStream, Message, ModelStop, Role, StreamEvent};
use crate::protocol::{ContentPart, TokenUsage, ToolCall, ToolCallPart};

/// kimi-cli's default `max_tokens` for this provider.
const DEFAULT_MAX_TOKENS: u64 = 50_000;

pub(crate) struct Anthropic {
    client: reqwest::Client,
    url: String,
    model: String,
    headers: HeaderMap,
    thinking: ThinkingEffort,
}

impl Anthropic {
    pub fn new(client: reqwest::Client, settings: &LlmSettings) -> Result<Self, String> {
        let headers = http::header_map([
            ("Accept", "application/json".to_string()),
            ("Content-Type", "application/json".to_string()),
            ("User-Agent", "AsyncAnthropic/Python 0.75.0".to_string()),
            ("X-Api-Key", settings.provider.api_key.clone()),
            ("anthropic-version", "2023-06-01".to_string()),
            ("anthropic-beta", "interleaved-thinking-2025-05-14".to_string()),
        ])?;
        Ok(Self {
            client,
            url: format!("{}/v1/messages", settings.provider.base_url.trim_end_matches('/')),
            model: settings.model.model.clone(),
            headers,
            thinking: settings.thinking,
        })
    }

    fn body(&self, request: &ChatRequest<'_>) -> Result<Bytes, ChatError> {
        let mut messages = Vec::with_capacity(request.history.len());
        for m in request.history {
            messages.push(encode_message(m)?);
        }
        if let Some(last) = messages.last_mut().and_then(|m| m.content.last_mut())
            && !matches!(last, Block::Thinking { .. })
        {
            last.set_cache_control();
        }
        let last_tool = request.tools.len().saturating_sub(1);
        let tools = request
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| ToolOut {
                name: &t.name,
                description: &t.description,
                input_schema: &t.parameters,
                cache_control: (i == last_tool).then_some(EPHEMERAL),
            })
            .collect();
        let thinking = match self.thinking {
            ThinkingEffort::Off => Some(Thinking { kind: "disabled", budget_tokens: None }),
            ThinkingEffort::High => Some(Thinking { kind: "enabled", budget_tokens: Some(32_000) }),
            ThinkingEffort::Unchanged => None,
        };
        let body = Body {
            max_tokens: DEFAULT_MAX_TOKENS,
            messages,
            model: &self.model,
            stream: true,
            system: (!request.system_prompt.is_empty()).then_some([SystemBlock {
                text: request.system_prompt,
                kind: "text",
                cache_control: EPHEMERAL,
            }]),
            thinking,
            tools,
        };
        http::encode_body(&body)
    }
}

impl ChatProvider for Anthropic {
    fn model_name(&self) -> &str {
        &self.model
    }

    fn stream<'a>(&'a self, request: ChatRequest<'a>) -> BoxFuture<'a, Result<ChatStream, ChatError>> {
        Box::pin(async move {
            let body = self.body(&request)?;
            let response = http::send(PreparedRequest {
                client: &self.client,
                url: &self.url,
                headers: self.headers.clone(),
                body,
                policy: STAINLESS_RETRIES,
                style: ErrorStyle::Stainless,
                chaos: None,
            })
            .await?;
            let status = response.status().as_u16();
            Ok(SseStream::new(response, AnthropicMapper::new(status)).boxed())
        })
    }
}

// ----- request body -----------------------------------------------------------------------------

#[derive(Serialize, Clone, Copy)]
struct CacheControl {
    #[serde(rename = "type")]
    kind: &'static str,
}

const EPHEMERAL: CacheControl = CacheControl { kind: "ephemeral" };

#[derive(Serialize)]
struct Body<'a> {
    max_tokens: u64,
    messages: Vec<MessageOut<'a>>,
    model: &'a str,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<[SystemBlock<'a>; 1]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<Thinking>,
    tools: Vec<ToolOut<'a>>,
}

#[derive(Serialize)]
struct SystemBlock<'a> {
    text: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    cache_control: CacheControl,
}

#[derive(Serialize)]
struct Thinking {
    #[serde(rename = "type")]
    kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    budget_tokens: Option<u64>,
}

#[derive(Serialize)]
struct ToolOut<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a Map<String, Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cache_control: Option<CacheControl>,
}

#[derive(Serialize)]
struct MessageOut<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Text {
        text: Cow<'a, str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Image {
        source: ImageSource<'a>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: Vec<Block<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        cache_control: Option<CacheControl>,
    },
}

impl Block<'_> {
    fn set_cache_control(&mut self) {
        match self {
            Block::Text { cache_control, .. }
            | Block::Image { cache_control, .. }
            | Block::ToolUse { cache_control, .. }
            | Block::ToolResult { cache_control, .. } => *cache_control = Some(EPHEMERAL),
            Block::Thinking { .. } => {}
        }
    }
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum ImageSource<'a> {
    Base64 { data: &'a str, media_type: &'a str },
    Url { url: &'a str },
}

fn image_block(url: &str) -> Result<Block<'_>, ChatError> {
    let source = if url.starts_with("data:") {
        let (mime, data) = split_data_url(url)
            .ok_or_else(|| ChatError::Other(format!("Error: invalid image data URL: {:.60}", url)))?;
        if !matches!(mime, "image/png" | "image/jpeg" | "image/gif" | "image/webp") {
            return Err(ChatError::Other(format!("Error: unsupported image type for Anthropic: {mime}")));
        }
        ImageSource::Base64 { data, media_type: mime }
    } else {
        ImageSource::Url { url }
    };
    Ok(Block::Image { source, cache_control: None })
}

fn encode_message(m: &Message) -> Result<MessageOut<'_>, ChatError> {
    match m.role {
        Role::System => {
            let text: Vec<&str> = m.content.iter().filter_map(ContentPart::as_text).collect();
            let text = format!("<system>{}</system>", text.join("\n"));
            Ok(MessageOut { role: "user", content: vec![Block::Text { text: Cow::Owned(text), cache_control: None }] })
        }
        Role::Tool => {
            let id = m
                .tool_call_id
                .as_deref()
                .ok_or_else(|| ChatError::Other("Error: tool message without tool_call_id".into()))?;
            let mut content = Vec::new();
            for part in &m.content {
                match part {
                    ContentPart::Text { text } if !text.is_empty() => {
                        content.push(Block::Text { text: Cow::Borrowed(text), cache_control: None })
                    }
                    ContentPart::Text { .. } | ContentPart::Think { .. } => {}
                    ContentPart::ImageUrl { image_url } => content.push(image_block(&image_url.url)?),
                    ContentPart::AudioUrl { .. } => {
                        return Err(ChatError::Other(
                            "Error: Anthropic API does not support audio in tool result".into(),
                        ));
                    }
                    ContentPart::VideoUrl { .. } => {
                        return Err(ChatError::Other(
                            "Error: Anthropic API does not support video in tool result".into(),
                        ));
                    }
                }
            }
            Ok(MessageOut {
                role: "user",
                content: vec![Block::ToolResult { tool_use_id: id, content, cache_control: None }],
            })
        }
        Role::User | Role::Assistant => {
            let mut content = Vec::new();
            for part in &m.content {
                match part {
                    ContentPart::Text { text } => {
                        content.push(Block::Text { text: Cow::Borrowed(text), cache_control: None })
                    }
                    ContentPart::ImageUrl { image_url } => content.push(image_block(&image_url.url)?),
                    ContentPart::Think { think, encrypted: Some(signature) } => {
                        content.push(Block::Thinking { thinking: think, signature })
                    }
                    ContentPart::Think { encrypted: None, .. }
                    | ContentPart::AudioUrl { .. }
                    | ContentPart::VideoUrl { .. } => {}
                }
            }
            for call in m.tool_calls.iter().flatten() {
                content.push(Block::ToolUse {
                    id: &call.id,
                    name: &call.function.name,
                    input: tool_input(call)?,
                    cache_control: None,
                });
            }
            Ok(MessageOut { role: if m.role == Role::User { "user" } else { "assistant" }, content })
        }
    }
}

fn tool_input(call: &ToolCall) -> Result<Value, ChatError> {
    let args = call.function.arguments.as_deref().unwrap_or("");
    if args.is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    match serde_json::from_str::<Value>(args) {
        Ok(v @ Value::Object(_)) => Ok(v),
        _ => Err(ChatError::Other(format!("Error: tool call {} arguments are not a JSON object: {args}", call.id))),
    }
}

// ----- stream mapping ---------------------------------------------------------------------------

#[derive(Deserialize)]
struct Data<'a> {
    #[serde(borrow, default)]
    message: Option<MessageStart<'a>>,
    #[serde(borrow, default)]
    content_block: Option<ContentBlock<'a>>,
    #[serde(borrow, default)]
    delta: Option<Delta<'a>>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct MessageStart<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct ContentBlock<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    thinking: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    data: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    thinking: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    signature: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    partial_json: Option<Cow<'a, str>>,
    /// Only in `message_delta`.
    #[serde(borrow, default)]
    stop_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Default, Clone, Copy)]
struct Usage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
}

pub(crate) struct AnthropicMapper {
    /// HTTP status of the stream, reported by in-stream errors.
    status: u16,
    id: Option<String>,
    usage: Option<Usage>,
}

impl AnthropicMapper {
    pub fn new(status: u16) -> Self {
        Self { status, id: None, usage: None }
    }
}

/// `message_delta.delta.stop_reason`: only a limit or a refusal is reported.
fn model_stop(reason: &str) -> Option<ModelStop> {
    match reason {
        "max_tokens" => Some(ModelStop::MaxTokens),
        "refusal" => Some(ModelStop::Refusal),
        _ => None,
    }
}

fn owned(c: Option<Cow<'_, str>>) -> String {
    c.map(Cow::into_owned).unwrap_or_default()
}

impl ChunkMapper for AnthropicMapper {
    fn on_event(&mut self, event: SseEvent<'_>, out: &mut VecDeque<StreamEvent>) -> Result<Flow, ChatError> {
        let name = event.event;
        if matches!(name, "" | "ping" | "content_block_stop" | "message_stop") {
            return Ok(Flow::Continue);
        }
        if name == "error" {
            let message = match serde_json::from_str::<Value>(event.data) {
                Ok(v) => pyrepr::repr(&v),
                Err(_) => event.data.to_string(),
            };
            return Err(ChatError::Status { status: self.status, message, retry_after: None });
        }
        let data: Data<'_> = serde_json::from_str(event.data).map_err(|e| json_error(&e))?;
        match name {
            "message_start" => {
                if let Some(m) = data.message {
                    self.id = m.id.map(Cow::into_owned);
                    self.usage = Some(m.usage.unwrap_or_default());
                }
            }
            "content_block_start" => {
                if let Some(block) = data.content_block {
                    match block.kind.as_ref() {
                        "text" => out.push_back(StreamEvent::Content(ContentPart::Text { text: owned(block.text) })),
                        "thinking" => out.push_back(StreamEvent::Content(ContentPart::Think {
                            think: owned(block.thinking),
                            encrypted: None,
                        })),
                        "redacted_thinking" => out.push_back(StreamEvent::Content(ContentPart::Think {
                            think: String::new(),
                            encrypted: block.data.map(Cow::into_owned),
                        })),
                        "tool_use" => out.push_back(StreamEvent::ToolCall(ToolCall::new(
                            owned(block.id),
                            owned(block.name),
                            Some(String::new()),
                        ))),
                        _ => {}
                    }
                }
            }
            "content_block_delta" => {
                if let Some(delta) = data.delta {
                    match delta.kind.as_ref() {
                        "text_delta" => {
                            out.push_back(StreamEvent::Content(ContentPart::Text { text: owned(delta.text) }))
                        }
                        "thinking_delta" => out.push_back(StreamEvent::Content(ContentPart::Think {
                            think: owned(delta.thinking),
                            encrypted: None,
                        })),
                        "signature_delta" => out.push_back(StreamEvent::Content(ContentPart::Think {
                            think: String::new(),
                            encrypted: delta.signature.map(Cow::into_owned),
                        })),
                        "input_json_delta" => out.push_back(StreamEvent::ToolCallPart(ToolCallPart {
                            arguments_part: Some(owned(delta.partial_json)),
                        })),
                        _ => {}
                    }
                }
            }
            "message_delta" => {
                if let Some(stop) = data.delta.and_then(|d| d.stop_reason).and_then(|r| model_stop(&r)) {
                    out.push_back(StreamEvent::Stop(stop));
                }
                if let Some(u) = data.usage {
                    let stored = self.usage.get_or_insert_with(Usage::default);
                    stored.input_tokens = u.input_tokens.or(stored.input_tokens);
                    stored.output_tokens = u.output_tokens.or(stored.output_tokens);
                    stored.cache_read_input_tokens = u.cache_read_input_tokens.or(stored.cache_read_input_tokens);
                    stored.cache_creation_input_tokens =
                        u.cache_creation_input_tokens.or(stored.cache_creation_input_tokens);
                }
            }
            _ => {}
        }
        Ok(Flow::Continue)
    }

    fn finish(&mut self, out: &mut VecDeque<StreamEvent>) {
        let usage = self.usage.take().map(|u| TokenUsage {
            input_other: u.input_tokens.unwrap_or(0),
            output: u.output_tokens.unwrap_or(0),
            input_cache_read: u.cache_read_input_tokens.unwrap_or(0),
            input_cache_creation: u.cache_creation_input_tokens.unwrap_or(0),
        });
        super::sse::push_trailer(out, self.id.take(), usage);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_tool_arguments_are_an_error() {
        let call = ToolCall::new("c", "Shell", Some("[1]".into()));
        assert!(tool_input(&call).is_err());
        let call = ToolCall::new("c", "Shell", None);
        assert_eq!(tool_input(&call).unwrap(), Value::Object(Map::new()));
    }

    fn map_all(events: &[(&str, &str)]) -> Vec<StreamEvent> {
        let mut m = AnthropicMapper::new(200);
        let mut out = VecDeque::new();
        for (event, data) in events {
            m.on_event(SseEvent { event, data }, &mut out).unwrap();
        }
        m.finish(&mut out);
        out.into_iter().collect()
    }

    #[test]
    fn limit_and_refusal_stops_are_reported() {
        let start =
            ("message_start", r#"{"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":5}}}"#);
        for (reason, expected) in [
            ("max_tokens", Some(ModelStop::MaxTokens)),
            ("refusal", Some(ModelStop::Refusal)),
            ("end_turn", None),
            ("tool_use", None),
        ] {
            let delta = format!(
                r#"{{"type":"message_delta","delta":{{"stop_reason":"{reason}","stop_sequence":null}},"usage":{{"output_tokens":7}}}}"#
            );
            let events = map_all(&[start, ("message_delta", &delta), ("message_stop", r#"{"type":"message_stop"}"#)]);
            let stops: Vec<&StreamEvent> = events.iter().filter(|e| matches!(e, StreamEvent::Stop(_))).collect();
            assert_eq!(stops, expected.map(StreamEvent::Stop).iter().collect::<Vec<_>>(), "{reason}");
            assert!(events.iter().any(|e| matches!(e, StreamEvent::Usage(u) if u.output == 7)));
        }
    }

    #[test]
    fn error_event_carries_the_stream_status() {
        let mut m = AnthropicMapper::new(200);
        let mut out = VecDeque::new();
        let r = m.on_event(SseEvent { event: "error", data: r#"{"type":"error","error":{"type":"x"}}"# }, &mut out);
        assert_eq!(
            r,
            Err(ChatError::Status {
                status: 200,
                message: "{'type': 'error', 'error': {'type': 'x'}}".into(),
                retry_after: None
            })
        );
    }
}
