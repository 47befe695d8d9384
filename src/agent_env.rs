//! What an agent runs in: the work dir, the share dir, the session, the config and the model.
//! Built once per session and shared by the soul and the tools; only the model can change
//! (a front end's model switch between turns), so it sits behind its own lock.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use crate::config::Config;
use crate::llm::{Capability, SharedProvider};

pub struct AgentEnv {
    /// Canonical work dir (absolute, normalized, symlinks kept); tools resolve paths against it.
    pub work_dir: PathBuf,
    /// `$KIMI_SHARE_DIR` or `~/.kimi`.
    pub share_dir: PathBuf,
    /// The session folder, where `context.jsonl` and `wire.jsonl` live.
    pub session_dir: PathBuf,
    pub session_id: String,
    pub config: Arc<Config>,
    pub model: ModelSlot,
}

/// The model a session talks to.
#[derive(Clone, Default)]
pub struct Model {
    /// The key in the config's `models` (`None`: the default model or one from the environment).
    pub key: Option<String>,
    /// The chat provider; `None` when no usable model is configured.
    pub llm: Option<SharedProvider>,
    /// Effective capabilities of the model.
    pub capabilities: BTreeSet<Capability>,
    pub max_context_size: u64,
    /// Why there is no model, when there is none (told to the client with every -32001).
    pub no_model_reason: Option<String>,
}

/// The session's current model. A turn takes the model once at its start, so a switch applies
/// from the next turn on.
#[derive(Default)]
pub struct ModelSlot(RwLock<Arc<Model>>);

impl ModelSlot {
    pub fn new(model: Model) -> Self {
        Self(RwLock::new(Arc::new(model)))
    }

    pub fn get(&self) -> Arc<Model> {
        match self.0.read() {
            Ok(m) => m.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    pub fn set(&self, model: Model) {
        match self.0.write() {
            Ok(mut m) => *m = Arc::new(model),
            Err(poisoned) => *poisoned.into_inner() = Arc::new(model),
        }
    }
}

/// Builds another model of the config for the same session: a subagent run on a `model` other
/// than the session's gets its provider from here (the builder knows how; the soul does not).
pub trait ModelSource: Send + Sync {
    /// The model `key` of the config, or one readable line saying why it cannot be used.
    fn build(&self, key: &str) -> Result<Model, String>;
}

impl AgentEnv {
    /// The same environment with another model (a subagent's `model`).
    pub fn with_model(&self, model: Model) -> Self {
        Self {
            work_dir: self.work_dir.clone(),
            share_dir: self.share_dir.clone(),
            session_dir: self.session_dir.clone(),
            session_id: self.session_id.clone(),
            config: self.config.clone(),
            model: ModelSlot::new(model),
        }
    }

    pub fn has(&self, cap: Capability) -> bool {
        self.model.get().capabilities.contains(&cap)
    }

    /// The chat provider now in use (tools that hand it media: the Kimi video upload).
    pub fn llm(&self) -> Option<SharedProvider> {
        self.model.get().llm.clone()
    }
}
