//! Builds the chat provider chosen by the config.

use std::sync::Arc;

use super::SharedProvider;
use super::echo::{EchoProvider, ScriptedEchoProvider};
use super::settings::{LlmSettings, ProviderType};

/// A sink for the scripted-echo trace lines: the front end sends them straight to its writer.
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
            let path = settings.env_var("KIMI_SCRIPTED_ECHO_SCRIPTS");
            let trace_switch = settings.env_var("KIMI_SCRIPTED_ECHO_TRACE");
            Arc::new(ScriptedEchoProvider::from_env_path(path, trace_switch.as_deref(), trace)?)
        }
        _ => super::providers::build_http_provider(settings, session_id)?,
    };
    Ok(Some(provider))
}
