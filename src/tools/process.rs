//! Process groups of running shell commands.
//!
//! Every Shell command runs as the leader of its own process group. A [`GroupGuard`] owns that
//! group while the tool call runs: dropping it (the call's future was dropped because the turn was
//! cancelled, or the command timed out) sends SIGKILL to the whole group, so background children
//! that inherited the output pipes die too. This deliberately diverges from the reference, which
//! leaves such processes running. A process-wide registry of live groups lets the server kill
//! everything on exit via [`kill_all_process_groups`].
//!
//! Invariant: a pgid is in the registry exactly while a guard for it is armed.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

fn registry() -> &'static Mutex<HashSet<i32>> {
    static REGISTRY: OnceLock<Mutex<HashSet<i32>>> = OnceLock::new();
    REGISTRY.get_or_init(Mutex::default)
}

fn kill_group(pgid: i32) {
    if pgid <= 1 {
        // Never signal "every process" (-1) or our own group (0).
        return;
    }
    // SAFETY: plain syscall; a stale pgid at worst yields ESRCH.
    let rc = unsafe { libc::kill(-pgid, libc::SIGKILL) };
    if rc != 0 {
        tracing::debug!(pgid, "process group already gone");
    } else {
        tracing::debug!(pgid, "killed process group");
    }
}

/// Kills every process group still owned by a running Shell call.
pub fn kill_all_process_groups() {
    let groups: Vec<i32> = match registry().lock() {
        Ok(mut set) => set.drain().collect(),
        Err(poisoned) => poisoned.into_inner().drain().collect(),
    };
    for pgid in groups {
        kill_group(pgid);
    }
}

/// Owns one process group; kills it on drop unless [`GroupGuard::disarm`]ed.
#[derive(Debug)]
pub struct GroupGuard {
    pgid: i32,
    armed: bool,
}

impl GroupGuard {
    /// Registers `pgid` (the pid of a child spawned with `process_group(0)`).
    pub fn new(pgid: i32) -> Self {
        if let Ok(mut set) = registry().lock() {
            set.insert(pgid);
        }
        Self { pgid, armed: true }
    }

    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    /// Kills the group now (timeout path).
    pub fn kill(&mut self) {
        if self.armed {
            kill_group(self.pgid);
        }
        self.disarm();
    }

    /// The command finished normally: leave whatever it detached alone, as the reference does.
    pub fn disarm(&mut self) {
        self.armed = false;
        if let Ok(mut set) = registry().lock() {
            set.remove(&self.pgid);
        }
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            kill_group(self.pgid);
            self.disarm();
        }
    }
}

/// Whether any non-zombie process is still in group `pgid` (Linux `/proc` scan; used by tests
/// and diagnostics).
pub fn group_alive(pgid: i32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the parenthesised command name: state ppid pgrp ...
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next();
        let _ppid = fields.next();
        let pgrp = fields.next().and_then(|p| p.parse::<i32>().ok());
        if pgrp == Some(pgid) && state != Some("Z") && state != Some("X") {
            return true;
        }
    }
    false
}
