//! The tool framework: the `Tool` trait, typed tools with derived JSON schemas, the toolset the
//! model sees, and the dispatch rules every tool call goes through (`docs/tools.md` §1).
//!
//! Invariant: a tool call always produces a `ToolReturnValue`; bad arguments, unknown names and
//! tool failures become error results the model can read, never a panic or a failed turn.

pub mod agent;
pub mod ask_user;
pub mod background;
pub mod builtin;
pub mod client_files;
pub mod context;
pub mod diff;
pub mod external;
pub mod fetch_url;
pub mod file_type;
pub mod glob;
pub mod grep;
pub mod host;
pub mod output;
pub mod paths;
pub mod plan_mode;
pub mod process;
pub mod read_file;
pub mod read_media_file;
pub mod sandbox_gate;
pub mod schema;
pub mod search_web;
pub mod shell;
pub mod str_replace_file;
pub mod think;
pub mod todo;
pub mod write_file;

use std::collections::HashMap;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

pub use context::ToolCallContext;
pub use host::{ApprovalAsk, ClientToolCall, Delegation, PlanView, Presence, QuestionOutcome, ToolHost};

use crate::llm::ToolSpec;
use crate::protocol::ToolReturnValue;

/// A tool the model can call.
pub trait Tool: Send + Sync {
    fn spec(&self) -> &ToolSpec;

    /// Runs the tool on already-parsed arguments (a JSON value, `{}` when the model sent none).
    fn call<'a>(&'a self, arguments: Value, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue>;

    /// True for tools owned by the client (`initialize.external_tools`).
    fn is_external(&self) -> bool {
        false
    }

    /// True for an MCP tool its server annotates `readOnlyHint: true` (it says it changes
    /// nothing); front ends that never ask may let only such tools run in a read-only run.
    fn read_only_hint(&self) -> bool {
        false
    }
}

/// A tool with typed parameters; wrap it in [`Typed`] to get a [`Tool`].
pub trait TypedTool: Send + Sync + 'static {
    type Params: DeserializeOwned + schemars::JsonSchema + Send;
    const NAME: &'static str;

    fn description(&self) -> String;

    fn run<'a>(&'a self, params: Self::Params, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue>;
}

/// Adapter from [`TypedTool`] to [`Tool`]: derives the schema once, when a model request first
/// lists it; validates arguments by deserializing them into `Params`.
pub struct Typed<T: TypedTool> {
    tool: T,
    spec: ToolSpec,
}

impl<T: TypedTool> Typed<T> {
    pub fn new(tool: T) -> Self {
        let spec = ToolSpec {
            name: T::NAME.to_string(),
            description: schema::shared_text(tool.description()),
            parameters: crate::llm::Parameters::derived(schema::shared_parameters_schema::<T::Params>),
        };
        Self { tool, spec }
    }
}

impl<T: TypedTool> Tool for Typed<T> {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call<'a>(&'a self, arguments: Value, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        if !arguments.is_object() {
            return Box::pin(async move {
                invalid_arguments(format!(
                    "Error validating JSON arguments: expected an object, got {}",
                    json_kind(&arguments)
                ))
            });
        }
        match serde_json::from_value::<T::Params>(arguments) {
            Ok(params) => self.tool.run(params, ctx),
            Err(e) => Box::pin(async move { invalid_arguments(format!("Error validating JSON arguments: {e}")) }),
        }
    }
}

pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

pub fn invalid_arguments(message: String) -> ToolReturnValue {
    ToolReturnValue::error(message, "Invalid arguments")
}

/// The check of a numeric argument's range (serde cannot express it): the invalid-arguments
/// result when `value` of argument `name` is outside `range`, `None` when it is fine.
pub fn check_range<T>(name: &str, value: T, range: std::ops::RangeInclusive<T>) -> Option<ToolReturnValue>
where
    T: PartialOrd + std::fmt::Display,
{
    if range.contains(&value) {
        return None;
    }
    Some(invalid_arguments(format!(
        "Error validating JSON arguments: {name} must be between {} and {}, got {value}",
        range.start(),
        range.end()
    )))
}

/// The tools one agent offers, in the order the model sees them.
#[derive(Clone, Default)]
pub struct Toolset {
    tools: Vec<Arc<dyn Tool>>,
    index: HashMap<String, usize>,
    specs: Arc<Vec<ToolSpec>>,
}

impl Toolset {
    pub fn new(tools: Vec<Arc<dyn Tool>>) -> Self {
        let mut set = Self::default();
        set.extend(tools);
        set
    }

    /// Adds a tool, replacing one of the same name in place.
    pub fn insert(&mut self, tool: Arc<dyn Tool>) {
        self.extend([tool]);
    }

    /// Adds tools in order, each replacing one of the same name in place. The model's tool list
    /// is rebuilt once, so registering n tools costs O(n), not O(n²).
    pub fn extend(&mut self, tools: impl IntoIterator<Item = Arc<dyn Tool>>) {
        for tool in tools {
            let name = tool.spec().name.clone();
            match self.index.get(&name) {
                Some(&i) => self.tools[i] = tool,
                None => {
                    self.index.insert(name, self.tools.len());
                    self.tools.push(tool);
                }
            }
        }
        self.specs = Arc::new(self.tools.iter().map(|t| t.spec().clone()).collect());
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.index.get(name).map(|&i| &self.tools[i])
    }

    /// Tool definitions for the LLM, built once per change rather than once per step.
    pub fn specs(&self) -> &[ToolSpec] {
        &self.specs
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.tools.iter().map(|t| t.spec().name.as_str())
    }

    /// Runs one tool call through the common dispatch rules.
    pub async fn dispatch(&self, name: &str, arguments: Option<&str>, ctx: &ToolCallContext) -> ToolReturnValue {
        let Some(tool) = self.get(name) else {
            let message = format!("Tool `{name}` not found");
            return ToolReturnValue::error(message.clone(), message);
        };
        let arguments = match parse_arguments(arguments) {
            Ok(v) => v,
            Err(e) => return invalid_arguments(format!("Error parsing JSON arguments: {e}")),
        };
        // A tool that panics is a broken tool, not a broken turn: the model gets an error result.
        match std::panic::AssertUnwindSafe(tool.call(arguments, ctx)).catch_unwind().await {
            Ok(result) => result,
            Err(panic) => {
                let detail = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "the tool panicked".into());
                tracing::error!("tool `{name}` panicked: {detail}");
                ToolReturnValue::crashed(format!("Error running tool: {detail}"))
            }
        }
    }
}

/// `null`, absent or empty arguments mean `{}`. Raw control characters inside strings (a
/// literal newline or tab a model wrote unescaped) are accepted, as the reference's lenient
/// parser does (`docs/protocol-1.10.md` §11).
pub fn parse_arguments(arguments: Option<&str>) -> Result<Value, serde_json::Error> {
    let text = match arguments.map(str::trim) {
        None | Some("") => return Ok(Value::Object(Map::new())),
        Some(text) => text,
    };
    let parsed = serde_json::from_str::<Value>(text).or_else(|e| match escape_controls_in_strings(text) {
        Some(fixed) => serde_json::from_str::<Value>(&fixed),
        None => Err(e),
    })?;
    Ok(if parsed.is_null() { Value::Object(Map::new()) } else { parsed })
}

/// `text` with raw control characters inside string literals escaped; `None` when there were none.
fn escape_controls_in_strings(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len() + 8);
    let (mut in_string, mut escaped, mut changed) = (false, false, false);
    for c in text.chars() {
        if in_string && !escaped && (c as u32) < 0x20 {
            out.push_str(&format!("\\u{:04x}", c as u32));
            changed = true;
            continue;
        }
        match c {
            '"' if !escaped => in_string = !in_string,
            _ => {}
        }
        escaped = in_string && c == '\\' && !escaped;
        out.push(c);
    }
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_name_the_argument_and_its_bounds() {
        assert!(check_range("limit", 5, 1..=20).is_none());
        assert!(check_range("limit", 20, 1..=20).is_none());
        let out = check_range("timeout", 0_u64, 30..=3600).unwrap();
        assert!(out.is_error);
        assert_eq!(out.message, "Error validating JSON arguments: timeout must be between 30 and 3600, got 0");
    }

    #[test]
    fn empty_arguments_are_an_empty_object() {
        assert_eq!(parse_arguments(None).unwrap(), Value::Object(Map::new()));
        assert_eq!(parse_arguments(Some("")).unwrap(), Value::Object(Map::new()));
        assert_eq!(parse_arguments(Some("null")).unwrap(), Value::Object(Map::new()));
        assert!(parse_arguments(Some("{")).is_err());
    }

    #[test]
    fn control_characters_inside_strings_are_accepted() {
        let v = parse_arguments(Some("{\"content\": \"a\nb\tc\", \"x\": \"q\\\"\n\"}")).unwrap();
        assert_eq!(v["content"], "a\nb\tc");
        assert_eq!(v["x"], "q\"\n");
        // Outside strings a control character is whitespace as usual; real errors stay errors.
        assert!(parse_arguments(Some("{\n\"a\": 1}")).is_ok());
        assert!(parse_arguments(Some("{\"a\": \"\n")).is_err());
    }
}

#[cfg(test)]
mod dispatch_tests {
    use std::sync::Arc;

    use super::*;

    struct Panics(ToolSpec);

    impl Tool for Panics {
        fn spec(&self) -> &ToolSpec {
            &self.0
        }

        fn call<'a>(&'a self, _: Value, _: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
            Box::pin(async { panic!("boom") })
        }
    }

    struct NoHost;

    impl ToolHost for NoHost {
        fn request_approval(&self, _: ApprovalAsk) -> BoxFuture<'_, bool> {
            Box::pin(async { false })
        }

        fn call_client_tool(&self, _: ClientToolCall) -> BoxFuture<'_, Option<ToolReturnValue>> {
            Box::pin(async { None })
        }
    }

    #[tokio::test]
    async fn a_panicking_tool_is_an_error_result() {
        let spec = ToolSpec { name: "P".into(), description: "".into(), parameters: Default::default() };
        let set = Toolset::new(vec![Arc::new(Panics(spec))]);
        let env = Arc::new(crate::agent_env::AgentEnv {
            work_dir: std::env::temp_dir(),
            share_dir: std::env::temp_dir(),
            session_dir: std::env::temp_dir(),
            session_id: "t".into(),
            config: Arc::default(),
            model: Default::default(),
            sandbox: Default::default(),
        });
        let ctx = ToolCallContext { tool_call_id: "c".into(), raw_arguments: None, env, host: Arc::new(NoHost) };
        let r = set.dispatch("P", None, &ctx).await;
        assert!(r.is_error);
        assert_eq!(r.message, "Error running tool: boom");
        assert_eq!(r.display, vec![crate::protocol::DisplayBlock::brief("Tool runtime error")]);
    }
}
