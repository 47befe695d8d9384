//! `SetTodoList`: replaces the session's todo list, or reads it back when `todos` is omitted
//! (`docs/protocol-1.10.md` §11). The list lives in the session state (`state.json`), through the host.

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
    /// The complete, updated todo list. Omit it to read the current list back.
    #[serde(default)]
    pub todos: Option<Vec<Todo>>,
}

impl TypedTool for SetTodoList {
    type Params = SetTodoListParams;
    const NAME: &'static str = "SetTodoList";

    fn description(&self) -> String {
        include_str!("desc/set_todo_list.md").trim().to_string()
    }

    fn run<'a>(&'a self, params: SetTodoListParams, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        Box::pin(async move {
            let Some(todos) = params.todos else {
                return ToolReturnValue::ok(render(&ctx.host.todos()), "");
            };
            if todos.iter().any(|t| t.title.is_empty()) {
                return invalid_arguments(
                    "Error validating JSON arguments: todos[].title must be at least 1 character long".into(),
                );
            }
            let items: Vec<TodoItem> =
                todos.into_iter().map(|t| TodoItem { title: t.title, status: t.status }).collect();
            ctx.host.set_todos(items.clone());
            ToolReturnValue::ok("Todo list updated", "Todo list updated")
                .with_display(vec![DisplayBlock::Todo { items }])
        })
    }
}

/// The list as the model reads it back.
fn render(todos: &[TodoItem]) -> String {
    if todos.is_empty() {
        return "Todo list is empty.".into();
    }
    let mut text = String::from("Current todo list:");
    for t in todos {
        let status = match t.status {
            TodoStatus::Pending => "pending",
            TodoStatus::InProgress => "in_progress",
            TodoStatus::Done => "done",
        };
        text.push_str(&format!("\n- [{status}] {}", t.title));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_reads_back() {
        assert_eq!(render(&[]), "Todo list is empty.");
        let todos = [
            TodoItem { title: "a".into(), status: TodoStatus::Done },
            TodoItem { title: "b".into(), status: TodoStatus::InProgress },
        ];
        assert_eq!(render(&todos), "Current todo list:\n- [done] a\n- [in_progress] b");
    }
}
