//! The wire's method table: every method a client may call, with its typed params, parsed in one
//! step from a generic JSON-RPC request (`docs/protocol.md` §2-§3, `docs/protocol-1.10.md` §2.1).
//!
//! Errors: a method outside the table is -32601 `Unexpected method received: <m>`; params that
//! do not fit the method are -32602 ``Invalid parameters for method `<m>` ``. Notifications of
//! these methods are dropped, except the legacy `interrupt`.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::params::{ForkParams, InitializeParams, PromptParams, SetPlanModeParams, SteerParams, UndoParams};
use crate::protocol::UserInput;
use crate::rpc::{ErrorCode, ErrorObject};

/// A client request of the wire protocol.
#[derive(Debug, PartialEq)]
pub enum ClientRequest {
    Initialize(InitializeParams),
    Prompt(PromptParams),
    Steer(SteerParams),
    /// Takes any params (or none).
    Replay,
    SetPlanMode(SetPlanModeParams),
    Cancel,
    /// The legacy stdio server's `run`: `params.input` (or `params.prompt`), a string.
    Run(UserInput),
    /// The legacy stdio server's `interrupt`.
    Interrupt,
    /// kiwi's extension: fork the session (`docs/protocol-1.10.md` §2.8).
    Fork(ForkParams),
    /// kiwi's extension: undo turns, restoring kiwi's file edits (`docs/protocol-1.10.md` §2.9).
    Undo(UndoParams),
}

impl ClientRequest {
    pub fn parse(method: &str, params: Option<Value>) -> Result<Self, ErrorObject> {
        Ok(match method {
            "initialize" => ClientRequest::Initialize(typed(method, params)?),
            "prompt" => ClientRequest::Prompt(typed(method, params)?),
            "steer" => ClientRequest::Steer(typed(method, params)?),
            "replay" => ClientRequest::Replay,
            "set_plan_mode" => ClientRequest::SetPlanMode(typed(method, params)?),
            "cancel" => ClientRequest::Cancel,
            "run" => ClientRequest::Run(legacy_run_input(params).ok_or_else(|| invalid_params(method))?),
            "interrupt" => ClientRequest::Interrupt,
            "fork" => ClientRequest::Fork(match params {
                None | Some(Value::Null) => ForkParams::default(),
                params => typed(method, params)?,
            }),
            "undo" => ClientRequest::Undo(match params {
                None | Some(Value::Null) => UndoParams::default(),
                params => {
                    let p: UndoParams = typed(method, params)?;
                    if p.turn_index.is_some() && p.turns.is_some() {
                        return Err(invalid_params(method));
                    }
                    p
                }
            }),
            other => {
                return Err(ErrorCode::MethodNotFound.with_message(format!("Unexpected method received: {other}")));
            }
        })
    }
}

/// A client notification the wire acts on.
#[derive(Debug, PartialEq, Eq)]
pub enum ClientNotification {
    Interrupt,
}

impl ClientNotification {
    /// `None` for everything else (dropped without an answer, as notifications must be).
    pub fn parse(method: &str) -> Option<Self> {
        (method == "interrupt").then_some(ClientNotification::Interrupt)
    }
}

pub fn invalid_params(method: &str) -> ErrorObject {
    ErrorCode::InvalidParams.with_message(format!("Invalid parameters for method `{method}`"))
}

fn typed<T: DeserializeOwned>(method: &str, params: Option<Value>) -> Result<T, ErrorObject> {
    serde_json::from_value(params.unwrap_or(Value::Null)).map_err(|e| {
        tracing::debug!("invalid params for {method}: {e}");
        invalid_params(method)
    })
}

fn legacy_run_input(params: Option<Value>) -> Option<UserInput> {
    #[derive(Deserialize)]
    struct RunParams {
        input: Option<Value>,
        prompt: Option<Value>,
    }
    let p: RunParams = serde_json::from_value(params?).ok()?;
    match p.input.or(p.prompt)? {
        Value::String(s) => Some(UserInput::Text(s)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(method: &str, params: Value) -> Result<ClientRequest, ErrorObject> {
        ClientRequest::parse(method, Some(params))
    }

    #[test]
    fn legacy_run_params() {
        assert_eq!(parse("run", json!({"input":"a"})), Ok(ClientRequest::Run(UserInput::Text("a".into()))));
        assert_eq!(parse("run", json!({"prompt":"b"})), Ok(ClientRequest::Run(UserInput::Text("b".into()))));
        for bad in [json!({"input":5}), json!({}), json!([1])] {
            assert_eq!(parse("run", bad).unwrap_err().message, "Invalid parameters for method `run`");
        }
        assert!(ClientRequest::parse("run", None).is_err());
    }

    #[test]
    fn prompt_params_validation() {
        assert!(parse("prompt", json!({})).is_err());
        assert!(parse("prompt", json!({"user_input":[{"type":"bogus"}]})).is_err());
        assert!(parse("prompt", json!({"user_input":5})).is_err());
        assert!(parse("prompt", json!({"user_input":[]})).is_ok());
        let e = ClientRequest::parse("prompt", None).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (-32602, "Invalid parameters for method `prompt`"));
    }

    #[test]
    fn the_1_10_methods() {
        let e = parse("steer", json!({})).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (-32602, "Invalid parameters for method `steer`"));
        assert!(parse("steer", json!({"user_input":[{"type":"nope"}]})).is_err());
        assert!(matches!(parse("steer", json!({"user_input":"more"})), Ok(ClientRequest::Steer(_))));
        assert_eq!(parse("replay", json!([1])), Ok(ClientRequest::Replay));
        assert_eq!(ClientRequest::parse("replay", None), Ok(ClientRequest::Replay));
        let e = ClientRequest::parse("set_plan_mode", None).unwrap_err();
        assert_eq!(e.message, "Invalid parameters for method `set_plan_mode`");
        assert_eq!(
            parse("set_plan_mode", json!({"enabled":true,"extra":1})),
            Ok(ClientRequest::SetPlanMode(SetPlanModeParams { enabled: true }))
        );
    }

    #[test]
    fn unknown_methods_and_notifications() {
        let e = parse("nope", json!({})).unwrap_err();
        assert_eq!((e.code, e.message.as_str()), (-32601, "Unexpected method received: nope"));
        // Methods that take no params ignore whatever is sent.
        assert_eq!(parse("cancel", json!([1, 2])), Ok(ClientRequest::Cancel));
        assert_eq!(ClientNotification::parse("interrupt"), Some(ClientNotification::Interrupt));
        assert_eq!(ClientNotification::parse("prompt"), None);
        assert_eq!(ClientRequest::parse("fork", None), Ok(ClientRequest::Fork(ForkParams { turn_index: None })));
        assert_eq!(ClientRequest::parse("undo", None), Ok(ClientRequest::Undo(UndoParams::default())));
        assert_eq!(
            parse("undo", json!({"turns": 2})),
            Ok(ClientRequest::Undo(UndoParams { turn_index: None, turns: Some(2) }))
        );
        for bad in [json!({"turns": 1, "turn_index": 0}), json!({"turns": -1}), json!({"turn_index": "x"})] {
            assert_eq!(parse("undo", bad).unwrap_err().message, "Invalid parameters for method `undo`");
        }
        assert_eq!(
            parse("fork", json!({"turn_index": 2})),
            Ok(ClientRequest::Fork(ForkParams { turn_index: Some(2) }))
        );
        let e = parse("fork", json!({"turn_index": -1})).unwrap_err();
        assert_eq!(e.message, "Invalid parameters for method `fork`");
    }
}
