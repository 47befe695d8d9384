//! A stdio server's stderr, line by line into kiwi's log, within bounds: a server may write
//! anything there, for as long as it likes (one endless line once grew kiwi by gigabytes).
//!
//! Invariants: at most [`LINE_MAX`] bytes of a line are kept (the rest of it is dropped and the
//! line says so), at most about [`TOTAL_MAX`] bytes per server process reach the log (the line
//! that crosses the limit says that the rest is dropped), and memory stays at one read buffer
//! plus one line whatever the server writes. The pipe is drained to its end either way: a server
//! blocked on a full stderr pipe would stop answering.

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// The bytes of one stderr line that are kept.
pub const LINE_MAX: usize = 4096;

/// The bytes of one server process's stderr that are logged.
pub const TOTAL_MAX: usize = 1024 * 1024;

/// Reads `stderr` to its end, logging its lines as `MCP server <name> (stderr): <line>`.
pub async fn log_lines(name: String, stderr: impl AsyncRead + Unpin) {
    let mut reader = BufReader::new(stderr);
    let mut lines = Lines::default();
    let log = |line: String| tracing::warn!("MCP server {name} (stderr): {line}");
    loop {
        let chunk = match reader.fill_buf().await {
            Ok(chunk) if !chunk.is_empty() => chunk,
            _ => break,
        };
        let n = chunk.len();
        lines.feed(chunk, log);
        reader.consume(n);
    }
    if let Some(line) = lines.finish() {
        log(line);
    }
}

/// The line being read and what has been kept so far.
#[derive(Default)]
struct Lines {
    line: Vec<u8>,
    /// The line being read is longer than [`LINE_MAX`].
    cut: bool,
    kept: usize,
    /// [`TOTAL_MAX`] was reached: everything else is dropped.
    full: bool,
}

impl Lines {
    /// Takes in `bytes`; `emit` gets each finished line that is kept.
    fn feed(&mut self, mut bytes: &[u8], mut emit: impl FnMut(String)) {
        while !bytes.is_empty() {
            let (part, ended) = match bytes.iter().position(|&b| b == b'\n') {
                Some(i) => (&bytes[..i], true),
                None => (bytes, false),
            };
            bytes = &bytes[(part.len() + usize::from(ended))..];
            if self.full {
                continue;
            }
            let room = LINE_MAX - self.line.len();
            if part.len() > room {
                self.cut = true;
            }
            self.line.extend_from_slice(&part[..part.len().min(room)]);
            if ended && let Some(line) = self.end_line() {
                emit(line);
            }
        }
    }

    /// The last line when stderr ends without a newline.
    fn finish(&mut self) -> Option<String> {
        if self.line.is_empty() && !self.cut { None } else { self.end_line() }
    }

    fn end_line(&mut self) -> Option<String> {
        if self.full {
            return None;
        }
        let bytes = std::mem::take(&mut self.line);
        self.kept += bytes.len() + 1;
        let mut line = String::from_utf8_lossy(&bytes).trim_end_matches('\r').to_string();
        if std::mem::take(&mut self.cut) {
            line.push_str(&format!(" [line cut: longer than {LINE_MAX} bytes]"));
        }
        if self.kept >= TOTAL_MAX {
            self.full = true;
            line.push_str(&format!(" [{TOTAL_MAX} bytes of this server's stderr logged: the rest is dropped]"));
        }
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(chunks: &[&[u8]]) -> Vec<String> {
        let mut lines = Lines::default();
        let mut out = Vec::new();
        for chunk in chunks {
            lines.feed(chunk, |l| out.push(l));
        }
        out.extend(lines.finish());
        out
    }

    #[test]
    fn lines_across_reads() {
        assert_eq!(run(&[b"one\ntw", b"o\r\n", b"\nthree"]), ["one", "two", "", "three"]);
        assert!(run(&[b""]).is_empty());
    }

    #[test]
    fn a_long_line_is_cut_and_says_so() {
        let long = vec![b'x'; LINE_MAX * 3];
        let out = run(&[&long, &long, b"\nnext\n"]);
        assert_eq!(out.len(), 2);
        assert_eq!(out[0], format!("{} [line cut: longer than {LINE_MAX} bytes]", "x".repeat(LINE_MAX)));
        assert_eq!(out[1], "next");
        // A cut line that never ends is still logged (cut) when stderr closes.
        let out = run(&[&long]);
        assert!(out[0].ends_with("[line cut: longer than 4096 bytes]"), "{}", out[0]);
    }

    #[test]
    fn the_total_is_bounded_and_the_last_kept_line_says_so() {
        let line = format!("{}\n", "y".repeat(999));
        let all = line.repeat(TOTAL_MAX / 1000 * 3);
        let out = run(&[all.as_bytes()]);
        assert_eq!(out.len(), TOTAL_MAX.div_ceil(1000));
        assert!(out.last().unwrap().ends_with("of this server's stderr logged: the rest is dropped]"));
        assert!(out[..out.len() - 1].iter().all(|l| l.len() == 999));
    }
}
