//! What each line sent must get back, derived from its bytes alone, and the ledger that holds
//! kiwi to it.
//!
//! The rules are `docs/protocol.md` §2 plus kiwi's documented divergences (README "Where kiwi
//! differs"): integer ids are echoed (only i64; anything else is -32600 with id null), `run` and
//! `interrupt` are requests like any other, an over-long line is -32600 with id null, invalid
//! UTF-8 and lone surrogate escapes become U+FFFD. Where an implementation may legitimately go
//! either way (nesting past a parser's depth limit, the control characters Python strips and
//! Rust does not) the line is `Unsure`: it may be answered once, or not at all.

use std::collections::HashMap;

use serde_json::Value;

/// The answer one inbound line must get.
#[derive(Debug, Clone, PartialEq)]
pub enum Expect {
    /// Exactly one response with this id (key: `id_key`).
    Answer(String),
    /// Exactly one error with `"id": null` (-32700 or -32600).
    NullError,
    /// Nothing: a response, a notification, `{}`.
    Nothing,
    /// At most one answer: a null-id error, or a response to this id (None: an id we cannot
    /// predict).
    Unsure(Option<String>),
}

/// The key of an id in the ledger: its compact JSON text (so `1` and `"1"` differ).
pub fn id_key(id: &Value) -> String {
    match id {
        Value::Number(n) => n.as_i64().map(|i| i.to_string()).unwrap_or_else(|| n.to_string()),
        other => other.to_string(),
    }
}

/// Splits a chunk (which ends with `\n`) into lines and appends what each must get.
pub fn expect_chunk(chunk: &[u8], max_line: usize, out: &mut Vec<Expect>) {
    let body = chunk.strip_suffix(b"\n").unwrap_or(chunk);
    for line in body.split(|&b| b == b'\n') {
        out.push(expect_line(line, max_line));
    }
}

/// Characters Python's `str.strip()` removes and Rust's `str::trim` keeps.
fn python_only_space(c: char) -> bool {
    ('\u{1c}'..='\u{1f}').contains(&c)
}

pub fn expect_line(line: &[u8], max_line: usize) -> Expect {
    // `--max-line-bytes N` is the longest accepted line, its `\n` not counted.
    if line.len() > max_line {
        return Expect::NullError;
    }
    let text = String::from_utf8_lossy(line);
    let text = text.trim();
    if text.starts_with(python_only_space) || text.ends_with(python_only_space) {
        return Expect::Unsure(None);
    }
    let value = match parse(text) {
        Parsed::Value(v) => v,
        Parsed::TooDeep => return Expect::Unsure(None),
        Parsed::Invalid => return Expect::NullError,
    };
    classify(value)
}

enum Parsed {
    Value(Value),
    TooDeep,
    Invalid,
}

fn parse(text: &str) -> Parsed {
    let first = match serde_json::from_str::<Value>(text) {
        Ok(v) => return Parsed::Value(v),
        Err(e) => e,
    };
    let error = match replace_lone_surrogates(text) {
        Some(fixed) => match serde_json::from_str::<Value>(&fixed) {
            Ok(v) => return Parsed::Value(v),
            Err(e) => e,
        },
        None => first,
    };
    if error.to_string().starts_with("recursion limit exceeded") { Parsed::TooDeep } else { Parsed::Invalid }
}

/// §2 steps 2–8 on a parsed line.
fn classify(value: Value) -> Expect {
    let Value::Object(obj) = value else { return Expect::NullError };
    if obj.get("jsonrpc").is_some_and(|v| v != "2.0") {
        return Expect::NullError;
    }
    let method_present = obj.contains_key("method");
    let method = match obj.get("method") {
        None | Some(Value::Null) => None,
        Some(Value::String(m)) => Some(m),
        Some(_) => return Expect::NullError,
    };
    let id = match obj.get("id") {
        None | Some(Value::Null) => None,
        Some(id @ Value::String(_)) => Some(id_key(id)),
        Some(id @ Value::Number(n)) if n.as_i64().is_some() => Some(id_key(id)),
        Some(_) => return Expect::NullError,
    };
    let error_valid = match obj.get("error") {
        None | Some(Value::Null) => false,
        Some(Value::Object(e)) => {
            if e.get("code").and_then(Value::as_i64).is_none() || !e.get("message").is_some_and(Value::is_string) {
                return Expect::NullError;
            }
            true
        }
        Some(_) => return Expect::NullError,
    };
    match (method, id) {
        (Some(_), Some(id)) => Expect::Answer(id),
        (Some(_), None) | (None, None) => Expect::Nothing,
        (None, Some(_)) => {
            if obj.contains_key("result") || error_valid || !method_present {
                Expect::Nothing
            } else {
                // `"method": null` with neither result nor error: "Invalid response".
                Expect::NullError
            }
        }
    }
}

/// `"\ud800"` is valid JSON text with no Rust `String` form: each lone surrogate escape inside
/// a string becomes `\ufffd`. None when there is nothing to replace.
fn replace_lone_surrogates(text: &str) -> Option<String> {
    fn unit(b: &[u8], at: usize) -> Option<u32> {
        let esc = b.get(at..at + 6)?;
        if &esc[..2] != b"\\u" {
            return None;
        }
        u32::from_str_radix(std::str::from_utf8(&esc[2..]).ok()?, 16).ok()
    }
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut changed = false;
    let (mut i, mut start, mut in_string) = (0, 0, false);
    while i < b.len() {
        if b[i] == b'"' {
            in_string = !in_string;
        } else if in_string && b[i] == b'\\' {
            match unit(b, i) {
                Some(0xD800..=0xDBFF) if matches!(unit(b, i + 6), Some(0xDC00..=0xDFFF)) => {
                    i += 12;
                    continue;
                }
                Some(0xD800..=0xDFFF) => {
                    out.push_str(&text[start..i]);
                    out.push_str("\\ufffd");
                    changed = true;
                    i += 6;
                    start = i;
                    continue;
                }
                _ => {
                    // Any other escape is two characters long as far as quotes are concerned.
                    i += 2;
                    continue;
                }
            }
        }
        i += 1;
    }
    if !changed {
        return None;
    }
    out.push_str(&text[start.min(text.len())..]);
    Some(out)
}

/// Per id: answers owed and answers seen.
#[derive(Default)]
struct Tally {
    sure: u32,
    maybe: u32,
    got: u32,
    /// 1-based line numbers in `frames.bin` of the first and last line carrying this id.
    first_line: u64,
    last_line: u64,
}

/// Answers owed by kiwi against answers read, shared by the writer and the reader.
#[derive(Default)]
pub struct Ledger {
    ids: HashMap<String, Tally>,
    /// Sum over ids of answers owed and not yet seen.
    missing: u64,
    null_sure: u64,
    null_maybe: u64,
    null_got: u64,
    /// Unsure lines whose id we could not predict: each may be answered once under any id.
    wild: u64,
    wild_used: u64,
    /// Too many answers, found as they arrive.
    pub findings: Vec<String>,
}

impl Ledger {
    /// Registers what a line (number `line`, 1-based) must get. Called before it is written.
    pub fn expect(&mut self, e: &Expect, line: u64) {
        match e {
            Expect::Answer(key) | Expect::Unsure(Some(key)) => {
                let t = self.ids.entry(key.clone()).or_default();
                let owed_before = t.sure.saturating_sub(t.got);
                if matches!(e, Expect::Answer(_)) {
                    t.sure += 1;
                } else {
                    t.maybe += 1;
                }
                if t.first_line == 0 {
                    t.first_line = line;
                }
                t.last_line = line;
                self.missing += u64::from(t.sure.saturating_sub(t.got) - owed_before);
                if matches!(e, Expect::Unsure(_)) {
                    self.null_maybe += 1;
                }
            }
            Expect::NullError => self.null_sure += 1,
            Expect::Unsure(None) => {
                self.null_maybe += 1;
                self.wild += 1;
            }
            Expect::Nothing => {}
        }
    }

    /// A response with a non-null id, read as stdout line `out_line`.
    pub fn answer(&mut self, key: String, out_line: u64, text: &str) {
        let Some(t) = self.ids.get_mut(&key) else {
            if self.wild_used < self.wild {
                self.wild_used += 1;
            } else {
                self.findings.push(format!(
                    "stdout line {out_line}: an answer to id {key}, which was never sent: {}",
                    clip(text)
                ));
            }
            return;
        };
        let owed_before = t.sure.saturating_sub(t.got);
        t.got += 1;
        self.missing -= u64::from(owed_before - t.sure.saturating_sub(t.got));
        if t.got > t.sure + t.maybe {
            let (first, last, got, sent) = (t.first_line, t.last_line, t.got, t.sure + t.maybe);
            self.findings.push(format!(
                "stdout line {out_line}: answer #{got} to id {key}, sent {sent} time(s) (frames.bin lines {first}..={last}): {}",
                clip(text)
            ));
        }
    }

    pub fn null_answer(&mut self) {
        self.null_got += 1;
    }

    /// Answers kiwi still owes (the final sync waits for 0).
    pub fn outstanding(&self) -> u64 {
        self.missing + self.null_sure.saturating_sub(self.null_got)
    }

    /// Everything still wrong once kiwi has exited, and how many missing answers were
    /// forgiven: up to `may_drop` (a stdin EOF during a turn may cost that turn's answer,
    /// `docs/protocol.md` §1 "Start-up and shutdown"; only one turn runs at a time).
    pub fn reconcile(&self, may_drop: u64) -> (Vec<String>, u64) {
        let mut out = self.findings.clone();
        let forgiven = if self.missing <= may_drop { self.missing } else { 0 };
        let mut missing: Vec<(&String, &Tally)> =
            self.ids.iter().filter(|(_, t)| t.got < t.sure && forgiven == 0).collect();
        missing.sort_by_key(|(_, t)| t.first_line);
        for (key, t) in missing.iter().take(20) {
            out.push(format!(
                "id {} owed {} answer(s), got {} (frames.bin lines {}..={})",
                clip(key),
                t.sure,
                t.got,
                t.first_line,
                t.last_line
            ));
        }
        if missing.len() > 20 {
            out.push(format!("... and {} more ids without their answers", missing.len() - 20));
        }
        if self.null_got < self.null_sure || self.null_got > self.null_sure + self.null_maybe {
            out.push(format!(
                "{} error(s) with id null, expected {} (+ up to {} from lines that may go either way)",
                self.null_got, self.null_sure, self.null_maybe
            ));
        }
        (out, forgiven)
    }
}

pub fn clip(s: &str) -> String {
    if s.len() <= 300 {
        return s.to_string();
    }
    let mut end = 300;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &s[..end], s.len())
}

/// The oracle's own checks against the examples of the spec and of kiwi's tests, so a mistake
/// here shows up as a failed assertion rather than as a fuzz "finding".
pub fn self_check() {
    let cases: &[(&[u8], Expect)] = &[
        (b"{not-json}", Expect::NullError),
        (b"", Expect::NullError),
        (b"[1,2]", Expect::NullError),
        (br#"{"jsonrpc":"2.1","id":"bad"}"#, Expect::NullError),
        (br#"{"jsonrpc":"2.0","id":"x","method":null}"#, Expect::NullError),
        (br#"{"jsonrpc":"2.0","id":"n1","method":"nope"}"#, Expect::Answer("\"n1\"".into())),
        (br#"{"jsonrpc":"2.0","id":42,"method":"cancel"}"#, Expect::Answer("42".into())),
        (br#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"cancel"}"#, Expect::NullError),
        (br#"{"jsonrpc":"2.0","id":1.0,"method":"cancel"}"#, Expect::NullError),
        (br#"{"jsonrpc":"2.0","id":"r3"}"#, Expect::Nothing),
        (br#"{"jsonrpc":"2.0","id":"unknown","result":null}"#, Expect::Nothing),
        (br#"{"jsonrpc":"2.0","id":"r5","error":{"code":"bad"}}"#, Expect::NullError),
        (br#"{"jsonrpc":"2.0","method":"cancel"}"#, Expect::Nothing),
        (b"{}", Expect::Nothing),
        (b"\xef\xbb\xbf{\"id\":\"bom\",\"method\":\"cancel\"}", Expect::NullError),
        (br#"{"id":"big","method":"cancel","params":{"n":1e400}}"#, Expect::NullError),
        (br#"{"id":"d1","id":"d2","method":"cancel"}"#, Expect::Answer("\"d2\"".into())),
        (b"{\"id\":\"crlf\",\"method\":\"cancel\"}\r", Expect::Answer("\"crlf\"".into())),
        (br#"{"id":"s\ud800","method":"cancel"}"#, Expect::Answer("\"s\u{fffd}\"".into())),
        (br#"{"id":"s\\ud800","method":"cancel"}"#, Expect::Answer("\"s\\\\ud800\"".into())),
        (br#"{"id":"k","method":"cancel","\udfff":1}"#, Expect::Answer("\"k\"".into())),
        (br#"{"id":"x","method":"cancel","a":"\ud800}"#, Expect::NullError),
        (b"{\"id\":\"u\xff\",\"method\":\"cancel\"}", Expect::Answer("\"u\u{fffd}\"".into())),
        (b"\x1c{\"id\":\"c\",\"method\":\"cancel\"}", Expect::Unsure(None)),
    ];
    for (line, expected) in cases {
        assert_eq!(&expect_line(line, 1 << 20), expected, "oracle on {:?}", String::from_utf8_lossy(line));
    }
    let deep = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    assert_eq!(expect_line(deep.as_bytes(), 1 << 20), Expect::Unsure(None));
    assert_eq!(expect_line(&[b'{'; 101], 100), Expect::NullError);
    assert_eq!(expect_line(br#"{"id":"a","method":"cancel","x":"y"}"#, 36), Expect::Answer("\"a\"".into()));
    assert_eq!(expect_line(br#"{"id":"a","method":"cancel","x":"yy"}"#, 36), Expect::NullError);
}
