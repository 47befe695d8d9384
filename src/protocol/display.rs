//! Display blocks: structured hints for a client UI attached to approvals and tool results.
//!
//! Known block types serialize with exactly the spec's fields (`docs/protocol-1.10.md` §3.3: a `diff` block
//! always carries `old_start`, `new_start` and `is_summary`, which default to 1, 1 and false when
//! an older record lacks them). A block of a type we do not know (sent by a client in an external
//! tool result) is kept as `{"type":T,"data":{...rest}}`.

use schemars::JsonSchema;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    Pending,
    InProgress,
    Done,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TodoItem {
    pub title: String,
    pub status: TodoStatus,
}

/// One hunk of a file edit, or a summary when the file is too big to diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DiffBlock {
    pub path: String,
    pub old_text: String,
    pub new_text: String,
    /// 1-based first line of `old_text` in the old file.
    #[serde(default = "first_line")]
    pub old_start: u64,
    #[serde(default = "first_line")]
    pub new_start: u64,
    /// True when the texts are line counts instead of a diff.
    #[serde(default)]
    pub is_summary: bool,
}

fn first_line() -> u64 {
    1
}

/// Kind of a background task (`background_task` block).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskKind {
    Bash,
    Agent,
}

#[derive(Debug, Clone, PartialEq)]
pub enum DisplayBlock {
    Brief { text: String },
    Diff(DiffBlock),
    Todo { items: Vec<TodoItem> },
    Shell { language: String, command: String },
    BackgroundTask { task_id: String, kind: TaskKind, status: String, description: String },
    Unknown { kind: String, data: Map<String, Value> },
}

impl DisplayBlock {
    pub fn brief(text: impl Into<String>) -> Self {
        DisplayBlock::Brief { text: text.into() }
    }

    /// A diff hunk: the old and new line ranges starting at the given 1-based lines.
    pub fn diff_hunk(
        path: impl Into<String>,
        old_text: impl Into<String>,
        new_text: impl Into<String>,
        old_start: u64,
        new_start: u64,
    ) -> Self {
        DisplayBlock::Diff(DiffBlock {
            path: path.into(),
            old_text: old_text.into(),
            new_text: new_text.into(),
            old_start,
            new_start,
            is_summary: false,
        })
    }

    /// The block for files too big to diff: line counts only (`docs/protocol-1.10.md` §3.3).
    pub fn diff_summary(path: impl Into<String>, old_lines: usize, new_lines: usize) -> Self {
        let new_text = if old_lines == new_lines {
            format!("({new_lines} lines, modified)")
        } else {
            format!("({new_lines} lines)")
        };
        DisplayBlock::Diff(DiffBlock {
            path: path.into(),
            old_text: format!("({old_lines} lines)"),
            new_text,
            old_start: 1,
            new_start: 1,
            is_summary: true,
        })
    }
}

/// Serde mirror of the known variants; `Unknown` is handled by hand around it.
#[derive(Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Known {
    Brief { text: String },
    Diff(DiffBlock),
    Todo { items: Vec<TodoItem> },
    Shell { language: String, command: String },
    BackgroundTask { task_id: String, kind: TaskKind, status: String, description: String },
}

/// A known block, or any other object with a string `type` (kept as `{"type", "data"}`).
impl JsonSchema for DisplayBlock {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "DisplayBlock".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let known = generator.subschema_for::<Known>();
        schemars::json_schema!({
            "description": "A display hint for a client UI. Blocks of other types (from client-owned tools) are passed on as `{\"type\": T, \"data\": {...}}`.",
            "anyOf": [
                known,
                {
                    "type": "object",
                    "properties": {"type": {"type": "string"}, "data": {"type": "object"}},
                    "required": ["type"]
                }
            ]
        })
    }
}

impl Serialize for DisplayBlock {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let known = match self.clone() {
            DisplayBlock::Brief { text } => Known::Brief { text },
            DisplayBlock::Diff(block) => Known::Diff(block),
            DisplayBlock::Todo { items } => Known::Todo { items },
            DisplayBlock::Shell { language, command } => Known::Shell { language, command },
            DisplayBlock::BackgroundTask { task_id, kind, status, description } => {
                Known::BackgroundTask { task_id, kind, status, description }
            }
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
        if matches!(kind.as_str(), "brief" | "diff" | "todo" | "shell" | "background_task") {
            let known: Known = serde_json::from_value(Value::Object(map)).map_err(D::Error::custom)?;
            return Ok(match known {
                Known::Brief { text } => DisplayBlock::Brief { text },
                Known::Diff(block) => DisplayBlock::Diff(block),
                Known::Todo { items } => DisplayBlock::Todo { items },
                Known::Shell { language, command } => DisplayBlock::Shell { language, command },
                Known::BackgroundTask { task_id, kind, status, description } => {
                    DisplayBlock::BackgroundTask { task_id, kind, status, description }
                }
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
            r#"{"type":"diff","path":"/w/a.txt","old_text":"","new_text":"a\nb","old_start":1,"new_start":1,"is_summary":false}"#,
            r#"{"type":"diff","path":"/w/big.txt","old_text":"(12000 lines)","new_text":"(12000 lines, modified)","old_start":1,"new_start":1,"is_summary":true}"#,
            r#"{"type":"background_task","task_id":"bash-a1b2c3d4","kind":"bash","status":"running","description":"sleep"}"#,
            r#"{"type":"todo","items":[{"title":"a","status":"pending"},{"title":"b","status":"in_progress"},{"title":"c","status":"done"}]}"#,
            r#"{"type":"shell","language":"bash","command":"echo hi"}"#,
        ] {
            assert_eq!(round_trip(json), json);
        }
    }

    #[test]
    fn diff_blocks_of_older_records_gain_the_new_members() {
        assert_eq!(
            round_trip(r#"{"type":"diff","path":"p","old_text":"a","new_text":"b"}"#),
            r#"{"type":"diff","path":"p","old_text":"a","new_text":"b","old_start":1,"new_start":1,"is_summary":false}"#
        );
    }

    #[test]
    fn summaries_count_lines() {
        let b = DisplayBlock::diff_summary("p", 10001, 10002);
        assert_eq!(
            serde_json::to_string(&b).unwrap(),
            r#"{"type":"diff","path":"p","old_text":"(10001 lines)","new_text":"(10002 lines)","old_start":1,"new_start":1,"is_summary":true}"#
        );
        assert_eq!(
            serde_json::to_string(&DisplayBlock::diff_hunk("p", "x", "y", 4, 5)).unwrap(),
            r#"{"type":"diff","path":"p","old_text":"x","new_text":"y","old_start":4,"new_start":5,"is_summary":false}"#
        );
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
        assert!(
            serde_json::from_str::<DisplayBlock>(
                r#"{"type":"background_task","task_id":"t","kind":"cron","status":"s","description":"d"}"#
            )
            .is_err()
        );
    }
}
