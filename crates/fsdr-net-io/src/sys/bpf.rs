//! The classic-BPF program that spreads one flow over a `SO_REUSEPORT` group.

use std::io;
use std::os::fd::AsFd;

/// How a classic-BPF program attached to a SO_REUSEPORT group picks the socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReuseportSpread {
    /// A random socket per datagram: spreads even a single flow over every socket.
    Random,
    /// The socket whose index is the receiving CPU modulo the group size.
    Cpu,
}

/// Attaches a classic-BPF program to the SO_REUSEPORT group of `fd` that returns the index of
/// the socket (in bind order) to deliver to: `spread` modulo `sockets`.
pub fn attach_reuseport_cbpf(
    fd: impl AsFd,
    spread: ReuseportSpread,
    sockets: u32,
) -> io::Result<()> {
    let ancillary = match spread {
        ReuseportSpread::Random => libc::SKF_AD_RANDOM,
        ReuseportSpread::Cpu => libc::SKF_AD_CPU,
    };
    let mut program = [
        // A = random number or CPU id (ancillary load).
        libc::sock_filter {
            code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
            jt: 0,
            jf: 0,
            k: (libc::SKF_AD_OFF + ancillary) as u32,
        },
        // A = A % sockets.
        libc::sock_filter {
            code: (libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K) as u16,
            jt: 0,
            jf: 0,
            k: sockets.max(1),
        },
        // Return A: the index of the socket.
        libc::sock_filter {
            code: (libc::BPF_RET | libc::BPF_A) as u16,
            jt: 0,
            jf: 0,
            k: 0,
        },
    ];
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_mut_ptr(),
    };
    nix::sys::socket::setsockopt(&fd, nix::sys::socket::sockopt::AttachReusePortCbpf, &prog)
        .map_err(io::Error::from)
}
