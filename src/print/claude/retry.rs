//! `system/api_retry`: a provider retry as Claude Code reports it. The core's `StepRetry` counts
//! attempts (the first retry is attempt 2 of `max_attempts`); Claude's line counts retries.

use super::lines::{ApiRetryLine, OutLine, SystemLine, error_class};
use super::turn::fresh_uuid;
use crate::protocol::StepRetry;

pub fn api_retry_line(retry: &StepRetry, session_id: &str) -> OutLine {
    OutLine::System(SystemLine::ApiRetry(ApiRetryLine {
        attempt: retry.next_attempt.saturating_sub(1).max(1),
        max_retries: retry.max_attempts.saturating_sub(1),
        retry_delay_ms: (retry.wait_s.max(0.0) * 1000.0).round() as u64,
        error_status: retry.status_code,
        error: error_class(retry.status_code).into(),
        session_id: session_id.to_string(),
        uuid: fresh_uuid(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn retry(next_attempt: u32, wait_s: f64, status_code: Option<u16>) -> StepRetry {
        StepRetry {
            n: 1,
            next_attempt,
            max_attempts: 3,
            wait_s,
            error_type: if status_code.is_some() { "APIStatusError" } else { "APIConnectionError" }.into(),
            status_code,
        }
    }

    #[test]
    fn a_503_is_the_first_of_two_retries() {
        let line = serde_json::to_value(api_retry_line(&retry(2, 0.42, Some(503)), "s1")).unwrap();
        let uuid = line["uuid"].as_str().unwrap().to_string();
        assert_eq!(
            line,
            serde_json::json!({"type":"system","subtype":"api_retry","attempt":1,"max_retries":2,
                "retry_delay_ms":420,"error_status":503,"error":"server_error","session_id":"s1","uuid":uuid})
        );
    }

    /// One map for the retry line and the error message: a 529 (Anthropic's overloaded) is a
    /// `server_error` and a 404 `unknown` in both.
    #[test]
    fn classes_follow_the_status() {
        let class = |s| {
            let line = serde_json::to_value(api_retry_line(&retry(2, 1.0, s), "s")).unwrap();
            line["error"].as_str().unwrap().to_string()
        };
        assert_eq!(class(Some(429)), "rate_limit");
        assert_eq!(class(Some(529)), "server_error");
        assert_eq!(class(Some(404)), "unknown");
        assert_eq!(class(Some(401)), "authentication_failed");
        assert_eq!(class(Some(400)), "invalid_request");
        assert_eq!(class(None), "unknown");
        for status in 100..600 {
            assert_eq!(class(Some(status)), error_class(Some(status)), "{status}");
        }
        let line = serde_json::to_value(api_retry_line(&retry(3, 1.0, None), "s")).unwrap();
        assert_eq!((line["attempt"].as_u64(), line["error_status"].is_null()), (Some(2), true));
    }
}
