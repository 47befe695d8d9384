//! `openai_responses`: the OpenAI Responses API (`docs/providers.md` §5).
//!
//! Invariants:
//! * the `input` list follows kosong's encoding: the system prompt (role `developer` for known
//!   OpenAI model ids), typed message items, reasoning items per run of think parts sharing one
//!   `encrypted` value, `function_call` / `function_call_output` items;
//! * the stream is driven by each event's `type`; the message id is the id of the last output
//!   item seen (reference quirk), usage comes only from `response.completed`, and
//!   `response.failed` / `error` events are ignored as the reference does.

use std::borrow::Cow;
use std::collections::VecDeque;

use bytes::Bytes;
use futures::StreamExt as _;
use futures::future::BoxFuture;
use reqwest::header::HeaderMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

use super::chat_completions::{json_error, openai_url, stream_error, truthy};
use super::http::{self, ErrorStyle, PreparedRequest, STAINLESS_RETRIES};
use super::sse::{ChunkMapper, Flow, SseEvent, SseStream};
use crate::llm::settings::LlmSettings;
use crate::llm::settings::ThinkingEffort;
use crate::llm::{ChatError, ChatProvider, ChatRequest, ChatStream, Message, ModelStop, Role, StreamEvent, ToolSpec};
use crate::protocol::{ContentPart, TokenUsage, ToolCall, ToolCallPart};

/// Model ids the openai SDK knows (its `ChatModel` / `ResponsesModel` literals); for these the
/// system role becomes `developer`.
const KNOWN_OPENAI_MODELS: &[&str] = &[
    "gpt-5.1",
    "gpt-5.1-2025-11-13",
    "gpt-5.1-codex",
    "gpt-5.1-mini",
    "gpt-5.1-chat-latest",
    "gpt-5",
    "gpt-5-mini",
    "gpt-5-nano",
    "gpt-5-2025-08-07",
    "gpt-5-mini-2025-08-07",
    "gpt-5-nano-2025-08-07",
    "gpt-5-chat-latest",
    "gpt-5-codex",
    "gpt-5-pro",
    "gpt-5-pro-2025-10-06",
    "gpt-4.1",
    "gpt-4.1-mini",
    "gpt-4.1-nano",
    "gpt-4.1-2025-04-14",
    "gpt-4.1-mini-2025-04-14",
    "gpt-4.1-nano-2025-04-14",
    "o4-mini",
    "o4-mini-2025-04-16",
    "o3",
    "o3-2025-04-16",
    "o3-mini",
    "o3-mini-2025-01-31",
    "o1",
    "o1-2024-12-17",
    "o1-preview",
    "o1-preview-2024-09-12",
    "o1-mini",
    "o1-mini-2024-09-12",
    "gpt-4o",
    "gpt-4o-2024-11-20",
    "gpt-4o-2024-08-06",
    "gpt-4o-2024-05-13",
    "gpt-4o-audio-preview",
    "gpt-4o-mini-audio-preview",
    "gpt-4o-search-preview",
    "gpt-4o-mini-search-preview",
    "chatgpt-4o-latest",
    "codex-mini-latest",
    "gpt-4o-mini",
    "gpt-4o-mini-2024-07-18",
    "gpt-4-turbo",
    "gpt-4-turbo-2024-04-09",
    "gpt-4-0125-preview",
    "gpt-4-turbo-preview",
    "gpt-4-1106-preview",
    "gpt-4-vision-preview",
    "gpt-4",
    "gpt-4-0314",
    "gpt-4-0613",
    "gpt-4-32k",
    "gpt-4-32k-0314",
    "gpt-4-32k-0613",
    "gpt-3.5-turbo",
    "gpt-3.5-turbo-16k",
    "gpt-3.5-turbo-0301",
    "gpt-3.5-turbo-0613",
    "gpt-3.5-turbo-1106",
    "gpt-3.5-turbo-0125",
    "gpt-3.5-turbo-16k-0613",
    "o1-pro",
    "o1-pro-2025-03-19",
    "o3-pro",
    "o3-pro-2025-06-10",
    "o3-deep-research",
    "o3-deep-research-2025-06-26",
    "o4-mini-deep-research",
    "o4-mini-deep-research-2025-06-26",
    "computer-use-preview",
    "computer-use-preview-2025-03-11",
];

pub(crate) struct Responses {
    client: reqwest::Client,
    url: String,
    model: String,
    headers: HeaderMap,
    thinking: ThinkingEffort,
}

impl Responses {
    pub fn new(client: reqwest::Client, settings: &LlmSettings) -> Result<Self, String> {
        let mut pairs: Vec<(&str, String)> = vec![
            ("Accept", "application/json".into()),
            ("Content-Type", "application/json".into()),
            ("User-Agent", "AsyncOpenAI/Python 2.14.0".into()),
        ];
        if !settings.provider.api_key.is_empty() {
            pairs.push(("Authorization", format!("Bearer {}", settings.provider.api_key)));
        }
        Ok(Self {
            client,
            url: openai_url(&settings.provider.base_url, "responses"),
            model: settings.model.model.clone(),
            headers: http::header_map(pairs)?,
            thinking: settings.thinking,
        })
    }

    fn body(&self, request: &ChatRequest<'_>) -> Result<Bytes, ChatError> {
        let effort = match self.thinking {
            ThinkingEffort::High => Some("high"),
            ThinkingEffort::Off | ThinkingEffort::Unchanged => None,
        };
        let system_role = if KNOWN_OPENAI_MODELS.contains(&self.model.as_str()) { "developer" } else { "system" };
        let body = Body {
            include: ["reasoning.encrypted_content"],
            input: Input { system: request.system_prompt, history: request.history, system_role },
            model: &self.model,
            reasoning: Reasoning { effort, summary: "auto" },
            store: false,
            stream: true,
            tools: Tools(request.tools),
        };
        http::encode_body(&body)
    }
}

impl ChatProvider for Responses {
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
            Ok(SseStream::new(response, ResponsesMapper::default()).boxed())
        })
    }
}

// ----- request body -----------------------------------------------------------------------------

#[derive(Serialize)]
struct Body<'a> {
    include: [&'static str; 1],
    input: Input<'a>,
    model: &'a str,
    reasoning: Reasoning,
    store: bool,
    stream: bool,
    tools: Tools<'a>,
}

#[derive(Serialize)]
struct Reasoning {
    effort: Option<&'static str>,
    summary: &'static str,
}

struct Tools<'a>(&'a [ToolSpec]);

#[derive(Serialize)]
struct ToolOut<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'a str,
    description: &'a str,
    parameters: &'a Map<String, Value>,
    strict: bool,
}

impl Serialize for Tools<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(|t| ToolOut {
            kind: "function",
            name: &t.name,
            description: &t.description,
            parameters: &t.parameters,
            strict: false,
        }))
    }
}

struct Input<'a> {
    system: &'a str,
    history: &'a [Message],
    system_role: &'static str,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Item<'a> {
    Prompt {
        role: &'static str,
        content: &'a str,
    },
    Message {
        content: Vec<PartOut<'a>>,
        role: &'static str,
        #[serde(rename = "type")]
        kind: &'static str,
    },
    Reasoning {
        summary: Vec<Summary<'a>>,
        #[serde(rename = "type")]
        kind: &'static str,
        encrypted_content: Option<&'a str>,
    },
    FunctionCall {
        arguments: &'a str,
        call_id: &'a str,
        name: &'a str,
        #[serde(rename = "type")]
        kind: &'static str,
    },
    FunctionCallOutput {
        call_id: &'a str,
        output: Vec<PartOut<'a>>,
        #[serde(rename = "type")]
        kind: &'static str,
    },
}

/// One content item of a message or tool output (serialized by hand below: two variants share
/// the wire type `input_image`, two share `input_file`).
enum PartOut<'a> {
    InputText { text: &'a str },
    InputImage { detail: &'static str, image_url: &'a str },
    ToolImage { image_url: &'a str },
    InputFile { file_data: String, filename: &'static str },
    InputFileUrl { file_url: &'a str },
    OutputText { text: &'a str, annotations: [(); 0] },
}

#[derive(Serialize)]
struct Summary<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

fn user_parts<'a>(parts: &'a [ContentPart], tool_output: bool) -> Vec<PartOut<'a>> {
    let mut out = Vec::new();
    for part in parts {
        match part {
            ContentPart::Text { text } if !text.is_empty() => out.push(PartOut::InputText { text }),
            ContentPart::ImageUrl { image_url } if tool_output => {
                out.push(PartOut::ToolImage { image_url: &image_url.url })
            }
            ContentPart::ImageUrl { image_url } => {
                out.push(PartOut::InputImage { detail: "auto", image_url: &image_url.url })
            }
            ContentPart::AudioUrl { audio_url } => {
                let url = audio_url.url.as_str();
                if url.starts_with("http://") || url.starts_with("https://") {
                    out.push(PartOut::InputFileUrl { file_url: url });
                } else if let Some((mime, data)) = split_data_url(url) {
                    let filename = match mime {
                        "audio/mpeg" | "audio/mp3" => Some("inline.mp3"),
                        "audio/wav" | "audio/x-wav" | "audio/wave" => Some("inline.wav"),
                        _ => None,
                    };
                    if let Some(filename) = filename {
                        out.push(PartOut::InputFile { file_data: data.to_string(), filename });
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// `data:<mime>;base64,<data>` → (mime, data).
pub(crate) fn split_data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (meta, data) = rest.split_once(',')?;
    let mime = meta.strip_suffix(";base64")?;
    Some((mime, data))
}

impl Input<'_> {
    fn push_message<'a>(&self, m: &'a Message, items: &mut Vec<Item<'a>>) {
        match m.role {
            Role::System | Role::User => {
                let role = if m.role == Role::System { self.system_role } else { "user" };
                items.push(Item::Message { content: user_parts(&m.content, false), role, kind: "message" });
            }
            Role::Assistant => {
                let mut i = 0;
                let parts = &m.content;
                while i < parts.len() {
                    if let ContentPart::Think { encrypted, .. } = &parts[i] {
                        let mut summary = Vec::new();
                        while let Some(ContentPart::Think { think, encrypted: e }) = parts.get(i) {
                            if e != encrypted {
                                break;
                            }
                            summary.push(Summary { kind: "summary_text", text: think });
                            i += 1;
                        }
                        items.push(Item::Reasoning {
                            summary,
                            kind: "reasoning",
                            encrypted_content: encrypted.as_deref(),
                        });
                    } else {
                        let mut content = Vec::new();
                        while let Some(part) = parts.get(i).filter(|p| !p.is_think()) {
                            if let ContentPart::Text { text } = part
                                && !text.is_empty()
                            {
                                content.push(PartOut::OutputText { text, annotations: [] });
                            }
                            i += 1;
                        }
                        items.push(Item::Message { content, role: "assistant", kind: "message" });
                    }
                }
                for call in m.tool_calls.iter().flatten() {
                    items.push(Item::FunctionCall {
                        arguments: call.function.arguments.as_deref().filter(|a| !a.is_empty()).unwrap_or("{}"),
                        call_id: &call.id,
                        name: &call.function.name,
                        kind: "function_call",
                    });
                }
            }
            Role::Tool => {
                let output = m
                    .content
                    .iter()
                    .filter_map(|p| match p {
                        ContentPart::Text { text } => Some(PartOut::InputText { text }),
                        ContentPart::ImageUrl { image_url } => Some(PartOut::ToolImage { image_url: &image_url.url }),
                        _ => None,
                    })
                    .collect();
                items.push(Item::FunctionCallOutput {
                    call_id: m.tool_call_id.as_deref().unwrap_or(""),
                    output,
                    kind: "function_call_output",
                });
            }
        }
    }
}

impl Serialize for Input<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut items = Vec::with_capacity(self.history.len() + 1);
        if !self.system.is_empty() {
            items.push(Item::Prompt { role: self.system_role, content: self.system });
        }
        for m in self.history {
            self.push_message(m, &mut items);
        }
        items.serialize(s)
    }
}

impl Serialize for PartOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Two variants share a wire type with another shape; map them explicitly.
        #[derive(Serialize)]
        #[serde(tag = "type", rename_all = "snake_case")]
        enum Wire<'a> {
            InputText { text: &'a str },
            InputImage(ImageOut<'a>),
            InputFile(FileOut<'a>),
            OutputText { text: &'a str, annotations: [(); 0] },
        }
        #[derive(Serialize)]
        struct ImageOut<'a> {
            #[serde(skip_serializing_if = "Option::is_none")]
            detail: Option<&'static str>,
            image_url: &'a str,
        }
        #[derive(Serialize)]
        struct FileOut<'a> {
            #[serde(skip_serializing_if = "Option::is_none")]
            file_data: Option<&'a str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            filename: Option<&'static str>,
            #[serde(skip_serializing_if = "Option::is_none")]
            file_url: Option<&'a str>,
        }
        let wire = match self {
            PartOut::InputText { text } => Wire::InputText { text },
            PartOut::InputImage { detail, image_url } => Wire::InputImage(ImageOut { detail: Some(detail), image_url }),
            PartOut::ToolImage { image_url } => Wire::InputImage(ImageOut { detail: None, image_url }),
            PartOut::InputFile { file_data, filename } => {
                Wire::InputFile(FileOut { file_data: Some(file_data), filename: Some(filename), file_url: None })
            }
            PartOut::InputFileUrl { file_url } => {
                Wire::InputFile(FileOut { file_data: None, filename: None, file_url: Some(file_url) })
            }
            PartOut::OutputText { text, annotations } => Wire::OutputText { text, annotations: *annotations },
        };
        wire.serialize(s)
    }
}

// ----- stream mapping ---------------------------------------------------------------------------

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    item: Option<OutputItem<'a>>,
    #[serde(borrow, default)]
    delta: Option<Cow<'a, str>>,
    #[serde(default)]
    response: Option<ResponseObject>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
struct OutputItem<'a> {
    #[serde(borrow, default)]
    id: Option<Cow<'a, str>>,
    #[serde(rename = "type", borrow, default)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    call_id: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    arguments: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    encrypted_content: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ResponseObject {
    #[serde(default)]
    usage: Option<ResponseUsage>,
    #[serde(default)]
    incomplete_details: Option<IncompleteDetails>,
}

#[derive(Deserialize)]
struct IncompleteDetails {
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Deserialize)]
struct ResponseUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    input_tokens_details: Option<InputDetails>,
}

#[derive(Deserialize)]
struct InputDetails {
    #[serde(default)]
    cached_tokens: Option<u64>,
}

#[derive(Default)]
pub(crate) struct ResponsesMapper {
    id: Option<String>,
    usage: Option<TokenUsage>,
}

/// `response.incomplete`'s `incomplete_details.reason`: a limit or a content filter.
fn model_stop(reason: &str) -> Option<ModelStop> {
    match reason {
        "max_output_tokens" => Some(ModelStop::MaxTokens),
        "content_filter" => Some(ModelStop::Refusal),
        _ => None,
    }
}

fn think(text: String, encrypted: Option<String>) -> StreamEvent {
    StreamEvent::Content(ContentPart::Think { think: text, encrypted })
}

impl ChunkMapper for ResponsesMapper {
    fn on_event(&mut self, event: SseEvent<'_>, out: &mut VecDeque<StreamEvent>) -> Result<Flow, ChatError> {
        let data = event.data;
        if data.starts_with("[DONE]") {
            return Ok(Flow::Done);
        }
        if data.trim().is_empty() {
            return Ok(Flow::Continue);
        }
        let ev: Event<'_> = serde_json::from_str(data).map_err(|e| json_error(&e))?;
        if let Some(error) = ev.error.as_ref().filter(|e| truthy(e)) {
            return Err(stream_error(error));
        }
        match ev.kind.as_ref() {
            "response.output_item.added" => {
                if let Some(item) = ev.item {
                    if let Some(id) = &item.id {
                        self.id = Some(id.to_string());
                    }
                    if item.kind == "function_call" {
                        let id = match item.call_id.filter(|c| !c.is_empty()) {
                            Some(c) => c.into_owned(),
                            None => uuid::Uuid::new_v4().to_string(),
                        };
                        let name = item.name.map(Cow::into_owned).unwrap_or_default();
                        out.push_back(StreamEvent::ToolCall(ToolCall::new(
                            id,
                            name,
                            item.arguments.map(Cow::into_owned),
                        )));
                    }
                }
            }
            "response.output_item.done" => {
                if let Some(item) = ev.item {
                    if let Some(id) = &item.id {
                        self.id = Some(id.to_string());
                    }
                    if item.kind == "reasoning" {
                        out.push_back(think(String::new(), item.encrypted_content.map(Cow::into_owned)));
                    }
                }
            }
            "response.reasoning_summary_part.added" => out.push_back(think(String::new(), None)),
            "response.reasoning_summary_text.delta" => {
                out.push_back(think(ev.delta.map(Cow::into_owned).unwrap_or_default(), None));
            }
            "response.output_text.delta" => {
                let text = ev.delta.map(Cow::into_owned).unwrap_or_default();
                out.push_back(StreamEvent::Content(ContentPart::Text { text }));
            }
            "response.function_call_arguments.delta" => {
                out.push_back(StreamEvent::ToolCallPart(ToolCallPart {
                    arguments_part: ev.delta.map(Cow::into_owned),
                }));
            }
            "response.completed" => {
                if let Some(u) = ev.response.and_then(|r| r.usage) {
                    let cached = u.input_tokens_details.and_then(|d| d.cached_tokens).unwrap_or(0);
                    self.usage = Some(TokenUsage {
                        input_other: u.input_tokens.saturating_sub(cached),
                        output: u.output_tokens,
                        input_cache_read: cached,
                        input_cache_creation: 0,
                    });
                }
            }
            // Only the reason is read: its usage stays ignored, as the reference does.
            "response.incomplete" => {
                let reason = ev.response.and_then(|r| r.incomplete_details).and_then(|d| d.reason);
                out.extend(reason.as_deref().and_then(model_stop).map(StreamEvent::Stop));
            }
            _ => {}
        }
        Ok(Flow::Continue)
    }

    fn finish(&mut self, out: &mut VecDeque<StreamEvent>) {
        super::sse::push_trailer(out, self.id.take(), self.usage.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map_all(events: &[&str]) -> Vec<StreamEvent> {
        let mut m = ResponsesMapper::default();
        let mut out = VecDeque::new();
        for data in events {
            m.on_event(SseEvent { event: "", data }, &mut out).unwrap();
        }
        m.finish(&mut out);
        out.into_iter().collect()
    }

    #[test]
    fn incomplete_responses_report_their_reason() {
        let text = r#"{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"cut"}"#;
        for (reason, expected) in [
            ("max_output_tokens", vec![StreamEvent::Stop(ModelStop::MaxTokens)]),
            ("content_filter", vec![StreamEvent::Stop(ModelStop::Refusal)]),
            ("something_else", vec![]),
        ] {
            let incomplete = format!(
                r#"{{"type":"response.incomplete","sequence_number":9,"response":{{"id":"resp_1","status":"incomplete","incomplete_details":{{"reason":"{reason}"}},"usage":{{"input_tokens":3,"output_tokens":4}}}}}}"#
            );
            let mut want = vec![StreamEvent::Content(ContentPart::Text { text: "cut".into() })];
            want.extend(expected);
            assert_eq!(map_all(&[text, &incomplete]), want, "{reason}");
        }
        let completed = r#"{"type":"response.completed","response":{"id":"resp_1","status":"completed","incomplete_details":null,"usage":{"input_tokens":3,"output_tokens":4}}}"#;
        assert!(!map_all(&[completed]).iter().any(|e| matches!(e, StreamEvent::Stop(_))));
    }

    #[test]
    fn assistant_runs_become_items() {
        let history: Vec<Message> = serde_json::from_str(
            r#"[{"role":"assistant","content":[{"type":"think","think":"a","encrypted":"E"},{"type":"think","think":"b","encrypted":"E"},{"type":"think","think":"c","encrypted":null},{"type":"text","text":""}]},{"role":"tool","content":"out","tool_call_id":"t"}]"#,
        )
        .unwrap();
        let json = serde_json::to_string(&Input { system: "", history: &history, system_role: "system" }).unwrap();
        assert_eq!(
            json,
            r#"[{"summary":[{"type":"summary_text","text":"a"},{"type":"summary_text","text":"b"}],"type":"reasoning","encrypted_content":"E"},{"summary":[{"type":"summary_text","text":"c"}],"type":"reasoning","encrypted_content":null},{"content":[],"role":"assistant","type":"message"},{"call_id":"t","output":[{"type":"input_text","text":"out"}],"type":"function_call_output"}]"#
        );
    }
}
