//! Finding, parsing and validating the config (`docs/configuration.md` §2).

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

/// Reads a config file, TOML unless the suffix is `.json` (any case). Keys nobody reads are
/// logged as warnings.
pub fn load_file(path: &Path) -> Result<Config, ConfigError> {
    let (config, warnings) = load_file_reporting(path)?;
    for w in warnings {
        tracing::warn!("{w}");
    }
    Ok(config)
}

/// Like [`load_file`], returning the warnings (unknown keys) instead of logging them.
pub fn load_file_reporting(path: &Path) -> Result<(Config, Vec<String>), ConfigError> {
    let shown = path.display().to_string();
    let mut ignored = Vec::new();
    let text =
        std::fs::read_to_string(path).map_err(|e| ConfigError::Io { path: shown.clone(), detail: e.to_string() })?;
    let is_json = path.extension().and_then(|e| e.to_str()).is_some_and(|e| e.eq_ignore_ascii_case("json"));
    let invalid = |detail: String| ConfigError::Invalid { path: shown.clone(), detail };
    // Syntax errors and schema errors are told apart by parsing in two stages.
    let config: Config = if is_json {
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| ConfigError::Json { path: shown.clone(), detail: e.to_string() })?;
        serde_ignored::deserialize(value, |p| ignored.push(p.to_string())).map_err(|e| invalid(e.to_string()))?
    } else {
        let table: toml::Table = toml::from_str(&text)
            .map_err(|e| ConfigError::Toml { path: shown.clone(), detail: one_line(&e.to_string()) })?;
        serde_ignored::deserialize(toml::Value::Table(table), |p| ignored.push(p.to_string()))
            .map_err(|e: toml::de::Error| invalid(one_line(&e.to_string())))?
    };
    validate(&config).map_err(invalid)?;
    let mut config = config;
    if let Some(dir) = path.parent() {
        anchor_paths(&mut config, dir);
    }
    let mut warnings: Vec<String> = ignored.iter().map(|p| super::diagnose::unknown_key(p, &shown)).collect();
    warnings.extend(config.sandbox.warnings());
    Ok((config, warnings))
}

/// A relative script path in a provider's `env` table is relative to the config file, so a
/// config works from any directory and with any `--work-dir` (the reference resolves it against
/// the process's working directory, which kiwi never changes; a path is still taken as is when
/// the config comes from `--config` text).
fn anchor_paths(config: &mut Config, dir: &Path) {
    for provider in config.providers.values_mut() {
        if let Some(value) = provider.env.get_mut("KIMI_SCRIPTED_ECHO_SCRIPTS") {
            let path = Path::new(value.as_str());
            if !value.is_empty() && path.is_relative() && !value.starts_with('~') {
                *value = dir.join(path).to_string_lossy().into_owned();
            }
        }
    }
}

fn one_line(s: &str) -> String {
    s.trim().lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}

/// Parses `--config` text: JSON first, then TOML.
pub fn load_text(text: &str) -> Result<Config, ConfigError> {
    load_text_reporting(text).map(|(config, _)| config)
}

/// Like [`load_text`], also returning the warnings (unknown keys).
pub fn load_text_reporting(text: &str) -> Result<(Config, Vec<String>), ConfigError> {
    let text = text.trim();
    let mut ignored = Vec::new();
    let config: Config = match serde_json::from_str::<serde_json::Value>(text) {
        Ok(value) => serde_ignored::deserialize(value, |p| ignored.push(p.to_string()))
            .map_err(|e| ConfigError::InvalidText(e.to_string()))?,
        Err(json_err) => match toml::from_str::<toml::Table>(text) {
            Ok(table) => serde_ignored::deserialize(toml::Value::Table(table), |p| ignored.push(p.to_string()))
                .map_err(|e: toml::de::Error| ConfigError::InvalidText(e.to_string()))?,
            Err(toml_err) => {
                return Err(ConfigError::InvalidText(format!("{json_err}; {}", toml_err.to_string().trim())));
            }
        },
    };
    validate(&config).map_err(ConfigError::InvalidText)?;
    let mut warnings: Vec<String> = ignored.iter().map(|p| super::diagnose::unknown_key(p, "--config")).collect();
    warnings.extend(config.sandbox.warnings());
    Ok((config, warnings))
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
    if lc.max_session_tokens == Some(0) {
        return Err("loop_control.max_session_tokens must be >= 1".into());
    }
    Ok(())
}

/// The config at the default location: migrates a legacy `config.json`, writes the default
/// config when there is none.
pub fn load_default(share_dir: &Path) -> Result<(Config, PathBuf), ConfigError> {
    let (config, path, warnings) = load_default_reporting(share_dir)?;
    for w in warnings {
        tracing::warn!("{w}");
    }
    Ok((config, path))
}

/// Like [`load_default`], returning the warnings; a line saying that a default config was
/// written (and where) is one of them.
pub fn load_default_reporting(share_dir: &Path) -> Result<(Config, PathBuf, Vec<String>), ConfigError> {
    let path = share_dir.join("config.toml");
    let mut notes = Vec::new();
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
            notes.push(format!(
                "no config found: wrote a default one with no model to {}; add a model and a provider there \
                 (see the README) or pass --config-file",
                path.display()
            ));
        }
    }
    let (config, warnings) = load_file_reporting(&path)?;
    notes.extend(warnings);
    Ok((config, path, notes))
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
        assert_eq!(load_text("{}").unwrap().loop_control.max_session_tokens, None);
        let budget = load_text("[loop_control]\nmax_session_tokens = \"5000\"").unwrap();
        assert_eq!(budget.loop_control.max_session_tokens, Some(5000));
        assert!(load_text(r#"{"loop_control":{"max_session_tokens":0}}"#).is_err());
        let budget = load_text("[loop_control]\nmax_budget_usd = 2.5").unwrap();
        assert_eq!(budget.loop_control.max_budget_usd, Some(2.5));
        for bad in [r#"0"#, r#"-1"#, r#""many""#, r#"true"#] {
            let e = load_text(&format!(r#"{{"loop_control":{{"max_budget_usd":{bad}}}}}"#)).unwrap_err().to_string();
            assert!(e.contains("loop_control.max_budget_usd must be a number of US dollars above 0"), "{e}");
        }
    }

    #[test]
    fn model_prices_are_read_and_checked() {
        let toml = "[models.m]\nprovider = \"p\"\nmodel = \"x\"\nmax_context_size = 1000\n\
                    [models.m.usd_per_mtok]\ninput = 3\noutput = 15\ncache_read = 0.3\n\
                    [providers.p]\ntype = \"kimi\"\n";
        let prices = load_text(toml).unwrap().models["m"].usd_per_mtok.unwrap();
        assert_eq!((prices.input, prices.output, prices.cache_read, prices.cache_write), (3.0, 15.0, 0.3, 3.0));
        let negative = toml.replace("output = 15", "output = -15");
        let e = load_text(&negative).unwrap_err().to_string();
        assert!(e.contains("usd_per_mtok.output must be a number of dollars per million tokens"), "{e}");
        assert_eq!(load_text("{}").unwrap().background.print_wait_ceiling_s, 3600);
        assert_eq!(load_text("{}").unwrap().undo.max_bytes, 64 * 1024 * 1024);
        assert_eq!(load_text("[undo]\nmax_bytes = 1000").unwrap().undo.max_bytes, 1000);
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
    fn default_location_writes_the_default_and_says_where() {
        let dir = tempfile::tempdir().unwrap();
        let (c, path, notes) = load_default_reporting(dir.path()).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), DEFAULT_CONFIG_TOML);
        assert!(c.models.is_empty());
        assert_eq!(notes.len(), 1);
        assert!(notes[0].starts_with("no config found: wrote a default one with no model to "), "{notes:?}");
        assert!(notes[0].contains(&path.display().to_string()));
        // The second start finds it and says nothing.
        assert!(load_default_reporting(dir.path()).unwrap().2.is_empty());
    }

    #[test]
    fn relative_script_paths_are_relative_to_the_config_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        let text = "[providers.a]\ntype = \"_scripted_echo\"\nenv = { KIMI_SCRIPTED_ECHO_SCRIPTS = \"s/x.json\" }\n\
                    [providers.b]\ntype = \"_scripted_echo\"\nenv = { KIMI_SCRIPTED_ECHO_SCRIPTS = \"/abs.json\" }\n";
        std::fs::write(&path, text).unwrap();
        let c = load_file(&path).unwrap();
        let got = |p: &str| c.providers[p].env["KIMI_SCRIPTED_ECHO_SCRIPTS"].clone();
        assert_eq!(got("a"), dir.path().join("s/x.json").to_string_lossy());
        assert_eq!(got("b"), "/abs.json");
    }

    #[test]
    fn sandbox_table_is_read_and_checked() {
        let c = load_text("[sandbox]\nmode = \"danger-full-access\"\nnetwork = \"yes\"\nwritable_roots = [\"/\"]\n")
            .unwrap();
        assert_eq!(c.sandbox.mode, crate::sandbox::SandboxMode::Off);
        assert!(c.sandbox.network && c.sandbox.auto_approve && c.sandbox.allow_escalation);
        let (c, warnings) = load_text_reporting(
            r#"{"sandbox":{"mode":"read-only","writable_roots":["/no/such/root"],"allow_landlock_only":1}}"#,
        )
        .unwrap();
        assert_eq!(c.sandbox.mode, crate::sandbox::SandboxMode::ReadOnly);
        assert!(c.sandbox.allow_landlock_only);
        assert_eq!(warnings, ["sandbox.writable_roots: '/no/such/root' does not exist and is left out"]);
        let e = load_text("[sandbox]\nmode = \"bogus\"\n").unwrap_err().to_string();
        assert!(
            e.contains(
                "sandbox.mode: unknown variant `bogus`, expected one of `read-only`, `workspace-write`, `off`, \
                 `danger-full-access`"
            ),
            "{e}"
        );
        let e = load_text(r#"{"sandbox":{"writable_roots":["rel"]}}"#).unwrap_err().to_string();
        assert!(e.contains("sandbox.writable_roots: relative path 'rel'"), "{e}");
        assert!(load_text(r#"{"sandbox":{"writable_roots":"/x"}}"#).is_err());
        assert!(load_text(r#"{"sandbox":{"network":"maybe"}}"#).is_err());
        let (_, warnings) = load_text_reporting(r#"{"sandbox":{"mod":"off"}}"#).unwrap();
        assert_eq!(warnings, ["--config: unknown key 'sandbox.mod' is ignored; did you mean 'mode'?"]);
        // The default table is not written back.
        assert!(!toml::to_string(&load_text("{}").unwrap()).unwrap().contains("sandbox"));
    }

    #[test]
    fn unknown_keys_are_reported_with_their_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.toml");
        std::fs::write(&path, "defualt_model = \"a\"\n[providers.p]\ntype = \"kimi\"\nbsae_url = \"x\"\n").unwrap();
        let (_, warnings) = load_file_reporting(&path).unwrap();
        let shown = path.display();
        assert_eq!(
            warnings,
            [
                format!("{shown}: unknown key 'defualt_model' is ignored; did you mean 'default_model'?"),
                format!("{shown}: unknown key 'providers.p.bsae_url' is ignored; did you mean 'base_url'?"),
            ]
        );
        let (_, warnings) = load_text_reporting(r#"{"default_thinkin":true}"#).unwrap();
        assert_eq!(warnings, ["--config: unknown key 'default_thinkin' is ignored; did you mean 'default_thinking'?"]);
        let priced = r#"{"models":{"m":{"provider":"p","model":"x","max_context_size":1,
            "usd_per_mtok":{"input":1,"output":2,"cache_raed":0.1}}},"providers":{"p":{"type":"kimi"}},
            "loop_control":{"max_budget_ud":1}}"#;
        let (_, warnings) = load_text_reporting(priced).unwrap();
        assert_eq!(
            warnings,
            [
                "--config: unknown key 'models.m.usd_per_mtok.cache_raed' is ignored; did you mean 'cache_read'?",
                "--config: unknown key 'loop_control.max_budget_ud' is ignored; did you mean 'max_budget_usd'?",
            ]
        );
    }
}
