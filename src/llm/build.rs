//! Builds the chat provider chosen by the config.

use std::sync::Arc;

use super::SharedProvider;
use super::echo::{EchoProvider, ScriptedEchoProvider};
use crate::config::{LlmSettings, ProviderType};

/// A sink for the scripted-echo trace lines (they go to stdout through the single writer).
pub type TraceSink = Box<dyn Fn(String) + Send + Sync>;

/// `Ok(None)` when no usable model is configured ("LLM not set").
pub fn build_provider(
    settings: &LlmSettings,
    session_id: &str,
    trace: Option<TraceSink>,
) -> Result<Option<SharedProvider>, String> {
    if !settings.is_usable() {
        return Ok(None);
    }
    let provider: SharedProvider = match settings.provider.kind {
        ProviderType::Echo => Arc::new(EchoProvider::new()),
        ProviderType::ScriptedEcho => {
            let path = settings
                .provider
                .env
                .get("KIMI_SCRIPTED_ECHO_SCRIPTS")
                .cloned()
                .or_else(|| std::env::var("KIMI_SCRIPTED_ECHO_SCRIPTS").ok());
            Arc::new(ScriptedEchoProvider::from_env_path(path, trace)?)
        }
        _ => super::providers::build_http_provider(settings, session_id)?,
    };
    Ok(Some(provider))
}
