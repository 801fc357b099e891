//! The classic-BPF programs of a `SO_REUSEPORT` group: one that spreads one flow over the
//! sockets, one that steers each stream (by its ID in the payload) to a socket of its own.

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

/// Where a steering program ([`attach_reuseport_by_stream`]) finds a datagram's stream
/// identifier in the UDP payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamIdField {
    /// CHDR: the destination endpoint, the low 16 bits of the little-endian 64-bit header
    /// (bytes 0 and 1).
    ChdrDstEpid,
    /// VITA-49: the stream ID, the big-endian word after the header (bytes 4 to 7), present
    /// in odd data packet types and every context and command packet.
    VrtStreamId,
}

/// Most streams one steering program tells apart (two instructions each).
pub const MAX_STEERED_STREAMS: usize = 1024;

/// The classic-BPF program of [`attach_reuseport_by_stream`]: the index of the first entry of
/// `ids` equal to the datagram's stream identifier, 0 for any other datagram (one too short
/// to hold the field, one without a stream ID).
pub fn stream_steering_program(field: StreamIdField, ids: &[u32]) -> Vec<libc::sock_filter> {
    let op = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    let mut p = Vec::with_capacity(7 + 2 * ids.len());
    // Compared as loaded: classic BPF loads big-endian, CHDR's field is little-endian.
    let key: fn(u32) -> u32 = match field {
        StreamIdField::ChdrDstEpid => {
            // A = bytes 0..2 (a load past the end ends the program with 0).
            p.push(op(libc::BPF_LD | libc::BPF_H | libc::BPF_ABS, 0, 0, 0));
            |id| u32::from((id as u16).swap_bytes())
        }
        StreamIdField::VrtStreamId => {
            // A = packet type (the header's top 4 bits).
            p.push(op(libc::BPF_LD | libc::BPF_B | libc::BPF_ABS, 0, 0, 0));
            p.push(op(libc::BPF_ALU | libc::BPF_RSH | libc::BPF_K, 0, 0, 4));
            // Context and command packets (4 and up) carry a stream ID, and odd data types;
            // the rest return 0.
            p.push(op(libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K, 2, 0, 4));
            p.push(op(libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K, 1, 0, 1));
            p.push(op(libc::BPF_RET | libc::BPF_K, 0, 0, 0));
            // A = the stream ID word.
            p.push(op(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, 0, 0, 4));
            |id| id
        }
    };
    for (i, &id) in ids.iter().enumerate() {
        // Equal: fall through to "return i"; otherwise skip it.
        p.push(op(
            libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
            0,
            1,
            key(id),
        ));
        p.push(op(libc::BPF_RET | libc::BPF_K, 0, 0, i as u32));
    }
    p.push(op(libc::BPF_RET | libc::BPF_K, 0, 0, 0));
    p
}

/// Attaches to the SO_REUSEPORT group of `fd` a classic-BPF program that delivers each
/// datagram to the socket (in bind order) whose entry of `ids` is its stream identifier, and
/// any other datagram to the first socket: the kernel splits one port's streams (a radio's
/// channels) over one socket each. At most [`MAX_STEERED_STREAMS`] entries.
///
/// ```
/// use fsdr_net_io::sys::bpf::{StreamIdField, attach_reuseport_by_stream};
/// use socket2::{Domain, Socket, Type};
///
/// let open = |addr: std::net::SocketAddr| {
///     let s = Socket::new(Domain::IPV4, Type::DGRAM, None).unwrap();
///     s.set_reuse_port(true).unwrap();
///     s.bind(&addr.into()).unwrap();
///     s
/// };
/// let first = open("127.0.0.1:0".parse().unwrap());
/// let addr = first.local_addr().unwrap().as_socket().unwrap();
/// let second = open(addr);
/// // VRT stream ID 7 to `first`, 9 to `second`.
/// attach_reuseport_by_stream(&first, StreamIdField::VrtStreamId, &[7, 9]).unwrap();
/// ```
pub fn attach_reuseport_by_stream(
    fd: impl AsFd,
    field: StreamIdField,
    ids: &[u32],
) -> io::Result<()> {
    if ids.len() > MAX_STEERED_STREAMS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} streams: a steering program tells at most {MAX_STEERED_STREAMS} apart",
                ids.len()
            ),
        ));
    }
    let mut program = stream_steering_program(field, ids);
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_mut_ptr(),
    };
    nix::sys::socket::setsockopt(&fd, nix::sys::socket::sockopt::AttachReusePortCbpf, &prog)
        .map_err(io::Error::from)
}
