//! `gemini` / `google_genai` and `vertexai`, in API-key (express) mode or with Application Default
//! Credentials (`docs/providers.md` §7).
//!
//! Invariants:
//! * the body is camelCase JSON as the google-genai SDK sends it: `systemInstruction` always
//!   present, all tools merged into one `functionDeclarations` entry with the SDK's schema rewrite,
//!   `thinkingConfig` with snake_case keys per model family;
//! * tool results directly after a tool-calling assistant message are packed into one `user`
//!   content, ordered like the calls; a missing, extra or duplicate result is an error;
//! * no SDK retries (google-genai has none); `promptTokenCount` is not reduced by the cached
//!   count (reference accounting); tool-call ids are `{name}_{id or a process-unique number}`.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine as _;
use bytes::Bytes;
use futures::StreamExt as _;
use futures::future::BoxFuture;
use reqwest::header::HeaderMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::chat_completions::{json_error, truthy};
use super::google_auth::AdcTokens;
use super::http::{self, ErrorStyle, NO_RETRIES, PreparedRequest};
use super::pyrepr;
use super::responses::split_data_url;
use super::sse::{ChunkMapper, Flow, SseEvent, SseStream};
use crate::llm::settings::LlmSettings;
use crate::llm::settings::ThinkingEffort;
use crate::llm::{ChatError, ChatProvider, ChatRequest, ChatStream, Message, ModelStop, Role, StreamEvent, ToolSpec};
use crate::protocol::{ContentPart, TokenUsage, ToolCall};

const SDK_AGENT: &str = "google-genai-sdk/1.56.0 gl-python/3.13.0";

pub(crate) struct Gemini {
    client: reqwest::Client,
    url: String,
    model: String,
    headers: HeaderMap,
    thinking: ThinkingEffort,
    /// Vertex without an API key: a bearer token per request, and the project-scoped path.
    adc: Option<Adc>,
}

struct Adc {
    tokens: AdcTokens,
    /// `GOOGLE_CLOUD_PROJECT`; else the service account's `project_id`.
    project: Option<String>,
    location: String,
    base: String,
}

impl Adc {
    fn url(&self, project: &str, model: &str) -> String {
        format!(
            "{}/v1beta1/projects/{project}/locations/{}/publishers/google/models/{model}:streamGenerateContent?alt=sse",
            self.base, self.location
        )
    }
}

impl Gemini {
    pub fn new(client: reqwest::Client, settings: &LlmSettings, vertex: bool) -> Result<Self, String> {
        let base = settings.provider.base_url.trim_end_matches('/');
        let model = settings.model.model.clone();
        let url = if vertex {
            format!("{base}/v1beta1/publishers/google/models/{model}:streamGenerateContent?alt=sse")
        } else {
            format!("{base}/v1beta/models/{model}:streamGenerateContent?alt=sse")
        };
        let adc = (vertex && uses_adc(settings)).then(|| Adc {
            tokens: AdcTokens::new(client.clone(), settings),
            project: env(settings, "GOOGLE_CLOUD_PROJECT"),
            location: env(settings, "GOOGLE_CLOUD_LOCATION").unwrap_or_else(|| "global".to_string()),
            base: base.to_string(),
        });
        let mut headers = vec![
            ("Content-Type", "application/json".to_string()),
            ("User-Agent", SDK_AGENT.to_string()),
            ("x-goog-api-client", SDK_AGENT.to_string()),
            ("Accept", "*/*".to_string()),
        ];
        if adc.is_none() {
            headers.insert(1, ("x-goog-api-key", api_key(settings)));
        }
        let headers = http::header_map(headers)?;
        Ok(Self { client, url, model, headers, thinking: settings.thinking, adc })
    }

    fn body(&self, request: &ChatRequest<'_>) -> Result<Bytes, ChatError> {
        let gemini3 = self.model.contains("gemini-3");
        let thinking_config = match (self.thinking, gemini3) {
            (ThinkingEffort::Unchanged, _) => None,
            (ThinkingEffort::Off, false) => {
                Some(ThinkingConfig { include_thoughts: false, thinking_budget: Some(0), thinking_level: None })
            }
            (ThinkingEffort::High, false) => {
                Some(ThinkingConfig { include_thoughts: true, thinking_budget: Some(32_000), thinking_level: None })
            }
            (ThinkingEffort::Off, true) => {
                Some(ThinkingConfig { include_thoughts: true, thinking_budget: None, thinking_level: None })
            }
            (ThinkingEffort::High, true) => {
                Some(ThinkingConfig { include_thoughts: true, thinking_budget: None, thinking_level: Some("HIGH") })
            }
        };
        let body = Body {
            contents: encode_history(request.history)?,
            system_instruction: ContentOut {
                parts: vec![PartOut::Text { text: Cow::Borrowed(request.system_prompt) }],
                role: "user",
            },
            tools: (!request.tools.is_empty())
                .then(|| [ToolsOut { function_declarations: declarations(request.tools) }]),
            generation_config: thinking_config.map(|thinking_config| GenerationConfig { thinking_config }),
        };
        http::encode_body(&body)
    }
}

impl ChatProvider for Gemini {
    fn model_name(&self) -> &str {
        &self.model
    }

    fn stream<'a>(&'a self, request: ChatRequest<'a>) -> BoxFuture<'a, Result<ChatStream, ChatError>> {
        Box::pin(async move {
            let body = self.body(&request)?;
            let mut headers = self.headers.clone();
            let mut url = Cow::Borrowed(self.url.as_str());
            if let Some(adc) = &self.adc {
                let grant = adc.tokens.grant().await?;
                let project = adc.project.as_deref().or(grant.project.as_deref()).ok_or_else(|| {
                    let msg = "Vertex AI without an API key needs a project: set GOOGLE_CLOUD_PROJECT (or use a \
                               service-account file, which names its project_id)";
                    tracing::error!("{msg}");
                    ChatError::Other(msg.to_string())
                })?;
                url = Cow::Owned(adc.url(project, &self.model));
                let mut auth = vec![("Authorization", format!("Bearer {}", grant.access_token))];
                if let Some(quota) = grant.quota_project {
                    auth.push(("x-goog-user-project", quota));
                }
                headers.extend(http::header_map(auth).map_err(ChatError::Other)?);
            }
            let response = http::send(PreparedRequest {
                client: &self.client,
                url: &url,
                headers,
                body,
                policy: NO_RETRIES,
                style: ErrorStyle::Google,
                chaos: None,
            })
            .await?;
            Ok(SseStream::new(response, GeminiMapper::default()).boxed())
        })
    }
}

/// A non-empty variable from the provider's `env` table or the process environment.
fn env(settings: &LlmSettings, name: &str) -> Option<String> {
    settings.env_var(name).filter(|v| !v.is_empty())
}

/// The configured key; google-genai falls back to these variables when none is configured.
fn api_key(settings: &LlmSettings) -> String {
    if settings.provider.api_key.is_empty() {
        ["GOOGLE_API_KEY", "GEMINI_API_KEY"].iter().find_map(|k| env(settings, k)).unwrap_or_default()
    } else {
        settings.provider.api_key.clone()
    }
}

/// Vertex uses Application Default Credentials unless a key is configured, or a key comes from
/// the environment while no project does (a project in the environment wins over a key there).
pub fn uses_adc(settings: &LlmSettings) -> bool {
    settings.provider.api_key.is_empty()
        && (api_key(settings).is_empty() || env(settings, "GOOGLE_CLOUD_PROJECT").is_some())
}

// ----- request body -----------------------------------------------------------------------------

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    contents: Vec<ContentOut<'a>>,
    system_instruction: ContentOut<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<[ToolsOut; 1]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    generation_config: Option<GenerationConfig>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GenerationConfig {
    thinking_config: ThinkingConfig,
}

/// The SDK sends these keys in snake_case.
#[derive(Serialize)]
struct ThinkingConfig {
    include_thoughts: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_budget: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking_level: Option<&'static str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolsOut {
    function_declarations: Vec<Value>,
}

#[derive(Serialize)]
struct ContentOut<'a> {
    parts: Vec<PartOut<'a>>,
    role: &'static str,
}

#[derive(Serialize)]
#[serde(untagged)]
enum PartOut<'a> {
    Text {
        text: Cow<'a, str>,
    },
    Inline {
        #[serde(rename = "inlineData")]
        inline_data: Blob<'a>,
    },
    File {
        #[serde(rename = "fileData")]
        file_data: FileData<'a>,
    },
    Call {
        #[serde(rename = "functionCall")]
        function_call: FunctionCall<'a>,
        #[serde(rename = "thoughtSignature", skip_serializing_if = "Option::is_none")]
        thought_signature: Option<String>,
    },
    Response {
        #[serde(rename = "functionResponse")]
        function_response: FunctionResponse<'a>,
    },
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Blob<'a> {
    data: String,
    mime_type: &'a str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct FileData<'a> {
    file_uri: &'a str,
    mime_type: &'a str,
}

#[derive(Serialize)]
struct FunctionCall<'a> {
    id: &'a str,
    args: Value,
    name: &'a str,
}

#[derive(Serialize)]
struct FunctionResponse<'a> {
    parts: Vec<PartOut<'a>>,
    id: &'a str,
    name: &'a str,
    response: ResponseOutput,
}

#[derive(Serialize)]
struct ResponseOutput {
    output: String,
}

fn err(msg: impl Into<String>) -> ChatError {
    ChatError::Other(format!("Error: {}", msg.into()))
}

/// Data-URL media, re-encoded as URL-safe base64 like the SDK does.
fn inline(url: &str, allowed: &[&'static str]) -> Result<Option<PartOut<'static>>, ChatError> {
    let Some((mime, data)) = split_data_url(url) else { return Ok(None) };
    if !allowed.contains(&mime) {
        return Err(err(format!("unsupported media type for Gemini: {mime}")));
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| err(format!("invalid base64 in data URL: {e}")))?;
    let mime: &'static str = allowed.iter().copied().find(|m| *m == mime).unwrap_or("application/octet-stream");
    Ok(Some(PartOut::Inline {
        inline_data: Blob { data: base64::engine::general_purpose::URL_SAFE.encode(bytes), mime_type: mime },
    }))
}

const IMAGE_TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];
const AUDIO_TYPES: &[&str] =
    &["audio/wav", "audio/mp3", "audio/mpeg", "audio/aiff", "audio/aac", "audio/ogg", "audio/flac"];

fn media_part<'a>(url: &'a str, allowed: &[&'static str], fallback_mime: &'a str) -> Result<PartOut<'a>, ChatError> {
    if url.starts_with("data:") {
        return inline(url, allowed)?.ok_or_else(|| err("invalid data URL"));
    }
    // The reference downloads http(s) media and inlines it; we reference it by URI instead.
    Ok(PartOut::File { file_data: FileData { file_uri: url, mime_type: fallback_mime } })
}

fn user_parts(m: &Message) -> Result<Vec<PartOut<'_>>, ChatError> {
    let mut parts = Vec::new();
    for part in &m.content {
        match part {
            ContentPart::Text { text } => parts.push(PartOut::Text { text: Cow::Borrowed(text) }),
            ContentPart::ImageUrl { image_url } => parts.push(media_part(&image_url.url, IMAGE_TYPES, "image/png")?),
            ContentPart::AudioUrl { audio_url } => parts.push(media_part(&audio_url.url, AUDIO_TYPES, "audio/mpeg")?),
            ContentPart::Think { .. } | ContentPart::VideoUrl { .. } => {}
        }
    }
    Ok(parts)
}

fn call_part(call: &ToolCall) -> Result<PartOut<'_>, ChatError> {
    let args = match call.function.arguments.as_deref().filter(|a| !a.trim().is_empty()) {
        None => Value::Object(Map::new()),
        Some(a) => serde_json::from_str(a).map_err(|e| err(format!("tool call {} arguments: {e}", call.id)))?,
    };
    let thought_signature =
        call.extras.as_ref().and_then(|x| x.get("thought_signature_b64")).and_then(Value::as_str).map(|b64| {
            // Re-encoded as the SDK's bytes field (URL-safe base64).
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map(|b| base64::engine::general_purpose::URL_SAFE.encode(b))
                .unwrap_or_else(|_| b64.to_string())
        });
    Ok(PartOut::Call {
        function_call: FunctionCall { id: &call.id, args, name: &call.function.name },
        thought_signature,
    })
}

fn response_part<'a>(m: &'a Message, name: &'a str) -> Result<PartOut<'a>, ChatError> {
    let mut output = String::new();
    let mut parts = Vec::new();
    for part in &m.content {
        match part {
            ContentPart::Text { text } => output.push_str(text),
            ContentPart::ImageUrl { image_url } => parts.push(media_part(&image_url.url, IMAGE_TYPES, "image/png")?),
            ContentPart::AudioUrl { audio_url } => parts.push(media_part(&audio_url.url, AUDIO_TYPES, "audio/mpeg")?),
            _ => {}
        }
    }
    Ok(PartOut::Response {
        function_response: FunctionResponse {
            parts,
            id: m.tool_call_id.as_deref().unwrap_or(""),
            name,
            response: ResponseOutput { output },
        },
    })
}

fn encode_history(history: &[Message]) -> Result<Vec<ContentOut<'_>>, ChatError> {
    let mut contents = Vec::with_capacity(history.len());
    let mut i = 0;
    while i < history.len() {
        let m = &history[i];
        i += 1;
        match m.role {
            Role::User | Role::System => {
                let role = if m.role == Role::User { "user" } else { "system" };
                contents.push(ContentOut { parts: user_parts(m)?, role });
            }
            Role::Assistant => {
                let mut parts: Vec<PartOut<'_>> = m
                    .content
                    .iter()
                    .filter_map(|p| p.as_text().map(|t| PartOut::Text { text: Cow::Borrowed(t) }))
                    .collect();
                let calls = m.tool_calls.as_deref().unwrap_or_default();
                for call in calls {
                    parts.push(call_part(call)?);
                }
                contents.push(ContentOut { parts, role: "model" });
                if calls.is_empty() {
                    continue;
                }
                // Pack the tool results that follow into one user content, in call order.
                let start = i;
                while i < history.len() && history[i].role == Role::Tool {
                    i += 1;
                }
                let results = &history[start..i];
                let mut packed = Vec::with_capacity(calls.len());
                for call in calls {
                    let mut matching = results.iter().filter(|r| r.tool_call_id.as_deref() == Some(call.id.as_str()));
                    let result =
                        matching.next().ok_or_else(|| err(format!("missing tool result for call {}", call.id)))?;
                    if matching.next().is_some() {
                        return Err(err(format!("duplicate tool results for call {}", call.id)));
                    }
                    packed.push(response_part(result, &call.function.name)?);
                }
                if results.len() != calls.len() {
                    return Err(err("tool results do not match the tool calls of the previous message"));
                }
                if !packed.is_empty() {
                    contents.push(ContentOut { parts: packed, role: "user" });
                }
            }
            Role::Tool => {
                // A tool message with no tool call before it: name from the id prefix.
                let id = m.tool_call_id.as_deref().unwrap_or("");
                let name = id.split('_').next().unwrap_or(id);
                contents.push(ContentOut { parts: vec![response_part(m, name)?], role: "user" });
            }
        }
    }
    Ok(contents)
}

fn declarations(tools: &[ToolSpec]) -> Vec<Value> {
    tools
        .iter()
        .map(|t| {
            let mut decl = Map::new();
            decl.insert("description".into(), Value::String(t.description.to_string()));
            decl.insert("name".into(), Value::String(t.name.clone()));
            decl.insert("parameters".into(), convert_schema(&t.parameters));
            Value::Object(decl)
        })
        .collect()
}

/// The SDK's schema rewrite: upper-case types, `anyOf` → `any_of`, `additionalProperties` →
/// `additional_properties` (its value untouched), bounds as floats, null defaults dropped, keys
/// sorted.
fn convert_schema(schema: &Map<String, Value>) -> Value {
    let mut entries: Vec<(String, Value)> = Vec::with_capacity(schema.len());
    for (key, value) in schema {
        let converted = match (key.as_str(), value) {
            ("type", Value::String(t)) => Value::String(t.to_uppercase()),
            ("type", Value::Array(ts)) => Value::Array(
                ts.iter().map(|t| t.as_str().map(|s| Value::String(s.to_uppercase())).unwrap_or(t.clone())).collect(),
            ),
            ("anyOf", Value::Array(items)) => {
                entries.push(("any_of".into(), Value::Array(items.iter().map(convert_value).collect())));
                continue;
            }
            ("additionalProperties", v) => {
                entries.push(("additional_properties".into(), v.clone()));
                continue;
            }
            ("properties", Value::Object(props)) => {
                Value::Object(props.iter().map(|(k, v)| (k.clone(), convert_value(v))).collect())
            }
            ("items", v) => convert_value(v),
            ("minimum" | "maximum", Value::Number(n)) => {
                serde_json::Number::from_f64(n.as_f64().unwrap_or(0.0)).map(Value::Number).unwrap_or(value.clone())
            }
            ("default", Value::Null) => continue,
            _ => value.clone(),
        };
        entries.push((key.clone(), converted));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    Value::Object(entries.into_iter().collect())
}

fn convert_value(v: &Value) -> Value {
    match v {
        Value::Object(m) => convert_schema(m),
        other => other.clone(),
    }
}

// ----- stream mapping ---------------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Chunk<'a> {
    #[serde(borrow, default)]
    candidates: Vec<Candidate<'a>>,
    #[serde(default)]
    usage_metadata: Option<UsageMetadata>,
    #[serde(borrow, default)]
    response_id: Option<Cow<'a, str>>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate<'a> {
    #[serde(borrow, default)]
    content: Option<CandidateContent<'a>>,
    #[serde(borrow, default)]
    finish_reason: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct CandidateContent<'a> {
    #[serde(borrow, default)]
    parts: Vec<Part<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Part<'a> {
    #[serde(borrow, default)]
    text: Option<Cow<'a, str>>,
    #[serde(default)]
    thought: Option<bool>,
    #[serde(default)]
    function_call: Option<FunctionCallIn>,
    #[serde(borrow, default)]
    thought_signature: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct FunctionCallIn {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    args: Option<Value>,
}

#[derive(Deserialize, Clone, Copy)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    #[serde(default)]
    prompt_token_count: Option<u64>,
    #[serde(default)]
    candidates_token_count: Option<u64>,
    #[serde(default)]
    cached_content_token_count: Option<u64>,
}

/// Process-unique suffix for tool calls without an API id (the reference uses an address).
static NEXT_CALL: AtomicU64 = AtomicU64::new(1);

#[derive(Default)]
pub(crate) struct GeminiMapper {
    id: Option<String>,
    usage: Option<UsageMetadata>,
}

/// A candidate's `finishReason`: the token limit, or one of the reasons the content was blocked.
fn model_stop(reason: &str) -> Option<ModelStop> {
    match reason {
        "MAX_TOKENS" => Some(ModelStop::MaxTokens),
        "SAFETY" | "RECITATION" | "BLOCKLIST" | "PROHIBITED_CONTENT" | "SPII" => Some(ModelStop::Refusal),
        _ => None,
    }
}

/// The API sends the signature as standard base64; the reference re-encodes the decoded bytes
/// with standard base64 again, so valid input passes through unchanged.
fn signature_b64(sig: &str) -> String {
    let engine = base64::engine::general_purpose::STANDARD;
    match base64::engine::general_purpose::URL_SAFE.decode(sig).or_else(|_| engine.decode(sig)) {
        Ok(bytes) => engine.encode(bytes),
        Err(_) => sig.to_string(),
    }
}

impl ChunkMapper for GeminiMapper {
    fn on_event(&mut self, event: SseEvent<'_>, out: &mut VecDeque<StreamEvent>) -> Result<Flow, ChatError> {
        if event.data.trim().is_empty() {
            return Ok(Flow::Continue);
        }
        let chunk: Chunk<'_> = serde_json::from_str(event.data).map_err(|e| json_error(&e))?;
        if let Some(error) = chunk.error.as_ref().filter(|e| truthy(e)) {
            let code = error.get("code").and_then(Value::as_u64).unwrap_or(0);
            let status = error.get("status").and_then(Value::as_str).unwrap_or("");
            let mut whole = Map::new();
            whole.insert("error".into(), error.clone());
            return Err(ChatError::Other(format!("{code} {status}. {}", pyrepr::repr(&Value::Object(whole)))));
        }
        if self.id.is_none() {
            self.id = chunk.response_id.map(Cow::into_owned);
        }
        if let Some(usage) = chunk.usage_metadata {
            self.usage = Some(usage);
        }
        for candidate in chunk.candidates {
            let stop = candidate.finish_reason.as_deref().and_then(model_stop);
            for part in candidate.content.into_iter().flat_map(|c| c.parts) {
                if part.thought == Some(true)
                    && let Some(text) = part.text
                {
                    out.push_back(StreamEvent::Content(ContentPart::Think {
                        think: text.into_owned(),
                        encrypted: None,
                    }));
                } else if let Some(text) = part.text.filter(|t| !t.is_empty()) {
                    out.push_back(StreamEvent::Content(ContentPart::Text { text: text.into_owned() }));
                } else if let Some(call) = part.function_call
                    && let Some(name) = call.name.filter(|n| !n.is_empty())
                {
                    let id = match call.id {
                        Some(id) => format!("{name}_{id}"),
                        None => format!("{name}_{}", NEXT_CALL.fetch_add(1, Ordering::Relaxed)),
                    };
                    let arguments = match call.args {
                        Some(args) => pyrepr::json_dumps(&args),
                        None => "{}".to_string(),
                    };
                    let mut tool_call = ToolCall::new(id, name, Some(arguments));
                    if let Some(sig) = part.thought_signature {
                        let mut extras = Map::new();
                        extras.insert("thought_signature_b64".into(), Value::String(signature_b64(&sig)));
                        tool_call.extras = Some(extras);
                    }
                    out.push_back(StreamEvent::ToolCall(tool_call));
                }
            }
            out.extend(stop.map(StreamEvent::Stop));
        }
        Ok(Flow::Continue)
    }

    fn finish(&mut self, out: &mut VecDeque<StreamEvent>) {
        let usage = self.usage.take().map(|u| TokenUsage {
            input_other: u.prompt_token_count.unwrap_or(0),
            output: u.candidates_token_count.unwrap_or(0),
            input_cache_read: u.cached_content_token_count.unwrap_or(0),
            input_cache_creation: 0,
        });
        super::sse::push_trailer(out, self.id.take(), usage);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(data: &str) -> Vec<StreamEvent> {
        let mut m = GeminiMapper::default();
        let mut out = VecDeque::new();
        m.on_event(SseEvent { event: "", data }, &mut out).unwrap();
        m.finish(&mut out);
        out.into_iter().collect()
    }

    #[test]
    fn limit_and_blocking_finishes_are_reported() {
        let cases = [
            ("MAX_TOKENS", Some(ModelStop::MaxTokens)),
            ("SAFETY", Some(ModelStop::Refusal)),
            ("RECITATION", Some(ModelStop::Refusal)),
            ("BLOCKLIST", Some(ModelStop::Refusal)),
            ("PROHIBITED_CONTENT", Some(ModelStop::Refusal)),
            ("SPII", Some(ModelStop::Refusal)),
            ("STOP", None),
            ("MALFORMED_FUNCTION_CALL", None),
        ];
        for (reason, expected) in cases {
            let data = format!(
                r#"{{"candidates": [{{"content": {{"parts": [{{"text": "cut"}}],"role": "model"}},"finishReason": "{reason}","index": 0}}],"responseId": "r1"}}"#
            );
            let mut want = vec![StreamEvent::Content(ContentPart::Text { text: "cut".into() })];
            want.extend(expected.map(StreamEvent::Stop));
            want.push(StreamEvent::MessageId("r1".into()));
            assert_eq!(map(&data), want, "{reason}");
        }
    }

    #[test]
    fn tool_results_must_match_the_calls() {
        let history: Vec<Message> = serde_json::from_str(
            r#"[{"role":"assistant","content":[],"tool_calls":[{"type":"function","id":"a","function":{"name":"X","arguments":"{}"}},{"type":"function","id":"b","function":{"name":"Y"}}]},{"role":"tool","content":"2","tool_call_id":"b"},{"role":"tool","content":"1","tool_call_id":"a"}]"#,
        )
        .unwrap();
        let json = serde_json::to_value(encode_history(&history).unwrap()).unwrap();
        assert_eq!(json[1]["parts"][0]["functionResponse"]["name"], "X");
        assert_eq!(json[1]["parts"][1]["functionResponse"]["response"]["output"], "2");
        assert!(encode_history(&history[..2]).is_err());
    }
}
