//! Params and results of the wire's client → server methods, and the client's answers to our
//! requests. Wire vocabulary only: the soul never sees these types.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::protocol::{ApprovalDecision, UserInput};

pub const PROTOCOL_VERSION: &str = "1.2";
pub const SERVER_NAME: &str = "Kimi Code CLI";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientInfo {
    pub name: String,
    #[serde(default)]
    pub version: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExternalToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InitializeParams {
    pub protocol_version: String,
    #[serde(default)]
    pub client: Option<ClientInfo>,
    #[serde(default)]
    pub external_tools: Option<Vec<ExternalToolSpec>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerInfo {
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlashCommandInfo {
    pub name: String,
    pub description: String,
    pub aliases: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RejectedTool {
    pub name: String,
    pub reason: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExternalToolsOutcome {
    pub accepted: Vec<String>,
    pub rejected: Vec<RejectedTool>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InitializeResult {
    pub protocol_version: String,
    pub server: ServerInfo,
    pub slash_commands: Vec<SlashCommandInfo>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub external_tools: Option<ExternalToolsOutcome>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptParams {
    pub user_input: UserInput,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum PromptResult {
    Finished,
    Cancelled,
    MaxStepsReached { steps: u32 },
}

/// `{}`: the answer to a successful `cancel`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Empty {}

/// The legacy `interrupt` answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum InterruptResult {
    Ok,
    Idle,
}

/// The client's answer to an `ApprovalRequest`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalReply {
    pub request_id: String,
    pub response: ApprovalDecision,
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
        };
        assert_eq!(
            serde_json::to_string(&r).unwrap(),
            r#"{"protocol_version":"1.2","server":{"name":"Kimi Code CLI","version":"0.1.0"},"slash_commands":[{"name":"clear","description":"Clear the context","aliases":["reset"]}]}"#
        );
    }

    #[test]
    fn approval_reply_requires_request_id() {
        assert!(serde_json::from_str::<ApprovalReply>(r#"{"response":"approve"}"#).is_err());
        assert!(serde_json::from_str::<ApprovalReply>(r#"{"request_id":"a","response":"maybe"}"#).is_err());
        assert!(serde_json::from_str::<ApprovalReply>(r#"{"request_id":"a","response":"approve"}"#).is_ok());
    }
}
