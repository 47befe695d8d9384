//! The real LLM providers over streaming HTTP (`docs/providers.md` §1-§7).
//!
//! Invariants:
//! * every provider builds its request body once per call, serializing straight from the borrowed
//!   history (typed serde structs, no `Value` trees), and re-sends the same bytes on SDK retries;
//! * every provider streams through the one SSE layer in [`sse`], whose per-provider mappers turn
//!   each event into `StreamEvent`s; message id and usage are emitted once, at the end of a stream
//!   that finished normally;
//! * nothing is spawned: the HTTP request lives inside the returned future / stream, so dropping
//!   either drops the connection at once;
//! * errors carry the reference's -32003 texts and the classification of §2.4 (SDK-level retries
//!   happen here; the agent-level retry loop belongs to the soul).

mod anthropic;
mod chaos;
mod chat_completions;
mod gemini;
mod google_auth;
mod http;
pub(crate) mod identity;
pub mod pyrepr;
mod responses;
pub mod sse;

use std::sync::Arc;

use crate::llm::ChatProvider;
use crate::llm::settings::LlmSettings;
use crate::llm::settings::ProviderType;

/// The kimi-cli version we present ourselves as, so captured requests match the reference.
pub const KIMI_CLI_COMPAT_VERSION: &str = "1.8.0";

/// Builds the HTTP provider for every non-echo provider type. `session_id` becomes Kimi's
/// `prompt_cache_key`.
pub fn build_http_provider(settings: &LlmSettings, session_id: &str) -> Result<Arc<dyn ChatProvider>, String> {
    let client = http::new_client()?;
    Ok(match settings.provider.kind {
        ProviderType::Kimi => Arc::new(chat_completions::ChatCompletions::kimi(client, settings, session_id)?),
        ProviderType::Chaos => Arc::new(chat_completions::ChatCompletions::chaos(client, settings)?),
        ProviderType::OpenAiLegacy => Arc::new(chat_completions::ChatCompletions::openai(client, settings)?),
        ProviderType::OpenAiResponses => Arc::new(responses::Responses::new(client, settings)?),
        ProviderType::Anthropic => Arc::new(anthropic::Anthropic::new(client, settings)?),
        ProviderType::GoogleGenAi => Arc::new(gemini::Gemini::new(client, settings, false)?),
        ProviderType::VertexAi => Arc::new(gemini::Gemini::new(client, settings, true)?),
        ProviderType::Echo | ProviderType::ScriptedEcho => {
            return Err("echo providers are not HTTP providers".to_string());
        }
    })
}

/// A `vertexai` provider without an API key reads Application Default Credentials: what is wrong
/// with them, checked without any network (`None` when they look usable or are not used).
pub fn vertex_credentials_problem(settings: &LlmSettings) -> Option<String> {
    if settings.provider.kind != ProviderType::VertexAi || !gemini::uses_adc(settings) {
        return None;
    }
    google_auth::check_credentials(settings).err()
}
