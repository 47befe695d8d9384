//! Python text semantics that reach the wire verbatim (the echo DSL's error messages, the
//! providers' `repr(dict)` errors, `json.dumps` arguments): `repr()` of strings and floats,
//! `str.isspace()` / `str.strip()` / `str.split()`, and `str.splitlines()`.
//!
//! Invariants: every function here reproduces CPython 3's behaviour for the inputs the DSL can
//! produce, because these strings end up verbatim in wire-visible error messages. Printability of
//! non-ASCII characters follows the Unicode categories CPython uses (Cc, Cf, Cs, Co, Cn, Zl, Zp and
//! Zs other than the space are not printable), taken from the Rust standard library's tables,
//! which are generated from exactly that category list.

use std::fmt::Write as _;

/// `str.isspace()`: Unicode `White_Space` plus the information separators `\x1c`..`\x1f`, which
/// CPython counts as whitespace through their bidirectional class.
pub fn is_py_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// `str.strip()` with no argument.
pub fn py_strip(s: &str) -> &str {
    s.trim_matches(is_py_space)
}

/// `str.split()` with no argument: runs of whitespace separate, no empty items.
pub fn py_split_whitespace(s: &str) -> impl Iterator<Item = &str> {
    s.split(is_py_space).filter(|t| !t.is_empty())
}

/// Whether `c` ends a line for `str.splitlines()` (`\r\n` is handled by the caller).
fn is_line_break(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\x0b' | '\x0c' | '\x1c' | '\x1d' | '\x1e' | '\u{85}' | '\u{2028}' | '\u{2029}')
}

/// `str.splitlines()` without `keepends`: a trailing line break does not start an empty line.
pub fn py_splitlines(s: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if !is_line_break(c) {
            continue;
        }
        lines.push(&s[start..i]);
        let mut end = i + c.len_utf8();
        if c == '\r' && chars.peek().is_some_and(|&(_, next)| next == '\n') {
            chars.next();
            end += 1;
        }
        start = end;
    }
    if start < s.len() {
        lines.push(&s[start..]);
    }
    lines
}

/// `str.isprintable()` for one character.
fn is_py_printable(c: char) -> bool {
    if c.is_ascii() {
        return (' '..='~').contains(&c);
    }
    // `str::escape_debug` escapes exactly the non-printable characters after the first one (the
    // first is also escaped when it is a grapheme extender, which Python does not do), so a
    // neutral lead character isolates the printability test.
    let mut buf = [0u8; 8];
    buf[0] = b'a';
    let len = 1 + c.encode_utf8(&mut buf[1..]).len();
    let probe = std::str::from_utf8(&buf[..len]).unwrap_or("a");
    probe.escape_debug().count() == 1 + 1
}

/// Python `repr()` of a string: single quotes unless the text contains `'` and no `"`.
pub fn py_repr_str(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if is_py_printable(c) => out.push(c),
            c => {
                let code = u32::from(c);
                // Writing to a String cannot fail.
                let _ = if code <= 0xff {
                    write!(out, "\\x{code:02x}")
                } else if code <= 0xffff {
                    write!(out, "\\u{code:04x}")
                } else {
                    write!(out, "\\U{code:08x}")
                };
            }
        }
    }
    out.push(quote);
    out
}

/// Python `repr()` of a float: the shortest round-tripping digits, positional notation for
/// decimal exponents -4..=15 (always with a fractional part), scientific otherwise
/// (`1e+16`, `1.5e-05`).
pub fn py_repr_float(f: f64) -> String {
    if f.is_nan() {
        return "nan".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    // Rust's `{:e}` prints the shortest round-tripping digits as `d.ddde<exp>`.
    let sci = format!("{:e}", f.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if f.is_sign_negative() { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let point = exp + 1;
        let body = if point <= 0 {
            format!("0.{}{}", "0".repeat(point.unsigned_abs() as usize), digits)
        } else {
            let point = point as usize;
            if digits.len() <= point {
                format!("{}{}.0", digits, "0".repeat(point - digits.len()))
            } else {
                format!("{}.{}", &digits[..point], &digits[point..])
            }
        };
        format!("{sign}{body}")
    } else {
        let (head, tail) = digits.split_at(1);
        let frac = if tail.is_empty() { String::new() } else { format!(".{tail}") };
        let exp_sign = if exp < 0 { '-' } else { '+' };
        format!("{sign}{head}{frac}e{exp_sign}{:02}", exp.unsigned_abs())
    }
}

/// `json.dumps(s)`: a double-quoted literal with every non-printable-ASCII character escaped.
pub fn write_json_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    // Writing to a String cannot fail.
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
        }
    }
    out.push('"');
}

/// `json.dumps(s)` as a new string.
pub fn json_str_literal(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    write_json_str(s, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repr_quote_choice() {
        assert_eq!(py_repr_str("bad line without colon"), "'bad line without colon'");
        assert_eq!(py_repr_str("it's"), "\"it's\"");
        assert_eq!(py_repr_str("say \"hi\""), "'say \"hi\"'");
        assert_eq!(py_repr_str("it's \"x\""), "'it\\'s \"x\"'");
        assert_eq!(py_repr_str(""), "''");
    }

    #[test]
    fn repr_escapes() {
        assert_eq!(py_repr_str("a\\b"), "'a\\\\b'");
        assert_eq!(py_repr_str("\t\n\r"), "'\\t\\n\\r'");
        assert_eq!(py_repr_str("\x00\x1f\x7f"), "'\\x00\\x1f\\x7f'");
        assert_eq!(py_repr_str("\u{85}\u{a0}\u{ad}"), "'\\x85\\xa0\\xad'");
        assert_eq!(py_repr_str("\u{200b}\u{2028}\u{3000}\u{feff}\u{e000}"), "'\\u200b\\u2028\\u3000\\ufeff\\ue000'");
        assert_eq!(py_repr_str("\u{e0001}\u{10ffff}"), "'\\U000e0001\\U0010ffff'");
        assert_eq!(py_repr_str("\u{d7ff}"), "'\\ud7ff'");
    }

    #[test]
    fn repr_keeps_printable_unicode() {
        assert_eq!(py_repr_str("héllo wörld ✓ 日本 😀"), "'héllo wörld ✓ 日本 😀'");
        // A combining mark is printable in Python even at the start of the string.
        assert_eq!(py_repr_str("\u{301}x"), "'\u{301}x'");
    }

    #[test]
    fn float_repr_matches_python() {
        let cases = [
            (1.0, "1.0"),
            (1.7, "1.7"),
            (-0.0, "-0.0"),
            (0.1, "0.1"),
            (1e-4, "0.0001"),
            (1.5e-5, "1.5e-05"),
            (1e-5, "1e-05"),
            (123456.789, "123456.789"),
            (1e15, "1000000000000000.0"),
            (1e16, "1e+16"),
            (1.2345e20, "1.2345e+20"),
            (1e100, "1e+100"),
            (-2.5, "-2.5"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (f64::NAN, "nan"),
            (f64::INFINITY, "inf"),
            (f64::NEG_INFINITY, "-inf"),
        ];
        for (f, want) in cases {
            assert_eq!(py_repr_float(f), want, "{f:?}");
        }
    }

    #[test]
    fn splitlines_uses_every_python_separator() {
        let text = "a\nb\r\nc\rd\x0be\x0cf\x1cg\x1dh\x1ei\u{85}j\u{2028}k\u{2029}l";
        assert_eq!(py_splitlines(text), vec!["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"]);
        assert_eq!(py_splitlines("x\n"), vec!["x"]);
        assert_eq!(py_splitlines("x\n\n"), vec!["x", ""]);
        assert_eq!(py_splitlines("\r\r\n"), vec!["", ""]);
        assert_eq!(py_splitlines(""), Vec::<&str>::new());
        assert_eq!(py_splitlines("a\x1fb"), vec!["a\x1fb"]);
    }

    #[test]
    fn strip_and_split_follow_isspace() {
        assert_eq!(py_strip(" \t\u{a0}x y\u{3000}\x1f"), "x y");
        assert_eq!(py_strip("\u{feff}x"), "\u{feff}x");
        assert_eq!(py_split_whitespace(" a  b\u{2003}c ").collect::<Vec<_>>(), vec!["a", "b", "c"]);
    }
}
