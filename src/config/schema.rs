//! The configuration file's schema (`docs/configuration.md` §2.4). Unknown keys are ignored.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};

/// The provider part of the file is the model layer's own settings type (config depends on llm,
/// never the reverse).
pub use crate::llm::settings::{OAuthRef, OAuthStorage, ProviderConfig, ProviderType};
use crate::protocol::HookEvent;
use crate::sandbox::{SandboxMode, SandboxSettings};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct Config {
    #[serde(default)]
    pub default_model: String,
    #[serde(default, deserialize_with = "lenient::bool")]
    pub default_thinking: bool,
    /// New sessions start in plan mode (`docs/protocol-1.10.md` §6.1).
    #[serde(default, deserialize_with = "lenient::bool")]
    pub default_plan_mode: bool,
    #[serde(default)]
    pub models: BTreeMap<String, ModelConfig>,
    #[serde(default)]
    pub providers: BTreeMap<String, ProviderConfig>,
    #[serde(default)]
    pub loop_control: LoopControl,
    #[serde(default)]
    pub services: Services,
    #[serde(default)]
    pub mcp: McpSettings,
    /// Command hooks (`docs/protocol-1.10.md` §5.3), TOML `[[hooks]]`.
    #[serde(default)]
    pub hooks: Vec<HookConfig>,
    /// Background tasks (`docs/protocol-1.10.md` §9).
    #[serde(default)]
    pub background: BackgroundSettings,
    /// `/undo` and the undo methods (`docs/sessions.md` §9).
    #[serde(default)]
    pub undo: UndoSettings,
    /// The OS sandbox for Shell commands (spec sandbox.md §2.2); left out when written back
    /// while every key has its default.
    #[serde(default, deserialize_with = "sandbox_table", skip_serializing_if = "SandboxSettings::is_default")]
    pub sandbox: SandboxSettings,
}

/// `[sandbox]`: lenient scalars like the rest of the file; a mode that is not one of the names
/// and a relative path make the config invalid, with the key and the bad value in the message.
fn sandbox_table<'de, D: Deserializer<'de>>(d: D) -> Result<SandboxSettings, D::Error> {
    use serde::de::Error;
    #[derive(Deserialize)]
    struct Raw {
        #[serde(default)]
        mode: Option<String>,
        #[serde(default, deserialize_with = "lenient::opt_bool")]
        network: Option<bool>,
        #[serde(default)]
        writable_roots: Vec<String>,
        #[serde(default)]
        read_only_paths: Vec<String>,
        #[serde(default)]
        deny_read: Vec<String>,
        #[serde(default, deserialize_with = "lenient::opt_bool")]
        exclude_slash_tmp: Option<bool>,
        #[serde(default, deserialize_with = "lenient::opt_bool")]
        exclude_tmpdir_env_var: Option<bool>,
        #[serde(default, deserialize_with = "lenient::opt_bool")]
        auto_approve: Option<bool>,
        #[serde(default, deserialize_with = "lenient::opt_bool")]
        allow_escalation: Option<bool>,
        #[serde(default, deserialize_with = "lenient::opt_bool")]
        allow_landlock_only: Option<bool>,
    }
    let raw = Raw::deserialize(d)?;
    let def = SandboxSettings::default();
    let mode = match raw.mode {
        Some(name) => name.parse::<SandboxMode>().map_err(|e| D::Error::custom(format!("sandbox.mode: {e}")))?,
        None => def.mode,
    };
    let paths = |key: &str, list: Vec<String>| {
        list.iter().map(|p| crate::sandbox::check_path(key, p)).collect::<Result<Vec<_>, _>>().map_err(D::Error::custom)
    };
    Ok(SandboxSettings {
        mode,
        network: raw.network.unwrap_or(def.network),
        writable_roots: paths("writable_roots", raw.writable_roots)?,
        read_only_paths: paths("read_only_paths", raw.read_only_paths)?,
        deny_read: paths("deny_read", raw.deny_read)?,
        exclude_slash_tmp: raw.exclude_slash_tmp.unwrap_or(def.exclude_slash_tmp),
        exclude_tmpdir_env_var: raw.exclude_tmpdir_env_var.unwrap_or(def.exclude_tmpdir_env_var),
        auto_approve: raw.auto_approve.unwrap_or(def.auto_approve),
        allow_escalation: raw.allow_escalation.unwrap_or(def.allow_escalation),
        allow_landlock_only: raw.allow_landlock_only.unwrap_or(def.allow_landlock_only),
    })
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UndoSettings {
    /// Bytes of file before-images kept per session; past it the oldest turns' are dropped.
    #[serde(default = "default_undo_max_bytes", deserialize_with = "lenient::u64")]
    pub max_bytes: u64,
}

impl Default for UndoSettings {
    fn default() -> Self {
        Self { max_bytes: default_undo_max_bytes() }
    }
}

/// `undo.max_bytes` when the config does not say: 64 MiB.
pub const DEFAULT_UNDO_MAX_BYTES: u64 = 64 * 1024 * 1024;

fn default_undo_max_bytes() -> u64 {
    DEFAULT_UNDO_MAX_BYTES
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackgroundSettings {
    /// Active tasks allowed at once.
    #[serde(default = "default_max_running_tasks", deserialize_with = "lenient::u64")]
    pub max_running_tasks: u64,
    /// Leave running tasks alive when kiwi exits (default: kill them).
    #[serde(default, deserialize_with = "lenient::bool")]
    pub keep_alive_on_exit: bool,
    /// Time limit of a background subagent, in seconds.
    #[serde(default = "default_agent_task_timeout", deserialize_with = "lenient::u64")]
    pub agent_task_timeout_s: u64,
    /// kimi's `--print`: how long, in seconds, it waits at the end for background tasks still
    /// running before it exits (and they are stopped).
    #[serde(default = "default_print_wait_ceiling", deserialize_with = "lenient::u64")]
    pub print_wait_ceiling_s: u64,
}

impl Default for BackgroundSettings {
    fn default() -> Self {
        Self {
            max_running_tasks: default_max_running_tasks(),
            keep_alive_on_exit: false,
            agent_task_timeout_s: default_agent_task_timeout(),
            print_wait_ceiling_s: default_print_wait_ceiling(),
        }
    }
}

fn default_max_running_tasks() -> u64 {
    4
}

fn default_agent_task_timeout() -> u64 {
    900
}

fn default_print_wait_ceiling() -> u64 {
    3600
}

/// One command hook of the config file. An unknown event or a timeout outside 1..=600 seconds
/// makes the whole config invalid (a start-up failure).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HookConfig {
    pub event: HookEvent,
    pub command: String,
    #[serde(default)]
    pub matcher: String,
    #[serde(default = "default_hook_timeout", deserialize_with = "hook_timeout")]
    pub timeout: u64,
}

fn default_hook_timeout() -> u64 {
    30
}

fn hook_timeout<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let t = lenient::u64(d)?;
    if (1..=600).contains(&t) {
        Ok(t)
    } else {
        Err(serde::de::Error::custom(format!("hook timeout must be between 1 and 600 seconds, got {t}")))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelConfig {
    pub provider: String,
    pub model: String,
    #[serde(deserialize_with = "lenient::u64")]
    pub max_context_size: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<String>,
    /// A name for people (written by `login` for the managed models); not used by kiwi.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// What the model's tokens cost (`[models.<name>.usd_per_mtok]`); `None`: unknown, and so is
    /// the cost of every call to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_mtok: Option<super::prices::ModelPrices>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoopControl {
    pub max_steps_per_turn: u32,
    pub max_retries_per_step: u32,
    pub max_ralph_iterations: i64,
    pub reserved_context_size: u64,
    /// Compact once the context holds this share of the model's window (0 < r ≤ 1), besides the
    /// reserved-space rule.
    pub compaction_trigger_ratio: f64,
    /// The session's token budget (`docs/configuration.md` §2.4): a turn ends with its own stop
    /// reason once the session's model calls have used this many tokens. `None`: no budget.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_session_tokens: Option<u64>,
    /// The session's dollar budget (`docs/configuration.md` §2.4): a turn ends with its own stop
    /// reason once the session's model calls have cost this many US dollars. Needs prices.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_budget_usd: Option<f64>,
}

impl Default for LoopControl {
    fn default() -> Self {
        Self {
            max_steps_per_turn: 100,
            max_retries_per_step: 3,
            max_ralph_iterations: 0,
            reserved_context_size: 50_000,
            compaction_trigger_ratio: 0.85,
            max_session_tokens: None,
            max_budget_usd: None,
        }
    }
}

impl<'de> Deserialize<'de> for LoopControl {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        /// Both spellings of the step limit are read; `max_steps_per_run` wins (reference quirk).
        #[derive(Deserialize)]
        struct Raw {
            #[serde(default, deserialize_with = "lenient::opt_u64")]
            max_steps_per_turn: Option<u64>,
            #[serde(default, deserialize_with = "lenient::opt_u64")]
            max_steps_per_run: Option<u64>,
            #[serde(default, deserialize_with = "lenient::opt_u64")]
            max_retries_per_step: Option<u64>,
            #[serde(default, deserialize_with = "lenient::opt_i64")]
            max_ralph_iterations: Option<i64>,
            #[serde(default, deserialize_with = "lenient::opt_u64")]
            reserved_context_size: Option<u64>,
            #[serde(default)]
            compaction_trigger_ratio: Option<f64>,
            #[serde(default, deserialize_with = "lenient::opt_u64")]
            max_session_tokens: Option<u64>,
            #[serde(default)]
            max_budget_usd: Option<serde_json::Value>,
        }
        let raw = Raw::deserialize(d)?;
        let def = LoopControl::default();
        let clamp32 = |v: u64| u32::try_from(v).unwrap_or(u32::MAX);
        Ok(LoopControl {
            max_steps_per_turn: raw
                .max_steps_per_run
                .or(raw.max_steps_per_turn)
                .map(clamp32)
                .unwrap_or(def.max_steps_per_turn),
            max_retries_per_step: raw.max_retries_per_step.map(clamp32).unwrap_or(def.max_retries_per_step),
            max_ralph_iterations: raw.max_ralph_iterations.unwrap_or(def.max_ralph_iterations),
            reserved_context_size: raw.reserved_context_size.unwrap_or(def.reserved_context_size),
            compaction_trigger_ratio: raw.compaction_trigger_ratio.unwrap_or(def.compaction_trigger_ratio),
            max_session_tokens: raw.max_session_tokens,
            max_budget_usd: match raw.max_budget_usd {
                None | Some(serde_json::Value::Null) => None,
                Some(v) => Some(budget_usd(&v).map_err(serde::de::Error::custom)?),
            },
        })
    }
}

/// A dollar budget: a number (or numeric string) above 0; the message names the key.
fn budget_usd(v: &serde_json::Value) -> Result<f64, String> {
    let n = match v {
        serde_json::Value::Number(n) => super::prices::parse_budget_usd(&n.to_string()),
        serde_json::Value::String(s) => super::prices::parse_budget_usd(s),
        _ => None,
    };
    n.ok_or_else(|| format!("loop_control.max_budget_usd must be a number of US dollars above 0 (got {v})"))
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Services {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moonshot_search: Option<ServiceConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moonshot_fetch: Option<ServiceConfig>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceConfig {
    #[serde(default)]
    pub base_url: String,
    #[serde(default)]
    pub api_key: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub custom_headers: BTreeMap<String, String>,
    /// The stored login whose token replaces `api_key` (the `auth` module's `service_api_key`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OAuthRef>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct McpSettings {
    #[serde(default)]
    pub client: McpClientSettings,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McpClientSettings {
    #[serde(default = "default_tool_call_timeout", deserialize_with = "lenient::u64")]
    pub tool_call_timeout_ms: u64,
}

impl Default for McpClientSettings {
    fn default() -> Self {
        Self { tool_call_timeout_ms: default_tool_call_timeout() }
    }
}

fn default_tool_call_timeout() -> u64 {
    60_000
}

/// Lenient scalars: numeric strings and integral floats for integers, yes/no strings for bools.
mod lenient {
    use serde::de::Error;
    use serde::{Deserialize, Deserializer};
    use serde_json::Value;

    fn to_i64<E: Error>(v: &Value) -> Result<i64, E> {
        match v {
            Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Ok(i)
                } else if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9e15) {
                    Ok(f as i64)
                } else {
                    Err(E::custom(format!("expected an integer, got {n}")))
                }
            }
            Value::String(s) => {
                s.trim().parse::<i64>().map_err(|_| E::custom(format!("expected an integer, got \"{s}\"")))
            }
            other => Err(E::custom(format!("expected an integer, got {other}"))),
        }
    }

    pub fn opt_i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
        match Option::<Value>::deserialize(d)? {
            None | Some(Value::Null) => Ok(None),
            Some(v) => to_i64(&v).map(Some),
        }
    }

    pub fn opt_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        match opt_i64(d)? {
            None => Ok(None),
            Some(i) => u64::try_from(i)
                .map(Some)
                .map_err(|_| D::Error::custom(format!("expected a non-negative integer, got {i}"))),
        }
    }

    pub fn u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        opt_u64(d)?.ok_or_else(|| D::Error::custom("expected an integer"))
    }

    pub fn opt_bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
        match Option::<Value>::deserialize(d)? {
            None | Some(Value::Null) => Ok(None),
            Some(v) => to_bool(v).map(Some),
        }
    }

    pub fn bool<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        to_bool(Value::deserialize(d)?)
    }

    fn to_bool<E: Error>(v: Value) -> Result<bool, E> {
        match v {
            Value::Bool(b) => Ok(b),
            Value::Number(n) if n.as_i64() == Some(0) => Ok(false),
            Value::Number(n) if n.as_i64() == Some(1) => Ok(true),
            Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
                "true" | "yes" | "1" | "on" | "y" | "t" => Ok(true),
                "false" | "no" | "0" | "off" | "n" | "f" => Ok(false),
                _ => Err(E::custom(format!("expected a boolean, got \"{s}\""))),
            },
            other => Err(E::custom(format!("expected a boolean, got {other}"))),
        }
    }
}
