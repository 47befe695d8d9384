//! The network filter (spec sandbox.md §3.6, §5.1 step 8) as a classic BPF program, built in
//! kiwi before the fork; the child only loads it. Every answer that is not "allow" is
//! `SECCOMP_RET_ERRNO(EPERM)`, so a program sees an ordinary error, never a kill.
//!
//! What it decides: a foreign architecture (i386 `int 0x80`) and x32 system calls are refused
//! outright (their numbers would bypass the checks below); `socket`/`socketpair` are allowed
//! for `AF_UNIX` stream and seqpacket sockets only; `connect`, `bind`, `listen`, `accept`,
//! `accept4` and the io_uring calls are refused; `sendto` is allowed without a destination
//! address only (so `send()` on a socketpair works). Everything else is allowed.

/// `struct seccomp_data` offsets.
const NR: u32 = 0;
const ARCH: u32 = 4;
const fn arg_lo(i: u32) -> u32 {
    16 + 8 * i
}
const fn arg_hi(i: u32) -> u32 {
    20 + 8 * i
}

const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const AND_K: u16 = 0x54;
const RET_K: u16 = 0x06;

const RET_ALLOW: u32 = 0x7fff_0000;
const RET_EPERM: u32 = 0x0005_0000 | libc::EPERM as u32;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;

/// x32 system calls on x86_64 carry this bit in their number.
#[cfg(target_arch = "x86_64")]
const X32_SYSCALL_BIT: Option<u32> = Some(0x4000_0000);
#[cfg(target_arch = "aarch64")]
const X32_SYSCALL_BIT: Option<u32> = None;

fn op(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt: 0, jf: 0, k }
}

fn jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// `if nr == n { block }`: the block ends in a return, so the next check follows it.
fn when(out: &mut Vec<libc::sock_filter>, nr: libc::c_long, block: &[libc::sock_filter]) {
    out.push(jump(JEQ_K, nr as u32, 0, block.len() as u8));
    out.extend_from_slice(block);
}

/// `socket`/`socketpair`: only `AF_UNIX` and not `SOCK_DGRAM` (type & 0xf).
fn unix_stream_only() -> Vec<libc::sock_filter> {
    vec![
        op(LD_W_ABS, arg_lo(0)),
        jump(JEQ_K, libc::AF_UNIX as u32, 1, 0),
        op(RET_K, RET_EPERM),
        op(LD_W_ABS, arg_lo(1)),
        op(AND_K, 0xf),
        jump(JEQ_K, libc::SOCK_DGRAM as u32, 0, 1),
        op(RET_K, RET_EPERM),
        op(RET_K, RET_ALLOW),
    ]
}

/// `sendto`: allowed only with a null destination (argument 4, both halves).
fn no_destination() -> Vec<libc::sock_filter> {
    vec![
        op(LD_W_ABS, arg_lo(4)),
        jump(JEQ_K, 0, 1, 0),
        op(RET_K, RET_EPERM),
        op(LD_W_ABS, arg_hi(4)),
        jump(JEQ_K, 0, 1, 0),
        op(RET_K, RET_EPERM),
        op(RET_K, RET_ALLOW),
    ]
}

/// The whole program.
pub(super) fn network_filter() -> Vec<libc::sock_filter> {
    let mut p = vec![op(LD_W_ABS, ARCH), jump(JEQ_K, AUDIT_ARCH, 1, 0), op(RET_K, RET_EPERM), op(LD_W_ABS, NR)];
    if let Some(bit) = X32_SYSCALL_BIT {
        p.push(jump(JGE_K, bit, 0, 1));
        p.push(op(RET_K, RET_EPERM));
    }
    when(&mut p, libc::SYS_socket, &unix_stream_only());
    when(&mut p, libc::SYS_socketpair, &unix_stream_only());
    when(&mut p, libc::SYS_sendto, &no_destination());
    for nr in [
        libc::SYS_connect,
        libc::SYS_bind,
        libc::SYS_listen,
        libc::SYS_accept,
        libc::SYS_accept4,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
    ] {
        when(&mut p, nr, &[op(RET_K, RET_EPERM)]);
    }
    p.push(op(RET_K, RET_ALLOW));
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_jump_stays_inside_the_program() {
        let p = network_filter();
        for (i, ins) in p.iter().enumerate() {
            if ins.code == JEQ_K || ins.code == JGE_K {
                assert!(i + 1 + (ins.jt.max(ins.jf) as usize) < p.len(), "instruction {i}");
            }
        }
        assert_eq!(p.last().map(|i| (i.code, i.k)), Some((RET_K, RET_ALLOW)));
    }
}
