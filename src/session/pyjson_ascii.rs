//! JSON the way Python's `json.dumps` writes it by default: `", "` / `": "` separators and every
//! non-ASCII character `\u`-escaped (surrogate pairs above the BMP). Used where another program
//! reads what we write exactly as the reference writes it (the `_system_prompt` record, the
//! input of command hooks).

use std::io::Write;

use serde::Serialize;
use serde_json::ser::{CharEscape, Formatter};

/// Python's `json.dumps` defaults: `", "` / `": "` separators, ASCII only.
pub struct PythonAscii;

impl Formatter for PythonAscii {
    fn begin_array_value<W: ?Sized + Write>(&mut self, writer: &mut W, first: bool) -> std::io::Result<()> {
        if first { Ok(()) } else { writer.write_all(b", ") }
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, writer: &mut W, first: bool) -> std::io::Result<()> {
        if first { Ok(()) } else { writer.write_all(b", ") }
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        writer.write_all(b": ")
    }

    fn write_string_fragment<W: ?Sized + Write>(&mut self, writer: &mut W, fragment: &str) -> std::io::Result<()> {
        if fragment.is_ascii() {
            return writer.write_all(fragment.as_bytes());
        }
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if c.is_ascii() {
                continue;
            }
            writer.write_all(&fragment.as_bytes()[start..i])?;
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                write!(writer, "\\u{unit:04x}")?;
            }
            start = i + c.len_utf8();
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }

    fn write_char_escape<W: ?Sized + Write>(&mut self, writer: &mut W, escape: CharEscape) -> std::io::Result<()> {
        // Python writes control characters as `\u00XX` too, except the short forms below.
        let short: &[u8] = match escape {
            CharEscape::Quote => b"\\\"",
            CharEscape::ReverseSolidus => b"\\\\",
            CharEscape::Solidus => b"/",
            CharEscape::Backspace => b"\\b",
            CharEscape::FormFeed => b"\\f",
            CharEscape::LineFeed => b"\\n",
            CharEscape::CarriageReturn => b"\\r",
            CharEscape::Tab => b"\\t",
            CharEscape::AsciiControl(b) => return write!(writer, "\\u{b:04x}"),
        };
        writer.write_all(short)
    }
}

/// `value` as one line of Python-default JSON (no trailing newline). Our own types always
/// serialize; a value that cannot yields `null`.
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Vec<u8> {
    let mut buf = Vec::with_capacity(128);
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, PythonAscii);
    match value.serialize(&mut ser) {
        Ok(()) => buf,
        Err(e) => {
            tracing::error!("cannot serialize as Python JSON: {e}");
            b"null".to_vec()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn separators_and_escapes() {
        let v = serde_json::json!({"a": [1, "é😀"], "b": "\u{1}\n"});
        assert_eq!(String::from_utf8(to_vec(&v)).unwrap(), r#"{"a": [1, "\u00e9\ud83d\ude00"], "b": "\u0001\n"}"#);
    }
}
