//! A chat provider whose key is a stored login (`docs/subcommands.md` §3.7, §3.9): it wraps the
//! provider the config names and keeps it on the current token.
//!
//! Invariants:
//! * every call first refreshes the Kimi Code token when it is due (this is the "start of every
//!   turn" refresh, done where the token is used), then sends the current token, or the
//!   provider's `api_key` when there is none or the server rejected it;
//! * the inner provider is rebuilt only when the key changed, and gets the client identity of
//!   the last `initialize` again;
//! * a 401 before the first fragment gets one forced refresh and one more try of the same
//!   request; a second 401, or a refresh that brings no new token, is `ChatError::LoginExpired`
//!   (-32004). Errors in the middle of a stream are passed on unchanged.

use std::sync::{Arc, Mutex, MutexGuard};

use futures::future::BoxFuture;

use super::tokens::TokenManager;
use crate::llm::settings::LlmSettings;
use crate::llm::{ChatError, ChatProvider, ChatRequest, ChatStream, ClientIdentity, SharedProvider};

struct Live {
    /// The key the provider was built with.
    key: String,
    provider: SharedProvider,
}

pub struct OAuthProvider {
    /// The config's settings; `provider.api_key` is the fallback key.
    settings: LlmSettings,
    session_id: String,
    tokens: Arc<TokenManager>,
    model_name: String,
    live: Mutex<Live>,
    client: Mutex<Option<ClientIdentity>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl OAuthProvider {
    pub fn new(settings: LlmSettings, session_id: &str, tokens: Arc<TokenManager>) -> Result<Self, String> {
        let key = tokens.access_token().unwrap_or_else(|| settings.provider.api_key.clone());
        let provider = build(&settings, &key, session_id)?;
        Ok(Self {
            model_name: provider.model_name().to_string(),
            settings,
            session_id: session_id.to_string(),
            tokens,
            live: Mutex::new(Live { key, provider }),
            client: Mutex::new(None),
        })
    }

    /// The provider on the current key, rebuilt when the key changed.
    fn current(&self) -> Result<SharedProvider, ChatError> {
        let key = self.tokens.access_token().unwrap_or_else(|| self.settings.provider.api_key.clone());
        let mut live = lock(&self.live);
        if live.key != key {
            let provider = build(&self.settings, &key, &self.session_id).map_err(ChatError::Other)?;
            provider.set_client(lock(&self.client).clone());
            *live = Live { key, provider };
        }
        Ok(live.provider.clone())
    }
}

fn build(settings: &LlmSettings, key: &str, session_id: &str) -> Result<SharedProvider, String> {
    let mut settings = settings.clone();
    settings.provider.api_key = key.to_string();
    crate::llm::providers::build_http_provider(&settings, session_id)
}

fn is_unauthorized(result: &Result<ChatStream, ChatError>) -> bool {
    matches!(result, Err(ChatError::Status { status: 401, .. }))
}

impl ChatProvider for OAuthProvider {
    fn model_name(&self) -> &str {
        &self.model_name
    }

    fn stream<'a>(&'a self, request: ChatRequest<'a>) -> BoxFuture<'a, Result<ChatStream, ChatError>> {
        Box::pin(async move {
            self.tokens.refresh_if_due().await;
            let first = self.current()?.stream(request).await;
            if !is_unauthorized(&first) {
                return first;
            }
            tracing::warn!("the model provider answered 401; refreshing the login and trying once more");
            if !self.tokens.force_refresh().await {
                return Err(ChatError::LoginExpired);
            }
            let second = self.current()?.stream(request).await;
            if is_unauthorized(&second) {
                tracing::warn!("the model provider answered 401 again after a refresh: the login has expired");
                return Err(ChatError::LoginExpired);
            }
            second
        })
    }

    fn set_client(&self, client: Option<ClientIdentity>) {
        *lock(&self.client) = client.clone();
        lock(&self.live).provider.set_client(client);
    }

    fn upload_video<'a>(&'a self, data: &'a [u8], mime: &'a str) -> BoxFuture<'a, Result<Option<String>, ChatError>> {
        Box::pin(async move { self.current()?.upload_video(data, mime).await })
    }
}
