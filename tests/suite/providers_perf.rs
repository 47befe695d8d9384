//! 20,000 one-token chunks through the shared SSE layer + Kimi mapper: every chunk must arrive,
//! in order. Speed is not asserted here (tests never time things); the measured rate is written
//! to a temp file for curiosity, and `kiwi-bench` reports the real numbers end to end.

use crate::harness;
use crate::mock_llm;

use std::time::Instant;

use futures::StreamExt as _;
use harness::*;
use kiwi::config::{ProviderType, ThinkingEffort};
use kiwi::llm::{ChatRequest, Message, StreamEvent};
use mock_llm::{MockLlm, MockResponse, Split};

const CHUNKS: usize = 20_000;

fn thread_cpu() -> std::time::Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime only writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    std::time::Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[tokio::test]
async fn twenty_thousand_chunks_all_arrive() {
    let mut body = String::new();
    for i in 0..CHUNKS {
        body.push_str(&format!(
            "data: {{\"id\":\"chatcmpl-perf\",\"object\":\"chat.completion.chunk\",\"created\":1767225600,\"model\":\"kimi-k2\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"t{i}\"}},\"finish_reason\":null}}]}}\n\n"
        ));
    }
    body.push_str("data: [DONE]\n\n");
    let mock = MockLlm::start().await;
    mock.push(MockResponse::sse(body).split(Split::Every(16 * 1024)));
    let p = provider(&settings(ProviderType::Kimi, &format!("{}/v1", mock.base_url()), "kimi-k2", ThinkingEffort::Off));
    let history = [Message::user_text("hi")];
    let (wall, cpu) = (Instant::now(), thread_cpu());
    let mut stream = p.stream(ChatRequest { system_prompt: "", tools: &[], history: &history }).await.unwrap();
    let mut texts = 0;
    while let Some(ev) = stream.next().await {
        if let StreamEvent::Content(_) = ev.unwrap() {
            texts += 1;
        }
    }
    let (wall, cpu) = (wall.elapsed(), thread_cpu() - cpu);
    assert_eq!(texts, CHUNKS);
    let rate = CHUNKS as f64 / wall.as_secs_f64();
    let per_chunk = cpu.as_secs_f64() * 1e6 / CHUNKS as f64;
    tracing::info!(rate, per_chunk, "perf");
    std::fs::write(
        std::env::temp_dir().join("kiwi-providers-perf.txt"),
        format!("events/s {rate:.0}, cpu µs/chunk {per_chunk:.2}, wall {wall:?}\n"),
    )
    .ok();
}
