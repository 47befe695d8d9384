//! Agent spec files: which system prompt, prompt arguments, tools and subagents an agent has.
//!
//! ```yaml
//! version: 1                      # optional; anything but 1 is rejected
//! agent:
//!   extend: default               # or a path relative to this file
//!   name: my-agent
//!   system_prompt_path: ./system.md
//!   system_prompt_args: {ROLE_ADDITIONAL: "..."}
//!   tools: ["kimi_cli.tools.shell:Shell", ...]
//!   exclude_tools: [...]
//!   subagents: {coder: {path: ./sub.yaml, description: "..."}}
//! ```
//!
//! Resolution: with `extend`, the base file is loaded (recursively) first; every field the file
//! gives replaces the base's, except `system_prompt_args`, which is merged key by key. Relative
//! paths are resolved against the directory of the file that wrote them, so inherited paths
//! keep pointing next to the base file. An explicit `null` for `exclude_tools` / `subagents`
//! clears the inherited value. After resolution `name`, `system_prompt_path` and `tools` must be
//! present, and `exclude_tools` entries are removed from `tools` by exact string match.
//!
//! The built-in agents (`default`, its `coder` subagent, `okabe`) are YAML files compiled into
//! the binary and addressed as [`SpecPath::Builtin`]; nothing is read from the source tree at
//! run time. Tool paths are kept as strings; mapping them to tools is the caller's job.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use serde_yaml::Value;

/// Built-in files, addressed by a `/`-separated virtual path.
const BUILTIN_FILES: &[(&str, &str)] = &[
    ("default/agent.yaml", include_str!("agents/default/agent.yaml")),
    ("default/sub.yaml", include_str!("agents/default/sub.yaml")),
    ("default/explore.yaml", include_str!("agents/default/explore.yaml")),
    ("default/plan.yaml", include_str!("agents/default/plan.yaml")),
    ("default/system.md", include_str!("prompts/system.md")),
    ("okabe/agent.yaml", include_str!("agents/okabe/agent.yaml")),
];

/// The built-in agent files above, parsed by build.rs and carried as JSON: the same documents,
/// which JSON reads about ten times faster than YAML (the default agent's is read at every start).
const BUILTIN_PARSED: &[(&str, &str)] = &[
    ("default/agent.yaml", include_str!(concat!(env!("OUT_DIR"), "/agents/default/agent.json"))),
    ("default/sub.yaml", include_str!(concat!(env!("OUT_DIR"), "/agents/default/sub.json"))),
    ("default/explore.yaml", include_str!(concat!(env!("OUT_DIR"), "/agents/default/explore.json"))),
    ("default/plan.yaml", include_str!(concat!(env!("OUT_DIR"), "/agents/default/plan.json"))),
    ("okabe/agent.yaml", include_str!(concat!(env!("OUT_DIR"), "/agents/okabe/agent.json"))),
];

/// Names accepted by `--agent`.
pub const BUILTIN_AGENTS: &[&str] = &["default", "okabe"];

/// Where a spec file or system prompt lives: compiled into the binary or on disk.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SpecPath {
    /// A virtual path into the built-in files, e.g. `default/system.md`.
    Builtin(String),
    File(PathBuf),
}

impl SpecPath {
    pub fn read_to_string(&self) -> std::io::Result<String> {
        match self {
            SpecPath::File(p) => std::fs::read_to_string(p),
            SpecPath::Builtin(name) => {
                BUILTIN_FILES.iter().find(|(n, _)| n == name).map(|(_, text)| text.to_string()).ok_or_else(|| {
                    std::io::Error::new(std::io::ErrorKind::NotFound, format!("no built-in file {name}"))
                })
            }
        }
    }

    /// Resolves `rel` against the directory containing `self` (absolute `rel` stays as is).
    pub fn join_sibling(&self, rel: &str) -> SpecPath {
        let rel_path = Path::new(rel);
        if rel_path.is_absolute() {
            return SpecPath::File(rel_path.to_path_buf());
        }
        match self {
            SpecPath::File(p) => SpecPath::File(p.parent().unwrap_or(Path::new("")).join(rel_path)),
            SpecPath::Builtin(name) => {
                let mut parts: Vec<String> = name.split('/').map(str::to_string).collect();
                parts.pop();
                for c in rel_path.components() {
                    match c {
                        Component::ParentDir => {
                            parts.pop();
                        }
                        Component::Normal(s) => parts.push(s.to_string_lossy().into_owned()),
                        _ => {}
                    }
                }
                SpecPath::Builtin(parts.join("/"))
            }
        }
    }
}

impl fmt::Display for SpecPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpecPath::Builtin(name) => write!(f, "<builtin>/{name}"),
            SpecPath::File(p) => write!(f, "{}", p.display()),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SubagentSpec {
    pub name: String,
    /// The subagent's own spec file; load it with [`load_agent_spec_at`].
    pub path: SpecPath,
    pub description: String,
}

/// A fully resolved agent spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedAgentSpec {
    pub name: String,
    pub system_prompt_path: SpecPath,
    pub system_prompt_args: BTreeMap<String, String>,
    /// Tool paths (`module:Class`) in declaration order, `exclude_tools` already removed.
    pub tools: Vec<String>,
    pub exclude_tools: Vec<String>,
    /// In declaration order.
    pub subagents: Vec<SubagentSpec>,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AgentSpecError {
    #[error("Agent spec file not found: {0}")]
    NotFound(String),
    #[error("Failed to read agent spec file {path}: {error}")]
    Read { path: String, error: String },
    #[error("Invalid YAML in agent spec file {path}: {error}")]
    Yaml { path: String, error: String },
    #[error("Invalid agent spec file {path}: {error}")]
    Invalid { path: String, error: String },
    #[error("Unsupported agent spec version: {0}")]
    UnsupportedVersion(String),
    #[error("Agent name is required")]
    NameRequired,
    #[error("System prompt path is required")]
    SystemPromptPathRequired,
    #[error("Tools are required")]
    ToolsRequired,
    #[error("Unknown built-in agent: {0}")]
    UnknownBuiltin(String),
    #[error("Agent spec extends itself (extend chain too deep): {0}")]
    ExtendTooDeep(String),
}

/// One file's fields before resolution; `None` = not given (inherit).
#[derive(Default)]
struct PartialSpec {
    name: Option<String>,
    system_prompt_path: Option<SpecPath>,
    system_prompt_args: BTreeMap<String, String>,
    tools: Option<Option<Vec<String>>>,
    exclude_tools: Option<Vec<String>>,
    subagents: Option<Vec<SubagentSpec>>,
}

/// Loads the agent spec at `path`, or the built-in default agent when `path` is `None`.
pub fn load_agent_spec(path: Option<&Path>) -> Result<ResolvedAgentSpec, AgentSpecError> {
    match path {
        Some(p) => load_agent_spec_at(&SpecPath::File(p.to_path_buf())),
        None => load_builtin_agent_spec("default"),
    }
}

/// Loads a built-in agent by its `--agent` name (`default` or `okabe`).
pub fn load_builtin_agent_spec(name: &str) -> Result<ResolvedAgentSpec, AgentSpecError> {
    if !BUILTIN_AGENTS.contains(&name) {
        return Err(AgentSpecError::UnknownBuiltin(name.to_string()));
    }
    load_agent_spec_at(&SpecPath::Builtin(format!("{name}/agent.yaml")))
}

/// Loads and resolves the spec at any location (used for subagent specs too).
pub fn load_agent_spec_at(path: &SpecPath) -> Result<ResolvedAgentSpec, AgentSpecError> {
    let spec = load_partial(path, 0)?;
    let name = spec.name.ok_or(AgentSpecError::NameRequired)?;
    let system_prompt_path = spec.system_prompt_path.ok_or(AgentSpecError::SystemPromptPathRequired)?;
    let tools = spec.tools.flatten().ok_or(AgentSpecError::ToolsRequired)?;
    let exclude_tools = spec.exclude_tools.unwrap_or_default();
    let tools = tools.into_iter().filter(|t| !exclude_tools.contains(t)).collect();
    Ok(ResolvedAgentSpec {
        name,
        system_prompt_path,
        system_prompt_args: spec.system_prompt_args,
        tools,
        exclude_tools,
        subagents: spec.subagents.unwrap_or_default(),
    })
}

/// Deep enough for any real hierarchy; a cycle of `extend`s hits it quickly.
const MAX_EXTEND_DEPTH: usize = 32;

/// The YAML document at `path`. Built-in files never change, and every subagent type extends the
/// default agent, so their parsed documents are kept for the life of the process (parsing them
/// again for each type and session was most of a session build's cost).
fn read_document(path: &SpecPath, shown: &str) -> Result<Arc<Value>, AgentSpecError> {
    static BUILTIN: OnceLock<Mutex<HashMap<String, Arc<Value>>>> = OnceLock::new();
    let parse = || {
        let text = path
            .read_to_string()
            .map_err(|e| AgentSpecError::Read { path: shown.to_string(), error: e.to_string() })?;
        serde_yaml::from_str::<Value>(&text)
            .map(Arc::new)
            .map_err(|e| AgentSpecError::Yaml { path: shown.to_string(), error: e.to_string() })
    };
    let SpecPath::Builtin(name) = path else { return parse() };
    let cache = BUILTIN.get_or_init(Mutex::default);
    if let Some(doc) = cache.lock().unwrap_or_else(|p| p.into_inner()).get(name) {
        return Ok(doc.clone());
    }
    let parsed = BUILTIN_PARSED.iter().find(|(n, _)| n == name).and_then(|(_, json)| serde_json::from_str(json).ok());
    let doc = match parsed {
        Some(doc) => Arc::new(doc),
        None => parse()?,
    };
    cache.lock().unwrap_or_else(|p| p.into_inner()).insert(name.clone(), doc.clone());
    Ok(doc)
}

fn load_partial(path: &SpecPath, depth: usize) -> Result<PartialSpec, AgentSpecError> {
    if depth > MAX_EXTEND_DEPTH {
        return Err(AgentSpecError::ExtendTooDeep(path.to_string()));
    }
    let shown = path.to_string();
    if let SpecPath::File(p) = path
        && !p.is_file()
    {
        return Err(AgentSpecError::NotFound(shown));
    }
    let doc = read_document(path, &shown)?;
    let invalid = |error: String| AgentSpecError::Invalid { path: shown.clone(), error };
    let empty = serde_yaml::Mapping::new();
    let top = match &*doc {
        Value::Mapping(m) => m,
        Value::Null => &empty,
        _ => return Err(invalid("the document must be a mapping".into())),
    };
    if let Some(v) = top.get("version")
        && !is_version_one(v)
    {
        return Err(AgentSpecError::UnsupportedVersion(display_value(v)));
    }
    let agent = match top.get("agent") {
        None | Some(Value::Null) => &empty,
        Some(Value::Mapping(m)) => m,
        Some(_) => return Err(invalid("`agent` must be a mapping".into())),
    };

    let mut spec = match agent.get("extend") {
        None | Some(Value::Null) => PartialSpec::default(),
        Some(Value::String(base)) => {
            let base_path = if base == "default" {
                SpecPath::Builtin("default/agent.yaml".into())
            } else {
                path.join_sibling(base)
            };
            load_partial(&base_path, depth + 1)?
        }
        Some(_) => return Err(invalid("`extend` must be a string".into())),
    };

    if let Some(v) = agent.get("name").filter(|v| !v.is_null()) {
        spec.name = Some(string(v).ok_or_else(|| invalid("`name` must be a string".into()))?);
    }
    if let Some(v) = agent.get("system_prompt_path").filter(|v| !v.is_null()) {
        let rel = string(v).ok_or_else(|| invalid("`system_prompt_path` must be a string".into()))?;
        spec.system_prompt_path = Some(path.join_sibling(&rel));
    }
    match agent.get("system_prompt_args") {
        None | Some(Value::Null) => {}
        Some(Value::Mapping(m)) => {
            for (k, v) in m {
                let (Some(k), Some(v)) = (string(k), scalar(v)) else {
                    return Err(invalid("`system_prompt_args` must map strings to strings".into()));
                };
                spec.system_prompt_args.insert(k, v);
            }
        }
        Some(_) => return Err(invalid("`system_prompt_args` must be a mapping".into())),
    }
    if let Some(v) = agent.get("tools") {
        spec.tools = Some(string_list(v).ok_or_else(|| invalid("`tools` must be a list of strings".into()))?);
    }
    if let Some(v) = agent.get("exclude_tools") {
        let list = string_list(v).ok_or_else(|| invalid("`exclude_tools` must be a list of strings".into()))?;
        spec.exclude_tools = Some(list.unwrap_or_default());
    }
    if let Some(v) = agent.get("subagents") {
        spec.subagents = Some(match v {
            Value::Null => Vec::new(),
            Value::Mapping(m) => {
                let mut subs = Vec::new();
                for (k, v) in m {
                    let name = string(k).ok_or_else(|| invalid("subagent names must be strings".into()))?;
                    let field = |key: &str| v.get(key).and_then(string);
                    let (Some(p), Some(description)) = (field("path"), field("description")) else {
                        return Err(invalid(format!("subagent \"{name}\" needs string `path` and `description`")));
                    };
                    subs.push(SubagentSpec { name, path: path.join_sibling(&p), description });
                }
                subs
            }
            _ => return Err(invalid("`subagents` must be a mapping".into())),
        });
    }
    Ok(spec)
}

/// `version: 1` (also `1.0`, as the reference compares numerically).
fn is_version_one(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.as_i64() == Some(1) || n.as_f64() == Some(1.0),
        _ => false,
    }
}

fn display_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "None".into(),
        other => serde_yaml::to_string(other).map(|s| s.trim().to_string()).unwrap_or_default(),
    }
}

fn string(v: &Value) -> Option<String> {
    v.as_str().map(str::to_string)
}

fn scalar(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// `Some(None)` for an explicit null, `Some(Some(list))` for a list of strings.
fn string_list(v: &Value) -> Option<Option<Vec<String>>> {
    match v {
        Value::Null => Some(None),
        Value::Sequence(items) => items.iter().map(string).collect::<Option<Vec<_>>>().map(Some),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn the_parsed_built_in_agent_files_are_the_yaml_documents() {
        let agent_files: Vec<_> = BUILTIN_FILES.iter().filter(|(name, _)| name.ends_with(".yaml")).collect();
        assert_eq!(agent_files.len(), BUILTIN_PARSED.len());
        for (name, yaml) in agent_files {
            let json = BUILTIN_PARSED.iter().find(|(n, _)| n == name).map(|(_, json)| json).unwrap();
            let from_yaml: Value = serde_yaml::from_str(yaml).unwrap();
            let from_json: Value = serde_json::from_str(json).unwrap();
            assert_eq!(from_json, from_yaml, "{name}");
        }
    }

    const DEFAULT_TOOLS: &[&str] = &[
        "kimi_cli.tools.agent:Agent",
        "kimi_cli.tools.todo:SetTodoList",
        "kimi_cli.tools.shell:Shell",
        "kimi_cli.tools.file:ReadFile",
        "kimi_cli.tools.file:ReadMediaFile",
        "kimi_cli.tools.file:Glob",
        "kimi_cli.tools.file:Grep",
        "kimi_cli.tools.file:WriteFile",
        "kimi_cli.tools.file:StrReplaceFile",
        "kimi_cli.tools.web:SearchWeb",
        "kimi_cli.tools.web:FetchURL",
        "kimi_cli.tools.ask_user:AskUserQuestion",
        "kimi_cli.tools.plan:EnterPlanMode",
        "kimi_cli.tools.plan:ExitPlanMode",
        "kimi_cli.tools.background:TaskList",
        "kimi_cli.tools.background:TaskOutput",
        "kimi_cli.tools.background:TaskStop",
    ];

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).unwrap();
        }
        fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn default_agent() {
        let spec = load_agent_spec(None).unwrap();
        assert_eq!(spec.name, "");
        assert_eq!(spec.tools, DEFAULT_TOOLS);
        assert_eq!(spec.system_prompt_path, SpecPath::Builtin("default/system.md".into()));
        assert_eq!(spec.system_prompt_path.read_to_string().unwrap(), crate::blueprint::prompts::SYSTEM);
        assert_eq!(spec.system_prompt_args.get("ROLE_ADDITIONAL").map(String::as_str), Some(""));
        let names: Vec<&str> = spec.subagents.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["coder", "explore", "plan"]);
        assert_eq!(spec.subagents[0].path, SpecPath::Builtin("default/sub.yaml".into()));
        // The read-only types: no file writing; `plan` runs no commands either.
        let explore = load_agent_spec_at(&spec.subagents[1].path).unwrap();
        assert!(explore.tools.iter().any(|t| t.ends_with(":Shell")));
        assert!(!explore.tools.iter().any(|t| t.ends_with(":WriteFile") || t.ends_with(":StrReplaceFile")));
        let plan = load_agent_spec_at(&spec.subagents[2].path).unwrap();
        assert!(!plan.tools.iter().any(|t| t.ends_with(":Shell") || t.ends_with(":WriteFile")));
        assert!(explore.subagents.is_empty() && plan.subagents.is_empty());
    }

    #[test]
    fn coder_subagent() {
        let default = load_agent_spec(None).unwrap();
        let coder = load_agent_spec_at(&default.subagents[0].path).unwrap();
        // No delegation, todo list, questions or plan mode (`docs/protocol-1.10.md` §8.1).
        let dropped = [":Agent", ":SetTodoList", ":AskUserQuestion", ":EnterPlanMode", ":ExitPlanMode"];
        let expected: Vec<&str> =
            DEFAULT_TOOLS.iter().copied().filter(|t| !dropped.iter().any(|d| t.ends_with(d))).collect();
        assert_eq!(coder.tools, expected);
        assert!(coder.subagents.is_empty());
        assert!(coder.system_prompt_args["ROLE_ADDITIONAL"].contains("subagent"));
        assert_eq!(coder.system_prompt_path, default.system_prompt_path);
        assert_eq!(coder.exclude_tools.len(), 8);
    }

    #[test]
    fn okabe_agent() {
        let okabe = load_builtin_agent_spec("okabe").unwrap();
        let mut expected: Vec<&str> = DEFAULT_TOOLS.to_vec();
        expected.push("kimi_cli.tools.dmail:SendDMail");
        assert_eq!(okabe.tools, expected);
        assert_eq!(okabe.subagents[0].name, "coder");
        assert_eq!(load_builtin_agent_spec("nope").unwrap_err().to_string(), "Unknown built-in agent: nope");
    }

    #[test]
    fn extend_default_merges_fields() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "a/agent.yaml",
            "agent:\n  extend: default\n  name: mine\n  system_prompt_args:\n    EXTRA: x\n  exclude_tools:\n    - kimi_cli.tools.shell:Shell\n    - not-there\n",
        );
        let spec = load_agent_spec(Some(&p)).unwrap();
        assert_eq!(spec.name, "mine");
        assert_eq!(spec.system_prompt_path, SpecPath::Builtin("default/system.md".into()));
        assert_eq!(spec.system_prompt_args.len(), 2);
        assert_eq!(spec.system_prompt_args["EXTRA"], "x");
        assert_eq!(spec.tools.len(), DEFAULT_TOOLS.len() - 1);
        assert!(!spec.tools.iter().any(|t| t.ends_with(":Shell")));
        assert_eq!(spec.subagents[0].name, "coder");
    }

    #[test]
    fn relative_extend_and_paths() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "base/agent.yaml",
            "version: 1\nagent:\n  name: base\n  system_prompt_path: prompt.md\n  system_prompt_args: {A: '1', B: '2'}\n  tools: [t1, t2, t3]\n  exclude_tools: [t1]\n  subagents:\n    helper: {path: helper.yaml, description: helps}\n",
        );
        let child = write(
            dir.path(),
            "child/agent.yaml",
            "agent:\n  extend: ../base/agent.yaml\n  system_prompt_args: {B: 'two', C: 3}\n  tools: [t2, t4]\n",
        );
        let spec = load_agent_spec(Some(&child)).unwrap();
        assert_eq!(spec.name, "base");
        assert_eq!(spec.system_prompt_path, SpecPath::File(dir.path().join("child/../base/prompt.md")));
        let args: Vec<(&str, &str)> = spec.system_prompt_args.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(args, vec![("A", "1"), ("B", "two"), ("C", "3")]);
        // Tools replaced; the inherited exclude list still applies.
        assert_eq!(spec.tools, vec!["t2", "t4"]);
        assert_eq!(spec.subagents[0].path, SpecPath::File(dir.path().join("child/../base/helper.yaml")));

        let cleared = write(
            dir.path(),
            "child/clear.yaml",
            "agent:\n  extend: ../base/agent.yaml\n  exclude_tools:\n  subagents:\n",
        );
        let spec = load_agent_spec(Some(&cleared)).unwrap();
        assert_eq!(spec.tools, vec!["t1", "t2", "t3"]);
        assert!(spec.subagents.is_empty());
    }

    #[test]
    fn required_fields_and_version_errors() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let err = |name: &str, text: &str| load_agent_spec(Some(&write(d, name, text))).unwrap_err().to_string();
        assert_eq!(err("v2.yaml", "version: 2\nagent: {name: x}"), "Unsupported agent spec version: 2");
        assert_eq!(err("vs.yaml", "version: 'one'\n"), "Unsupported agent spec version: one");
        assert_eq!(err("noname.yaml", "agent:\n  system_prompt_path: p\n  tools: []\n"), "Agent name is required");
        assert_eq!(err("empty.yaml", ""), "Agent name is required");
        assert_eq!(err("noprompt.yaml", "agent:\n  name: x\n  tools: []\n"), "System prompt path is required");
        assert_eq!(err("notools.yaml", "agent:\n  name: x\n  system_prompt_path: p\n"), "Tools are required");
        assert_eq!(
            err("nulltools.yaml", "agent:\n  name: x\n  system_prompt_path: p\n  tools:\n"),
            "Tools are required"
        );
        assert!(err("bad.yaml", "agent: [").starts_with("Invalid YAML in agent spec file "));
        assert!(err("badtools.yaml", "agent:\n  tools: shell\n").contains("`tools` must be a list of strings"));
        assert!(err("badsub.yaml", "agent:\n  subagents: {x: {path: p}}\n").contains("subagent \"x\" needs"));
        assert!(err("loop.yaml", "agent:\n  extend: loop.yaml\n").starts_with("Agent spec extends itself"));
        let missing = d.join("missing.yaml");
        assert_eq!(
            load_agent_spec(Some(&missing)).unwrap_err().to_string(),
            format!("Agent spec file not found: {}", missing.display())
        );
        let ok = load_agent_spec(Some(&write(
            d,
            "v1.yaml",
            "version: 1.0\nagent: {name: x, system_prompt_path: p, tools: []}",
        )))
        .unwrap();
        assert!(ok.tools.is_empty());
    }

    #[test]
    fn builtin_paths_join_and_display() {
        let p = SpecPath::Builtin("okabe/agent.yaml".into());
        assert_eq!(p.join_sibling("../default/agent.yaml"), SpecPath::Builtin("default/agent.yaml".into()));
        assert_eq!(p.join_sibling("/abs/x.yaml"), SpecPath::File(PathBuf::from("/abs/x.yaml")));
        assert_eq!(p.to_string(), "<builtin>/okabe/agent.yaml");
        assert!(SpecPath::Builtin("nope.md".into()).read_to_string().is_err());
    }
}
