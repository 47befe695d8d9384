//! The processes of Shell calls: who belongs to a call, killing a call's whole tree, and reaping
//! the orphans kiwi adopts.
//!
//! Every Shell command runs as the leader of a new session (`setsid`, so its session id, group id
//! and pid are equal) with [`CALL_MARKER_VAR`] set to a value unique to the call, and kiwi is a
//! child subreaper (`PR_SET_CHILD_SUBREAPER`): a process of a call whose parent dies is re-parented
//! to kiwi instead of init, so it stays in kiwi's process tree.
//!
//! A process belongs to a running call when, in a `/proc` snapshot, it is the call's shell, is in
//! the call's session or process group, descends from such a process by parent pid, or is a
//! descendant of kiwi whose environment carries the call's marker (which finds children that both
//! called `setsid` and lost their parent). A process that does all of that and also clears its
//! environment escapes its call, but not the server exit (see below).
//!
//! Invariants:
//! * a [`CallGuard`] owns a running call: when it is dropped armed (the call's future was dropped
//!   because the turn was cancelled) or [`CallGuard::kill`]ed (timeout), every process of the call
//!   is first stopped (`SIGSTOP`, repeated on fresh snapshots until nothing new appears, so no
//!   member can fork or re-parent a child out of sight) and then `SIGKILL`ed; this deliberately
//!   diverges from the reference, which leaves such processes running;
//! * a call that finished normally leaves its daemons running: they are adopted by kiwi and live
//!   until the server exits, when [`kill_all_process_groups`] kills every descendant of kiwi;
//! * kiwi reaps the zombies of processes it adopted (never those of the children it spawned
//!   itself, whose status belongs to their waiter): an adopted process is in another session than
//!   kiwi (Shell commands run in their own sessions) and is not in the `spawned` registry;
//! * a pid is in `spawned` from its spawn (done under the registry lock, so the reaper never sees
//!   it unregistered) until its waiter reaped it or gave it up.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, Once, OnceLock};
use std::time::Duration;

/// Environment variable that marks every process of one Shell call (`<kiwi pid>-<n>`).
pub const CALL_MARKER_VAR: &str = "KIWI_SHELL_CALL";

/// Snapshots taken while freezing a tree before giving up on stragglers (a fork bomb).
const MAX_FREEZE_PASSES: usize = 64;

#[derive(Default)]
struct Registry {
    /// Children kiwi spawned itself and whose exit status belongs to their waiter.
    spawned: HashSet<i32>,
    /// Running calls: shell pid (= session id = process group id) → marker.
    calls: HashMap<i32, String>,
}

fn registry() -> MutexGuard<'static, Registry> {
    static REGISTRY: OnceLock<Mutex<Registry>> = OnceLock::new();
    let lock = REGISTRY.get_or_init(Mutex::default).lock();
    // The registry holds plain sets; a panic elsewhere cannot leave them half-updated.
    lock.unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn my_pid() -> i32 {
    std::process::id() as i32
}

/// Makes kiwi a child subreaper, once: orphans of Shell calls re-parent to kiwi.
pub fn ensure_subreaper() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        #[cfg(target_os = "linux")]
        {
            // SAFETY: prctl with integer arguments only; it changes a flag of this process.
            let rc = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0) };
            if rc != 0 {
                tracing::warn!(
                    "cannot become a child subreaper ({}); orphans of Shell commands go to init",
                    std::io::Error::last_os_error()
                );
            }
        }
    });
}

/// Starts the reaper of adopted orphans on the current tokio runtime unless one runs there.
pub fn ensure_reaper() {
    static TASK: OnceLock<Mutex<Option<tokio::task::JoinHandle<()>>>> = OnceLock::new();
    if tokio::runtime::Handle::try_current().is_err() {
        return;
    }
    let mut task = TASK.get_or_init(Mutex::default).lock().unwrap_or_else(|p| p.into_inner());
    // A task of a runtime that was shut down (tests run one per test) counts as finished.
    if task.as_ref().is_some_and(|t| !t.is_finished()) {
        return;
    }
    use tokio::signal::unix::{SignalKind, signal};
    let mut sigchld = match signal(SignalKind::child()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!("cannot watch SIGCHLD ({e}); adopted orphans are reaped after kills only");
            return;
        }
    };
    *task = Some(tokio::spawn(async move {
        loop {
            tokio::select! {
                got = sigchld.recv() => if got.is_none() { return },
                () = poke().notified() => {}
            }
            // A SIGCHLD can arrive while the dead child is still registered (its guard is being
            // dropped), and killed processes take a moment to become zombies: look again a few
            // times before waiting for the next signal.
            for delay_ms in [0, 20, 100, 500] {
                tokio::time::sleep(Duration::from_millis(delay_ms)).await;
                reap_adopted();
            }
        }
    }));
}

fn poke() -> &'static tokio::sync::Notify {
    static POKE: OnceLock<tokio::sync::Notify> = OnceLock::new();
    POKE.get_or_init(tokio::sync::Notify::new)
}

/// One process in a `/proc` snapshot.
#[derive(Debug, Clone, Copy)]
struct Proc {
    pid: i32,
    ppid: i32,
    pgrp: i32,
    session: i32,
    zombie: bool,
}

fn read_proc(pid: i32) -> Option<Proc> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name (which may contain anything):
    // state ppid pgrp session ...
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    let pgrp = fields.next()?.parse().ok()?;
    let session = fields.next()?.parse().ok()?;
    Some(Proc { pid, ppid, pgrp, session, zombie: matches!(state, "Z" | "X" | "x") })
}

fn snapshot() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
        .filter_map(read_proc)
        .collect()
}

/// `roots` and everything below them by parent pid.
fn with_descendants(snap: &[Proc], roots: HashSet<i32>) -> HashSet<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for p in snap {
        children.entry(p.ppid).or_default().push(p.pid);
    }
    let mut out = HashSet::new();
    let mut stack: Vec<i32> = roots.into_iter().collect();
    while let Some(pid) = stack.pop() {
        if out.insert(pid)
            && let Some(kids) = children.get(&pid)
        {
            stack.extend(kids);
        }
    }
    out
}

fn descendants_of_kiwi(snap: &[Proc]) -> HashSet<i32> {
    let me = my_pid();
    let mut all = with_descendants(snap, HashSet::from([me]));
    all.remove(&me);
    all
}

/// Whether the environment `pid` started with holds `CALL_MARKER_VAR=marker`.
fn has_marker(pid: i32, marker: &str) -> bool {
    let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let wanted = format!("{CALL_MARKER_VAR}={marker}");
    env.split(|&b| b == 0).any(|var| var == wanted.as_bytes())
}

/// The processes of the call whose shell is `shell` (see the module doc).
fn call_members(snap: &[Proc], shell: i32, marker: &str) -> HashSet<i32> {
    if shell <= 1 {
        // Kernel threads have session and group 0; never match them (or init).
        return HashSet::new();
    }
    let mut roots: HashSet<i32> =
        snap.iter().filter(|p| p.pid == shell || p.session == shell || p.pgrp == shell).map(|p| p.pid).collect();
    // SAFETY: getsid(0) only reads this process's session id.
    let my_session = unsafe { libc::getsid(0) };
    let by_pid: HashMap<i32, &Proc> = snap.iter().map(|p| (p.pid, p)).collect();
    for pid in descendants_of_kiwi(snap) {
        if roots.contains(&pid) {
            continue;
        }
        let Some(p) = by_pid.get(&pid) else { continue };
        // Processes of Shell calls never share kiwi's session; skip reading the others' env.
        if p.session != my_session && !p.zombie && has_marker(pid, marker) {
            roots.insert(pid);
        }
    }
    with_descendants(snap, roots)
}

/// Stops, then kills, every live process `select` picks from fresh snapshots. Never signals
/// kiwi itself, init or "all processes".
fn kill_tree(select: impl Fn(&[Proc]) -> HashSet<i32>) {
    let me = my_pid();
    let mut signalled: HashSet<i32> = HashSet::new();
    for pass in 0.. {
        let snap = snapshot();
        let live: HashSet<i32> = snap.iter().filter(|p| !p.zombie).map(|p| p.pid).collect();
        let fresh: Vec<i32> = select(&snap)
            .into_iter()
            .filter(|pid| *pid > 1 && *pid != me && live.contains(pid) && !signalled.contains(pid))
            .collect();
        if fresh.is_empty() {
            break;
        }
        if pass >= MAX_FREEZE_PASSES {
            tracing::warn!("processes keep appearing while a Shell call is killed; killing what was found");
            break;
        }
        for pid in fresh {
            // SAFETY: plain syscall; a pid that vanished meanwhile yields ESRCH.
            unsafe { libc::kill(pid, libc::SIGSTOP) };
            signalled.insert(pid);
        }
    }
    for &pid in &signalled {
        // SAFETY: as above; SIGKILL also ends a stopped process.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    if !signalled.is_empty() {
        tracing::debug!(count = signalled.len(), "killed a Shell call's processes");
    }
    reap_adopted();
    poke().notify_one();
}

/// Reaps the zombies of processes kiwi adopted (see the module doc); prunes `spawned` of pids
/// that are no longer children of kiwi.
pub fn reap_adopted() {
    let me = my_pid();
    // SAFETY: getsid(0) only reads this process's session id.
    let my_session = unsafe { libc::getsid(0) };
    let mut reg = registry();
    let snap = snapshot();
    let children: HashSet<i32> = snap.iter().filter(|p| p.ppid == me).map(|p| p.pid).collect();
    for p in snap.iter().filter(|p| p.ppid == me && p.zombie) {
        if p.session != my_session && !reg.spawned.contains(&p.pid) {
            let mut status = 0;
            // SAFETY: waits for one specific zombie child without blocking.
            unsafe { libc::waitpid(p.pid, &mut status, libc::WNOHANG) };
        }
    }
    reg.spawned.retain(|pid| children.contains(pid));
}

/// Owns one running Shell call: its child and the tree below it.
#[derive(Debug)]
pub struct CallGuard {
    child: Option<tokio::process::Child>,
    pid: i32,
    marker: String,
    armed: bool,
    /// Dropping the guard leaves the tree alone (a background task kept alive past exit).
    spared: bool,
}

impl CallGuard {
    /// Spawns `cmd` as a new call: a session leader carrying a fresh marker, registered before
    /// anyone can observe it.
    pub fn spawn(cmd: &mut tokio::process::Command) -> std::io::Result<Self> {
        Self::spawn_confined(cmd, None)
    }

    /// [`Self::spawn`] with the command confined by `policy` (its set-up runs after `setsid`,
    /// last before `exec`); a set-up failure is the spawn's error.
    pub fn spawn_confined(
        cmd: &mut tokio::process::Command,
        policy: Option<&crate::sandbox::CommandPolicy>,
    ) -> std::io::Result<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        ensure_subreaper();
        ensure_reaper();
        let marker = format!("{}-{}", my_pid(), NEXT.fetch_add(1, Ordering::Relaxed));
        cmd.env(CALL_MARKER_VAR, &marker);
        // SAFETY: setsid is async-signal-safe, as required between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() == -1 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        if let Some(policy) = policy {
            policy.apply(cmd);
        }
        let mut reg = registry();
        let child = cmd.spawn()?;
        let pid = child.id().map_or(0, |p| p as i32);
        reg.spawned.insert(pid);
        reg.calls.insert(pid, marker.clone());
        drop(reg);
        Ok(Self { child: Some(child), pid, marker, armed: true, spared: false })
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    pub fn child(&mut self) -> Option<&mut tokio::process::Child> {
        self.child.as_mut()
    }

    /// Kills the call's whole tree now (timeout); the shell is still to be waited for.
    pub fn kill(&mut self) {
        if self.armed {
            self.armed = false;
            registry().calls.remove(&self.pid);
            let (shell, marker) = (self.pid, self.marker.clone());
            kill_tree(|snap| call_members(snap, shell, &marker));
        }
    }

    /// Dropping this guard will not kill the tree (an explicit [`CallGuard::kill`] still does).
    pub fn spare_on_drop(&mut self) {
        self.spared = true;
    }

    /// The shell was waited for: whatever it left running (daemons) is left alone.
    pub fn finished(&mut self) {
        self.armed = false;
        let mut reg = registry();
        reg.calls.remove(&self.pid);
        reg.spawned.remove(&self.pid);
    }
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        if !self.armed && self.child.is_none() {
            return;
        }
        if !self.spared {
            self.kill();
        }
        // Dropping the child hands it to tokio's orphan queue; after that its pid is ours to
        // reap too (tokio tolerates finding it gone).
        drop(self.child.take());
        registry().spawned.remove(&self.pid);
        poke().notify_one();
    }
}

/// Sessions (background tasks with `background.keep_alive_on_exit`) the server exit spares.
fn kept_sessions() -> MutexGuard<'static, HashSet<i32>> {
    static KEPT: OnceLock<Mutex<HashSet<i32>>> = OnceLock::new();
    KEPT.get_or_init(Mutex::default).lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Spares the session `sid` (a background task's shell) and its members at server exit.
pub fn keep_alive_on_exit(sid: i32) {
    kept_sessions().insert(sid);
}

/// Forgets a spared session (its task ended or was stopped).
pub fn forget_kept(sid: i32) {
    kept_sessions().remove(&sid);
}

/// Kills every process kiwi's Shell calls started: the running calls' trees and every
/// descendant of kiwi (the daemons of finished commands), except the members of kept sessions.
/// Called by the process shell at exit, after the live sessions closed (which stopped their
/// background tasks): this is only the sweep of what is left.
pub fn kill_all_process_groups() {
    let kept = kept_sessions().clone();
    let calls: Vec<(i32, String)> = registry().calls.drain().filter(|(shell, _)| !kept.contains(shell)).collect();
    if calls.is_empty() && has_children() == Some(false) {
        // Nothing running and nobody left under us (as subreaper, orphans become our children):
        // no need to read every process of the machine.
        return;
    }
    kill_tree(|snap| {
        let spared: HashSet<i32> = snap.iter().filter(|p| kept.contains(&p.session)).map(|p| p.pid).collect();
        let mut all = descendants_of_kiwi(snap);
        for (shell, marker) in &calls {
            all.extend(call_members(snap, *shell, marker));
        }
        all.retain(|pid| !spared.contains(pid));
        all
    });
}

/// Whether this process has children, from the kernel's per-thread lists; `None` when they
/// cannot be read (then the caller must look the long way).
fn has_children() -> Option<bool> {
    for task in std::fs::read_dir("/proc/self/task").ok()? {
        let children = std::fs::read(task.ok()?.path().join("children")).ok()?;
        if children.iter().any(u8::is_ascii_digit) {
            return Some(true);
        }
    }
    Some(false)
}

/// Whether any non-zombie process is still in group `pgid` (used by tests and diagnostics).
pub fn group_alive(pgid: i32) -> bool {
    snapshot().iter().any(|p| p.pgrp == pgid && !p.zombie)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_running_child_is_seen_by_the_exit_sweeps_shortcut() {
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        assert_eq!(has_children(), Some(true));
        let _ = child.kill();
        let _ = child.wait();
    }
}
