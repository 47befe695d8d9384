//! Backoff between attempts of one LLM call (`docs/soul.md` §4.1).

use std::time::Duration;

use rand::Rng;

use crate::llm::ChatError;

/// Wait before retry `k` (1-based): the server's `retry-after` if it sent one (capped), else
/// `min(5, 0.3 * 2^(k-1) + uniform(0, 0.5))` seconds.
pub fn backoff(k: u32, error: &ChatError) -> Duration {
    if let Some(after) = error.retry_after() {
        return after.min(Duration::from_secs(30));
    }
    let base = 0.3 * 2f64.powi(k.saturating_sub(1).min(16) as i32);
    let jitter: f64 = rand::rng().random_range(0.0..0.5);
    Duration::from_secs_f64((base + jitter).min(5.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let e = ChatError::EmptyResponse;
        let first = backoff(1, &e).as_secs_f64();
        assert!((0.3..0.8).contains(&first));
        assert!(backoff(20, &e).as_secs_f64() <= 5.0);
        let e = ChatError::Status { status: 429, message: String::new(), retry_after: Some(Duration::from_millis(1)) };
        assert_eq!(backoff(1, &e), Duration::from_millis(1));
    }
}
