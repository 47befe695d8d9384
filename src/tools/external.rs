//! Tools owned by the client: registered in `initialize`, called through `ToolCallRequest`.
//!
//! Arguments are validated against the client's JSON Schema before the client is asked; a call
//! the client never answers (shutdown, cancel) resolves to an error result.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use super::host::ClientToolCall;
use super::{Tool, ToolCallContext};
use crate::llm::ToolSpec;
use crate::protocol::ToolReturnValue;

pub struct ExternalTool {
    spec: ToolSpec,
    validator: jsonschema::Validator,
}

impl ExternalTool {
    /// Checks `parameters` against the Draft 2020-12 meta-schema; the error is the rejection reason.
    pub fn new(name: &str, description: &str, parameters: Map<String, Value>) -> Result<Self, String> {
        let schema = Value::Object(parameters.clone());
        if let Err(e) = jsonschema::draft202012::meta::validate(&schema) {
            let reason = e.to_string();
            return Err(if reason.is_empty() { "invalid schema".into() } else { reason });
        }
        let validator = jsonschema::draft202012::new(&schema).map_err(|e| {
            let reason = e.to_string();
            if reason.is_empty() { "invalid schema".to_string() } else { reason }
        })?;
        let description =
            if description.is_empty() { "No description provided.".to_string() } else { description.to_string() };
        Ok(Self {
            spec: ToolSpec { name: name.to_string(), description: description.into(), parameters: parameters.into() },
            validator,
        })
    }

    pub fn into_tool(self) -> Arc<dyn Tool> {
        Arc::new(self)
    }
}

impl Tool for ExternalTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn is_external(&self) -> bool {
        true
    }

    fn call<'a>(&'a self, arguments: Value, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        Box::pin(async move {
            if let Err(e) = self.validator.validate(&arguments) {
                return super::invalid_arguments(format!("Error validating JSON arguments: {e}"));
            }
            let call = ClientToolCall {
                tool_call_id: ctx.tool_call_id.clone(),
                name: self.spec.name.clone(),
                arguments: ctx.raw_arguments.clone(),
            };
            match ctx.host.call_client_tool(call).await {
                Some(value) => value,
                None => {
                    ToolReturnValue::error("Wire connection closed before tool result was received.", "Wire closed")
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(json: &str) -> Map<String, Value> {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn valid_schema_is_accepted_and_empty_description_filled() {
        let t =
            ExternalTool::new("t", "", schema(r#"{"type":"object","properties":{"a":{"type":"string"}}}"#)).unwrap();
        assert_eq!(&*t.spec().description, "No description provided.");
    }

    #[test]
    fn invalid_schema_is_rejected_with_a_reason() {
        let err = ExternalTool::new("t", "d", schema(r#"{"type":"nope"}"#)).err().unwrap();
        assert!(!err.is_empty());
    }
}
