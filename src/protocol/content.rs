//! Content parts: the pieces a user message, an assistant message or a tool output is made of.
//!
//! Serialized with every field present (`"id":null`, `"encrypted":null`), as the wire protocol and
//! `context.jsonl` both require. Unknown `type` values fail to deserialize, which the wire layer
//! turns into -32602 (the reference crashes there).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A URL to a media object plus an optional provider-side id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct MediaUrl {
    pub url: String,
    #[serde(default)]
    pub id: Option<String>,
}

impl MediaUrl {
    pub fn new(url: impl Into<String>) -> Self {
        Self { url: url.into(), id: None }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    Text {
        text: String,
    },
    Think {
        think: String,
        #[serde(default)]
        encrypted: Option<String>,
    },
    ImageUrl {
        image_url: MediaUrl,
    },
    AudioUrl {
        audio_url: MediaUrl,
    },
    VideoUrl {
        video_url: MediaUrl,
    },
}

impl ContentPart {
    pub fn text(text: impl Into<String>) -> Self {
        ContentPart::Text { text: text.into() }
    }

    pub fn think(think: impl Into<String>) -> Self {
        ContentPart::Think { think: think.into(), encrypted: None }
    }

    pub fn as_text(&self) -> Option<&str> {
        match self {
            ContentPart::Text { text } => Some(text),
            _ => None,
        }
    }

    pub fn is_think(&self) -> bool {
        matches!(self, ContentPart::Think { .. })
    }

    /// Appends `other` onto `self` when both are mergeable fragments of the same kind (text onto
    /// text, think onto an unencrypted think); `false` when they are not. The one merge rule of
    /// content fragments: the step assembler (`protocol::assembly`), the core's messages and
    /// compaction all use it.
    pub fn extend(&mut self, other: &ContentPart) -> bool {
        match (self, other) {
            (ContentPart::Text { text }, ContentPart::Text { text: more }) => {
                text.push_str(more);
                true
            }
            // A think block that already carries its signature is closed; a signature arriving
            // with a later fragment belongs to the merged block.
            (ContentPart::Think { think, encrypted: slot @ None }, ContentPart::Think { think: more, encrypted }) => {
                think.push_str(more);
                slot.clone_from(encrypted);
                true
            }
            _ => false,
        }
    }

    /// [`ContentPart::extend`] for an owned fragment: returns `other` back when not merged.
    pub fn merge(&mut self, other: ContentPart) -> Option<ContentPart> {
        if self.extend(&other) { None } else { Some(other) }
    }
}

/// `user_input` of `prompt` / `TurnBegin`: a plain string or a list of parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(untagged)]
pub enum UserInput {
    Text(String),
    Parts(Vec<ContentPart>),
}

impl UserInput {
    /// The parts of the user message built from this input (a string is one text part).
    pub fn to_parts(&self) -> Vec<ContentPart> {
        match self {
            UserInput::Text(t) => vec![ContentPart::text(t.clone())],
            UserInput::Parts(p) => p.clone(),
        }
    }

    /// All text parts joined with one space, trimmed (used for slash-command detection).
    pub fn text_input(&self) -> String {
        match self {
            UserInput::Text(t) => t.trim().to_string(),
            UserInput::Parts(parts) => {
                parts.iter().filter_map(ContentPart::as_text).collect::<Vec<_>>().join(" ").trim().to_string()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_round_trip_with_nulls() {
        let json = r#"[{"type":"text","text":"hi"},{"type":"think","think":"t","encrypted":null},{"type":"image_url","image_url":{"url":"data:x","id":null}},{"type":"audio_url","audio_url":{"url":"a","id":"i"}},{"type":"video_url","video_url":{"url":"v","id":null}}]"#;
        let parts: Vec<ContentPart> = serde_json::from_str(json).unwrap();
        assert_eq!(serde_json::to_string(&parts).unwrap(), json);
    }

    #[test]
    fn missing_optional_fields_are_filled_with_null() {
        let parts: Vec<ContentPart> =
            serde_json::from_str(r#"[{"type":"think","think":"t"},{"type":"image_url","image_url":{"url":"u"}}]"#)
                .unwrap();
        assert_eq!(
            serde_json::to_string(&parts).unwrap(),
            r#"[{"type":"think","think":"t","encrypted":null},{"type":"image_url","image_url":{"url":"u","id":null}}]"#
        );
    }

    #[test]
    fn unknown_type_is_rejected() {
        assert!(serde_json::from_str::<ContentPart>(r#"{"type":"bogus"}"#).is_err());
        assert!(serde_json::from_str::<ContentPart>(r#"{"text":"x"}"#).is_err());
    }

    #[test]
    fn text_fragments_merge() {
        let mut a = ContentPart::text("a");
        assert!(a.merge(ContentPart::text("b")).is_none());
        assert_eq!(a, ContentPart::text("ab"));
        assert!(a.merge(ContentPart::think("x")).is_some());
    }

    #[test]
    fn text_input_joins_text_parts() {
        let input: UserInput =
            serde_json::from_str(r#"[{"type":"text","text":" /yolo"},{"type":"image_url","image_url":{"url":"u"}},{"type":"text","text":"x "}]"#).unwrap();
        assert_eq!(input.text_input(), "/yolo x");
    }
}
