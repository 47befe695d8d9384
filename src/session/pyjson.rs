//! JSON with Python's default `json.dumps` separators (`", "` and `": "`), as the reference
//! writes `wire.jsonl` records and the `_checkpoint` / `_usage` lines of `context.jsonl`.
//! Non-ASCII stays raw UTF-8.

use serde::Serialize;
use serde_json::ser::Formatter;

struct PythonFormatter;

impl Formatter for PythonFormatter {
    fn begin_array_value<W: ?Sized + std::io::Write>(&mut self, writer: &mut W, first: bool) -> std::io::Result<()> {
        if first { Ok(()) } else { writer.write_all(b", ") }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(&mut self, writer: &mut W, first: bool) -> std::io::Result<()> {
        if first { Ok(()) } else { writer.write_all(b", ") }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        writer.write_all(b": ")
    }
}

/// Serializes `value` as one line (with the trailing `\n`).
pub fn to_line<T: Serialize>(value: &T) -> serde_json::Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(128);
    let mut ser = serde_json::Serializer::with_formatter(&mut buf, PythonFormatter);
    value.serialize(&mut ser)?;
    buf.push(b'\n');
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_separators() {
        let v = serde_json::json!({"role":"_checkpoint","id":0,"a":[1,2],"é":"ü"});
        assert_eq!(
            to_line(&v).unwrap(),
            "{\"role\": \"_checkpoint\", \"id\": 0, \"a\": [1, 2], \"é\": \"ü\"}\n".as_bytes()
        );
    }
}
