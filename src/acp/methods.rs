//! ACP's method table: every method a client may call, with its typed params from the ACP schema,
//! parsed in one step from a generic JSON-RPC message (as the wire's `wire::methods`).
//!
//! Errors: a method outside the table is -32601 `Method not found` with `{"method": <m>}`; params
//! that do not fit are -32602 `Invalid params` with the reason in `data.error`.

use agent_client_protocol::v1::schema::{
    AuthenticateRequest, CancelNotification, CloseSessionRequest, DeleteSessionRequest, InitializeRequest,
    ListSessionsRequest, LoadSessionRequest, LogoutRequest, NewSessionRequest, PromptRequest, ResumeSessionRequest,
    SetSessionConfigOptionRequest, SetSessionModeRequest,
};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::client_profile::ClientProfile;
use super::errors;
use super::modes::SetModelRequest;
use crate::rpc::ErrorObject;

/// A client request of ACP.
#[derive(Debug)]
pub enum AcpRequest {
    // Boxed: the client capabilities make it several times larger than every other request.
    Initialize(Box<InitializeRequest>, ClientProfile),
    Authenticate(AuthenticateRequest),
    /// `logout`: the stored login removed, as `kiwi logout` does (`docs/acp.md` §4.3).
    Logout(LogoutRequest),
    NewSession(NewSessionRequest),
    LoadSession(LoadSessionRequest),
    ResumeSession(ResumeSessionRequest),
    ListSessions(ListSessionsRequest),
    CloseSession(CloseSessionRequest),
    /// `session/delete`: the stored session removed (`docs/acp.md` §4.8).
    DeleteSession(DeleteSessionRequest),
    Prompt(PromptRequest),
    SetMode(SetSessionModeRequest),
    SetConfigOption(SetSessionConfigOptionRequest),
    /// Legacy (removed from the schema; older clients' model picker).
    SetModel(SetModelRequest),
    /// `session/fork` (unstable in the schema).
    Fork(ForkSessionRequest),
    /// `_kiwi/undo`, kiwi's extension method (`docs/acp.md` §4.17).
    Undo(UndoSessionRequest),
}

/// The extension method that undoes turns (`docs/acp.md` §4.17).
pub const UNDO_METHOD: &str = "_kiwi/undo";

/// `_kiwi/undo`: undo turn `turnIndex` and every later turn, or the last `turns` turns (the last
/// turn when neither is given; not both).
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UndoSessionRequest {
    pub session_id: String,
    #[serde(default)]
    pub turn_index: Option<u64>,
    #[serde(default)]
    pub turns: Option<u64>,
}

/// `session/fork` (unstable in the ACP schema, `docs/acp.md` §4.16): a new session with the
/// history of `sessionId`; `_meta.turnIndex` forks after that turn instead of after all of it.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkSessionRequest {
    pub session_id: String,
    pub cwd: std::path::PathBuf,
    #[serde(default)]
    pub mcp_servers: Vec<agent_client_protocol::v1::schema::McpServer>,
    #[serde(default, rename = "_meta")]
    pub meta: Option<ForkMeta>,
}

#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkMeta {
    pub turn_index: Option<u64>,
}

impl AcpRequest {
    pub fn parse(method: &str, params: Option<Value>) -> Result<Self, ErrorObject> {
        let params = params.unwrap_or(Value::Null);
        Ok(match method {
            "initialize" => {
                let profile = ClientProfile::judge(&params);
                Self::Initialize(Box::new(typed(params)?), profile)
            }
            "authenticate" => Self::Authenticate(typed(params)?),
            "logout" => Self::Logout(typed(params)?),
            "session/new" => Self::NewSession(typed(params)?),
            "session/load" => Self::LoadSession(typed(params)?),
            "session/resume" => Self::ResumeSession(typed(params)?),
            "session/list" => Self::ListSessions(typed(params)?),
            "session/close" => Self::CloseSession(typed(params)?),
            "session/delete" => Self::DeleteSession(typed(params)?),
            "session/prompt" => Self::Prompt(typed(params)?),
            "session/set_mode" => Self::SetMode(typed(params)?),
            "session/set_config_option" => Self::SetConfigOption(typed(params)?),
            "session/set_model" => Self::SetModel(typed(params)?),
            "session/fork" => Self::Fork(typed(params)?),
            UNDO_METHOD => {
                let request: UndoSessionRequest = typed(params)?;
                if request.turn_index.is_some() && request.turns.is_some() {
                    return Err(errors::invalid_params("give turnIndex or turns, not both"));
                }
                Self::Undo(request)
            }
            other => return Err(errors::method_not_found(other)),
        })
    }
}

/// A client notification ACP acts on.
#[derive(Debug)]
pub enum AcpNotification {
    Cancel(CancelNotification),
    /// `$/cancel_request`: the only requests a client could abandon are prompts, which
    /// `session/cancel` stops; everything else is answered at once.
    CancelRequest,
}

impl AcpNotification {
    /// `None` for notifications kiwi does not act on; `Err` for known ones with unreadable
    /// params (a notification gets no answer: the caller logs it).
    pub fn parse(method: &str, params: Option<Value>) -> Option<Result<Self, ErrorObject>> {
        match method {
            "session/cancel" => Some(typed(params.unwrap_or(Value::Null)).map(Self::Cancel)),
            "$/cancel_request" => Some(Ok(Self::CancelRequest)),
            _ => None,
        }
    }
}

fn typed<T: DeserializeOwned>(params: Value) -> Result<T, ErrorObject> {
    serde_json::from_value(params).map_err(|e| errors::invalid_params(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn methods_parse_into_their_typed_params() {
        let r = AcpRequest::parse("session/cancel_all", None).unwrap_err();
        assert_eq!((r.code, r.data), (-32601, json!({"method": "session/cancel_all"})));
        let r = AcpRequest::parse("session/prompt", Some(json!({"sessionId": 3}))).unwrap_err();
        assert_eq!((r.code, r.message.as_str()), (-32602, "Invalid params"));
        let ok = AcpRequest::parse("session/close", Some(json!({"sessionId": "s1"}))).unwrap();
        assert!(matches!(ok, AcpRequest::CloseSession(c) if &*c.session_id.0 == "s1"));
        let ok = AcpRequest::parse("session/delete", Some(json!({"sessionId": "s1"}))).unwrap();
        assert!(matches!(ok, AcpRequest::DeleteSession(c) if &*c.session_id.0 == "s1"));
        assert_eq!(AcpRequest::parse("session/delete", Some(json!({}))).unwrap_err().code, -32602);
        // `logout` takes no params: absent, `null` and `{}` all do.
        for params in [None, Some(json!(null)), Some(json!({}))] {
            assert!(matches!(AcpRequest::parse("logout", params), Ok(AcpRequest::Logout(_))));
        }
        assert!(AcpNotification::parse("session/other", None).is_none());
        assert!(matches!(
            AcpNotification::parse("session/cancel", Some(json!({"sessionId": "s"}))),
            Some(Ok(AcpNotification::Cancel(_)))
        ));
        assert!(matches!(AcpNotification::parse("session/cancel", Some(json!({}))), Some(Err(_))));
    }
}
