//! The agent-definition layer: everything that describes *what* an agent is before a turn runs.
//!
//! * [`skills`] discovers `SKILL.md` skills and renders them for the system prompt;
//! * [`flow`] parses flow-skill diagrams (Mermaid / D2 subsets) into a validated [`flow::Flow`]
//!   and holds the decision / Ralph-loop prompt helpers the flow runner needs;
//! * [`spec`] loads agent spec YAML files (`--agent-file`, `--agent`), resolving `extend`;
//! * [`system_prompt`] renders the system prompt template with the start-up variables;
//! * [`prompts`] holds the fixed prompt texts (compaction, `/init`, subagent follow-up, ...).
//!
//! Invariants: every function here is pure with respect to process state (no cwd changes, no
//! environment reads, no output); file-system access is limited to the paths passed in, and the
//! built-in agent definitions are compiled into the binary.

pub mod flow;
pub mod prompts;
pub mod skills;
pub mod spec;
pub mod system_prompt;

pub use flow::{Flow, FlowEdge, FlowError, FlowNode, NodeKind};
pub use skills::{Skill, SkillKind};
pub use spec::{AgentSpecError, ResolvedAgentSpec, SpecPath, SubagentSpec};
