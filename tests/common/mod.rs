//! Test harness: spawns the real `kiwi` binary and talks to it over pipes.
//!
//! Shared with the benchmarks (`benches/kiwi-bench` includes this file by `#[path]`): `Env`
//! builds the temp dirs, configs and the command line for both; the bench reads the child's
//! output with its own measuring client instead of `Kiwi`.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Variables a spawned server must not inherit: the provider settings would point it away from
/// the config (and the mock), a proxy would route the mock's 127.0.0.1 through itself, and the
/// scripted-echo trace would add lines to its stdout. The `kiwi web` kit scrubs the same.
pub const SCRUBBED_ENV: &[&str] = &[
    "KIMI_BASE_URL",
    "KIMI_API_KEY",
    "KIMI_MODEL_NAME",
    "KIMI_MODEL_MAX_CONTEXT_SIZE",
    "KIMI_MODEL_CAPABILITIES",
    "KIMI_MODEL_TEMPERATURE",
    "KIMI_MODEL_TOP_P",
    "KIMI_MODEL_MAX_TOKENS",
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "KIMI_SCRIPTED_ECHO_TRACE",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "KIWI_WEB_AUTH_TOKEN",
];

/// A temp home with a share dir and a work dir.
pub struct Env {
    pub dir: tempfile::TempDir,
}

/// The text of a `config.toml` whose default model is the scripted echo provider playing the
/// scripts file at `scripts_path` (for tests that lay out a share dir of their own).
pub fn scripted_config_toml(scripts_path: &std::path::Path) -> String {
    format!(
        "default_model = \"s\"\n[models.s]\nprovider = \"p\"\nmodel = \"scripted_echo\"\nmax_context_size = 100000\n\
         [providers.p]\ntype = \"_scripted_echo\"\nbase_url = \"\"\napi_key = \"\"\nenv = {{ KIMI_SCRIPTED_ECHO_SCRIPTS = {:?} }}\n",
        scripts_path.to_str().unwrap()
    )
}

impl Env {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("work")).unwrap();
        std::fs::create_dir_all(dir.path().join("home")).unwrap();
        Env { dir }
    }

    pub fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    pub fn share(&self) -> PathBuf {
        self.home().join(".kimi")
    }

    /// Writes `scripts` as a scripted-echo file and a config that uses it; returns the config path.
    pub fn scripted_config(&self, scripts: &[&str]) -> PathBuf {
        self.scripted_config_with(scripts, json!({}))
    }

    pub fn scripted_config_with(&self, scripts: &[&str], extra: Value) -> PathBuf {
        self.named_scripted_config("config", scripts, extra)
    }

    /// Like `scripted_config_with`, as `<name>.json` (scripts in `<name>.scripts.json`), so that
    /// several configs can live in one `Env`.
    pub fn named_scripted_config<S: serde::Serialize>(&self, name: &str, scripts: &[S], extra: Value) -> PathBuf {
        let scripts_path = self.dir.path().join(format!("{name}.scripts.json"));
        std::fs::write(&scripts_path, serde_json::to_string(scripts).unwrap()).unwrap();
        let mut config = json!({
            "default_model": "scripted",
            "models": {"scripted": {"provider": "scripted_provider", "model": "scripted_echo", "max_context_size": 100000}},
            "providers": {"scripted_provider": {"type": "_scripted_echo", "base_url": "", "api_key": "",
                "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": scripts_path.to_str().unwrap()}}}
        });
        merge(&mut config, extra);
        self.write_config(name, &config)
    }

    /// A config whose default model `m` is `model` at a provider of type `kind` (API key
    /// `sk-mock-key`) at `base_url`, with `extra` merged over it; written as `config.json`.
    pub fn provider_config(&self, kind: &str, model: &str, base_url: &str, extra: Value) -> PathBuf {
        let mut config = json!({
            "default_model": "m",
            "models": {"m": {"provider": "p", "model": model, "max_context_size": 100000}},
            "providers": {"p": {"type": kind, "base_url": base_url, "api_key": "sk-mock-key"}}
        });
        merge(&mut config, extra);
        self.write_config("config", &config)
    }

    fn write_config(&self, name: &str, config: &Value) -> PathBuf {
        let path = self.dir.path().join(format!("{name}.json"));
        std::fs::write(&path, serde_json::to_string_pretty(config).unwrap()).unwrap();
        path
    }

    /// The folder of session `id` of the work dir: `<share>/sessions/<md5 of the work dir>/<id>`.
    pub fn session_dir(&self, id: &str) -> PathBuf {
        use md5::{Digest, Md5};
        let work = self.work();
        let key: String = Md5::digest(work.to_str().unwrap().as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
        self.share().join("sessions").join(key).join(id)
    }

    pub fn command(&self, config: &Path, extra: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kiwi"));
        cmd.arg("--wire").arg("--config-file").arg(config).args(extra).arg("--work-dir").arg(self.work());
        cmd.env("HOME", self.home()).env("KIMI_SHARE_DIR", self.share());
        for var in SCRUBBED_ENV {
            cmd.env_remove(var);
        }
        cmd
    }

    /// `kiwi acp` with the config; ACP sessions name their work dir themselves (`session/new`).
    pub fn acp_command(&self, config: &Path, extra: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kiwi"));
        cmd.arg("acp").arg("--config-file").arg(config).args(extra);
        cmd.env("HOME", self.home()).env("KIMI_SHARE_DIR", self.share());
        for var in SCRUBBED_ENV {
            cmd.env_remove(var);
        }
        cmd
    }

    pub fn spawn(&self, config: &Path, extra: &[&str]) -> Kiwi {
        Kiwi::spawn(self.command(config, extra))
    }
}

pub fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(b), Value::Object(e)) => {
            for (k, v) in e {
                merge(b.entry(k).or_insert(Value::Null), v);
            }
        }
        (b, e) => *b = e,
    }
}

/// A running server. Killed on drop.
pub struct Kiwi {
    pub child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// Every JSON message read so far, in order.
    pub seen: Vec<Value>,
    /// Lines that were not JSON objects (e.g. the scripted-echo trace), with the number of JSON
    /// messages seen before each.
    pub raw: Vec<(usize, String)>,
}

impl Kiwi {
    pub fn spawn(mut cmd: Command) -> Self {
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn kiwi");
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("[kiwi stderr] {line}");
            }
        });
        let stdin = child.stdin.take();
        Kiwi { child, stdin, lines, seen: Vec::new(), raw: Vec::new() }
    }

    pub fn send(&mut self, message: Value) {
        self.send_raw(&serde_json::to_string(&message).unwrap());
    }

    pub fn send_raw(&mut self, line: &str) {
        self.send_bytes(format!("{line}\n").as_bytes());
    }

    pub fn send_bytes(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(bytes).unwrap();
        stdin.flush().unwrap();
    }

    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Next JSON line (non-JSON lines are skipped), or None on EOF / timeout.
    pub fn next_within(&mut self, timeout: Duration) -> Option<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    if let Ok(v) = serde_json::from_str::<Value>(&line)
                        && v.is_object()
                    {
                        self.seen.push(v.clone());
                        return Some(v);
                    }
                    self.raw.push((self.seen.len(), line));
                }
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    pub fn next(&mut self) -> Value {
        self.next_within(TIMEOUT).expect("a message from kiwi before the timeout")
    }

    /// Reads messages until the response to `id`; returns (messages before it, the response).
    pub fn until_response(&mut self, id: &Value) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let m = self.next();
            if m.get("method").is_none() && m.get("id") == Some(id) {
                return (before, m);
            }
            before.push(m);
        }
    }

    /// Sends a request and waits for its response, collecting what came before.
    pub fn call(&mut self, id: &str, method: &str, params: Value) -> (Vec<Value>, Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.until_response(&json!(id))
    }

    pub fn initialize(&mut self) -> Value {
        self.call("init", "initialize", json!({"protocol_version": "1.2"})).1
    }

    pub fn prompt(&mut self, id: &str, input: Value) -> (Vec<Value>, Value) {
        self.call(id, "prompt", json!({"user_input": input}))
    }

    /// Reads until the next server request (approval or external tool call).
    pub fn until_request(&mut self) -> (Vec<Value>, Value) {
        let mut before = Vec::new();
        loop {
            let m = self.next();
            if m["method"] == "request" {
                return (before, m);
            }
            before.push(m);
        }
    }

    pub fn wait_exit(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        None
    }
}

impl Drop for Kiwi {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `params.type` of each event in `messages` (requests as `request:<type>`).
pub fn types(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .map(|m| match m["method"].as_str() {
            Some("event") => m["params"]["type"].as_str().unwrap_or("?").to_string(),
            Some("request") => format!("request:{}", m["params"]["type"].as_str().unwrap_or("?")),
            _ => "response".to_string(),
        })
        .collect()
}

/// Whether process `pid` still runs; a zombie (exited, not yet reaped) counts as gone.
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat.rsplit(')').next().unwrap_or("").trim_start().starts_with('Z'),
        Err(_) => false,
    }
}

/// Runs `cmd` (a kiwi wire server), sends one prompt and waits for its answer (`Null` when the
/// server ends without one), then closes stdin and waits for the exit: stderr and the answer.
pub fn prompt_once(mut cmd: Command) -> (String, Value) {
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"prompt\",\"params\":{\"user_input\":\"hi\"}}\n")
        .unwrap();
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let answer = stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(&l.unwrap()).unwrap())
        .find(|v| v["id"] == "p")
        .unwrap_or(Value::Null);
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    (String::from_utf8(out.stderr).unwrap(), answer)
}

/// Polls `done` every 20 ms until it holds or `limit` has passed; its last answer.
pub fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    done()
}

/// `cmd` run by the kiwi binary named in `$KIWI_BIN` when it is set, with the same arguments and
/// environment: the benchmarks time another build of kiwi that way.
pub fn with_kiwi_bin(cmd: Command) -> Command {
    let Ok(bin) = std::env::var("KIWI_BIN") else { return cmd };
    let mut other = Command::new(bin);
    other.args(cmd.get_args());
    for (key, value) in cmd.get_envs() {
        match value {
            Some(value) => other.env(key, value),
            None => other.env_remove(key),
        };
    }
    other
}
