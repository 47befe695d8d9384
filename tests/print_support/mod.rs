//! Helpers for the print-mode tests: spawning kiwi in either dialect, redacting ids, times and
//! paths, and golden transcripts under `tests/golden/` (`KIWI_BLESS=1` rewrites them).
#![allow(dead_code)]

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// A temp dir with a work dir, a home and a share dir.
pub struct Dirs {
    pub dir: tempfile::TempDir,
}

impl Dirs {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("work")).unwrap();
        std::fs::create_dir_all(dir.path().join("home/.kimi")).unwrap();
        Dirs { dir }
    }

    pub fn work(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    pub fn share(&self) -> PathBuf {
        self.dir.path().join("home/.kimi")
    }

    /// A scripted-echo config (one script per LLM call); returns its path.
    pub fn scripted(&self, scripts: &[&str]) -> PathBuf {
        let name = format!("scripts-{}.json", uuid::Uuid::new_v4());
        let scripts_path = self.dir.path().join(name);
        std::fs::write(&scripts_path, serde_json::to_string(scripts).unwrap()).unwrap();
        self.config(json!({
            "default_model": "scripted",
            "models": {"scripted": {"provider": "p", "model": "scripted_echo", "max_context_size": 100000}},
            "providers": {"p": {"type": "_scripted_echo", "base_url": "", "api_key": "",
                "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": scripts_path.to_str().unwrap()}}}
        }))
    }

    /// [`Self::scripted`] with `extra` merged over the config.
    pub fn scripted_with(&self, scripts: &[&str], extra: Value) -> PathBuf {
        let path = self.scripted(scripts);
        let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        crate::common::merge(&mut config, extra);
        self.config(config)
    }

    pub fn config(&self, config: Value) -> PathBuf {
        let path = self.dir.path().join(format!("config-{}.json", uuid::Uuid::new_v4()));
        std::fs::write(&path, serde_json::to_string_pretty(&config).unwrap()).unwrap();
        path
    }

    /// kiwi with `args`, the config, the work dir and a clean environment. The dialect follows
    /// from `args` (`--config-file` and `--work-dir` are accepted by both).
    pub fn command(&self, config: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kiwi"));
        cmd.args(args).arg("--config-file").arg(config).arg("--work-dir").arg(self.work());
        cmd.env("HOME", self.dir.path().join("home")).env("KIMI_SHARE_DIR", self.share());
        for var in [
            "KIMI_SCRIPTED_ECHO_TRACE",
            "KIMI_DIALECT",
            "CLAUDE_CODE_SDK_READS_SESSION_STATE",
            "KIMI_BASE_URL",
            "KIMI_API_KEY",
            "OPENAI_BASE_URL",
            "OPENAI_API_KEY",
        ] {
            cmd.env_remove(var);
        }
        cmd
    }
}

/// A finished run.
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn lines(&self) -> Vec<Value> {
        self.stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("stdout line is not JSON ({e}): {l}")))
            .collect()
    }
}

/// Runs to the end with `stdin` as input (closed afterwards).
pub fn run(mut cmd: Command, stdin: &str) -> Run {
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn kiwi");
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.as_bytes()).unwrap();
    drop(input);
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "kiwi did not exit");
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    let run = Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    eprintln!("[kiwi stderr]\n{}", run.stderr);
    run
}

/// Replaces what changes from run to run: ids by numbered placeholders (equal ids stay equal),
/// durations by 0, the work dir by `<work>`.
pub struct Redactor {
    seen: HashMap<String, String>,
    work: String,
}

impl Redactor {
    pub fn new(work: &Path) -> Self {
        Self { seen: HashMap::new(), work: work.display().to_string() }
    }

    fn placeholder(&mut self, kind: &str, value: &str) -> String {
        let n = self.seen.len() + 1;
        self.seen.entry(format!("{kind}:{value}")).or_insert_with(|| format!("<{kind}{n}>")).clone()
    }

    pub fn value(&mut self, v: &mut Value) {
        match v {
            Value::Object(map) => {
                for (key, value) in map.iter_mut() {
                    match (key.as_str(), &*value) {
                        ("uuid", Value::String(_)) => *value = json!("<uuid>"),
                        ("session_id", Value::String(s)) if !s.is_empty() => {
                            *value = json!(self.placeholder("session", s))
                        }
                        ("request_id", Value::String(s)) if s.starts_with("perm-") => {
                            *value = json!(self.placeholder("perm", s))
                        }
                        ("id", Value::String(s)) if s.starts_with("msg_") => *value = json!(self.placeholder("msg", s)),
                        ("duration_ms" | "duration_api_ms", Value::Number(_)) => *value = json!(0),
                        _ => self.value(value),
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|i| self.value(i)),
            Value::String(s) if s.contains(&self.work) => *s = s.replace(&self.work, "<work>"),
            _ => {}
        }
    }

    pub fn text(&self, text: &str) -> String {
        text.replace(&self.work, "<work>")
    }
}

/// One JSON value per line, redacted.
pub fn redacted_lines(lines: &[Value], work: &Path) -> String {
    let mut r = Redactor::new(work);
    lines
        .iter()
        .map(|l| {
            let mut l = l.clone();
            r.value(&mut l);
            serde_json::to_string(&l).unwrap()
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// Compares `actual` with `tests/golden/<name>`; `KIWI_BLESS=1` writes it instead.
pub fn assert_golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(name);
    if std::env::var("KIWI_BLESS").is_ok_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with KIWI_BLESS=1 to create it)", path.display()));
    if expected != actual {
        let mut report = String::new();
        for (i, (e, a)) in expected.lines().zip(actual.lines()).enumerate() {
            if e != a {
                report.push_str(&format!("line {}:\n  expected: {e}\n  actual:   {a}\n", i + 1));
            }
        }
        panic!(
            "{name} differs ({} expected lines, {} actual):\n{report}\nactual:\n{actual}",
            expected.lines().count(),
            actual.lines().count()
        );
    }
}

/// A scripted `Shell` call.
pub fn shell(id: &str, command: &str) -> String {
    let args = serde_json::to_string(&json!({ "command": command })).unwrap();
    format!("tool_call: {}", json!({"id": id, "name": "Shell", "arguments": args}))
}

/// Sends a signal to a child.
pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) on a pid we spawned; no memory is involved.
    let rc = unsafe { libc::kill(pid as i32, sig) };
    assert_eq!(rc, 0, "kill failed");
}

/// The session folders of the work dir (`<share>/sessions/<md5>/<id>`).
pub fn session_dir(dirs: &Dirs, id: &str) -> PathBuf {
    let sessions = dirs.share().join("sessions");
    for entry in std::fs::read_dir(&sessions).unwrap() {
        let dir = entry.unwrap().path().join(id);
        if dir.is_dir() {
            return dir;
        }
    }
    panic!("no session folder for {id}");
}
