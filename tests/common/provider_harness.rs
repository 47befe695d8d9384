//! Helpers shared by the `providers_*` tests: settings, running a stream to the end, and
//! comparing against `expected-results.json` / `requests/*.json`.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt as _;
use kiwi::llm::providers::build_http_provider;
use kiwi::llm::settings::{
    GenerationOverrides, LlmSettings, ModelSettings, ProviderConfig, ProviderType, ThinkingEffort,
};
use kiwi::llm::{ChatError, ChatProvider, ChatRequest, Message, StreamEvent, ToolSpec};
use serde_json::{Map, Value};

use super::mock_llm::fixtures_dir;

pub fn settings(kind: ProviderType, base_url: &str, model: &str, thinking: ThinkingEffort) -> LlmSettings {
    LlmSettings {
        provider: ProviderConfig {
            kind,
            base_url: base_url.to_string(),
            api_key: "sk-mock-key".to_string(),
            env: BTreeMap::new(),
            custom_headers: BTreeMap::new(),
            oauth: None,
            reasoning_key: None,
        },
        model: ModelSettings { model: model.to_string(), max_context_size: 100_000 },
        capabilities: Default::default(),
        thinking,
        generation: GenerationOverrides::default(),
    }
}

pub fn provider(settings: &LlmSettings) -> Arc<dyn ChatProvider> {
    build_http_provider(settings, "sess-mock-0001").expect("provider builds")
}

/// What one call produced: every event in order and the error that ended it, if any.
#[derive(Debug, Default)]
pub struct Outcome {
    pub events: Vec<StreamEvent>,
    pub error: Option<ChatError>,
}

impl Outcome {
    pub fn parts(&self) -> Vec<Value> {
        self.events.iter().filter_map(part_json).collect()
    }

    pub fn usage(&self) -> Value {
        self.events
            .iter()
            .rev()
            .find_map(|e| match e {
                StreamEvent::Usage(u) => Some(serde_json::to_value(u).unwrap()),
                _ => None,
            })
            .unwrap_or(Value::Null)
    }

    pub fn id(&self) -> Option<String> {
        self.events.iter().rev().find_map(|e| match e {
            StreamEvent::MessageId(id) => Some(id.clone()),
            _ => None,
        })
    }
}

pub async fn run(provider: &dyn ChatProvider, system: &str, tools: &[ToolSpec], history: &[Message]) -> Outcome {
    let request = ChatRequest { system_prompt: system, tools, history };
    let mut outcome = Outcome::default();
    match provider.stream(request).await {
        Err(e) => outcome.error = Some(e),
        Ok(mut stream) => {
            while let Some(item) = stream.next().await {
                match item {
                    Ok(ev) => outcome.events.push(ev),
                    Err(e) => {
                        outcome.error = Some(e);
                        break;
                    }
                }
            }
        }
    }
    outcome
}

pub async fn run_hi(provider: &dyn ChatProvider) -> Outcome {
    run(provider, "", &[], &[Message::user_text("hi")]).await
}

fn strip_nulls(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            Value::Object(m.into_iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k, strip_nulls(v))).collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(strip_nulls).collect()),
        v => v,
    }
}

/// A part in `expected-results.json` form.
pub fn part_json(e: &StreamEvent) -> Option<Value> {
    let (kind, value) = match e {
        StreamEvent::Content(p) => {
            let kind = if p.is_think() { "ThinkPart" } else { "TextPart" };
            (kind, serde_json::to_value(p).unwrap())
        }
        StreamEvent::ToolCall(c) => ("ToolCall", serde_json::to_value(c).unwrap()),
        StreamEvent::ToolCallPart(p) => ("ToolCallPart", serde_json::to_value(p).unwrap()),
        _ => return None,
    };
    let mut out = Map::new();
    out.insert("kind".into(), Value::String(kind.into()));
    if let Value::Object(m) = strip_nulls(value) {
        out.extend(m);
    }
    Some(Value::Object(out))
}

pub fn expected_results() -> Vec<Value> {
    let text = std::fs::read_to_string(fixtures_dir().join("expected-results.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

pub fn expected(fixture: &str, provider_type: &str) -> Value {
    expected_results()
        .into_iter()
        .find(|r| r["fixture"] == fixture && r["provider_type"] == provider_type)
        .unwrap_or_else(|| panic!("no expected result for {fixture} / {provider_type}"))
}

/// Checks parts, usage, id and error text against the reference's result.
pub fn assert_matches_expected(outcome: &Outcome, expected: &Value) {
    let mut parts = outcome.parts();
    // Gemini ids end in a process-specific number; the fixture writes `<unique>`.
    for p in &mut parts {
        if let Some(id) = p.get("id").and_then(Value::as_str)
            && let Some(exp_id) = expected["parts"]
                .as_array()
                .and_then(|a| a.iter().find_map(|e| e.get("id").and_then(Value::as_str)))
                .filter(|e| e.ends_with("_<unique>"))
        {
            let prefix = exp_id.trim_end_matches("<unique>");
            assert!(id.starts_with(prefix), "id {id} lacks prefix {prefix}");
            p["id"] = Value::String(exp_id.to_string());
        }
    }
    assert_eq!(Value::Array(parts), expected["parts"], "parts of {}", expected["fixture"]);
    match expected.get("exception") {
        Some(_) => {
            let err = outcome.error.as_ref().unwrap_or_else(|| panic!("expected an error for {}", expected["fixture"]));
            assert_eq!(err.to_string(), expected["str"].as_str().unwrap());
            match (err, expected["status_code"].as_u64()) {
                (ChatError::Status { status, .. }, Some(code)) => assert_eq!(u64::from(*status), code),
                (ChatError::Status { .. }, None) => panic!("unexpected status error {err:?}"),
                (_, Some(code)) => panic!("expected status {code}, got {err:?}"),
                (_, None) => {}
            }
        }
        None => {
            assert!(outcome.error.is_none(), "unexpected error {:?}", outcome.error);
            assert_eq!(outcome.usage(), expected["usage"], "usage of {}", expected["fixture"]);
            assert_eq!(outcome.id().as_deref(), expected["id"].as_str(), "id of {}", expected["fixture"]);
        }
    }
}

/// The input and captured request of `requests/<name>`.
pub struct CapturedCase {
    pub system_prompt: String,
    pub tools: Vec<ToolSpec>,
    pub history: Vec<Message>,
    pub request: Value,
}

pub fn captured(name: &str) -> CapturedCase {
    let text = std::fs::read_to_string(fixtures_dir().join("requests").join(name)).unwrap();
    let case: Value = serde_json::from_str(&text).unwrap();
    let input = &case["input"];
    let tools = input["tools"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|t| ToolSpec {
                    name: t["name"].as_str().unwrap().into(),
                    description: t["description"].as_str().unwrap().into(),
                    parameters: t["parameters"].as_object().unwrap().clone().into(),
                })
                .collect()
        })
        .unwrap_or_default();
    CapturedCase {
        system_prompt: input["system_prompt"].as_str().unwrap_or_default().into(),
        tools,
        history: serde_json::from_value(input["history"].clone()).unwrap_or_default(),
        request: case["request"].clone(),
    }
}

/// Asserts that the recorded request has the captured path, query, body and these headers.
pub fn assert_request_matches(got: &super::mock_llm::RecordedRequest, want: &Value, headers: &[&str]) {
    assert_eq!(got.method, "POST");
    assert_eq!(got.path, want["path"].as_str().unwrap());
    assert_eq!(got.query, want["query"].as_str().unwrap());
    assert_eq!(got.json(), want["json_body"], "request body");
    for name in headers {
        let expected = want["headers"]
            .as_object()
            .unwrap()
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str().unwrap());
        assert_eq!(got.header(name), expected, "header {name}");
    }
}
