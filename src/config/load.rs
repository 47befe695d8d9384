//! Finding, parsing and validating the config (`cli-and-config.md` §2).

use std::path::{Path, PathBuf};

use thiserror::Error;

use super::schema::Config;
use crate::llm::Capability;

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("Invalid JSON in configuration file {path}: {detail}")]
    Json { path: String, detail: String },
    #[error("Invalid TOML in configuration file {path}: {detail}")]
    Toml { path: String, detail: String },
    #[error("Invalid configuration file {path}: {detail}")]
    Invalid { path: String, detail: String },
    #[error("Invalid configuration text: {0}")]
    InvalidText(String),
    #[error("Cannot read configuration file {path}: {detail}")]
    Io { path: String, detail: String },
}

/// The default config written to `<share_dir>/config.toml` when none exists.
pub const DEFAULT_CONFIG_TOML: &str = r#"default_model = ""
default_thinking = false

[models]

[providers]

[loop_control]
max_steps_per_turn = 100
max_retries_per_step = 3
max_ralph_iterations = 0
reserved_context_size = 50000

[services]

[mcp.client]
tool_call_timeout_ms = 60000
"#;

/// Reads a config file, TOML unless the suffix is `.json` (any case).
pub fn load_file(path: &Path) -> Result<Config, ConfigError> {
    let shown = path.display().to_string();
    let text =
        std::fs::read_to_string(path).map_err(|e| ConfigError::Io { path: shown.clone(), detail: e.to_string() })?;
    let is_json = path.extension().and_then(|e| e.to_str()).is_some_and(|e| e.eq_ignore_ascii_case("json"));
    let invalid = |detail: String| ConfigError::Invalid { path: shown.clone(), detail };
    // Syntax errors and schema errors are told apart by parsing in two stages.
    let config: Config = if is_json {
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| ConfigError::Json { path: shown.clone(), detail: e.to_string() })?;
        serde_json::from_value(value).map_err(|e| invalid(e.to_string()))?
    } else {
        let table: toml::Table = toml::from_str(&text)
            .map_err(|e| ConfigError::Toml { path: shown.clone(), detail: one_line(&e.to_string()) })?;
        table.try_into().map_err(|e: toml::de::Error| invalid(one_line(&e.to_string())))?
    };
    validate(&config).map_err(invalid)?;
    Ok(config)
}

fn one_line(s: &str) -> String {
    s.trim().lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}

/// Parses `--config` text: JSON first, then TOML.
pub fn load_text(text: &str) -> Result<Config, ConfigError> {
    let text = text.trim();
    let config: Config = match serde_json::from_str::<serde_json::Value>(text) {
        Ok(value) => serde_json::from_value(value).map_err(|e| ConfigError::InvalidText(e.to_string()))?,
        Err(json_err) => match toml::from_str::<toml::Table>(text) {
            Ok(table) => table.try_into().map_err(|e: toml::de::Error| ConfigError::InvalidText(e.to_string()))?,
            Err(toml_err) => {
                return Err(ConfigError::InvalidText(format!("{json_err}; {}", toml_err.to_string().trim())));
            }
        },
    };
    validate(&config).map_err(ConfigError::InvalidText)?;
    Ok(config)
}

/// Cross-field rules the schema alone cannot express.
pub fn validate(config: &Config) -> Result<(), String> {
    if !config.default_model.is_empty() && !config.models.contains_key(&config.default_model) {
        return Err(format!("Default model {} not found in models", config.default_model));
    }
    for (name, model) in &config.models {
        if !config.providers.contains_key(&model.provider) {
            return Err(format!("Provider {} not found in providers", model.provider));
        }
        for cap in &model.capabilities {
            if Capability::parse(cap).is_none() {
                return Err(format!("models.{name}.capabilities: unknown capability '{cap}'"));
            }
        }
    }
    let lc = &config.loop_control;
    if lc.max_steps_per_turn < 1 {
        return Err("loop_control.max_steps_per_turn must be >= 1".into());
    }
    if lc.max_retries_per_step < 1 {
        return Err("loop_control.max_retries_per_step must be >= 1".into());
    }
    if !(lc.compaction_trigger_ratio > 0.0 && lc.compaction_trigger_ratio <= 1.0) {
        return Err("loop_control.compaction_trigger_ratio must be in (0, 1]".into());
    }
    if lc.max_ralph_iterations < -1 {
        return Err("loop_control.max_ralph_iterations must be >= -1".into());
    }
    if lc.reserved_context_size < 1000 {
        return Err("loop_control.reserved_context_size must be >= 1000".into());
    }
    Ok(())
}

/// The config at the default location: migrates a legacy `config.json`, writes the default
/// config when there is none.
pub fn load_default(share_dir: &Path) -> Result<(Config, PathBuf), ConfigError> {
    let path = share_dir.join("config.toml");
    if !path.exists() {
        let legacy = share_dir.join("config.json");
        if legacy.is_file() {
            let config = load_file(&legacy)?;
            let text = toml::to_string(&config)
                .map_err(|e| ConfigError::Invalid { path: legacy.display().to_string(), detail: e.to_string() })?;
            write(&path, &text)?;
            let _ = std::fs::rename(&legacy, share_dir.join("config.json.bak"));
        } else {
            write(&path, DEFAULT_CONFIG_TOML)?;
        }
    }
    let config = load_file(&path)?;
    Ok((config, path))
}

fn write(path: &Path, text: &str) -> Result<(), ConfigError> {
    std::fs::write(path, text).map_err(|e| ConfigError::Io { path: path.display().to_string(), detail: e.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_config_parses() {
        let c: Config = toml::from_str(DEFAULT_CONFIG_TOML).unwrap();
        assert_eq!(c.loop_control.max_steps_per_turn, 100);
        assert_eq!(c.mcp.client.tool_call_timeout_ms, 60000);
    }

    #[test]
    fn both_step_limit_keys_are_read() {
        let c = load_text(r#"{"loop_control":{"max_steps_per_turn":7}}"#).unwrap();
        assert_eq!(c.loop_control.max_steps_per_turn, 7);
        let c = load_text(r#"{"loop_control":{"max_steps_per_turn":7,"max_steps_per_run":3}}"#).unwrap();
        assert_eq!(c.loop_control.max_steps_per_turn, 3);
        let c = load_text("[loop_control]\nmax_steps_per_run = \"5\"").unwrap();
        assert_eq!(c.loop_control.max_steps_per_turn, 5);
    }

    #[test]
    fn validation_errors_name_the_problem() {
        let e = load_text(r#"{"default_model":"x"}"#).unwrap_err().to_string();
        assert_eq!(e, "Invalid configuration text: Default model x not found in models");
        let e =
            load_text(r#"{"models":{"m":{"provider":"p","model":"m","max_context_size":1}}}"#).unwrap_err().to_string();
        assert!(e.contains("Provider p not found in providers"), "{e}");
        let e = load_text(r#"{"providers":{"p":{"type":"_echo"}},"models":{"m":{"provider":"p","model":"m","max_context_size":1,"capabilities":["x"]}}}"#).unwrap_err();
        assert!(e.to_string().contains("capability"));
        assert!(load_text(r#"{"loop_control":{"max_steps_per_turn":0}}"#).is_err());
        assert!(load_text(r#"{"loop_control":{"max_steps_per_turn":2.5}}"#).is_err());
        assert!(load_text("not json = = toml").unwrap_err().to_string().starts_with("Invalid configuration text: "));
    }

    #[test]
    fn compaction_ratio_is_checked() {
        assert_eq!(load_text("{}").unwrap().loop_control.compaction_trigger_ratio, 0.85);
        assert_eq!(
            load_text(r#"{"loop_control":{"compaction_trigger_ratio":0.5}}"#)
                .unwrap()
                .loop_control
                .compaction_trigger_ratio,
            0.5
        );
        for bad in ["0", "1.5", "-0.1"] {
            assert!(
                load_text(&format!(r#"{{"loop_control":{{"compaction_trigger_ratio":{bad}}}}}"#)).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn hooks_are_read_and_checked() {
        let c = load_text(r#"{"hooks":[{"event":"PreToolUse","command":"echo x","matcher":"Shell"},{"event":"Stop","command":"true","timeout":"5"}]}"#).unwrap();
        assert_eq!(c.hooks.len(), 2);
        assert_eq!((c.hooks[0].timeout, c.hooks[1].timeout, c.hooks[1].matcher.as_str()), (30, 5, ""));
        for bad in [
            r#"{"hooks":[{"event":"BeforeAll","command":"x"}]}"#,
            r#"{"hooks":[{"event":"Stop","command":"x","timeout":0}]}"#,
            r#"{"hooks":[{"event":"Stop","command":"x","timeout":601}]}"#,
            r#"{"hooks":[{"event":"Stop"}]}"#,
        ] {
            assert!(load_text(bad).is_err(), "{bad}");
        }
        let toml = load_text("[[hooks]]\nevent = \"UserPromptSubmit\"\ncommand = \"exit 2\"\n").unwrap();
        assert_eq!(toml.hooks[0].event, crate::protocol::HookEvent::UserPromptSubmit);
    }

    #[test]
    fn lenient_scalars() {
        let c = load_text(r#"{"default_thinking":"yes","loop_control":{"max_retries_per_step":2.0}}"#).unwrap();
        assert!(c.default_thinking);
        assert_eq!(c.loop_control.max_retries_per_step, 2);
    }

    #[test]
    fn files_are_parsed_by_suffix() {
        let dir = tempfile::tempdir().unwrap();
        let json = dir.path().join("c.JSON");
        std::fs::write(&json, r#"{"default_model":""}"#).unwrap();
        assert!(load_file(&json).is_ok());
        let toml_path = dir.path().join("c.conf");
        std::fs::write(&toml_path, "default_model = [").unwrap();
        let e = load_file(&toml_path).unwrap_err().to_string();
        assert!(e.starts_with("Invalid TOML in configuration file"), "{e}");
        std::fs::write(&json, "{").unwrap();
        assert!(load_file(&json).unwrap_err().to_string().starts_with("Invalid JSON in configuration file"));
        std::fs::write(&json, r#"{"default_model":"nope"}"#).unwrap();
        assert!(load_file(&json).unwrap_err().to_string().starts_with("Invalid configuration file"));
    }

    #[test]
    fn default_location_writes_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let (c, path) = load_default(dir.path()).unwrap();
        assert_eq!(std::fs::read_to_string(path).unwrap(), DEFAULT_CONFIG_TOML);
        assert!(c.models.is_empty());
    }
}
