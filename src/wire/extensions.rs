//! kiwi's additions to the wire protocol, and which clients get them (`docs/compatibility.md`).
//!
//! A client that asks for nothing sees the reference's `initialize` answer member for member: a
//! kiwi-only method or command is advertised only to a client that named it in `initialize`'s
//! `extensions`. The methods themselves (`fork`, `undo`) and the typed `/fork` and `/undo` work
//! for everyone; only what is listed changes. `cost` adds members, not methods: each priced
//! step's `StatusUpdate` gets a `cost` member and `initialize` a `cost` answer member, for the
//! client that asked only.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Every extension the wire offers, in the order the answer lists them.
pub const OFFERED: &[&str] = &["fork", "undo", "cost"];

/// The extension that shows what steps cost.
pub const COST: &str = "cost";

/// Whether one client was granted `cost`: set by its `initialize`, read by its projection.
#[derive(Debug, Clone, Default)]
pub struct CostGrant(Arc<AtomicBool>);

impl CostGrant {
    pub fn set(&self, granted: bool) {
        self.0.store(granted, Ordering::Relaxed);
    }

    pub fn granted(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// The extensions granted of `asked` (unknown names are dropped, duplicates listed once), in
/// [`OFFERED`] order.
pub fn grant(asked: &[String]) -> Vec<&'static str> {
    OFFERED.iter().copied().filter(|name| asked.iter().any(|a| a == name)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_what_was_asked_and_offered() {
        let asked = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        assert_eq!(grant(&asked(&[])), Vec::<&str>::new());
        assert_eq!(grant(&asked(&["undo", "nope", "undo"])), ["undo"]);
        assert_eq!(grant(&asked(&["undo", "fork"])), ["fork", "undo"]);
        assert_eq!(grant(&asked(&["cost", "fork"])), ["fork", "cost"]);
    }
}
