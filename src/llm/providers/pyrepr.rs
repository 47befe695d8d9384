//! Python-compatible text renderings of JSON values, needed because the reference's error
//! messages embed `repr(dict)` and Gemini tool-call arguments are `json.dumps(args)`.
//!
//! Invariants: [`repr`] follows CPython's `repr` for dict/list/str/int/float/bool/None (key order
//! preserved); [`json_dumps`] follows `json.dumps` defaults (`", "` / `": "` separators,
//! `ensure_ascii=True`).

use std::fmt::Write as _;

use serde_json::Value;

use crate::llm::pyfmt::{py_repr_float, py_repr_str, write_json_str};

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

fn write_number(n: &serde_json::Number, out: &mut String) {
    match n.as_f64().filter(|_| n.is_f64()) {
        Some(f) => out.push_str(&py_repr_float(f)),
        None => {
            let _ = write!(out, "{n}");
        }
    }
}

fn write_str_repr(s: &str, out: &mut String) {
    out.push_str(&py_repr_str(s));
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
