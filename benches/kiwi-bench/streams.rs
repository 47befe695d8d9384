//! The SSE bodies the mock Kimi server streams in the benchmark: OpenAI-compatible
//! `chat.completion.chunk` events, Moonshot-style usage inside the last choice, then `[DONE]`.

use serde_json::{Value, json};

fn data(out: &mut String, chunk: &Value) {
    out.push_str("data: ");
    out.push_str(&chunk.to_string());
    out.push_str("\n\n");
}

/// Moonshot puts the usage inside the last choice.
fn finish(out: &mut String, reason: &str, prompt_tokens: u64) {
    data(
        out,
        &json!({"id":"chatcmpl-bench","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},
            "finish_reason":reason,"usage":{"prompt_tokens":prompt_tokens,"completion_tokens":20,
            "total_tokens":prompt_tokens + 20}}]}),
    );
    out.push_str("data: [DONE]\n\n");
}

/// `n` one-token content chunks, then the finish chunk and `[DONE]`.
pub fn text_stream(n: usize, token: &str) -> String {
    let one = json!({"id":"chatcmpl-bench","choices":[{"index":0,"delta":{"content":token}}]}).to_string();
    let mut out = String::with_capacity((one.len() + 8) * n + 512);
    for _ in 0..n {
        out.push_str("data: ");
        out.push_str(&one);
        out.push_str("\n\n");
    }
    finish(&mut out, "stop", 1000);
    out
}

/// One `SetTodoList` call: the name delta, then its arguments in four pieces.
pub fn todo_call_stream(step: usize, prompt_tokens: u64) -> String {
    let mut out = String::new();
    data(&mut out, &json!({"id":"chatcmpl-bench","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}));
    data(
        &mut out,
        &json!({"id":"chatcmpl-bench","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,
            "id":format!("SetTodoList:{step}"),"type":"function",
            "function":{"name":"SetTodoList","arguments":""}}]}}]}),
    );
    let args = format!(r#"{{"todos": [{{"title": "step {step}", "status": "in_progress"}}]}}"#);
    let quarter = args.len().div_ceil(4);
    for piece in args.as_bytes().chunks(quarter) {
        let piece = std::str::from_utf8(piece).expect("ascii");
        data(
            &mut out,
            &json!({"id":"chatcmpl-bench","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,
                "function":{"arguments":piece}}]}}]}),
        );
    }
    finish(&mut out, "tool_calls", prompt_tokens);
    out
}
