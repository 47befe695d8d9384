//! The wire protocol's own error codes, beside JSON-RPC's standard ones (`rpc::ErrorCode`):
//! they belong to this front end (ACP keeps its own in `acp::errors`).

use crate::rpc::ErrorObject;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireError {
    /// A turn is (or is not) in progress.
    InvalidState,
    LlmNotSet,
    LlmCapability,
    ChatProvider,
    /// The Kimi account login has expired (an OAuth provider answered 401 after a refresh).
    LoginExpired,
}

impl WireError {
    pub fn code(self) -> i64 {
        match self {
            WireError::InvalidState => -32000,
            WireError::LlmNotSet => -32001,
            WireError::LlmCapability => -32002,
            WireError::ChatProvider => -32003,
            WireError::LoginExpired => -32004,
        }
    }

    pub fn with_message(self, message: impl Into<String>) -> ErrorObject {
        ErrorObject { code: self.code(), message: message.into(), data: serde_json::Value::Null }
    }
}
