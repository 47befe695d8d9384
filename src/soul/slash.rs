//! Slash-command parsing (`docs/soul.md` §7.1) and the built-in command table (`docs/protocol-1.10.md` §2.2).

/// A command the agent offers (`initialize` lists them; ACP's `available_commands_update` too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandInfo {
    pub name: String,
    pub description: String,
    pub aliases: Vec<String>,
    /// The kiwi extension that advertises this command (`/fork`, `/undo`); `None` for the
    /// reference's commands. An extension's command works for every client but is listed only
    /// to clients that asked for the extension (`docs/compatibility.md`).
    pub extension: Option<&'static str>,
}

impl CommandInfo {
    /// Whether a client that was granted `granted` extensions sees this command listed.
    pub fn listed_for(&self, granted: &[&str]) -> bool {
        self.extension.is_none_or(|e| granted.contains(&e))
    }
}

/// A parsed `/name args` input.
#[derive(Debug, PartialEq, Eq)]
pub struct SlashCommand<'a> {
    pub name: &'a str,
    pub args: &'a str,
}

/// `None` when the text is not a command (then it goes to the model as is).
pub fn parse(text: &str) -> Option<SlashCommand<'_>> {
    let rest = text.trim().strip_prefix('/')?;
    let end = rest.find(|c: char| c.is_whitespace()).unwrap_or(rest.len());
    let name = &rest[..end];
    let valid_segment = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !name.split(':').all(valid_segment) {
        return None;
    }
    Some(SlashCommand { name, args: rest[end..].trim_start() })
}

/// The built-in commands of wire mode, in the order `initialize` lists them.
pub fn builtin_commands() -> Vec<CommandInfo> {
    let cmd = |name: &str, description: &str, aliases: &[&str]| CommandInfo {
        name: name.into(),
        description: description.into(),
        aliases: aliases.iter().map(|a| a.to_string()).collect(),
        extension: None,
    };
    // kiwi's own commands: typed, they work for everyone; listed only where their extension was
    // asked for.
    let extension =
        |name: &'static str, description: &str| CommandInfo { extension: Some(name), ..cmd(name, description, &[]) };
    vec![
        cmd("init", "Analyze the codebase and generate an `AGENTS.md` file", &[]),
        cmd("compact", "Compact the context (optionally with a custom focus, e.g. /compact keep db discussions)", &[]),
        cmd("clear", "Clear the context", &["reset"]),
        cmd("yolo", "Toggle YOLO mode (auto-approve all actions)", &[]),
        cmd("afk", "Toggle afk mode (auto-dismiss AskUserQuestion, auto-approve tool calls)", &[]),
        cmd("plan", "Toggle plan mode. Usage: /plan [on|off|view|clear]", &[]),
        cmd(
            "add-dir",
            "Add a directory to the workspace. Usage: /add-dir <path>. Run without args to list added dirs",
            &[],
        ),
        cmd("export", "Export current session context to a markdown file", &[]),
        cmd("import", "Import context from a file or session ID", &[]),
        extension("fork", "Fork the session: a new session with the same history, independent afterwards"),
        extension(
            "undo",
            "Undo the last turn (or the last N: /undo N) and restore the files kiwi's edit tools changed in it",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parsing_rules() {
        assert_eq!(parse("/clear"), Some(SlashCommand { name: "clear", args: "" }));
        assert_eq!(parse("  /skill:test  do it "), Some(SlashCommand { name: "skill:test", args: "do it" }));
        assert_eq!(parse("/foo bar"), Some(SlashCommand { name: "foo", args: "bar" }));
        assert_eq!(parse("/tmp/x is a path"), None);
        assert_eq!(parse("hello /clear"), None);
        assert_eq!(parse("/"), None);
        assert_eq!(parse("/a:"), None);
        assert_eq!(parse("/a:b:c x"), Some(SlashCommand { name: "a:b:c", args: "x" }));
    }

    #[test]
    fn kiwi_commands_are_listed_only_where_asked() {
        let all = builtin_commands();
        let listed = |granted: &[&str]| -> Vec<String> {
            all.iter().filter(|c| c.listed_for(granted)).map(|c| c.name.clone()).collect()
        };
        let reference = ["init", "compact", "clear", "yolo", "afk", "plan", "add-dir", "export", "import"];
        assert_eq!(listed(&[]), reference);
        assert_eq!(listed(&["undo"]).last().map(String::as_str), Some("undo"));
        assert_eq!(listed(&["fork", "undo"]).len(), reference.len() + 2);
    }
}
