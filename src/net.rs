//! HTTP clients. reqwest is built without a bundled crypto provider (ring is ours, no C build);
//! every client goes through `client_builder`, which installs it first.

use std::sync::Once;

static CRYPTO: Once = Once::new();

/// A reqwest builder that is safe to `build()`: the rustls crypto provider is installed.
pub fn client_builder() -> reqwest::ClientBuilder {
    CRYPTO.call_once(|| {
        // Fails only when another provider is already the default, which serves as well.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    reqwest::Client::builder()
}

/// An error with its causes: reqwest's own text stops at "error sending request for url (…)" and
/// hides why ("Connection refused", "operation timed out") in its source chain.
pub fn error_text(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let part = s.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        source = s.source();
    }
    text
}
