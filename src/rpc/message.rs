//! JSON-RPC 2.0 envelopes and the classification of one inbound line (`docs/protocol.md` §2).
//!
//! Generic: nothing here knows a method name. Which methods exist, and what an unknown one is
//! answered, is each front end's method table. Divergence from the reference, on purpose:
//! integer ids are accepted and echoed with their type (and `1` and `"1"` are different ids).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error_code::{ErrorCode, ErrorObject};

/// A JSON-RPC id: a string or an integer, echoed back with the same type.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RequestId {
    Int(i64),
    Str(String),
}

impl std::fmt::Display for RequestId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RequestId::Int(i) => write!(f, "{i}"),
            RequestId::Str(s) => f.write_str(s),
        }
    }
}

/// What one inbound line turned out to be.
#[derive(Debug, PartialEq)]
pub enum Incoming {
    Request {
        id: RequestId,
        method: String,
        params: Option<Value>,
    },
    Notification {
        method: String,
        params: Option<Value>,
    },
    Response {
        id: RequestId,
        outcome: Result<Value, ErrorObject>,
    },
    /// Answer at once with this error (id null unless the request's id is known).
    Reject {
        id: Option<RequestId>,
        error: ErrorObject,
    },
    /// Nothing to do (e.g. `{}`, an unknown notification).
    Ignore,
}

fn invalid_request() -> Incoming {
    Incoming::Reject { id: None, error: ErrorCode::InvalidRequest.with_message("Invalid request") }
}

/// Classifies one line, already stripped of its terminator.
pub fn classify(line: &[u8]) -> Incoming {
    let text = String::from_utf8_lossy(line);
    let text = text.trim();
    let parsed = serde_json::from_str(text).or_else(|e| match replace_lone_surrogates(text) {
        Some(fixed) => serde_json::from_str(&fixed),
        None => Err(e),
    });
    let value: Value = match parsed {
        Ok(v) => v,
        Err(_) => {
            return Incoming::Reject { id: None, error: ErrorCode::ParseError.with_message("Invalid JSON format") };
        }
    };
    let Value::Object(mut obj) = value else { return invalid_request() };

    if let Some(v) = obj.get("jsonrpc")
        && v.as_str() != Some("2.0")
    {
        return invalid_request();
    }
    let method_present = obj.contains_key("method");
    let method = match obj.remove("method") {
        None | Some(Value::Null) => None,
        Some(Value::String(m)) => Some(m),
        Some(_) => return invalid_request(),
    };
    let id = match obj.remove("id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(RequestId::Str(s)),
        Some(Value::Number(n)) => match n.as_i64() {
            Some(i) => Some(RequestId::Int(i)),
            None => return invalid_request(),
        },
        Some(_) => return invalid_request(),
    };
    let error = match obj.remove("error") {
        None | Some(Value::Null) => None,
        Some(Value::Object(e)) => match parse_error_object(e) {
            Some(e) => Some(e),
            None => return invalid_request(),
        },
        Some(_) => return invalid_request(),
    };

    match (method, id) {
        (None, Some(id)) => {
            if let Some(result) = obj.remove("result") {
                Incoming::Response { id, outcome: Ok(result) }
            } else if let Some(error) = error {
                Incoming::Response { id, outcome: Err(error) }
            } else if method_present {
                Incoming::Reject { id: None, error: ErrorCode::InvalidRequest.with_message("Invalid response") }
            } else {
                Incoming::Ignore
            }
        }
        (None, None) => Incoming::Ignore,
        (Some(method), id) => {
            let params = obj.remove("params");
            match id {
                Some(id) => Incoming::Request { id, method, params },
                None => Incoming::Notification { method, params },
            }
        }
    }
}

/// A lone UTF-16 surrogate escape (`"\ud800"`) is valid JSON text, and Python clients send it
/// (`json.dumps` of a surrogate-escaped file name), but it has no Rust `String` form. Like invalid
/// UTF-8, it becomes U+FFFD. Returns None when there is none to replace.
fn replace_lone_surrogates(text: &str) -> Option<String> {
    fn escape_at(b: &[u8], i: usize) -> Option<u16> {
        let hex = b.get(i..i + 6)?;
        if hex[0] != b'\\' || hex[1] != b'u' {
            return None;
        }
        u16::from_str_radix(std::str::from_utf8(&hex[2..]).ok()?, 16).ok()
    }
    let is_high = |u: u16| (0xD800..0xDC00).contains(&u);
    let is_low = |u: u16| (0xDC00..0xE000).contains(&u);
    let b = text.as_bytes();
    let mut out: Option<String> = None;
    let (mut i, mut copied, mut in_string) = (0, 0, false);
    while i < b.len() {
        match b[i] {
            b'"' => in_string = !in_string,
            b'\\' if in_string => {
                if let Some(u) = escape_at(b, i) {
                    if is_high(u) && escape_at(b, i + 6).is_some_and(is_low) {
                        i += 12;
                        continue;
                    }
                    if is_high(u) || is_low(u) {
                        let o = out.get_or_insert_with(String::new);
                        o.push_str(&text[copied..i]);
                        o.push_str("\\ufffd");
                        i += 6;
                        copied = i;
                        continue;
                    }
                }
                i += 2;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    let mut o = out?;
    o.push_str(&text[copied..]);
    Some(o)
}

fn parse_error_object(mut e: Map<String, Value>) -> Option<ErrorObject> {
    let code = e.get("code")?.as_i64()?;
    let message = e.get("message")?.as_str()?.to_string();
    let data = e.remove("data").unwrap_or(Value::Null);
    Some(ErrorObject { code, message, data })
}

/// `{"jsonrpc":"2.0","id":..,"result":..}`
#[derive(Serialize)]
pub struct ResponseFrame<'a, T: Serialize> {
    pub jsonrpc: &'static str,
    pub id: &'a RequestId,
    pub result: &'a T,
}

/// `{"jsonrpc":"2.0","id":..,"error":{..}}`
#[derive(Serialize)]
pub struct ErrorFrame<'a> {
    pub jsonrpc: &'static str,
    pub id: Option<&'a RequestId>,
    pub error: &'a ErrorObject,
}

/// `{"jsonrpc":"2.0","method":..,"params":{..}}`
#[derive(Serialize)]
pub struct NotificationFrame<'a, T: Serialize> {
    pub jsonrpc: &'static str,
    pub method: &'a str,
    pub params: &'a T,
}

/// `{"jsonrpc":"2.0","method":..,"id":..,"params":{..}}` (a request we send to the client).
#[derive(Serialize)]
pub struct RequestFrame<'a, T: Serialize> {
    pub jsonrpc: &'static str,
    pub method: &'a str,
    pub id: &'a RequestId,
    pub params: &'a T,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reject(line: &str) -> (Option<RequestId>, i64, String) {
        match classify(line.as_bytes()) {
            Incoming::Reject { id, error } => (id, error.code, error.message),
            other => panic!("expected reject for {line}, got {other:?}"),
        }
    }

    #[test]
    fn parse_errors() {
        for line in ["{not-json}", "", "   ", "{\"a\":"] {
            assert_eq!(reject(line), (None, -32700, "Invalid JSON format".into()));
        }
    }

    #[test]
    fn invalid_requests() {
        for line in [
            "[1,2]",
            "\"str\"",
            "42",
            "null",
            "true",
            r#"{"jsonrpc":"2.1","id":"bad"}"#,
            r#"{"jsonrpc":null,"id":"x","method":"prompt"}"#,
            r#"{"jsonrpc":"2.0","id":"r5","error":{"code":"bad"}}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"prompt"}"#,
            r#"{"jsonrpc":"2.0","id":true,"method":"prompt"}"#,
            r#"{"jsonrpc":"2.0","id":"x","method":5}"#,
        ] {
            assert_eq!(reject(line), (None, -32600, "Invalid request".into()), "{line}");
        }
        assert_eq!(reject(r#"{"jsonrpc":"2.0","id":"x","method":null}"#), (None, -32600, "Invalid response".into()));
    }

    #[test]
    fn responses_and_ignores() {
        assert_eq!(
            classify(br#"{"jsonrpc":"2.0","id":"a","result":null}"#),
            Incoming::Response { id: RequestId::Str("a".into()), outcome: Ok(Value::Null) }
        );
        assert!(matches!(
            classify(br#"{"jsonrpc":"2.0","id":"a","error":{"code":1,"message":"m"}}"#),
            Incoming::Response { outcome: Err(ErrorObject { code: 1, .. }), .. }
        ));
        assert_eq!(classify(br#"{"jsonrpc":"2.0","id":"r3"}"#), Incoming::Ignore);
        assert_eq!(classify(b"{}"), Incoming::Ignore);
        assert_eq!(classify(br#"{"jsonrpc":"2.0"}"#), Incoming::Ignore);
    }

    #[test]
    fn methods() {
        // Any method name is a request or notification here; the front end's table decides.
        assert_eq!(
            classify(br#"{"jsonrpc":"2.0","id":"1","method":"nope"}"#),
            Incoming::Request { id: RequestId::Str("1".into()), method: "nope".into(), params: None }
        );
        assert!(matches!(classify(br#"{"jsonrpc":"2.0","method":"nope"}"#), Incoming::Notification { .. }));
        assert_eq!(
            classify(br#"{"jsonrpc":"2.0","id":7,"method":"prompt","params":{"user_input":"x"}}"#),
            Incoming::Request {
                id: RequestId::Int(7),
                method: "prompt".into(),
                params: Some(serde_json::json!({"user_input":"x"}))
            }
        );
        assert!(matches!(classify(br#"{"method":"interrupt"}"#), Incoming::Notification { .. }));
        assert!(matches!(classify(br#"{"id":"","method":"cancel"}"#), Incoming::Request { .. }));
    }

    #[test]
    fn invalid_utf8_is_replaced_not_fatal() {
        assert!(matches!(classify(b"\xff\xfe{"), Incoming::Reject { .. }));
        let mut line = br#"{"jsonrpc":"2.0","id":"u","method":"prompt","params":{"user_input":""#.to_vec();
        line.extend_from_slice(b"\xff\"}}");
        assert!(matches!(classify(&line), Incoming::Request { .. }));
    }

    #[test]
    fn lone_surrogate_escapes_become_replacement_characters() {
        let line = br#"{"id":"s","method":"prompt","params":{"user_input":"a\ud800b\udc00\\ud800\ud83d\ude00"}}"#;
        let Incoming::Request { params, .. } = classify(line) else { panic!("not served") };
        assert_eq!(params.unwrap()["user_input"], "a\u{fffd}b\u{fffd}\\ud800\u{1f600}");
        // Keys too, and nothing else changes meaning: still-invalid JSON stays a parse error.
        assert!(matches!(classify(br#"{"id":"k","method":"cancel","\udfff":1}"#), Incoming::Request { .. }));
        assert_eq!(reject(r#"{"id":"x","method":"cancel","a":"\ud800}"#).1, -32700);
    }

    #[test]
    fn frames_serialize_in_spec_key_order() {
        let id = RequestId::Int(3);
        let err = ErrorObject { code: -32000, message: "No agent turn is in progress".into(), data: Value::Null };
        assert_eq!(
            serde_json::to_string(&ErrorFrame { jsonrpc: "2.0", id: Some(&id), error: &err }).unwrap(),
            r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32000,"message":"No agent turn is in progress","data":null}}"#
        );
        assert_eq!(
            serde_json::to_string(&ResponseFrame {
                jsonrpc: "2.0",
                id: &RequestId::Str("p".into()),
                result: &serde_json::json!({})
            })
            .unwrap(),
            r#"{"jsonrpc":"2.0","id":"p","result":{}}"#
        );
    }
}
