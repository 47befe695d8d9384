//! The client's side of a `kiwi --wire` child: JSON-RPC lines over pipes, plus the kernel's view
//! of the child (CPU time, peak RSS) so the numbers are the server's own, not the bench's.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

/// A running `kiwi` under measurement. Killed on drop.
///
/// Unlike the tests' `common::Kiwi` (a reader thread, a channel, every line parsed and kept), it
/// reads stdout on the caller's thread and parses only the awaited response: on a shared machine
/// the client's own work would otherwise eat into the server's CPU and show in its numbers.
pub struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
}

impl Server {
    /// Starts `cmd` (from `common::Env::command`) with piped stdin and stdout; its stderr stays
    /// the bench's.
    pub fn spawn(mut cmd: Command) -> Server {
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit());
        let mut child = cmd.spawn().expect("spawn kiwi");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::with_capacity(1 << 20, child.stdout.take().expect("stdout"));
        Server { child, stdin, stdout, line: String::new() }
    }

    pub fn send(&mut self, v: &Value) {
        let mut line = serde_json::to_vec(v).expect("json");
        line.push(b'\n');
        self.stdin.write_all(&line).expect("write");
        self.stdin.flush().expect("flush");
    }

    pub fn initialize(&mut self) {
        self.send(&json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocol_version":"1.2"}}));
        self.until("init");
    }

    pub fn prompt(&mut self, id: &str, text: &str) {
        self.send(&json!({"jsonrpc":"2.0","id":id,"method":"prompt","params":{"user_input":text}}));
    }

    /// Reads lines until the response with `id`; returns the number of lines before it.
    /// Panics on an error response: a number measured over a failed turn would be meaningless.
    pub fn until(&mut self, id: &str) -> usize {
        let needle = format!("\"id\":\"{id}\"");
        let mut n = 0;
        loop {
            self.line.clear();
            if self.stdout.read_line(&mut self.line).expect("read") == 0 {
                panic!("kiwi exited before answering {id}");
            }
            if self.line.contains(&needle) && !self.line.contains("\"method\"") {
                let v: Value = serde_json::from_str(&self.line).expect("response json");
                if v.get("error").is_some() {
                    panic!("kiwi answered {id} with an error: {}", self.line.trim_end());
                }
                return n;
            }
            n += 1;
        }
    }

    /// A `/proc/<pid>/status` field in kB (`VmHWM:` is the peak RSS).
    pub fn status_kb(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with(field))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    pub fn peak_rss_mb(&self) -> f64 {
        self.status_kb("VmHWM:") as f64 / 1024.0
    }

    /// CPU time (user + system, all threads) in seconds from `/proc/<pid>/stat`: clock ticks,
    /// so only 10 ms resolution.
    pub fn cpu_ticks(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        // The command name may contain spaces; the fields after its closing parenthesis do not.
        let after = stat.rsplit(')').next().unwrap_or("");
        let fields: Vec<&str> = after.split_whitespace().collect();
        let ticks: u64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
            + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        ticks as f64 / hz
    }

    /// CPU time in seconds with nanosecond resolution: the sum of the live threads'
    /// `/proc/<pid>/task/*/schedstat` run times (kiwi's threads live as long as the process).
    /// Falls back to `cpu_ticks` where schedstat is missing.
    pub fn cpu(&self) -> f64 {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", self.child.id())) else { return self.cpu_ticks() };
        let mut ns = 0u64;
        let mut any = false;
        for task in tasks.flatten() {
            let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
            if let Some(v) = stat.split_whitespace().next().and_then(|v| v.parse::<u64>().ok()) {
                ns += v;
                any = true;
            }
        }
        if any && ns > 0 { ns as f64 / 1e9 } else { self.cpu_ticks() }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn median(mut v: Vec<f64>) -> f64 {
    assert!(!v.is_empty(), "median of nothing");
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Least-squares slope of `ys` over 0, 1, 2, …
pub fn slope(ys: &[f64]) -> f64 {
    let xs: Vec<f64> = (0..ys.len()).map(|x| x as f64).collect();
    fit(&xs, ys).0
}

/// Least-squares line through the points: (slope, intercept).
pub fn fit(xs: &[f64], ys: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean_x = xs.iter().sum::<f64>() / n;
    let mean_y = ys.iter().sum::<f64>() / n;
    let (mut num, mut den) = (0.0, 0.0);
    for (x, y) in xs.iter().zip(ys) {
        num += (x - mean_x) * (y - mean_y);
        den += (x - mean_x) * (x - mean_x);
    }
    let slope = num / den;
    (slope, mean_y - slope * mean_x)
}
