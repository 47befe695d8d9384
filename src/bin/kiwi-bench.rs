//! `cargo run --release --bin kiwi-bench`: start-up, idle memory, event throughput and step
//! overhead of the release `kiwi` binary, measured from a client's side over pipes.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
}

impl Server {
    fn spawn(bin: &Path, dir: &Path, config: &Path) -> Server {
        let mut child = Command::new(bin)
            .args(["--wire", "--config-file"])
            .arg(config)
            .arg("--work-dir")
            .arg(dir)
            .env("KIMI_SHARE_DIR", dir.join("share"))
            .env("HOME", dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn kiwi (build it with --release first)");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::with_capacity(1 << 20, child.stdout.take().expect("stdout"));
        Server { child, stdin, stdout }
    }

    fn send(&mut self, v: Value) {
        let mut line = serde_json::to_vec(&v).expect("json");
        line.push(b'\n');
        self.stdin.write_all(&line).expect("write");
        self.stdin.flush().expect("flush");
    }

    /// Reads lines until the response with `id`; returns the number of lines before it.
    fn until(&mut self, id: &str) -> usize {
        let needle = format!("\"id\":\"{id}\"");
        let mut n = 0;
        let mut line = String::new();
        loop {
            line.clear();
            if self.stdout.read_line(&mut line).expect("read") == 0 {
                panic!("kiwi exited before answering {id}");
            }
            if line.contains(&needle) && !line.contains("\"method\"") {
                return n;
            }
            n += 1;
        }
    }

    fn proc_field(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with(field))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// CPU time (user + system) in seconds.
    fn cpu(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        let after = stat.rsplit(')').next().unwrap_or("");
        let fields: Vec<&str> = after.split_whitespace().collect();
        let ticks: u64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
            + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        ticks as f64 / hz
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn write_config(dir: &Path, scripts: &[String]) -> PathBuf {
    let scripts_path = dir.join("scripts.json");
    std::fs::write(&scripts_path, serde_json::to_string(scripts).expect("json")).expect("write scripts");
    let config = json!({
        "default_model": "s",
        "models": {"s": {"provider": "p", "model": "scripted_echo", "max_context_size": 100000000}},
        "providers": {"p": {"type": "_scripted_echo", "base_url": "", "api_key": "",
            "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": scripts_path}}},
        "loop_control": {"max_steps_per_turn": 100000, "reserved_context_size": 1000}
    });
    let path = dir.join("config.json");
    std::fs::write(&path, config.to_string()).expect("write config");
    path
}

fn main() {
    let bin = std::env::current_exe().expect("exe").with_file_name("kiwi");
    let tmp = std::env::temp_dir().join(format!("kiwi-bench-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("tmp");
    println!("kiwi-bench: {}", bin.display());

    // 1. spawn → initialize answered; idle RSS.
    let config = write_config(&tmp, &[]);
    let mut startup = Vec::new();
    let mut idle_rss = Vec::new();
    for i in 0..21 {
        let t = Instant::now();
        let mut s = Server::spawn(&bin, &tmp, &config);
        s.send(json!({"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocol_version":"1.2"}}));
        s.until("i");
        startup.push(t.elapsed().as_secs_f64() * 1000.0);
        if i % 5 == 0 {
            std::thread::sleep(Duration::from_millis(200));
            idle_rss.push(s.proc_field("VmHWM:") as f64 / 1024.0);
        }
    }
    println!("spawn -> initialize answered: median {:.2} ms", median(startup));
    println!("idle peak RSS: median {:.2} MB", median(idle_rss));

    // 2. a 20,000-part turn.
    let parts = 20_000;
    let mut script = String::with_capacity(parts * 12);
    for i in 0..parts {
        script.push_str(&format!("text: t{i}\n"));
    }
    let mut rates = Vec::new();
    let mut cpu_per_event = Vec::new();
    let mut rss = Vec::new();
    for _ in 0..5 {
        let config = write_config(&tmp, std::slice::from_ref(&script));
        let mut s = Server::spawn(&bin, &tmp, &config);
        s.send(json!({"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocol_version":"1.2"}}));
        s.until("i");
        let cpu0 = s.cpu();
        let t = Instant::now();
        s.send(json!({"jsonrpc":"2.0","id":"p","method":"prompt","params":{"user_input":"go"}}));
        let events = s.until("p");
        let secs = t.elapsed().as_secs_f64();
        rates.push(events as f64 / secs);
        cpu_per_event.push((s.cpu() - cpu0) / events as f64 * 1e6);
        rss.push(s.proc_field("VmHWM:") as f64 / 1024.0);
    }
    println!(
        "20,000-part turn: median {:.0} events/s, {:.2} µs server CPU per event, peak RSS {:.2} MB",
        median(rates),
        median(cpu_per_event),
        median(rss)
    );

    // 3. 200 sequential SetTodoList steps.
    let steps = 200;
    let mut scripts: Vec<String> = (0..steps)
        .map(|i| format!("tool_call: {{\"id\": \"tc-{i}\", \"name\": \"SetTodoList\", \"arguments\": \"{{\\\"todos\\\": [{{\\\"title\\\": \\\"step {i}\\\", \\\"status\\\": \\\"in_progress\\\"}}]}}\"}}"))
        .collect();
    scripts.push("text: done".into());
    let mut per_step = Vec::new();
    for _ in 0..5 {
        let config = write_config(&tmp, &scripts);
        let mut s = Server::spawn(&bin, &tmp, &config);
        s.send(json!({"jsonrpc":"2.0","id":"i","method":"initialize","params":{"protocol_version":"1.2"}}));
        s.until("i");
        let t = Instant::now();
        s.send(json!({"jsonrpc":"2.0","id":"p","method":"prompt","params":{"user_input":"go"}}));
        s.until("p");
        per_step.push(t.elapsed().as_secs_f64() * 1000.0 / (steps + 1) as f64);
    }
    println!("{steps} SetTodoList steps: median {:.3} ms per step", median(per_step));
    let _ = std::fs::remove_dir_all(&tmp);
}
