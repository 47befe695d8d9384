//! The README's provider config blocks are real: each one, with only its host swapped for a local
//! mock server, runs a prompt to the end, and the request goes to the path that provider type
//! expects under the `base_url` the README shows.

use crate::common;
use crate::mock_llm;

use common::Env;
use mock_llm::{MockLlm, MockResponse};
use serde_json::json;

/// The TOML blocks of the README that configure a provider.
fn provider_blocks() -> Vec<toml::Table> {
    let readme = include_str!("../../README.md");
    let section = readme.split("## From clone to a real provider").nth(1).expect("the section exists");
    let section = section.split("\n## ").next().unwrap();
    let mut blocks = Vec::new();
    let mut rest = section;
    while let Some(start) = rest.find("```toml\n") {
        let body = &rest[start + 8..];
        let end = body.find("```").unwrap();
        let table: toml::Table = toml::from_str(&body[..end]).expect("README TOML parses");
        if table.get("providers").and_then(|p| p.as_table()).is_some_and(|p| !p.is_empty()) {
            blocks.push(table);
        }
        rest = &body[end..];
    }
    blocks
}

#[test]
fn every_provider_block_in_the_readme_runs_a_prompt() {
    let blocks = provider_blocks();
    let types: Vec<String> = blocks
        .iter()
        .map(|b| {
            let providers = b["providers"].as_table().unwrap();
            providers.values().next().unwrap()["type"].as_str().unwrap().to_string()
        })
        .collect();
    assert_eq!(types, ["kimi", "openai_legacy", "openai_legacy", "anthropic", "gemini"], "the README's blocks changed");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    for mut block in blocks {
        let model_name = block["default_model"].as_str().unwrap().to_string();
        let model_id = block["models"][&model_name]["model"].as_str().unwrap().to_string();
        let providers = block.get_mut("providers").unwrap().as_table_mut().unwrap();
        let key = providers.keys().next().unwrap().clone();
        let provider = providers.get_mut(&key).unwrap().as_table_mut().unwrap();
        let kind = provider["type"].as_str().unwrap().to_string();
        let shown = provider["base_url"].as_str().unwrap().to_string();
        // Keep the README's path, swap scheme and host for the mock's.
        let path = shown.splitn(4, '/').nth(3).map(|p| format!("/{p}")).unwrap_or_default();
        let mock = rt.block_on(MockLlm::start());
        provider.insert("base_url".into(), toml::Value::String(format!("{}{path}", mock.base_url())));
        let fixture = match kind.as_str() {
            "kimi" => "kimi-text.sse",
            "openai_legacy" => "openai-text.sse",
            "anthropic" => "anthropic-text.sse",
            _ => "gemini-text.sse",
        };
        mock.push(MockResponse::sse_fixture(fixture));
        let env = Env::new();
        let config = env.dir.path().join("config.toml");
        std::fs::write(&config, toml::to_string(&block).unwrap()).unwrap();
        let mut k = env.spawn(&config, &[]);
        let (_, answer) = k.prompt("p", json!("hi"));
        assert_eq!(answer["result"]["status"], "finished", "{kind}: {answer}");
        let request = &mock.requests()[0];
        let want = match kind.as_str() {
            "kimi" | "openai_legacy" => format!("{path}/chat/completions"),
            "anthropic" => "/v1/messages".to_string(),
            _ => format!("/v1beta/models/{model_id}:streamGenerateContent"),
        };
        assert_eq!(request.path, want, "{kind}");
        drop(k);
    }
}
