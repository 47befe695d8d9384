//! The Kimi account login (`docs/subcommands.md` §3): stored OAuth credentials, their refresh,
//! the account's HTTP endpoints, and the chat provider and service keys that use them.
//!
//! A provider or service with `oauth = {storage, key}` gets its key from the stored credential
//! of `key` instead of `api_key` (the configured `api_key` is only the fallback when there is no
//! usable token). Credentials are files shared with kimi-cli; see [`credential`].
//!
//! Invariants: nothing here prints; tokens never reach a log line, an error text or a wire
//! frame; every network call has a deadline, and a login problem never stops start-up (the
//! worst case is a turn that answers -32004).

pub mod credential;
pub mod endpoints;
pub mod logout;
pub mod managed;
pub mod provider;
pub mod tokens;

use std::path::Path;
use std::sync::Arc;

use crate::config::schema::ServiceConfig;
use crate::llm::SharedProvider;
use crate::llm::build::TraceSink;
use crate::llm::settings::LlmSettings;

pub use tokens::{KIMI_CODE_KEY, TokenManager, manager};

/// Builds the chat provider, wrapping it in [`provider::OAuthProvider`] when the provider has an
/// `oauth` reference (the test providers ignore keys and are never wrapped). `Ok(None)` when no
/// usable model is configured.
pub fn build_provider(
    settings: &LlmSettings,
    session_id: &str,
    trace: Option<TraceSink>,
    share: &Path,
) -> Result<Option<SharedProvider>, String> {
    let oauth = settings.provider.oauth.as_ref().filter(|_| !settings.provider.kind.is_echo());
    let Some(oauth) = oauth else {
        return crate::llm::build::build_provider(settings, session_id, trace);
    };
    if !settings.is_usable() {
        return Ok(None);
    }
    let tokens = manager(share, oauth);
    tracing::info!(
        key = %oauth.key,
        stored = tokens.access_token().is_some(),
        refreshable = tokens.refreshable(),
        "the model's provider uses a stored login"
    );
    tokens.start_background();
    let provider = provider::OAuthProvider::new(settings.clone(), session_id, tokens)?;
    Ok(Some(Arc::new(provider)))
}

/// The key a Moonshot service request sends: the stored login's token when the service has an
/// `oauth` reference and a usable token, else its `api_key`. Resolved per request, so a token
/// refreshed by the chat provider is used at once.
pub fn service_api_key(service: &ServiceConfig, share: &Path) -> String {
    match &service.oauth {
        Some(oauth) => manager(share, oauth).access_token().unwrap_or_else(|| service.api_key.clone()),
        None => service.api_key.clone(),
    }
}
