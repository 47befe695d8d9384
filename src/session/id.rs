//! Session ids are names, never paths.
//!
//! An id becomes one directory name under `<share>/sessions/<key>/`, and that directory is
//! deleted at exit when the session stayed empty. An id that could name anything else (a path
//! with a separator, `.`/`..`, a NUL byte) would let a client create and later delete files
//! outside the share dir, so such ids are refused wherever an id enters (the reference uses the
//! id verbatim; kiwi's rule, `docs/sessions.md` §7.3).

/// Why an id was refused; the text is the usage error the user sees.
pub fn check_session_id(id: &str) -> Result<(), String> {
    let bad = if id.is_empty() {
        Some("it is empty")
    } else if id == "." || id == ".." {
        Some("'.' and '..' are not names")
    } else if id.contains('/') || id.contains('\\') {
        Some("it contains a path separator")
    } else if id.contains('\0') {
        Some("it contains a NUL byte")
    } else if id.chars().any(char::is_control) {
        Some("it contains a control character")
    } else if id.len() > 255 {
        Some("it is longer than 255 bytes")
    } else {
        None
    };
    match bad {
        Some(why) => Err(format!("Invalid session id {id:?}: {why}; a session id is a name, not a path.")),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_and_specials_are_refused() {
        for id in ["", ".", "..", "/", "/tmp/x", "a/b", "..\\x", "a\\b", "a\0b", "x\ny", &"a".repeat(256)] {
            assert!(check_session_id(id).is_err(), "{id:?} accepted");
        }
        assert_eq!(
            check_session_id("..").unwrap_err(),
            "Invalid session id \"..\": '.' and '..' are not names; a session id is a name, not a path."
        );
    }

    #[test]
    fn names_are_accepted() {
        for id in ["my-id", "f68b7ccf-9bd2-4573-ac1a-e2137bf7342d", "a.b", "...", ".hidden", "名前", "a b"] {
            assert!(check_session_id(id).is_ok(), "{id:?} refused");
        }
    }
}
