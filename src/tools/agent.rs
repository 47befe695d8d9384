//! `Agent`: hands a task to a subagent (`docs/protocol-1.10.md` §8.1). The tool only checks its arguments
//! and lists the subagent types in its description; running the subagent is the host's job (the
//! soul runs it nested), so this layer knows nothing of the agent loop.
//!
//! Agent files written for 1.2 name the old `Task` tool (`kimi_cli.tools.multiagent:Task`); that
//! path enables this tool, so such files keep delegating (the tool the model sees is `Agent`).

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{Delegation, ToolCallContext, TypedTool, check_range};
use crate::protocol::ToolReturnValue;

/// A subagent type the model may choose, as the tool's description lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubagentType {
    pub name: String,
    pub description: String,
}

pub struct AgentTool {
    pub types: Vec<SubagentType>,
}

/// Limits of `timeout` (seconds).
const TIMEOUT_RANGE: std::ops::RangeInclusive<u64> = 30..=3600;

fn default_type() -> String {
    "coder".into()
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct AgentParams {
    /// A short (3-5 word) summary of the task, for the user.
    pub description: String,
    /// Everything the subagent needs to know to do the task; it sees nothing else of this
    /// conversation.
    pub prompt: String,
    /// Which kind of subagent to start.
    #[serde(default = "default_type")]
    pub subagent_type: String,
    /// A model alias from the configuration to run the subagent on; omit for the current model.
    #[serde(default)]
    pub model: Option<String>,
    /// The id of an earlier subagent instance to continue, with its context.
    #[serde(default)]
    pub resume: Option<String>,
    /// Start the subagent as a background task and return at once; you are notified when it
    /// finishes.
    #[serde(default)]
    pub run_in_background: bool,
    /// Time limit in seconds (30 to 3600).
    #[serde(default)]
    pub timeout: Option<u64>,
}

impl TypedTool for AgentTool {
    type Params = AgentParams;
    const NAME: &'static str = "Agent";

    fn description(&self) -> String {
        let mut text = include_str!("desc/agent.md").trim().to_string();
        text.push_str("\n\nSubagent types:\n");
        for t in &self.types {
            text.push_str(&format!("- `{}`: {}\n", t.name, t.description));
        }
        text.trim_end().to_string()
    }

    fn run<'a>(&'a self, params: AgentParams, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        Box::pin(async move {
            if let Some(t) = params.timeout
                && let Some(invalid) = check_range("timeout", t, TIMEOUT_RANGE)
            {
                return invalid;
            }
            ctx.host
                .delegate(Delegation {
                    tool_call_id: ctx.tool_call_id.clone(),
                    description: params.description,
                    prompt: params.prompt,
                    subagent_type: params.subagent_type,
                    model: params.model.filter(|m| !m.is_empty()),
                    resume: params.resume.filter(|r| !r.is_empty()),
                    run_in_background: params.run_in_background,
                    timeout: params.timeout,
                })
                .await
        })
    }
}
