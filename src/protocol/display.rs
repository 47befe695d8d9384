//! Display blocks: structured hints for a client UI attached to approvals and tool results.
//!
//! Known block types serialize with exactly the spec's fields. A block of a type we do not know
//! (sent by a client in an external tool result) is kept as `{"type":T,"data":{...rest}}`.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Done,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TodoItem {
    pub title: String,
    pub status: TodoStatus,
}

#[derive(Debug, Clone, PartialEq)]
pub enum DisplayBlock {
    Brief { text: String },
    Diff { path: String, old_text: String, new_text: String },
    Todo { items: Vec<TodoItem> },
    Shell { language: String, command: String },
    Unknown { kind: String, data: Map<String, Value> },
}

impl DisplayBlock {
    pub fn brief(text: impl Into<String>) -> Self {
        DisplayBlock::Brief { text: text.into() }
    }
}

/// Serde mirror of the known variants; `Unknown` is handled by hand around it.
#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Known {
    Brief { text: String },
    Diff { path: String, old_text: String, new_text: String },
    Todo { items: Vec<TodoItem> },
    Shell { language: String, command: String },
}

impl Serialize for DisplayBlock {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let known = match self.clone() {
            DisplayBlock::Brief { text } => Known::Brief { text },
            DisplayBlock::Diff { path, old_text, new_text } => Known::Diff { path, old_text, new_text },
            DisplayBlock::Todo { items } => Known::Todo { items },
            DisplayBlock::Shell { language, command } => Known::Shell { language, command },
            DisplayBlock::Unknown { kind, data } => {
                #[derive(Serialize)]
                struct Raw<'a> {
                    #[serde(rename = "type")]
                    kind: &'a str,
                    data: &'a Map<String, Value>,
                }
                return Raw { kind: &kind, data: &data }.serialize(s);
            }
        };
        known.serialize(s)
    }
}

impl<'de> Deserialize<'de> for DisplayBlock {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let mut map = Map::<String, Value>::deserialize(d)?;
        let kind = match map.get("type") {
            Some(Value::String(k)) => k.clone(),
            _ => return Err(D::Error::custom("display block needs a string `type`")),
        };
        if matches!(kind.as_str(), "brief" | "diff" | "todo" | "shell") {
            let known: Known = serde_json::from_value(Value::Object(map)).map_err(D::Error::custom)?;
            return Ok(match known {
                Known::Brief { text } => DisplayBlock::Brief { text },
                Known::Diff { path, old_text, new_text } => DisplayBlock::Diff { path, old_text, new_text },
                Known::Todo { items } => DisplayBlock::Todo { items },
                Known::Shell { language, command } => DisplayBlock::Shell { language, command },
            });
        }
        map.remove("type");
        // A block we already normalized (`{"type","data"}`) stays as it was.
        let data = match (map.len(), map.get("data")) {
            (1, Some(Value::Object(inner))) => inner.clone(),
            _ => map,
        };
        Ok(DisplayBlock::Unknown { kind, data })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(json: &str) -> String {
        let b: DisplayBlock = serde_json::from_str(json).unwrap();
        serde_json::to_string(&b).unwrap()
    }

    #[test]
    fn known_blocks_round_trip_exactly() {
        for json in [
            r#"{"type":"brief","text":"Rejected by user"}"#,
            r#"{"type":"diff","path":"/w/a.txt","old_text":"","new_text":"a\nb"}"#,
            r#"{"type":"todo","items":[{"title":"a","status":"pending"},{"title":"b","status":"in_progress"},{"title":"c","status":"done"}]}"#,
            r#"{"type":"shell","language":"bash","command":"echo hi"}"#,
        ] {
            assert_eq!(round_trip(json), json);
        }
    }

    #[test]
    fn unknown_blocks_are_wrapped_in_data() {
        assert_eq!(round_trip(r#"{"type":"custom","foo":1}"#), r#"{"type":"custom","data":{"foo":1}}"#);
        assert_eq!(round_trip(r#"{"type":"custom","data":{"foo":1}}"#), r#"{"type":"custom","data":{"foo":1}}"#);
    }

    #[test]
    fn malformed_known_block_is_an_error() {
        assert!(serde_json::from_str::<DisplayBlock>(r#"{"type":"brief"}"#).is_err());
        assert!(serde_json::from_str::<DisplayBlock>(r#"{"text":"x"}"#).is_err());
        assert!(
            serde_json::from_str::<DisplayBlock>(r#"{"type":"todo","items":[{"title":"a","status":"weird"}]}"#)
                .is_err()
        );
    }
}
