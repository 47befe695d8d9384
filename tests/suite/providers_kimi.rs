//! `kimi`, `openai_legacy` and `_chaos` (Chat Completions) against the mock server.

use crate::harness;
use crate::mock_llm;

use std::time::{Duration, Instant};

use futures::StreamExt as _;
use harness::*;
use kiwi::config::{ProviderType, ThinkingEffort};
use kiwi::llm::{ChatError, ChatRequest, ClientIdentity, Message, StreamEvent};
use mock_llm::{MockLlm, MockResponse, Split};

const KIMI_MODEL: &str = "kimi-k2-turbo-preview";

fn kimi(mock: &MockLlm) -> std::sync::Arc<dyn kiwi::llm::ChatProvider> {
    provider(&settings(ProviderType::Kimi, &format!("{}/v1", mock.base_url()), KIMI_MODEL, ThinkingEffort::Off))
}

/// `openai_legacy` as the captures were made: without a reasoning key (`reasoning_key = ""`).
fn openai(mock: &MockLlm) -> std::sync::Arc<dyn kiwi::llm::ChatProvider> {
    let mut s =
        settings(ProviderType::OpenAiLegacy, &format!("{}/v1/", mock.base_url()), "gpt-4.1", ThinkingEffort::Off);
    s.provider.reasoning_key = Some(String::new());
    provider(&s)
}

#[tokio::test]
async fn kimi_fixtures_map_like_the_reference() {
    for fixture in [
        "kimi-text.sse",
        "kimi-reasoning-and-toolcall.sse",
        "kimi-parallel-toolcalls.sse",
        "kimi-stream-error.sse",
        "openai-text.sse",
        "openai-parallel-toolcalls.sse",
    ] {
        let exp = expected(fixture, "kimi");
        for split in [Split::Whole, Split::Every(1), Split::Every(7), Split::Random { seed: 7, max: 40 }] {
            let mock = MockLlm::start().await;
            mock.push(MockResponse::sse_fixture(fixture).split(split));
            let outcome = run_hi(kimi(&mock).as_ref()).await;
            assert_matches_expected(&outcome, &exp);
            assert_eq!(mock.request_count(), 1);
        }
    }
}

#[tokio::test]
async fn openai_legacy_fixtures_map_like_the_reference() {
    for fixture in ["openai-text.sse", "openai-parallel-toolcalls.sse", "kimi-reasoning-and-toolcall.sse"] {
        let exp = expected(fixture, "openai_legacy");
        for seed in 0..3 {
            let mock = MockLlm::start().await;
            mock.push(MockResponse::sse_fixture(fixture).split(Split::Random { seed, max: 25 }));
            let outcome = run_hi(openai(&mock).as_ref()).await;
            assert_matches_expected(&outcome, &exp);
        }
    }
}

#[tokio::test]
async fn status_errors_and_sdk_retries() {
    for (fixture, status, ptype) in [
        ("kimi-error-429.json", 429, "kimi"),
        ("kimi-error-401.json", 401, "kimi"),
        ("kimi-error-400-token-limit.json", 400, "kimi"),
        ("openai-error-401.json", 401, "openai_legacy"),
        ("openai-error-429.json", 429, "openai_legacy"),
    ] {
        let exp = expected(fixture, ptype);
        let mock = MockLlm::start().await;
        mock.push(MockResponse::json_fixture(status, fixture));
        let p = if ptype == "kimi" { kimi(&mock) } else { openai(&mock) };
        let outcome = run_hi(p.as_ref()).await;
        assert_matches_expected(&outcome, &exp);
        assert_eq!(mock.request_count() as u64, exp["sdk_http_requests"].as_u64().unwrap(), "{fixture}");
        let counts: Vec<_> =
            mock.requests().iter().map(|r| r.header("x-stainless-retry-count").unwrap().to_string()).collect();
        assert_eq!(counts, ["0", "1", "2"][..counts.len()]);
        let err = outcome.error.unwrap();
        assert_eq!(err.is_retryable(), status == 429);
        if status == 429 {
            assert_eq!(err.retry_after(), Some(Duration::from_millis(1)));
        }
    }
}

#[tokio::test]
async fn a_429_then_success_is_retried_inside_the_call() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::json_fixture(429, "kimi-error-429.json"));
    mock.push(MockResponse::sse_fixture("kimi-text.sse"));
    let outcome = run_hi(kimi(&mock).as_ref()).await;
    assert_matches_expected(&outcome, &expected("kimi-text.sse", "kimi"));
    assert_eq!(mock.request_count(), 2);
}

#[tokio::test]
async fn server_errors_until_retries_run_out() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::json(500, "<html>oops</html>").header("content-type", "text/html"));
    let outcome = run_hi(kimi(&mock).as_ref()).await;
    let err = outcome.error.unwrap();
    assert_eq!(
        err,
        ChatError::Status {
            status: 500,
            message: "<html>oops</html>".into(),
            retry_after: Some(Duration::from_millis(1))
        }
    );
    assert!(err.is_retryable());
    assert_eq!(mock.request_count(), 3);

    // x-should-retry: false stops SDK retries even for a 503.
    let mock = MockLlm::start().await;
    mock.push(MockResponse::json(503, "").header("x-should-retry", "false"));
    let outcome = run_hi(kimi(&mock).as_ref()).await;
    assert_eq!(outcome.error.unwrap().to_string(), "Error code: 503");
    assert_eq!(mock.request_count(), 1);
}

#[tokio::test]
async fn connection_refused_is_a_retryable_connection_error() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let p = provider(&settings(
        ProviderType::Kimi,
        &format!("http://127.0.0.1:{port}/v1"),
        KIMI_MODEL,
        ThinkingEffort::Off,
    ));
    let started = Instant::now();
    let outcome = run_hi(p.as_ref()).await;
    let err = outcome.error.unwrap();
    assert_eq!(err, ChatError::Connection("Connection error.".into()));
    assert!(err.is_retryable());
    // Two SDK back-offs (~0.375-0.5 s and ~0.75-1 s) happened inside the call.
    assert!(started.elapsed() >= Duration::from_millis(1100), "{:?}", started.elapsed());
}

#[tokio::test]
async fn a_stream_cut_in_the_middle_is_an_error() {
    let body = mock_llm::fixture("kimi-text.sse");
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse(body.clone()).cut_at(body.len() / 2).split(Split::Every(50)));
    let outcome = run_hi(kimi(&mock).as_ref()).await;
    assert!(!outcome.parts().is_empty());
    let err = outcome.error.expect("a cut stream must fail");
    assert!(err.to_string().contains("incomplete chunked read"), "{err}");
    assert!(!err.is_retryable());
}

#[tokio::test]
async fn torn_json_and_empty_streams() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse("data: {\"id\":\"x\",\"choices\":[{\"delta\":{\"content\":\"a"));
    let outcome = run_hi(kimi(&mock).as_ref()).await;
    assert!(matches!(outcome.error, Some(ChatError::Other(ref m)) if m.starts_with("Error: ")));

    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse("data: [DONE]\n\n"));
    let outcome = run_hi(kimi(&mock).as_ref()).await;
    assert_eq!(outcome.error, Some(ChatError::EmptyResponse));

    // The end marker in the same read as the last parts: nothing is lost.
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse(
        "data: {\"id\":\"i\",\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\ndata: [DONE]\n\ndata: {\"choices\":[{\"delta\":{\"content\":\"after\"}}]}\n\n",
    ));
    let outcome = run_hi(kimi(&mock).as_ref()).await;
    assert!(outcome.error.is_none());
    assert_eq!(outcome.parts().len(), 1);
    assert_eq!(outcome.id().as_deref(), Some("i"));
}

#[tokio::test]
async fn dropping_the_call_closes_the_connection() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse_fixture("kimi-text.sse").first_byte_delay(Duration::from_secs(30)));
    let p = kimi(&mock);
    let history = [Message::user_text("hi")];
    let request = ChatRequest { system_prompt: "", tools: &[], history: &history };
    let call = p.stream(request);
    assert!(tokio::time::timeout(Duration::from_millis(200), call).await.is_err());
    assert!(mock.wait_disconnects(1, Duration::from_secs(5)).await, "the server never saw the close");

    // Dropping a stream in the middle of the body closes it too.
    let mock = MockLlm::start().await;
    mock.push(
        MockResponse::sse_fixture("kimi-text.sse").split(Split::Every(100)).write_delay(Duration::from_millis(300)),
    );
    let p = kimi(&mock);
    let mut stream = p.stream(request).await.unwrap();
    let first = stream.next().await.unwrap().unwrap();
    assert!(matches!(first, StreamEvent::Content(_)));
    drop(stream);
    assert!(mock.wait_disconnects(1, Duration::from_secs(5)).await);
}

#[tokio::test]
async fn kimi_default_request_matches_the_capture() {
    let case = captured("kimi-default.json");
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse_fixture("kimi-text.sse"));
    let p = kimi(&mock);
    let outcome = run(p.as_ref(), &case.system_prompt, &case.tools, &case.history).await;
    assert!(outcome.error.is_none());
    let got = &mock.requests()[0];
    assert_request_matches(got, &case.request, &["Accept", "Content-Type", "User-Agent", "Authorization"]);
    assert_eq!(got.header("X-Msh-Platform"), Some("kimi_cli"));
    assert_eq!(got.header("X-Msh-Version"), Some("1.8.0"));
    assert_eq!(got.header("X-Msh-Device-Id").map(str::len), Some(32));
    // Keys in the SDK's order, too.
    let keys: Vec<String> = got.json().as_object().unwrap().keys().cloned().collect();
    let want: Vec<String> = case.request["json_body"].as_object().unwrap().keys().cloned().collect();
    assert_eq!(keys, want);
}

#[tokio::test]
async fn kimi_thinking_env_builtin_request_matches_the_capture() {
    let case = captured("kimi-thinking-env-builtin.json");
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse_fixture("kimi-text.sse"));
    let mut s =
        settings(ProviderType::Kimi, &format!("{}/v1", mock.base_url()), "kimi-for-coding", ThinkingEffort::High);
    s.generation.temperature = Some(0.6);
    s.generation.top_p = Some(0.95);
    s.generation.max_tokens = Some(4096);
    s.provider.custom_headers.insert("X-Custom".into(), "yes".into());
    let p = provider(&s);
    run(p.as_ref(), &case.system_prompt, &case.tools, &case.history).await;
    assert_request_matches(&mock.requests()[0], &case.request, &["User-Agent", "Authorization", "X-Custom"]);
}

#[tokio::test]
async fn client_identity_goes_into_the_user_agent() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse_fixture("kimi-text.sse"));
    let p = kimi(&mock);
    p.set_client(Some(ClientIdentity { name: "mockclient".into(), version: Some("0.1".into()) }));
    run_hi(p.as_ref()).await;
    p.set_client(Some(ClientIdentity { name: "bare".into(), version: None }));
    run_hi(p.as_ref()).await;
    let reqs = mock.requests();
    assert_eq!(reqs[0].header("User-Agent"), Some("KimiCLI/1.8.0 (mockclient 0.1)"));
    assert_eq!(reqs[1].header("User-Agent"), Some("KimiCLI/1.8.0 (bare)"));
}

#[tokio::test]
async fn openai_legacy_request_matches_the_capture() {
    let case = captured("openai-legacy-default.json");
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse_fixture("openai-text.sse"));
    let p = openai(&mock);
    run(p.as_ref(), &case.system_prompt, &case.tools, &case.history).await;
    let got = &mock.requests()[0];
    assert_request_matches(got, &case.request, &["User-Agent", "Authorization", "Accept", "Content-Type"]);
    assert!(got.header("X-Msh-Platform").is_none());
}

#[tokio::test]
async fn chaos_eventually_gets_through() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse_fixture("kimi-text.sse"));
    let p =
        provider(&settings(ProviderType::Chaos, &format!("{}/v1", mock.base_url()), KIMI_MODEL, ThinkingEffort::Off));
    assert_eq!(p.model_name(), "chaos(kimi-k2-turbo-preview)");
    // One call: with p = 0.8 per request a synthetic 429/500/503 replaces it (up to 3 requests).
    let outcome = run_hi(p.as_ref()).await;
    match outcome.error {
        None => assert_matches_expected(&outcome, &expected("kimi-text.sse", "kimi")),
        Some(ChatError::Status { status, .. }) => assert!([429, 500, 503].contains(&status)),
        Some(e) => panic!("unexpected {e:?}"),
    }
    assert!(mock.requests().iter().all(|r| r.json().get("prompt_cache_key").is_none()));
}

/// `docs/providers.md` §3.1: third-party gateways can do without the device headers.
#[tokio::test]
async fn device_headers_can_be_turned_off_for_gateways() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse_fixture("kimi-text.sse"));
    let mut s = settings(ProviderType::Kimi, &format!("{}/v1", mock.base_url()), "kimi-k2", ThinkingEffort::Unchanged);
    s.provider.env.insert("KIWI_NO_DEVICE_HEADERS".into(), "1".into());
    let p = provider(&s);
    let outcome = run(p.as_ref(), "sys", &[], &[Message::user_text("hi")]).await;
    assert!(outcome.error.is_none());
    let got = &mock.requests()[0];
    for name in ["X-Msh-Platform", "X-Msh-Device-Id", "X-Msh-Device-Name", "X-Msh-Os-Version"] {
        assert!(got.header(name).is_none(), "{name} was sent");
    }
    assert_eq!(got.header("Authorization"), Some("Bearer sk-mock-key"));
}
