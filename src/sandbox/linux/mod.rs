//! Linux: the mechanism of spec sandbox.md §5 — a user and mount namespace view, Landlock and a
//! seccomp network filter, set up in the child between `fork` and `exec`. The only platform
//! module: `super::platform` is this one on Linux and `super::other` elsewhere, with the same
//! items (`Prepared`, `prepare`, `install`, `install_tokio`, `probe`, `ProbeReport`, `Failure`,
//! `landlock_has_scopes`, `unsupported`).

mod child;
mod landlock;
mod seccomp;

use std::ffi::CString;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use super::Layer;
use super::policy::Paths;

/// The step of §5.1 that failed; its name is what the start-up error shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Step {
    LandlockAbi = 1,
    LandlockCreate,
    LandlockAddRule,
    Unshare,
    Setgroups,
    UidMap,
    GidMap,
    MakePrivate,
    BindRoot,
    ReadOnlyView,
    WritableRoot,
    ReadOnlyPath,
    DenyRead,
    Chdir,
    Capabilities,
    NoNewPrivs,
    LandlockRestrict,
    Seccomp,
}

const STEPS: [Step; 18] = [
    Step::LandlockAbi,
    Step::LandlockCreate,
    Step::LandlockAddRule,
    Step::Unshare,
    Step::Setgroups,
    Step::UidMap,
    Step::GidMap,
    Step::MakePrivate,
    Step::BindRoot,
    Step::ReadOnlyView,
    Step::WritableRoot,
    Step::ReadOnlyPath,
    Step::DenyRead,
    Step::Chdir,
    Step::Capabilities,
    Step::NoNewPrivs,
    Step::LandlockRestrict,
    Step::Seccomp,
];

impl Step {
    /// The system call or file the step is named by in messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::LandlockAbi | Self::LandlockCreate => "landlock_create_ruleset",
            Self::LandlockAddRule => "landlock_add_rule",
            Self::Unshare => "unshare",
            Self::Setgroups => "setgroups",
            Self::UidMap => "uid_map",
            Self::GidMap => "gid_map",
            Self::MakePrivate | Self::BindRoot | Self::ReadOnlyPath | Self::DenyRead => "mount",
            Self::ReadOnlyView | Self::WritableRoot => "mount_setattr",
            Self::Chdir => "chdir",
            Self::Capabilities => "capset",
            Self::NoNewPrivs => "prctl",
            Self::LandlockRestrict => "landlock_restrict_self",
            Self::Seccomp => "seccomp",
        }
    }

    /// Which layer the step belongs to, for the three start-up messages.
    pub fn layer(self) -> Layer {
        match self {
            Self::LandlockAbi | Self::LandlockCreate | Self::LandlockAddRule | Self::LandlockRestrict => {
                Layer::Landlock
            }
            Self::Unshare
            | Self::Setgroups
            | Self::UidMap
            | Self::GidMap
            | Self::MakePrivate
            | Self::BindRoot
            | Self::ReadOnlyView
            | Self::WritableRoot
            | Self::ReadOnlyPath
            | Self::DenyRead
            | Self::Chdir => Layer::Namespaces,
            Self::Capabilities | Self::NoNewPrivs | Self::Seccomp => Layer::Process,
        }
    }
}

/// A failed step and its errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    pub step: Step,
    pub errno: i32,
}

/// A child's set-up failure travels to the parent as the spawn's `io::Error` code (std sends
/// only an errno through its pipe): this tag, the step and the errno. No errno is this large.
const TAG: i32 = 0x4B00_0000;

impl Failure {
    fn encode(self) -> i32 {
        TAG | ((self.step as i32) << 16) | (self.errno & 0xffff)
    }

    /// The failure a spawn error carries, when it is one of ours.
    pub fn decode(error: &std::io::Error) -> Option<Self> {
        let code = error.raw_os_error()?;
        if code & 0x7F00_0000 != TAG {
            return None;
        }
        let step = ((code >> 16) & 0xff) as u8;
        let step = *STEPS.iter().find(|s| **s as u8 == step)?;
        Some(Self { step, errno: code & 0xffff })
    }

    /// The layer that failed.
    pub fn layer(self) -> Layer {
        self.step.layer()
    }

    /// `<step>: <strerror>`.
    pub fn describe(self) -> String {
        format!("{}: {}", self.step.name(), strerror(self.errno))
    }
}

/// The C library's text for an errno, without std's ` (os error N)`.
pub fn strerror(errno: i32) -> String {
    super::strerror_of(&std::io::Error::from_raw_os_error(errno))
}

/// Everything one command's child needs, made before the fork.
pub struct Prepared {
    namespaces: bool,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    writable: Vec<CString>,
    read_only: Vec<CString>,
    deny_read: Vec<(CString, bool)>,
    ruleset: OwnedFd,
    filter: Option<Vec<libc::sock_filter>>,
}

fn c_path(path: &Path) -> Result<CString, Failure> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| Failure { step: Step::BindRoot, errno: libc::EINVAL })
}

/// The Landlock ABI, or the failure of asking for it.
pub fn landlock_abi() -> Result<u32, Failure> {
    landlock::abi().map_err(|errno| Failure { step: Step::LandlockAbi, errno })
}

/// Prepares one command: `namespaces` false is the Landlock-and-seccomp-only variant.
pub fn prepare(paths: &Paths, network_blocked: bool, namespaces: bool) -> Result<Prepared, Failure> {
    let abi = landlock_abi()?;
    let ruleset = landlock::ruleset(abi, &paths.writable_roots)?;
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    let cs = |list: &[std::path::PathBuf]| list.iter().map(|p| c_path(p)).collect::<Result<Vec<_>, _>>();
    Ok(Prepared {
        namespaces,
        uid_map: format!("{uid} {uid} 1\n").into_bytes(),
        gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        writable: cs(&paths.writable_roots)?,
        read_only: cs(&paths.read_only)?,
        deny_read: paths.deny_read.iter().map(|p| Ok((c_path(p)?, p.is_dir()))).collect::<Result<Vec<_>, _>>()?,
        ruleset,
        filter: network_blocked.then(seccomp::network_filter),
    })
}

/// Installs the set-up as the command's last `pre_exec` step.
pub fn install(prepared: Arc<Prepared>, cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let mut cwd = vec![0u8; libc::PATH_MAX as usize + 1];
    // SAFETY: the closure runs only async-signal-safe calls on memory allocated before the fork.
    unsafe {
        cmd.pre_exec(move || {
            child::setup(&prepared, &mut cwd).map_err(|f| std::io::Error::from_raw_os_error(f.encode()))
        });
    }
}

/// The same for tokio's command.
pub fn install_tokio(prepared: Arc<Prepared>, cmd: &mut tokio::process::Command) {
    let mut cwd = vec![0u8; libc::PATH_MAX as usize + 1];
    // SAFETY: as in `install`.
    unsafe {
        cmd.pre_exec(move || {
            child::setup(&prepared, &mut cwd).map_err(|f| std::io::Error::from_raw_os_error(f.encode()))
        });
    }
}

/// What the probe found: the Landlock ABI.
pub struct ProbeReport {
    pub landlock_abi: u32,
}

/// Runs the whole set-up once in a throw-away child that exits instead of `exec`ing
/// (spec §5.3). The child reports a failure through a pipe as 8 bytes (step, errno).
pub fn probe(paths: &Paths, network_blocked: bool, namespaces: bool) -> Result<ProbeReport, Failure> {
    let landlock_abi = landlock_abi()?;
    let prepared = prepare(paths, network_blocked, namespaces)?;
    let mut cwd = vec![0u8; libc::PATH_MAX as usize + 1];
    let mut fds = [0i32; 2];
    let internal = |errno| Failure { step: Step::Unshare, errno };
    // SAFETY: a pipe, a fork whose child only runs the async-signal-safe set-up and `_exit`s,
    // and a wait for it.
    unsafe {
        if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) < 0 {
            return Err(internal(std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO)));
        }
        let pid = libc::fork();
        if pid < 0 {
            let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EIO);
            libc::close(fds[0]);
            libc::close(fds[1]);
            return Err(internal(e));
        }
        if pid == 0 {
            libc::close(fds[0]);
            let code = match child::setup(&prepared, &mut cwd) {
                Ok(()) => 0,
                Err(f) => {
                    let mut msg = [0u8; 8];
                    msg[..4].copy_from_slice(&(f.step as u32).to_ne_bytes());
                    msg[4..].copy_from_slice(&(f.errno as u32).to_ne_bytes());
                    libc::write(fds[1], msg.as_ptr().cast(), msg.len());
                    1
                }
            };
            libc::_exit(code);
        }
        libc::close(fds[1]);
        let mut buf = [0u8; 8];
        let n = libc::read(fds[0], buf.as_mut_ptr().cast(), buf.len());
        libc::close(fds[0]);
        let mut status = 0;
        while libc::waitpid(pid, &mut status, 0) < 0
            && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
        {}
        if n == 8 {
            let step = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as u8;
            let errno = u32::from_ne_bytes([buf[4], buf[5], buf[6], buf[7]]) as i32;
            let step = STEPS.iter().copied().find(|s| *s as u8 == step).unwrap_or(Step::Unshare);
            return Err(Failure { step, errno });
        }
        if !(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0) {
            return Err(internal(libc::ECHILD));
        }
    }
    Ok(ProbeReport { landlock_abi })
}

/// Whether this ABI stops signals to outside processes.
pub fn landlock_has_scopes(abi: u32) -> bool {
    landlock::has_scopes(abi)
}

/// `None`: the sandbox is built for this system.
pub fn unsupported() -> Option<&'static str> {
    None
}
