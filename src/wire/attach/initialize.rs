//! The `initialize` answer of a process attached to another's session (`docs/host.md`): given by
//! the attaching process itself, from its own config and command line, as a stdio
//! `kiwi --wire` with that config would give it on this session, and at any time (a turn of
//! the host does not delay it). Only the external tools differ: they are rejected with
//! [`HOSTED_ELSEWHERE`], because the host could not route a call to this client.
//!
//! Invariants: reads only (the session's `state.json` for its added folders, approval flags and
//! cost; the skills folders); nothing is written, nothing of the host changes.

use std::path::PathBuf;

use super::Target;
use crate::blueprint::skills::discover;
use crate::builder::AgentSetup;
use crate::session::store::home_dir;
use crate::soul::Agent;
use crate::soul::hooks::HookRegistry;
use crate::soul::state::SessionState;
use crate::wire::params::{CostInfo, ExternalToolsOutcome, InitializeParams, InitializeResult, RejectedTool};
use crate::wire::server::{AgentView, HOSTED_ELSEWHERE, initialize_result, sandbox_view, subscriptions};

/// The answer to the client's `initialize`.
pub fn answer(setup: &AgentSetup, target: &Target, params: InitializeParams, version: &str) -> InitializeResult {
    let skills = discover(&home_dir(), &target.work_dir, setup.skills_dir.as_deref());
    let commands = Agent::slash_commands_for(&skills);
    // Counted as this process would run them once it hosts the session (`docs/host.md`): its
    // config's hooks and the client's subscriptions.
    let hooks = HookRegistry::new(setup.config.hooks.clone());
    hooks.connect(subscriptions(params.hooks));
    let state = SessionState::load(&target.dir, setup.yolo);
    if setup.invocation.afk {
        state.grant_afk_for_run();
    }
    let mut added: Vec<PathBuf> = state.additional_dirs().into_iter().map(PathBuf::from).collect();
    for dir in &setup.invocation.add_dirs {
        if !added.contains(dir) {
            added.push(dir.clone());
        }
    }
    let someone_to_ask = !state.yolo() && !state.afk();
    let view = AgentView {
        commands: &commands,
        configured: hooks.configured(),
        sandbox: sandbox_view(&setup.sandbox.sandbox, &target.work_dir, &added, someone_to_ask),
        cost: CostInfo {
            session_usd: state.cost_usd().filter(|_| has_prices(setup)),
            max_budget_usd: setup.config.loop_control.max_budget_usd,
        },
    };
    let tools = params.external_tools.unwrap_or_default();
    let outcome = (!tools.is_empty()).then(|| ExternalToolsOutcome {
        accepted: Vec::new(),
        rejected: tools.into_iter().map(|t| RejectedTool { name: t.name, reason: HOSTED_ELSEWHERE.into() }).collect(),
    });
    initialize_result(view, version, outcome, params.extensions.as_deref())
}

/// Whether the model this process would run has prices (else the session's cost is unknown).
fn has_prices(setup: &AgentSetup) -> bool {
    let config = &setup.config;
    let key = setup.model.as_deref().unwrap_or(config.default_model.as_str());
    config.models.get(key).is_some_and(|m| m.usd_per_mtok.is_some())
}
