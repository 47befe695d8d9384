//! Landlock, prepared in kiwi before the fork (spec sandbox.md §5.1 step 7): the ruleset fd
//! handles every filesystem right this kernel's ABI knows, grants read and execute beneath `/`,
//! everything beneath each writable root, read and write on the devices of §3.5, and (ABI ≥ 6)
//! scopes signals and abstract unix sockets to the sandbox. The child only calls
//! `landlock_restrict_self` on it. Raw system calls: the ABI is four structs and three calls,
//! and the child part must stay async-signal-safe.

use std::ffi::CString;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::{Failure, Step};

const SYS_CREATE_RULESET: libc::c_long = libc::SYS_landlock_create_ruleset;
const SYS_ADD_RULE: libc::c_long = libc::SYS_landlock_add_rule;
pub(super) const SYS_RESTRICT_SELF: libc::c_long = libc::SYS_landlock_restrict_self;

const CREATE_RULESET_VERSION: u32 = 1;
const RULE_PATH_BENEATH: u32 = 1;

const EXECUTE: u64 = 1 << 0;
const WRITE_FILE: u64 = 1 << 1;
const READ_FILE: u64 = 1 << 2;
const READ_DIR: u64 = 1 << 3;
/// REMOVE_DIR … MAKE_SYM: the rest of ABI 1.
const ABI1_ALL: u64 = (1 << 13) - 1;
const REFER: u64 = 1 << 13;
const TRUNCATE: u64 = 1 << 14;
const IOCTL_DEV: u64 = 1 << 15;
/// The rights that make sense on a file (not a directory) rule.
const FILE_RIGHTS: u64 = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV;

const SCOPE_ABSTRACT_UNIX_SOCKET: u64 = 1 << 0;
const SCOPE_SIGNAL: u64 = 1 << 1;

/// The devices every sandboxed command may read and write (spec §3.5).
const DEVICES: [&str; 8] =
    ["/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts"];

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
    scoped: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// The kernel's Landlock ABI version, or the errno of the query (`ENOSYS`: not built in;
/// `EOPNOTSUPP`: not enabled at boot).
pub(super) fn abi() -> Result<u32, i32> {
    // SAFETY: the documented version query takes no attribute.
    let v =
        unsafe { libc::syscall(SYS_CREATE_RULESET, std::ptr::null::<RulesetAttr>(), 0usize, CREATE_RULESET_VERSION) };
    if v < 0 { Err(errno()) } else { Ok(v as u32) }
}

/// Every filesystem right the ABI knows.
fn handled_fs(abi: u32) -> u64 {
    let mut all = ABI1_ALL;
    if abi >= 2 {
        all |= REFER;
    }
    if abi >= 3 {
        all |= TRUNCATE;
    }
    if abi >= 5 {
        all |= IOCTL_DEV;
    }
    all
}

/// Whether this ABI has the signal and abstract-socket scopes.
pub(super) fn has_scopes(abi: u32) -> bool {
    abi >= 6
}

/// The ruleset of one command: `writable` roots get every right.
pub(super) fn ruleset(abi: u32, writable: &[PathBuf]) -> Result<OwnedFd, Failure> {
    let handled = handled_fs(abi);
    let attr = RulesetAttr {
        handled_access_fs: handled,
        handled_access_net: 0,
        scoped: if has_scopes(abi) { SCOPE_SIGNAL | SCOPE_ABSTRACT_UNIX_SOCKET } else { 0 },
    };
    let size = match abi {
        0..=3 => 8,
        4 | 5 => 16,
        _ => std::mem::size_of::<RulesetAttr>(),
    };
    // SAFETY: `attr` is a valid ruleset attribute of at least `size` bytes.
    let fd = unsafe { libc::syscall(SYS_CREATE_RULESET, &attr as *const RulesetAttr, size, 0u32) };
    if fd < 0 {
        return Err(Failure { step: Step::LandlockCreate, errno: errno() });
    }
    // SAFETY: the call returned a new descriptor (close-on-exec) that we own.
    let ruleset = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    add(&ruleset, Path::new("/"), (READ_FILE | READ_DIR | EXECUTE) & handled, true)?;
    for root in writable {
        add(&ruleset, root, handled, true)?;
    }
    for device in DEVICES {
        add(&ruleset, Path::new(device), (READ_FILE | READ_DIR | WRITE_FILE | TRUNCATE | IOCTL_DEV) & handled, false)?;
    }
    Ok(ruleset)
}

/// One path-beneath rule; a file gets only the file rights. A missing device is skipped
/// (`required` false); a missing root fails.
fn add(ruleset: &OwnedFd, path: &Path, access: u64, required: bool) -> Result<(), Failure> {
    use std::os::fd::AsRawFd;
    let fail = |errno| Failure { step: Step::LandlockAddRule, errno };
    let Ok(c_path) = CString::new(path.as_os_str().as_bytes()) else { return Err(fail(libc::EINVAL)) };
    // SAFETY: a NUL-terminated path; O_PATH opens nothing but a reference.
    let fd = unsafe { libc::open(c_path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return if required { Err(fail(errno())) } else { Ok(()) };
    }
    // SAFETY: a descriptor we just opened and own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let is_dir = std::fs::metadata(path).map(|m| m.is_dir()).unwrap_or(false);
    let rule = PathBeneathAttr {
        allowed_access: if is_dir { access } else { access & FILE_RIGHTS },
        parent_fd: fd.as_raw_fd(),
    };
    // SAFETY: a valid rule for a valid ruleset descriptor.
    let r = unsafe {
        libc::syscall(SYS_ADD_RULE, ruleset.as_raw_fd(), RULE_PATH_BENEATH, &rule as *const PathBeneathAttr, 0u32)
    };
    if r < 0 { Err(fail(errno())) } else { Ok(()) }
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL)
}
