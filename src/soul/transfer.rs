//! `/export [path]` and `/import <file|session id>` (`docs/protocol-1.10.md` §4.5): the context to a
//! Markdown file, and a file or another session of the same work dir into the context.
//!
//! Invariants: export never touches the context; import adds exactly one user message (a system
//! note plus the content wrapped in `<imported_context>`) and grows the token count by a quarter
//! of its characters, or changes nothing and says why (one text per refusal). The current session
//! is never imported into itself.

use std::path::{Path, PathBuf};

use super::Soul;
use super::commands::say;
use super::sink::EventSink;
use crate::llm::{Message, Role};
use crate::session::store::home_dir;
use crate::tools::paths;

const MAX_IMPORT_BYTES: u64 = 10 * 1024 * 1024;

/// Extensions of files `/import` treats as text.
const TEXT_EXTENSIONS: &[&str] = &[
    "md", "markdown", "txt", "text", "rst", "adoc", "org", "log", "csv", "tsv", "json", "jsonl", "yaml", "yml", "toml",
    "ini", "cfg", "conf", "xml", "html", "htm", "css", "sql", "sh", "bash", "zsh", "py", "rs", "go", "js", "jsx", "ts",
    "tsx", "java", "kt", "c", "h", "cc", "cpp", "hpp", "cs", "rb", "php", "swift", "scala", "lua", "r", "tex",
];

fn role_name(role: Role) -> &'static str {
    match role {
        Role::System => "System",
        Role::User => "User",
        Role::Assistant => "Assistant",
        Role::Tool => "Tool",
    }
}

/// `path` with the home dir shown as `~`.
fn tilde(path: &Path) -> String {
    let home = home_dir();
    match path.strip_prefix(&home) {
        Ok(rest) if home != Path::new("/") => format!("~/{}", rest.display()),
        _ => path.display().to_string(),
    }
}

/// The transcript: front matter, an overview, then one section per user message.
fn markdown(history: &[Message], session_id: &str, work_dir: &Path, token_count: u64) -> String {
    let count = |r: Role| history.iter().filter(|m| m.role == r).count();
    let mut out = format!(
        "---\nsession_id: {session_id}\nexported_at: {}\nwork_dir: {}\nmessage_count: {}\ntoken_count: {token_count}\n---\n\n",
        chrono::Local::now().format("%Y-%m-%dT%H:%M:%S%:z"),
        work_dir.display(),
        history.len()
    );
    out.push_str(&format!(
        "# Session {session_id}\n\n## Overview\n\n- User messages: {}\n- Assistant messages: {}\n- Tool results: {}\n",
        count(Role::User),
        count(Role::Assistant),
        count(Role::Tool)
    ));
    let mut turn = 0;
    for m in history {
        if m.role == Role::User {
            turn += 1;
            out.push_str(&format!("\n## Turn {turn}\n"));
        }
        out.push_str(&format!("\n### {}\n\n{}\n", role_name(m.role), m.text().trim()));
        for call in m.tool_calls.iter().flatten() {
            let args = call.function.arguments.as_deref().unwrap_or("{}");
            out.push_str(&format!(
                "\n**Tool call** `{}` (`{}`):\n\n```json\n{args}\n```\n",
                call.function.name, call.id
            ));
        }
    }
    out
}

/// Another session's context as plain text.
fn session_text(path: &Path) -> std::io::Result<String> {
    let lines = crate::session::jsonl::read_lines(path)?;
    let mut out = String::new();
    for line in lines {
        if let Ok(m) = serde_json::from_str::<Message>(&line) {
            let text = m.text();
            if !text.trim().is_empty() {
                out.push_str(&format!("[{}] {}\n\n", role_name(m.role).to_lowercase(), text.trim()));
            }
        }
    }
    Ok(out.trim_end().to_string())
}

fn looks_secret(name: &str) -> bool {
    let n = name.to_lowercase();
    n.starts_with(".env")
        || ["secret", "credential", "password", "token", "private", "id_rsa", ".pem", ".key"]
            .iter()
            .any(|s| n.contains(s))
}

impl Soul {
    pub(super) async fn export_command(&mut self, args: &str, sink: &EventSink) {
        let history = self.context.history();
        if history.is_empty() {
            say(sink, "No messages to export.").await;
            return;
        }
        let env = &self.agent.env;
        let default_name = format!(
            "kimi-export-{}-{}.md",
            env.session_id.chars().take(8).collect::<String>(),
            chrono::Local::now().format("%Y%m%d-%H%M%S")
        );
        let arg = args.trim();
        let target: PathBuf = if arg.is_empty() {
            env.work_dir.join(&default_name)
        } else {
            let given = paths::resolve(&env.work_dir, arg);
            if arg.ends_with('/') || given.is_dir() { given.join(&default_name) } else { given }
        };
        let text = markdown(history, &env.session_id, &env.work_dir, self.context.token_count());
        if let Err(e) = std::fs::write(&target, text) {
            say(sink, &format!("Failed to write export file: {e}")).await;
            return;
        }
        say(sink, &format!("Exported {} messages to {}", history.len(), tilde(&target))).await;
        say(
            sink,
            "  Note: The exported file may contain sensitive information. Please be cautious when sharing it externally.",
        )
        .await;
    }

    pub(super) async fn import_command(&mut self, args: &str, sink: &EventSink) {
        let target = args.trim();
        if target.is_empty() {
            say(sink, "Usage: /import <file_path or session_id>").await;
            return;
        }
        match self.read_import(target) {
            Ok((source, label, content, warning)) => {
                let chars = content.chars().count() as u64;
                let tokens = chars / 4;
                let max = self.agent.max_context_size();
                if max > 0 && self.context.token_count() + tokens > max {
                    say(
                        sink,
                        &format!(
                            "The imported content (~{tokens} tokens) would exceed the model's context size ({max} tokens); nothing was imported."
                        ),
                    )
                    .await;
                    return;
                }
                let note = format!(
                    "<system>The user imported context from {label}. Treat it as background for this conversation.</system>\n\
                     <imported_context source=\"{source}\">\n{content}\n</imported_context>"
                );
                self.context.append(Message::user_text(note));
                self.context.set_token_count(self.context.token_count() + tokens);
                say(sink, &format!("Imported context from {label} ({chars} chars).")).await;
                if let Some(w) = warning {
                    say(sink, &w).await;
                }
            }
            Err(text) => say(sink, &text).await,
        }
    }

    /// (source, label, content, warning) of what `/import target` would add, or the refusal.
    #[allow(clippy::type_complexity)]
    fn read_import(&self, target: &str) -> Result<(String, String, String, Option<String>), String> {
        let env = &self.agent.env;
        let path = paths::resolve(&env.work_dir, target);
        if path.is_file() {
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let ext = path.extension().map(|e| e.to_string_lossy().to_lowercase()).unwrap_or_default();
            if !TEXT_EXTENSIONS.contains(&ext.as_str()) {
                return Err(format!("Cannot import '{name}': only text files can be imported."));
            }
            let size = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
            if size > MAX_IMPORT_BYTES {
                return Err(format!("Cannot import '{name}': the file is larger than 10 MiB."));
            }
            let bytes = std::fs::read(&path).map_err(|e| format!("Cannot read '{name}': {e}"))?;
            let content =
                String::from_utf8(bytes).map_err(|_| format!("Cannot import '{name}': it is not UTF-8 text."))?;
            if content.trim().is_empty() {
                return Err("The file is empty, nothing to import.".into());
            }
            let warning = looks_secret(&name).then(|| {
                format!("  Warning: '{name}' looks like it may hold secrets; they are now part of the context.")
            });
            return Ok((path.display().to_string(), format!("file '{name}'"), content, warning));
        }
        if crate::session::id::check_session_id(target).is_ok()
            && let Some(sessions) = env.session_dir.parent()
        {
            let dir = sessions.join(target);
            if dir.is_dir() {
                if target == env.session_id {
                    return Err("Cannot import the current session into itself.".into());
                }
                let content = session_text(&dir.join("context.jsonl"))
                    .map_err(|e| format!("Cannot read session '{target}': {e}"))?;
                if content.is_empty() {
                    return Err("The session is empty, nothing to import.".into());
                }
                return Ok((format!("session:{target}"), format!("session '{target}'"), content, None));
            }
        }
        Err(format!("'{target}' is not a valid file path or session ID."))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{ContentPart, ToolCall};

    #[test]
    fn transcripts_have_front_matter_and_turns() {
        let mut a = Message::new(Role::Assistant, vec![ContentPart::text("looking")]);
        a.tool_calls = Some(vec![ToolCall::new("c1", "Shell", Some("{\"command\":\"ls\"}".into()))]);
        let history = [Message::user_text("hi"), a, Message::tool("c1", vec![ContentPart::text("a.txt")])];
        let md = markdown(&history, "s1", Path::new("/w"), 42);
        assert!(md.starts_with("---\nsession_id: s1\nexported_at: "));
        assert!(md.contains("work_dir: /w\nmessage_count: 3\ntoken_count: 42\n---\n"));
        assert!(md.contains("## Turn 1\n\n### User\n\nhi\n"));
        assert!(md.contains("**Tool call** `Shell` (`c1`)"));
        assert!(md.contains("### Tool\n\na.txt"));
    }

    #[test]
    fn secret_looking_names() {
        assert!(looks_secret(".env.local") && looks_secret("api_token.txt") && looks_secret("server.KEY"));
        assert!(!looks_secret("notes.md"));
    }
}
