//! `_chaos`: fault injection around a Kimi provider (`docs/providers.md` §8.3), for testing retry behaviour.
//!
//! Invariants: with probability 0.8 a request is not sent and a synthetic 429/500/503 response
//! (reference bodies, `retry-after: 2` on 429) goes through the normal error path, so SDK and
//! agent retries behave exactly as for a real server; with probability 0.1 per streamed part, a
//! tool call (or fragment) whose arguments end in `}` loses that last character.

use rand::Rng as _;
use reqwest::header::{HeaderMap, HeaderValue};

use crate::llm::StreamEvent;

const ERROR_PROBABILITY: f64 = 0.8;
const CORRUPT_TOOL_CALL_PROBABILITY: f64 = 0.1;

#[derive(Debug, Default)]
pub(crate) struct Chaos;

/// A synthetic failed response.
pub(crate) struct Fault {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: &'static str,
}

impl Chaos {
    /// Decides whether the next request fails without being sent.
    pub fn transport_fault(&self) -> Option<Fault> {
        let mut rng = rand::rng();
        if rng.random::<f64>() >= ERROR_PROBABILITY {
            return None;
        }
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        Some(match rng.random_range(0..3) {
            0 => {
                headers.insert("retry-after", HeaderValue::from_static("2"));
                Fault {
                    status: 429,
                    headers,
                    body: r#"{"error": {"code": "rate_limit_exceeded", "message": "Rate limit exceeded"}}"#,
                }
            }
            1 => Fault {
                status: 500,
                headers,
                body: r#"{"error": {"code": "internal_error", "message": "Internal server error"}}"#,
            },
            _ => Fault {
                status: 503,
                headers,
                body: r#"{"error": {"code": "service_unavailable", "message": "Service temporarily unavailable"}}"#,
            },
        })
    }

    /// Possibly corrupts one streamed part.
    pub fn corrupt(&self, mut event: StreamEvent) -> StreamEvent {
        if rand::rng().random::<f64>() >= CORRUPT_TOOL_CALL_PROBABILITY {
            return event;
        }
        let args = match &mut event {
            StreamEvent::ToolCall(call) => call.function.arguments.as_mut(),
            StreamEvent::ToolCallPart(part) => part.arguments_part.as_mut(),
            _ => None,
        };
        if let Some(args) = args.filter(|a| a.ends_with('}')) {
            args.pop();
        }
        event
    }
}
