//! Waiting for sockets to become readable (`ppoll`, nanosecond timeouts): one socket for a
//! receive thread's deadline, several for a thread that serves several receivers.

use std::os::fd::{AsFd, BorrowedFd};

/// Waits up to `ns` nanoseconds for `fd` to become readable (`ppoll`, nanosecond timeout);
/// true when it is.
pub fn readable_within(fd: impl AsFd, ns: u64) -> bool {
    use nix::poll::{PollFd, PollFlags, ppoll};
    use nix::sys::time::TimeSpec;
    let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLIN)];
    let t = TimeSpec::from_duration(std::time::Duration::from_nanos(ns));
    matches!(ppoll(&mut fds, Some(t), None), Ok(n) if n > 0)
}

/// Waits until one of `fds` is readable or `ns` nanoseconds pass (`None`: no limit; `ppoll`)
/// and sets `readable[i]` to whether `fds[i]` is (an error or a shut-down socket counts:
/// its receive says what happened). Interrupted by a signal, it reports none readable.
///
/// ```
/// use std::os::fd::AsFd;
/// let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
/// let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
/// b.send_to(b"x", b.local_addr().unwrap()).unwrap();
/// let mut readable = Vec::new();
/// fsdr_net_io::sys::readable_among(&[a.as_fd(), b.as_fd()], Some(1_000_000_000), &mut readable);
/// assert_eq!(readable, [false, true]);
/// ```
pub fn readable_among(fds: &[BorrowedFd<'_>], ns: Option<u64>, readable: &mut Vec<bool>) {
    use nix::poll::{PollFd, PollFlags, ppoll};
    use nix::sys::time::TimeSpec;
    let mut polled: Vec<PollFd<'_>> = fds
        .iter()
        .map(|fd| PollFd::new(*fd, PollFlags::POLLIN))
        .collect();
    let t = ns.map(|ns| TimeSpec::from_duration(std::time::Duration::from_nanos(ns)));
    let any = matches!(ppoll(&mut polled, t, None), Ok(n) if n > 0);
    readable.clear();
    readable.extend(polled.iter().map(|p| {
        any && p.revents().is_some_and(|r| {
            r.intersects(PollFlags::POLLIN | PollFlags::POLLERR | PollFlags::POLLHUP)
        })
    }));
}
