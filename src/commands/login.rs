//! `kiwi login [--json]`: the OAuth device flow of `docs/subcommands.md` §3.3, writing the login
//! into the default config (§3.5) and the credential file (§3.6).
//!
//! Invariants: the order of the flow is the reference's (the token is saved before the model
//! list is fetched, so a failed listing leaves a usable login and an untouched config); an
//! expired device code restarts the flow; the config is written only after everything else
//! worked; the verification URL line is printed (and flushed) before the first poll.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::Reporter;
use crate::auth::KIMI_CODE_KEY;
use crate::auth::credential::{self, Credential};
use crate::auth::endpoints::{self, DeviceAuthorization, Poll};
use crate::auth::managed;

enum Polled {
    Granted(Credential),
    Expired,
    Failed(String),
}

pub(super) async fn run(share: &Path, out: &mut Reporter) {
    let (mut config, config_path) = match crate::config::load_default(share) {
        Ok(loaded) => loaded,
        Err(e) => return out.error(&format!("Login failed: {e}")),
    };
    let client = match endpoints::client() {
        Ok(c) => c,
        Err(e) => return out.error(&format!("Login failed: {e}")),
    };
    let granted = loop {
        let auth = match endpoints::device_authorization(&client).await {
            Ok(a) => a,
            Err(e) => return out.error(&format!("Login failed: {e}")),
        };
        out.info("Please visit the following URL to finish authorization.");
        let url = &auth.verification_uri_complete;
        out.emit(
            "verification_url",
            &format!("Verification URL: {url}"),
            Some(json!({"verification_url": url, "user_code": auth.user_code})),
        );
        crate::browser::open(url);
        match poll(&client, &auth, out).await {
            Polled::Granted(c) => break c,
            Polled::Expired => out.info("Device code expired, restarting login..."),
            Polled::Failed(e) => return out.error(&format!("Login failed: {e}")),
        }
    };
    let Some(path) = credential::path_for(share, KIMI_CODE_KEY) else {
        return out.error("Login failed: no credential file for the Kimi Code login");
    };
    if let Err(e) = credential::write(&path, &granted) {
        return out.error(&format!("Login failed: cannot save the login to {}: {e}", path.display()));
    }
    tracing::info!(path = %path.display(), "login saved");
    let base_url = endpoints::platform_base_url();
    let models = match endpoints::list_models(&client, &base_url, &granted.access_token).await {
        Ok(m) => m,
        Err(e) => return out.error(&format!("Failed to get models: {e}")),
    };
    if models.is_empty() {
        return out.error("No models available for the selected platform.");
    }
    managed::apply_login(&mut config, &base_url, &models);
    if let Err(e) = managed::save(&config_path, &config) {
        return out.error(&format!("Login failed: {e}"));
    }
    out.success("Logged in successfully.");
}

/// Polls at once, then every `interval` seconds, until the login is granted, the device code
/// expires or polling fails. The first "not yet" answer is reported once.
async fn poll(client: &reqwest::Client, auth: &DeviceAuthorization, out: &mut Reporter) -> Polled {
    let mut reported = false;
    loop {
        match endpoints::poll_token(client, &auth.device_code).await {
            Ok(Poll::Granted(c)) => return Polled::Granted(c),
            Ok(Poll::Expired) => return Polled::Expired,
            Ok(Poll::Waiting { error, description }) => {
                if !reported {
                    reported = true;
                    out.emit(
                        "waiting",
                        &format!("Waiting for user authorization...: {}", description.trim()),
                        Some(json!({"error": error, "error_description": description})),
                    );
                }
            }
            Err(e) => return Polled::Failed(e),
        }
        tokio::time::sleep(Duration::from_secs(auth.interval)).await;
    }
}
