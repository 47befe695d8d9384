//! Session modes and config options (`docs/acp.md` §4.9, §4.10): plan mode is the ACP mode `plan`
//! beside `default`; the model and thinking are select options (category `model` and
//! `thought_level`), so current Zed builds render them as pickers. For a client that takes
//! boolean options (`clientCapabilities.session.configOptions.boolean`) thinking is a boolean.

use agent_client_protocol::v1::schema::{
    SessionConfigOption, SessionConfigOptionCategory, SessionConfigSelectOption, SessionMode, SessionModeState,
};

use crate::config::Config;
use crate::soul::Agent;

pub const DEFAULT_MODE: &str = "default";
pub const PLAN_MODE: &str = "plan";
pub const EDITS_MODE: &str = "acceptEdits";
pub const YOLO_MODE: &str = "yolo";
pub const MODE_OPTION: &str = "mode";
pub const MODEL_OPTION: &str = "model";
pub const THINKING_OPTION: &str = "thinking";
pub const SANDBOX_OPTION: &str = "sandbox";
const ON: &str = "on";
const OFF: &str = "off";

/// Every mode offered: id, name, description.
const MODES: [(&str, &str, &str); 4] = [
    (DEFAULT_MODE, "Default", "Works on the task, asking before it acts."),
    (EDITS_MODE, "Accept edits", "Edits files inside the work dir without asking; asks for everything else."),
    (PLAN_MODE, "Plan", "Explores and writes a plan; changes nothing until the plan is approved."),
    (YOLO_MODE, "Yolo", "Approves every action without asking, for this connection only."),
];

/// The mode outside plan mode, read from the core's approval state: `yolo` while yolo is on
/// (an ACP mode, a `/yolo`), `acceptEdits` while the edits grant is on, else `default`.
pub fn base_mode(agent: &Agent) -> &'static str {
    if agent.state.yolo() {
        YOLO_MODE
    } else if agent.approvals.edits_approved() {
        EDITS_MODE
    } else {
        DEFAULT_MODE
    }
}

/// The session's current mode: `plan` while the core's plan mode is on, else [`base_mode`].
pub fn current_mode(agent: &Agent) -> &'static str {
    if agent.state.plan_mode() { PLAN_MODE } else { base_mode(agent) }
}

/// A mode id we offer, as the `'static` id; `None` for an id we do not offer.
pub fn parse_mode(id: &str) -> Option<&'static str> {
    MODES.iter().map(|m| m.0).find(|m| *m == id)
}

/// Switches the core's approval state to `mode` (exactly one of them holds afterwards): plan
/// mode, the edits grant and yolo are all in memory for this run (`docs/approvals.md`); only
/// the core's own plan mode is remembered by the session, as the wire's `set_plan_mode` does.
/// Returns whether plan mode is on afterwards.
pub fn apply_mode(agent: &Agent, mode: &str) -> bool {
    let plan = mode == PLAN_MODE;
    agent.approvals.approve_edits_in((mode == EDITS_MODE).then(|| agent.env.work_dir.clone()));
    if agent.state.yolo() != (mode == YOLO_MODE) {
        agent.state.set_yolo_for_run(mode == YOLO_MODE);
    }
    if agent.state.plan_mode() != plan {
        agent.state.set_plan_mode(plan);
    }
    plan
}

pub fn mode_state(current: &str) -> SessionModeState {
    let current = parse_mode(current).unwrap_or(DEFAULT_MODE);
    SessionModeState::new(
        current,
        MODES.iter().map(|(id, name, about)| SessionMode::new(*id, *name).description(about.to_string())).collect(),
    )
}

fn mode_option(current: &str) -> SessionConfigOption {
    let values = MODES
        .iter()
        .map(|(id, name, about)| SessionConfigSelectOption::new(*id, *name).description(about.to_string()))
        .collect::<Vec<_>>();
    SessionConfigOption::select(MODE_OPTION, "Mode", current.to_string(), values)
        .category(SessionConfigOptionCategory::Mode)
}

/// The model a session runs (`-m`, else the config's default) and whether thinking is on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelChoice {
    pub model: Option<String>,
    pub thinking: bool,
}

impl ModelChoice {
    pub fn of(config: &Config, model: Option<&str>, thinking: Option<bool>) -> Self {
        let model = model.map(str::to_string).or_else(|| Some(config.default_model.clone()).filter(|m| !m.is_empty()));
        Self { model, thinking: thinking.unwrap_or(config.default_thinking) }
    }
}

/// The session's config options: its mode, model and thinking (a boolean when `boolean`).
pub fn config_options(config: &Config, choice: &ModelChoice, mode: &str, boolean: bool) -> Vec<SessionConfigOption> {
    let mut options = vec![mode_option(mode)];
    if let Some(current) = &choice.model {
        let models: Vec<SessionConfigSelectOption> = config
            .models
            .iter()
            .map(|(key, m)| {
                let name = m.display_name.clone().unwrap_or_else(|| key.clone());
                SessionConfigSelectOption::new(key.clone(), name).description(m.model.clone())
            })
            .collect();
        if !models.is_empty() {
            options.push(
                SessionConfigOption::select(MODEL_OPTION, "Model", current.clone(), models)
                    .category(SessionConfigOptionCategory::Model),
            );
        }
    }
    let thinking = if boolean {
        SessionConfigOption::boolean(THINKING_OPTION, "Thinking", choice.thinking)
    } else {
        SessionConfigOption::select(
            THINKING_OPTION,
            "Thinking",
            if choice.thinking { ON } else { OFF },
            vec![SessionConfigSelectOption::new(OFF, "Off"), SessionConfigSelectOption::new(ON, "On")],
        )
    };
    options.push(thinking.category(SessionConfigOptionCategory::ThoughtLevel));
    options
}

/// A value `session/set_config_option` sent: a value id, or a boolean (`type: "boolean"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionValue<'a> {
    Id(&'a str),
    Bool(bool),
}

impl<'a> OptionValue<'a> {
    /// The value of `value`; `None` for a kind of value kiwi does not know.
    pub fn of(value: &'a agent_client_protocol::v1::schema::SessionConfigOptionValue) -> Option<Self> {
        match (value.as_value_id(), value.as_bool()) {
            (Some(id), _) => Some(Self::Id(&id.0)),
            (None, Some(on)) => Some(Self::Bool(on)),
            (None, None) => None,
        }
    }

    /// The value id a select option takes; a boolean is refused with the reason.
    pub fn id(self, option: &str) -> Result<&'a str, String> {
        match self {
            Self::Id(id) => Ok(id),
            Self::Bool(_) => Err(format!("`{option}` is a select option: give one of its value ids, not a boolean")),
        }
    }
}

/// The `sandbox` option (spec sandbox.md §2.5), offered when the run is sandboxed (the user
/// asked for it; a run without a sandbox shows the reference's options only).
pub fn sandbox_option(sandbox: &crate::agent_env::SessionSandbox) -> Option<SessionConfigOption> {
    use crate::sandbox::SandboxMode;
    if !sandbox.floor().is_sandboxed() {
        return None;
    }
    let values: Vec<SessionConfigSelectOption> = [
        (SandboxMode::ReadOnly, "Read only"),
        (SandboxMode::WorkspaceWrite, "Workspace write"),
        (SandboxMode::Off, "Off"),
    ]
    .into_iter()
    .map(|(mode, name)| SessionConfigSelectOption::new(mode.as_str(), name))
    .collect();
    Some(SessionConfigOption::select(SANDBOX_OPTION, "Sandbox", sandbox.current().mode().as_str(), values))
}

/// A requested option change applied to `choice`; `Err` is the readable reason it is refused.
/// Thinking takes a boolean or `on`/`off`, whichever shape the client was shown.
pub fn apply(config: &Config, choice: &ModelChoice, id: &str, value: OptionValue<'_>) -> Result<ModelChoice, String> {
    let mut next = choice.clone();
    match id {
        MODEL_OPTION => {
            let value = value.id(id)?;
            if !config.models.contains_key(value) {
                return Err(format!("unknown model `{value}`"));
            }
            next.model = Some(value.to_string());
        }
        THINKING_OPTION => {
            next.thinking = match value {
                OptionValue::Bool(on) => on,
                OptionValue::Id(ON) => true,
                OptionValue::Id(OFF) => false,
                OptionValue::Id(other) => {
                    return Err(format!("thinking is `on` or `off` (or a boolean), not `{other}`"));
                }
            }
        }
        _ => return Err(format!("unknown config option `{id}`")),
    }
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        serde_json::from_value(serde_json::json!({
            "default_model": "a",
            "models": {"a": {"provider": "p", "model": "m-a", "max_context_size": 1},
                       "b": {"provider": "p", "model": "m-b", "max_context_size": 1}}
        }))
        .unwrap()
    }

    #[test]
    fn options_serialize_as_the_schema_says() {
        let config = config();
        let choice = ModelChoice::of(&config, None, None);
        let json = serde_json::to_value(config_options(&config, &choice, "default", false)).unwrap();
        assert_eq!(json[0]["id"], "mode");
        assert_eq!(json[0]["category"], "mode");
        assert_eq!(json[0]["currentValue"], "default");
        let ids: Vec<&str> =
            json[0]["options"].as_array().unwrap().iter().map(|o| o["value"].as_str().unwrap()).collect();
        assert_eq!(ids, ["default", "acceptEdits", "plan", "yolo"]);
        assert_eq!(
            serde_json::Value::Array(json.as_array().unwrap()[1..].to_vec()),
            serde_json::json!([
                {"id":"model","name":"Model","category":"model","type":"select","currentValue":"a",
                 "options":[{"value":"a","name":"a","description":"m-a"},{"value":"b","name":"b","description":"m-b"}]},
                {"id":"thinking","name":"Thinking","category":"thought_level","type":"select","currentValue":"off",
                 "options":[{"value":"off","name":"Off"},{"value":"on","name":"On"}]}
            ])
        );
    }

    #[test]
    fn thinking_is_a_boolean_for_a_client_that_takes_booleans() {
        let config = config();
        let choice = ModelChoice::of(&config, None, Some(true));
        let json = serde_json::to_value(config_options(&config, &choice, "default", true)).unwrap();
        assert_eq!(
            json.as_array().unwrap().last().unwrap(),
            &serde_json::json!({"id":"thinking","name":"Thinking","category":"thought_level","type":"boolean",
                                "currentValue":true})
        );
    }

    #[test]
    fn bad_changes_are_refused() {
        use OptionValue::{Bool, Id};
        let config = config();
        let choice = ModelChoice::of(&config, None, None);
        assert_eq!(apply(&config, &choice, "model", Id("b")).unwrap().model.as_deref(), Some("b"));
        assert!(apply(&config, &choice, "model", Id("zz")).unwrap_err().contains("unknown model"));
        assert!(apply(&config, &choice, "model", Bool(true)).unwrap_err().contains("select option"));
        assert!(apply(&config, &choice, "thinking", Id("maybe")).is_err());
        assert!(apply(&config, &choice, "thinking", Bool(true)).unwrap().thinking);
        assert!(apply(&config, &choice, "thinking", Id("on")).unwrap().thinking);
        assert!(apply(&config, &choice, "speed", Id("on")).is_err());
        assert_eq!(parse_mode("plan"), Some("plan"));
        assert_eq!(parse_mode("yolo"), Some("yolo"));
        assert_eq!(parse_mode("bypassPermissions"), None);
    }
}

/// The legacy `models` member of session answers (`docs/acp.md` §4.4, §12.6), still read by older
/// clients that predate config options.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LegacyModels {
    pub available_models: Vec<LegacyModel>,
    pub current_model_id: String,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LegacyModel {
    pub model_id: String,
    pub name: String,
}

/// `session/set_model` (legacy): `modelId` is `<key>` or `<key>,thinking`.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetModelRequest {
    pub session_id: String,
    pub model_id: String,
}

const THINKING_SUFFIX: &str = ",thinking";

fn always_thinks(model: &str) -> bool {
    let m = model.to_lowercase();
    m.contains("thinking") || m.contains("reason")
}

pub fn legacy_models(config: &Config, choice: &ModelChoice) -> Option<LegacyModels> {
    let current = choice.model.as_ref()?;
    let mut available = Vec::new();
    for (key, m) in &config.models {
        if always_thinks(&m.model) {
            available.push(LegacyModel { model_id: format!("{key}{THINKING_SUFFIX}"), name: m.model.clone() });
            continue;
        }
        available.push(LegacyModel { model_id: key.clone(), name: m.model.clone() });
        if m.capabilities.iter().any(|c| c == "thinking" || c == "always_thinking") {
            available.push(LegacyModel {
                model_id: format!("{key}{THINKING_SUFFIX}"),
                name: format!("{} (thinking)", m.model),
            });
        }
    }
    let suffix = if choice.thinking { THINKING_SUFFIX } else { "" };
    Some(LegacyModels { available_models: available, current_model_id: format!("{current}{suffix}") })
}

/// The model choice a legacy model id names; `None` for a model that is not configured.
pub fn parse_legacy_model(config: &Config, id: &str) -> Option<ModelChoice> {
    let (key, thinking) = match id.strip_suffix(THINKING_SUFFIX) {
        Some(key) => (key, true),
        None => (id, false),
    };
    config.models.contains_key(key).then(|| ModelChoice { model: Some(key.to_string()), thinking })
}

#[cfg(test)]
mod legacy_tests {
    use super::*;

    #[test]
    fn legacy_models_list_thinking_variants() {
        let config: Config = serde_json::from_value(serde_json::json!({
            "default_model": "k",
            "models": {"k": {"provider": "p", "model": "kimi", "max_context_size": 1, "capabilities": ["thinking"]},
                       "r": {"provider": "p", "model": "r1-reasoner", "max_context_size": 1}}
        }))
        .unwrap();
        let models = legacy_models(&config, &ModelChoice::of(&config, None, Some(true))).unwrap();
        assert_eq!(
            serde_json::to_value(models).unwrap(),
            serde_json::json!({"availableModels":[
                {"modelId":"k","name":"kimi"},{"modelId":"k,thinking","name":"kimi (thinking)"},
                {"modelId":"r,thinking","name":"r1-reasoner"}],"currentModelId":"k,thinking"})
        );
        assert_eq!(
            parse_legacy_model(&config, "k,thinking"),
            Some(ModelChoice { model: Some("k".into()), thinking: true })
        );
        assert_eq!(parse_legacy_model(&config, "nope"), None);
    }
}
