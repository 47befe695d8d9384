//! Subagents (`docs/protocol-1.10.md` §8): the same soul, run nested for the `Agent` tool with its own
//! context and wire files under `<session>/subagents/<agent_id>/`, sharing the session's model,
//! state, approval hub, client and hooks.
//!
//! - [`SubagentDef`]: a subagent type as the agent file defines it (system prompt and toolset,
//!   prepared once when the session is built, so starting a subagent costs no file reading);
//! - [`Subagents`]: the session's types and its instances that are running now;
//! - `run`: one run of an instance (new or resumed), its result for the model;
//! - `git_context`: what an `explore` subagent learns about the repository before it starts;
//! - `wrap`: its events, wrapped for the parent's front end.

pub mod background;
pub mod defs;
pub mod git_context;
pub mod run;
pub mod wrap;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use crate::agent_env::{AgentEnv, ModelSource};
use crate::protocol::ApprovalSource;
use crate::soul::sink::Projection;
use crate::tools::Toolset;

/// One subagent type.
#[derive(Clone)]
pub struct SubagentDef {
    pub name: String,
    pub description: String,
    /// Shared by every session of the process that renders the same prompt.
    pub system_prompt: Arc<str>,
    pub toolset: Arc<Toolset>,
    /// The config's model alias this type runs on (none: the session's model, or the one the
    /// `Agent` call names).
    pub model: Option<String>,
}

/// The session's subagent types, and which instances run right now (an instance runs at most
/// once at a time).
/// Prepares the subagent types (reads their agent files, renders their prompts, gathers their
/// tools); run once, off the start-up path, see [`Subagents::preload`].
pub type DefsLoader = Box<dyn FnOnce() -> Result<Vec<SubagentDef>, String> + Send>;

/// The session's subagent types: ready, or to be prepared at the first need.
pub enum Defs {
    Ready(Vec<SubagentDef>),
    Deferred(DefsLoader),
}

#[derive(Default)]
pub struct Subagents {
    /// Set once: by the preload thread or by the first run that needs a type, whichever is first.
    defs: OnceLock<Result<Vec<SubagentDef>, String>>,
    loader: Mutex<Option<DefsLoader>>,
    /// Whether [`Subagents::preload`] has started its thread (it starts one, once).
    preloading: AtomicBool,
    /// Running instance id → what it is doing (`running`).
    running: Mutex<HashMap<String, &'static str>>,
    /// Builds the models that `model` names (none: only the session's model can run them).
    models: Option<Arc<dyn ModelSource>>,
    /// Environments with another model, built at the first run that asked for it, by alias.
    other_models: Mutex<HashMap<String, Arc<AgentEnv>>>,
    /// Types a front end adds for the run (a Claude SDK host's `agents`); set once, found
    /// before the agent file's types of the same name.
    added: OnceLock<Vec<SubagentDef>>,
    /// A front end that shows background runs' events (the Claude dialect, `docs/print-mode.md`
    /// B.3a); without one they stay in the run's own files (`docs/protocol-1.10.md` §8.4).
    background_view: OnceLock<Arc<dyn Projection>>,
    /// The front end's rule for a run's result (`docs/print-mode.md` B.3a): Claude Code hands the
    /// parent the subagent's final text as it is; kimi asks once more for a fuller summary when
    /// it is short and wraps it with the instance's id and status.
    final_text_only: AtomicBool,
}

impl Subagents {
    pub fn new(defs: Defs, models: Option<Arc<dyn ModelSource>>) -> Self {
        let (ready, loader) = match defs {
            Defs::Ready(defs) => (OnceLock::from(Ok(defs)), None),
            Defs::Deferred(loader) => (OnceLock::new(), Some(loader)),
        };
        Self {
            defs: ready,
            loader: Mutex::new(loader),
            preloading: AtomicBool::new(false),
            running: Mutex::default(),
            models,
            other_models: Mutex::default(),
            added: OnceLock::new(),
            background_view: OnceLock::new(),
            final_text_only: AtomicBool::new(false),
        }
    }

    /// From now on a run's result is the subagent's final text, with no "elaborate" round and
    /// no header (the Claude dialect).
    pub fn report_final_text(&self) {
        self.final_text_only.store(true, Ordering::Release);
    }

    /// Whether a run's result is the bare final text ([`Self::report_final_text`]).
    pub fn final_text_only(&self) -> bool {
        self.final_text_only.load(Ordering::Acquire)
    }

    /// Shows background runs' events, wrapped as a foreground run's are, to `view` (once per
    /// session).
    pub fn show_background(&self, view: Arc<dyn Projection>) -> Result<(), String> {
        self.background_view.set(view).map_err(|_| "background runs are already shown to a front end".to_string())
    }

    /// Where background runs' events are shown, if anywhere.
    pub fn background_view(&self) -> Option<Arc<dyn Projection>> {
        self.background_view.get().cloned()
    }

    /// Adds types for this run (once per session).
    pub fn add_types(&self, defs: Vec<SubagentDef>) -> Result<(), String> {
        self.added.set(defs).map_err(|_| "subagent types were already added to this session".to_string())
    }

    /// Prepares deferred types on a thread of their own, so that the first `Agent` call usually
    /// finds them ready. Called when a turn starts, not when the session is built: the types
    /// cost more than the rest of a start-up (time, and memory an idle server would keep), and
    /// a turn's first model call gives the thread far more time than it needs. Nothing to do
    /// when they are ready or being prepared.
    pub fn preload(self: &Arc<Self>) {
        if self.defs.get().is_some() || self.preloading.swap(true, Ordering::AcqRel) {
            return;
        }
        let this = self.clone();
        let spawned = std::thread::Builder::new().name("kiwi-subagents".into()).spawn(move || {
            let _ = this.defs();
        });
        if let Err(e) = spawned {
            // The first `Agent` call prepares them instead.
            tracing::warn!("cannot start the thread that prepares the subagent types: {e}");
        }
    }

    /// The types, prepared now if nobody has yet (a caller that comes while another prepares
    /// them waits for that one).
    pub fn defs(&self) -> Result<&[SubagentDef], String> {
        let loaded = self.defs.get_or_init(|| {
            let loader = self.loader.lock().unwrap_or_else(|p| p.into_inner()).take();
            // A loader that panics must not leave the types unset for good (the next caller
            // would find no loader and report every type as unknown).
            let loaded = loader.map_or_else(
                || Ok(Vec::new()),
                |load| {
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(load))
                        .unwrap_or_else(|_| Err("preparing the subagent types panicked".into()))
                },
            );
            if let Err(e) = &loaded {
                tracing::error!("the subagent types cannot be prepared: {e}");
            }
            loaded
        });
        loaded.as_deref().map_err(Clone::clone)
    }

    /// `parent` with the model `alias` of the config (built once per session and alias).
    pub fn env_with_model(&self, parent: &AgentEnv, alias: &str) -> Result<Arc<AgentEnv>, String> {
        let mut built = self.other_models.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(env) = built.get(alias) {
            return Ok(env.clone());
        }
        let source = self.models.as_ref().ok_or("this session cannot build other models")?;
        let env = Arc::new(parent.with_model(source.build(alias)?));
        built.insert(alias.to_string(), env.clone());
        Ok(env)
    }

    /// The type `name` (`Ok(None)`: no such type; `Err`: the types could not be prepared).
    pub fn def(&self, name: &str) -> Result<Option<&SubagentDef>, String> {
        if let Some(added) = self.added.get().and_then(|defs| defs.iter().find(|d| d.name == name)) {
            return Ok(Some(added));
        }
        Ok(self.defs()?.iter().find(|d| d.name == name))
    }

    /// Marks `agent_id` running; `Err(status)` when it already is. The claim ends when the
    /// returned guard is dropped (also when the run is cancelled).
    pub fn claim(self: &Arc<Self>, agent_id: &str) -> Result<RunClaim, &'static str> {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(status) = running.get(agent_id) {
            return Err(status);
        }
        running.insert(agent_id.to_string(), "running");
        Ok(RunClaim { subagents: self.clone(), agent_id: agent_id.to_string() })
    }
}

/// An instance's claim to run; released on drop.
pub struct RunClaim {
    subagents: Arc<Subagents>,
    agent_id: String,
}

impl Drop for RunClaim {
    fn drop(&mut self) {
        self.subagents.running.lock().unwrap_or_else(|p| p.into_inner()).remove(&self.agent_id);
    }
}

/// What makes a soul a subagent: who it is, and where its approvals come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubagentRole {
    pub agent_id: String,
    pub subagent_type: String,
    pub source_kind: ApprovalSource,
    /// The `source_id` of its approvals: the background task's id, or `None` for a foreground
    /// run (then each run's own id).
    pub source_id: Option<String>,
    /// Whose end rejects its pending approvals: the parent's turn, or the background task.
    pub owner: String,
}

/// A new instance id: `a` + 8 lowercase hex digits.
pub fn new_agent_id() -> String {
    format!("a{}", &uuid::Uuid::new_v4().simple().to_string()[..8])
}

/// Instance ids are names inside the session folder, never paths.
pub fn is_agent_id(id: &str) -> bool {
    id.len() == 9 && id.starts_with('a') && id[1..].chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_a_and_eight_hex_digits() {
        let id = new_agent_id();
        assert!(is_agent_id(&id), "{id}");
        for bad in ["", "a1234567", "b12345678", "a1234567G", "a../../xx", "A12345678", "a12345678x"] {
            assert!(!is_agent_id(bad), "{bad}");
        }
    }

    fn def(name: &str) -> SubagentDef {
        SubagentDef {
            name: name.into(),
            description: String::new(),
            system_prompt: "".into(),
            toolset: Arc::new(Toolset::default()),
            model: None,
        }
    }

    #[test]
    fn deferred_types_are_prepared_once_by_whoever_comes_first() {
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counter = calls.clone();
        let loader: DefsLoader = Box::new(move || {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(20));
            Ok(vec![def("coder")])
        });
        let subagents = Arc::new(Subagents::new(Defs::Deferred(loader), None));
        subagents.preload();
        assert_eq!(subagents.def("coder").unwrap().map(|d| d.name.as_str()), Some("coder"));
        assert!(subagents.def("nope").unwrap().is_none());
        subagents.preload();
        assert_eq!(calls.load(std::sync::atomic::Ordering::SeqCst), 1);
    }

    #[test]
    fn types_that_cannot_be_prepared_say_why_every_time() {
        let failing = Subagents::new(Defs::Deferred(Box::new(|| Err("Subagent `x`: broken".into()))), None);
        assert_eq!(failing.def("x").err().as_deref(), Some("Subagent `x`: broken"));
        assert_eq!(failing.def("x").err().as_deref(), Some("Subagent `x`: broken"));
        let panicking = Subagents::new(Defs::Deferred(Box::new(|| panic!("boom"))), None);
        assert_eq!(panicking.def("x").err().as_deref(), Some("preparing the subagent types panicked"));
        let ready = Subagents::new(Defs::Ready(vec![def("plan")]), None);
        assert!(ready.def("plan").unwrap().is_some());
        assert!(ready.def("reviewer").unwrap().is_none());
        ready.add_types(vec![def("reviewer")]).unwrap();
        assert!(ready.def("reviewer").unwrap().is_some());
        assert!(ready.add_types(vec![def("other")]).is_err(), "once per session");
    }

    #[test]
    fn an_instance_runs_once_at_a_time() {
        let subagents = Arc::new(Subagents::default());
        let claim = subagents.claim("a00000001").unwrap();
        assert_eq!(subagents.claim("a00000001").err(), Some("running"));
        assert!(subagents.claim("a00000002").is_ok());
        drop(claim);
        assert!(subagents.claim("a00000001").is_ok());
    }
}
