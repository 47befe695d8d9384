//! Params and results of the wire's client → server methods (`docs/protocol-1.10.md` §2), and the
//! client's answers to our requests (§3.5). Wire vocabulary only: the soul never sees these types.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::{Map, Value};

use crate::protocol::{ApprovalDecision, HookAction, UserInput};

/// The version `initialize` answers whatever the client sent (there is no negotiation).
pub const PROTOCOL_VERSION: &str = "1.10";
pub const SERVER_NAME: &str = "Kimi Code CLI";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClientInfo {
    pub name: String,
    #[serde(default)]
    pub version: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ExternalToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Map<String, Value>,
}

/// `initialize.capabilities`: what the client can show.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClientCapabilities {
    #[serde(default)]
    pub supports_question: bool,
    #[serde(default)]
    pub supports_plan_mode: bool,
}

/// One entry of `initialize.hooks`. The event is kept as text: unknown names are skipped, not
/// refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HookSubscriptionSpec {
    pub id: String,
    pub event: String,
    #[serde(default)]
    pub matcher: String,
    #[serde(default = "default_hook_timeout")]
    pub timeout: u64,
}

fn default_hook_timeout() -> u64 {
    30
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InitializeParams {
    pub protocol_version: String,
    #[serde(default)]
    pub client: Option<ClientInfo>,
    #[serde(default)]
    pub external_tools: Option<Vec<ExternalToolSpec>>,
    #[serde(default, deserialize_with = "object_or_null")]
    pub capabilities: Option<ClientCapabilities>,
    #[serde(default, deserialize_with = "objects_or_null")]
    pub hooks: Option<Vec<HookSubscriptionSpec>>,
    /// kiwi extension: the kiwi-only features the client wants (`"fork"`, `"undo"`); unknown
    /// names are ignored. A client that does not send it sees exactly the reference's answer
    /// (`docs/compatibility.md`).
    #[serde(default)]
    pub extensions: Option<Vec<String>>,
}

/// serde reads a struct from a JSON array too; a client's object must be an object.
fn object_or_null<'de, D: Deserializer<'de>, T: DeserializeOwned>(d: D) -> Result<Option<T>, D::Error> {
    match Option::<Value>::deserialize(d)? {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::Object(_)) => serde_json::from_value(v).map(Some).map_err(serde::de::Error::custom),
        Some(other) => Err(serde::de::Error::custom(format!("expected an object, got {other}"))),
    }
}

fn objects_or_null<'de, D: Deserializer<'de>, T: DeserializeOwned>(d: D) -> Result<Option<Vec<T>>, D::Error> {
    match Option::<Vec<Value>>::deserialize(d)? {
        None => Ok(None),
        Some(items) => items
            .into_iter()
            .map(|v| match v {
                Value::Object(_) => serde_json::from_value(v).map_err(serde::de::Error::custom),
                other => Err(serde::de::Error::custom(format!("expected an object, got {other}"))),
            })
            .collect::<Result<Vec<T>, D::Error>>()
            .map(Some),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SlashCommandInfo {
    pub name: String,
    pub description: String,
    pub aliases: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RejectedTool {
    pub name: String,
    pub reason: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ExternalToolsOutcome {
    pub accepted: Vec<String>,
    pub rejected: Vec<RejectedTool>,
}

/// `initialize.hooks` of the result: the events hooks can attach to, and how many are attached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HooksInfo {
    pub supported_events: Vec<String>,
    /// Event → number of hooks (config hooks and client subscriptions).
    pub configured: Map<String, Value>,
}

/// `initialize.capabilities` of the result: always `{"supports_question":true}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ServerCapabilities {
    pub supports_question: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InitializeResult {
    pub protocol_version: String,
    pub server: ServerInfo,
    pub slash_commands: Vec<SlashCommandInfo>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub external_tools: Option<ExternalToolsOutcome>,
    pub hooks: HooksInfo,
    pub capabilities: ServerCapabilities,
    /// The run's sandbox when it is not off (`--sandbox`/`[sandbox]`: the user asked for it;
    /// spec sandbox.md §2.4). A kiwi extension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxInfo>,
    /// The session's cost so far; only for a client granted the `cost` extension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<CostInfo>,
    /// kiwi extension: the extensions granted of those the client asked for; absent when it asked
    /// for none (then the answer is the reference's, member for member).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<Vec<String>>,
}

/// `initialize`'s `cost` member (the `cost` extension).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CostInfo {
    /// US dollars the session's model calls cost so far; `null` when not known (the model has
    /// no prices, or an earlier call had none).
    pub session_usd: Option<f64>,
    /// The session's dollar budget, when there is one.
    pub max_budget_usd: Option<f64>,
}

/// `initialize`'s `sandbox` member.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct SandboxInfo {
    pub mode: String,
    pub network: bool,
    pub writable_roots: Vec<String>,
    /// The model may ask to run a command outside the sandbox (and somebody can be asked).
    pub escalation: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PromptParams {
    pub user_input: UserInput,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum PromptResult {
    Finished,
    Cancelled,
    MaxStepsReached {
        steps: u32,
    },
    /// The session's token budget is used up (`docs/protocol-1.10.md` §2.4): `tokens` counted of
    /// `max_session_tokens`.
    TokenBudgetReached {
        tokens: u64,
        max_session_tokens: u64,
    },
    /// The session's dollar budget is used up (kiwi; `--max-budget-usd`,
    /// `loop_control.max_budget_usd`): `cost_usd` spent of `max_budget_usd`.
    BudgetReached {
        cost_usd: f64,
        max_budget_usd: f64,
    },
}

impl PromptResult {
    /// The answer to a `prompt` whose turn ended without an error (the wire and the web alike).
    pub fn of(outcome: &crate::soul::TurnOutcome) -> Self {
        use crate::soul::TurnOutcome;
        match *outcome {
            TurnOutcome::Finished(_) => PromptResult::Finished,
            TurnOutcome::Cancelled => PromptResult::Cancelled,
            TurnOutcome::MaxStepsReached(steps) => PromptResult::MaxStepsReached { steps },
            TurnOutcome::TokenBudgetReached { used, limit } => {
                PromptResult::TokenBudgetReached { tokens: used, max_session_tokens: limit }
            }
            TurnOutcome::CostBudgetReached { spent, limit } => {
                PromptResult::BudgetReached { cost_usd: spent, max_budget_usd: limit }
            }
        }
    }
}

/// `steer` takes the same input as `prompt`.
pub type SteerParams = PromptParams;

/// `{"status":"steered"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum SteerResult {
    Steered,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SetPlanModeParams {
    /// A JSON boolean, or the strings `"true"` / `"false"`.
    #[serde(deserialize_with = "bool_or_bool_text")]
    pub enabled: bool,
}

fn bool_or_bool_text<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    match Value::deserialize(d)? {
        Value::Bool(b) => Ok(b),
        Value::String(s) if s == "true" => Ok(true),
        Value::String(s) if s == "false" => Ok(false),
        other => Err(serde::de::Error::custom(format!("expected a boolean, got {other}"))),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OkStatus {
    Ok,
}

/// `fork` (a kiwi extension, `docs/protocol-1.10.md` §2.8): fork after turn `turn_index`, or
/// after every turn when it is absent or null.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ForkParams {
    #[serde(default)]
    pub turn_index: Option<u64>,
}

/// The new session of a `fork`: its id and title (`Fork: <title>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ForkResult {
    pub session_id: String,
    pub title: String,
}

/// `undo` (a kiwi extension, `docs/protocol-1.10.md` §2.9): undo turn `turn_index` and every
/// turn after it, or the last `turns` turns; the last turn when both are absent. Not both.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct UndoParams {
    #[serde(default)]
    pub turn_index: Option<u64>,
    #[serde(default)]
    pub turns: Option<u64>,
}

/// A file an `undo` left as it is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct UndoSkippedFile {
    pub path: String,
    pub reason: String,
}

/// What an `undo` did: the first turn undone, how many, the files restored (`restored`: the
/// earlier content is back; `deleted`: kiwi had created them) and not restored, whether the
/// session state is back, and the answer `/undo` shows (`message`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct UndoResult {
    pub turn_index: u64,
    pub turns_undone: u64,
    pub restored: Vec<String>,
    pub deleted: Vec<String>,
    pub not_restored: Vec<UndoSkippedFile>,
    pub state_restored: bool,
    pub message: String,
}

/// `{"status":"ok","plan_mode":bool}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SetPlanModeResult {
    pub status: OkStatus,
    pub plan_mode: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReplayStatus {
    Finished,
    Cancelled,
}

/// `{"status","events","requests"}`: how a replay ended and what it sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ReplayResult {
    pub status: ReplayStatus,
    pub events: u64,
    pub requests: u64,
}

/// `{}`: the answer to a successful `cancel`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Empty {}

/// The legacy `interrupt` answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum InterruptResult {
    Ok,
    Idle,
}

/// The client's answer to an `ApprovalRequest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ApprovalReply {
    pub request_id: String,
    pub response: ApprovalDecision,
    #[serde(default)]
    pub feedback: String,
}

/// The client's answer to a `QuestionRequest`: question text → answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct QuestionReply {
    pub request_id: String,
    #[serde(default)]
    pub answers: Map<String, Value>,
}

/// The client's answer to a `HookRequest`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HookReply {
    pub request_id: String,
    #[serde(default)]
    pub action: HookAction,
    #[serde(default)]
    pub reason: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_results_match_the_spec() {
        assert_eq!(serde_json::to_string(&PromptResult::Finished).unwrap(), r#"{"status":"finished"}"#);
        assert_eq!(serde_json::to_string(&PromptResult::Cancelled).unwrap(), r#"{"status":"cancelled"}"#);
        assert_eq!(
            serde_json::to_string(&PromptResult::MaxStepsReached { steps: 1 }).unwrap(),
            r#"{"status":"max_steps_reached","steps":1}"#
        );
        assert_eq!(
            serde_json::to_string(&PromptResult::TokenBudgetReached { tokens: 12, max_session_tokens: 10 }).unwrap(),
            r#"{"status":"token_budget_reached","tokens":12,"max_session_tokens":10}"#
        );
        assert_eq!(
            serde_json::to_string(&PromptResult::BudgetReached { cost_usd: 0.0125, max_budget_usd: 0.01 }).unwrap(),
            r#"{"status":"budget_reached","cost_usd":0.0125,"max_budget_usd":0.01}"#
        );
        assert_eq!(serde_json::to_string(&InterruptResult::Idle).unwrap(), r#"{"status":"idle"}"#);
        assert_eq!(serde_json::to_string(&Empty {}).unwrap(), "{}");
    }

    #[test]
    fn initialize_params_parse_and_reject() {
        let p: InitializeParams = serde_json::from_str(
            r#"{"protocol_version":"1.2","client":{"name":"c"},"external_tools":[{"name":"t","description":"d","parameters":{"type":"object"}}],"extra":1}"#,
        )
        .unwrap();
        assert_eq!(p.client.unwrap().version, None);
        assert!(serde_json::from_str::<InitializeParams>("{}").is_err());
        assert!(
            serde_json::from_str::<InitializeParams>(
                r#"{"protocol_version":"1","external_tools":[{"name":"t","description":"d","parameters":5}]}"#
            )
            .is_err()
        );
    }

    #[test]
    fn initialize_result_omits_empty_external_tools() {
        let r = InitializeResult {
            protocol_version: PROTOCOL_VERSION.into(),
            server: ServerInfo { name: SERVER_NAME.into(), version: "0.1.0".into() },
            slash_commands: vec![SlashCommandInfo {
                name: "clear".into(),
                description: "Clear the context".into(),
                aliases: vec!["reset".into()],
            }],
            external_tools: None,
            hooks: HooksInfo { supported_events: vec!["Stop".into()], configured: Map::new() },
            capabilities: ServerCapabilities { supports_question: true },
            sandbox: None,
            cost: None,
            extensions: None,
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"protocol_version":"1.10","server":{"name":"Kimi Code CLI","version":"0.1.0"},"slash_commands":[{"name":"clear","description":"Clear the context","aliases":["reset"]}],"hooks":{"supported_events":["Stop"],"configured":{}},"capabilities":{"supports_question":true}}"#
        );
    }

    #[test]
    fn initialize_1_10_params() {
        let p: InitializeParams = serde_json::from_str(
            r#"{"protocol_version":"1.7","capabilities":{"supports_question":true},"hooks":[{"id":"h1","event":"PreToolUse","matcher":"Shell","timeout":5},{"id":"h2","event":"Stop"}]}"#,
        )
        .unwrap();
        assert_eq!(p.capabilities, Some(ClientCapabilities { supports_question: true, supports_plan_mode: false }));
        let hooks = p.hooks.unwrap();
        assert_eq!((hooks[1].matcher.as_str(), hooks[1].timeout), ("", 30));
        let nulls: InitializeParams =
            serde_json::from_str(r#"{"protocol_version":"1.0","capabilities":null,"hooks":null}"#).unwrap();
        assert_eq!((nulls.capabilities, nulls.hooks), (None, None));
        let asked: InitializeParams =
            serde_json::from_str(r#"{"protocol_version":"1.10","extensions":["undo","nope"]}"#).unwrap();
        assert_eq!(asked.extensions, Some(vec!["undo".to_string(), "nope".to_string()]));
        for bad in [
            r#"{"protocol_version":"1","extensions":"undo"}"#,
            r#"{"protocol_version":"1","extensions":[1]}"#,
            r#"{"protocol_version":"1","capabilities":{"supports_question":"yes"}}"#,
            r#"{"protocol_version":"1","capabilities":[]}"#,
            r#"{"protocol_version":"1","hooks":[{"event":"Stop"}]}"#,
            r#"{"protocol_version":"1","hooks":[{"id":"a","event":"Stop","timeout":"x"}]}"#,
            r#"{"protocol_version":"1","hooks":{"id":"a"}}"#,
            r#"{"protocol_version":"1","hooks":[["a","Stop"]]}"#,
        ] {
            assert!(serde_json::from_str::<InitializeParams>(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn new_method_params_and_results() {
        for (json, on) in [(r#"{"enabled":true}"#, true), (r#"{"enabled":"false","x":1}"#, false)] {
            assert_eq!(serde_json::from_str::<SetPlanModeParams>(json).unwrap().enabled, on);
        }
        for bad in [r#"{}"#, r#"{"enabled":"yes"}"#, r#"{"enabled":1}"#, r#"{"enabled":null}"#] {
            assert!(serde_json::from_str::<SetPlanModeParams>(bad).is_err(), "{bad}");
        }
        assert_eq!(
            serde_json::to_string(&SetPlanModeResult { status: OkStatus::Ok, plan_mode: true }).unwrap(),
            r#"{"status":"ok","plan_mode":true}"#
        );
        assert_eq!(serde_json::to_string(&SteerResult::Steered).unwrap(), r#"{"status":"steered"}"#);
        assert_eq!(
            serde_json::to_string(&ReplayResult { status: ReplayStatus::Cancelled, events: 3, requests: 1 }).unwrap(),
            r#"{"status":"cancelled","events":3,"requests":1}"#
        );
    }

    #[test]
    fn answers_to_our_requests() {
        let a: ApprovalReply = serde_json::from_str(r#"{"request_id":"a","response":"reject"}"#).unwrap();
        assert_eq!(a.feedback, "");
        let q: QuestionReply = serde_json::from_str(r#"{"request_id":"q","answers":{"Q?":"Yes"}}"#).unwrap();
        assert_eq!(q.answers["Q?"], "Yes");
        assert!(serde_json::from_str::<QuestionReply>(r#"{"answers":{}}"#).is_err());
        let h: HookReply = serde_json::from_str(r#"{"request_id":"h"}"#).unwrap();
        assert_eq!((h.action, h.reason.as_str()), (HookAction::Allow, ""));
        assert!(serde_json::from_str::<HookReply>(r#"{"request_id":"h","action":"deny"}"#).is_err());
    }

    #[test]
    fn approval_reply_requires_request_id() {
        assert!(serde_json::from_str::<ApprovalReply>(r#"{"response":"approve"}"#).is_err());
        assert!(serde_json::from_str::<ApprovalReply>(r#"{"request_id":"a","response":"maybe"}"#).is_err());
        assert!(serde_json::from_str::<ApprovalReply>(r#"{"request_id":"a","response":"approve"}"#).is_ok());
    }
}
