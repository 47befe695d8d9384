//! codex's `--config key=value` overrides (spec codex-exec.md §4): the dotted key, the value
//! read as TOML (else taken as a literal string, as codex does), and the keys kiwi serves.
//!
//! Invariants: every key is served, refused (the one start-up line codex gives) or named in
//! one stderr note — never silently dropped; later overrides of a key win; `mcp_servers.*`
//! become one MCP config document in kiwi's `mcp.json` shape.

use std::path::PathBuf;

use serde_json::{Map, Value, json};

use crate::sandbox::SandboxMode;

/// What the overrides ask of the run.
#[derive(Debug, Default, PartialEq)]
pub struct CodexConfig {
    pub model: Option<String>,
    /// `model_reasoning_effort`: thinking on for anything but `minimal`/`none`.
    pub thinking: Option<bool>,
    /// `sandbox_mode` (the `--sandbox` flag wins).
    pub sandbox: Option<SandboxMode>,
    /// `sandbox_workspace_write.network_access`.
    pub network_access: Option<bool>,
    /// `web_search = "disabled"`: SearchWeb is not offered.
    pub web_search_disabled: bool,
    /// `mcp_servers.<name>.*`, as kiwi's entries.
    pub mcp_servers: Map<String, Value>,
    /// `openai_base_url` (the SDK's `baseUrl`).
    pub openai_base_url: Option<String>,
    /// `kiwi.config_file`: kiwi's own config file (the default is `<share dir>/config.toml`).
    pub config_file: Option<PathBuf>,
    /// One stderr note per key kiwi does not use.
    pub notes: Vec<String>,
}

/// An override kiwi cannot serve: the line and the exit status (2: malformed, 1: refused).
#[derive(Debug, PartialEq, Eq)]
pub struct ConfigError {
    pub message: String,
    pub exit: u8,
}

/// `value` as TOML, else the literal string.
fn toml_value(raw: &str) -> Value {
    let wrapped = format!("v = {raw}");
    match toml::from_str::<toml::Table>(&wrapped) {
        Ok(mut table) => table.remove("v").and_then(|v| serde_json::to_value(v).ok()).unwrap_or(Value::Null),
        Err(_) => Value::String(raw.to_string()),
    }
}

/// A dotted key's parts; a part in double quotes keeps its dots.
fn key_parts(key: &str) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    for c in key.chars() {
        match c {
            '"' => quoted = !quoted,
            '.' if !quoted => parts.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    parts.push(current);
    parts.into_iter().map(|p| p.trim().to_string()).collect()
}

fn text(key: &str, value: &Value) -> Result<String, ConfigError> {
    value.as_str().map(str::to_string).ok_or_else(|| ConfigError {
        message: format!("kiwi: --config {key}: expected a string, got {value}"),
        exit: 2,
    })
}

fn flag(key: &str, value: &Value) -> Result<bool, ConfigError> {
    value.as_bool().ok_or_else(|| ConfigError {
        message: format!("kiwi: --config {key}: expected true or false, got {value}"),
        exit: 2,
    })
}

/// codex's MCP server fields that kiwi's entries take under the same (or another) name.
fn mcp_field(field: &str) -> Option<&'static str> {
    match field {
        "command" => Some("command"),
        "args" => Some("args"),
        "env" => Some("env"),
        "cwd" => Some("cwd"),
        "url" => Some("url"),
        "http_headers" => Some("headers"),
        _ => None,
    }
}

impl CodexConfig {
    pub fn parse(overrides: &[String]) -> Result<Self, ConfigError> {
        let mut out = CodexConfig::default();
        let mut disabled_servers = Vec::new();
        for raw in overrides {
            let Some((key, value)) = raw.split_once('=') else {
                return Err(ConfigError { message: format!("kiwi: --config needs key=value, got '{raw}'"), exit: 2 });
            };
            let key = key.trim();
            let value = toml_value(value.trim());
            let parts = key_parts(key);
            let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
            match parts.as_slice() {
                ["model"] => out.model = Some(text(key, &value)?),
                ["model_reasoning_effort"] => {
                    out.thinking = Some(!matches!(text(key, &value)?.as_str(), "minimal" | "none"));
                }
                ["approval_policy"] => {
                    // exec never asks whatever the policy (§10); codex refuses this one value.
                    if text(key, &value)? == "untrusted" {
                        return Err(ConfigError {
                            message: "approval_policy = \"untrusted\" is no longer supported; remove this setting"
                                .into(),
                            exit: 1,
                        });
                    }
                }
                ["sandbox_mode"] => {
                    let name = text(key, &value)?;
                    out.sandbox = Some(SandboxMode::parse(&name).filter(|_| name != "off").ok_or_else(|| {
                        ConfigError { message: format!("kiwi: --config sandbox_mode: unknown mode '{name}'"), exit: 2 }
                    })?);
                }
                ["sandbox_workspace_write", "network_access"] => out.network_access = Some(flag(key, &value)?),
                ["web_search"] => match text(key, &value)?.as_str() {
                    "disabled" => out.web_search_disabled = true,
                    "cached" | "live" => out.web_search_disabled = false,
                    other => {
                        return Err(ConfigError {
                            message: format!(
                                "kiwi: --config web_search: expected disabled, cached or live, got '{other}'"
                            ),
                            exit: 2,
                        });
                    }
                },
                // SetTodoList is always offered.
                ["tools", "update_plan", "enabled"] => {}
                ["openai_base_url"] => out.openai_base_url = Some(text(key, &value)?),
                ["kiwi", "config_file"] => out.config_file = Some(PathBuf::from(text(key, &value)?)),
                ["mcp_servers", name, "enabled"] => {
                    if !flag(key, &value)? {
                        disabled_servers.push(name.to_string());
                    }
                }
                ["mcp_servers", name, field] => match mcp_field(field) {
                    Some(kiwi_field) => {
                        let entry = out.mcp_servers.entry(name.to_string()).or_insert_with(|| json!({}));
                        entry[kiwi_field] = value;
                    }
                    None => out.notes.push(format!("--config {key}: kiwi's MCP servers have no such setting")),
                },
                ["mcp_servers", name] if value.is_object() => {
                    let entry = out.mcp_servers.entry(name.to_string()).or_insert_with(|| json!({}));
                    for (field, v) in value.as_object().into_iter().flatten() {
                        match mcp_field(field) {
                            Some(kiwi_field) => entry[kiwi_field] = v.clone(),
                            None => out
                                .notes
                                .push(format!("--config {key}.{field}: kiwi's MCP servers have no such setting")),
                        }
                    }
                }
                _ => out.notes.push(format!("--config {key}: kiwi has no such setting")),
            }
        }
        for name in disabled_servers {
            out.mcp_servers.remove(&name);
        }
        Ok(out)
    }

    /// The MCP config document of `mcp_servers.*`, when there is one.
    pub fn mcp_document(&self) -> Option<Value> {
        (!self.mcp_servers.is_empty()).then(|| json!({"mcpServers": self.mcp_servers}))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(items: &[&str]) -> Result<CodexConfig, ConfigError> {
        CodexConfig::parse(&items.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn values_are_toml_or_literal() {
        assert_eq!(toml_value("\"x\""), json!("x"));
        assert_eq!(toml_value("3"), json!(3));
        assert_eq!(toml_value("[\"/srv/calc.py\", \"tok\"]"), json!(["/srv/calc.py", "tok"]));
        assert_eq!(toml_value("{k = true}"), json!({"k": true}));
        assert_eq!(toml_value("plain words"), json!("plain words"));
        assert_eq!(key_parts("a.\"b.c\".d"), ["a", "b.c", "d"]);
    }

    #[test]
    fn the_sdk_keys() {
        let c = parse(&[
            "model_reasoning_effort=\"low\"",
            "sandbox_workspace_write.network_access=false",
            "approval_policy=\"never\"",
            "web_search=\"disabled\"",
            "tools.update_plan.enabled=true",
            "mcp_servers.calc.command=\"python3\"",
            "mcp_servers.calc.args=[\"/srv/calc.py\", \"/tmp/log\"]",
            "mcp_servers.calc.startup_timeout_sec=5",
            "mcp_servers.off.command=\"x\"",
            "mcp_servers.off.enabled=false",
            "openai_base_url=\"http://127.0.0.1:9/v1\"",
            "kiwi.config_file=\"/etc/kiwi.toml\"",
            "model_providers.loopback.name=\"loopback\"",
        ])
        .unwrap();
        assert_eq!(c.thinking, Some(true));
        assert_eq!(c.network_access, Some(false));
        assert!(c.web_search_disabled);
        assert_eq!(
            c.mcp_document().unwrap(),
            json!({"mcpServers": {"calc": {"command": "python3", "args": ["/srv/calc.py", "/tmp/log"]}}})
        );
        assert_eq!(c.openai_base_url.as_deref(), Some("http://127.0.0.1:9/v1"));
        assert_eq!(c.config_file, Some(PathBuf::from("/etc/kiwi.toml")));
        assert_eq!(c.notes.len(), 2, "{:?}", c.notes);
        assert_eq!(parse(&["model_reasoning_effort=\"minimal\""]).unwrap().thinking, Some(false));
    }

    #[test]
    fn refusals() {
        assert_eq!(parse(&["approval_policy=\"untrusted\""]).unwrap_err().exit, 1);
        assert_eq!(parse(&["no_equals"]).unwrap_err().exit, 2);
        assert_eq!(parse(&["web_search=\"sometimes\""]).unwrap_err().exit, 2);
        assert_eq!(parse(&["sandbox_workspace_write.network_access=\"yes\""]).unwrap_err().exit, 2);
        assert_eq!(parse(&["sandbox_mode=\"off\""]).unwrap_err().exit, 2);
    }
}
