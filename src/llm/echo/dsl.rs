//! The echo DSL (`docs/scripted-echo.md` §4): one line per streamed part, plus `id` and `usage` lines
//! that describe the whole message.
//!
//! Invariants: parsing is all-or-nothing — the first bad line fails the whole script with the
//! reference's wire-visible text (as a non-retryable `ChatError::Other`), so no fragment of a bad
//! script is ever streamed; an `error:` line (`docs/scripted-echo.md` §5.1) fails the call the same
//! way, with the simulated error it describes, and lines after it are not read. `ParsedScript::events` holds only parts (`Content`, `ToolCall`,
//! `ToolCallPart`), one per DSL line, in script order; id and usage are kept apart. Line numbers
//! count every line Python's `str.splitlines()` yields, skipped ones included.

use std::borrow::Cow;

use crate::llm::{ChatError, StreamEvent};
use crate::protocol::{ContentPart, MediaUrl, TokenUsage, ToolCall, ToolCallPart};

use super::pyjson::{PyInt, PyValue, loads, py_int, to_serde_map};
use crate::llm::pyfmt::{py_repr_str, py_split_whitespace, py_splitlines, py_strip};

/// A script parsed into what a call streams.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ParsedScript {
    /// The parts, in script order: `Content`, `ToolCall` and `ToolCallPart` events only.
    pub events: Vec<StreamEvent>,
    /// From the last `id` line.
    pub message_id: Option<String>,
    /// From the last `usage` line.
    pub usage: Option<TokenUsage>,
}

impl ParsedScript {
    /// True when every part is a `ToolCallPart` with no `ToolCall` before it: the merged message
    /// would be empty (orphan fragments are dropped), which the reference reports as a retryable
    /// empty response. Only meaningful for a non-empty script.
    pub fn only_orphan_parts(&self) -> bool {
        self.events.iter().all(|e| matches!(e, StreamEvent::ToolCallPart(_)))
    }
}

fn err(message: String) -> ChatError {
    ChatError::Other(message)
}

/// Parses a whole script; see the module invariants.
pub fn parse_script(script: &str) -> Result<ParsedScript, ChatError> {
    let mut parsed = ParsedScript::default();
    for (index, raw_line) in py_splitlines(script).into_iter().enumerate() {
        let lineno = index + 1;
        let line = py_strip(raw_line);
        // No non-ASCII character lower-cases into ASCII letters of `echo`, so the ASCII test is
        // exactly Python's `line.lower() == "echo"`.
        if line.is_empty() || line.starts_with('#') || line.starts_with("```") || line.eq_ignore_ascii_case("echo") {
            continue;
        }
        let Some((key, payload)) = line.split_once(':') else {
            return Err(err(format!("Invalid echo DSL at line {lineno}: {}", py_repr_str(raw_line))));
        };
        let key = py_strip(key);
        // Lower-casing allocates; the common all-lower-case kind is borrowed (this loop runs once
        // per line of scripts tens of thousands of lines long).
        let kind: Cow<'_, str> = if key.is_ascii() && !key.bytes().any(|b| b.is_ascii_uppercase()) {
            Cow::Borrowed(key)
        } else {
            Cow::Owned(key.to_lowercase())
        };
        let payload = payload.strip_prefix(' ').unwrap_or(payload);
        let event = match kind.as_ref() {
            "id" => {
                parsed.message_id = Some(strip_quotes(py_strip(payload)).to_string());
                continue;
            }
            "usage" => {
                parsed.usage = Some(parse_usage(payload)?);
                continue;
            }
            "text" => StreamEvent::Content(ContentPart::text(strip_quotes(payload))),
            "think" => StreamEvent::Content(ContentPart::think(strip_quotes(payload))),
            "image_url" => StreamEvent::Content(ContentPart::ImageUrl { image_url: parse_media(&kind, payload)? }),
            "audio_url" => StreamEvent::Content(ContentPart::AudioUrl { audio_url: parse_media(&kind, payload)? }),
            "video_url" => StreamEvent::Content(ContentPart::VideoUrl { video_url: parse_media(&kind, payload)? }),
            "tool_call" => StreamEvent::ToolCall(parse_tool_call(payload, lineno, raw_line)?),
            "tool_call_part" => StreamEvent::ToolCallPart(parse_tool_call_part(payload, lineno)?),
            "error" => return Err(super::simulated::simulated_error(payload, lineno, raw_line)),
            _ => {
                return Err(err(format!("Unknown echo DSL kind '{kind}' at line {lineno}: {}", py_repr_str(raw_line))));
            }
        };
        parsed.events.push(event);
    }
    Ok(parsed)
}

/// Removes one pair of matching surrounding quotes (`'` or `"`), without unescaping.
pub fn strip_quotes(s: &str) -> &str {
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) if bytes.len() >= 2 && first == last && (first == b'\'' || first == b'"') => {
            &s[1..s.len() - 1]
        }
        _ => s,
    }
}

/// A loosely typed scalar: empty / `null` / `none` → None, JSON when it parses, else the
/// quote-stripped text.
pub fn parse_value(s: &str) -> PyValue {
    let s = py_strip(s);
    if s.is_empty() || s.eq_ignore_ascii_case("null") || s.eq_ignore_ascii_case("none") {
        return PyValue::None;
    }
    loads(s).unwrap_or_else(|| PyValue::Str(strip_quotes(s).to_string()))
}

/// A JSON object, or `key=value` tokens separated by whitespace and/or commas.
pub fn parse_mapping(s: &str, ctx: &str) -> Result<Vec<(String, PyValue)>, ChatError> {
    let text = py_strip(s);
    match loads(text) {
        Some(PyValue::Dict(items)) => return Ok(items),
        Some(PyValue::None) | None => {}
        Some(other) => return Err(err(format!("{ctx} payload must be an object, got {}", other.repr()))),
    }
    let spaced = text.replace(',', " ");
    let mut items: Vec<(String, PyValue)> = Vec::new();
    for token in py_split_whitespace(&spaced) {
        let Some((key, value)) = token.split_once('=') else {
            return Err(err(format!("Invalid token '{token}' in {ctx} payload.")));
        };
        let key = py_strip(key).to_string();
        let value = parse_value(value);
        match items.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => items.push((key, value)),
        }
    }
    if items.is_empty() {
        return Err(err(format!("{ctx} payload cannot be empty.")));
    }
    Ok(items)
}

fn lookup<'a>(items: &'a [(String, PyValue)], key: &str) -> Option<&'a PyValue> {
    items.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

fn parse_usage(payload: &str) -> Result<TokenUsage, ChatError> {
    let items = parse_mapping(payload, "usage")?;
    let field = |key: &str| -> Result<u64, ChatError> {
        match lookup(&items, key) {
            None => Ok(0),
            Some(value) => match py_int(value) {
                // Python keeps any int; the wire type is unsigned, so out-of-range values clamp.
                PyInt::Value(n) => Ok(u64::try_from(n.max(0)).unwrap_or(u64::MAX)),
                PyInt::Invalid => Err(err(format!("Usage field '{key}' must be an integer, got {}", value.repr()))),
            },
        }
    };
    Ok(TokenUsage {
        input_other: field("input_other")?,
        output: field("output")?,
        input_cache_read: field("input_cache_read")?,
        input_cache_creation: field("input_cache_creation")?,
    })
}

fn parse_media(kind: &str, payload: &str) -> Result<MediaUrl, ChatError> {
    match parse_value(payload) {
        PyValue::Str(url) => Ok(MediaUrl::new(url)),
        value @ PyValue::Dict(_) => {
            let Some(PyValue::Str(url)) = value.get("url") else {
                return Err(err(format!("{kind} requires a url field, got {}", value.repr())));
            };
            let id = match value.get("id") {
                None | Some(PyValue::None) => None,
                Some(PyValue::Str(id)) => Some(id.clone()),
                Some(_) => return Err(err(format!("{kind} id must be a string when provided."))),
            };
            Ok(MediaUrl { url: url.clone(), id })
        }
        other => Err(err(format!("{kind} expects url string or object, got {}", other.repr()))),
    }
}

fn parse_tool_call(payload: &str, lineno: usize, raw_line: &str) -> Result<ToolCall, ChatError> {
    let items = parse_mapping(payload, "tool_call")?;
    let function = match lookup(&items, "function") {
        Some(f @ PyValue::Dict(_)) => Some(f),
        _ => None,
    };
    let from_function = |key: &str| function.and_then(|f| f.get(key));
    let id = lookup(&items, "id");
    let mut name = lookup(&items, "name");
    if !name.is_some_and(PyValue::is_truthy) && function.is_some() {
        name = from_function("name");
    }
    let (Some(PyValue::Str(id)), Some(PyValue::Str(name))) = (id, name) else {
        return Err(err(format!("tool_call requires string id and name at line {lineno}: {}", py_repr_str(raw_line))));
    };
    let mut arguments = lookup(&items, "arguments");
    if arguments.is_none_or(PyValue::is_none) {
        arguments = from_function("arguments");
    }
    let arguments = match arguments {
        None | Some(PyValue::None) => None,
        Some(PyValue::Str(a)) => Some(a.clone()),
        Some(other) => {
            return Err(err(format!(
                "tool_call.arguments must be a string at line {lineno}, got {}",
                other.type_name()
            )));
        }
    };
    let mut extras = lookup(&items, "extras");
    if extras.is_none_or(PyValue::is_none) {
        extras = from_function("extras");
    }
    let mut call = ToolCall::new(id.clone(), name.clone(), arguments);
    if let Some(PyValue::Dict(extras)) = extras {
        call.extras = Some(to_serde_map(extras));
    }
    Ok(call)
}

fn parse_tool_call_part(payload: &str, lineno: usize) -> Result<ToolCallPart, ChatError> {
    let value = parse_value(payload);
    let part = match &value {
        PyValue::Dict(_) => value.get("arguments_part").unwrap_or(&PyValue::None),
        other => other,
    };
    let arguments_part = match part {
        PyValue::None => None,
        PyValue::Str(s) if s.is_empty() => None,
        PyValue::Str(s) => Some(s.clone()),
        PyValue::List(_) | PyValue::Dict(_) => Some(part.to_compact_json()),
        // Protocol 1.10 ends the turn with -32603 `ValidationError: …` (`docs/scripted-echo.md` §5.3).
        other => {
            return Err(ChatError::Invalid(format!(
                "tool_call_part.arguments_part must be a string at line {lineno}, got {}",
                other.type_name()
            )));
        }
    };
    Ok(ToolCallPart { arguments_part })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(script: &str) -> ParsedScript {
        parse_script(script).unwrap()
    }

    fn error(script: &str) -> String {
        match parse_script(script) {
            Err(ChatError::Other(message)) => message,
            other => panic!("expected a provider error for {script:?}, got {other:?}"),
        }
    }

    fn text(t: &str) -> StreamEvent {
        StreamEvent::Content(ContentPart::text(t))
    }

    fn part(p: Option<&str>) -> StreamEvent {
        StreamEvent::ToolCallPart(ToolCallPart { arguments_part: p.map(str::to_string) })
    }

    fn usage(input_other: u64, output: u64, input_cache_read: u64, input_cache_creation: u64) -> TokenUsage {
        TokenUsage { input_other, output, input_cache_read, input_cache_creation }
    }

    #[test]
    fn hello_wire_example() {
        let p = parse("id: scripted-1\nusage: {\"input_other\": 5, \"output\": 2}\ntext: Hello wire");
        assert_eq!(p.events, vec![text("Hello wire")]);
        assert_eq!(p.message_id.as_deref(), Some("scripted-1"));
        assert_eq!(p.usage, Some(usage(5, 2, 0, 0)));
    }

    #[test]
    fn tool_call_part_streaming_example() {
        let p = parse(concat!(
            "text: start\n",
            "tool_call: {\"id\": \"tc-1\", \"name\": \"SetTodoList\", \"arguments\": null}\n",
            "tool_call_part: {\"arguments_part\": \"{\"}\n",
            "tool_call_part: {\"arguments_part\": \"\\\"todos\\\":[{\\\"title\\\":\\\"a\\\",\\\"status\\\":\\\"pending\\\"}]\"}\n",
            "tool_call_part: {\"arguments_part\": \"}\"}\n",
            "tool_call_part:\n",
        ));
        assert_eq!(
            p.events,
            vec![
                text("start"),
                StreamEvent::ToolCall(ToolCall::new("tc-1", "SetTodoList", None)),
                part(Some("{")),
                part(Some("\"todos\":[{\"title\":\"a\",\"status\":\"pending\"}]")),
                part(Some("}")),
                part(None),
            ]
        );
        assert_eq!((p.message_id, p.usage), (None, None));
    }

    #[test]
    fn key_value_usage() {
        let p = parse("usage: input_other=10 output=5 input_cache_read=3\ntext: x");
        assert_eq!(p.usage, Some(usage(10, 5, 3, 0)));
        let p = parse("usage: input_other=1.7, output='3',input_cache_creation=\"1_000\" other=zzz\ntext: x");
        assert_eq!(p.usage, Some(usage(1, 3, 0, 1000)));
        let p = parse("usage: {\"input_other\": true, \"output\": \"4\", \"input_cache_read\": -2.9}\ntext: x");
        assert_eq!(p.usage, Some(usage(1, 4, 0, 0)));
        let p = parse("usage: output=1\nusage: output=2\ntext: x");
        assert_eq!(p.usage, Some(usage(0, 2, 0, 0)), "last one wins");
    }

    #[test]
    fn usage_errors() {
        assert_eq!(error("usage: null"), "Invalid token 'null' in usage payload.");
        assert_eq!(error("usage:"), "usage payload cannot be empty.");
        assert_eq!(error("usage: ,, ,"), "usage payload cannot be empty.");
        assert_eq!(error("usage: 5"), "usage payload must be an object, got 5");
        assert_eq!(error("usage: [1, 2]"), "usage payload must be an object, got [1, 2]");
        assert_eq!(error("usage: \"x\""), "usage payload must be an object, got 'x'");
        assert_eq!(error("usage: true"), "usage payload must be an object, got True");
        assert_eq!(error("usage: NaN"), "usage payload must be an object, got nan");
        assert_eq!(error("usage: input_other=5 output"), "Invalid token 'output' in usage payload.");
        assert_eq!(error("usage: output=abc"), "Usage field 'output' must be an integer, got 'abc'");
        assert_eq!(error("usage: output="), "Usage field 'output' must be an integer, got None");
        assert_eq!(error("usage: output=none"), "Usage field 'output' must be an integer, got None");
        assert_eq!(error("usage: {\"output\": [1]}"), "Usage field 'output' must be an integer, got [1]");
        assert_eq!(error("usage: {\"output\": \"1.5\"}"), "Usage field 'output' must be an integer, got '1.5'");
        assert_eq!(error("usage: output=NaN"), "Usage field 'output' must be an integer, got nan");
        assert_eq!(error("usage: input_other=x output=y"), "Usage field 'input_other' must be an integer, got 'x'");
    }

    #[test]
    fn text_payloads() {
        assert_eq!(parse("text:  two spaces ").events, vec![text(" two spaces")]);
        assert_eq!(parse("text:  world").events, vec![text(" world")]);
        assert_eq!(parse("text:x").events, vec![text("x")]);
        assert_eq!(parse("text:").events, vec![text("")]);
        assert_eq!(parse("TEXT: x").events, vec![text("x")]);
        assert_eq!(parse(" Text : x").events, vec![text("x")]);
        assert_eq!(parse("text: \"quoted\"").events, vec![text("quoted")]);
        assert_eq!(parse("text: 'a' and 'b'").events, vec![text("a' and 'b")]);
        assert_eq!(parse("text: \"mixed'").events, vec![text("\"mixed'")]);
        assert_eq!(parse("text: \"").events, vec![text("\"")]);
        assert_eq!(parse("text: a: b: c").events, vec![text("a: b: c")]);
        assert_eq!(parse("text: \\n stays").events, vec![text("\\n stays")]);
        assert_eq!(parse("text: a\ntext: b").events, vec![text("a"), text("b")]);
    }

    #[test]
    fn think_parts_have_no_signature() {
        assert_eq!(
            parse("think: 'hmm'").events,
            vec![StreamEvent::Content(ContentPart::Think { think: "hmm".into(), encrypted: None })]
        );
    }

    #[test]
    fn ids() {
        assert_eq!(parse("id: 'abc'\ntext: x").message_id.as_deref(), Some("abc"));
        assert_eq!(parse("id: a\nid:  b \ntext: x").message_id.as_deref(), Some("b"));
        assert_eq!(parse("ID:\ntext: x").message_id.as_deref(), Some(""));
    }

    #[test]
    fn skipped_lines_and_line_numbers() {
        let p = parse("```\n# comment\n\n   \nECHO\necho\n```text\n  #x\ntext: ok\n```");
        assert_eq!(p.events, vec![text("ok")]);
        assert_eq!(error("# c\n\n```\nbad"), "Invalid echo DSL at line 4: 'bad'");
        assert_eq!(error("text: a\r\ntext: b\rx\x0by"), "Invalid echo DSL at line 3: 'x'");
        assert_eq!(error("text: a\u{2028}  oops  "), "Invalid echo DSL at line 2: '  oops  '");
        assert_eq!(error("echo me"), "Invalid echo DSL at line 1: 'echo me'");
    }

    #[test]
    fn invalid_lines_show_python_reprs() {
        assert_eq!(error("bad line without colon"), "Invalid echo DSL at line 1: 'bad line without colon'");
        assert_eq!(error("hi"), "Invalid echo DSL at line 1: 'hi'");
        assert_eq!(error("it's bad"), "Invalid echo DSL at line 1: \"it's bad\"");
        assert_eq!(error("\tx\\y\t"), "Invalid echo DSL at line 1: '\\tx\\\\y\\t'");
        assert_eq!(error("nope: x"), "Unknown echo DSL kind 'nope' at line 1: 'nope: x'");
        assert_eq!(error("text: ok\n  Foo Bar : x "), "Unknown echo DSL kind 'foo bar' at line 2: '  Foo Bar : x '");
        assert_eq!(error(": x"), "Unknown echo DSL kind '' at line 1: ': x'");
        assert_eq!(error("ΤΕΧΤ: x"), "Unknown echo DSL kind 'τεχτ' at line 1: 'ΤΕΧΤ: x'");
        assert_eq!(error("ÉCHO"), "Invalid echo DSL at line 1: 'ÉCHO'");
    }

    #[test]
    fn media_parts() {
        let media = |url: &str, id: Option<&str>| MediaUrl { url: url.into(), id: id.map(str::to_string) };
        assert_eq!(
            parse(concat!(
                "image_url: https://x/y.png\n",
                "audio_url: {\"url\": \"a.mp3\", \"id\": \"a1\"}\n",
                "video_url: \"v.mp4\"\n",
                "image_url: {\"url\": \"i\", \"id\": null}\n",
            ))
            .events,
            vec![
                StreamEvent::Content(ContentPart::ImageUrl { image_url: media("https://x/y.png", None) }),
                StreamEvent::Content(ContentPart::AudioUrl { audio_url: media("a.mp3", Some("a1")) }),
                StreamEvent::Content(ContentPart::VideoUrl { video_url: media("v.mp4", None) }),
                StreamEvent::Content(ContentPart::ImageUrl { image_url: media("i", None) }),
            ]
        );
    }

    #[test]
    fn media_errors() {
        assert_eq!(error("image_url: {\"url\": 5}"), "image_url requires a url field, got {'url': 5}");
        assert_eq!(error("audio_url: {}"), "audio_url requires a url field, got {}");
        assert_eq!(error("video_url: {\"url\": \"v\", \"id\": 3}"), "video_url id must be a string when provided.");
        assert_eq!(error("image_url:"), "image_url expects url string or object, got None");
        assert_eq!(error("image_url: 5"), "image_url expects url string or object, got 5");
        assert_eq!(error("image_url: [\"a\"]"), "image_url expects url string or object, got ['a']");
        assert_eq!(error("image_url: false"), "image_url expects url string or object, got False");
        assert_eq!(error("IMAGE_URL: 1.50"), "image_url expects url string or object, got 1.5");
    }

    #[test]
    fn tool_calls() {
        let call = |events: Vec<StreamEvent>| match events.as_slice() {
            [StreamEvent::ToolCall(call)] => call.clone(),
            other => panic!("{other:?}"),
        };
        let c = call(parse("tool_call: {\"id\": \"tc-1\", \"name\": \"Shell\", \"arguments\": \"{\\\"command\\\": \\\"echo ok\\\"}\"}").events);
        assert_eq!(c, ToolCall::new("tc-1", "Shell", Some("{\"command\": \"echo ok\"}".into())));

        let c = call(parse("tool_call: id=tc-2 name=Shell arguments='{\"a\":1}'").events);
        assert_eq!(c, ToolCall::new("tc-2", "Shell", Some("{\"a\":1}".into())));

        let c = call(parse("tool_call: id=tc-3, name=Read").events);
        assert_eq!(c, ToolCall::new("tc-3", "Read", None));

        let c = call(
            parse("tool_call: {\"id\": \"x\", \"name\": \"\", \"function\": {\"name\": \"F\", \"arguments\": \"{}\", \"extras\": {\"k\": 1}}}")
                .events,
        );
        let mut want = ToolCall::new("x", "F", Some("{}".into()));
        want.extras = Some(json!({"k": 1}).as_object().cloned().unwrap_or_default());
        assert_eq!(c, want);

        let c = call(
            parse("tool_call: {\"id\": \"x\", \"name\": \"N\", \"arguments\": \"a\", \"extras\": {\"t\": [1]}, \"function\": {\"name\": \"F\", \"arguments\": \"b\", \"extras\": {\"k\": 1}}}")
                .events,
        );
        let mut want = ToolCall::new("x", "N", Some("a".into()));
        want.extras = Some(json!({"t": [1]}).as_object().cloned().unwrap_or_default());
        assert_eq!(c, want);

        let c = call(parse("tool_call: {\"id\": \"x\", \"name\": \"N\", \"extras\": [1]}").events);
        assert_eq!(c.extras, None, "non-object extras are dropped");
        let c = call(parse("tool_call: {\"id\": \"x\", \"name\": \"N\", \"extras\": \"s\", \"function\": {}}").events);
        assert_eq!(c.extras, None);
        let c = call(parse("tool_call: {\"id\": \"\", \"name\": \"\"}").events);
        assert_eq!(c, ToolCall::new("", "", None));
    }

    #[test]
    fn tool_call_errors() {
        let line = "tool_call: {\"id\": 1, \"name\": \"x\"}";
        assert_eq!(error(line), format!("tool_call requires string id and name at line 1: {}", py_repr_str(line)));
        assert_eq!(
            error("text: a\ntool_call: id=x"),
            "tool_call requires string id and name at line 2: 'tool_call: id=x'"
        );
        assert_eq!(
            error("tool_call: {\"id\": \"x\", \"name\": \"\", \"function\": {}}"),
            "tool_call requires string id and name at line 1: 'tool_call: {\"id\": \"x\", \"name\": \"\", \"function\": {}}'"
        );
        assert_eq!(
            error("tool_call: id=x name=y arguments={\"a\":1}"),
            "tool_call.arguments must be a string at line 1, got dict"
        );
        for (value, name) in [("[1]", "list"), ("5", "int"), ("1.5", "float"), ("true", "bool")] {
            assert_eq!(
                error(&format!("text: a\ntool_call: {{\"id\": \"x\", \"name\": \"y\", \"arguments\": {value}}}")),
                format!("tool_call.arguments must be a string at line 2, got {name}")
            );
        }
        assert_eq!(
            error("tool_call: {\"id\": \"x\", \"name\": \"y\", \"function\": {\"arguments\": 2}}"),
            "tool_call.arguments must be a string at line 1, got int"
        );
        assert_eq!(error("tool_call: 5"), "tool_call payload must be an object, got 5");
        assert_eq!(error("tool_call:"), "tool_call payload cannot be empty.");
        assert_eq!(error("tool_call: id"), "Invalid token 'id' in tool_call payload.");
        assert_eq!(
            error("tool_call: id=x name=y arguments='{\"a\":1,\"b\":2}'"),
            "Invalid token '\"b\":2}'' in tool_call payload."
        );
    }

    #[test]
    fn tool_call_parts() {
        assert_eq!(
            parse(concat!(
                "tool_call_part: {\"arguments_part\": \"{\"}\n",
                "tool_call_part: raw text\n",
                "tool_call_part: \"quoted\"\n",
                "tool_call_part: ''\n",
                "tool_call_part: null\n",
                "tool_call_part: {\"other\": 1}\n",
                "tool_call_part: {\"arguments_part\": {\"a\": [1, \"é\"]}}\n",
                "tool_call_part: [1, 2.0]\n",
                "tool_call_part: {\"arguments_part\": \"\"}\n",
                "tool_call_part:\n",
            ))
            .events,
            vec![
                part(Some("{")),
                part(Some("raw text")),
                part(Some("quoted")),
                part(None),
                part(None),
                part(None),
                part(Some("{\"a\":[1,\"\\u00e9\"]}")),
                part(Some("[1,2.0]")),
                part(None),
                part(None),
            ]
        );
    }

    fn simulated(script: &str) -> ChatError {
        parse_script(script).unwrap_err()
    }

    #[test]
    fn scalar_tool_call_parts_are_validation_errors() {
        let invalid = |m: &str| ChatError::Invalid(m.into());
        assert_eq!(
            simulated("tool_call_part: 5"),
            invalid("tool_call_part.arguments_part must be a string at line 1, got int")
        );
        assert_eq!(
            simulated("text: a\ntool_call_part: true"),
            invalid("tool_call_part.arguments_part must be a string at line 2, got bool")
        );
        assert_eq!(
            simulated("tool_call_part: {\"arguments_part\": 1.5}"),
            invalid("tool_call_part.arguments_part must be a string at line 1, got float")
        );
    }

    #[test]
    fn first_error_wins_and_nothing_is_streamed() {
        assert_eq!(error("text: ok\nbad\nnope: x"), "Invalid echo DSL at line 2: 'bad'");
    }

    #[test]
    fn helpers() {
        assert_eq!(strip_quotes("''"), "");
        assert_eq!(strip_quotes("'"), "'");
        assert_eq!(strip_quotes("''x''"), "'x'");
        assert_eq!(strip_quotes("`x`"), "`x`");
        assert_eq!(parse_value("  NONE "), PyValue::None);
        assert_eq!(parse_value("Null"), PyValue::None);
        assert_eq!(parse_value("'5'"), PyValue::Str("5".into()));
        assert_eq!(parse_value("5"), PyValue::Int("5".into()));
        assert!(matches!(parse_value("NaN"), PyValue::Float(f) if f.is_nan()));
        assert_eq!(parse_value("{'a': 1}"), PyValue::Str("{'a': 1}".into()));
        assert_eq!(
            parse_mapping("a=1,b=x=y c=", "ctx").unwrap(),
            vec![
                ("a".into(), PyValue::Int("1".into())),
                ("b".into(), PyValue::Str("x=y".into())),
                ("c".into(), PyValue::None)
            ]
        );
        assert_eq!(parse_mapping("{\"a\": 1}", "ctx").unwrap(), vec![("a".into(), PyValue::Int("1".into()))]);
        assert_eq!(parse_mapping("=1", "ctx").unwrap(), vec![(String::new(), PyValue::Int("1".into()))]);
    }

    #[test]
    fn orphan_detection() {
        assert!(parse("tool_call_part: a\ntool_call_part: b").only_orphan_parts());
        assert!(!parse("tool_call_part: a\ntext: b").only_orphan_parts());
        assert!(!parse("tool_call_part: a\ntool_call: id=x name=y").only_orphan_parts());
    }

    #[test]
    fn fixture_echo_prompt() {
        let p = parse(&super::super::test_fixture("echo-prompt.txt"));
        assert_eq!(p.message_id.as_deref(), Some("echo-42"));
        assert_eq!(p.usage, Some(usage(10, 2, 0, 0)));
        assert_eq!(
            p.events,
            vec![
                StreamEvent::Content(ContentPart::think("thinking...")),
                text("Hello,"),
                text(" world!"),
                StreamEvent::ToolCall(ToolCall::new("call-1", "search", Some("{\"query".into()))),
                part(Some("\": \"what time is")),
                part(Some(" it?\"}")),
            ]
        );
    }

    #[test]
    fn twenty_thousand_lines_parse() {
        let script: String = (0..20_000).map(|i| format!("text: line {i}\n")).collect();
        let p = parse(&script);
        assert_eq!(p.events.len(), 20_000);
        assert_eq!(p.events[19_999], text("line 19999"));
    }
}
