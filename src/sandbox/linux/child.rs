//! The part that runs in the child between `fork` and `exec` (spec sandbox.md §5.1 steps 1–8).
//! Only async-signal-safe system calls on memory prepared before the fork: no allocation, no
//! lock, no logging. A failure is returned as the step and its errno.

use std::os::fd::AsRawFd;

use super::{Failure, Prepared, Step};

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const AT_RECURSIVE: libc::c_uint = 0x8000;
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(libc::EINVAL)
}

fn check(step: Step, r: libc::c_long) -> Result<(), Failure> {
    if r < 0 { Err(Failure { step, errno: errno() }) } else { Ok(()) }
}

/// Writes a whole small buffer to a `/proc` file.
fn write_file(step: Step, path: &std::ffi::CStr, data: &[u8]) -> Result<(), Failure> {
    // SAFETY: NUL-terminated path; the buffer outlives the calls.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        check(step, fd as libc::c_long)?;
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        let err = errno();
        libc::close(fd);
        if n != data.len() as isize {
            return Err(Failure { step, errno: if n < 0 { err } else { libc::EIO } });
        }
    }
    Ok(())
}

fn setattr(step: Step, path: &std::ffi::CStr, flags: libc::c_uint, set: u64, clr: u64) -> Result<(), Failure> {
    let attr = MountAttr { attr_set: set, attr_clr: clr, propagation: 0, userns_fd: 0 };
    // SAFETY: a valid path and attribute struct of the size passed.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    check(step, r)
}

fn bind(step: Step, path: &std::ffi::CStr) -> Result<(), Failure> {
    // SAFETY: NUL-terminated paths.
    let r = unsafe {
        libc::mount(path.as_ptr(), path.as_ptr(), std::ptr::null(), libc::MS_BIND | libc::MS_REC, std::ptr::null())
    };
    check(step, r as libc::c_long)
}

/// The user and mount namespace view (steps 1–5).
fn namespaces(p: &Prepared, cwd: &mut [u8]) -> Result<(), Failure> {
    // SAFETY: plain system calls on prepared, NUL-terminated data.
    unsafe {
        check(Step::Unshare, libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) as libc::c_long)?;
    }
    write_file(Step::Setgroups, c"/proc/self/setgroups", b"deny")?;
    write_file(Step::UidMap, c"/proc/self/uid_map", &p.uid_map)?;
    write_file(Step::GidMap, c"/proc/self/gid_map", &p.gid_map)?;
    // SAFETY: as above.
    let r = unsafe {
        libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        )
    };
    check(Step::MakePrivate, r as libc::c_long)?;
    for root in &p.writable {
        bind(Step::BindRoot, root)?;
    }
    setattr(Step::ReadOnlyView, c"/", AT_RECURSIVE, MOUNT_ATTR_RDONLY, 0)?;
    for root in &p.writable {
        // Mounts below a root that were read-only before are locked so; then only the root's
        // own bind is made writable and those below stay read-only.
        if setattr(Step::WritableRoot, root, AT_RECURSIVE, 0, MOUNT_ATTR_RDONLY).is_err() {
            setattr(Step::WritableRoot, root, 0, 0, MOUNT_ATTR_RDONLY)?;
        }
    }
    for path in &p.read_only {
        bind(Step::ReadOnlyPath, path)?;
        setattr(Step::ReadOnlyPath, path, AT_RECURSIVE, MOUNT_ATTR_RDONLY, 0)?;
    }
    for (path, is_dir) in &p.deny_read {
        // SAFETY: NUL-terminated strings.
        let r = unsafe {
            if *is_dir {
                libc::mount(
                    c"tmpfs".as_ptr(),
                    path.as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    c"size=0,mode=0555".as_ptr().cast(),
                )
            } else {
                libc::mount(c"/dev/null".as_ptr(), path.as_ptr(), std::ptr::null(), libc::MS_BIND, std::ptr::null())
            }
        };
        check(Step::DenyRead, r as libc::c_long)?;
        if !*is_dir {
            setattr(Step::DenyRead, path, 0, MOUNT_ATTR_RDONLY, 0)?;
        }
    }
    // The cwd still points into the mount beneath the new binds: enter the path again.
    // SAFETY: the buffer is ours and large enough for a path (else ERANGE).
    unsafe {
        if libc::getcwd(cwd.as_mut_ptr().cast(), cwd.len()).is_null() {
            return Err(Failure { step: Step::Chdir, errno: errno() });
        }
        check(Step::Chdir, libc::chdir(cwd.as_ptr().cast()) as libc::c_long)?;
    }
    Ok(())
}

/// No capability now or after `exec`, and none to gain (step 6).
fn drop_privileges() -> Result<(), Failure> {
    // SAFETY: prctl and capset with valid arguments.
    unsafe {
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 {
                match errno() {
                    libc::EINVAL => break,
                    // Without CAP_SETPCAP (an unprivileged user, no namespace): there is
                    // nothing in the bounding set such a process could use.
                    libc::EPERM => break,
                    e => return Err(Failure { step: Step::Capabilities, errno: e }),
                }
            }
        }
        check(
            Step::Capabilities,
            libc::prctl(libc::PR_CAP_AMBIENT, libc::PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) as libc::c_long,
        )?;
        let header = CapHeader { version: LINUX_CAPABILITY_VERSION_3, pid: 0 };
        let data = [CapData { effective: 0, permitted: 0, inheritable: 0 }; 2];
        check(Step::Capabilities, libc::syscall(libc::SYS_capset, &header as *const CapHeader, data.as_ptr()))?;
        check(Step::NoNewPrivs, libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) as libc::c_long)?;
    }
    Ok(())
}

/// Every step of §5.1 but the `exec`.
pub(super) fn setup(p: &Prepared, cwd: &mut [u8]) -> Result<(), Failure> {
    if p.namespaces {
        namespaces(p, cwd)?;
    }
    drop_privileges()?;
    // SAFETY: a ruleset descriptor kept open by the parent's `Prepared`.
    let r = unsafe { libc::syscall(super::landlock::SYS_RESTRICT_SELF, p.ruleset.as_raw_fd(), 0u32) };
    check(Step::LandlockRestrict, r)?;
    if let Some(filter) = &p.filter {
        let prog = libc::sock_fprog { len: filter.len() as u16, filter: filter.as_ptr() as *mut libc::sock_filter };
        // SAFETY: the program lives in `p`, which outlives the call; no_new_privs is set.
        let r =
            unsafe { libc::prctl(libc::PR_SET_SECCOMP, libc::SECCOMP_MODE_FILTER, &prog as *const libc::sock_fprog) };
        check(Step::Seccomp, r as libc::c_long)?;
    }
    Ok(())
}
