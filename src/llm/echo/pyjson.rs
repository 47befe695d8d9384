//! A JSON value as Python's `json.loads` builds it, with the Python operations the DSL applies
//! to it: `repr()`, `type().__name__`, truthiness, `int()`, and `json.dumps` in its compact,
//! ASCII-escaped form.
//!
//! Invariants: `loads` accepts exactly what CPython's `json.loads` accepts (including `NaN`,
//! `Infinity` and `-Infinity`, arbitrarily large integers, and duplicate keys where the last
//! value wins at the first key's position), except that a lone UTF-16 surrogate escape becomes
//! U+FFFD because Rust strings cannot hold it. Integers keep their exact decimal text so their
//! `repr` and re-encoding are exact.

use serde_json::{Map, Number, Value};

pub use crate::llm::pyfmt::json_str_literal;
use crate::llm::pyfmt::{py_repr_float, py_repr_str, py_strip, write_json_str};

#[derive(Debug, Clone, PartialEq)]
pub enum PyValue {
    None,
    Bool(bool),
    /// Canonical decimal text: optional `-`, no leading zeros, never `-0`.
    Int(String),
    Float(f64),
    Str(String),
    List(Vec<PyValue>),
    /// Insertion-ordered; keys are unique.
    Dict(Vec<(String, PyValue)>),
}

impl PyValue {
    /// `dict.get(key)`; `None` for a missing key or a non-dict.
    pub fn get(&self, key: &str) -> Option<&PyValue> {
        match self {
            PyValue::Dict(items) => items.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn is_none(&self) -> bool {
        matches!(self, PyValue::None)
    }

    /// Python truthiness (`NaN` is truthy, `0`, `0.0`, `""`, `[]`, `{}` are not).
    pub fn is_truthy(&self) -> bool {
        match self {
            PyValue::None => false,
            PyValue::Bool(b) => *b,
            PyValue::Int(digits) => digits != "0",
            PyValue::Float(f) => *f != 0.0,
            PyValue::Str(s) => !s.is_empty(),
            PyValue::List(items) => !items.is_empty(),
            PyValue::Dict(items) => !items.is_empty(),
        }
    }

    /// `type(value).__name__`.
    pub fn type_name(&self) -> &'static str {
        match self {
            PyValue::None => "NoneType",
            PyValue::Bool(_) => "bool",
            PyValue::Int(_) => "int",
            PyValue::Float(_) => "float",
            PyValue::Str(_) => "str",
            PyValue::List(_) => "list",
            PyValue::Dict(_) => "dict",
        }
    }

    /// Python `repr()`.
    pub fn repr(&self) -> String {
        let mut out = String::new();
        self.write_repr(&mut out);
        out
    }

    fn write_repr(&self, out: &mut String) {
        match self {
            PyValue::None => out.push_str("None"),
            PyValue::Bool(true) => out.push_str("True"),
            PyValue::Bool(false) => out.push_str("False"),
            PyValue::Int(digits) => out.push_str(digits),
            PyValue::Float(f) => out.push_str(&py_repr_float(*f)),
            PyValue::Str(s) => out.push_str(&py_repr_str(s)),
            PyValue::List(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    item.write_repr(out);
                }
                out.push(']');
            }
            PyValue::Dict(items) => {
                out.push('{');
                for (i, (key, value)) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(&py_repr_str(key));
                    out.push_str(": ");
                    value.write_repr(out);
                }
                out.push('}');
            }
        }
    }

    /// `json.dumps(value, separators=(",", ":"))` (ASCII-escaped, `NaN`/`Infinity` literals).
    pub fn to_compact_json(&self) -> String {
        let mut out = String::new();
        self.write_json(&mut out);
        out
    }

    fn write_json(&self, out: &mut String) {
        match self {
            PyValue::None => out.push_str("null"),
            PyValue::Bool(true) => out.push_str("true"),
            PyValue::Bool(false) => out.push_str("false"),
            PyValue::Int(digits) => out.push_str(digits),
            PyValue::Float(f) if f.is_nan() => out.push_str("NaN"),
            PyValue::Float(f) if f.is_infinite() => out.push_str(if *f > 0.0 { "Infinity" } else { "-Infinity" }),
            PyValue::Float(f) => out.push_str(&py_repr_float(*f)),
            PyValue::Str(s) => write_json_str(s, out),
            PyValue::List(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    item.write_json(out);
                }
                out.push(']');
            }
            PyValue::Dict(items) => {
                out.push('{');
                for (i, (key, value)) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    write_json_str(key, out);
                    out.push(':');
                    value.write_json(out);
                }
                out.push('}');
            }
        }
    }

    /// The value as a `serde_json::Value`; non-finite floats (unrepresentable there) become null.
    pub fn to_serde(&self) -> Value {
        match self {
            PyValue::None => Value::Null,
            PyValue::Bool(b) => Value::Bool(*b),
            PyValue::Int(digits) => {
                if let Ok(i) = digits.parse::<i64>() {
                    Value::from(i)
                } else if let Ok(u) = digits.parse::<u64>() {
                    Value::from(u)
                } else {
                    digits.parse::<f64>().ok().and_then(Number::from_f64).map_or(Value::Null, Value::Number)
                }
            }
            PyValue::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
            PyValue::Str(s) => Value::String(s.clone()),
            PyValue::List(items) => Value::Array(items.iter().map(PyValue::to_serde).collect()),
            PyValue::Dict(items) => Value::Object(to_serde_map(items)),
        }
    }
}

pub fn to_serde_map(items: &[(String, PyValue)]) -> Map<String, Value> {
    items.iter().map(|(k, v)| (k.clone(), v.to_serde())).collect()
}

/// Result of Python `int(value)` for a JSON-born value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PyInt {
    /// The integer, saturated to the `i128` range (Python's is unbounded).
    Value(i128),
    /// `int()` raises (`TypeError`, `ValueError`, or `OverflowError` for infinities).
    Invalid,
}

pub fn py_int(value: &PyValue) -> PyInt {
    match value {
        PyValue::Bool(b) => PyInt::Value(i128::from(*b)),
        PyValue::Int(digits) => PyInt::Value(parse_saturating(digits)),
        PyValue::Float(f) if f.is_finite() => PyInt::Value(f.trunc() as i128),
        PyValue::Str(s) => parse_int_literal(s).map_or(PyInt::Invalid, PyInt::Value),
        _ => PyInt::Invalid,
    }
}

fn parse_saturating(digits: &str) -> i128 {
    digits.parse::<i128>().unwrap_or(if digits.starts_with('-') { i128::MIN } else { i128::MAX })
}

/// `int(str)` in base 10: surrounding whitespace, an optional sign, decimal digits (any Unicode
/// decimal digit counts as its value) with single underscores allowed between digits.
fn parse_int_literal(s: &str) -> Option<i128> {
    let s = py_strip(s);
    let (negative, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut digits = String::with_capacity(body.len());
    let mut previous_underscore = true;
    for c in body.chars() {
        if c == '_' {
            if previous_underscore {
                return None;
            }
            previous_underscore = true;
            continue;
        }
        let digit = unicode_decimal_value(c)?;
        digits.push(char::from(b'0' + digit));
        previous_underscore = false;
    }
    if digits.is_empty() || previous_underscore {
        return None;
    }
    let magnitude = parse_saturating(&digits);
    Some(if negative { magnitude.saturating_neg() } else { magnitude })
}

/// The value of a decimal digit (Unicode category Nd). Nd digits come in contiguous runs of ten
/// starting at a code point whose value is 0; the table lists those starts.
fn unicode_decimal_value(c: char) -> Option<u8> {
    const ZEROS: &[u32] = &[
        0x30, 0x660, 0x6F0, 0x7C0, 0x966, 0x9E6, 0xA66, 0xAE6, 0xB66, 0xBE6, 0xC66, 0xCE6, 0xD66, 0xDE6, 0xE50, 0xED0,
        0xF20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0, 0x1A80, 0x1A90, 0x1B50, 0x1BB0, 0x1C40, 0x1C50, 0xA620,
        0xA8D0, 0xA900, 0xA9D0, 0xA9F0, 0xAA50, 0xABF0, 0xFF10, 0x104A0, 0x10D30, 0x11066, 0x110F0, 0x11136, 0x111D0,
        0x112F0, 0x11450, 0x114D0, 0x11650, 0x116C0, 0x11730, 0x118E0, 0x11950, 0x11C50, 0x11D50, 0x11DA0, 0x11F50,
        0x16A60, 0x16AC0, 0x16B50, 0x1D7CE, 0x1D7D8, 0x1D7E2, 0x1D7EC, 0x1D7F6, 0x1E140, 0x1E2F0, 0x1E4F0, 0x1E950,
        0x1FBF0,
    ];
    let code = u32::from(c);
    ZEROS.iter().find(|&&zero| (zero..zero + 10).contains(&code)).map(|zero| (code - zero) as u8)
}

/// `json.loads(text)`; `None` where Python raises `JSONDecodeError`.
pub fn loads(text: &str) -> Option<PyValue> {
    let mut parser = Parser { bytes: text.as_bytes(), text, pos: 0 };
    parser.skip_ws();
    let value = parser.value(0)?;
    parser.skip_ws();
    (parser.pos == parser.bytes.len()).then_some(value)
}

/// Nesting deeper than this fails like malformed input instead of exhausting the stack (CPython
/// raises `RecursionError` far earlier than any real script would nest).
const MAX_DEPTH: usize = 512;

struct Parser<'a> {
    bytes: &'a [u8],
    text: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.pos) {
            self.pos += 1;
        }
    }

    fn eat(&mut self, literal: &str) -> bool {
        if self.text[self.pos..].starts_with(literal) {
            self.pos += literal.len();
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Option<PyValue> {
        if depth > MAX_DEPTH {
            return None;
        }
        match *self.bytes.get(self.pos)? {
            b'"' => self.string().map(PyValue::Str),
            b'{' => self.object(depth),
            b'[' => self.array(depth),
            b'n' if self.eat("null") => Some(PyValue::None),
            b't' if self.eat("true") => Some(PyValue::Bool(true)),
            b'f' if self.eat("false") => Some(PyValue::Bool(false)),
            b'N' if self.eat("NaN") => Some(PyValue::Float(f64::NAN)),
            b'I' if self.eat("Infinity") => Some(PyValue::Float(f64::INFINITY)),
            b'-' if self.eat("-Infinity") => Some(PyValue::Float(f64::NEG_INFINITY)),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.pos;
        while self.bytes.get(self.pos).is_some_and(u8::is_ascii_digit) {
            self.pos += 1;
        }
        self.pos - start
    }

    fn number(&mut self) -> Option<PyValue> {
        let start = self.pos;
        if self.bytes[self.pos] == b'-' {
            self.pos += 1;
        }
        match self.bytes.get(self.pos) {
            Some(b'0') => self.pos += 1,
            Some(b'1'..=b'9') => {
                self.digits();
            }
            _ => return None,
        }
        let mut is_float = false;
        // A fraction or exponent without digits is not part of the number (the leftover text
        // then fails as extra data), matching the CPython scanner's backtracking.
        if self.bytes.get(self.pos) == Some(&b'.') && self.bytes.get(self.pos + 1).is_some_and(u8::is_ascii_digit) {
            self.pos += 1;
            self.digits();
            is_float = true;
        }
        if let Some(b'e' | b'E') = self.bytes.get(self.pos) {
            let mark = self.pos;
            self.pos += 1;
            if let Some(b'+' | b'-') = self.bytes.get(self.pos) {
                self.pos += 1;
            }
            if self.digits() == 0 {
                self.pos = mark;
            } else {
                is_float = true;
            }
        }
        let literal = &self.text[start..self.pos];
        if is_float {
            literal.parse::<f64>().ok().map(PyValue::Float)
        } else {
            let negative = literal.starts_with('-');
            let magnitude = literal.trim_start_matches('-');
            Some(PyValue::Int(if negative && magnitude != "0" { literal.to_string() } else { magnitude.to_string() }))
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let hex = self.text.get(self.pos..self.pos + 4)?;
        if !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        self.pos += 4;
        u32::from_str_radix(hex, 16).ok()
    }

    fn string(&mut self) -> Option<String> {
        self.pos += 1;
        let mut out = String::new();
        loop {
            let run_start = self.pos;
            while let Some(&b) = self.bytes.get(self.pos) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            out.push_str(&self.text[run_start..self.pos]);
            match *self.bytes.get(self.pos)? {
                b'"' => {
                    self.pos += 1;
                    return Some(out);
                }
                b'\\' => {
                    self.pos += 1;
                    let escape = *self.bytes.get(self.pos)?;
                    self.pos += 1;
                    match escape {
                        b'"' => out.push('"'),
                        b'\\' => out.push('\\'),
                        b'/' => out.push('/'),
                        b'b' => out.push('\x08'),
                        b'f' => out.push('\x0c'),
                        b'n' => out.push('\n'),
                        b'r' => out.push('\r'),
                        b't' => out.push('\t'),
                        b'u' => out.push(self.unicode_escape()?),
                        _ => return None,
                    }
                }
                // Strict mode: raw control characters are rejected.
                _ => return None,
            }
        }
    }

    fn unicode_escape(&mut self) -> Option<char> {
        let first = self.hex4()?;
        if (0xd800..0xdc00).contains(&first) && self.text[self.pos..].starts_with("\\u") {
            let mark = self.pos;
            self.pos += 2;
            let second = self.hex4()?;
            if (0xdc00..0xe000).contains(&second) {
                return char::from_u32(0x10000 + ((first - 0xd800) << 10) + (second - 0xdc00));
            }
            self.pos = mark;
        }
        Some(char::from_u32(first).unwrap_or(char::REPLACEMENT_CHARACTER))
    }

    fn array(&mut self, depth: usize) -> Option<PyValue> {
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_ws();
        if self.bytes.get(self.pos) == Some(&b']') {
            self.pos += 1;
            return Some(PyValue::List(items));
        }
        loop {
            self.skip_ws();
            items.push(self.value(depth + 1)?);
            self.skip_ws();
            match *self.bytes.get(self.pos)? {
                b',' => self.pos += 1,
                b']' => {
                    self.pos += 1;
                    return Some(PyValue::List(items));
                }
                _ => return None,
            }
        }
    }

    fn object(&mut self, depth: usize) -> Option<PyValue> {
        self.pos += 1;
        let mut items: Vec<(String, PyValue)> = Vec::new();
        self.skip_ws();
        if self.bytes.get(self.pos) == Some(&b'}') {
            self.pos += 1;
            return Some(PyValue::Dict(items));
        }
        loop {
            self.skip_ws();
            if self.bytes.get(self.pos) != Some(&b'"') {
                return None;
            }
            let key = self.string()?;
            self.skip_ws();
            if self.bytes.get(self.pos) != Some(&b':') {
                return None;
            }
            self.pos += 1;
            self.skip_ws();
            let value = self.value(depth + 1)?;
            match items.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => slot.1 = value,
                None => items.push((key, value)),
            }
            self.skip_ws();
            match *self.bytes.get(self.pos)? {
                b',' => self.pos += 1,
                b'}' => {
                    self.pos += 1;
                    return Some(PyValue::Dict(items));
                }
                _ => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repr_of(json: &str) -> String {
        loads(json).unwrap().repr()
    }

    #[test]
    fn loads_matches_python_acceptance() {
        for ok in [
            "5",
            " [1, 2] ",
            "\"x\"",
            "true",
            "null",
            "NaN",
            "-Infinity",
            "Infinity",
            "{}",
            "[]",
            "1e5",
            "-0",
            "1E+2",
            "{\"a\": {\"b\": [1, 2.5, null]}}",
            "\"\\ud83d\\ude00\"",
            "\r\n\t1\t",
        ] {
            assert!(loads(ok).is_some(), "{ok}");
        }
        for bad in [
            "",
            "01",
            "1.",
            ".5",
            "+1",
            "-",
            "nan",
            "inf",
            "[1,]",
            "{\"a\":1,}",
            "{'a': 1}",
            "'x'",
            "\"a\nb\"",
            "\"\\x\"",
            "1 2",
            "tru",
            "\u{feff}1",
            "\u{a0}1",
            "{1: 2}",
            "[",
            "\"abc",
            "-NaN",
        ] {
            assert!(loads(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn numbers_keep_python_types() {
        assert_eq!(loads("-0"), Some(PyValue::Int("0".into())));
        assert_eq!(loads("-12"), Some(PyValue::Int("-12".into())));
        assert_eq!(
            loads("123456789012345678901234567890"),
            Some(PyValue::Int("123456789012345678901234567890".into()))
        );
        assert_eq!(loads("1.0"), Some(PyValue::Float(1.0)));
        assert_eq!(loads("1e2"), Some(PyValue::Float(100.0)));
        assert_eq!(loads("1e400"), Some(PyValue::Float(f64::INFINITY)));
    }

    #[test]
    fn reprs_match_python() {
        assert_eq!(repr_of("5"), "5");
        assert_eq!(repr_of("[1, 2]"), "[1, 2]");
        assert_eq!(repr_of("\"x\""), "'x'");
        assert_eq!(repr_of("true"), "True");
        assert_eq!(repr_of("false"), "False");
        assert_eq!(repr_of("null"), "None");
        assert_eq!(repr_of("{\"url\": 5}"), "{'url': 5}");
        assert_eq!(repr_of("{\"a\": [1.5, \"it's\"], \"b\": {}}"), "{'a': [1.5, \"it's\"], 'b': {}}");
        assert_eq!(repr_of("[NaN, Infinity, -Infinity, 1e16, 2.0]"), "[nan, inf, -inf, 1e+16, 2.0]");
        assert_eq!(repr_of("{\"a\": 1, \"b\": 2, \"a\": 3}"), "{'a': 3, 'b': 2}");
    }

    #[test]
    fn compact_json_is_ascii_escaped() {
        let v = loads("{\"a\": [1, 2.50, true, null], \"é\": \"日\\n😀\\u007f\", \"n\": NaN}").unwrap();
        assert_eq!(
            v.to_compact_json(),
            "{\"a\":[1,2.5,true,null],\"\\u00e9\":\"\\u65e5\\n\\ud83d\\ude00\\u007f\",\"n\":NaN}"
        );
        assert_eq!(json_str_literal("a\"b\\\x08\x0c\x01"), "\"a\\\"b\\\\\\b\\f\\u0001\"");
    }

    #[test]
    fn lone_surrogates_become_replacement_characters() {
        assert_eq!(loads("\"\\ud800x\""), Some(PyValue::Str("\u{fffd}x".into())));
        assert_eq!(loads("\"\\ud800\\u0041\""), Some(PyValue::Str("\u{fffd}A".into())));
    }

    #[test]
    fn int_conversion_follows_python() {
        let int = |json: &str| py_int(&loads(json).unwrap());
        assert_eq!(int("1.7"), PyInt::Value(1));
        assert_eq!(int("-1.7"), PyInt::Value(-1));
        assert_eq!(int("true"), PyInt::Value(1));
        assert_eq!(int("false"), PyInt::Value(0));
        assert_eq!(int("\"3\""), PyInt::Value(3));
        assert_eq!(int("\" -3 \""), PyInt::Value(-3));
        assert_eq!(int("\"+007\""), PyInt::Value(7));
        assert_eq!(int("\"1_000\""), PyInt::Value(1000));
        assert_eq!(int("\"\\u0663\""), PyInt::Value(3));
        for bad in
            ["\"1__0\"", "\"_1\"", "\"1_\"", "\"1.5\"", "\"\"", "\"1e3\"", "null", "[1]", "{}", "NaN", "Infinity"]
        {
            assert_eq!(int(bad), PyInt::Invalid, "{bad}");
        }
    }

    #[test]
    fn truthiness_and_type_names() {
        for falsy in ["0", "0.0", "\"\"", "[]", "{}", "null", "false"] {
            assert!(!loads(falsy).unwrap().is_truthy(), "{falsy}");
        }
        for truthy in ["1", "NaN", "\"0\"", "[0]", "true"] {
            assert!(loads(truthy).unwrap().is_truthy(), "{truthy}");
        }
        let names: Vec<_> =
            ["{}", "[]", "1", "1.0", "true", "\"\"", "null"].iter().map(|j| loads(j).unwrap().type_name()).collect();
        assert_eq!(names, ["dict", "list", "int", "float", "bool", "str", "NoneType"]);
    }

    #[test]
    fn serde_conversion_drops_non_finite_floats() {
        let v = loads("{\"a\": NaN, \"b\": 18446744073709551615, \"c\": -1, \"d\": 1.5}").unwrap();
        assert_eq!(v.to_serde().to_string(), "{\"a\":null,\"b\":18446744073709551615,\"c\":-1,\"d\":1.5}");
    }
}
