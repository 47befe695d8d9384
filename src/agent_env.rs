//! What an agent runs in: the work dir, the share dir, the session, the config and the model.
//! Built once per session and shared by the soul and the tools; only the model can change
//! (a front end's model switch between turns), so it sits behind its own lock.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use crate::config::Config;
use crate::llm::{Capability, SharedProvider};
use crate::sandbox::{Sandbox, SandboxMode};

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
    /// The run's sandbox for this session's commands; shared with its subagents.
    pub sandbox: Arc<SessionSandbox>,
}

/// What a front end built from `--sandbox`, `--sandbox-network` and `[sandbox]` (spec
/// sandbox.md §2.3): the probed sandbox every session of the run starts with, and what is
/// needed to build a stricter one (ACP's `sandbox` option, §2.5). Never saved with a session.
#[derive(Debug, Clone)]
pub struct SandboxRun {
    /// Probed (fail closed) before the front end serves.
    pub sandbox: Sandbox,
    /// `--sandbox` as given (a restarted `kiwi web` session keeps it over a changed config).
    pub mode_flag: Option<SandboxMode>,
    /// `--sandbox-network` (or the Claude mapping's equivalent).
    pub network_flag: bool,
    /// The config file in use and the MCP config files (read-only inside the roots).
    pub protected_files: Vec<PathBuf>,
}

impl SandboxRun {
    /// No sandbox: today's behavior.
    pub fn off() -> Self {
        Self { sandbox: Sandbox::off(), mode_flag: None, network_flag: false, protected_files: Vec::new() }
    }

    /// Builds and probes the run's sandbox; `Err` is the one start-up line of spec §5.3, `Ok`
    /// carries the warnings to print.
    pub fn start(
        settings: crate::sandbox::SandboxSettings,
        mode_flag: Option<SandboxMode>,
        network_flag: bool,
        share_dir: &std::path::Path,
        protected_files: Vec<PathBuf>,
        work_dir: &std::path::Path,
        added_dirs: &[PathBuf],
    ) -> Result<(Self, Vec<String>), String> {
        let mut sandbox =
            Sandbox::new(settings, mode_flag, network_flag, share_dir.to_path_buf(), protected_files.clone());
        let warnings = sandbox.probe(work_dir, added_dirs)?;
        Ok((Self { sandbox, mode_flag, network_flag, protected_files }, warnings))
    }

    /// The same run's sandbox in a stricter `mode` (probed again: a run that started off has not
    /// probed anything yet).
    pub fn with_mode(
        &self,
        mode: SandboxMode,
        share_dir: &std::path::Path,
        work_dir: &std::path::Path,
    ) -> Result<Sandbox, String> {
        let mut sandbox = Sandbox::new(
            self.sandbox.settings().clone(),
            Some(mode),
            self.network_flag,
            share_dir.to_path_buf(),
            self.protected_files.clone(),
        );
        sandbox.probe(work_dir, &[])?;
        Ok(sandbox)
    }
}

/// A session's sandbox: the run's, which an ACP client may tighten (never loosen below the
/// run's mode, its floor) from the next command on.
#[derive(Debug)]
pub struct SessionSandbox {
    run: SandboxRun,
    current: RwLock<Arc<Sandbox>>,
    /// Nobody may approve an escalation (the Claude dialect's modes without a prompt); the
    /// session's yolo and afk say the same on their own.
    nobody_to_ask: std::sync::atomic::AtomicBool,
}

impl Default for SessionSandbox {
    fn default() -> Self {
        Self::new(SandboxRun::off())
    }
}

impl SessionSandbox {
    pub fn new(run: SandboxRun) -> Self {
        let current = RwLock::new(Arc::new(run.sandbox.clone()));
        Self { run, current, nobody_to_ask: Default::default() }
    }

    /// Whether an escalation must be refused without asking (see the field).
    pub fn nobody_to_ask(&self) -> bool {
        self.nobody_to_ask.load(std::sync::atomic::Ordering::SeqCst)
    }

    pub fn set_nobody_to_ask(&self, on: bool) {
        self.nobody_to_ask.store(on, std::sync::atomic::Ordering::SeqCst);
    }

    /// The sandbox the next command runs under.
    pub fn current(&self) -> Arc<Sandbox> {
        match self.current.read() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The run's mode: the loosest a session may be set to.
    pub fn floor(&self) -> SandboxMode {
        self.run.sandbox.mode()
    }

    /// Sets the session's mode (at least as strict as the floor); `Err` is the client's error
    /// text.
    pub fn set_mode(
        &self,
        mode: SandboxMode,
        share_dir: &std::path::Path,
        work_dir: &std::path::Path,
    ) -> Result<(), String> {
        let floor = self.floor();
        if mode < floor {
            return Err(format!("the sandbox cannot be loosened below {floor} in this run"));
        }
        if mode == self.current().mode() {
            return Ok(());
        }
        let sandbox =
            if mode == floor { self.run.sandbox.clone() } else { self.run.with_mode(mode, share_dir, work_dir)? };
        match self.current.write() {
            Ok(mut s) => *s = Arc::new(sandbox),
            Err(poisoned) => *poisoned.into_inner() = Arc::new(sandbox),
        }
        Ok(())
    }
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
    /// What its tokens cost (`None`: unknown; `docs/configuration.md` §2.4).
    pub prices: Option<crate::config::ModelPrices>,
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
            sandbox: self.sandbox.clone(),
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
