//! `ReadMediaFile`: hands an image or video file to the model (`docs/tools.md` §5).
//!
//! Only offered when the model accepts images or videos. Images are inlined as a base64 `data:`
//! URL in an `image_url` part. Videos go to the provider first (`ChatProvider::upload_video`):
//! Kimi stores them through its files API and they are referenced as `ms://<id>`; other providers
//! take them inline as a `data:` URL in a `video_url` part.
//!
//! Invariants: validation mirrors ReadFile; files over 100 MiB or empty are refused before being
//! read, and no more than 100 MiB is read should the file grow meanwhile; the output is `<image path="...">`, the media part, `</image>` (`video` for videos).

use std::path::Path;

use base64::Engine;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;

use super::file_type::{self, Kind};
use super::read_file::check_path;
use super::{ToolCallContext, TypedTool, paths};
use crate::llm::Capability;
use crate::protocol::{ContentPart, MediaUrl, ToolOutput, ToolReturnValue};

pub const MAX_MEDIA_BYTES: u64 = 100 << 20;

#[derive(Debug, Deserialize, JsonSchema)]
pub struct ReadMediaFileParams {
    /// Path of the image or video file; absolute is recommended, relative paths are taken from
    /// the working directory.
    pub path: String,
}

pub struct ReadMediaFile {
    image_in: bool,
    video_in: bool,
}

impl ReadMediaFile {
    /// `None` when the model takes neither images nor videos (the tool is then not offered).
    pub fn for_capabilities(image_in: bool, video_in: bool) -> Option<Self> {
        (image_in || video_in).then_some(Self { image_in, video_in })
    }

    pub fn for_env(env: &crate::agent_env::AgentEnv) -> Option<Self> {
        Self::for_capabilities(env.has(Capability::ImageIn), env.has(Capability::VideoIn))
    }
}

impl TypedTool for ReadMediaFile {
    type Params = ReadMediaFileParams;
    const NAME: &'static str = "ReadMediaFile";

    fn description(&self) -> String {
        let kinds = match (self.image_in, self.video_in) {
            (true, true) => "an image or video file",
            (true, false) => "an image file",
            _ => "a video file",
        };
        include_str!("desc/read_media_file.md")
            .trim()
            .replace("{kinds}", kinds)
            .replace("{max_mb}", &(MAX_MEDIA_BYTES >> 20).to_string())
    }

    fn run<'a>(&'a self, params: ReadMediaFileParams, ctx: &'a ToolCallContext) -> BoxFuture<'a, ToolReturnValue> {
        let work_dir = ctx.env.work_dir.clone();
        let (image_in, video_in) = (self.image_in, self.video_in);
        Box::pin(async move {
            if let Ok(path) = check_path(&work_dir, &params.path, "read a file")
                && let Some(refused) = super::sandbox_gate::read_refusal(ctx, &path)
            {
                return refused;
            }
            let loaded = match tokio::task::spawn_blocking(move || {
                read_media(&work_dir, &params.path, image_in, video_in)
            })
            .await
            {
                Ok(Ok(media)) => media,
                Ok(Err(result)) => return *result,
                Err(e) => return ToolReturnValue::crashed(format!("Error running tool: {e}")),
            };
            // A provider with a files API (Kimi) gets videos uploaded and referenced by id.
            let uploaded = match (&loaded.kind, &ctx.env.llm()) {
                (Kind::Video, Some(llm)) => match llm.upload_video(&loaded.data, &loaded.mime).await {
                    Ok(url) => url,
                    Err(e) => {
                        return ToolReturnValue::error(
                            format!("Failed to upload the video file `{}`. Error: {e}", loaded.abs),
                            "Failed to upload video",
                        );
                    }
                },
                _ => None,
            };
            media_result(loaded, uploaded)
        })
    }
}

/// A media file read from disk, checked and ready to hand to the model.
struct LoadedMedia {
    abs: String,
    mime: String,
    kind: Kind,
    data: Vec<u8>,
}

fn read_media(
    work_dir: &Path,
    given: &str,
    image_in: bool,
    video_in: bool,
) -> Result<LoadedMedia, Box<ToolReturnValue>> {
    let path = match check_path(work_dir, given, "read a file") {
        Ok(p) => p,
        Err(e) => return Err(Box::new(e)),
    };
    let failed = |e: std::io::Error| {
        ToolReturnValue::error(format!("Failed to read {given}. Error: {e}"), "Failed to read file")
    };
    let meta = match std::fs::metadata(&path) {
        Ok(m) => m,
        Err(e) if paths::is_missing(&e) => {
            return Err(Box::new(ToolReturnValue::error(format!("`{given}` does not exist."), "File not found")));
        }
        Err(e) => return Err(Box::new(failed(e))),
    };
    if !meta.is_file() {
        return Err(Box::new(ToolReturnValue::error(format!("`{given}` is not a file."), "Invalid path")));
    }
    let header = match file_type::read_header(&path) {
        Ok(h) => h,
        Err(e) => return Err(Box::new(failed(e))),
    };
    let ft = file_type::detect(&path, Some(&header));
    match ft.kind {
        Kind::Text => {
            return Err(Box::new(ToolReturnValue::error(
                format!("`{given}` is a text file. Use ReadFile to read text files."),
                "Unsupported file type",
            )));
        }
        Kind::Unknown => {
            return Err(Box::new(ToolReturnValue::error(
                format!(
                    "`{given}` seems not readable as an image or video file. You may need to inspect it with shell \
                     commands or other tools."
                ),
                "File not readable",
            )));
        }
        Kind::Image if !image_in => {
            return Err(Box::new(ToolReturnValue::error(
                format!("`{given}` is an image file, but the current model does not support image input."),
                "Unsupported media type",
            )));
        }
        Kind::Video if !video_in => {
            return Err(Box::new(ToolReturnValue::error(
                format!("`{given}` is a video file, but the current model does not support video input."),
                "Unsupported media type",
            )));
        }
        Kind::Image | Kind::Video => {}
    }
    let size = meta.len();
    if size == 0 {
        return Err(Box::new(ToolReturnValue::error(format!("`{given}` is empty."), "Empty file")));
    }
    if size > MAX_MEDIA_BYTES {
        return Err(Box::new(ToolReturnValue::error(
            format!("`{given}` is {size} bytes, which exceeds the max 100MB bytes for media files."),
            "File too large",
        )));
    }
    // Bounded: the file may have grown since the size check.
    let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    let read = file_type::open_regular(&path)
        .and_then(|f| std::io::Read::read_to_end(&mut std::io::Read::take(f, MAX_MEDIA_BYTES), &mut data));
    if let Err(e) = read {
        return Err(Box::new(failed(e)));
    }
    Ok(LoadedMedia { abs: path.to_string_lossy().into_owned(), mime: ft.mime.to_string(), kind: ft.kind, data })
}

/// The tool result for loaded media; `url` is where an uploaded video lives (else a data URL).
fn media_result(media: LoadedMedia, url: Option<String>) -> ToolReturnValue {
    let LoadedMedia { abs, mime, kind, data } = media;
    let size = data.len();
    let url = url
        .unwrap_or_else(|| format!("data:{mime};base64,{}", base64::engine::general_purpose::STANDARD.encode(&data)));
    let (tag, part) = match kind {
        Kind::Video => ("video", ContentPart::VideoUrl { video_url: MediaUrl::new(url) }),
        _ => ("image", ContentPart::ImageUrl { image_url: MediaUrl::new(url) }),
    };
    let mut message = format!("Loaded {tag} file `{abs}` ({mime}, {size} bytes");
    if tag == "image"
        && let Some((w, h)) = image_dimensions(&data)
    {
        message.push_str(&format!(", original size {w}x{h}px"));
    }
    message.push_str(").");
    message.push_str(if tag == "image" {
        " Coordinates you read from the image refer to its original size; read it again if you need to look at it later."
    } else {
        " Read the file again if you need to look at it later."
    });
    let mut result = ToolReturnValue::ok("", message);
    result.output = ToolOutput::Parts(vec![
        ContentPart::text(format!("<{tag} path=\"{}\">", html_escape(&abs))),
        part,
        ContentPart::text(format!("</{tag}>")),
    ]);
    result
}

fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#x27;")
}

/// Width and height of PNG, GIF, BMP, WebP and JPEG images, read from their headers.
pub fn image_dimensions(d: &[u8]) -> Option<(u32, u32)> {
    let be32 = |i: usize| d.get(i..i + 4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    let le32 = |i: usize| d.get(i..i + 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let le16 = |i: usize| d.get(i..i + 2).map(|b| u32::from(u16::from_le_bytes([b[0], b[1]])));
    let be16 = |i: usize| d.get(i..i + 2).map(|b| u32::from(u16::from_be_bytes([b[0], b[1]])));
    let le24 = |i: usize| d.get(i..i + 3).map(|b| u32::from_le_bytes([b[0], b[1], b[2], 0]));
    if d.starts_with(b"\x89PNG\r\n\x1a\n") {
        return Some((be32(16)?, be32(20)?));
    }
    if d.starts_with(b"GIF8") {
        return Some((le16(6)?, le16(8)?));
    }
    if d.starts_with(b"BM") {
        let h = le32(22)? as i32;
        return Some((le32(18)?, h.unsigned_abs()));
    }
    if d.starts_with(b"RIFF") && d.get(8..12) == Some(b"WEBP") {
        return match d.get(12..16)? {
            b"VP8 " => Some((le16(26)? & 0x3fff, le16(28)? & 0x3fff)),
            b"VP8L" => {
                let b = le32(21)?;
                Some(((b & 0x3fff) + 1, ((b >> 14) & 0x3fff) + 1))
            }
            b"VP8X" => Some((le24(24)? + 1, le24(27)? + 1)),
            _ => None,
        };
    }
    if d.starts_with(b"\xff\xd8") {
        let mut i = 2;
        while i + 9 < d.len() {
            if d[i] != 0xff {
                i += 1;
                continue;
            }
            let marker = d[i + 1];
            if marker == 0xff {
                i += 1;
                continue;
            }
            let len = be16(i + 2)? as usize;
            // SOF0..SOF15 except DHT (C4), JPG (C8) and DAC (CC) carry the frame size.
            if (0xc0..=0xcf).contains(&marker) && !matches!(marker, 0xc4 | 0xc8 | 0xcc) {
                return Some((be16(i + 7)?, be16(i + 5)?));
            }
            i += 2 + len;
        }
    }
    None
}
