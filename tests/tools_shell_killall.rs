//! `kill_all_process_groups` kills every running Shell command. Its own test binary, because it
//! would also kill the commands of tests running in parallel.

mod tools_support;

use std::time::Duration;

use kiwi::tools::process::kill_all_process_groups;
use serde_json::json;
use tools_support::*;

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
