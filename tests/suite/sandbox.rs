//! The sandbox tries to be escaped (spec sandbox.md §10, issue 29 item 7): `kiwi sandbox -- sh -c
//! …` in a throw-away box under the temp dir with its own HOME, share dir and TMPDIR, judged by
//! the disk, the listeners and the process table, with a marker proving the command ran.
//!
//! Self-test: `KIWI_TEST_SANDBOX_OFF=1 cargo test --test all sandbox` makes this kit run every
//! command with `--sandbox off` instead; every escape test must then fail (the "may" tests —
//! writes inside the roots, reading — and the argument checks still pass).

use std::net::{TcpListener, UdpSocket};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The box: `home`, `work` (a git repository), `added`, `outside` (a victim file), `tmp`
/// (its TMPDIR), `share`, and a config that keeps `/tmp` out of the roots (the box is in it).
struct Sbx {
    _dir: tempfile::TempDir,
    root: PathBuf,
    config: PathBuf,
}

const VICTIM: &str = "original\n";

impl Sbx {
    fn new() -> Self {
        Self::with_config("[sandbox]\nexclude_slash_tmp = true\n")
    }

    fn with_config(config: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        for d in ["home", "work", "added", "outside", "tmp", "share"] {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("home/.bashrc"), VICTIM).unwrap();
        std::fs::write(root.join("outside/victim"), VICTIM).unwrap();
        std::fs::write(root.join("work/inside"), "in\n").unwrap();
        let git = Command::new("git").args(["init", "-q"]).current_dir(root.join("work")).status();
        if !git.is_ok_and(|s| s.success()) {
            std::fs::create_dir_all(root.join("work/.git/hooks")).unwrap();
            std::fs::write(root.join("work/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
            std::fs::write(root.join("work/.git/config"), "[core]\n").unwrap();
        }
        let config_path = root.join("config.toml");
        std::fs::write(&config_path, config).unwrap();
        Self { _dir: dir, root, config: config_path }
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.p(rel)).ok()
    }

    /// `kiwi sandbox` with the kit's environment; the mode is swapped for `off` in the
    /// self-test run.
    fn kiwi(&self, mode: &str, extra: &[&str], script: &str) -> Command {
        let mode = if std::env::var_os("KIWI_TEST_SANDBOX_OFF").is_some() { "off" } else { mode };
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kiwi"));
        cmd.arg("sandbox").args(["--sandbox", mode, "--config-file"]).arg(&self.config).arg("-w").arg(self.p("work"));
        cmd.args(extra).args(["--", "sh", "-c", script]);
        cmd.env("HOME", self.p("home")).env("KIMI_SHARE_DIR", self.p("share")).env("TMPDIR", self.p("tmp"));
        cmd.env("OUT", self.p("outside")).env("PY", python().unwrap_or_default()).env("NO_COLOR", "1");
        // kiwi's own cwd is outside the roots, so `/proc/$PPID/cwd` leads out.
        cmd.current_dir(self.p("outside")).stdin(Stdio::null());
        cmd
    }

    /// Runs a script (the marker `RAN` is echoed last) and checks that it ran.
    fn run(&self, mode: &str, script: &str) -> Output {
        let out = self.kiwi(mode, &[], &format!("{script}\necho RAN")).output().unwrap();
        assert!(String::from_utf8_lossy(&out.stdout).contains("RAN"), "did not run: {}", show(&out));
        out
    }

    fn victim_unchanged(&self) {
        assert_eq!(self.read("outside/victim").as_deref(), Some(VICTIM), "outside/victim was changed");
        assert_eq!(self.read("home/.bashrc").as_deref(), Some(VICTIM), "~/.bashrc was changed");
    }
}

fn show(out: &Output) -> String {
    format!(
        "status {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The real python interpreter (not a shim that needs the user's HOME), if there is one.
fn python() -> Option<String> {
    let out = Command::new("python3").args(["-c", "import sys; print(sys.executable)"]).output().ok()?;
    let path = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !path.is_empty()).then_some(path)
}

fn have(program: &str) -> bool {
    Command::new("sh").args(["-c", &format!("command -v {program}")]).output().is_ok_and(|o| o.status.success())
}

// ---- what must work ----

#[test]
fn workspace_tmpdir_and_added_dir_are_writable() {
    let b = Sbx::new();
    let added = b.p("added");
    let script = "echo a > new && mv new moved && rm inside && mkdir d && echo t > \"$TMPDIR/t\" && \
                  echo x > \"$ADDED/x\" && cat /etc/passwd > /dev/null && echo ok > /dev/null && echo WROTE";
    let out = b
        .kiwi("workspace-write", &["--add-dir", added.to_str().unwrap()], script)
        .env("ADDED", &added)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("WROTE"), "{}", show(&out));
    assert_eq!(b.read("work/moved").as_deref(), Some("a\n"));
    assert!(b.read("work/inside").is_none() && b.p("work/d").is_dir());
    assert_eq!(b.read("tmp/t").as_deref(), Some("t\n"));
    assert_eq!(b.read("added/x").as_deref(), Some("x\n"));
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn exit_status_and_environment_are_the_commands() {
    let b = Sbx::new();
    let out = b
        .kiwi("workspace-write", &[], "echo \"$KIWI_SANDBOX:$KIWI_SANDBOX_NETWORK_DISABLED\"; exit 7")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(7), "{}", show(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "workspace-write:1");
}

// ---- writes by every route ----

#[test]
fn redirects_outside_fail() {
    let b = Sbx::new();
    b.run(
        "workspace-write",
        "echo x >> ~/.bashrc; echo x > ~/.profile; mkdir ~/.ssh; echo x > ../outside/victim; \
         echo x > \"$OUT/victim\"; echo x > \"$OUT/new\"; echo x > ../outside/new2; rm -f \"$OUT/victim\"",
    );
    b.victim_unchanged();
    for gone in ["home/.profile", "home/.ssh", "outside/new", "outside/new2"] {
        assert!(!b.p(gone).exists(), "{gone} was created");
    }
}

#[test]
fn child_interpreters_and_detached_children_are_confined() {
    let b = Sbx::new();
    let mut script = String::from(
        "sh -c 'echo x > \"$OUT/victim\"'; setsid sh -c 'echo x >> \"$OUT/victim\"'; \
         env -i sh -c \"echo x > $OUT/a\"; nohup sh -c 'echo x > \"$OUT/b\"' >/dev/null 2>&1; \
         (sh -c 'echo x > \"$OUT/c\"' &) ; sleep 0.2;",
    );
    if python().is_some() {
        script.push_str(" \"$PY\" -c 'import os; open(os.environ[\"OUT\"]+\"/victim\",\"w\").write(\"py\")';");
    }
    if have("perl") {
        script.push_str(" perl -e 'open(F, \">\", \"$ENV{OUT}/victim\"); print F \"pl\"';");
    }
    b.run("workspace-write", &script);
    b.victim_unchanged();
    for gone in ["outside/a", "outside/b", "outside/c"] {
        assert!(!b.p(gone).exists(), "{gone} was created");
    }
}

#[test]
fn symlinks_out_of_a_root_do_not_lead_out() {
    let b = Sbx::new();
    std::os::unix::fs::symlink(b.p("outside/victim"), b.p("work/old_link")).unwrap();
    std::os::unix::fs::symlink(b.p("home"), b.p("work/home_link")).unwrap();
    b.run(
        "workspace-write",
        "echo x > old_link; ln -s \"$OUT/victim\" new_link; echo x > new_link; echo x >> home_link/.bashrc; \
         echo x > home_link/planted",
    );
    b.victim_unchanged();
    assert!(!b.p("home/planted").exists());
}

#[test]
fn hard_links_out_of_a_root_fail() {
    let b = Sbx::new();
    let mut script = String::from("ln \"$OUT/victim\" hard; echo x >> hard;");
    if python().is_some() {
        script.push_str(" \"$PY\" -c 'import os; os.link(os.environ[\"OUT\"]+\"/victim\", \"pyhard\")';");
    }
    b.run("workspace-write", &script);
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(b.p("outside/victim")).unwrap().nlink(), 1, "a hard link was made");
    assert!(!b.p("work/pyhard").exists(), "a hard link was made");
    b.victim_unchanged();
}

#[test]
fn proc_root_and_cwd_do_not_lead_out() {
    let b = Sbx::new();
    b.run(
        "workspace-write",
        "echo x > /proc/self/root\"$OUT/victim\"; echo x > /proc/$$/root\"$OUT/victim\"; \
         echo x > /proc/$PPID/root\"$OUT/victim\"; echo x > /proc/$PPID/cwd/victim; echo x > /proc/$PPID/cwd/new",
    );
    b.victim_unchanged();
    assert!(!b.p("outside/new").exists());
}

#[test]
fn renames_in_both_directions_fail() {
    let b = Sbx::new();
    let mut script = String::from("mv \"$OUT/victim\" stolen; mv inside \"$OUT/planted\";");
    if python().is_some() {
        script.push_str(
            " \"$PY\" -c 'import os; o=os.environ[\"OUT\"]; open(\"r\",\"w\").write(\"r\"); os.replace(\"r\", o+\"/victim\")';\
             \"$PY\" -c 'import os; os.rename(os.environ[\"OUT\"]+\"/victim\", \"stolen2\")';",
        );
    }
    b.run("workspace-write", &script);
    b.victim_unchanged();
    assert!(!b.p("outside/planted").exists());
    assert_eq!(b.read("work/inside").as_deref(), Some("in\n"), "the source of a cross-root mv stays");
}

#[test]
fn chmod_truncate_and_times_outside_fail() {
    let b = Sbx::new();
    let victim = b.p("outside/victim");
    let before = std::fs::metadata(&victim).unwrap();
    b.run(
        "workspace-write",
        "chmod 777 \"$OUT/victim\" \"$OUT\" ~/.bashrc; truncate -s 0 \"$OUT/victim\"; ( : > \"$OUT/victim\" ); \
         touch -d 2001-01-01 \"$OUT/victim\"",
    );
    b.victim_unchanged();
    let after = std::fs::metadata(&victim).unwrap();
    assert_eq!(before.permissions().mode(), after.permissions().mode(), "chmod went through");
    assert_eq!(before.modified().unwrap(), after.modified().unwrap(), "touch -d went through");
    assert_eq!(
        std::fs::metadata(b.p("outside")).unwrap().permissions().mode() & 0o777,
        std::fs::metadata(b.p("home")).unwrap().permissions().mode() & 0o777
    );
}

#[test]
fn git_folder_stays_read_only() {
    let b = Sbx::new();
    let config_before = b.read("work/.git/config");
    b.run(
        "workspace-write",
        "echo 'echo pwned' > .git/hooks/pre-commit; git config user.name pwned; echo x > .git/HEAD; \
         rm -rf .git/hooks; mv .git moved_git; echo x > .codex_probe",
    );
    assert!(b.p("work/.git/hooks").is_dir(), "rm -rf .git/hooks went through");
    assert!(!b.p("work/.git/hooks/pre-commit").exists(), "a hook was planted");
    assert!(!b.p("work/moved_git").exists(), "mv .git went through");
    assert_eq!(b.read("work/.git/config"), config_before, "git config went through");
    assert_ne!(b.read("work/.git/HEAD").as_deref(), Some("x\n"));
    assert!(b.p("work/.codex_probe").exists(), "the work dir itself stays writable");
}

// ---- network, sockets, signals ----

#[test]
fn loopback_tcp_and_udp_are_blocked() {
    let b = Sbx::new();
    let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
    tcp.set_nonblocking(true).unwrap();
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_nonblocking(true).unwrap();
    let (tport, uport) = (tcp.local_addr().unwrap().port(), udp.local_addr().unwrap().port());
    let mut script =
        format!("bash -c 'echo hi > /dev/tcp/127.0.0.1/{tport}'; bash -c 'echo hi > /dev/udp/127.0.0.1/{uport}';");
    if have("curl") {
        script.push_str(&format!(" curl -s -m 2 http://127.0.0.1:{tport}/ >/dev/null;"));
    }
    if python().is_some() {
        script.push_str(&format!(
            " \"$PY\" -c 'import socket; s=socket.create_connection((\"127.0.0.1\",{tport}),2)';\
              \"$PY\" -c 'import socket; socket.socket(socket.AF_INET,socket.SOCK_DGRAM).sendto(b\"q\",(\"127.0.0.1\",{uport}))';"
        ));
    }
    b.run("workspace-write", &script);
    let connections = std::iter::from_fn(|| tcp.accept().ok()).count();
    let mut buf = [0u8; 64];
    let datagrams = std::iter::from_fn(|| udp.recv_from(&mut buf).ok()).count();
    assert_eq!((connections, datagrams), (0, 0), "the listeners saw traffic");
}

#[test]
fn dns_to_a_loopback_resolver_is_blocked() {
    let Some(_) = python() else { return };
    let b = Sbx::new();
    let resolver = UdpSocket::bind("127.0.0.1:0").unwrap();
    resolver.set_nonblocking(true).unwrap();
    let port = resolver.local_addr().unwrap().port();
    // A DNS query for example.com, type A, as a resolver library sends it.
    let script = format!(
        "\"$PY\" -c 'import socket; q=bytes.fromhex(\"abcd01000001000000000000076578616d706c6503636f6d0000010001\"); \
         s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.sendto(q,(\"127.0.0.1\",{port}))'"
    );
    b.run("workspace-write", &script);
    let mut buf = [0u8; 512];
    assert!(resolver.recv_from(&mut buf).is_err(), "the resolver got a query");
}

#[test]
fn unix_sockets_to_outside_sockets_are_blocked() {
    let Some(_) = python() else { return };
    let b = Sbx::new();
    let stream = UnixListener::bind(b.p("outside/s.sock")).unwrap();
    stream.set_nonblocking(true).unwrap();
    let dgram = UnixDatagram::bind(b.p("outside/d.sock")).unwrap();
    dgram.set_nonblocking(true).unwrap();
    b.run(
        "workspace-write",
        "\"$PY\" -c 'import socket,os; s=socket.socket(socket.AF_UNIX); s.connect(os.environ[\"OUT\"]+\"/s.sock\")';\
         \"$PY\" -c 'import socket,os; s=socket.socket(socket.AF_UNIX,socket.SOCK_DGRAM); s.sendto(b\"x\",os.environ[\"OUT\"]+\"/d.sock\")';\
         \"$PY\" -c 'import socket,os; a,b=socket.socketpair(socket.AF_UNIX,socket.SOCK_DGRAM); a.sendmsg([b\"x\"],[],0,os.environ[\"OUT\"]+\"/d.sock\")';\
         \"$PY\" -c 'import socket; a,b=socket.socketpair(); a.send(b\"x\"); assert b.recv(1)==b\"x\"; print(\"PAIR-OK\")'",
    );
    assert!(stream.accept().is_err(), "the stream socket got a connection");
    let mut buf = [0u8; 16];
    assert!(dgram.recv(&mut buf).is_err(), "the datagram socket got a datagram");
}

#[test]
fn stream_socketpairs_still_work() {
    let Some(_) = python() else { return };
    let b = Sbx::new();
    let out = b.run(
        "workspace-write",
        "\"$PY\" -c 'import socket; a,b=socket.socketpair(); a.send(b\"x\"); print(b.recv(1))'",
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("b'x'"), "{}", show(&out));
}

#[test]
fn outside_processes_cannot_be_signalled() {
    let b = Sbx::new();
    let mut victim = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = victim.id();
    b.run("workspace-write", &format!("kill -TERM {pid}; kill -KILL {pid}"));
    let alive = victim.try_wait().unwrap().is_none();
    let _ = victim.kill();
    let _ = victim.wait();
    assert!(alive, "the sandboxed command killed an outside process");
}

// ---- modes and /tmp ----

#[test]
fn read_only_mode_writes_nothing() {
    let b = Sbx::new();
    std::os::unix::fs::symlink("/etc", b.p("work/link")).unwrap();
    let out = b.run(
        "read-only",
        "echo x > new; echo x >> inside; echo x > \"$TMPDIR/t\"; rm link; cat /etc/passwd > /dev/null && echo READ-OK",
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("READ-OK"), "{}", show(&out));
    assert!(!b.p("work/new").exists() && !b.p("tmp/t").exists());
    assert_eq!(b.read("work/inside").as_deref(), Some("in\n"));
    assert!(b.p("work/link").symlink_metadata().is_ok(), "the symlink was deleted");
}

#[test]
fn slash_tmp_is_a_root_unless_excluded() {
    let name = format!("/tmp/kiwi-sandbox-test-{}", std::process::id());
    let _ = std::fs::remove_file(&name);
    // Excluded (the kit's config): a file in the real /tmp cannot be made.
    let b = Sbx::new();
    b.run("workspace-write", &format!("echo x > {name}"));
    let made = Path::new(&name).exists();
    let _ = std::fs::remove_file(&name);
    assert!(!made, "/tmp was writable with exclude_slash_tmp");
    // The default config: /tmp is writable.
    let b = Sbx::with_config("");
    b.run("workspace-write", &format!("echo x > {name}"));
    let made = Path::new(&name).exists();
    let _ = std::fs::remove_file(&name);
    assert!(made, "/tmp was not writable by default");
}

// ---- bad input ----

#[test]
fn an_invalid_mode_is_a_usage_error() {
    for args in
        [&["sandbox", "--sandbox", "bogus", "--", "true"][..], &["--sandbox", "bogus"], &["web", "--sandbox", "bogus"]]
    {
        let out = Command::new(env!("CARGO_BIN_EXE_kiwi")).args(args).stdin(Stdio::null()).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", show(&out));
        assert!(out.stdout.is_empty());
        assert_eq!(lines[0], "error: invalid value 'bogus' for '--sandbox <MODE>'", "{args:?}");
        assert_eq!(lines[1], "  [possible values: read-only, workspace-write, off]");
        assert!(err.contains("For more information, try '--help'."), "{err}");
    }
}

#[test]
fn an_invalid_config_mode_stops_start_up() {
    let b = Sbx::with_config("[sandbox]\nmode = \"bogus\"\n");
    let detail = "sandbox.mode: unknown variant `bogus`, expected one of `read-only`, `workspace-write`, `off`, \
                  `danger-full-access`";
    // The wire server: exit 1 before anything on stdout.
    let out = Command::new(env!("CARGO_BIN_EXE_kiwi"))
        .arg("--config-file")
        .arg(&b.config)
        .env("KIMI_SHARE_DIR", b.p("share"))
        .env("HOME", b.p("home"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(out.stdout.is_empty());
    let first = err.lines().next().unwrap_or("");
    assert!(first.starts_with(&format!("Invalid configuration file {}: ", b.config.display())), "{err}");
    assert!(first.contains(detail), "{err}");
    // `kiwi sandbox`: its own failure status, the command not run.
    let out = b.kiwi("workspace-write", &[], "echo RAN").output().unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", show(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains(detail));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("RAN"));
    // A relative root.
    let b = Sbx::with_config("[sandbox]\nwritable_roots = [\"rel/dir\"]\n");
    let out = b.kiwi("workspace-write", &[], "echo RAN").output().unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", show(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("sandbox.writable_roots: relative path 'rel/dir'"));
}

#[test]
fn a_missing_work_dir_or_command_is_reported() {
    let b = Sbx::new();
    let kiwi = || {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_kiwi"));
        cmd.env("HOME", b.p("home")).env("KIMI_SHARE_DIR", b.p("share")).stdin(Stdio::null());
        cmd
    };
    let out = kiwi().args(["sandbox", "-w", "/no/such/dir", "--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Directory '/no/such/dir' does not exist."));
    let out = kiwi().args(["sandbox", "--add-dir", "/no/such/dir", "--", "true"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
    let out = kiwi().args(["sandbox", "--", "no-such-program-here"]).current_dir(b.p("work")).output().unwrap();
    assert_eq!(out.status.code(), Some(127), "{}", show(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        "kiwi sandbox: no-such-program-here: No such file or directory"
    );
    let out = kiwi().args(["sandbox"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", show(&out));
}

#[test]
fn a_missing_writable_root_is_left_out_with_a_warning() {
    let b = Sbx::with_config("[sandbox]\nexclude_slash_tmp = true\nwritable_roots = [\"/no/such/root\"]\n");
    let out = b.run("workspace-write", "echo x > ok");
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("kiwi: warning: sandbox.writable_roots: '/no/such/root' does not exist and is left out"),
        "{}",
        show(&out)
    );
}

// ---- failing closed ----

/// A seccomp filter for kiwi's own process that answers one system call with an errno (and,
/// for `unshare`, only when it asks for a user namespace): a kernel without that layer.
fn without(cmd: &mut Command, nr: libc::c_long, errno: u32, only_flag: Option<u32>) {
    const LD: u16 = 0x20;
    const JEQ: u16 = 0x15;
    const JSET: u16 = 0x45;
    const RET: u16 = 0x06;
    let f = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let deny = 0x0005_0000 | errno;
    let allow = 0x7fff_0000;
    let mut prog = vec![f(LD, 0, 0, 0), f(JEQ, 0, 3, nr as u32)];
    match only_flag {
        Some(flag) => prog.extend([f(LD, 0, 0, 16), f(JSET, 0, 1, flag)]),
        None => prog.extend([f(LD, 0, 0, 0), f(JEQ, 0, 1, nr as u32)]),
    }
    prog.extend([f(RET, 0, 0, deny), f(RET, 0, 0, allow)]);
    // SAFETY: the child installs a filter prepared before the fork; prctl is async-signal-safe.
    unsafe {
        cmd.pre_exec(move || {
            let fprog = libc::sock_fprog { len: prog.len() as u16, filter: prog.as_ptr() as *mut libc::sock_filter };
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                || libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &fprog as *const libc::sock_fprog) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

#[test]
fn without_landlock_it_refuses_to_run() {
    let b = Sbx::new();
    let mut cmd = b.kiwi("workspace-write", &[], "echo x > \"$OUT/victim\"; echo RAN");
    without(&mut cmd, libc::SYS_landlock_create_ruleset, libc::ENOSYS as u32, None);
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", show(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        "Cannot start the sandbox (workspace-write): Landlock is not available (landlock_create_ruleset: Function not \
         implemented); use --sandbox off to run commands without it"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("RAN"));
    b.victim_unchanged();
}

#[test]
fn without_user_namespaces_it_refuses_or_runs_weaker_when_allowed() {
    let b = Sbx::new();
    let mut cmd = b.kiwi("workspace-write", &[], "echo x > \"$OUT/victim\"; echo RAN");
    without(&mut cmd, libc::SYS_unshare, libc::EPERM as u32, Some(libc::CLONE_NEWUSER as u32));
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", show(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim_end(),
        "Cannot start the sandbox (workspace-write): user namespaces are not usable (unshare: Operation not \
         permitted); set [sandbox] allow_landlock_only = true for a weaker sandbox, or use --sandbox off"
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("RAN"));
    b.victim_unchanged();

    // Allowed: Landlock and seccomp only, with a warning; outside writes still fail.
    let b = Sbx::with_config("[sandbox]\nexclude_slash_tmp = true\nallow_landlock_only = true\n");
    let mut cmd = b.kiwi("workspace-write", &[], "echo x > \"$OUT/victim\"; echo y > ok; echo RAN");
    without(&mut cmd, libc::SYS_unshare, libc::EPERM as u32, Some(libc::CLONE_NEWUSER as u32));
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(String::from_utf8_lossy(&out.stdout).contains("RAN"), "{}", show(&out));
    assert!(err.contains("kiwi: warning: user namespaces are not usable (unshare: Operation not permitted)"), "{err}");
    b.victim_unchanged();
    assert_eq!(b.read("work/ok").as_deref(), Some("y\n"));
}

#[test]
fn info_names_the_layers() {
    let out = Command::new(env!("CARGO_BIN_EXE_kiwi")).arg("info").output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.starts_with("sandbox: ")).unwrap_or_default();
    // This machine (and CI's) can sandbox; the line names the layers.
    assert!(line.starts_with("sandbox: available (user and mount namespaces, Landlock ABI "), "{text}");
    assert!(line.ends_with(", seccomp network filter)"), "{text}");
    assert!(out.stderr.is_empty());
}
