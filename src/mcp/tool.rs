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

pub struct McpTool {
    spec: ToolSpec,
    /// None when the server's schema does not compile: arguments then go to the server as they are.
    validator: Option<jsonschema::Validator>,
    link: Arc<ServerLink>,
    timeout: Duration,
}

impl McpTool {
    pub fn new(link: Arc<ServerLink>, tool: &rmcp::model::Tool, timeout: Duration) -> Self {
        let parameters: Map<String, Value> = (*tool.input_schema).clone();
        let validator = match jsonschema::validator_for(&Value::Object(parameters.clone())) {
            Ok(v) => Some(v),
            Err(e) => {
                tracing::warn!("MCP server {}: tool {} has a schema kiwi cannot check: {e}", link.name, tool.name);
                None
            }
        };
        let described = match tool.description.as_deref().filter(|d| !d.trim().is_empty()) {
            Some(d) => d.to_string(),
            None => "(The server gives no description for this tool.)".to_string(),
        };
        let description = format!("This tool comes from the MCP server `{}`.\n\n{described}", link.name);
        Self {
            spec: ToolSpec {
                name: tool.name.to_string(),
                description: description.into(),
                parameters: parameters.into(),
            },
            validator,
            link,
            timeout,
        }
    }
}

pub fn timeout_message(name: &str) -> String {
    format!(
        "Timeout while calling MCP tool `{name}`. You may explain to the user that the timeout config is set too low."
    )
}

impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call<'a>(&'a self, arguments: Value, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        Box::pin(async move {
            let name = &self.spec.name;
            if let Some(validator) = &self.validator
                && let Err(e) = validator.validate(&arguments)
            {
                return invalid_arguments(format!("Error validating JSON arguments: {e}"));
            }
            let Value::Object(arguments) = arguments else {
                return invalid_arguments(format!(
                    "Error validating JSON arguments: expected an object, got {}",
                    crate::tools::json_kind(&arguments)
                ));
            };
            if !ctx.approve(name, &format!("mcp:{name}"), format!("Call MCP tool `{name}`."), Vec::new()).await {
                return ToolReturnValue::rejected();
            }
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
