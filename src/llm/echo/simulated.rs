//! The `error:` line of the echo DSL (`docs/scripted-echo.md` §5.1): the simulated provider error a
//! scripted call fails with. Status errors are retryable exactly when a real one would be (429,
//! 500, 502, 503, 504); connection and timeout errors always are.

use crate::llm::ChatError;
use crate::llm::pyfmt::{py_repr_str, py_strip};

use super::pyjson::{PyInt, PyValue, py_int};

/// `error: <spec>` (`docs/scripted-echo.md` §5.1): the simulated provider error the call fails with.
pub fn simulated_error(payload: &str, lineno: usize, raw_line: &str) -> ChatError {
    let spec = py_strip(payload);
    if spec.is_empty() {
        return ChatError::Other(format!("Empty error payload at line {lineno}: {}", py_repr_str(raw_line)));
    }
    let (word, rest) = match spec.find(char::is_whitespace) {
        Some(i) => (&spec[..i], py_strip(&spec[i..])),
        None => (spec, ""),
    };
    let message = |default: String| if rest.is_empty() { default } else { rest.to_string() };
    match word.to_lowercase().as_str() {
        "connection" => return ChatError::Connection(message("Simulated connection error".into())),
        "timeout" => return ChatError::Timeout(message("Simulated timeout error".into())),
        _ => {}
    }
    match py_int(&PyValue::Str(word.to_string())) {
        PyInt::Value(code) => {
            let message = message(format!("Simulated {code} error"));
            match u16::try_from(code) {
                Ok(status) => ChatError::Status { status, message, retry_after: None },
                // Not an HTTP status at all: never retried, the message is what the client sees.
                Err(_) => ChatError::Other(message),
            }
        }
        PyInt::Invalid => ChatError::Other(format!(
            "Invalid error spec at line {lineno}: expected status code or 'connection'/'timeout', got {}",
            py_repr_str(word)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::echo::dsl::parse_script;

    fn simulated(script: &str) -> ChatError {
        parse_script(script).unwrap_err()
    }

    fn error(script: &str) -> String {
        match parse_script(script) {
            Err(ChatError::Other(message)) => message,
            other => panic!("expected a provider error for {script:?}, got {other:?}"),
        }
    }

    #[test]
    fn error_directives() {
        let status = |s: u16, m: &str| ChatError::Status { status: s, message: m.into(), retry_after: None };
        assert_eq!(simulated("error: 503 a"), status(503, "a"));
        assert_eq!(simulated("error: 401 Token expired"), status(401, "Token expired"));
        assert_eq!(simulated("ERROR:  429"), status(429, "Simulated 429 error"));
        assert_eq!(simulated("error: 1_000"), status(1000, "Simulated 1000 error"));
        assert_eq!(simulated("error: -5"), ChatError::Other("Simulated -5 error".into()));
        assert_eq!(
            simulated("error: Connection Server unreachable"),
            ChatError::Connection("Server unreachable".into())
        );
        assert_eq!(simulated("error: connection"), ChatError::Connection("Simulated connection error".into()));
        assert_eq!(simulated("error: timeout slow"), ChatError::Timeout("slow".into()));
        assert_eq!(simulated("error: TIMEOUT"), ChatError::Timeout("Simulated timeout error".into()));
        assert_eq!(
            simulated("text: a\nerror: abc def"),
            ChatError::Other(
                "Invalid error spec at line 2: expected status code or 'connection'/'timeout', got 'abc'".into()
            )
        );
        assert_eq!(simulated("error:"), ChatError::Other("Empty error payload at line 1: 'error:'".into()));
        // Lines before it are still checked; lines after it are not read.
        assert_eq!(error("bad\nerror: 500"), "Invalid echo DSL at line 1: 'bad'");
        assert_eq!(simulated("error: 500\nbad"), status(500, "Simulated 500 error"));
    }
}
