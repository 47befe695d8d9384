//! Claude Code's tool names and permission rules on kiwi's tools (`docs/print-mode.md` C.3):
//! `--allowedTools`, `--disallowedTools`, `--tools` and an agent's `tools` may name Claude's
//! tools (`Bash`, `Read`, `Edit`, …) or kiwi's (`Shell`, `ReadFile`, …), and a rule may carry a
//! pattern: `Bash(git:*)` (a command prefix), `Bash(npm test)` (one command), `Edit(src/**)`
//! (a path glob, relative to the work dir).
//!
//! Invariants: a rule with a pattern matches only calls whose argument matches it (never a call
//! without that argument); names kiwi does not know stay as written (an MCP tool's, say).

use std::path::Path;

use serde_json::Value;

/// Claude Code's name → kiwi's tool.
const CLAUDE_NAMES: &[(&str, &str)] = &[
    ("Bash", "Shell"),
    ("Read", "ReadFile"),
    ("Write", "WriteFile"),
    ("Edit", "StrReplaceFile"),
    ("MultiEdit", "StrReplaceFile"),
    ("Glob", "Glob"),
    ("Grep", "Grep"),
    ("WebFetch", "FetchURL"),
    ("WebSearch", "SearchWeb"),
    ("Task", "Agent"),
    ("TodoWrite", "SetTodoList"),
];

/// kiwi's name for a tool named in Claude's or kiwi's words.
pub fn kiwi_name(name: &str) -> &str {
    CLAUDE_NAMES.iter().find(|(claude, _)| *claude == name).map_or(name, |(_, kiwi)| kiwi)
}

/// One permission rule: a tool, and optionally what its argument must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// kiwi's name of the tool.
    pub tool: String,
    pub pattern: Option<String>,
}

impl Rule {
    /// `Tool` or `Tool(pattern)`.
    pub fn parse(text: &str) -> Self {
        let text = text.trim();
        match text.split_once('(') {
            Some((tool, rest)) if rest.ends_with(')') => Rule {
                tool: kiwi_name(tool.trim()).to_string(),
                pattern: Some(rest[..rest.len() - 1].to_string()).filter(|p| !p.is_empty() && p != "*"),
            },
            _ => Rule { tool: kiwi_name(text).to_string(), pattern: None },
        }
    }

    /// Whether a call of `tool` with `arguments` falls under this rule (`work_dir` for paths).
    pub fn matches(&self, tool: &str, arguments: Option<&Value>, work_dir: Option<&Path>) -> bool {
        if self.tool != tool {
            return false;
        }
        let Some(pattern) = &self.pattern else { return true };
        let arg = |key: &str| arguments.and_then(|a| a.get(key)).and_then(Value::as_str);
        match tool {
            "Shell" => arg("command").is_some_and(|c| command_matches(pattern, c)),
            "FetchURL" => arg("url").is_some_and(|u| url_matches(pattern, u)),
            "SearchWeb" => arg("query").is_some_and(|q| q == pattern),
            _ => arg("path").or_else(|| arg("pattern")).is_some_and(|p| path_matches(pattern, p, work_dir)),
        }
    }
}

/// `git:*` and `git *`: the command is `git` or starts with `git ` (prefix rule); otherwise a glob
/// over the whole command (`*` any text), an exact command when it has no `*`.
fn command_matches(pattern: &str, command: &str) -> bool {
    let command = command.trim();
    if let Some(prefix) = pattern.strip_suffix(":*").or_else(|| pattern.strip_suffix(" *")) {
        return command == prefix || command.strip_prefix(prefix).is_some_and(|rest| rest.starts_with(' '));
    }
    wildcard(pattern, command)
}

/// `domain:example.com`: the URL's host is that domain or below it; else a glob over the URL.
fn url_matches(pattern: &str, url: &str) -> bool {
    if let Some(domain) = pattern.strip_prefix("domain:") {
        let host = url.split_once("://").map_or(url, |(_, rest)| rest).split(['/', ':', '?', '#']).next().unwrap_or("");
        return host == domain || host.ends_with(&format!(".{domain}"));
    }
    wildcard(pattern, url)
}

/// A path glob (`src/**`, `*.md`), relative ones against the work dir.
fn path_matches(pattern: &str, path: &str, work_dir: Option<&Path>) -> bool {
    let absolute = |p: &str| match work_dir {
        Some(dir) if !Path::new(p).is_absolute() => dir.join(p.trim_start_matches("./")).to_string_lossy().into_owned(),
        _ => p.to_string(),
    };
    let Ok(glob) = globset::GlobBuilder::new(&absolute(pattern)).literal_separator(true).build() else {
        return false;
    };
    glob.compile_matcher().is_match(absolute(path))
}

/// `*` stands for any text; everything else is literal.
fn wildcard(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let mut rest = text;
    for (i, part) in parts.iter().enumerate() {
        if i == 0 {
            let Some(after) = rest.strip_prefix(part) else { return false };
            rest = after;
        } else if i == parts.len() - 1 {
            return rest.ends_with(part);
        } else {
            match rest.find(part) {
                Some(at) => rest = &rest[at + part.len()..],
                None => return false,
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn claude_names_map_onto_kiwis() {
        assert_eq!(kiwi_name("Bash"), "Shell");
        assert_eq!(kiwi_name("Edit"), "StrReplaceFile");
        assert_eq!(kiwi_name("WebFetch"), "FetchURL");
        assert_eq!(kiwi_name("Shell"), "Shell");
        assert_eq!(kiwi_name("mcp__calc__add"), "mcp__calc__add");
    }

    #[test]
    fn rules_with_patterns() {
        let git = Rule::parse("Bash(git:*)");
        assert_eq!(git, Rule { tool: "Shell".into(), pattern: Some("git:*".into()) });
        assert!(git.matches("Shell", Some(&json!({"command": "git status"})), None));
        assert!(git.matches("Shell", Some(&json!({"command": "git"})), None));
        assert!(!git.matches("Shell", Some(&json!({"command": "gitx"})), None));
        assert!(!git.matches("Shell", Some(&json!({"command": "rm -rf /"})), None));
        assert!(!git.matches("Shell", None, None), "no argument, no match");
        let exact = Rule::parse("Bash(npm test)");
        assert!(exact.matches("Shell", Some(&json!({"command": "npm test"})), None));
        assert!(!exact.matches("Shell", Some(&json!({"command": "npm test; rm x"})), None));
        let edit = Rule::parse("Edit(src/**)");
        let work = Path::new("/w");
        assert!(edit.matches("StrReplaceFile", Some(&json!({"path": "src/a/b.rs"})), Some(work)));
        assert!(edit.matches("StrReplaceFile", Some(&json!({"path": "/w/src/x.rs"})), Some(work)));
        assert!(!edit.matches("StrReplaceFile", Some(&json!({"path": "docs/x.md"})), Some(work)));
        assert!(!edit.matches("WriteFile", Some(&json!({"path": "src/x.rs"})), Some(work)));
        let all = Rule::parse("Read");
        assert!(all.matches("ReadFile", None, None));
        assert_eq!(Rule::parse("Bash(*)").pattern, None);
        let fetch = Rule::parse("WebFetch(domain:example.com)");
        assert!(fetch.matches("FetchURL", Some(&json!({"url": "https://docs.example.com/a"})), None));
        assert!(!fetch.matches("FetchURL", Some(&json!({"url": "https://example.com.evil.io/"})), None));
    }

    #[test]
    fn wildcards() {
        assert!(wildcard("ls *", "ls -la"));
        assert!(wildcard("*test*", "npm test now"));
        assert!(!wildcard("a*b", "ac"));
    }
}
