//! An MCP server's tool as a kiwi tool (`docs/tools.md` §10, `docs/subcommands.md` §2.5, §2.8):
//! validated arguments, approval `mcp:<name>`, the call under `tool_call_timeout_ms`, the result
//! mapped to content parts.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::content::tool_result;
use super::link::{CallError, ServerLink};
use crate::llm::ToolSpec;
use crate::protocol::ToolReturnValue;
use crate::tools::{Tool, ToolCallContext, invalid_arguments};

/// What every MCP tool shares, whatever carries its calls (a server kiwi connects, or an SDK
/// host's in-process one): the spec the model sees, and the check of a call's arguments.
pub struct ToolShape {
    pub spec: ToolSpec,
    /// None when the server's schema does not compile: arguments then go to the server as they are.
    validator: Option<jsonschema::Validator>,
}

impl ToolShape {
    /// The tool `name` of `server` (offered as `name`), with its input schema and description.
    pub fn new(server: &str, name: String, schema: Map<String, Value>, description: Option<&str>) -> Self {
        let validator = match jsonschema::validator_for(&Value::Object(schema.clone())) {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::warn!("MCP server {server}: tool {name} has a schema kiwi cannot check: {e}");
                None
            }
        };
        let described = description.filter(|d| !d.trim().is_empty()).unwrap_or(NO_DESCRIPTION);
        let description = format!("This tool comes from the MCP server `{server}`.\n\n{described}");
        Self { spec: ToolSpec { name, description: description.into(), parameters: schema.into() }, validator }
    }

    /// The call's arguments as the object the server gets, once they fit the schema and the call
    /// is approved; otherwise the result for the model.
    pub async fn admit(&self, arguments: Value, ctx: &ToolCallContext) -> Result<Map<String, Value>, ToolReturnValue> {
        let arguments = self.check(arguments).map_err(|refused| *refused)?;
        if !self.approve(ctx).await {
            return Err(ToolReturnValue::rejected());
        }
        Ok(arguments)
    }

    /// The call's arguments as the object the server gets, or the result refusing them.
    fn check(&self, arguments: Value) -> Result<Map<String, Value>, Box<ToolReturnValue>> {
        if let Some(validator) = &self.validator
            && let Err(e) = validator.validate(&arguments)
        {
            return Err(Box::new(invalid_arguments(format!("Error validating JSON arguments: {e}"))));
        }
        match arguments {
            Value::Object(arguments) => Ok(arguments),
            other => Err(Box::new(invalid_arguments(format!(
                "Error validating JSON arguments: expected an object, got {}",
                crate::tools::json_kind(&other)
            )))),
        }
    }

    /// Asks for the approval `mcp:<name>` of a call.
    async fn approve(&self, ctx: &ToolCallContext) -> bool {
        let name = &self.spec.name;
        ctx.approve(name, &format!("mcp:{name}"), format!("Call MCP tool `{name}`."), Vec::new()).await
    }
}

const NO_DESCRIPTION: &str = "(The server gives no description for this tool.)";

pub struct McpTool {
    shape: ToolShape,
    link: Arc<ServerLink>,
    timeout: Duration,
    /// The server's `readOnlyHint` annotation.
    read_only: bool,
}

impl McpTool {
    pub fn new(link: Arc<ServerLink>, tool: &rmcp::model::Tool, timeout: Duration) -> Self {
        let schema: Map<String, Value> = (*tool.input_schema).clone();
        let shape = ToolShape::new(&link.name, tool.name.to_string(), schema, tool.description.as_deref());
        let read_only = tool.annotations.as_ref().and_then(|a| a.read_only_hint).unwrap_or(false);
        Self { shape, link, timeout, read_only }
    }
}

pub fn timeout_message(name: &str) -> String {
    format!(
        "Timeout while calling MCP tool `{name}`. You may explain to the user that the timeout config is set too low."
    )
}

impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.shape.spec
    }

    fn read_only_hint(&self) -> bool {
        self.read_only
    }

    fn call<'a>(&'a self, arguments: Value, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        Box::pin(async move {
            let name = &self.shape.spec.name;
            let arguments = match self.shape.admit(arguments, ctx).await {
                Ok(arguments) => arguments,
                Err(refused) => return refused,
            };
            match tokio::time::timeout(self.timeout, self.link.call(name, arguments)).await {
                Ok(Ok(result)) => tool_result(&result),
                Ok(Err(CallError::Failed(text))) => {
                    tracing::warn!("MCP tool {name} on {}: {text}", self.link.name);
                    ToolReturnValue::crashed(format!("Error running tool: {text}"))
                }
                Ok(Err(CallError::TimedOut)) | Err(_) => {
                    tracing::warn!("MCP tool {name} on {}: no answer within {:?}", self.link.name, self.timeout);
                    ToolReturnValue::error(timeout_message(name), "Timeout")
                }
            }
        })
    }
}
