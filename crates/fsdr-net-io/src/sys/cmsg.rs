//! Control messages (`cmsghdr` records) read and written as plain bytes, without pointer casts:
//! every length is checked against the buffer and against what each message type needs, and
//! every field is copied out with `from_ne_bytes`, so an arbitrary (truncated, crafted,
//! misaligned) control buffer can only end the iteration early, never read out of bounds.
//!
//! ```
//! use fsdr_net_io::sys::cmsg::{ControlMessages, cmsg_space, write_cmsg};
//!
//! let mut buf = [0u8; 64];
//! let n = write_cmsg(&mut buf, libc::SOL_UDP, libc::UDP_SEGMENT, &1472u16.to_ne_bytes()).unwrap();
//! assert_eq!(n, cmsg_space(2));
//! let msgs: Vec<_> = ControlMessages::new(&buf[..n]).collect();
//! assert_eq!(msgs.len(), 1);
//! assert_eq!((msgs[0].level, msgs[0].kind), (libc::SOL_UDP, libc::UDP_SEGMENT));
//! assert_eq!(msgs[0].data, 1472u16.to_ne_bytes());
//! ```

use std::mem::size_of;

use super::RecvMeta;

/// Bytes of a `cmsghdr`: `cmsg_len` (a `size_t`), `cmsg_level` and `cmsg_type` (two `int`s),
/// padded to the alignment of `size_t`.
pub const HEADER: usize = align(size_of::<usize>() + 2 * size_of::<i32>());

/// Control messages are aligned to `size_t` (`CMSG_ALIGN`).
const fn align(n: usize) -> usize {
    let a = size_of::<usize>();
    (n + a - 1) & !(a - 1)
}

/// `CMSG_LEN(n)`: the `cmsg_len` of a message with `n` data bytes.
pub const fn cmsg_len(n: usize) -> usize {
    HEADER + n
}

/// `CMSG_SPACE(n)`: the bytes a message with `n` data bytes occupies, padding included.
pub const fn cmsg_space(n: usize) -> usize {
    HEADER + align(n)
}

/// One control message: its level, type and data bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlMessage<'a> {
    /// `cmsg_level` (`SOL_SOCKET`, `SOL_UDP`, …).
    pub level: i32,
    /// `cmsg_type` (`SO_RXQ_OVFL`, `SCM_TIMESTAMPNS`, `UDP_GRO`, …).
    pub kind: i32,
    /// The data after the header, `cmsg_len − HEADER` bytes.
    pub data: &'a [u8],
}

/// Iterates over the control messages in a buffer the kernel filled (`msg_control`, first
/// `msg_controllen` bytes). Stops at the first record whose length is impossible (shorter
/// than a header or longer than what is left); [`ControlMessages::malformed`] then says so.
#[derive(Debug, Clone)]
pub struct ControlMessages<'a> {
    rest: &'a [u8],
    malformed: bool,
}

impl<'a> ControlMessages<'a> {
    /// The messages in `control`.
    pub fn new(control: &'a [u8]) -> Self {
        Self {
            rest: control,
            malformed: false,
        }
    }

    /// Whether the iteration ended at an impossible record rather than at the end.
    pub fn malformed(&self) -> bool {
        self.malformed
    }
}

impl<'a> Iterator for ControlMessages<'a> {
    type Item = ControlMessage<'a>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.len() < HEADER {
            // Fewer bytes than a header: the end (the kernel never leaves a partial one).
            self.malformed |= !self.rest.is_empty() && self.rest.iter().any(|&b| b != 0);
            self.rest = &[];
            return None;
        }
        let w = size_of::<usize>();
        let len = usize::from_ne_bytes(self.rest[..w].try_into().ok()?);
        let level = i32::from_ne_bytes(self.rest[w..w + 4].try_into().ok()?);
        let kind = i32::from_ne_bytes(self.rest[w + 4..w + 8].try_into().ok()?);
        if len == 0 {
            // Unused, zeroed control space after the last message.
            self.rest = &[];
            return None;
        }
        if len < HEADER || len > self.rest.len() {
            self.malformed = true;
            self.rest = &[];
            return None;
        }
        let data = &self.rest[HEADER..len];
        let next = align(len).min(self.rest.len());
        self.rest = &self.rest[next..];
        Some(ControlMessage { level, kind, data })
    }
}

/// Writes one control message at the start of `buf`; returns the bytes it occupies
/// (`CMSG_SPACE`), or `None` when `buf` is too small.
pub fn write_cmsg(buf: &mut [u8], level: i32, kind: i32, data: &[u8]) -> Option<usize> {
    let space = cmsg_space(data.len());
    if buf.len() < space {
        return None;
    }
    let w = size_of::<usize>();
    buf[..space].fill(0);
    buf[..w].copy_from_slice(&cmsg_len(data.len()).to_ne_bytes());
    buf[w..w + 4].copy_from_slice(&level.to_ne_bytes());
    buf[w + 4..w + 8].copy_from_slice(&kind.to_ne_bytes());
    buf[HEADER..HEADER + data.len()].copy_from_slice(data);
    Some(space)
}

/// `struct timespec` as the kernel puts it in `SCM_TIMESTAMPNS`: two `long`s.
const TIMESPEC: usize = 2 * size_of::<libc::c_long>();

fn long_at(data: &[u8], i: usize) -> Option<i64> {
    let w = size_of::<libc::c_long>();
    let b = data.get(i * w..(i + 1) * w)?;
    Some(match w {
        8 => i64::from_ne_bytes(b.try_into().ok()?),
        _ => i64::from(i32::from_ne_bytes(b.try_into().ok()?)),
    })
}

/// Reads the control messages the receive engines ask for into `meta`: the socket's drop
/// counter (`SO_RXQ_OVFL`, a `u32`), the kernel receive time (`SCM_TIMESTAMPNS`, a
/// `timespec`) and the GRO segment size (`UDP_GRO`, an `int`). A message whose data is shorter
/// than its type needs is ignored and, like an impossible record, sets
/// `meta.control_malformed`.
pub fn parse_control(control: &[u8], meta: &mut RecvMeta) {
    let mut it = ControlMessages::new(control);
    for m in it.by_ref() {
        match (m.level, m.kind) {
            (libc::SOL_SOCKET, libc::SO_RXQ_OVFL) => match m.data.get(..4) {
                Some(b) => {
                    meta.kernel_drops = Some(u32::from_ne_bytes(b.try_into().unwrap_or_default()))
                }
                None => meta.control_malformed = true,
            },
            (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) if m.data.len() >= TIMESPEC => {
                // Seconds beyond what u64 nanoseconds hold (year 2554) are not a kernel's.
                let ns = match (long_at(m.data, 0), long_at(m.data, 1)) {
                    (Some(s), Some(ns)) if s >= 0 && (0..1_000_000_000).contains(&ns) => (s as u64)
                        .checked_mul(1_000_000_000)
                        .and_then(|t| t.checked_add(ns as u64)),
                    _ => None,
                };
                match ns {
                    Some(ns) => meta.timestamp_ns = Some(ns),
                    None => meta.control_malformed = true,
                }
            }
            (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) => meta.control_malformed = true,
            (libc::SOL_UDP, libc::UDP_GRO) => match m.data.get(..4) {
                Some(b) => {
                    let seg = i32::from_ne_bytes(b.try_into().unwrap_or_default());
                    match u16::try_from(seg) {
                        Ok(s) if s > 0 => meta.gro_segment = Some(s),
                        _ => meta.control_malformed = true,
                    }
                }
                None => meta.control_malformed = true,
            },
            _ => {}
        }
    }
    meta.control_malformed |= it.malformed();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> RecvMeta {
        RecvMeta::default()
    }

    fn record(level: i32, kind: i32, data: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; cmsg_space(data.len())];
        write_cmsg(&mut b, level, kind, data).unwrap();
        b
    }

    #[test]
    fn reads_drops_timestamp_and_gro() {
        let mut buf = record(libc::SOL_SOCKET, libc::SO_RXQ_OVFL, &7u32.to_ne_bytes());
        let mut ts = Vec::new();
        ts.extend_from_slice(&(3 as libc::c_long).to_ne_bytes());
        ts.extend_from_slice(&(5 as libc::c_long).to_ne_bytes());
        buf.extend(record(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, &ts));
        buf.extend(record(libc::SOL_UDP, libc::UDP_GRO, &1472i32.to_ne_bytes()));
        let mut m = meta();
        parse_control(&buf, &mut m);
        assert_eq!(m.kernel_drops, Some(7));
        assert_eq!(m.timestamp_ns, Some(3_000_000_005));
        assert_eq!(m.gro_segment, Some(1472));
        assert!(!m.control_malformed);
    }

    /// The defect of the pointer-based parser: a record announcing a longer length than the
    /// buffer holds, or a payload shorter than its type, was read past its end.
    #[test]
    fn truncated_and_short_records_are_refused_not_read() {
        let full = record(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, &[0u8; TIMESPEC]);
        for cut in 0..full.len() {
            let mut m = meta();
            parse_control(&full[..cut], &mut m);
            assert_eq!(m.timestamp_ns, None, "cut at {cut}");
        }
        // A timestamp record with a 2-byte payload.
        let short = record(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, &[1, 2]);
        let mut m = meta();
        parse_control(&short, &mut m);
        assert_eq!(m.timestamp_ns, None);
        assert!(m.control_malformed);
        // A drop counter record whose cmsg_len says 1 data byte.
        let mut drops = record(libc::SOL_SOCKET, libc::SO_RXQ_OVFL, &9u32.to_ne_bytes());
        drops[..size_of::<usize>()].copy_from_slice(&cmsg_len(1).to_ne_bytes());
        let mut m = meta();
        parse_control(&drops, &mut m);
        assert_eq!(m.kernel_drops, None);
        assert!(m.control_malformed);
        // cmsg_len larger than the buffer.
        let mut big = record(libc::SOL_SOCKET, libc::SO_RXQ_OVFL, &9u32.to_ne_bytes());
        big[..size_of::<usize>()].copy_from_slice(&1000usize.to_ne_bytes());
        let mut m = meta();
        parse_control(&big, &mut m);
        assert_eq!(m.kernel_drops, None);
        assert!(m.control_malformed);
    }

    /// Found by the `cmsg` fuzz target: seconds whose nanoseconds overflow a u64 panicked
    /// (overflow checks) or wrapped.
    #[test]
    fn a_timestamp_beyond_u64_nanoseconds_is_malformed_not_a_panic() {
        let mut ts = Vec::new();
        ts.extend_from_slice(&(libc::c_long::MAX).to_ne_bytes());
        ts.extend_from_slice(&(5 as libc::c_long).to_ne_bytes());
        let buf = record(libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, &ts);
        let mut m = meta();
        parse_control(&buf, &mut m);
        assert_eq!(m.timestamp_ns, None);
        assert!(m.control_malformed);
    }

    #[test]
    fn misaligned_buffers_parse_the_same() {
        let rec = record(libc::SOL_SOCKET, libc::SO_RXQ_OVFL, &42u32.to_ne_bytes());
        for shift in 0..8 {
            let mut buf = vec![0xeeu8; shift];
            buf.extend_from_slice(&rec);
            let mut m = meta();
            parse_control(&buf[shift..], &mut m);
            assert_eq!(m.kernel_drops, Some(42), "shift {shift}");
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let mut noise = crate::testing::Noise::new();
        for len in 0..crate::testing::sweep(300, 40) as usize {
            let buf = noise.bytes(len);
            let mut m = meta();
            parse_control(&buf, &mut m);
            let _ = ControlMessages::new(&buf).count();
        }
    }

    #[test]
    fn write_refuses_a_small_buffer() {
        assert_eq!(write_cmsg(&mut [0u8; 8], 1, 2, &[0; 4]), None);
    }
}
