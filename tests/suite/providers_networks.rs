//! Real networks and models (`docs/providers.md` §4, `docs/configuration.md` §4): the
//! `openai_legacy` reasoning key against the mock server.

use crate::harness;
use crate::mock_llm;

use harness::*;
use kiwi::config::{ProviderType, ThinkingEffort};
use kiwi::llm::Message;
use mock_llm::{MockLlm, MockResponse};
use serde_json::{Value, json};

/// A Chat Completions stream whose first delta carries `reasoning` under `key`.
fn reasoning_stream(key: &str, reasoning: &str, text: &str) -> MockResponse {
    let think = json!({"id": "c1", "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"role": "assistant", key: reasoning}, "finish_reason": null}]});
    let answer = json!({"id": "c1", "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": "stop"}]});
    MockResponse::sse(format!("data: {think}\n\ndata: {answer}\n\ndata: [DONE]\n\n"))
}

async fn reasoning_round_trip(key: Option<&str>, wire_key: &str) {
    let mock = MockLlm::start().await;
    mock.push(reasoning_stream(wire_key, "let me think", "Answer."));
    mock.push(reasoning_stream(wire_key, "again", "Second."));
    let mut s = settings(ProviderType::OpenAiLegacy, &format!("{}/v1", mock.base_url()), "o-mini", ThinkingEffort::Off);
    s.provider.reasoning_key = key.map(str::to_string);
    let p = provider(&s);
    let first = run(p.as_ref(), "", &[], &[Message::user_text("hi")]).await;
    assert!(first.error.is_none(), "{:?}", first.error);
    assert_eq!(
        first.parts(),
        [
            json!({"kind":"ThinkPart","type":"think","think":"let me think"}),
            json!({"kind":"TextPart","type":"text","text":"Answer."})
        ]
    );
    // The think part goes back under the same key with the assistant message.
    let assistant: Message = serde_json::from_value(json!({"role": "assistant", "content": [
        {"type": "think", "think": "let me think", "encrypted": null}, {"type": "text", "text": "Answer."}]}))
    .unwrap();
    let history = [Message::user_text("hi"), assistant, Message::user_text("more")];
    run(p.as_ref(), "", &[], &history).await;
    let body = mock.requests()[1].json();
    let sent = &body["messages"][1];
    assert_eq!(sent[wire_key], "let me think", "{sent}");
    assert_eq!(sent["content"], "Answer.");
    if wire_key != "reasoning_content" {
        assert!(sent.get("reasoning_content").is_none());
    }
    assert_eq!(body["messages"][0].get(wire_key), None::<&Value>);
}

#[tokio::test]
async fn openai_legacy_reads_reasoning_content_by_default() {
    reasoning_round_trip(None, "reasoning_content").await;
}

#[tokio::test]
async fn openai_legacy_reasoning_key_names_another_member() {
    reasoning_round_trip(Some("reasoning"), "reasoning").await;
}
