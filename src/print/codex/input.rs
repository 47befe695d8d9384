//! The turn's input (spec codex-exec.md §1, §3, §9): the prompt (stdin as is, or the positional
//! argument), `--image` files as image parts before it, and the `--output-schema` file.
//!
//! Invariants: the prompt text is used unchanged (no trim); an empty or blank prompt, an image
//! or schema that cannot be read is a start-up failure with one line (exit 1, nothing on stdout).

use std::io::Read;
use std::path::Path;

use base64::Engine;
use serde_json::Value;

use crate::protocol::{ContentPart, MediaUrl, UserInput};

/// The user message: each image, then the text.
pub fn user_input(text: String, images: &[std::path::PathBuf], cwd: &Path) -> Result<UserInput, String> {
    if images.is_empty() {
        return Ok(UserInput::Text(text));
    }
    let mut parts = Vec::new();
    for image in images {
        let path = crate::session::store::normalize(image, cwd);
        let bytes = std::fs::read(&path).map_err(|e| format!("kiwi: cannot read --image {}: {e}", path.display()))?;
        let kind = crate::tools::file_type::detect(&path, Some(&bytes[..bytes.len().min(512)]));
        if kind.kind != crate::tools::file_type::Kind::Image {
            return Err(format!("kiwi: --image {} is not an image", path.display()));
        }
        let url = format!("data:{};base64,{}", kind.mime, base64::engine::general_purpose::STANDARD.encode(&bytes));
        parts.push(ContentPart::ImageUrl { image_url: MediaUrl::new(url) });
    }
    parts.push(ContentPart::text(text));
    Ok(UserInput::Parts(parts))
}

/// The prompt: the positional one, else all of stdin (`-` says so too).
pub fn prompt_text(positional: Option<&str>, stdin: impl Read) -> Result<String, String> {
    let text = match positional {
        Some(text) if text != "-" => text.to_string(),
        _ => {
            let mut bytes = Vec::new();
            let mut stdin = stdin;
            stdin.read_to_end(&mut bytes).map_err(|e| format!("kiwi: cannot read stdin: {e}"))?;
            String::from_utf8_lossy(&bytes).into_owned()
        }
    };
    if text.trim().is_empty() {
        return Err("No prompt provided via stdin.".into());
    }
    Ok(text)
}

/// The `--output-schema` file's JSON object.
pub fn output_schema(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("kiwi: cannot read --output-schema {}: {e}", path.display()))?;
    let schema: Value = serde_json::from_str(&text)
        .map_err(|e| format!("kiwi: --output-schema {} is not JSON: {e}", path.display()))?;
    if !schema.is_object() {
        return Err(format!("kiwi: --output-schema {} must hold a JSON object", path.display()));
    }
    Ok(schema)
}

/// The instruction that carries the schema to the model: kiwi's providers have no
/// structured-output setting, so the system prompt asks for it (the answer is not checked,
/// as codex does not check it).
pub fn schema_instruction(schema: &Value) -> String {
    format!(
        "Your final message of each turn must be only a JSON value (no prose, no code fence) that matches this JSON Schema:\n{schema}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts() {
        assert_eq!(prompt_text(None, &b"do things\n"[..]).unwrap(), "do things\n");
        assert_eq!(prompt_text(Some("hi"), &b"ignored"[..]).unwrap(), "hi");
        assert_eq!(prompt_text(Some("-"), &b"from stdin"[..]).unwrap(), "from stdin");
        assert_eq!(prompt_text(None, &b" \n"[..]).unwrap_err(), "No prompt provided via stdin.");
    }

    #[test]
    fn images_come_before_the_text() {
        let dir = tempfile::tempdir().unwrap();
        let png = dir.path().join("dot.png");
        std::fs::write(&png, b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0").unwrap();
        let UserInput::Parts(parts) = user_input("look".into(), &[png], dir.path()).unwrap() else { panic!() };
        assert!(
            matches!(&parts[0], ContentPart::ImageUrl { image_url } if image_url.url.starts_with("data:image/png;base64,"))
        );
        assert_eq!(parts[1], ContentPart::text("look"));
        let text = dir.path().join("a.txt");
        std::fs::write(&text, "hello").unwrap();
        assert!(user_input("x".into(), &[text], dir.path()).unwrap_err().contains("not an image"));
        assert!(user_input("x".into(), &[dir.path().join("missing.png")], dir.path()).is_err());
    }

    #[test]
    fn schemas() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("s.json");
        std::fs::write(&good, r#"{"type":"object"}"#).unwrap();
        assert_eq!(output_schema(&good).unwrap()["type"], "object");
        let bad = dir.path().join("b.json");
        std::fs::write(&bad, "not json").unwrap();
        assert!(output_schema(&bad).unwrap_err().contains("is not JSON"));
        std::fs::write(&bad, "[1]").unwrap();
        assert!(output_schema(&bad).unwrap_err().contains("JSON object"));
        assert!(output_schema(&dir.path().join("none.json")).unwrap_err().contains("cannot read"));
    }
}
