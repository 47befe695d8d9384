//! Picking the model and provider, applying env overrides, deriving capabilities and the
//! thinking setting (`docs/configuration.md` §3 and §4).

use std::collections::BTreeSet;

use thiserror::Error;

use super::schema::{Config, ModelConfig, ProviderConfig, ProviderType};
use crate::llm::Capability;
pub use crate::llm::settings::{GenerationOverrides, LlmSettings, ModelSettings, ThinkingEffort};

#[derive(Debug, Error, PartialEq)]
pub enum SelectError {
    #[error("Invalid KIMI_MODEL_MAX_CONTEXT_SIZE: {0}")]
    MaxContextSize(String),
    #[error("Invalid {name}: {value}")]
    Number { name: &'static str, value: String },
}

/// A source of environment variables (the process env, or a map in tests).
pub trait Env {
    fn var(&self, name: &str) -> Option<String>;
}

pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

impl<S: std::hash::BuildHasher> Env for std::collections::HashMap<String, String, S> {
    fn var(&self, name: &str) -> Option<String> {
        self.get(name).cloned()
    }
}

fn nonempty(env: &dyn Env, name: &str) -> Option<String> {
    env.var(name).filter(|v| !v.is_empty())
}

pub fn select(
    config: &Config,
    model_flag: Option<&str>,
    thinking_flag: Option<bool>,
    env: &dyn Env,
) -> Result<LlmSettings, SelectError> {
    let name = match model_flag {
        Some(name) => Some(name),
        None if !config.default_model.is_empty() => Some(config.default_model.as_str()),
        None => None,
    };
    let picked = name
        .and_then(|n| config.models.get(n))
        .and_then(|m| config.providers.get(&m.provider).map(|p| (m.clone(), p.clone())));
    let (mut model, mut provider) = picked.unwrap_or_else(|| {
        (
            ModelConfig {
                provider: String::new(),
                model: String::new(),
                max_context_size: 100_000,
                capabilities: Vec::new(),
                display_name: None,
                usd_per_mtok: None,
            },
            ProviderConfig {
                kind: ProviderType::Kimi,
                base_url: String::new(),
                api_key: String::new(),
                env: Default::default(),
                custom_headers: Default::default(),
                oauth: None,
                reasoning_key: None,
            },
        )
    });

    let mut capabilities: BTreeSet<Capability> =
        model.capabilities.iter().filter_map(|c| Capability::parse(c)).collect();
    let mut generation = GenerationOverrides::default();
    match provider.kind {
        ProviderType::Kimi => {
            if let Some(v) = nonempty(env, "KIMI_BASE_URL") {
                provider.base_url = v;
            }
            if let Some(v) = nonempty(env, "KIMI_API_KEY") {
                provider.api_key = v;
            }
            if let Some(v) = nonempty(env, "KIMI_MODEL_NAME") {
                model.model = v;
            }
            if let Some(v) = nonempty(env, "KIMI_MODEL_MAX_CONTEXT_SIZE") {
                model.max_context_size = v.trim().parse().map_err(|_| SelectError::MaxContextSize(v.clone()))?;
            }
            if let Some(v) = nonempty(env, "KIMI_MODEL_CAPABILITIES") {
                capabilities = v.split(',').filter_map(|c| Capability::parse(&c.trim().to_lowercase())).collect();
            }
            generation.temperature = parse_env(env, "KIMI_MODEL_TEMPERATURE")?;
            generation.top_p = parse_env(env, "KIMI_MODEL_TOP_P")?;
            generation.max_tokens = parse_env(env, "KIMI_MODEL_MAX_TOKENS")?;
        }
        ProviderType::OpenAiLegacy | ProviderType::OpenAiResponses => {
            if let Some(v) = nonempty(env, "OPENAI_BASE_URL") {
                provider.base_url = v;
            }
            if let Some(v) = nonempty(env, "OPENAI_API_KEY") {
                provider.api_key = v;
            }
        }
        _ => {}
    }

    let id = model.model.to_lowercase();
    if id.contains("thinking") || id.contains("reason") {
        capabilities.insert(Capability::Thinking);
        capabilities.insert(Capability::AlwaysThinking);
    } else if id == "kimi-for-coding" || id == "kimi-code" {
        capabilities.extend([Capability::Thinking, Capability::ImageIn, Capability::VideoIn]);
    }

    let thinking_on = thinking_flag.unwrap_or(config.default_thinking);
    let thinking = if capabilities.contains(&Capability::AlwaysThinking)
        || (thinking_on && capabilities.contains(&Capability::Thinking))
    {
        ThinkingEffort::High
    } else if !thinking_on {
        ThinkingEffort::Off
    } else {
        ThinkingEffort::Unchanged
    };

    let model = ModelSettings { model: model.model, max_context_size: model.max_context_size };
    Ok(LlmSettings { provider, model, capabilities, thinking, generation })
}

fn parse_env<T: std::str::FromStr>(env: &dyn Env, name: &'static str) -> Result<Option<T>, SelectError> {
    match nonempty(env, name) {
        None => Ok(None),
        Some(v) => v.trim().parse().map(Some).map_err(|_| SelectError::Number { name, value: v }),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::config::load::load_text;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    const CFG: &str = r#"{"default_model":"a","models":{"a":{"provider":"k","model":"kimi-k2","max_context_size":1000},"b":{"provider":"o","model":"gpt-reasoner","max_context_size":2000,"capabilities":["image_in"]}},"providers":{"k":{"type":"kimi","base_url":"http://x","api_key":"s"},"o":{"type":"openai_legacy","base_url":"http://o","api_key":"k"}}}"#;

    #[test]
    fn default_model_and_flag_selection() {
        let c = load_text(CFG).unwrap();
        let s = select(&c, None, None, &env(&[])).unwrap();
        assert_eq!(s.model.model, "kimi-k2");
        assert!(s.is_usable());
        let s = select(&c, Some("b"), None, &env(&[])).unwrap();
        assert_eq!(s.provider.kind, ProviderType::OpenAiLegacy);
        assert!(s.capabilities.contains(&Capability::AlwaysThinking));
        assert_eq!(s.thinking, ThinkingEffort::High);
        let s = select(&c, Some("unknown"), None, &env(&[])).unwrap();
        assert!(!s.is_usable());
    }

    #[test]
    fn env_overrides_apply_to_kimi_only() {
        let c = load_text(CFG).unwrap();
        let e = env(&[
            ("KIMI_BASE_URL", "http://env"),
            ("KIMI_MODEL_CAPABILITIES", " Image_In, bogus"),
            ("OPENAI_BASE_URL", ""),
        ]);
        let s = select(&c, None, None, &e).unwrap();
        assert_eq!(s.provider.base_url, "http://env");
        assert_eq!(s.capabilities.iter().collect::<Vec<_>>(), vec![&Capability::ImageIn]);
        let s = select(&c, Some("b"), None, &e).unwrap();
        assert_eq!(s.provider.base_url, "http://o");
        let placeholder =
            select(&c, Some("zzz"), None, &env(&[("KIMI_BASE_URL", "http://e"), ("KIMI_MODEL_NAME", "m")])).unwrap();
        assert!(placeholder.is_usable());
        assert!(select(&c, None, None, &env(&[("KIMI_MODEL_MAX_CONTEXT_SIZE", "big")])).is_err());
    }

    #[test]
    fn thinking_resolution() {
        let c = load_text(CFG).unwrap();
        assert_eq!(select(&c, None, Some(true), &env(&[])).unwrap().thinking, ThinkingEffort::Unchanged);
        assert_eq!(select(&c, None, Some(false), &env(&[])).unwrap().thinking, ThinkingEffort::Off);
        let s = select(&c, None, Some(true), &env(&[("KIMI_MODEL_NAME", "kimi-for-coding")])).unwrap();
        assert_eq!(s.thinking, ThinkingEffort::High);
    }
}
