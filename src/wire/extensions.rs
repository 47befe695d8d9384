//! kiwi's additions to the wire protocol, and which clients get them (`docs/compatibility.md`).
//!
//! A client that asks for nothing sees the reference's `initialize` answer member for member: a
//! kiwi-only method or command is advertised only to a client that named it in `initialize`'s
//! `extensions`. The methods themselves (`fork`, `undo`) and the typed `/fork` and `/undo` work
//! for everyone; only what is listed changes. A kiwi-only *event* (`tool_output`'s `ToolOutput`)
//! is sent only to a client granted its extension ([`Granted`]); so is a kiwi-only *member*
//! (`cost`: a priced step's `StatusUpdate` gets a `cost` member, `initialize` a `cost` answer
//! member).

use std::sync::RwLock;

/// Every extension the wire offers, in the order the answer lists them.
pub const OFFERED: &[&str] = &["fork", "undo", "tool_output", "cost"];

/// `ToolOutput` events: a running tool's output as it comes (`docs/compatibility.md`).
pub const TOOL_OUTPUT: &str = "tool_output";

/// What each priced step cost: the `cost` member of `StatusUpdate` and of `initialize`'s answer.
pub const COST: &str = "cost";

/// What one client was granted by its last `initialize`: shared by the code that answers it and
/// the projection that decides which kiwi-only events the client gets.
#[derive(Debug, Default)]
pub struct Granted(RwLock<Vec<&'static str>>);

impl Granted {
    /// Replaces the grant with `names` (the `extensions` member of the `initialize` answer).
    pub fn set(&self, names: Option<&[String]>) {
        let names = names.unwrap_or_default();
        let granted = OFFERED.iter().copied().filter(|o| names.iter().any(|n| n == o)).collect();
        *self.0.write().unwrap_or_else(|p| p.into_inner()) = granted;
    }

    pub fn has(&self, name: &str) -> bool {
        self.0.read().unwrap_or_else(|p| p.into_inner()).contains(&name)
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
        assert_eq!(grant(&asked(&["tool_output"])), ["tool_output"]);
        assert_eq!(grant(&asked(&["cost", "fork"])), ["fork", "cost"]);
    }

    #[test]
    fn a_grant_is_what_the_last_answer_listed() {
        let granted = Granted::default();
        assert!(!granted.has(TOOL_OUTPUT), "nothing before initialize");
        granted.set(Some(&["tool_output".to_string(), "nope".to_string()]));
        assert!(granted.has(TOOL_OUTPUT) && !granted.has("nope"));
        granted.set(None);
        assert!(!granted.has(TOOL_OUTPUT), "a later initialize that asks nothing gets nothing");
    }
}
