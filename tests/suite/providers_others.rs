//! `openai_responses`, `anthropic`, `gemini` and `vertexai` against the mock server.

use crate::harness;
use crate::mock_llm;

use std::sync::Arc;
use std::time::Duration;

use harness::*;
use kiwi::config::{ProviderType, ThinkingEffort};
use kiwi::llm::{ChatError, ChatProvider};
use mock_llm::{MockLlm, MockResponse, Split};
use serde_json::Value;

fn responses(mock: &MockLlm, model: &str) -> Arc<dyn ChatProvider> {
    provider(&settings(ProviderType::OpenAiResponses, &format!("{}/v1", mock.base_url()), model, ThinkingEffort::Off))
}

fn anthropic(mock: &MockLlm, thinking: ThinkingEffort) -> Arc<dyn ChatProvider> {
    provider(&settings(ProviderType::Anthropic, &mock.base_url(), "claude-sonnet-4-5", thinking))
}

fn gemini(mock: &MockLlm, model: &str, thinking: ThinkingEffort) -> Arc<dyn ChatProvider> {
    provider(&settings(ProviderType::GoogleGenAi, &mock.base_url(), model, thinking))
}

const SPLITS: fn() -> Vec<Split> =
    || vec![Split::Whole, Split::Every(1), Split::Every(13), Split::Random { seed: 3, max: 64 }];

#[tokio::test]
async fn stream_fixtures_map_like_the_reference() {
    let cases: [(&str, &str); 7] = [
        ("openai-responses-reasoning-toolcall.sse", "openai_responses"),
        ("openai-responses-failed.sse", "openai_responses"),
        ("anthropic-text.sse", "anthropic"),
        ("anthropic-thinking-toolcall.sse", "anthropic"),
        ("anthropic-stream-error.sse", "anthropic"),
        ("gemini-text.sse", "gemini"),
        ("gemini-thinking-functioncall.sse", "gemini"),
    ];
    for (fixture, ptype) in cases {
        let exp = expected(fixture, ptype);
        for split in SPLITS() {
            let mock = MockLlm::start().await;
            mock.push(MockResponse::sse_fixture(fixture).split(split));
            let p = match ptype {
                "openai_responses" => responses(&mock, "gpt-5-codex"),
                "anthropic" => anthropic(&mock, ThinkingEffort::Off),
                _ => gemini(&mock, "gemini-2.5-flash", ThinkingEffort::Off),
            };
            let outcome = run_hi(p.as_ref()).await;
            assert_matches_expected(&outcome, &exp);
            assert_eq!(mock.request_count(), 1);
            if let Some(err) = &outcome.error {
                assert!(!err.is_retryable(), "{fixture}: {err:?}");
            }
        }
    }
}

#[tokio::test]
async fn gemini_accepts_lf_framing_too() {
    let body = String::from_utf8(mock_llm::fixture("gemini-text.sse")).unwrap().replace("\r\n", "\n");
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse(body).split(Split::Every(5)));
    let outcome = run_hi(gemini(&mock, "gemini-2.5-flash", ThinkingEffort::Off).as_ref()).await;
    assert_matches_expected(&outcome, &expected("gemini-text.sse", "gemini"));
}

#[tokio::test]
async fn http_errors_and_retry_counts() {
    for (fixture, status, ptype) in [
        ("anthropic-error-overloaded.json", 529, "anthropic"),
        ("anthropic-error-429.json", 429, "anthropic"),
        ("gemini-error-429.json", 429, "gemini"),
        ("gemini-error-400.json", 400, "gemini"),
    ] {
        let exp = expected(fixture, ptype);
        let mock = MockLlm::start().await;
        mock.push(MockResponse::json_fixture(status, fixture));
        let p = if ptype == "anthropic" {
            anthropic(&mock, ThinkingEffort::Off)
        } else {
            gemini(&mock, "gemini-2.5-flash", ThinkingEffort::Off)
        };
        let outcome = run_hi(p.as_ref()).await;
        assert_matches_expected(&outcome, &exp);
        assert_eq!(mock.request_count() as u64, exp["sdk_http_requests"].as_u64().unwrap(), "{fixture}");
        assert_eq!(outcome.error.unwrap().is_retryable(), status == 429, "{fixture}");
    }
    // Responses shares the openai SDK's error handling.
    let mock = MockLlm::start().await;
    mock.push(MockResponse::json_fixture(401, "openai-error-401.json"));
    let outcome = run_hi(responses(&mock, "gpt-5-codex").as_ref()).await;
    assert_eq!(outcome.error.unwrap().to_string(), expected("openai-error-401.json", "openai_legacy")["str"]);
    assert_eq!(mock.request_count(), 1);
}

#[tokio::test]
async fn anthropic_429_then_success() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::json_fixture(429, "anthropic-error-429.json"));
    mock.push(MockResponse::sse_fixture("anthropic-text.sse"));
    let outcome = run_hi(anthropic(&mock, ThinkingEffort::Off).as_ref()).await;
    assert_matches_expected(&outcome, &expected("anthropic-text.sse", "anthropic"));
    assert_eq!(mock.request_count(), 2);
    assert_eq!(mock.requests()[1].header("x-stainless-retry-count"), Some("1"));
}

#[tokio::test]
async fn cut_streams_and_refused_connections() {
    for (fixture, ptype) in [("anthropic-text.sse", "anthropic"), ("gemini-text.sse", "gemini")] {
        let body = mock_llm::fixture(fixture);
        let mock = MockLlm::start().await;
        mock.push(MockResponse::sse(body.clone()).cut_at(body.len() / 2).split(Split::Every(40)));
        let p = if ptype == "anthropic" {
            anthropic(&mock, ThinkingEffort::Off)
        } else {
            gemini(&mock, "gemini-2.5-flash", ThinkingEffort::Off)
        };
        let outcome = run_hi(p.as_ref()).await;
        assert!(outcome.error.is_some(), "{fixture}: a cut stream must fail");
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let p = provider(&settings(
        ProviderType::GoogleGenAi,
        &format!("http://127.0.0.1:{port}"),
        "gemini-2.5-flash",
        ThinkingEffort::Off,
    ));
    let err = run_hi(p.as_ref()).await.error.unwrap();
    assert_eq!(err, ChatError::Connection("Connection error.".into()));
}

#[tokio::test]
async fn dropping_a_slow_call_closes_the_connection() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse_fixture("anthropic-text.sse").first_byte_delay(Duration::from_secs(30)));
    let p = anthropic(&mock, ThinkingEffort::Off);
    let outcome = tokio::time::timeout(Duration::from_millis(200), run_hi(p.as_ref())).await;
    assert!(outcome.is_err());
    assert!(mock.wait_disconnects(1, Duration::from_secs(5)).await);
}

async fn check_capture(name: &str, p: impl FnOnce(&MockLlm) -> Arc<dyn ChatProvider>, fixture: &str, headers: &[&str]) {
    let case = captured(name);
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse_fixture(fixture));
    let provider = p(&mock);
    run(provider.as_ref(), &case.system_prompt, &case.tools, &case.history).await;
    let got = &mock.requests()[0];
    assert_request_matches(got, &case.request, headers);
}

#[tokio::test]
async fn requests_match_the_captures() {
    let openai_headers = ["User-Agent", "Authorization", "Accept", "Content-Type"];
    let sse = "openai-responses-failed.sse";
    check_capture("openai-responses-default.json", |m| responses(m, "gpt-5-codex"), sse, &openai_headers).await;
    check_capture("openai-responses-nonopenai-model.json", |m| responses(m, "my-proxy-model"), sse, &openai_headers)
        .await;

    let anthropic_headers =
        ["X-Api-Key", "anthropic-version", "anthropic-beta", "User-Agent", "Accept", "Content-Type"];
    let sse = "anthropic-text.sse";
    check_capture("anthropic-default.json", |m| anthropic(m, ThinkingEffort::Off), sse, &anthropic_headers).await;
    check_capture(
        "anthropic-thinking-system-msg.json",
        |m| anthropic(m, ThinkingEffort::High),
        sse,
        &anthropic_headers,
    )
    .await;

    let google_headers = ["x-goog-api-key", "User-Agent", "x-goog-api-client", "Accept", "Content-Type"];
    let sse = "gemini-text.sse";
    for (name, model, thinking) in [
        ("gemini-default.json", "gemini-2.5-flash", ThinkingEffort::Off),
        ("gemini-image-systemmsg-notools.json", "gemini-2.5-flash", ThinkingEffort::Off),
        ("gemini-two-tools-complex-schema.json", "gemini-2.5-flash", ThinkingEffort::Off),
        ("gemini-3-thinking.json", "gemini-3-pro-preview", ThinkingEffort::High),
    ] {
        check_capture(name, |m| gemini(m, model, thinking), sse, &google_headers).await;
    }
    check_capture(
        "vertexai-apikey.json",
        |m| provider(&settings(ProviderType::VertexAi, &m.base_url(), "gemini-2.5-pro", ThinkingEffort::Off)),
        sse,
        &google_headers,
    )
    .await;
}

#[tokio::test]
async fn gemini_sends_thought_signatures_back() {
    let history: Vec<kiwi::llm::Message> = serde_json::from_str(
        r#"[{"role":"user","content":"go"},{"role":"assistant","content":[],"tool_calls":[{"type":"function","id":"Shell_1","function":{"name":"Shell","arguments":"{\"command\": \"ls\"}"},"extras":{"thought_signature_b64":"bW9jay10aG91Z2h0"}}]},{"role":"tool","content":"ok","tool_call_id":"Shell_1"}]"#,
    )
    .unwrap();
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse_fixture("gemini-text.sse"));
    let p = gemini(&mock, "gemini-2.5-flash", ThinkingEffort::Off);
    run(p.as_ref(), "", &[], &history).await;
    let body = mock.requests()[0].json();
    assert_eq!(body["contents"][1]["parts"][0]["thoughtSignature"], Value::String("bW9jay10aG91Z2h0".into()));
    assert_eq!(body["contents"][2]["parts"][0]["functionResponse"]["response"]["output"], "ok");
}
