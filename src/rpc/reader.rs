//! The stdin reader: splits bytes into lines, classifies each, and hands the result on.
//!
//! Invariants: a line longer than the limit is skipped and answered with one error, and the
//! buffer never grows past the limit (no up-front allocation of the maximum); invalid UTF-8 is
//! replaced, never fatal; EOF closes the channel, which the dispatcher takes as shutdown.

use std::io::{BufRead, BufReader, Read};

use serde_json::Value;
use tokio::sync::mpsc;

use super::error_code::ErrorCode;
use super::message::{Incoming, classify};

/// Default maximum inbound line length: 100 MiB, like the reference.
pub const DEFAULT_MAX_LINE_BYTES: usize = 100 * 1024 * 1024;

/// Inbound messages waiting for the dispatcher; a flooding client is slowed down here.
pub const INBOUND_CAPACITY: usize = 256;

const READ_BUFFER_BYTES: usize = 64 * 1024;

/// Reads `input` on a dedicated thread until EOF or until the receiver is dropped.
pub fn spawn_reader<R: Read + Send + 'static>(input: R, max_line: usize) -> mpsc::Receiver<Incoming> {
    let (tx, rx) = mpsc::channel(INBOUND_CAPACITY);
    let spawned = std::thread::Builder::new().name("kiwi-stdin".into()).spawn(move || {
        read_lines(input, max_line, |item| tx.blocking_send(item).is_ok());
    });
    if let Err(e) = spawned {
        tracing::error!("cannot start the stdin reader: {e}");
    }
    rx
}

/// The framing loop; `deliver` returns false when nobody listens any more.
pub fn read_lines<R: Read>(input: R, max_line: usize, mut deliver: impl FnMut(Incoming) -> bool) {
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, input);
    let mut line: Vec<u8> = Vec::new();
    let mut discarding = false;
    loop {
        let chunk = match reader.fill_buf() {
            Ok([]) => break,
            Ok(chunk) => chunk,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::warn!("stdin read failed: {e}");
                break;
            }
        };
        let (take, complete) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        if !discarding {
            if line.len() + take > max_line {
                discarding = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(&chunk[..take]);
            }
        }
        reader.consume(if complete { take + 1 } else { take });
        if complete {
            let item = if discarding { too_long(max_line) } else { classify(strip_cr(&line)) };
            discarding = false;
            line.clear();
            if line.capacity() > READ_BUFFER_BYTES * 16 {
                line.shrink_to(READ_BUFFER_BYTES);
            }
            if !skip(&item) && !deliver(item) {
                return;
            }
        }
    }
    // A last line without a terminator still counts.
    if discarding {
        deliver(too_long(max_line));
    } else if !line.iter().all(u8::is_ascii_whitespace) {
        let item = classify(&line);
        if !skip(&item) {
            deliver(item);
        }
    }
}

fn skip(item: &Incoming) -> bool {
    matches!(item, Incoming::Ignore)
}

fn strip_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn too_long(max_line: usize) -> Incoming {
    let mut error = ErrorCode::InvalidRequest.with_message("Invalid request");
    error.data = Value::String(format!("line exceeds the maximum length of {max_line} bytes and was skipped"));
    Incoming::Reject { id: None, error }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(input: &[u8], max: usize) -> Vec<Incoming> {
        let mut out = Vec::new();
        read_lines(input, max, |i| {
            out.push(i);
            true
        });
        out
    }

    #[test]
    fn over_long_line_is_skipped_and_the_next_served() {
        let mut input = vec![b'x'; 100];
        input.extend_from_slice(b"\n{\"id\":\"a\",\"method\":\"cancel\"}\n");
        let out = collect(&input, 50);
        assert_eq!(out.len(), 2);
        assert!(matches!(&out[0], Incoming::Reject { error, .. } if error.code == -32600));
        assert!(matches!(&out[1], Incoming::Request { method, .. } if method == "cancel"));
    }

    #[test]
    fn blank_lines_are_parse_errors_and_last_line_without_newline_counts() {
        let out = collect(b"\n{\"id\":\"a\",\"method\":\"cancel\"}", 1000);
        assert_eq!(out.len(), 2);
        assert!(matches!(&out[0], Incoming::Reject { error, .. } if error.code == -32700));
    }

    #[test]
    fn crlf_lines_parse() {
        let out = collect(b"{\"id\":\"a\",\"method\":\"cancel\"}\r\n", 1000);
        assert!(matches!(&out[0], Incoming::Request { .. }));
    }
}
