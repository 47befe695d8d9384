//! A `session/prompt`'s content blocks as the core's user input (`docs/acp.md` §4.12, §6): text as
//! text, images as data URLs, a resource link as a mention of its name and URI, an embedded text
//! resource as its text wrapped with its URI. Audio is refused: no kiwi model takes audio, so it
//! is not advertised.

use agent_client_protocol::v1::schema::{ContentBlock, EmbeddedResourceResource};

use crate::protocol::{ContentPart, MediaUrl, UserInput};

/// The user input, or the readable reason the prompt is refused (an invalid-params error).
pub fn user_input(blocks: &[ContentBlock]) -> Result<UserInput, String> {
    if blocks.is_empty() {
        return Err("the prompt is empty".into());
    }
    let mut parts = Vec::with_capacity(blocks.len());
    for block in blocks {
        parts.push(match block {
            ContentBlock::Text(t) => ContentPart::text(t.text.clone()),
            ContentBlock::Image(image) => image_part(&image.mime_type, &image.data),
            ContentBlock::Audio(_) => return Err("audio prompts are not supported".into()),
            ContentBlock::ResourceLink(link) => ContentPart::text(format!("@{} ({})", link.name, link.uri)),
            ContentBlock::Resource(embedded) => match &embedded.resource {
                EmbeddedResourceResource::TextResourceContents(r) => {
                    ContentPart::text(format!("<resource uri=\"{}\">\n{}\n</resource>", r.uri, r.text))
                }
                EmbeddedResourceResource::BlobResourceContents(r) => match r.mime_type.as_deref() {
                    Some(mime) if mime.starts_with("image/") => image_part(mime, &r.blob),
                    _ => return Err(format!("the embedded resource {} is binary and not an image", r.uri)),
                },
                _ => return Err("unknown embedded resource".into()),
            },
            _ => return Err("unknown content block".into()),
        });
    }
    // A prompt of one text block stays a plain string, as a typed prompt is.
    if let [ContentPart::Text { text }] = parts.as_slice() {
        return Ok(UserInput::Text(text.clone()));
    }
    Ok(UserInput::Parts(parts))
}

fn image_part(mime: &str, data: &str) -> ContentPart {
    ContentPart::ImageUrl { image_url: MediaUrl::new(format!("data:{mime};base64,{data}")) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(json: serde_json::Value) -> Vec<ContentBlock> {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn every_required_block_becomes_input() {
        let input = user_input(&blocks(serde_json::json!([
            {"type":"text","text":"look"},
            {"type":"image","data":"AAAA","mimeType":"image/png"},
            {"type":"resource_link","uri":"file:///w/a.rs","name":"a.rs"},
            {"type":"resource","resource":{"uri":"file:///w/b.rs","text":"fn b() {}","mimeType":"text/x-rust"}}
        ])))
        .unwrap();
        assert_eq!(
            serde_json::to_value(input).unwrap(),
            serde_json::json!([
                {"type":"text","text":"look"},
                {"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","id":null}},
                {"type":"text","text":"@a.rs (file:///w/a.rs)"},
                {"type":"text","text":"<resource uri=\"file:///w/b.rs\">\nfn b() {}\n</resource>"}
            ])
        );
        assert_eq!(
            user_input(&blocks(serde_json::json!([{"type":"text","text":"hi"}]))).unwrap(),
            UserInput::Text("hi".into())
        );
    }

    #[test]
    fn unsupported_blocks_are_refused() {
        assert!(user_input(&[]).is_err());
        assert!(user_input(&blocks(serde_json::json!([{"type":"audio","data":"AA","mimeType":"audio/wav"}]))).is_err());
        let blob = serde_json::json!([{"type":"resource","resource":{"uri":"file:///x.bin","blob":"AA","mimeType":"application/zip"}}]);
        assert!(user_input(&blocks(blob)).unwrap_err().contains("binary"));
    }
}
