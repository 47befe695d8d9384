//! `Think`: a scratchpad call that records a thought and does nothing else.

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{ToolCallContext, TypedTool};
use crate::protocol::ToolReturnValue;

pub struct Think;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ThinkParams {
    /// The thought to write down.
    pub thought: String,
}

impl TypedTool for Think {
    type Params = ThinkParams;
    const NAME: &'static str = "Think";

    fn description(&self) -> String {
        include_str!("desc/think.md").trim().to_string()
    }

    fn run<'a>(&'a self, _params: ThinkParams, _ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        Box::pin(async { ToolReturnValue::ok("", "Thought logged") })
    }
}
