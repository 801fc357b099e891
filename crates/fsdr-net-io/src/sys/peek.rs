//! Reading one queued datagram's first bytes without taking it, by its place in the queue:
//! `SO_PEEK_OFF` set to a byte offset into the socket's queue, then `recv(MSG_PEEK |
//! MSG_TRUNC | MSG_DONTWAIT)`. Over UDP the kernel skips whole datagrams while the offset
//! covers them, so with datagrams of one size the `k`-th (from 0) is at `k × size`; the call
//! returns the datagram's whole length and copies only what the caller's buffer takes.
//! The in-place receiver uses it to find where a gap lies in what is queued before a
//! `recvmmsg` lands the datagrams (`inplace/probe.rs`).

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::OnceLock;

/// Whether this kernel peeks UDP sockets at an offset (`SO_PEEK_OFF` for UDP, Linux 4.11+),
/// detected once on a throwaway socket.
///
/// ```
/// // Linux ≥ 4.11 on every machine this project runs on.
/// assert!(fsdr_net_io::sys::peek::supported());
/// ```
pub fn supported() -> bool {
    static PEEK: OnceLock<bool> = OnceLock::new();
    *PEEK.get_or_init(|| {
        let Ok(sock) = std::net::UdpSocket::bind("127.0.0.1:0") else {
            return false;
        };
        set_offset(&sock, 0).is_ok()
    })
}

/// Sets the socket's peek offset (`SO_PEEK_OFF`, bytes into its receive queue); a negative
/// value turns peeking at an offset off again.
pub fn set_offset(fd: impl AsFd, offset: i32) -> io::Result<()> {
    // SAFETY: the option value is an i32 on the stack that outlives the call, passed with
    // its size; the kernel only reads it (nix has no wrapper for SO_PEEK_OFF).
    // Checked by: `a_peek_at_an_offset_reads_the_datagram_there_and_leaves_the_queue`
    // under ASan.
    let r = unsafe {
        libc::setsockopt(
            fd.as_fd().as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEEK_OFF,
            (&offset as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// What a peek found: the bytes copied into the caller's buffer and the datagram's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Peeked {
    /// Bytes copied (at most the buffer's length).
    pub copied: usize,
    /// The datagram's whole length.
    pub len: usize,
}

/// Copies the first bytes of the datagram that starts at or covers byte `offset` of the
/// socket's receive queue into `head`, leaving the queue as it was. `None` when the queue
/// ends before `offset` (or the socket was shut down).
///
/// ```
/// use std::net::UdpSocket;
/// use fsdr_net_io::sys::peek::{peek_at, Peeked};
///
/// let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
/// let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
/// for k in 0..3u8 {
///     tx.send_to(&[k; 100], rx.local_addr().unwrap()).unwrap();
/// }
/// std::thread::sleep(std::time::Duration::from_millis(20));
/// let mut head = [0u8; 4];
/// // The third datagram, 200 bytes in: its first 4 bytes and its length.
/// assert_eq!(peek_at(&rx, 200, &mut head).unwrap(), Some(Peeked { copied: 4, len: 100 }));
/// assert_eq!(head, [2; 4]);
/// assert_eq!(peek_at(&rx, 300, &mut head).unwrap(), None);
/// // Nothing was taken.
/// let mut buf = [0u8; 200];
/// assert_eq!(rx.recv(&mut buf).unwrap(), 100);
/// assert_eq!(buf[0], 0);
/// ```
pub fn peek_at(fd: impl AsFd, offset: usize, head: &mut [u8]) -> io::Result<Option<Peeked>> {
    use nix::sys::socket::{MsgFlags, recv};
    let offset = i32::try_from(offset)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "peek offset beyond 2 GiB"))?;
    set_offset(&fd, offset)?;
    let flags = MsgFlags::MSG_PEEK | MsgFlags::MSG_TRUNC | MsgFlags::MSG_DONTWAIT;
    loop {
        return match recv(fd.as_fd().as_raw_fd(), head, flags) {
            Ok(0) => Ok(None),
            Ok(len) => Ok(Some(Peeked {
                copied: len.min(head.len()),
                len,
            })),
            Err(nix::errno::Errno::EAGAIN) => Ok(None),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => Err(e.into()),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;

    #[test]
    fn a_peek_at_an_offset_reads_the_datagram_there_and_leaves_the_queue() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = rx.local_addr().unwrap();
        // Sizes 10, 20, 30, 40: datagram k starts at 0, 10, 30, 60.
        for k in 1..=4u8 {
            tx.send_to(&vec![k; 10 * k as usize], to).unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        let mut head = [0u8; 8];
        let at = |off, head: &mut [u8; 8]| peek_at(&rx, off, head).unwrap();
        assert_eq!(at(60, &mut head), Some(Peeked { copied: 8, len: 40 }));
        assert_eq!(head, [4; 8]);
        assert_eq!(at(10, &mut head).map(|p| p.len), Some(20));
        assert_eq!(head[0], 2);
        // An offset inside a datagram reads from there; past the queue's end nothing.
        assert_eq!(at(35, &mut head).map(|p| p.len), Some(30));
        assert_eq!(at(100, &mut head), None);
        // Reading takes the first datagram, whatever was peeked; the offsets move with it.
        rx.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(rx.recv(&mut buf).unwrap(), 10);
        assert_eq!(at(0, &mut head).map(|p| p.len), Some(20));
        // Off again: a plain peek reads the head of the queue.
        set_offset(&rx, -1).unwrap();
        assert_eq!(rx.peek(&mut buf).unwrap(), 20);
        assert_eq!(rx.peek(&mut buf).unwrap(), 20);
    }
}
