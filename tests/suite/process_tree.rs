//! Safety (`docs/tools.md` §19.1): processes die with their Shell call. A cancel kills the call's whole
//! descendant tree, including children that called `setsid` and orphans that were re-parented;
//! daemons of commands that finished normally keep running until the server exits; kiwi reaps the
//! orphans it adopts, so no zombies accumulate.
//!
//! The checks poll `/proc` with a generous bound; none of them measures time.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::Env;
use serde_json::{Value, json};

/// Bound of every poll loop (not a timing assertion: the expected state usually holds at once).
const POLL: Duration = Duration::from_secs(10);

fn shell(id: &str, command: &str) -> String {
    let args = serde_json::to_string(&json!({ "command": command })).unwrap();
    format!("tool_call: {}", json!({"id": id, "name": "Shell", "arguments": args}))
}

/// `(state, ppid)` of `pid` from `/proc/<pid>/stat`, or None once the process is gone (reaped).
fn stat(pid: i32) -> Option<(String, i32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.to_string();
    let ppid = fields.next()?.parse().ok()?;
    Some((state, ppid))
}

fn running(pid: i32) -> bool {
    stat(pid).is_some_and(|(state, _)| state != "Z" && state != "X")
}

/// Polls until `ok()` holds; false if it still does not after [`POLL`].
fn eventually(mut ok: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + POLL;
    loop {
        if ok() {
            return true;
        }
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The pids the command wrote into `names` (one file each), once all are there.
fn pids(dir: &Path, names: &[&str]) -> Vec<i32> {
    let mut out = Vec::new();
    assert!(
        eventually(|| {
            out = names
                .iter()
                .filter_map(|n| std::fs::read_to_string(dir.join(n)).ok()?.trim().parse::<i32>().ok())
                .collect();
            out.len() == names.len() && out.iter().all(|p| running(*p))
        }),
        "the command did not start its processes"
    );
    out
}

/// Zombie children of `parent`.
fn zombies_of(parent: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        if let Some((state, ppid)) = stat(pid)
            && ppid == parent
            && state == "Z"
        {
            out.push(pid);
        }
    }
    out
}

/// Last-resort clean-up so a failing test leaves no sleeper behind.
struct Sweep(Vec<i32>);

impl Drop for Sweep {
    fn drop(&mut self) {
        for &pid in &self.0 {
            if running(pid) {
                // SAFETY: plain syscall on a pid this test started (through kiwi).
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

#[test]
fn cancel_kills_setsid_children_background_jobs_and_orphans() {
    let env = Env::new();
    let w = env.work();
    let command = "sleep 30 & echo $! > bg.pid; \
                   setsid sleep 30 & echo $! > sid.pid; \
                   (setsid sleep 30 > /dev/null 2>&1 & echo $! > orphan.pid); \
                   (setsid -f sleep 30 > /dev/null 2>&1); \
                   sleep 30";
    let config = env.scripted_config(&[&shell("tc-1", command), "text: still here"]);
    let mut k = env.spawn(&config, &["--yolo"]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let started = pids(&w, &["bg.pid", "sid.pid", "orphan.pid"]);
    let _sweep = Sweep(started.clone());
    k.send(json!({"jsonrpc":"2.0","id":"c","method":"cancel"}));
    let (_, response) = k.until_response(&json!("p0"));
    assert_eq!(response["result"]["status"], "cancelled");
    for pid in &started {
        assert!(eventually(|| stat(*pid).is_none()), "process {pid} survived the cancel: {:?}", stat(*pid));
    }
    // `setsid -f` forked a child whose pid the shell never saw: nothing of the call is left
    // under kiwi, and nothing runs `sleep 30` from this work dir's call.
    let kiwi = k.child.id() as i32;
    assert!(eventually(|| zombies_of(kiwi).is_empty()), "zombies under kiwi: {:?}", zombies_of(kiwi));
    assert!(eventually(|| children_of(kiwi).is_empty()), "left under kiwi: {:?}", children_of(kiwi));
    // The server still serves.
    let (_, r) = k.prompt("p1", json!("next"));
    assert_eq!(r["result"]["status"], "finished");
}

/// Every (non-zombie) child of `parent`.
fn children_of(parent: i32) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else { continue };
        if let Some((state, ppid)) = stat(pid)
            && ppid == parent
            && state != "Z"
        {
            out.push(pid);
        }
    }
    out
}

#[test]
fn timeout_kills_setsid_children_and_orphans() {
    let env = Env::new();
    let w = env.work();
    let command = "setsid sleep 30 & echo $! > sid.pid; \
                   (setsid sleep 30 > /dev/null 2>&1 & echo $! > orphan.pid); \
                   sleep 30";
    let args = serde_json::to_string(&json!({ "command": command, "timeout": 1 })).unwrap();
    let call = format!("tool_call: {}", json!({"id": "tc-1", "name": "Shell", "arguments": args}));
    let config = env.scripted_config(&[&call]);
    let mut k = env.spawn(&config, &["--yolo"]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let started = pids(&w, &["sid.pid", "orphan.pid"]);
    let _sweep = Sweep(started.clone());
    let (events, _) = k.until_response(&json!("p0"));
    let result = events.iter().find(|m| m["params"]["type"] == "ToolResult").expect("a tool result");
    assert_eq!(result["params"]["payload"]["return_value"]["message"], "Command killed by timeout (1s)");
    for pid in &started {
        assert!(eventually(|| stat(*pid).is_none()), "process {pid} survived the timeout: {:?}", stat(*pid));
    }
}

/// Daemons started by a command that finished normally are left running (they are adopted by
/// kiwi, which reaps them) and are killed when the server exits.
#[test]
fn daemons_of_finished_commands_run_until_the_server_exits() {
    let env = Env::new();
    let w = env.work();
    let command = "sleep 30 > /dev/null 2>&1 & echo $! > d1.pid; \
                   (setsid sleep 30 > /dev/null 2>&1 & echo $! > d2.pid); \
                   for i in 1 2 3 4 5; do (sleep 0.$i > /dev/null 2>&1 &); done; \
                   echo started";
    let config = env.scripted_config(&[&shell("tc-1", command), "text: done", "text: again"]);
    let mut k = env.spawn(&config, &["--yolo"]);
    let kiwi = k.child.id() as i32;
    let (events, r) = k.prompt("p0", json!("go"));
    assert_eq!(r["result"]["status"], "finished");
    let result: Vec<&Value> = events.iter().filter(|m| m["params"]["type"] == "ToolResult").collect();
    assert_eq!(result[0]["params"]["payload"]["return_value"]["output"], "started\n");
    let daemons = pids(&w, &["d1.pid", "d2.pid"]);
    let _sweep = Sweep(daemons.clone());
    // Orphaned daemons are adopted by kiwi (a child subreaper), not by init.
    assert!(eventually(|| stat(daemons[1]).is_some_and(|(_, ppid)| ppid == kiwi)), "{:?}", stat(daemons[1]));
    // The short-lived orphans exited and were reaped: no zombie accumulates under kiwi.
    assert!(eventually(|| zombies_of(kiwi).is_empty()), "zombies under kiwi: {:?}", zombies_of(kiwi));
    let (_, r) = k.prompt("p1", json!("next"));
    assert_eq!(r["result"]["status"], "finished");
    assert!(daemons.iter().all(|p| running(*p)), "daemons died before the server exit");
    k.close_stdin();
    assert!(k.wait_exit(POLL).expect("exits after EOF").success());
    for pid in &daemons {
        assert!(eventually(|| !running(*pid)), "daemon {pid} outlived the server");
    }
}

/// The server exits (EOF) while a call runs: its setsid'd children and orphans die too.
#[test]
fn server_exit_kills_a_running_call_with_setsid_children_and_orphans() {
    let env = Env::new();
    let w = env.work();
    let command = "setsid sleep 30 & echo $! > sid.pid; \
                   (setsid sleep 30 > /dev/null 2>&1 & echo $! > orphan.pid); \
                   sleep 30";
    let config = env.scripted_config(&[&shell("tc-1", command)]);
    let mut k = env.spawn(&config, &["--yolo"]);
    k.send(json!({"jsonrpc":"2.0","id":"p0","method":"prompt","params":{"user_input":"go"}}));
    let started = pids(&w, &["sid.pid", "orphan.pid"]);
    let _sweep = Sweep(started.clone());
    k.close_stdin();
    assert!(k.wait_exit(POLL).expect("exits after EOF").success());
    for pid in &started {
        assert!(eventually(|| !running(*pid)), "process {pid} outlived the server");
    }
}
