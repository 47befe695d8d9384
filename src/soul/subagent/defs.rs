//! Turning an agent file's `subagents` into ready subagent types: each one's spec loaded, its
//! system prompt rendered and its tools built, once per session.

use std::sync::Arc;

use super::SubagentDef;
use crate::agent_env::AgentEnv;
use crate::blueprint::spec::{SubagentSpec, load_agent_spec_at};
use crate::blueprint::system_prompt::{BuiltinArgs, load_system_prompt};
use crate::tools::agent::{AgentTool, SubagentType};
use crate::tools::builtin::{ToolCache, is_agent_path};
use crate::tools::{Tool, Toolset, Typed};

/// The subagent types of `specs`; the error is one readable line.
pub fn load_defs(
    specs: &[SubagentSpec],
    env: &Arc<AgentEnv>,
    builtins: &BuiltinArgs,
    cache: &mut ToolCache,
) -> Result<Vec<SubagentDef>, String> {
    specs
        .iter()
        .map(|sub| {
            let spec = load_agent_spec_at(&sub.path).map_err(|e| format!("Subagent `{}`: {e}", sub.name))?;
            let mut tools: Vec<Arc<dyn Tool>> = Vec::new();
            let mut invalid = Vec::new();
            for path in &spec.tools {
                if is_agent_path(path) {
                    // Offered, but a subagent's host refuses to nest (`docs/protocol-1.10.md` §8.1).
                    tools.push(agent_tool(&[]));
                    continue;
                }
                match cache.get(path, env) {
                    Some(Some(tool)) => tools.push(tool),
                    Some(None) => {}
                    None => invalid.push(format!("'{path}'")),
                }
            }
            if !invalid.is_empty() {
                return Err(format!("Subagent `{}`: Invalid tools: [{}]", sub.name, invalid.join(", ")));
            }
            let system_prompt =
                load_system_prompt(&spec, builtins.clone()).map_err(|e| format!("Subagent `{}`: {e}", sub.name))?;
            Ok(SubagentDef {
                name: sub.name.clone(),
                description: sub.description.clone(),
                system_prompt: crate::tools::schema::shared_text(system_prompt),
                toolset: Arc::new(Toolset::new(tools)),
                model: None,
            })
        })
        .collect()
}

/// The `Agent` tool offering the types of `specs` (named and described by the parent's agent
/// file, so the tool exists before the types are prepared).
pub fn agent_tool(specs: &[SubagentSpec]) -> Arc<dyn Tool> {
    let types = specs.iter().map(|d| SubagentType { name: d.name.clone(), description: d.description.clone() });
    Arc::new(Typed::new(AgentTool { types: types.collect() }))
}
