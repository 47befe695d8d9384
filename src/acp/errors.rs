//! ACP's errors (`docs/acp.md` §11).
//!
//! Messages are the fixed JSON-RPC texts; what went wrong is in `data`, as the reference does
//! (`{"error": ...}` for turn failures, `{"session_id": "Session not found"}` for lookups).

use serde_json::json;

use crate::rpc::ErrorObject;
use crate::soul::TurnError;

pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL: i64 = -32603;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const AUTH_REQUIRED: i64 = -32000;
pub const RESOURCE_NOT_FOUND: i64 = -32002;

fn error(code: i64, message: &str, data: serde_json::Value) -> ErrorObject {
    ErrorObject { code, message: message.into(), data }
}

pub fn invalid_params(reason: impl Into<String>) -> ErrorObject {
    error(INVALID_PARAMS, "Invalid params", json!({ "error": reason.into() }))
}

pub fn session_not_found() -> ErrorObject {
    error(INVALID_PARAMS, "Invalid params", json!({ "session_id": "Session not found" }))
}

/// `session/delete` of a session that does not exist: ACP's own "Resource not found", which
/// the SDKs take as "already deleted" (deleting is idempotent for them); the older methods keep
/// the reference's `-32602`.
pub fn no_session_to_delete() -> ErrorObject {
    error(RESOURCE_NOT_FOUND, "Resource not found", json!({ "session_id": "Session not found" }))
}

pub fn model_not_found() -> ErrorObject {
    error(INVALID_PARAMS, "Invalid params", json!({ "model_id": "Model not found" }))
}

pub fn internal(reason: impl Into<String>) -> ErrorObject {
    error(INTERNAL, "Internal error", json!({ "error": reason.into() }))
}

pub fn method_not_found(method: &str) -> ErrorObject {
    error(METHOD_NOT_FOUND, "Method not found", json!({ "method": method }))
}

pub fn auth_required(reason: Option<&str>) -> ErrorObject {
    let data = reason.map(|r| json!({ "error": r })).unwrap_or_default();
    error(AUTH_REQUIRED, "Authentication required", data)
}

/// How a failed turn answers its prompt (`docs/acp.md` §13.1, with the recommended provider mapping).
pub fn turn_error(e: &TurnError) -> ErrorObject {
    match e {
        // As the wire's -32001: no `data`; the reason is in the log and the start-up warning.
        TurnError::LlmNotSet { .. } => auth_required(None),
        other => internal(other.to_string()),
    }
}
