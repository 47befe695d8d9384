//! The thread's usage before this turn (spec codex-exec.md §6: `turn.completed.usage` is the
//! thread's running total): summed from the session's own record, so nothing new is stored
//! and a thread continued from wire or ACP counts the same.
//!
//! Invariants: only the main agent's step-end `StatusUpdate`s count (a subagent's come wrapped,
//! and MCP status reports carry no usage); an unreadable line is skipped.

use std::io::BufRead;
use std::path::Path;

use super::events::Usage;
use crate::protocol::TokenUsage;

/// The usage recorded in `wire.jsonl` (zero when there is none).
pub fn recorded(wire: &Path) -> Usage {
    let mut total = Usage::default();
    let Ok(file) = std::fs::File::open(wire) else { return total };
    for line in std::io::BufReader::new(file).lines().map_while(Result::ok) {
        // Cheap filter first: most records are fragments.
        if !line.contains("\"StatusUpdate\"") || !line.contains("token_usage") {
            continue;
        }
        let Ok(record) = serde_json::from_str::<serde_json::Value>(&line) else { continue };
        let message = &record["message"];
        if message["type"] != "StatusUpdate" {
            continue;
        }
        if let Ok(usage) = serde_json::from_value::<TokenUsage>(message["payload"]["token_usage"].clone()) {
            total.add(&usage);
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_the_main_agents_calls() {
        let dir = tempfile::tempdir().unwrap();
        let wire = dir.path().join("wire.jsonl");
        let usage = |i, o, r| {
            format!(
                r#"{{"timestamp":1.0,"message":{{"type":"StatusUpdate","payload":{{"token_usage":{{"input_other":{i},"output":{o},"input_cache_read":{r},"input_cache_creation":0}}}}}}}}"#
            )
        };
        let sub = r#"{"timestamp":1.0,"message":{"type":"SubagentEvent","payload":{"event":{"type":"StatusUpdate","payload":{"token_usage":{"input_other":1000,"output":1}}}}}}"#;
        let lines = [
            "{\"type\":\"metadata\"}".to_string(),
            usage(100, 7, 20),
            sub.to_string(),
            r#"{"timestamp":1.0,"message":{"type":"StatusUpdate","payload":{"token_usage":null}}}"#.to_string(),
            usage(120, 3, 30),
            "not json StatusUpdate token_usage".into(),
        ];
        std::fs::write(&wire, lines.join("\n")).unwrap();
        let total = recorded(&wire);
        assert_eq!((total.input_tokens, total.cached_input_tokens, total.output_tokens), (270, 50, 10));
        assert_eq!(recorded(&dir.path().join("none")), Usage::default());
    }
}
