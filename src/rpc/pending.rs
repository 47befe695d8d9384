//! Requests we sent to the client that await an answer, keyed by the typed JSON-RPC id (an
//! integer id and the string of the same digits are different requests).
//!
//! Invariants: an answer resolves at most one entry; an answer with an unknown id is logged and
//! dropped; registering an id that is still waiting is refused, so two requests can never share
//! one answer; `fail_all` (shutdown) drops every waiting sender, which the waiting side reads as
//! "client gone" (approval ⇒ reject, external tool ⇒ error result).

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::Value;
use tokio::sync::oneshot;

use super::error_code::ErrorObject;
use super::message::RequestId;

pub type RawAnswer = Result<Value, ErrorObject>;

#[derive(Default)]
pub struct PendingRequests {
    waiting: Mutex<HashMap<RequestId, oneshot::Sender<RawAnswer>>>,
}

/// The id is already waiting for an answer.
#[derive(Debug, PartialEq, Eq)]
pub struct DuplicateId;

impl PendingRequests {
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<RequestId, oneshot::Sender<RawAnswer>>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts waiting for the answer to `id`; refused while an earlier request with the same id
    /// still waits (its answer would be ambiguous).
    pub fn register(&self, id: RequestId) -> Result<oneshot::Receiver<RawAnswer>, DuplicateId> {
        let mut map = self.map();
        if map.get(&id).is_some_and(|tx| !tx.is_closed()) {
            return Err(DuplicateId);
        }
        let (tx, rx) = oneshot::channel();
        map.insert(id, tx);
        Ok(rx)
    }

    /// Routes an answer; false when nobody waits for this id.
    pub fn resolve(&self, id: &RequestId, answer: RawAnswer) -> bool {
        let sender = self.map().remove(id);
        match sender {
            Some(tx) => tx.send(answer).is_ok(),
            None => false,
        }
    }

    /// Stops waiting for `id` (its asker gave up, or another client answered it).
    pub fn forget(&self, id: &RequestId) {
        self.map().remove(id);
    }

    pub fn fail_all(&self) {
        self.map().clear();
    }

    /// Drops entries whose waiter went away (a cancelled turn), so the map does not grow.
    pub fn prune(&self) {
        self.map().retain(|_, tx| !tx.is_closed());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn resolve_and_unknown_ids() {
        let p = PendingRequests::default();
        let a = RequestId::Str("a".into());
        let rx = p.register(a.clone()).unwrap();
        assert!(!p.resolve(&RequestId::Str("b".into()), Ok(Value::Null)));
        assert!(p.resolve(&a, Ok(Value::Bool(true))));
        assert_eq!(rx.await.unwrap(), Ok(Value::Bool(true)));
        assert!(!p.resolve(&a, Ok(Value::Null)), "second answer is dropped");
        let rx = p.register(RequestId::Str("c".into())).unwrap();
        p.fail_all();
        assert!(rx.await.is_err());
    }

    #[tokio::test]
    async fn integer_and_string_ids_are_distinct_and_duplicates_refused() {
        let p = PendingRequests::default();
        let int = p.register(RequestId::Int(1)).unwrap();
        let string = p.register(RequestId::Str("1".into())).unwrap();
        assert_eq!(p.register(RequestId::Int(1)).unwrap_err(), DuplicateId);
        assert!(p.resolve(&RequestId::Str("1".into()), Ok(Value::from("s"))));
        assert!(p.resolve(&RequestId::Int(1), Ok(Value::from(1))));
        assert_eq!(string.await.unwrap(), Ok(Value::from("s")));
        assert_eq!(int.await.unwrap(), Ok(Value::from(1)));
        // Once the waiter is gone, the id may be used again.
        drop(p.register(RequestId::Int(2)).unwrap());
        assert!(p.register(RequestId::Int(2)).is_ok());
    }
}
