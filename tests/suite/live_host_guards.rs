//! The guards of a hosted session (`docs/host.md`, spec host.md §1-§2): a `live.sock` peer running
//! as another user is closed without a byte (and the refusal is logged), while the host keeps
//! serving its own user; and `kiwi --wire -C` in the work dir of a running host attaches to it.

use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::common::{Env, wait_until};

/// The uid the foreign peer runs as (`nobody` on Debian).
const OTHER_UID: u32 = 65534;

/// A python3 outside any user's home, runnable by [`OTHER_UID`].
fn system_python() -> Option<&'static str> {
    ["/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"].into_iter().find(|p| Path::new(p).exists())
}

/// Connects to the socket at argv[1], reads until the host closes, prints the byte count; a host
/// that keeps the connection open makes the read time out (exit 1).
const PEER: &str = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.settimeout(10)
data = b''
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    data += chunk
print(len(data))
"#;

#[test]
fn a_peer_of_another_uid_is_closed_without_a_byte() {
    // SAFETY: geteuid has no preconditions and touches no memory.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: connecting as another uid needs root (the test switches the peer to uid {OTHER_UID})");
        return;
    }
    let Some(python) = system_python() else {
        eprintln!("skipped: no system python3 for the peer of uid {OTHER_UID}");
        return;
    };
    let env = Env::new();
    let config = env.scripted_config(&["text: a"]);
    let mut host = env.spawn(&config, &["--session", "guarded"]);
    host.initialize();
    let dir = env.session_dir("guarded");
    let socket = dir.join("live.sock");
    assert!(wait_until(Duration::from_secs(10), || socket.exists()));
    // Only the file system stands between another user and the socket; open it up so that the
    // uid check is what refuses the peer.
    for folder in dir.ancestors().take_while(|p| p.starts_with(env.dir.path())) {
        std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o711)).unwrap();
    }
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();

    let out = std::process::Command::new(python)
        .args(["-c", PEER])
        .arg(&socket)
        .env_clear()
        .env("HOME", "/")
        .current_dir("/")
        .uid(OTHER_UID)
        .gid(OTHER_UID)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the peer of uid {OTHER_UID} was not closed: {stderr}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0", "bytes reached the foreign peer; {stderr}");

    let log = env.share().join("logs/kiwi.log");
    let refused = format!("live.sock: refused a peer running as uid {OTHER_UID}");
    assert!(
        wait_until(Duration::from_secs(10), || std::fs::read_to_string(&log).unwrap_or_default().contains(&refused)),
        "the refusal is not in {}",
        log.display()
    );
    // The host still serves its own user.
    let mut attached = env.spawn(&config, &["--session", "guarded"]);
    let (_, init) = attached.call("init", "initialize", json!({"protocol_version": "1.10"}));
    assert_eq!(init["result"]["protocol_version"], "1.10", "{init}");
    let (_, r) = host.prompt("p", json!("still serving"));
    assert_eq!(r["result"]["status"], "finished", "{r}");
}

/// `-C` continues the work dir's last session (`kimi.json`, written when a process on it exits);
/// while a host runs it, a second `-C` attaches instead of failing on the lock.
#[test]
fn continue_in_the_work_dir_of_a_running_host_attaches() {
    let env = Env::new();
    let config = env.scripted_config(&["text: first", "text: second"]);
    let mut earlier = env.spawn(&config, &["--session", "running"]);
    let (first, r) = earlier.prompt("p0", json!("first"));
    assert_eq!(r["result"]["status"], "finished", "{r}");
    let first_events = first.iter().filter(|m| m["method"] == "event").count();
    earlier.close_stdin();
    assert!(earlier.wait_exit(Duration::from_secs(20)).is_some());

    let mut host = env.spawn(&config, &["-C"]);
    host.initialize();
    assert!(wait_until(Duration::from_secs(10), || env.session_dir("running").join("live.sock").exists()));
    let mut attached = env.spawn(&config, &["-C"]);
    let tool = json!({"name": "mine", "description": "d", "parameters": {"type": "object", "properties": {}}});
    let (_, init) = attached.call("init", "initialize", json!({"protocol_version": "1.10", "external_tools": [tool]}));
    assert_eq!(
        init["result"]["external_tools"]["rejected"],
        json!([{"name": "mine", "reason": "session is hosted by another process"}]),
        "{init}"
    );
    // The history it replays is the session's, and its prompt runs in the host's session: the
    // host's client sees the same turn.
    let (_, replayed) = attached.call("r", "replay", json!({}));
    assert_eq!(replayed["result"]["events"], first_events, "{replayed}");
    let (events, mine) = attached.prompt("p1", json!("again"));
    assert_eq!(mine["result"]["status"], "finished", "{mine}");
    let text = |ms: &[serde_json::Value]| -> Vec<serde_json::Value> {
        ms.iter().filter(|m| m["params"]["type"] == "ContentPart").map(|m| m["params"]["payload"].clone()).collect()
    };
    let mut seen_by_host = Vec::new();
    while !seen_by_host.iter().any(|m: &serde_json::Value| m["params"]["type"] == "TurnEnd") {
        seen_by_host.push(host.next());
    }
    assert!(!text(&events).is_empty(), "{events:?}");
    assert_eq!(text(&seen_by_host), text(&events));
}
