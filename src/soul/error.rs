//! How a turn can fail; the wire maps each to its JSON-RPC error in one place.

use thiserror::Error;

use crate::llm::{Capability, ChatError, ModelStop};

#[derive(Debug, Error)]
pub enum TurnError {
    /// No usable model; `reason` says why (which key is missing or wrong), for the client.
    #[error("LLM is not set")]
    LlmNotSet { reason: Option<String> },
    #[error("{}", capability_message(model, missing))]
    Capability { model: String, missing: Vec<Capability> },
    #[error("{0}")]
    Provider(ChatError),
    /// A bug or an environment failure inside the turn; never silence, always an answer
    /// (-32603 `<kind>: <message>`, `docs/protocol-1.10.md` §2.3).
    #[error("{kind}: {message}")]
    Internal { kind: &'static str, message: String },
}

impl From<ChatError> for TurnError {
    /// Provider errors are -32003; a malformed part from the provider is an internal failure of
    /// the turn (`docs/scripted-echo.md` §5.3: -32603 `ValidationError: …`).
    fn from(e: ChatError) -> Self {
        match e {
            ChatError::Invalid(message) => TurnError::internal("ValidationError", message),
            other => TurnError::Provider(other),
        }
    }
}

impl TurnError {
    /// The error's class name, as hooks see it (`StopFailure`'s `error_type`).
    pub fn kind_name(&self) -> &'static str {
        match self {
            TurnError::LlmNotSet { .. } => "LLMNotSet",
            TurnError::Capability { .. } => "LLMNotSupported",
            TurnError::Provider(e) => e.error_type(),
            TurnError::Internal { kind, .. } => kind,
        }
    }

    pub fn internal(kind: &'static str, message: impl Into<String>) -> Self {
        TurnError::Internal { kind, message: message.into() }
    }
}

fn capability_message(model: &str, missing: &[Capability]) -> String {
    let names: Vec<&str> = missing.iter().map(|c| c.as_str()).collect();
    let word = if names.len() == 1 { "capability" } else { "capabilities" };
    format!("LLM model '{model}' does not support required {word}: {}.", names.join(", "))
}

/// How a turn ended when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TurnOutcome {
    /// The turn completed; with the reason when the model's last answer was cut by its token
    /// limit or refused (front ends that can say so do; the wire still says `finished`).
    Finished(Option<ModelStop>),
    MaxStepsReached(u32),
    /// The session's token budget (`loop_control.max_session_tokens`) was used up: the turn
    /// ended before its next model call. `used` tokens counted, `limit` the budget.
    TokenBudgetReached {
        used: u64,
        limit: u64,
    },
    /// The session's dollar budget (`loop_control.max_budget_usd`, `--max-budget-usd`) was used
    /// up: the turn ended before its next model call. `spent` US dollars, `limit` the budget.
    CostBudgetReached {
        spent: f64,
        limit: f64,
    },
    /// Cancelled by the front end (the soul's future was dropped; only the driver reports it).
    Cancelled,
}

/// The last item of a turn's event stream.
pub type TurnResult = Result<TurnOutcome, TurnError>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capability_messages() {
        let e = TurnError::Capability { model: "echo".into(), missing: vec![Capability::ImageIn] };
        assert_eq!(e.to_string(), "LLM model 'echo' does not support required capability: image_in.");
        let e = TurnError::Capability { model: "m".into(), missing: vec![Capability::ImageIn, Capability::VideoIn] };
        assert_eq!(e.to_string(), "LLM model 'm' does not support required capabilities: image_in, video_in.");
    }

    #[test]
    fn internal_errors_name_their_kind() {
        assert_eq!(TurnError::internal("ContextError", "disk full").to_string(), "ContextError: disk full");
    }
}
