//! What every handler of `kiwi web` shares ([`AppState`], cheap to clone): the settings the
//! server runs with and the hosted sessions, with the questions the REST API asks about them.
//!
//! The REST layer (`web::rest`) reads and writes the share dir itself; for anything about a
//! running session (its status, whether it is busy, stopping it before a delete, restarting it
//! after a config change) it asks here.

use std::path::Path;
use std::sync::Arc;

use super::hosted::{Hosting, Restarted, SessionPlace, SessionStatus, UploadHook};
use super::settings::Settings;

#[derive(Clone)]
pub struct AppState {
    pub settings: Arc<Settings>,
    pub hosting: Hosting,
}

impl AppState {
    pub fn new(settings: Settings, hosting: Hosting) -> Self {
        Self { settings: Arc::new(settings), hosting }
    }

    /// `$KIMI_SHARE_DIR`, else `~/.kimi`.
    pub fn share_dir(&self) -> &Path {
        &self.settings.share_dir
    }

    /// Sensitive APIs (config writes, open-in, hidden files) are refused (`docs/web.md` §6.3).
    pub fn restricted(&self) -> bool {
        self.settings.restrict_sensitive_apis
    }

    /// `GET /api/config/`'s `sandbox` member: the mode sessions get and whether their commands
    /// may use the network (spec sandbox.md §2.7).
    pub fn sandbox_view(&self) -> serde_json::Value {
        let sandbox = self.hosting.setup().sandbox.sandbox;
        serde_json::json!({"mode": sandbox.mode().as_str(), "network": sandbox.network_allowed()})
    }

    /// A stored session by id, in any work dir of `kimi.json`.
    pub fn locate(&self, session_id: &str) -> Option<SessionPlace> {
        self.hosting.locate(session_id)
    }

    /// The SessionStatus of a session the server runs (or ran), `None` otherwise (the REST
    /// `status: null`).
    pub fn status(&self, session_id: &str) -> Option<SessionStatus> {
        self.hosting.status(session_id)
    }

    /// The REST `is_running`: a live session is open for it.
    pub fn is_running(&self, session_id: &str) -> bool {
        self.hosting.is_running(session_id)
    }

    /// A prompt is in flight (the REST "busy" refusals).
    pub fn is_busy(&self, session_id: &str) -> bool {
        self.hosting.is_busy(session_id)
    }

    /// Stops a session before it is deleted: its sockets get `stopped` and close 1001.
    pub async fn stop_session(&self, session_id: &str) {
        self.hosting.stop(session_id).await;
    }

    /// After a config change: reload the default config for new sessions, then restart the
    /// running ones (busy ones only with `force`). The config must load (the caller just wrote
    /// it); `Err` is its error text.
    pub async fn restart_sessions(&self, force: bool) -> Result<Restarted, String> {
        let run = self.hosting.setup().sandbox;
        let flags = crate::cli::SandboxFlags { sandbox: run.mode_flag, sandbox_network: run.network_flag };
        let setup = super::serve::default_setup(self.share_dir(), flags)?;
        self.hosting.replace_setup(setup);
        Ok(self.hosting.restart_running(force).await)
    }

    /// Installs the upload delivery of `docs/web.md` §6.1 (the REST layer's).
    pub fn set_upload_hook(&self, hook: Arc<dyn UploadHook>) {
        self.hosting.set_upload_hook(hook);
    }
}
