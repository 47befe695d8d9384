//! What the turn driver and the running turn share: the turn's id, the inbox of steered input,
//! and whether `TurnBegin` / `TurnEnd` went out.
//!
//! Invariants: a new `TurnShared` is made for every turn, so nothing (queued input, marks) leaks
//! from one turn into the next; the inbox accepts input only while an agent loop can still
//! consume it — once a loop has taken its last look and found it empty it closes, so a steer
//! accepted with `steered` is never silently dropped by a loop that already ended.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::protocol::UserInput;

/// Input that arrives while a turn runs (`steer`), waiting for the next step boundary.
#[derive(Debug, Default)]
pub struct Inbox {
    /// `None` while closed (no agent loop will consume input), else the queue in arrival order.
    queue: Mutex<Option<Vec<UserInput>>>,
}

impl Inbox {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Vec<UserInput>>> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `input`; false (input returned to nobody) when closed.
    pub fn push(&self, input: UserInput) -> bool {
        match self.lock().as_mut() {
            Some(queue) => {
                queue.push(input);
                true
            }
            None => false,
        }
    }

    /// Opens the inbox (an agent loop starts); queued input, if any, is kept.
    pub fn open(&self) {
        self.lock().get_or_insert_with(Vec::new);
    }

    /// Everything queued, in arrival order.
    pub fn take_all(&self) -> Vec<UserInput> {
        self.lock().as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// The loop's last look: everything queued, closing the inbox when there is nothing.
    pub fn take_all_or_close(&self) -> Vec<UserInput> {
        let mut guard = self.lock();
        let taken = guard.as_mut().map(std::mem::take).unwrap_or_default();
        if taken.is_empty() {
            *guard = None;
        }
        taken
    }

    pub fn close(&self) {
        *self.lock() = None;
    }

    pub fn is_open(&self) -> bool {
        self.lock().is_some()
    }
}

/// One turn's shared marks.
#[derive(Debug, Default)]
pub struct TurnShared {
    /// 32 lowercase hex digits; every approval of the turn carries it as `source_id`.
    pub id: String,
    pub inbox: Inbox,
    begun: AtomicBool,
    ended: AtomicBool,
}

impl TurnShared {
    pub fn new() -> Self {
        Self { id: uuid::Uuid::new_v4().simple().to_string(), ..Self::default() }
    }

    pub fn mark_begun(&self) {
        self.begun.store(true, Ordering::SeqCst);
    }

    pub fn mark_ended(&self) {
        self.ended.store(true, Ordering::SeqCst);
    }

    /// `TurnBegin` went out and `TurnEnd` did not: the driver owes the client a `TurnEnd`.
    pub fn owes_turn_end(&self) -> bool {
        self.begun.load(Ordering::SeqCst) && !self.ended.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_inbox_refuses_and_the_last_look_closes_it() {
        let inbox = Inbox::default();
        assert!(!inbox.push(UserInput::Text("early".into())), "closed until a loop opens it");
        inbox.open();
        assert!(inbox.push(UserInput::Text("a".into())));
        assert!(inbox.push(UserInput::Text("b".into())));
        assert_eq!(inbox.take_all_or_close().len(), 2, "input found: still open");
        assert!(inbox.is_open());
        assert!(inbox.take_all_or_close().is_empty());
        assert!(!inbox.is_open());
        assert!(!inbox.push(UserInput::Text("late".into())));
    }

    #[test]
    fn marks_tell_whether_a_turn_end_is_owed() {
        let t = TurnShared::new();
        assert_eq!(t.id.len(), 32);
        assert!(!t.owes_turn_end());
        t.mark_begun();
        assert!(t.owes_turn_end());
        t.mark_ended();
        assert!(!t.owes_turn_end());
    }
}
