//! kiwi's additions to the wire protocol, and which clients get them (`docs/compatibility.md`).
//!
//! A client that asks for nothing sees the reference's `initialize` answer member for member: a
//! kiwi-only method or command is advertised only to a client that named it in `initialize`'s
//! `extensions`. The methods themselves (`fork`, `undo`) and the typed `/fork` and `/undo` work
//! for everyone; only what is listed changes.

/// Every extension the wire offers, in the order the answer lists them.
pub const OFFERED: &[&str] = &["fork", "undo"];

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
    }
}
