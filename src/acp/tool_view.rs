//! How a tool call looks in an ACP client: its title, kind and locations, computed from the tool
//! name and its (possibly still incomplete) argument text (`docs/acp.md` §12.2, §13.4).

use std::path::Path;

use agent_client_protocol::v1::schema::{ToolCallLocation, ToolKind};
use serde_json::Value;

/// Subtitles longer than this are cut in the middle.
const SUBTITLE_MAX: usize = 50;
const SUBTITLE_HALF: usize = 25;

/// The argument that names what a call works on, per tool; `None` for tools shown by name only.
/// Tools not listed here (MCP tools and others) show their raw argument text.
fn subtitle_key(tool: &str) -> Option<Option<&'static str>> {
    Some(match tool {
        "Task" | "Agent" => Some("description"),
        "CreateSubagent" => Some("name"),
        "Think" => Some("thought"),
        "Shell" => Some("command"),
        "ReadFile" | "ReadMediaFile" | "WriteFile" | "StrReplaceFile" => Some("path"),
        "Glob" | "Grep" => Some("pattern"),
        "SearchWeb" => Some("query"),
        "FetchURL" => Some("url"),
        "SendDMail" | "SetTodoList" => None,
        _ => return None,
    })
}

fn is_path_tool(tool: &str) -> bool {
    matches!(tool, "ReadFile" | "ReadMediaFile" | "WriteFile" | "StrReplaceFile")
}

/// `Tool` or `Tool: subtitle`.
pub fn title(tool: &str, arguments: &str, cwd: &Path) -> String {
    let subtitle = match subtitle_key(tool) {
        Some(None) => None,
        Some(Some(key)) => {
            let value = complete_json(arguments).and_then(|v| v.get(key).and_then(Value::as_str).map(str::to_string));
            value.map(|v| if is_path_tool(tool) { relative_to(&v, cwd) } else { v })
        }
        None => Some(arguments.to_string()),
    };
    match subtitle.filter(|s| !s.trim().is_empty()) {
        Some(s) => format!("{tool}: {}", shorten(&s)),
        None => tool.to_string(),
    }
}

pub fn kind(tool: &str) -> ToolKind {
    match tool {
        "ReadFile" | "ReadMediaFile" => ToolKind::Read,
        "WriteFile" | "StrReplaceFile" => ToolKind::Edit,
        "Shell" => ToolKind::Execute,
        "Glob" | "Grep" => ToolKind::Search,
        "FetchURL" | "SearchWeb" => ToolKind::Fetch,
        "Think" => ToolKind::Think,
        "EnterPlanMode" | "ExitPlanMode" => ToolKind::SwitchMode,
        _ => ToolKind::Other,
    }
}

/// The file a file tool works on, absolute, for the editor to follow.
pub fn locations(tool: &str, arguments: &Value, cwd: &Path) -> Vec<ToolCallLocation> {
    if !is_path_tool(tool) {
        return Vec::new();
    }
    match arguments.get("path").and_then(Value::as_str) {
        Some(path) if !path.is_empty() => vec![ToolCallLocation::new(cwd.join(path))],
        _ => Vec::new(),
    }
}

/// The arguments parsed as JSON when they are complete.
pub fn parsed(arguments: &str) -> Option<Value> {
    serde_json::from_str(arguments).ok()
}

/// Parses argument text that may stop in the middle of a string or object: closes what is open.
fn complete_json(text: &str) -> Option<Value> {
    if let Ok(v) = serde_json::from_str(text) {
        return Some(v);
    }
    let mut closers = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    for c in text.chars() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' => closers.push('}'),
            '[' => closers.push(']'),
            '}' | ']' => {
                closers.pop();
            }
            _ => {}
        }
    }
    let mut fixed = text.to_string();
    if escaped {
        fixed.pop();
    }
    if in_string {
        fixed.push('"');
    }
    while let Some(c) = closers.pop() {
        fixed.push(c);
    }
    serde_json::from_str(&fixed).ok()
}

fn relative_to(path: &str, cwd: &Path) -> String {
    match Path::new(path).strip_prefix(cwd) {
        Ok(rest) if !rest.as_os_str().is_empty() => rest.display().to_string(),
        _ => path.to_string(),
    }
}

fn shorten(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    if chars.len() <= SUBTITLE_MAX {
        return s.to_string();
    }
    let head: String = chars[..SUBTITLE_HALF].iter().collect();
    let tail: String = chars[chars.len() - SUBTITLE_HALF..].iter().collect();
    format!("{head}...{tail}").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_follow_the_argument_that_names_the_work() {
        let cwd = Path::new("/w");
        assert_eq!(title("Shell", r#"{"command":"ls -la"}"#, cwd), "Shell: ls -la");
        assert_eq!(title("Shell", r#"{"command":"ec"#, cwd), "Shell: ec", "incomplete JSON is completed");
        assert_eq!(title("Shell", "", cwd), "Shell");
        assert_eq!(title("ReadFile", r#"{"path":"/w/src/a.rs"}"#, cwd), "ReadFile: src/a.rs");
        assert_eq!(title("SetTodoList", r#"{"todos":[]}"#, cwd), "SetTodoList");
        assert_eq!(title("mcp_tool", r#"{"x":1}"#, cwd), r#"mcp_tool: {"x":1}"#);
        let long = format!(r#"{{"command":"{}"}}"#, "a".repeat(60));
        assert_eq!(title("Shell", &long, cwd), format!("Shell: {}...{}", "a".repeat(25), "a".repeat(25)));
    }

    #[test]
    fn kinds_and_locations() {
        assert_eq!(kind("StrReplaceFile"), ToolKind::Edit);
        assert_eq!(kind("Shell"), ToolKind::Execute);
        assert_eq!(kind("Whatever"), ToolKind::Other);
        let args = serde_json::json!({"path": "a.txt"});
        assert_eq!(locations("WriteFile", &args, Path::new("/w")), vec![ToolCallLocation::new("/w/a.txt")]);
        assert!(locations("Shell", &args, Path::new("/w")).is_empty());
    }
}
