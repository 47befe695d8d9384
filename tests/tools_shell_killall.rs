//! `kill_all_process_groups` kills every running Shell command. Its own test binary, because it
//! would also kill the commands of tests running in parallel.

mod tools_support;

use std::time::{Duration, Instant};

use kiwi::tools::process::{group_alive, kill_all_process_groups};
use serde_json::json;
use tools_support::*;

async fn wait_for_pgid(path: &std::path::Path) -> i32 {
    for _ in 0..200 {
        if let Ok(s) = std::fs::read_to_string(path)
            && let Ok(pgid) = s.trim().parse::<i32>()
        {
            return pgid;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("command did not start");
}

async fn gone_within(pgid: i32, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if !group_alive(pgid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

#[tokio::test]
async fn kill_all_process_groups_kills_running_commands() {
    let h = harness(true);
    let pid_file = h.path("pgid");
    let cmd = format!("echo $$ > {}; sleep 30", pid_file.display());
    let toolset = h.toolset.clone();
    let ctx = h.ctx.clone();
    let task =
        tokio::spawn(async move { toolset.dispatch("Shell", Some(&json!({"command": cmd}).to_string()), &ctx).await });
    let pgid = wait_for_pgid(&pid_file).await;
    kill_all_process_groups();
    let r = tokio::time::timeout(Duration::from_secs(5), task).await.expect("finished").expect("joined");
    assert!(r.is_error);
    assert!(r.message.starts_with("Command failed with exit code: -9"), "{}", r.message);
    assert!(gone_within(pgid, Duration::from_secs(1)).await);
}
