//! File type detection for ReadFile and ReadMediaFile (`docs/tools.md` §4.1).
//!
//! Invariants: an image/video extension is final; otherwise the first bytes decide (magic numbers,
//! then "a NUL byte means binary"); known non-text extensions are unknown; everything else is
//! text. Only the first [`SNIFF_BYTES`] bytes are ever looked at. Files are opened with
//! [`open_regular`], which cannot block on a FIFO or device swapped in after a type check.

use std::path::Path;

/// How many leading bytes are sniffed.
pub const SNIFF_BYTES: usize = 512;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    Image,
    Video,
    Unknown,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Text => "text",
            Kind::Image => "image",
            Kind::Video => "video",
            Kind::Unknown => "unknown",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileType {
    pub kind: Kind,
    pub mime: &'static str,
}

impl FileType {
    const fn new(kind: Kind, mime: &'static str) -> Self {
        Self { kind, mime }
    }
}

const UNKNOWN: FileType = FileType::new(Kind::Unknown, "");

fn image_mime_by_ext(ext: &str) -> Option<&'static str> {
    Some(match ext {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "bmp" => "image/bmp",
        "tif" | "tiff" => "image/tiff",
        "webp" => "image/webp",
        "ico" => "image/x-icon",
        "heic" => "image/heic",
        "heif" => "image/heif",
        "avif" => "image/avif",
        "svgz" => "image/svg+xml",
        _ => return None,
    })
}

fn video_mime_by_ext(ext: &str) -> Option<&'static str> {
    Some(match ext {
        "mp4" => "video/mp4",
        "mkv" => "video/x-matroska",
        "avi" => "video/x-msvideo",
        "mov" => "video/quicktime",
        "wmv" => "video/x-ms-wmv",
        "webm" => "video/webm",
        "m4v" => "video/x-m4v",
        "flv" => "video/x-flv",
        "3gp" => "video/3gpp",
        "3g2" => "video/3gpp2",
        _ => return None,
    })
}

/// The part of a platform MIME table that maps extensions to image/video types (what Python's
/// `mimetypes` knows on a typical Linux). `.ts`-style extensions are TypeScript, not MPEG-TS.
fn platform_media_mime(ext: &str) -> Option<(Kind, &'static str)> {
    Some(match ext {
        "jpe" | "jfif" | "pjpeg" | "pjp" => (Kind::Image, "image/jpeg"),
        "pbm" => (Kind::Image, "image/x-portable-bitmap"),
        "pgm" => (Kind::Image, "image/x-portable-graymap"),
        "ppm" => (Kind::Image, "image/x-portable-pixmap"),
        "pnm" => (Kind::Image, "image/x-portable-anymap"),
        "ras" => (Kind::Image, "image/x-cmu-raster"),
        "rgb" => (Kind::Image, "image/x-rgb"),
        "xbm" => (Kind::Image, "image/x-xbitmap"),
        "xpm" => (Kind::Image, "image/x-xpixmap"),
        "xwd" => (Kind::Image, "image/x-xwindowdump"),
        "ief" => (Kind::Image, "image/ief"),
        "jp2" => (Kind::Image, "image/jp2"),
        "jxl" => (Kind::Image, "image/jxl"),
        "psd" => (Kind::Image, "image/vnd.adobe.photoshop"),
        "mpeg" | "mpg" | "mpe" | "m1v" | "m2v" => (Kind::Video, "video/mpeg"),
        "qt" => (Kind::Video, "video/quicktime"),
        "ogv" => (Kind::Video, "video/ogg"),
        "m2ts" => (Kind::Video, "video/mp2t"),
        "movie" => (Kind::Video, "video/x-sgi-movie"),
        "asf" => (Kind::Video, "video/x-ms-asf"),
        _ => return None,
    })
}

const NON_TEXT_EXTENSIONS: &[&str] = &[
    // documents
    "pdf",
    "doc",
    "docx",
    "xls",
    "xlsx",
    "ppt",
    "pptx",
    "odt",
    "ods",
    "odp",
    "rtf",
    "epub",
    // archives and compressed data
    "zip",
    "tar",
    "gz",
    "tgz",
    "bz2",
    "xz",
    "zst",
    "7z",
    "rar",
    "lz",
    "lzma",
    "jar",
    "war",
    "whl",
    "apk",
    // audio
    "mp3",
    "wav",
    "flac",
    "aac",
    "ogg",
    "oga",
    "m4a",
    "wma",
    "opus",
    "aiff",
    "mid",
    "midi",
    // fonts
    "ttf",
    "otf",
    "woff",
    "woff2",
    "eot",
    // executables and objects
    "exe",
    "dll",
    "so",
    "dylib",
    "o",
    "a",
    "lib",
    "obj",
    "bin",
    "class",
    "pyc",
    "pyo",
    "wasm",
    "elf",
    // disk images and databases
    "iso",
    "img",
    "dmg",
    "vhd",
    "vmdk",
    "qcow2",
    "sqlite",
    "sqlite3",
    "db",
    "mdb",
    // other binary formats
    "pickle",
    "pkl",
    "npy",
    "npz",
    "parquet",
    "h5",
    "hdf5",
    "onnx",
    "pt",
    "pth",
    "safetensors",
];

fn sniff_media(header: &[u8]) -> Option<FileType> {
    let h = header;
    let starts = |m: &[u8]| h.starts_with(m);
    if starts(b"\x89PNG\r\n\x1a\n") {
        return Some(FileType::new(Kind::Image, "image/png"));
    }
    if starts(b"\xff\xd8\xff") {
        return Some(FileType::new(Kind::Image, "image/jpeg"));
    }
    if starts(b"GIF87a") || starts(b"GIF89a") {
        return Some(FileType::new(Kind::Image, "image/gif"));
    }
    if starts(b"BM") && h.len() >= 14 {
        return Some(FileType::new(Kind::Image, "image/bmp"));
    }
    if starts(b"II*\x00") || starts(b"MM\x00*") {
        return Some(FileType::new(Kind::Image, "image/tiff"));
    }
    if starts(b"\x00\x00\x01\x00") {
        return Some(FileType::new(Kind::Image, "image/x-icon"));
    }
    if starts(b"RIFF") && h.len() >= 12 {
        match &h[8..12] {
            b"WEBP" => return Some(FileType::new(Kind::Image, "image/webp")),
            b"AVI " => return Some(FileType::new(Kind::Video, "video/x-msvideo")),
            _ => {}
        }
    }
    if starts(b"FLV\x01") {
        return Some(FileType::new(Kind::Video, "video/x-flv"));
    }
    if starts(b"\x30\x26\xb2\x75\x8e\x66\xcf\x11") {
        return Some(FileType::new(Kind::Video, "video/x-ms-wmv"));
    }
    if starts(b"\x1a\x45\xdf\xa3") {
        let window = &h[..h.len().min(64)];
        if contains(window, b"webm") {
            return Some(FileType::new(Kind::Video, "video/webm"));
        }
        if contains(window, b"matroska") {
            return Some(FileType::new(Kind::Video, "video/x-matroska"));
        }
    }
    if h.len() >= 12 && &h[4..8] == b"ftyp" {
        let brand = &h[8..12];
        return match brand {
            b"avif" | b"avis" => Some(FileType::new(Kind::Image, "image/avif")),
            b"heic" | b"heix" | b"hevc" | b"hevx" => Some(FileType::new(Kind::Image, "image/heic")),
            b"mif1" | b"msf1" | b"heif" => Some(FileType::new(Kind::Image, "image/heif")),
            b"qt  " => Some(FileType::new(Kind::Video, "video/quicktime")),
            b"3gp4" | b"3gp5" | b"3gp6" | b"3gs7" | b"3ge6" | b"3gg6" => Some(FileType::new(Kind::Video, "video/3gpp")),
            b"3g2a" | b"3g2b" | b"3g2c" => Some(FileType::new(Kind::Video, "video/3gpp2")),
            b"M4V " | b"M4VH" | b"M4VP" => Some(FileType::new(Kind::Video, "video/x-m4v")),
            b"isom" | b"iso2" | b"iso4" | b"iso5" | b"iso6" | b"mp41" | b"mp42" | b"mp4x" | b"avc1" | b"dash"
            | b"MSNV" | b"f4v " => Some(FileType::new(Kind::Video, "video/mp4")),
            _ => None,
        };
    }
    None
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Classifies `path` from its extension and (when given) its first bytes.
pub fn detect(path: &Path, header: Option<&[u8]>) -> FileType {
    let ext = path.extension().map(|e| e.to_string_lossy().to_ascii_lowercase()).unwrap_or_default();
    let hint: Option<FileType> = if ext == "svg" {
        Some(FileType::new(Kind::Text, "image/svg+xml"))
    } else if let Some(mime) = image_mime_by_ext(&ext) {
        Some(FileType::new(Kind::Image, mime))
    } else if let Some(mime) = video_mime_by_ext(&ext) {
        Some(FileType::new(Kind::Video, mime))
    } else if matches!(ext.as_str(), "ts" | "tsx" | "mts" | "cts") {
        None
    } else {
        platform_media_mime(&ext).map(|(kind, mime)| FileType::new(kind, mime))
    };
    if let Some(h) = &hint
        && matches!(h.kind, Kind::Image | Kind::Video)
    {
        return h.clone();
    }
    if let Some(header) = header {
        if let Some(sniffed) = sniff_media(header) {
            if hint.as_ref().is_some_and(|h| h.kind != sniffed.kind) {
                return UNKNOWN;
            }
            return sniffed;
        }
        if header.contains(&0) {
            return UNKNOWN;
        }
    }
    if let Some(h) = hint {
        return h;
    }
    if NON_TEXT_EXTENSIONS.contains(&ext.as_str()) {
        return UNKNOWN;
    }
    FileType::new(Kind::Text, "text/plain")
}

/// Reads at most [`SNIFF_BYTES`] from the start of `path`.
pub fn read_header(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = Vec::with_capacity(SNIFF_BYTES);
    open_regular(path)?.take(SNIFF_BYTES as u64).read_to_end(&mut buf)?;
    Ok(buf)
}

/// Opens `path` for reading with `O_NONBLOCK`, so that a FIFO or device put in place after the
/// caller's `stat` neither blocks the open nor is read: anything but a regular file is an error.
pub fn open_regular(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC).open(path)?;
    if !file.metadata()?.is_file() {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_open_and_a_fifo_does_not_block() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        for p in [fifo.as_path(), Path::new("/dev/zero"), dir.path()] {
            assert!(open_regular(p).is_err(), "{}", p.display());
            assert!(read_header(p).is_err(), "{}", p.display());
        }
        std::fs::write(dir.path().join("f"), "x").unwrap();
        assert_eq!(read_header(&dir.path().join("f")).unwrap(), b"x");
    }

    #[test]
    fn extension_and_magic() {
        assert_eq!(detect(Path::new("a.PNG"), Some(b"hello")).kind, Kind::Image);
        assert_eq!(detect(Path::new("a.mp4"), None).kind, Kind::Video);
        assert_eq!(detect(Path::new("a.ts"), Some(b"let x = 1;")).kind, Kind::Text);
        assert_eq!(detect(Path::new("a.svg"), Some(b"<svg>")).kind, Kind::Text);
        assert_eq!(detect(Path::new("a.svg"), Some(b"\x89PNG\r\n\x1a\n....")).kind, Kind::Unknown);
        assert_eq!(detect(Path::new("noext"), Some(b"\x89PNG\r\n\x1a\n....")).mime, "image/png");
        assert_eq!(detect(Path::new("x.bin2"), Some(b"ab\x00cd")).kind, Kind::Unknown);
        assert_eq!(detect(Path::new("x.pdf"), Some(b"%PDF-1.4")).kind, Kind::Unknown);
        assert_eq!(detect(Path::new("x.rs"), Some(b"fn main() {}")).kind, Kind::Text);
        assert_eq!(detect(Path::new("v"), Some(b"\x00\x00\x00\x18ftypisom....")).kind, Kind::Video);
    }
}
