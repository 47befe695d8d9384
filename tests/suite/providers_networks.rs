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

/// A SOCKS5 server (no authentication, CONNECT only) on 127.0.0.1 that relays to the asked
/// address and records every `host:port` it was asked for.
fn socks5_server() -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut client) = stream else { continue };
            let log = log.clone();
            std::thread::spawn(move || {
                let mut head = [0u8; 2];
                client.read_exact(&mut head)?;
                let mut methods = vec![0u8; head[1] as usize];
                client.read_exact(&mut methods)?;
                client.write_all(&[5, 0])?;
                let mut req = [0u8; 4];
                client.read_exact(&mut req)?;
                let host = match req[3] {
                    1 => {
                        let mut a = [0u8; 4];
                        client.read_exact(&mut a)?;
                        std::net::Ipv4Addr::from(a).to_string()
                    }
                    3 => {
                        let mut len = [0u8; 1];
                        client.read_exact(&mut len)?;
                        let mut name = vec![0u8; len[0] as usize];
                        client.read_exact(&mut name)?;
                        String::from_utf8_lossy(&name).into_owned()
                    }
                    _ => return Ok::<(), std::io::Error>(()),
                };
                let mut p = [0u8; 2];
                client.read_exact(&mut p)?;
                let target = format!("{host}:{}", u16::from_be_bytes(p));
                log.lock().unwrap().push(target.clone());
                let upstream = std::net::TcpStream::connect(&target)?;
                client.write_all(&[5, 0, 0, 1, 127, 0, 0, 1, 0, 0])?;
                let (mut c2, mut u2) = (client.try_clone()?, upstream.try_clone()?);
                std::thread::spawn(move || std::io::copy(&mut u2, &mut c2));
                let mut upstream = upstream;
                std::io::copy(&mut client, &mut upstream)?;
                Ok(())
            });
        }
    });
    (port, seen)
}

fn chat_answer(text: &str) -> MockResponse {
    let chunk = json!({"id": "c1", "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": "stop"}]});
    MockResponse::sse(format!("data: {chunk}\n\ndata: [DONE]\n\n"))
}

/// `ALL_PROXY=socks5://…` and `socks://…` (read as `socks5://`) carry the model's requests.
#[test]
fn model_calls_go_through_a_socks5_proxy() {
    for scheme in ["socks5", "socks"] {
        let env = crate::common::Env::new();
        let rt = mock_llm::background_runtime();
        let mock = rt.block_on(MockLlm::start());
        mock.push(chat_answer("via socks"));
        let (port, seen) = socks5_server();
        let config = env.provider_config("kimi", "kimi-k2", &format!("{}/v1", mock.base_url()), json!({}));
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kiwi"));
        cmd.args(["--print", "-p", "hi", "--config-file"]).arg(&config).arg("--work-dir").arg(env.work());
        cmd.env("HOME", env.home()).env("KIMI_SHARE_DIR", env.share());
        for var in [
            "KIMI_BASE_URL",
            "KIMI_API_KEY",
            "NO_PROXY",
            "no_proxy",
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "http_proxy",
            "https_proxy",
            "all_proxy",
        ] {
            cmd.env_remove(var);
        }
        cmd.env("ALL_PROXY", format!("{scheme}://127.0.0.1:{port}"));
        let out = cmd.output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{scheme}: {}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "via socks\n");
        assert_eq!(*seen.lock().unwrap(), [format!("127.0.0.1:{}", mock.port())], "{scheme}");
    }
}

/// Issue 30 item 11: an unusable proxy URL is logged without its user info or query, so a
/// password in `ALL_PROXY` never reaches `kiwi.log` (which `kiwi export` bundles).
#[test]
fn an_unusable_proxy_url_is_logged_without_its_password() {
    let env = crate::common::Env::new();
    let rt = mock_llm::background_runtime();
    let mock = rt.block_on(MockLlm::start());
    mock.push(chat_answer("direct"));
    let config = env.provider_config("kimi", "kimi-k2", &format!("{}/v1", mock.base_url()), json!({}));
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_kiwi"));
    cmd.args(["--print", "-p", "hi", "--config-file"]).arg(&config).arg("--work-dir").arg(env.work());
    cmd.env("HOME", env.home()).env("KIMI_SHARE_DIR", env.share());
    for var in crate::common::SCRUBBED_ENV {
        cmd.env_remove(var);
    }
    cmd.env_remove("NO_PROXY").env_remove("no_proxy");
    cmd.env("ALL_PROXY", "socks://proxyuser:hunter2-secret@127.0.0.1:notaport/?token=qs-secret");
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let log = std::fs::read_to_string(env.share().join("logs").join("kiwi.log")).unwrap_or_default();
    assert!(log.contains("ignoring ALL_PROXY"), "the proxy is reported: {log}\n{stderr}");
    for secret in ["hunter2-secret", "proxyuser", "qs-secret"] {
        assert!(!log.contains(secret) && !stderr.contains(secret), "{secret} leaked: {log}\n{stderr}");
    }
}
