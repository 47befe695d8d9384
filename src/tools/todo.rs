//! `SetTodoList`: replaces the agent's visible todo list.

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use super::{ToolCallContext, TypedTool, invalid_arguments};
use crate::protocol::{DisplayBlock, TodoItem, TodoStatus, ToolReturnValue};

pub struct SetTodoList;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct Todo {
    /// Short title of the task.
    #[schemars(length(min = 1))]
    pub title: String,
    /// Where the task stands.
    pub status: TodoStatus,
}

#[derive(Debug, Deserialize, JsonSchema)]
pub struct SetTodoListParams {
    /// The complete, updated todo list.
    pub todos: Vec<Todo>,
}

impl JsonSchema for TodoStatus {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "TodoStatus".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"type": "string", "enum": ["pending", "in_progress", "done"]})
    }
}

impl TypedTool for SetTodoList {
    type Params = SetTodoListParams;
    const NAME: &'static str = "SetTodoList";

    fn description(&self) -> String {
        include_str!("desc/set_todo_list.md").trim().to_string()
    }

    fn run<'a>(&'a self, params: SetTodoListParams, _ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        Box::pin(async move {
            if params.todos.iter().any(|t| t.title.is_empty()) {
                return invalid_arguments(
                    "Error validating JSON arguments: todos[].title must be at least 1 character long".into(),
                );
            }
            let items = params.todos.into_iter().map(|t| TodoItem { title: t.title, status: t.status }).collect();
            ToolReturnValue::ok("", "Todo list updated").with_display(vec![DisplayBlock::Todo { items }])
        })
    }
}
