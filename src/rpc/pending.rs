//! Requests we sent to the client that await an answer, keyed by JSON-RPC id.
//!
//! Invariants: an answer resolves at most one entry; an answer with an unknown id is logged and
//! dropped; `fail_all` (shutdown) drops every waiting sender, which the waiting side reads as
//! "client gone" (approval ⇒ reject, external tool ⇒ error result).

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::Value;
use tokio::sync::oneshot;

use super::error_code::ErrorObject;

pub type RawAnswer = Result<Value, ErrorObject>;

#[derive(Default)]
pub struct PendingRequests {
    waiting: Mutex<HashMap<String, oneshot::Sender<RawAnswer>>>,
}

impl PendingRequests {
    pub fn register(&self, id: String) -> oneshot::Receiver<RawAnswer> {
        let (tx, rx) = oneshot::channel();
        if let Ok(mut map) = self.waiting.lock() {
            map.insert(id, tx);
        }
        rx
    }

    /// Routes an answer; false when nobody waits for this id.
    pub fn resolve(&self, id: &str, answer: RawAnswer) -> bool {
        let sender = self.waiting.lock().ok().and_then(|mut map| map.remove(id));
        match sender {
            Some(tx) => tx.send(answer).is_ok(),
            None => false,
        }
    }

    pub fn fail_all(&self) {
        if let Ok(mut map) = self.waiting.lock() {
            map.clear();
        }
    }

    /// Drops entries whose waiter went away (a cancelled turn), so the map does not grow.
    pub fn prune(&self) {
        if let Ok(mut map) = self.waiting.lock() {
            map.retain(|_, tx| !tx.is_closed());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn resolve_and_unknown_ids() {
        let p = PendingRequests::default();
        let rx = p.register("a".into());
        assert!(!p.resolve("b", Ok(Value::Null)));
        assert!(p.resolve("a", Ok(Value::Bool(true))));
        assert_eq!(rx.await.unwrap(), Ok(Value::Bool(true)));
        assert!(!p.resolve("a", Ok(Value::Null)), "second answer is dropped");
        let rx = p.register("c".into());
        p.fail_all();
        assert!(rx.await.is_err());
    }
}
