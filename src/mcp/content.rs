//! An MCP `tools/call` result as a tool result (`docs/subcommands.md` §2.8): content blocks to
//! content parts, `isError`, and the 100,000-character output budget.
//!
//! The result is read in its MCP JSON form (`{"content": [...], "isError": ...}`), which is the
//! protocol's stable shape, rather than through the client library's Rust types.

use serde_json::Value;

use crate::protocol::{ContentPart, MediaUrl, ToolOutput, ToolReturnValue};

/// Text and media share this many characters (media counted by their URL's length).
pub const OUTPUT_BUDGET: usize = 100_000;

pub const TRUNCATION_NOTE: &str = "\n\n[Output truncated: exceeded 100000 character limit. Use pagination or more specific queries to get remaining content.]";

pub const IS_ERROR_MESSAGE: &str = "Tool returned an error. The output may be error message or incomplete output";

/// The tool result for a `tools/call` result in MCP JSON form.
pub fn tool_result(result: &Value) -> ToolReturnValue {
    let blocks = result.get("content").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    let parts = cap(blocks.iter().map(convert).collect());
    let is_error = result.get("isError").and_then(Value::as_bool).unwrap_or(false);
    let mut value = ToolReturnValue::ok("", if is_error { IS_ERROR_MESSAGE } else { "" });
    value.is_error = is_error;
    value.output = ToolOutput::Parts(parts);
    value
}

fn media(kind: &str, url: String) -> Option<ContentPart> {
    let url = MediaUrl::new(url);
    match kind {
        "image" => Some(ContentPart::ImageUrl { image_url: url }),
        "audio" => Some(ContentPart::AudioUrl { audio_url: url }),
        "video" => Some(ContentPart::VideoUrl { video_url: url }),
        _ => None,
    }
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or("")
}

fn unsupported(reason: String) -> ContentPart {
    ContentPart::text(format!("[Unsupported content: {reason}]"))
}

/// One MCP content block as a part; what kiwi cannot pass on says so in a text part.
fn convert(block: &Value) -> ContentPart {
    match str_of(block, "type") {
        "text" => ContentPart::text(str_of(block, "text")),
        kind @ ("image" | "audio") => {
            let url = format!("data:{};base64,{}", str_of(block, "mimeType"), str_of(block, "data"));
            media(kind, url).unwrap_or_else(|| unsupported(kind.into()))
        }
        "resource" => {
            let resource = block.get("resource").unwrap_or(&Value::Null);
            let mime = str_of(resource, "mimeType");
            match resource.get("blob").and_then(Value::as_str) {
                Some(blob) => media(mime_kind(mime), format!("data:{mime};base64,{blob}"))
                    .unwrap_or_else(|| unsupported(format!("embedded resource of type {mime:?}"))),
                None => unsupported(format!("embedded text resource {}", str_of(resource, "uri"))),
            }
        }
        "resource_link" => {
            let mime = str_of(block, "mimeType");
            media(mime_kind(mime), str_of(block, "uri").to_string())
                .unwrap_or_else(|| unsupported(format!("resource link of type {mime:?}")))
        }
        other => unsupported(format!("content of type {other:?}")),
    }
}

fn mime_kind(mime: &str) -> &str {
    mime.split('/').next().unwrap_or("")
}

fn part_len(part: &ContentPart) -> usize {
    match part {
        ContentPart::Text { text } => text.chars().count(),
        ContentPart::Think { think, .. } => think.chars().count(),
        ContentPart::ImageUrl { image_url: u }
        | ContentPart::AudioUrl { audio_url: u }
        | ContentPart::VideoUrl { video_url: u } => u.url.chars().count(),
    }
}

/// Applies the shared budget: text cut to fit then dropped, media that does not fit dropped,
/// and a note at the end when anything was lost.
fn cap(parts: Vec<ContentPart>) -> Vec<ContentPart> {
    let mut left = OUTPUT_BUDGET;
    let mut out = Vec::with_capacity(parts.len());
    let mut lost = false;
    for part in parts {
        let len = part_len(&part);
        if len <= left {
            left -= len;
            out.push(part);
            continue;
        }
        lost = true;
        if let ContentPart::Text { text } = part
            && left > 0
        {
            out.push(ContentPart::text(text.chars().take(left).collect::<String>()));
            left = 0;
        }
    }
    if lost {
        out.push(ContentPart::text(TRUNCATION_NOTE));
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rt(result: Value) -> Value {
        serde_json::to_value(tool_result(&result)).unwrap()
    }

    #[test]
    fn text_and_image_results() {
        let v = rt(json!({"content": [{"type": "text", "text": "pong:hi"}]}));
        assert_eq!(
            v,
            json!({"is_error": false, "output": [{"type": "text", "text": "pong:hi"}], "message": "", "display": [], "extras": null})
        );
        let v = rt(json!({"content": [{"type": "image", "data": "AAA", "mimeType": "image/png"}]}));
        assert_eq!(
            v["output"],
            json!([{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA", "id": null}}])
        );
        let v = rt(json!({"content": [{"type": "audio", "data": "B", "mimeType": "audio/wav"}]}));
        assert_eq!(v["output"][0]["audio_url"]["url"], "data:audio/wav;base64,B");
    }

    #[test]
    fn resources_by_mime_and_unsupported_content() {
        let v = rt(json!({"content": [
            {"type": "resource", "resource": {"uri": "f://a", "mimeType": "video/mp4", "blob": "Q"}},
            {"type": "resource_link", "uri": "https://x/a.png", "name": "a", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "f://t", "text": "hello"}},
            {"type": "resource", "resource": {"uri": "f://b", "mimeType": "application/pdf", "blob": "Q"}},
        ]}));
        assert_eq!(v["output"][0]["video_url"]["url"], "data:video/mp4;base64,Q");
        assert_eq!(v["output"][1]["image_url"]["url"], "https://x/a.png");
        assert!(v["output"][2]["text"].as_str().unwrap().starts_with("[Unsupported content: "));
        assert!(v["output"][3]["text"].as_str().unwrap().starts_with("[Unsupported content: "));
    }

    #[test]
    fn is_error_keeps_the_parts() {
        let v = rt(json!({"content": [{"type": "text", "text": "bad"}], "isError": true}));
        assert_eq!(v["is_error"], true);
        assert_eq!(v["message"], IS_ERROR_MESSAGE);
        assert_eq!(v["display"], json!([]));
        assert_eq!(v["output"][0]["text"], "bad");
    }

    #[test]
    fn the_budget_cuts_text_and_drops_media() {
        let image = "i".repeat(50_000 - "data:image/png;base64,".len());
        let v = rt(json!({"content": [
            {"type": "text", "text": "a".repeat(60_000)},
            {"type": "image", "data": image, "mimeType": "image/png"},
            {"type": "text", "text": "b".repeat(50_000)},
            {"type": "image", "data": "x", "mimeType": "image/png"},
            {"type": "text", "text": "tail"},
        ]}));
        let out = v["output"].as_array().unwrap();
        assert_eq!(out.len(), 3);
        assert_eq!(out[0]["text"].as_str().unwrap().len(), 60_000);
        assert_eq!(out[1]["text"].as_str().unwrap().len(), 40_000);
        assert_eq!(out[2]["text"], TRUNCATION_NOTE);
        assert_eq!(TRUNCATION_NOTE.chars().count(), 120);
    }
}
