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

    /// The config file sessions are built from and the config API edits.
    pub fn config_path(&self) -> std::path::PathBuf {
        self.settings.config.path(self.share_dir())
    }

    /// The model sessions use: `-m/--model` until the UI switched the default model, else the
    /// config's `default_model`.
    pub fn model_choice(&self) -> Option<String> {
        self.hosting.setup().model
    }

    /// After a config change: reload the config for new sessions (dropping the `-m` choice when
    /// the change picked a default model), then restart the running ones (busy ones only with
    /// `force`). The config must load (the caller just wrote it); `Err` is its error text.
    pub async fn restart_sessions(&self, force: bool, model_picked: bool) -> Result<Restarted, String> {
        self.reload_setup(model_picked)?;
        Ok(self.hosting.restart_running(force).await)
    }

    /// Builds later sessions from the config as it is now on disk.
    pub fn reload_setup(&self, model_picked: bool) -> Result<(), String> {
        let model = if model_picked { None } else { self.model_choice() };
        let choice = super::setup::ConfigChoice { model, ..self.settings.config.clone() };
        let (setup, warnings) = choice.setup(self.share_dir())?;
        for warning in warnings {
            tracing::warn!("{warning}");
        }
        self.hosting.replace_setup(setup);
        Ok(())
    }

    /// Installs the upload delivery of `docs/web.md` §6.1 (the REST layer's).
    pub fn set_upload_hook(&self, hook: Arc<dyn UploadHook>) {
        self.hosting.set_upload_hook(hook);
    }
}
