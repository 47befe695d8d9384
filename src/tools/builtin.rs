//! The built-in toolset: the default agent's tools in order, and the agent-file tool paths.
//!
//! Invariants: tools that skip themselves (ReadMediaFile without image/video input, SearchWeb
//! without a `moonshot_search` service) are simply absent; a known tool path that maps to a tool
//! not available here returns `Some(None)`, an unknown path `None`.

use std::sync::Arc;

use super::ask_user::AskUserQuestion;
use super::background::tools::{TaskList, TaskOutput, TaskStop};
use super::fetch_url::FetchUrl;
use super::glob::Glob;
use super::grep::Grep;
use super::plan_mode::{EnterPlanMode, ExitPlanMode};
use super::read_file::ReadFile;
use super::read_media_file::ReadMediaFile;
use super::search_web::SearchWeb;
use super::shell::Shell;
use super::str_replace_file::StrReplaceFile;
use super::think::Think;
use super::todo::SetTodoList;
use super::write_file::WriteFile;
use super::{Tool, Typed};
use crate::agent_env::AgentEnv;

/// The default agent's tool names, in order (before self-skipping).
pub const DEFAULT_TOOL_NAMES: &[&str] = &[
    "SetTodoList",
    "Shell",
    "ReadFile",
    "ReadMediaFile",
    "Glob",
    "Grep",
    "WriteFile",
    "StrReplaceFile",
    "SearchWeb",
    "FetchURL",
    "AskUserQuestion",
    "EnterPlanMode",
    "ExitPlanMode",
    "TaskList",
    "TaskOutput",
    "TaskStop",
];

/// The built-in tools' names outside the default agent's list: agent-file tools and the
/// delegation tools.
const OTHER_TOOL_NAMES: &[&str] = &["Think", "Agent", "Task", "CreateSubagent", "SendDMail"];

/// Whether `name` is a built-in tool's, whether or not an agent offers it (MCP servers cannot
/// take these names: approvals are decided by name).
pub fn is_builtin_name(name: &str) -> bool {
    DEFAULT_TOOL_NAMES.contains(&name) || OTHER_TOOL_NAMES.contains(&name)
}

/// Builds one built-in tool by name; `Some(None)` when it skips itself here.
fn build(name: &str, env: &Arc<AgentEnv>) -> Option<Option<Arc<dyn Tool>>> {
    let tool: Arc<dyn Tool> = match name {
        "SetTodoList" => Arc::new(Typed::new(SetTodoList)),
        "Think" => Arc::new(Typed::new(Think)),
        "Shell" => super::shell::into_tool(Shell::new(), env),
        "ReadFile" => Arc::new(Typed::new(ReadFile)),
        "ReadMediaFile" => match ReadMediaFile::for_env(env) {
            Some(t) => Arc::new(Typed::new(t)),
            None => return Some(None),
        },
        "Glob" => Arc::new(Typed::new(Glob)),
        "Grep" => Arc::new(Typed::new(Grep)),
        "WriteFile" => Arc::new(Typed::new(WriteFile)),
        "StrReplaceFile" => Arc::new(Typed::new(StrReplaceFile)),
        "SearchWeb" => match env.config.services.moonshot_search.clone() {
            Some(svc) => Arc::new(Typed::new(SearchWeb::new(svc))),
            None => return Some(None),
        },
        "FetchURL" => Arc::new(Typed::new(FetchUrl::new(env.config.services.moonshot_fetch.clone()))),
        "AskUserQuestion" => Arc::new(Typed::new(AskUserQuestion)),
        "EnterPlanMode" => Arc::new(Typed::new(EnterPlanMode)),
        "ExitPlanMode" => Arc::new(Typed::new(ExitPlanMode)),
        "TaskList" => Arc::new(Typed::new(TaskList)),
        "TaskOutput" => Arc::new(Typed::new(TaskOutput)),
        "TaskStop" => Arc::new(Typed::new(TaskStop)),
        // Known to agent files but provided elsewhere (subagents: see `is_agent_path`; D-Mail).
        "Agent" | "Task" | "CreateSubagent" | "SendDMail" => return Some(None),
        _ => return None,
    };
    Some(Some(tool))
}

/// The default agent's tools, skipping the ones unavailable here.
pub fn default_tools(env: &Arc<AgentEnv>) -> Vec<Arc<dyn Tool>> {
    DEFAULT_TOOL_NAMES.iter().filter_map(|name| build(name, env).flatten()).collect()
}

/// Maps an agent-file tool path (`module:Class`) to its tool.
///
/// The module must be the tool's package or one of its submodules, e.g. both
/// `kimi_cli.tools.file:Glob` and `kimi_cli.tools.file.glob:Glob` name Glob.
/// Built tools of one session by path: the main agent and its subagent types share instances
/// (a tool holds nothing per agent; building one derives its schema, which is not free).
#[derive(Default)]
pub struct ToolCache(std::collections::HashMap<String, Option<Option<Arc<dyn Tool>>>>);

impl ToolCache {
    /// [`tool_by_path`], built once per path.
    pub fn get(&mut self, path: &str, env: &Arc<AgentEnv>) -> Option<Option<Arc<dyn Tool>>> {
        self.0.entry(path.to_string()).or_insert_with(|| tool_by_path(path, env)).clone()
    }
}

pub fn tool_by_path(path: &str, env: &Arc<AgentEnv>) -> Option<Option<Arc<dyn Tool>>> {
    let (module, class) = path.trim().split_once(':')?;
    let package = match class {
        "Shell" => "kimi_cli.tools.shell",
        "ReadFile" | "ReadMediaFile" | "Glob" | "Grep" | "WriteFile" | "StrReplaceFile" => "kimi_cli.tools.file",
        "SearchWeb" | "FetchURL" => "kimi_cli.tools.web",
        "SetTodoList" => "kimi_cli.tools.todo",
        "Think" => "kimi_cli.tools.think",
        "AskUserQuestion" => "kimi_cli.tools.ask_user",
        "EnterPlanMode" | "ExitPlanMode" => "kimi_cli.tools.plan",
        "TaskList" | "TaskOutput" | "TaskStop" => "kimi_cli.tools.background",
        "Task" | "CreateSubagent" => "kimi_cli.tools.multiagent",
        "Agent" => "kimi_cli.tools.agent",
        "SendDMail" => "kimi_cli.tools.dmail",
        _ => return None,
    };
    if !in_package(module, package) {
        return None;
    }
    build(class, env)
}

fn in_package(module: &str, package: &str) -> bool {
    module == package || module.strip_prefix(package).is_some_and(|rest| rest.starts_with('.'))
}

/// Whether `path` names the delegation tool: `Agent` (1.6+), or the `Task` tool of 1.2 agent
/// files, which the `Agent` tool replaces (`docs/protocol-1.10.md` §8.1).
pub fn is_agent_path(path: &str) -> bool {
    match path.trim().split_once(':') {
        Some((module, "Agent")) => in_package(module, "kimi_cli.tools.agent"),
        Some((module, "Task")) => in_package(module, "kimi_cli.tools.multiagent"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::is_agent_path;

    #[test]
    fn the_old_task_path_names_the_agent_tool() {
        for path in
            ["kimi_cli.tools.agent:Agent", "kimi_cli.tools.multiagent:Task", " kimi_cli.tools.multiagent.task:Task "]
        {
            assert!(is_agent_path(path), "{path}");
        }
        for path in ["kimi_cli.tools.multiagent:CreateSubagent", "kimi_cli.tools.shell:Agent", "Task", "x:Task"] {
            assert!(!is_agent_path(path), "{path}");
        }
    }
}
