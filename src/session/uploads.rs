//! Handing a session's uploads to the model with its next prompt (`docs/web-api.md` §3.1):
//! every file in `<session>/uploads/` not yet sent becomes content parts placed before the
//! prompt's own, and its name is recorded in `uploads/.sent`.
//!
//! Invariants: the sent set lives on disk (`uploads/.sent`, rewritten atomically after each
//! delivery), so a restarted server never sends a file twice; files go in name order; a file that
//! cannot be read is only listed.

use std::path::Path;

use base64::Engine as _;

use crate::protocol::ContentPart;
use crate::protocol::content::MediaUrl;

pub const SENT_FILE: &str = ".sent";

const TEXT_EXTENSIONS: [&str; 18] = [
    "txt", "md", "json", "yaml", "yml", "xml", "html", "css", "js", "ts", "py", "sh", "csv", "log", "rst", "toml",
    "ini", "text",
];

fn sent_names(uploads: &Path) -> Vec<String> {
    std::fs::read_to_string(uploads.join(SENT_FILE))
        .ok()
        .and_then(|t| serde_json::from_str::<Vec<String>>(&t).ok())
        .unwrap_or_default()
}

fn write_sent(uploads: &Path, names: &[String]) -> std::io::Result<()> {
    let tmp = uploads.join(format!(".sent.{}.tmp", uuid::Uuid::new_v4().simple()));
    let text = serde_json::to_string(names).map_err(std::io::Error::other)?;
    std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, uploads.join(SENT_FILE))).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

/// The parts for the uploads of `session_dir` not sent yet (empty when there are none), and marks
/// them sent. `image_in` / `video_in`: what the default model's configured capabilities allow.
pub fn take_unsent(session_dir: &Path, image_in: bool, video_in: bool) -> Vec<ContentPart> {
    let uploads = session_dir.join("uploads");
    let Ok(entries) = std::fs::read_dir(&uploads) else { return Vec::new() };
    let mut sent = sent_names(&uploads);
    let mut names: Vec<String> = entries
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n != SENT_FILE && !n.starts_with(".sent.") && !sent.contains(n))
        .collect();
    if names.is_empty() {
        return Vec::new();
    }
    names.sort();
    let abs = |name: &str| uploads.join(name).to_string_lossy().to_string();
    let mut listing = String::from("<uploaded_files>\n");
    for (i, n) in names.iter().enumerate() {
        listing.push_str(&format!("{}. {}\n", i + 1, abs(n)));
    }
    listing.push_str("</uploaded_files>\n\n");
    let mut parts = vec![ContentPart::text(listing)];
    for name in &names {
        let path = uploads.join(name);
        let mime = mime_guess::from_path(&path).first_raw().unwrap_or("application/octet-stream").to_string();
        let ext = path.extension().map(|e| e.to_string_lossy().to_lowercase()).unwrap_or_default();
        let shown = abs(name);
        if mime.starts_with("image/") && image_in {
            if let Ok(bytes) = std::fs::read(&path) {
                let data = base64::engine::general_purpose::STANDARD.encode(bytes);
                parts.push(ContentPart::text(format!("<image path=\"{shown}\" content_type=\"{mime}\">")));
                parts.push(ContentPart::ImageUrl {
                    image_url: MediaUrl { url: format!("data:{mime};base64,{data}"), id: None },
                });
                parts.push(ContentPart::text("</image>\n\n"));
            }
        } else if mime.starts_with("video/") && video_in {
            parts.push(ContentPart::text(format!("<video path=\"{shown}\" content_type=\"{mime}\">")));
            parts.push(ContentPart::text("</video>\n\n"));
        } else if (TEXT_EXTENSIONS.contains(&ext.as_str()) || mime.starts_with("text/"))
            && let Ok(bytes) = std::fs::read(&path)
        {
            parts.push(ContentPart::text(format!("<document path=\"{shown}\" content_type=\"{mime}\">")));
            parts.push(ContentPart::text(String::from_utf8_lossy(&bytes).into_owned()));
            parts.push(ContentPart::text("</document>\n\n"));
        }
    }
    sent.extend(names);
    if let Err(e) = write_sent(&uploads, &sent) {
        tracing::warn!("cannot record sent uploads in {}: {e}", uploads.display());
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(parts: &[ContentPart]) -> Vec<String> {
        parts
            .iter()
            .map(|p| match p {
                ContentPart::Text { text } => text.clone(),
                ContentPart::ImageUrl { image_url } => format!("IMAGE {}", &image_url.url[..22]),
                _ => "OTHER".into(),
            })
            .collect()
    }

    #[test]
    fn uploads_are_delivered_once_in_name_order() {
        let dir = tempfile::tempdir().unwrap();
        assert!(take_unsent(dir.path(), true, true).is_empty());
        let up = dir.path().join("uploads");
        std::fs::create_dir_all(&up).unwrap();
        std::fs::write(up.join("b_notes.txt"), "hello").unwrap();
        std::fs::write(up.join("a_pic.png"), [0x89, b'P', b'N', b'G']).unwrap();
        std::fs::write(up.join("c_blob"), "x").unwrap();
        std::fs::write(up.join("d_clip.mp4"), "v").unwrap();
        let parts = texts(&take_unsent(dir.path(), true, false));
        let a = up.join("a_pic.png").to_string_lossy().to_string();
        let b = up.join("b_notes.txt").to_string_lossy().to_string();
        assert!(
            parts[0].starts_with(&format!("<uploaded_files>\n1. {a}\n2. {b}\n3. "))
                && parts[0].ends_with("</uploaded_files>\n\n")
        );
        assert_eq!(parts[1], format!("<image path=\"{a}\" content_type=\"image/png\">"));
        assert_eq!(parts[2], "IMAGE data:image/png;base64,");
        assert_eq!(parts[3], "</image>\n\n");
        assert_eq!(parts[4], format!("<document path=\"{b}\" content_type=\"text/plain\">"));
        assert_eq!(parts[5], "hello");
        assert_eq!(parts[6], "</document>\n\n");
        assert_eq!(parts.len(), 7, "the blob and the video (no video_in) are only listed");
        assert!(take_unsent(dir.path(), true, true).is_empty(), "sent once, remembered on disk");
        std::fs::write(up.join("e.md"), "# new").unwrap();
        let again = texts(&take_unsent(dir.path(), false, false));
        assert!(again[0].contains("1. ") && again[0].contains("e.md") && !again[0].contains("a_pic"));
    }
}
