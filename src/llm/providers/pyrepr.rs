//! Python-compatible text renderings of JSON values, needed because the reference's error
//! messages embed `repr(dict)` and Gemini tool-call arguments are `json.dumps(args)`.
//!
//! Invariants: [`repr`] follows CPython's `repr` for dict/list/str/int/float/bool/None (key order
//! preserved); [`json_dumps`] follows `json.dumps` defaults (`", "` / `": "` separators,
//! `ensure_ascii=True`).

use std::fmt::Write as _;

use serde_json::Value;

/// `repr()` of the Python object that `json.loads` would build from `value`.
pub fn repr(value: &Value) -> String {
    let mut out = String::new();
    write_repr(value, &mut out);
    out
}

fn write_repr(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => write_number(n, out),
        Value::String(s) => write_str_repr(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_str_repr(k, out);
                out.push_str(": ");
                write_repr(v, out);
            }
            out.push('}');
        }
    }
}

/// Python prints floats with the shortest round-trip digits, always with a `.0` or exponent.
fn write_number(n: &serde_json::Number, out: &mut String) {
    if n.is_f64() {
        let f = n.as_f64().unwrap_or(0.0);
        if f.is_finite() && f == f.trunc() && f.abs() < 1e16 {
            let _ = write!(out, "{f:.1}");
        } else if f.abs() >= 1e16 || (f != 0.0 && f.abs() < 1e-4) {
            // Python switches to exponent notation here: 1e+16, 1e-05.
            let s = format!("{f:e}");
            match s.split_once('e') {
                Some((mant, exp)) => {
                    let (sign, digits) = match exp.strip_prefix('-') {
                        Some(d) => ('-', d),
                        None => ('+', exp),
                    };
                    let _ = write!(out, "{mant}e{sign}{digits:0>2}");
                }
                None => out.push_str(&s),
            }
        } else {
            let _ = write!(out, "{f}");
        }
    } else {
        let _ = write!(out, "{n}");
    }
}

fn write_str_repr(s: &str, out: &mut String) {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            // Python escapes non-printable non-ASCII too; the common ones are these ranges.
            c if (0x80..0xa0).contains(&(c as u32)) || c == '\u{ad}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if matches!(c as u32, 0x2028 | 0x2029 | 0xfeff) || (0xd800..0xe000).contains(&(c as u32)) => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

/// `json.dumps(value)` with Python's default separators and ASCII escaping.
pub fn json_dumps(value: &Value) -> String {
    let mut out = String::new();
    write_dumps(value, &mut out);
    out
}

fn write_dumps(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if n.is_f64() {
                write_number(n, out);
            } else {
                let _ = write!(out, "{n}");
            }
        }
        Value::String(s) => write_json_str(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_dumps(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_json_str(k, out);
                out.push_str(": ");
                write_dumps(v, out);
            }
            out.push('}');
        }
    }
}

fn write_json_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 || (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn repr_matches_python() {
        let v: Value = serde_json::from_str(
            r#"{"error":{"message":"It's \"x\"","type":"t","param":null,"ok":true,"n":[1,2.5,3.0]}}"#,
        )
        .unwrap();
        assert_eq!(
            repr(&v),
            r#"{'error': {'message': 'It\'s "x"', 'type': 't', 'param': None, 'ok': True, 'n': [1, 2.5, 3.0]}}"#
        );
        assert_eq!(repr(&json!("it's")), r#""it's""#);
        assert_eq!(repr(&json!("a\nb\\")), r"'a\nb\\'");
        assert_eq!(repr(&json!(1e-5)), "1e-05");
    }

    #[test]
    fn dumps_matches_python() {
        let v: Value = serde_json::from_str(r#"{"command":"ls -la","n":[1,{"é":null}]}"#).unwrap();
        assert_eq!(json_dumps(&v), r#"{"command": "ls -la", "n": [1, {"\u00e9": null}]}"#);
        assert_eq!(json_dumps(&json!({})), "{}");
    }
}
