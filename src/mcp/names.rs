//! Which MCP tool names kiwi offers to the model (`docs/mcp.md`, "Tool names").
//!
//! MCP tools keep their plain names, as the reference offers them (no `mcp__<server>__` prefix),
//! but a name that is kiwi's own built-in tool's is refused, whether or not this agent offers
//! that built-in: approvals are decided by tool name (Claude's `acceptEdits` for `WriteFile`,
//! `--allowedTools Shell`, a session's "approve for session"), and a server must not inherit
//! them by naming its tool like one (the reference lets the MCP tool replace the built-in).
//! Names a model API would refuse, or that could hide something in a log or an approval card
//! (spaces, control characters), are refused too.

use crate::tools::builtin;

/// The longest tool name offered (the common limit of model APIs' function names).
pub const NAME_MAX: usize = 64;

/// Why the tool `name` is not offered; `None` when it is fine. The characters allowed are the
/// MCP specification's for tool names: ASCII letters, digits, `_`, `-` and `.`.
pub fn refusal(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("the name is empty".into());
    }
    if name.len() > NAME_MAX {
        return Some(format!("the name is longer than {NAME_MAX} characters"));
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')) {
        return Some("the name has characters other than ASCII letters, digits, '_', '-' and '.'".into());
    }
    if builtin::is_builtin_name(name) {
        return Some(format!("kiwi's built-in tool {name} has this name, and built-in tools win"));
    }
    None
}

/// `name` as a log shows it: quoted, escaped, at most 80 characters.
pub fn shown(name: &str) -> String {
    let cut: String = name.chars().take(80).collect();
    let more = if cut.len() < name.len() { "…" } else { "" };
    format!("{cut:?}{more}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_pass_and_built_in_and_odd_ones_do_not() {
        for ok in ["echo", "get_issue", "list-repos", "v1.search", "writefile", "Shell2", &"a".repeat(64)] {
            assert_eq!(refusal(ok), None, "{ok}");
        }
        for built_in in ["WriteFile", "Shell", "StrReplaceFile", "Agent", "Task", "Think", "SendDMail", "TaskStop"] {
            assert!(refusal(built_in).unwrap().contains("built-in"), "{built_in}");
        }
        for odd in ["", "two words", "bell\u{7}", "new\nline", "tab\t", "é", "a/b", &"a".repeat(65)] {
            assert!(refusal(odd).is_some(), "{odd:?}");
        }
    }

    #[test]
    fn names_are_shown_escaped_and_short() {
        assert_eq!(shown("bell\u{7}"), "\"bell\\u{7}\"");
        assert_eq!(shown(&"x".repeat(100)), format!("{:?}…", "x".repeat(80)));
    }
}
