//! `--json-schema` (`docs/print-mode.md` B.3a): the `StructuredOutput` tool, whose input schema
//! is the host's. An object that does not validate gets an error result naming the field, so the
//! model can try again; a valid one is kept for the turn's `result` (`structured_output`, and
//! the same object as compact JSON in `result`) and ends the turn after its step.
//!
//! Invariants: the schema is checked once, at start-up (it must compile and describe an object,
//! as tool inputs are objects); the kept answer belongs to the running turn (taken when its
//! `result` is written).

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use serde_json::{Map, Value};

use crate::llm::ToolSpec;
use crate::protocol::{ErrorCause, ToolReturnValue};
use crate::tools::{Tool, ToolCallContext};

pub const TOOL_NAME: &str = "StructuredOutput";

/// The running turn's accepted answer.
pub type StructuredSlot = Arc<Mutex<Option<Value>>>;

pub struct StructuredOutput {
    spec: ToolSpec,
    validator: jsonschema::Validator,
    slot: StructuredSlot,
}

impl StructuredOutput {
    /// The tool for the schema text of `--json-schema`; the error is one line for the user.
    pub fn new(schema_text: &str, slot: StructuredSlot) -> Result<Self, String> {
        let schema: Value =
            serde_json::from_str(schema_text).map_err(|e| format!("--json-schema is not valid JSON: {e}"))?;
        let Value::Object(parameters) = schema else {
            return Err("--json-schema must be a JSON Schema object".into());
        };
        if parameters.get("type").is_some_and(|t| t != "object") {
            return Err("--json-schema must describe a JSON object (\"type\": \"object\")".into());
        }
        let validator = jsonschema::validator_for(&Value::Object(parameters.clone()))
            .map_err(|e| format!("--json-schema is not a valid JSON Schema: {e}"))?;
        let mut parameters: Map<String, Value> = parameters;
        parameters.entry("type").or_insert_with(|| Value::from("object"));
        let description = "Use this tool to return your final response in the requested structured format. \
             Call it exactly once, at the end, with the whole answer as its input."
            .to_string();
        Ok(Self {
            spec: ToolSpec { name: TOOL_NAME.into(), description: description.into(), parameters: parameters.into() },
            validator,
            slot,
        })
    }
}

impl Tool for StructuredOutput {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn call<'a>(&'a self, arguments: Value, _ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        Box::pin(async move {
            let errors: Vec<String> = self
                .validator
                .iter_errors(&arguments)
                .map(|e| {
                    let path = e.instance_path().to_string();
                    format!("{}: {e}", if path.is_empty() { "/".to_string() } else { path })
                })
                .collect();
            if !errors.is_empty() {
                let message = format!("Output does not match required schema: {}", errors.join(", "));
                return ToolReturnValue::error(message, "Schema mismatch");
            }
            *self.slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(arguments);
            ToolReturnValue {
                cause: ErrorCause::EndsTurn,
                ..ToolReturnValue::ok("", "Structured output provided successfully")
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn schemas_are_checked_at_start_up() {
        let slot = StructuredSlot::default();
        let error = |schema: &str| StructuredOutput::new(schema, StructuredSlot::default()).err().unwrap_or_default();
        assert!(error("{").contains("not valid JSON"));
        assert!(error("[]").contains("JSON Schema object"));
        assert!(error(r#"{"type":"string"}"#).contains("object"));
        assert!(StructuredOutput::new(r#"{"type":"object","properties":{"a":{"type":7}}}"#, slot.clone()).is_err());
        let tool = StructuredOutput::new(r#"{"properties":{"a":{"type":"integer"}}}"#, slot).unwrap();
        assert_eq!(tool.spec().parameters.get("type"), Some(&json!("object")));
    }
}
