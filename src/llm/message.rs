//! Conversation history messages, serialized exactly as `context.jsonl` stores them:
//! keys `role, name, content, tool_calls, tool_call_id, partial`, nulls omitted, `content` a plain
//! string when it is exactly one text part, tool calls without null `arguments` / `extras`.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

use crate::protocol::{ContentPart, FunctionCall, ToolCall};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub role: Role,
    pub name: Option<String>,
    pub content: Vec<ContentPart>,
    pub tool_calls: Option<Vec<ToolCall>>,
    pub tool_call_id: Option<String>,
    pub partial: Option<bool>,
}

impl Message {
    pub fn new(role: Role, content: Vec<ContentPart>) -> Self {
        Self { role, name: None, content, tool_calls: None, tool_call_id: None, partial: None }
    }

    pub fn user(content: Vec<ContentPart>) -> Self {
        Self::new(Role::User, content)
    }

    pub fn user_text(text: impl Into<String>) -> Self {
        Self::new(Role::User, vec![ContentPart::text(text)])
    }

    pub fn tool(tool_call_id: impl Into<String>, content: Vec<ContentPart>) -> Self {
        Self { tool_call_id: Some(tool_call_id.into()), ..Self::new(Role::Tool, content) }
    }

    /// Concatenation of the text parts, no separator.
    pub fn text(&self) -> String {
        self.content.iter().filter_map(ContentPart::as_text).collect()
    }

    pub fn has_tool_calls(&self) -> bool {
        self.tool_calls.as_ref().is_some_and(|c| !c.is_empty())
    }
}

/// Tool call as stored in history: `arguments` and `extras` omitted when null.
#[derive(Serialize, Deserialize)]
struct StoredFunction {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    arguments: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct StoredToolCall {
    #[serde(rename = "type", default = "function_type")]
    kind: String,
    id: String,
    function: StoredFunction,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    extras: Option<Map<String, Value>>,
}

fn function_type() -> String {
    "function".into()
}

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum StoredContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Serialize, Deserialize)]
struct StoredMessage {
    role: Role,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    name: Option<String>,
    #[serde(default)]
    content: Option<StoredContent>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    tool_calls: Option<Vec<StoredToolCall>>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    tool_call_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    partial: Option<bool>,
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let content = match self.content.as_slice() {
            [ContentPart::Text { text }] => StoredContent::Text(text.clone()),
            parts => StoredContent::Parts(parts.to_vec()),
        };
        let tool_calls = self.tool_calls.as_ref().map(|calls| {
            calls
                .iter()
                .map(|c| StoredToolCall {
                    kind: c.kind.clone(),
                    id: c.id.clone(),
                    function: StoredFunction { name: c.function.name.clone(), arguments: c.function.arguments.clone() },
                    extras: c.extras.clone(),
                })
                .collect()
        });
        StoredMessage {
            role: self.role,
            name: self.name.clone(),
            content: Some(content),
            tool_calls,
            tool_call_id: self.tool_call_id.clone(),
            partial: self.partial,
        }
        .serialize(s)
    }
}

impl<'de> Deserialize<'de> for Message {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let stored = StoredMessage::deserialize(d)?;
        let content = match stored.content {
            None => Vec::new(),
            Some(StoredContent::Text(t)) => vec![ContentPart::text(t)],
            Some(StoredContent::Parts(p)) => p,
        };
        let tool_calls = stored.tool_calls.map(|calls| {
            calls
                .into_iter()
                .map(|c| ToolCall {
                    kind: c.kind,
                    id: c.id,
                    function: FunctionCall { name: c.function.name, arguments: c.function.arguments },
                    extras: c.extras,
                })
                .collect()
        });
        if stored.role == Role::Tool && stored.tool_call_id.is_none() {
            return Err(D::Error::custom("tool message without tool_call_id"));
        }
        Ok(Message {
            role: stored.role,
            name: stored.name,
            content,
            tool_calls,
            tool_call_id: stored.tool_call_id,
            partial: stored.partial,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_lines_round_trip_exactly() {
        for line in [
            r#"{"role":"user","content":"go"}"#,
            r#"{"role":"assistant","content":[{"type":"think","think":"t1t2","encrypted":null},{"type":"text","text":"ab"},{"type":"text","text":"tail"}],"tool_calls":[{"type":"function","id":"x","function":{"name":"SetTodoList","arguments":"{\"todos\":[]}"}}]}"#,
            r#"{"role":"tool","content":"<system>Todo list updated</system>","tool_call_id":"x"}"#,
            r#"{"role":"tool","content":[{"type":"text","text":"<system>m</system>"},{"type":"text","text":"hello"}],"tool_call_id":"e3"}"#,
            r#"{"role":"assistant","content":[],"tool_calls":[{"type":"function","id":"c1","function":{"name":"Shell"}}]}"#,
        ] {
            let m: Message = serde_json::from_str(line).unwrap();
            assert_eq!(serde_json::to_string(&m).unwrap(), line);
        }
    }

    #[test]
    fn malformed_messages_are_rejected() {
        assert!(serde_json::from_str::<Message>(r#"{"role":"wizard","content":"x"}"#).is_err());
        assert!(serde_json::from_str::<Message>(r#"{"role":"tool","content":"x"}"#).is_err());
        assert!(serde_json::from_str::<Message>(r#"{"content":"x"}"#).is_err());
    }
}
