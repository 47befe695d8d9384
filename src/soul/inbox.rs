//! Input that arrives while a turn runs (protocol 1.10's `steer`), waiting for the next step
//! boundary. Cleared when a turn starts, so leftovers never leak into another turn.

use std::sync::Mutex;

use crate::protocol::UserInput;

#[derive(Debug, Default)]
pub struct Inbox {
    queue: Mutex<Vec<UserInput>>,
}

impl Inbox {
    pub fn push(&self, input: UserInput) {
        self.queue.lock().unwrap_or_else(|p| p.into_inner()).push(input);
    }

    /// Everything queued, in arrival order.
    pub fn take_all(&self) -> Vec<UserInput> {
        std::mem::take(&mut *self.queue.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub fn clear(&self) {
        self.take_all();
    }
}
