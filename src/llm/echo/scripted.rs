//! `_scripted_echo`: every call pops the next script of a file-backed FIFO
//! (`docs/scripted-echo.md` §1, §2).
//!
//! Invariants: one provider instance per process holds the only FIFO, so every call of every
//! agent, retry, compaction or sub-turn consumes from it in call order. A call pops its script
//! and advances the turn counter before parsing (a bad script is consumed); exhaustion does not
//! advance the counter, so it repeats the same turn number. The trace callback, when tracing is
//! on, sees each popped script before it is parsed, in turn order (it runs under the FIFO lock).
//! Nothing is printed here: the trace line goes to the caller, who owns stdout.

use std::collections::VecDeque;
use std::fmt;
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

use futures::future::BoxFuture;

use crate::llm::{ChatError, ChatProvider, ChatRequest, ChatStream};

use super::dsl::parse_script;
use super::pyjson::{PyValue, json_str_literal, loads};
use super::stream::into_stream;
use crate::llm::pyfmt::py_strip;

const NO_PARTS: &str = "ScriptedEchoChatProvider DSL produced no streamable parts.";

/// Receives one trace line (`SCRIPTED_ECHO TURN <n>: <json>`, without a line terminator).
pub type TraceFn = Box<dyn Fn(String) + Send + Sync>;

struct Fifo {
    scripts: VecDeque<String>,
    /// Scripts consumed so far.
    turn: usize,
}

pub struct ScriptedEchoProvider {
    fifo: Mutex<Fifo>,
    trace: Option<TraceFn>,
}

impl fmt::Debug for ScriptedEchoProvider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fifo = self.lock();
        f.debug_struct("ScriptedEchoProvider")
            .field("remaining", &fifo.scripts.len())
            .field("turn", &fifo.turn)
            .field("trace", &self.trace.is_some())
            .finish()
    }
}

impl ScriptedEchoProvider {
    /// Builds the provider from the values of `KIMI_SCRIPTED_ECHO_SCRIPTS` and
    /// `KIMI_SCRIPTED_ECHO_TRACE` (the caller reads them from the provider's `env` table or the
    /// process environment). `trace` is kept only when the trace switch is on. The error is the
    /// start-up failure message.
    pub fn from_env_path(
        path_value: Option<String>,
        trace_switch: Option<&str>,
        trace: Option<TraceFn>,
    ) -> Result<Self, String> {
        let home = std::env::var_os("HOME").map(|h| h.to_string_lossy().into_owned());
        let scripts = load_scripts(path_value.as_deref(), home.as_deref())?;
        Ok(Self::from_scripts(scripts, trace.filter(|_| trace_enabled(trace_switch))))
    }

    /// A provider over the given scripts; `trace`, when given, is called for every popped script.
    pub fn from_scripts(scripts: Vec<String>, trace: Option<TraceFn>) -> Self {
        Self { fifo: Mutex::new(Fifo { scripts: scripts.into(), turn: 0 }), trace }
    }

    /// Scripts not consumed yet.
    pub fn remaining(&self) -> usize {
        self.lock().scripts.len()
    }

    fn lock(&self) -> MutexGuard<'_, Fifo> {
        // The FIFO stays consistent even if a trace callback panicked while holding the lock.
        self.fifo.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn pop(&self) -> Result<String, ChatError> {
        let mut fifo = self.lock();
        let Some(script) = fifo.scripts.pop_front() else {
            return Err(ChatError::Other(format!("ScriptedEchoChatProvider exhausted at turn {}.", fifo.turn + 1)));
        };
        fifo.turn += 1;
        if let Some(trace) = &self.trace {
            trace(format!("SCRIPTED_ECHO TURN {}: {}", fifo.turn, json_str_literal(&script)));
        }
        Ok(script)
    }

    fn start(&self) -> Result<ChatStream, ChatError> {
        let script = self.pop()?;
        into_stream(parse_script(&script)?, NO_PARTS)
    }
}

impl ChatProvider for ScriptedEchoProvider {
    fn model_name(&self) -> &str {
        "scripted_echo"
    }

    fn stream<'a>(&'a self, _request: ChatRequest<'a>) -> BoxFuture<'a, Result<ChatStream, ChatError>> {
        Box::pin(async move { self.start() })
    }
}

/// `KIMI_SCRIPTED_ECHO_TRACE` semantics: trimmed, lower-cased, one of `1`, `true`, `yes`, `on`.
pub fn trace_enabled(value: Option<&str>) -> bool {
    value.is_some_and(|v| matches!(v.trim().to_lowercase().as_str(), "1" | "true" | "yes" | "on"))
}

/// Loads the script list from the `KIMI_SCRIPTED_ECHO_SCRIPTS` value; the error is the
/// start-up failure message.
pub fn load_scripts(path_value: Option<&str>, home: Option<&str>) -> Result<Vec<String>, String> {
    let Some(raw) = path_value.filter(|p| !p.is_empty()) else {
        return Err("KIMI_SCRIPTED_ECHO_SCRIPTS is required for _scripted_echo.".into());
    };
    let path = python_path_str(&expand_user(raw, home));
    if !Path::new(&path).exists() {
        return Err(format!("Scripted echo file not found: {path}"));
    }
    let bytes = std::fs::read(&path).map_err(|e| format!("Cannot read scripted echo file {path}: {e}"))?;
    let text = String::from_utf8(bytes).map_err(|e| format!("Scripted echo file {path} is not valid UTF-8: {e}"))?;
    // Python reads the file in text mode, which turns `\r\n` and `\r` into `\n`.
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    match loads(&text) {
        Some(PyValue::List(items)) => items
            .into_iter()
            .map(|item| match item {
                PyValue::Str(s) => Ok(s),
                _ => Err("Scripted echo JSON must be an array of strings.".to_string()),
            })
            .collect(),
        Some(_) => Err("Scripted echo JSON must be an array of strings.".into()),
        None => {
            let scripts: Vec<String> =
                text.split("\n---\n").map(py_strip).filter(|chunk| !chunk.is_empty()).map(str::to_string).collect();
            if scripts.is_empty() {
                return Err(
                    "Scripted echo file must be a JSON array of strings or a text file split by '\\n---\\n'.".into()
                );
            }
            Ok(scripts)
        }
    }
}

/// `os.path.expanduser` for `~` and `~/…` (a `~user` prefix is left as is).
fn expand_user(path: &str, home: Option<&str>) -> String {
    match (path.strip_prefix('~'), home) {
        (Some(rest), Some(home)) if rest.is_empty() || rest.starts_with('/') => {
            let home = home.trim_end_matches('/');
            format!("{}{rest}", if home.is_empty() { "/" } else { home }).replacen("//", "/", 1)
        }
        _ => path.to_string(),
    }
}

/// `str(pathlib.PurePosixPath(path))`: repeated slashes collapse (a leading `//` is kept), `.`
/// components and a trailing slash disappear. The reference prints the path in this form.
fn python_path_str(path: &str) -> String {
    let root = if path.starts_with("//") && !path.starts_with("///") {
        "//"
    } else if path.starts_with('/') {
        "/"
    } else {
        ""
    };
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    if root.is_empty() && parts.is_empty() {
        return ".".into();
    }
    format!("{root}{}", parts.join("/"))
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;
    use std::sync::Arc;

    use futures::StreamExt as _;
    use futures::executor::block_on;

    use super::*;
    use crate::llm::StreamEvent;
    use crate::protocol::{ContentPart, TokenUsage, ToolCall, ToolCallPart};

    type Items = Vec<Result<StreamEvent, ChatError>>;

    fn call(provider: &ScriptedEchoProvider) -> Result<Items, ChatError> {
        let request = ChatRequest { system_prompt: "", tools: &[], history: &[] };
        let stream = block_on(provider.stream(request))?;
        Ok(block_on(stream.collect::<Vec<_>>()))
    }

    fn call_error(provider: &ScriptedEchoProvider) -> String {
        match call(provider) {
            Err(ChatError::Other(message)) => message,
            other => panic!("{other:?}"),
        }
    }

    fn provider(scripts: &[&str]) -> ScriptedEchoProvider {
        ScriptedEchoProvider::from_scripts(scripts.iter().map(|s| s.to_string()).collect(), None)
    }

    fn temp_file(content: &[u8]) -> tempfile::NamedTempFile {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(content).unwrap();
        file
    }

    fn load(content: &str) -> Result<Vec<String>, String> {
        let file = temp_file(content.as_bytes());
        load_scripts(file.path().to_str(), None)
    }

    #[test]
    fn model_name() {
        assert_eq!(provider(&[]).model_name(), "scripted_echo");
    }

    #[test]
    fn exhaustion_repeats_the_same_turn() {
        let p = provider(&["text: one"]);
        assert!(call(&p).is_ok());
        assert_eq!(call_error(&p), "ScriptedEchoChatProvider exhausted at turn 2.");
        assert_eq!(call_error(&p), "ScriptedEchoChatProvider exhausted at turn 2.");
        let empty = provider(&[]);
        assert_eq!(call_error(&empty), "ScriptedEchoChatProvider exhausted at turn 1.");
        assert_eq!(call_error(&empty), "ScriptedEchoChatProvider exhausted at turn 1.");
    }

    #[test]
    fn bad_scripts_are_consumed() {
        let p = provider(&["bad", "id: only\nusage: output=1", "tool_call_part: x", "text: ok"]);
        assert_eq!(call_error(&p), "Invalid echo DSL at line 1: 'bad'");
        assert_eq!(call_error(&p), "ScriptedEchoChatProvider DSL produced no streamable parts.");
        assert_eq!(
            call(&p).unwrap(),
            vec![
                Ok(StreamEvent::ToolCallPart(ToolCallPart { arguments_part: Some("x".into()) })),
                Err(ChatError::EmptyResponse)
            ]
        );
        assert_eq!(call(&p).unwrap(), vec![Ok(StreamEvent::Content(ContentPart::text("ok")))]);
        assert_eq!(call_error(&p), "ScriptedEchoChatProvider exhausted at turn 5.");
        assert_eq!(p.remaining(), 0);
    }

    #[test]
    fn unpolled_calls_consume_nothing() {
        let p = provider(&["text: a"]);
        let request = ChatRequest { system_prompt: "", tools: &[], history: &[] };
        drop(p.stream(request));
        assert_eq!(p.remaining(), 1);
    }

    #[test]
    fn trace_sees_each_popped_script_in_order() {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        let trace: TraceFn = Box::new(move |line| sink.lock().unwrap().push(line));
        let p =
            ScriptedEchoProvider::from_scripts(vec!["text: héllo \"x\"\nbad".into(), "text: b".into()], Some(trace));
        assert!(call(&p).is_err());
        assert!(call(&p).is_ok());
        assert!(call(&p).is_err());
        assert_eq!(
            *lines.lock().unwrap(),
            vec![
                "SCRIPTED_ECHO TURN 1: \"text: h\\u00e9llo \\\"x\\\"\\nbad\"".to_string(),
                "SCRIPTED_ECHO TURN 2: \"text: b\"".to_string(),
            ]
        );
    }

    #[test]
    fn trace_switch_values() {
        for on in ["1", "true", " TRUE ", "yes", "On\n"] {
            assert!(trace_enabled(Some(on)), "{on:?}");
        }
        for off in ["", "0", "false", "no", "off", "y", "2"] {
            assert!(!trace_enabled(Some(off)), "{off:?}");
        }
        assert!(!trace_enabled(None));
    }

    #[test]
    fn fixture_scripts_play_the_expected_turns() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/llm/scripted-echo-scripts.json");
        let scripts = load_scripts(Some(dir), None).unwrap();
        let p = ScriptedEchoProvider::from_scripts(scripts, None);
        assert_eq!(
            call(&p).unwrap(),
            vec![
                Ok(StreamEvent::Content(ContentPart::think("I should look at the directory."))),
                Ok(StreamEvent::Content(ContentPart::text("Checking."))),
                Ok(StreamEvent::ToolCall(ToolCall::new("tc-1", "Shell", Some("{\"command\": ".into())))),
                Ok(StreamEvent::ToolCallPart(ToolCallPart { arguments_part: Some("\"ls\"}".into()) })),
                Ok(StreamEvent::MessageId("scripted-1".into())),
                Ok(StreamEvent::Usage(TokenUsage {
                    input_other: 18,
                    output: 3,
                    input_cache_read: 0,
                    input_cache_creation: 0
                })),
            ]
        );
        assert_eq!(
            call(&p).unwrap(),
            vec![
                Ok(StreamEvent::Content(ContentPart::text("Done, two files found."))),
                Ok(StreamEvent::MessageId("scripted-2".into())),
                Ok(StreamEvent::Usage(TokenUsage {
                    input_other: 40,
                    output: 5,
                    input_cache_read: 12,
                    input_cache_creation: 0
                })),
            ]
        );
        assert_eq!(call_error(&p), "ScriptedEchoChatProvider exhausted at turn 3.");
    }

    #[test]
    fn missing_variable() {
        for value in [None, Some("")] {
            assert_eq!(
                load_scripts(value, None).unwrap_err(),
                "KIMI_SCRIPTED_ECHO_SCRIPTS is required for _scripted_echo."
            );
        }
    }

    #[test]
    fn missing_file_reports_the_expanded_path() {
        assert_eq!(
            load_scripts(Some("/nonexistent-kiwi//dir/./x.json"), None).unwrap_err(),
            "Scripted echo file not found: /nonexistent-kiwi/dir/x.json"
        );
        assert_eq!(
            load_scripts(Some("~/nope.json"), Some("/home/someone")).unwrap_err(),
            "Scripted echo file not found: /home/someone/nope.json"
        );
        assert_eq!(
            load_scripts(Some("~nobody-kiwi/x"), Some("/h")).unwrap_err(),
            "Scripted echo file not found: ~nobody-kiwi/x"
        );
    }

    #[test]
    fn tilde_expands_to_home() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("s.json"), "[\"text: a\"]").unwrap();
        let home = dir.path().to_str().unwrap();
        assert_eq!(load_scripts(Some("~/s.json"), Some(home)).unwrap(), vec!["text: a"]);
        assert_eq!(load_scripts(Some("~/s.json"), Some(&format!("{home}/"))).unwrap(), vec!["text: a"]);
        assert_eq!(expand_user("~", Some("/h")), "/h");
        assert_eq!(expand_user("~/x", Some("/")), "/x");
        assert_eq!(expand_user("~/x", None), "~/x");
    }

    #[test]
    fn json_files() {
        assert_eq!(load("[\"a\", \"\", \"text: x\\ny\"]").unwrap(), vec!["a", "", "text: x\ny"]);
        assert_eq!(load(" [] \n").unwrap(), Vec::<String>::new());
        for bad in ["5", "[1]", "\"x\"", "{}", "null", "[\"a\", null]", "NaN", "[[\"a\"]]"] {
            assert_eq!(load(bad).unwrap_err(), "Scripted echo JSON must be an array of strings.", "{bad}");
        }
    }

    #[test]
    fn text_files() {
        assert_eq!(
            load("text: a\n---\n\n  text: b\ntext: c  \n---\n\n---\n---\ntext: d\n").unwrap(),
            vec!["text: a", "text: b\ntext: c", "---\ntext: d"],
            "separators do not overlap"
        );
        assert_eq!(load("text: a\r\n---\r\ntext: b").unwrap(), vec!["text: a", "text: b"]);
        assert_eq!(load("text: a\n--- \ntext: b").unwrap(), vec!["text: a\n--- \ntext: b"]);
        assert_eq!(load("[\"unterminated").unwrap(), vec!["[\"unterminated"]);
        let message = "Scripted echo file must be a JSON array of strings or a text file split by '\\n---\\n'.";
        for empty in ["", "   \n", "\n---\n", " \n---\n \n---\n"] {
            assert_eq!(load(empty).unwrap_err(), message, "{empty:?}");
        }
        assert!(message.contains(r"'\n---\n'"));
    }

    #[test]
    fn unreadable_files_fail_at_start_up() {
        let dir = tempfile::tempdir().unwrap();
        assert!(load_scripts(dir.path().to_str(), None).is_err());
        let file = temp_file(b"text: \xff");
        assert!(load_scripts(file.path().to_str(), None).unwrap_err().contains("not valid UTF-8"));
    }

    #[test]
    fn python_path_strings() {
        assert_eq!(python_path_str("/a//b/./c/"), "/a/b/c");
        assert_eq!(python_path_str("//a/b"), "//a/b");
        assert_eq!(python_path_str("///a"), "/a");
        assert_eq!(python_path_str("a/../b"), "a/../b");
        assert_eq!(python_path_str("./"), ".");
        assert_eq!(python_path_str("/"), "/");
    }
}
