//! What building a chat provider needs: the provider's type and endpoint, the model, its
//! capabilities and generation settings. The config layer fills these in; the model layer
//! depends on nothing above it.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::Capability;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProviderType {
    #[serde(rename = "kimi")]
    Kimi,
    #[serde(rename = "openai_legacy")]
    OpenAiLegacy,
    #[serde(rename = "openai_responses")]
    OpenAiResponses,
    #[serde(rename = "anthropic")]
    Anthropic,
    #[serde(rename = "google_genai", alias = "gemini")]
    GoogleGenAi,
    #[serde(rename = "vertexai")]
    VertexAi,
    #[serde(rename = "_echo")]
    Echo,
    #[serde(rename = "_scripted_echo")]
    ScriptedEcho,
    #[serde(rename = "_chaos")]
    Chaos,
}

impl ProviderType {
    pub fn is_echo(self) -> bool {
        matches!(self, ProviderType::Echo | ProviderType::ScriptedEcho)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProviderConfig {
    #[serde(rename = "type")]
    pub kind: ProviderType,
    #[serde(default)]
    pub base_url: String,
    #[serde(default)]
    pub api_key: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub custom_headers: BTreeMap<String, String>,
    /// Where a Kimi account login keeps this provider's key (the `auth` module); the stored token
    /// then replaces `api_key`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OAuthRef>,
    /// `openai_legacy`: the message key that carries the model's reasoning, read from the stream
    /// into thinking parts and sent back with the history (`docs/providers.md` §4). Default
    /// `reasoning_content`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_key: Option<String>,
}

/// A reference to a stored OAuth credential (`docs/subcommands.md` §3.6): written by `kimi login`
/// / `kiwi login` as `oauth = {storage = "file", key = "oauth/kimi-code"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OAuthRef {
    #[serde(default)]
    pub storage: OAuthStorage,
    pub key: String,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OAuthStorage {
    /// The system keyring (legacy); kiwi reads the credential file instead.
    Keyring,
    #[default]
    File,
}

/// The selected model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelSettings {
    /// The provider's model id (empty: no model).
    pub model: String,
    /// Tokens; the denominator of context usage and the compaction threshold.
    pub max_context_size: u64,
}

/// Reasoning effort handed to a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThinkingEffort {
    /// Leave the provider's default.
    Unchanged,
    Off,
    High,
}

/// Generation parameters from `KIMI_MODEL_*` env vars (kimi provider only).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GenerationOverrides {
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_tokens: Option<u64>,
}

/// Everything needed to build the chat provider.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmSettings {
    pub provider: ProviderConfig,
    pub model: ModelSettings,
    pub capabilities: BTreeSet<Capability>,
    pub thinking: ThinkingEffort,
    pub generation: GenerationOverrides,
}

impl LlmSettings {
    /// Non-echo providers need a base URL and a model id; otherwise "LLM not set".
    pub fn is_usable(&self) -> bool {
        self.provider.kind.is_echo() || (!self.provider.base_url.is_empty() && !self.model.model.is_empty())
    }
}

/// A URL as it may appear in a log (`crate::net::loggable_url`).
pub use crate::net::loggable_url;

impl LlmSettings {
    /// A variable for the provider: its config `env` table first, then the process environment
    /// (the table is never exported into the process, so nothing else sees it).
    pub fn env_var(&self, name: &str) -> Option<String> {
        self.provider.env.get(name).cloned().or_else(|| std::env::var(name).ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_secrets_for_the_log() {
        assert_eq!(
            loggable_url("http://u:pw@127.0.0.1:1/v1?key=sk/chat"),
            "http://<redacted>@127.0.0.1:1/v1?<redacted>"
        );
        assert_eq!(
            loggable_url("https://api.moonshot.ai/v1/chat/completions"),
            "https://api.moonshot.ai/v1/chat/completions"
        );
        assert_eq!(loggable_url("not a url?key=x"), "not a url?<redacted>");
    }
}
