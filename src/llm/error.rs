//! Provider errors and the retry classification of `docs/soul.md` §4.1 and `docs/protocol-1.10.md` §4.2.

use std::time::Duration;

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Error)]
pub enum ChatError {
    /// Could not connect, or the connection broke (retried).
    #[error("{0}")]
    Connection(String),
    /// The request or the stream timed out (retried).
    #[error("{0}")]
    Timeout(String),
    /// An HTTP status error; retried for 429, 500, 502, 503 and 504.
    #[error("{message}")]
    Status { status: u16, message: String, retry_after: Option<Duration> },
    /// The model returned nothing at all (retried).
    #[error("The API returned an empty response.")]
    EmptyResponse,
    /// The model only thought: no text, no tool call (retried like an empty response).
    #[error(
        "The API returned a response containing only thinking content without any text or tool calls. This usually indicates the stream was interrupted or the output token budget was exhausted during reasoning."
    )]
    ThinkingOnly,
    /// The provider produced something that is not a valid message part (never retried; an
    /// internal error of the turn, not a provider error).
    #[error("{0}")]
    Invalid(String),
    /// Anything else; never retried. The text is the -32003 message.
    #[error("{0}")]
    Other(String),
    /// An OAuth provider still answered 401 after a forced token refresh (or the refresh
    /// failed): the login has expired. The wire answers -32004 (`docs/subcommands.md` §3.9).
    #[error("{}", LOGIN_EXPIRED_MESSAGE)]
    LoginExpired,
}

/// The -32004 text; it names the interactive shell's `/login` even over the wire (reference text).
pub const LOGIN_EXPIRED_MESSAGE: &str =
    "Authentication failed. Your login session may have expired. Please run \"/login\" to sign in again.";

impl ChatError {
    pub fn is_retryable(&self) -> bool {
        match self {
            ChatError::Connection(_) | ChatError::Timeout(_) | ChatError::EmptyResponse | ChatError::ThinkingOnly => {
                true
            }
            ChatError::Status { status, .. } => matches!(status, 429 | 500 | 502 | 503 | 504),
            ChatError::Other(_) | ChatError::Invalid(_) | ChatError::LoginExpired => false,
        }
    }

    /// The error class a client sees in `StepRetry.error_type`.
    pub fn error_type(&self) -> &'static str {
        match self {
            ChatError::Connection(_) => "APIConnectionError",
            ChatError::Timeout(_) => "APITimeoutError",
            ChatError::Status { .. } | ChatError::LoginExpired => "APIStatusError",
            ChatError::EmptyResponse | ChatError::ThinkingOnly => "APIEmptyResponseError",
            ChatError::Other(_) => "ChatProviderError",
            ChatError::Invalid(_) => "ValidationError",
        }
    }

    /// The HTTP status of a status error.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            ChatError::Status { status, .. } => Some(*status),
            ChatError::LoginExpired => Some(401),
            _ => None,
        }
    }

    /// A server-requested delay before the next attempt, if any.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            ChatError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_follows_the_spec() {
        let status = |s| ChatError::Status { status: s, message: String::new(), retry_after: None };
        for s in [429, 500, 502, 503, 504] {
            assert!(status(s).is_retryable());
        }
        assert!(ChatError::ThinkingOnly.is_retryable());
        assert!(!ChatError::Invalid("x".into()).is_retryable());
        assert_eq!((status(503).error_type(), status(503).status_code()), ("APIStatusError", Some(503)));
        assert_eq!(ChatError::ThinkingOnly.error_type(), "APIEmptyResponseError");
        assert_eq!(ChatError::Connection("c".into()).status_code(), None);
        for s in [400, 401, 404, 529] {
            assert!(!status(s).is_retryable());
        }
        assert!(ChatError::EmptyResponse.is_retryable());
        assert!(ChatError::Timeout("t".into()).is_retryable());
        assert!(!ChatError::Other("x".into()).is_retryable());
        assert_eq!(ChatError::EmptyResponse.to_string(), "The API returned an empty response.");
    }
}
