//! What an agent runs in: the work dir, the share dir, the session, the config and the model's
//! capabilities. Built once at start-up and shared read-only by the soul and the tools.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;

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
    /// Effective capabilities of the selected model.
    pub capabilities: BTreeSet<Capability>,
    /// The chat provider, for tools that hand it media (the Kimi video upload); `None` when no
    /// model is configured.
    pub llm: Option<SharedProvider>,
}

impl AgentEnv {
    pub fn has(&self, cap: Capability) -> bool {
        self.capabilities.contains(&cap)
    }
}
