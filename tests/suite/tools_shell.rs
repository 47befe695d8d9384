//! Shell tool: output, exit codes, timeouts, approvals and process-group cleanup.

use crate::tools_support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use kiwi::protocol::{ApprovalDecision, DisplayBlock};
use kiwi::tools::background::Work;
use kiwi::tools::output::OutputBuilder;
use kiwi::tools::process::group_alive;
use kiwi::tools::shell::{CommandRunner, Exit, Ran, Shell};
use kiwi::tools::{ToolCallContext, Toolset, Typed};
use serde_json::json;
use tools_support::*;

#[tokio::test]
async fn echo_succeeds_with_output() {
    let h = harness(true);
    let r = h.call("Shell", json!({"command": "echo hi"})).await;
    assert!(!r.is_error);
    assert_eq!(text(&r), "hi\n");
    assert_eq!(r.message, "Command executed successfully.");
    assert!(r.display.is_empty());
}

#[tokio::test]
async fn runs_in_work_dir_with_stdin_closed() {
    let h = harness(true);
    let r = h.call("Shell", json!({"command": "pwd; cat; echo done"})).await;
    assert!(!r.is_error, "{r:?}");
    assert_eq!(text(&r), format!("{}\ndone\n", h.work().display()));
}

#[tokio::test]
async fn stderr_is_merged_in_order() {
    let h = harness(true);
    let r = h.call("Shell", json!({"command": "echo out1; sleep 0.1; echo err1 >&2; sleep 0.1; echo out2"})).await;
    assert_eq!(text(&r), "out1\nerr1\nout2\n");
}

#[tokio::test]
async fn nonzero_exit_is_an_error_with_output() {
    let h = harness(true);
    let r = h.call("Shell", json!({"command": "echo partial; exit 3"})).await;
    assert!(r.is_error);
    assert_eq!(r.message, "Command failed with exit code: 3.");
    assert_eq!(brief(&r), Some("Failed with exit code: 3"));
    assert_eq!(text(&r), "partial\n");
}

#[tokio::test]
async fn empty_command_and_bad_timeout() {
    let h = harness(true);
    let r = h.call("Shell", json!({"command": ""})).await;
    assert_eq!(r.message, "Command cannot be empty.");
    assert_eq!(brief(&r), Some("Empty command"));
    for t in [0, 301, -5] {
        let r = h.call("Shell", json!({"command": "echo", "timeout": t})).await;
        assert!(r.message.starts_with("Error validating JSON arguments:"), "{}", r.message);
        assert_eq!(brief(&r), Some("Invalid arguments"));
    }
    let r = h.call("Shell", json!({"timeout": 5})).await;
    assert!(r.message.starts_with("Error validating JSON arguments:"));
    let r = h.call_raw("Shell", Some("{not json")).await;
    assert!(r.message.starts_with("Error parsing JSON arguments:"));
    let r = h.call_raw("Shell", Some("[]")).await;
    assert!(r.message.starts_with("Error validating JSON arguments:"));
}

/// A runner that runs nothing: it notes the time limit it was given and ends as told.
struct Told {
    exit: Exit,
    limits: std::sync::Mutex<Vec<Duration>>,
}

impl CommandRunner for Told {
    fn run<'a>(&'a self, _: &'a str, timeout: Duration, _: &'a ToolCallContext) -> BoxFuture<'a, Result<Ran, String>> {
        self.limits.lock().unwrap().push(timeout);
        let mut output = OutputBuilder::new();
        output.write("so far\n");
        let ran = Ran { output, exit: self.exit.clone(), note: Some("Said the runner.".into()) };
        Box::pin(async move { Ok(ran) })
    }

    fn background<'a>(&'a self, _: &'a str, _: u64, _: &'a ToolCallContext) -> BoxFuture<'a, Result<Work, String>> {
        Box::pin(async { Err("not here".to_string()) })
    }
}

/// Whatever runs the command, the Shell checks the arguments, passes the call's own timeout and
/// words the result.
#[tokio::test]
async fn any_runner_gets_the_calls_timeout_and_the_shells_wording() {
    let h = harness(true);
    let shell = |exit: Exit| {
        let runner = Arc::new(Told { exit, limits: Default::default() });
        (Toolset::new(vec![Arc::new(Typed::new(Shell::with_runner(runner.clone())))]), runner)
    };
    let (tools, runner) = shell(Exit::Signal("SIGTERM".into()));
    let r = tools.dispatch("Shell", Some(&json!({"command": "x", "timeout": 250}).to_string()), &h.ctx).await;
    assert_eq!(*runner.limits.lock().unwrap(), [Duration::from_secs(250)]);
    assert_eq!(r.message, "Command terminated by signal: SIGTERM. Said the runner.");
    assert_eq!((brief(&r), text(&r)), (Some("Terminated by SIGTERM"), "so far\n"));
    let (tools, runner) = shell(Exit::TimedOut);
    let r = tools.dispatch("Shell", Some(&json!({"command": "x"}).to_string()), &h.ctx).await;
    assert_eq!(*runner.limits.lock().unwrap(), [Duration::from_secs(60)], "the default timeout");
    assert_eq!(r.message, "Command killed by timeout (60s) Said the runner.");
    let (tools, runner) = shell(Exit::Code(0));
    for bad in [json!({"command": "x", "timeout": 301}), json!({"command": ""})] {
        let r = tools.dispatch("Shell", Some(&bad.to_string()), &h.ctx).await;
        assert!(r.is_error, "{bad}");
    }
    assert!(runner.limits.lock().unwrap().is_empty(), "a refused call runs nothing");
    let r = tools.dispatch("Shell", Some(&json!({"command": "x"}).to_string()), &h.ctx).await;
    assert_eq!(r.message, "Command executed successfully. Said the runner.");
}

#[tokio::test]
async fn timeout_kills_and_keeps_partial_output() {
    let h = harness(true);
    let start = Instant::now();
    let r = h.call("Shell", json!({"command": "echo before; sleep 30 & sleep 30", "timeout": 1})).await;
    assert!(start.elapsed() < Duration::from_secs(5));
    assert!(r.is_error);
    assert_eq!(r.message, "Command killed by timeout (1s)");
    assert_eq!(brief(&r), Some("Killed by timeout (1s)"));
    assert_eq!(text(&r), "before\n");
}

#[tokio::test]
async fn long_lines_and_huge_output_are_truncated() {
    let h = harness(true);
    let r = h.call("Shell", json!({"command": "head -c 100000 /dev/zero | tr '\\0' 'a'; echo; seq 1 100000"})).await;
    assert!(!r.is_error);
    let out = text(&r);
    let first = out.lines().next().unwrap_or_default();
    // 2,000 characters including the newline.
    assert_eq!(first.chars().count(), 1999);
    assert!(first.ends_with("[...truncated]"));
    assert!(out.chars().count() <= 50_000 + 20);
    assert_eq!(r.message, "Command executed successfully. Output is truncated to fit in the message.");
}

#[tokio::test]
async fn invalid_utf8_is_replaced() {
    let h = harness(true);
    let r = h.call("Shell", json!({"command": "printf 'a\\377b\\n'"})).await;
    assert_eq!(text(&r), "a\u{FFFD}b\n");
}

#[tokio::test]
async fn approval_request_shape_and_reject() {
    let mut h = harness(false);
    let (r, req) = h.call_answering("Shell", json!({"command": "touch x"}), ApprovalDecision::Reject).await;
    let req = req.expect("approval asked");
    assert_eq!(req.sender, "Shell");
    assert_eq!(req.action, "run command");
    assert_eq!(req.description, "Run command `touch x`");
    assert_eq!(req.tool_call_id, "tc-1");
    assert_eq!(req.display, vec![DisplayBlock::Shell { language: "bash".into(), command: "touch x".into() }]);
    assert_eq!(r.kind(), kiwi::protocol::ResultKind::Rejected);
    assert!(!h.path("x").exists());

    let (r, req) = h.call_answering("Shell", json!({"command": "touch x"}), ApprovalDecision::Approve).await;
    assert!(req.is_some());
    assert!(!r.is_error);
    assert!(h.path("x").exists());
}

#[tokio::test]
async fn empty_command_asks_no_approval() {
    let mut h = harness(false);
    let (r, req) = h.call_answering("Shell", json!({"command": ""}), ApprovalDecision::Approve).await;
    assert!(req.is_none());
    assert_eq!(brief(&r), Some("Empty command"));
}

#[tokio::test]
async fn dropping_the_call_kills_the_whole_group() {
    let h = harness(true);
    let pid_file = h.path("pgid");
    let cmd = format!("echo $$ > {}; sleep 30 & sleep 30", pid_file.display());
    let call = h.call("Shell", json!({"command": cmd}));
    let pgid = tokio::select! {
        _ = call => panic!("finished early"),
        pgid = wait_for_pgid(&pid_file) => pgid,
    };
    // Give bash time to fork both sleeps before the future is dropped.
    tokio::time::sleep(Duration::from_millis(200)).await;
    // `call` was dropped when select! returned.
    assert!(gone_within(pgid, Duration::from_secs(1)).await, "process group {pgid} survived the cancel");
}

#[tokio::test]
async fn cancelled_turn_via_abort_kills_the_group() {
    let h = harness(true);
    let pid_file = h.path("pgid");
    let cmd = format!("echo $$ > {}; sleep 30 & sleep 30", pid_file.display());
    let toolset = h.toolset.clone();
    let ctx = h.ctx.clone();
    let task =
        tokio::spawn(async move { toolset.dispatch("Shell", Some(&json!({"command": cmd}).to_string()), &ctx).await });
    let pgid = wait_for_pgid(&pid_file).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(group_alive(pgid));
    task.abort();
    assert!(gone_within(pgid, Duration::from_secs(1)).await);
}

#[tokio::test]
async fn detached_background_process_survives_normal_exit() {
    let h = harness(true);
    let pid_file = h.path("bgpid");
    let cmd = format!("sleep 30 > /dev/null 2>&1 & echo $! > {}", pid_file.display());
    let r = h.call("Shell", json!({"command": cmd})).await;
    assert!(!r.is_error);
    let pid: i32 = std::fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    // SAFETY: signal 0 only checks existence.
    assert_eq!(unsafe { libc::kill(pid, 0) }, 0, "detached process should survive");
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

// ---------- Review: adversarial commands ----------

/// A command that closes its output streams but keeps running is still bounded by the timeout
/// (the reader reaches EOF at once; the wait must not outlive `timeout`).
#[tokio::test]
async fn closed_stdout_but_still_running_times_out() {
    let h = harness(true);
    let start = Instant::now();
    let r = h.call("Shell", json!({"command": "echo early; exec >&- 2>&-; sleep 30", "timeout": 1})).await;
    assert!(start.elapsed() < Duration::from_secs(6), "{:?}", start.elapsed());
    assert!(r.is_error);
    assert_eq!(r.message, "Command killed by timeout (1s)");
    assert_eq!(text(&r), "early\n");
}

/// stdin is /dev/null (deliberate divergence): a command reading stdin sees EOF at once.
#[tokio::test]
async fn reading_stdin_sees_eof() {
    let h = harness(true);
    let start = Instant::now();
    let r = h.call("Shell", json!({"command": "cat; read x; echo done", "timeout": 20})).await;
    assert!(start.elapsed() < Duration::from_secs(10));
    assert!(!r.is_error, "{}", r.message);
    assert_eq!(text(&r), "done\n");
}

/// An endless flood is drained (the command is not blocked on a full pipe) while the result
/// stays within 50,000 characters; the timeout error carries the truncation note (§1.1).
#[tokio::test]
async fn endless_flood_is_capped_and_timed_out() {
    let h = harness(true);
    let start = Instant::now();
    let r = h.call("Shell", json!({"command": "yes flood", "timeout": 1})).await;
    assert!(start.elapsed() < Duration::from_secs(6));
    assert!(r.is_error);
    assert_eq!(r.message, "Command killed by timeout (1s) Output is truncated to fit in the message.");
    // 8,333 whole `flood\n` lines, then the line that no longer fits becomes the bare marker
    // plus its newline (the helper never cuts below `len(marker + ending)`).
    assert_eq!(text(&r).chars().count(), 8_333 * 6 + 15);
    assert!(text(&r).ends_with("flood\n[...truncated]\n"));
    // A single endless line (no newline at all) neither exhausts memory nor hangs; like the
    // reference's `readline`, an unfinished line is not part of a timed-out result.
    let start = Instant::now();
    let r = h.call("Shell", json!({"command": "tr '\\0' x < /dev/zero", "timeout": 1})).await;
    assert!(start.elapsed() < Duration::from_secs(6));
    assert!(r.is_error);
    assert_eq!(text(&r), "");
    // Once the stream ends, the endless-looking line is emitted, cut to 2,000 characters.
    let r = h.call("Shell", json!({"command": "head -c 10000000 /dev/zero | tr '\\0' x"})).await;
    assert!(!r.is_error);
    assert_eq!(text(&r).chars().count(), 2_000);
    assert!(text(&r).ends_with("[...truncated]"));
}

// ---------- Safety (`docs/tools.md` §19.1): the whole tree dies with its call ----------

/// Whether `pid` runs (exists and is not a zombie).
fn running(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    let state = stat.rsplit(')').next().and_then(|r| r.split_whitespace().next());
    !matches!(state, None | Some("Z") | Some("X"))
}

async fn read_pids(h: &Harness, names: &[&str]) -> Vec<i32> {
    for _ in 0..500 {
        let pids: Vec<i32> =
            names.iter().filter_map(|n| std::fs::read_to_string(h.path(n)).ok()?.trim().parse::<i32>().ok()).collect();
        if pids.len() == names.len() && pids.iter().all(|p| running(*p)) {
            return pids;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the command did not start its processes");
}

async fn stopped_within(pid: i32, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if !running(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

fn sweep(pids: &[i32]) {
    for &pid in pids {
        if running(pid) {
            // SAFETY: plain syscall on a pid this test started.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

#[tokio::test]
async fn dropping_the_call_kills_setsid_children_and_orphans() {
    let h = harness(true);
    let cmd = "setsid sleep 30 & echo $! > sid.pid; \
               (setsid sleep 30 > /dev/null 2>&1 & echo $! > orphan.pid); \
               sleep 30";
    let call = h.call("Shell", json!({"command": cmd}));
    let pids = tokio::select! {
        _ = call => panic!("finished early"),
        pids = read_pids(&h, &["sid.pid", "orphan.pid"]) => pids,
    };
    // `call` was dropped when select! returned.
    for &pid in &pids {
        let gone = stopped_within(pid, Duration::from_secs(10)).await;
        sweep(&pids);
        assert!(gone, "process {pid} survived the cancel");
    }
}

/// A cancel kills its own call only: the daemon another command left behind keeps running.
#[tokio::test]
async fn a_cancel_spares_the_daemons_of_finished_calls() {
    let h = harness(true);
    let r = h.call("Shell", json!({"command": "(setsid sleep 30 > /dev/null 2>&1 & echo $! > daemon.pid)"})).await;
    assert!(!r.is_error, "{r:?}");
    let daemon = read_pids(&h, &["daemon.pid"]).await;
    let call = h.call("Shell", json!({"command": "(setsid sleep 30 > /dev/null 2>&1 & echo $! > mine.pid); sleep 30"}));
    let mine = tokio::select! {
        _ = call => panic!("finished early"),
        pids = read_pids(&h, &["mine.pid"]) => pids,
    };
    let killed = stopped_within(mine[0], Duration::from_secs(10)).await;
    let spared = running(daemon[0]);
    sweep(&[daemon[0], mine[0]]);
    assert!(killed, "the cancelled call's orphan survived");
    assert!(spared, "the daemon of a finished call was killed");
}
