//! Batched send: `sendmmsg` on a connected socket, each message one datagram or a UDP GSO
//! super-datagram (`UDP_SEGMENT`), and the one-time detection of GSO support.

use std::io;
use std::mem;
use std::os::fd::{AsFd, AsRawFd};
use std::ptr;
use std::sync::OnceLock;

use super::cmsg::{cmsg_space, write_cmsg};

/// Maximum number of segments the kernel accepts in one GSO send.
pub const GSO_MAX_SEGMENTS: usize = 64;
/// Maximum bytes in one GSO send (IP length limit less headers).
pub const GSO_MAX_BYTES: usize = 65_000;

/// Whether the kernel accepts UDP GSO (`UDP_SEGMENT`); detected once per process.
pub fn udp_gso_supported() -> bool {
    static GSO: OnceLock<bool> = OnceLock::new();
    *GSO.get_or_init(|| {
        let Ok(sock) = std::net::UdpSocket::bind("127.0.0.1:0") else {
            return false;
        };
        nix::sys::socket::getsockopt(&sock, nix::sys::socket::sockopt::UdpGsoSegment).is_ok()
    })
}

/// Control space of one message: a `UDP_SEGMENT` message carrying a `u16`.
const SEGMENT_SPACE: usize = cmsg_space(mem::size_of::<u16>());

#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct ControlBuf([u8; SEGMENT_SPACE]);

/// Preallocated headers for `sendmmsg`, optionally with one `UDP_SEGMENT` control message per
/// header.
pub struct SendBatch {
    msgs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    controls: Vec<ControlBuf>,
}

// SAFETY: the raw pointers point into the batch's own vectors or into the caller's buffers
// for the duration of one call; the batch is used by one thread at a time.
// Checked by: `send_segments_delivers_every_datagram_with_and_without_gso` under ASan.
unsafe impl Send for SendBatch {}

impl SendBatch {
    /// Headers for up to `capacity` messages per call.
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        // SAFETY: all-zero is a valid mmsghdr.
        // Checked by: `send_segments_delivers_every_datagram_with_and_without_gso` under ASan.
        let zeroed: libc::mmsghdr = unsafe { mem::zeroed() };
        Self {
            msgs: vec![zeroed; capacity],
            iovs: vec![
                libc::iovec {
                    iov_base: ptr::null_mut(),
                    iov_len: 0
                };
                capacity
            ],
            controls: vec![ControlBuf([0; SEGMENT_SPACE]); capacity],
        }
    }

    /// Messages per call.
    pub fn capacity(&self) -> usize {
        self.msgs.len()
    }

    /// Sets message `i` to `buf`, sent as datagrams of `segment` bytes with GSO when
    /// `segment` is given, else as one datagram.
    pub fn set(&mut self, i: usize, buf: &[u8], segment: Option<u16>) {
        self.iovs[i] = libc::iovec {
            iov_base: buf.as_ptr() as *mut libc::c_void,
            iov_len: buf.len(),
        };
        // SAFETY: all-zero is a valid msghdr.
        // Checked by: `send_segments_delivers_every_datagram_with_and_without_gso` under ASan.
        let mut hdr: libc::msghdr = unsafe { mem::zeroed() };
        hdr.msg_iov = &mut self.iovs[i];
        hdr.msg_iovlen = 1;
        if let Some(seg) = segment {
            let used = write_cmsg(
                &mut self.controls[i].0,
                libc::SOL_UDP,
                libc::UDP_SEGMENT,
                &seg.to_ne_bytes(),
            )
            .expect("the control buffer holds one UDP_SEGMENT message");
            hdr.msg_control = self.controls[i].0.as_mut_ptr().cast();
            hdr.msg_controllen = used as _;
        }
        self.msgs[i].msg_hdr = hdr;
        self.msgs[i].msg_len = 0;
    }

    /// Sends messages `start..start + n` on a connected socket; returns how many went out.
    ///
    /// # Safety
    /// The buffers given to [`SendBatch::set`] for those messages must still be alive.
    pub unsafe fn send_from(&mut self, fd: impl AsFd, start: usize, n: usize) -> io::Result<usize> {
        let msgs = &mut self.msgs[start..start + n];
        let fd = fd.as_fd().as_raw_fd();
        loop {
            // SAFETY: the headers point at live iovecs/control buffers of the batch and at the
            // caller's buffers (guaranteed alive by the caller).
            // Checked by: `send_segments_delivers_every_datagram_with_and_without_gso` under ASan.
            let r = unsafe { libc::sendmmsg(fd, msgs.as_mut_ptr(), n as libc::c_uint, 0) };
            if r >= 0 {
                return Ok(r as usize);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }
}
