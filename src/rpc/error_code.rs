//! JSON-RPC 2.0's standard error codes; a front end's own codes live with it (`wire::errors`,
//! `acp::errors`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    ParseError,
    InvalidRequest,
    MethodNotFound,
    InvalidParams,
    InternalError,
}

impl ErrorCode {
    pub fn code(self) -> i64 {
        match self {
            ErrorCode::ParseError => -32700,
            ErrorCode::InvalidRequest => -32600,
            ErrorCode::MethodNotFound => -32601,
            ErrorCode::InvalidParams => -32602,
            ErrorCode::InternalError => -32603,
        }
    }

    pub fn with_message(self, message: impl Into<String>) -> ErrorObject {
        ErrorObject { code: self.code(), message: message.into(), data: Value::Null }
    }
}

/// `{"code","message","data"}`; `data` is always present (null when there is nothing to add).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    pub code: i64,
    pub message: String,
    #[serde(default)]
    pub data: Value,
}
