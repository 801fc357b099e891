//! eBPF through the `bpf()` system call, for AF_XDP: the XSK map, the XDP program that steers
//! one UDP destination into it (a few instructions assembled here: no compiler, no object
//! file, nothing fetched at build time) and its attachment to an interface as a BPF link.
//!
//! A link detaches its program when its descriptor closes: on drop, on a panic that unwinds,
//! and when the process dies, so that no program is ever left on an interface.
//!
//! ```no_run
//! use fsdr_net_io::sys::ebpf::{UdpMatch, XdpLink, XdpProgram, XskMap, XdpAttach};
//! # fn f(ifindex: u32, xsk: std::os::fd::BorrowedFd<'_>) -> std::io::Result<()> {
//! let map = XskMap::create(1)?;
//! map.set(0, xsk)?;
//! let m = UdpMatch { port: 49152, v4: true, ..UdpMatch::default() };
//! let prog = XdpProgram::load(&m, &map, true)?;
//! let _link = XdpLink::attach(&prog, ifindex, XdpAttach::Generic)?;
//! # Ok(()) }
//! ```

use std::io;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const BPF_F_XDP_HAS_FRAGS: u32 = 1 << 5;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
const XDP_PASS: i32 = 2;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;

/// Issues `bpf(cmd, attr)`; returns the descriptor or value it gives.
fn bpf(cmd: libc::c_long, attr: &mut [u8; 128]) -> io::Result<libc::c_long> {
    // SAFETY: `attr` is a zero-initialised `union bpf_attr` of 128 bytes (larger than every
    // command's part used here), passed with its size.
    // Checked by: `xdp_books_are_exact_under_faults` (ASan).
    let r = unsafe { libc::syscall(libc::SYS_bpf, cmd, attr.as_mut_ptr(), attr.len()) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn put32(attr: &mut [u8; 128], at: usize, v: u32) {
    attr[at..at + 4].copy_from_slice(&v.to_ne_bytes());
}

fn put64(attr: &mut [u8; 128], at: usize, v: u64) {
    attr[at..at + 8].copy_from_slice(&v.to_ne_bytes());
}

fn owned(r: libc::c_long) -> OwnedFd {
    // SAFETY: `bpf` returned a new descriptor that nothing else owns.
    // Checked by: `xdp_books_are_exact_under_faults` (ASan).
    unsafe { OwnedFd::from_raw_fd(r as i32) }
}

/// A `BPF_MAP_TYPE_XSKMAP`: receive queue index → AF_XDP socket.
#[derive(Debug)]
pub struct XskMap(OwnedFd);

impl XskMap {
    /// A map with `entries` queues.
    pub fn create(entries: u32) -> io::Result<XskMap> {
        let mut a = [0u8; 128];
        put32(&mut a, 0, BPF_MAP_TYPE_XSKMAP);
        put32(&mut a, 4, 4);
        put32(&mut a, 8, 4);
        put32(&mut a, 12, entries.max(1));
        a[28..36].copy_from_slice(b"fsdr_xsk");
        bpf(BPF_MAP_CREATE, &mut a).map(|r| XskMap(owned(r)))
    }

    /// Frames of receive queue `queue` go to socket `xsk`.
    pub fn set(&self, queue: u32, xsk: &super::xsk::XskSocket) -> io::Result<()> {
        let key = queue;
        let value = xsk.fd().as_raw_fd() as u32;
        let mut a = [0u8; 128];
        put32(&mut a, 0, self.0.as_raw_fd() as u32);
        put64(&mut a, 8, &key as *const u32 as u64);
        put64(&mut a, 16, &value as *const u32 as u64);
        bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(drop)
    }
}

/// Which UDP datagrams the program steers to the sockets: destination port, and address when
/// set (the bound address, or the multicast group). IPv4 without options and IPv6 without
/// extension headers, untagged or with one VLAN tag; IP fragments and everything else pass to
/// the kernel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UdpMatch {
    /// Destination port.
    pub port: u16,
    /// Match IPv4.
    pub v4: bool,
    /// Match IPv6.
    pub v6: bool,
    /// IPv4 destination, if only one.
    pub v4_addr: Option<Ipv4Addr>,
    /// IPv6 destination, if only one.
    pub v6_addr: Option<Ipv6Addr>,
}

/// One eBPF instruction.
#[derive(Debug, Clone, Copy)]
struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

impl Insn {
    fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
        Insn {
            code,
            regs: (src << 4) | (dst & 0xf),
            off,
            imm,
        }
    }
    fn bytes(self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[0] = self.code;
        b[1] = self.regs;
        b[2..4].copy_from_slice(&self.off.to_ne_bytes());
        b[4..8].copy_from_slice(&self.imm.to_ne_bytes());
        b
    }
}

/// A tiny assembler: instructions, and jumps to the two exits patched at the end.
struct Asm {
    code: Vec<Insn>,
    to_pass: Vec<usize>,
    to_redirect: Vec<usize>,
}

/// The value a load of these packet bytes gives in a register (loads are host order).
fn raw16(be: u16) -> i32 {
    i32::from(u16::from_ne_bytes(be.to_be_bytes()))
}

fn raw32(bytes: [u8; 4]) -> i32 {
    i32::from_ne_bytes(bytes)
}

// Registers: r1 ctx / helper args, r2 packet start, r3 packet end, r4 bound, r5 scratch,
// r7 receive queue index.
impl Asm {
    fn op(&mut self, i: Insn) {
        self.code.push(i);
    }
    /// r5 = packet bytes at `off` of `size` (0x61 word, 0x69 half, 0x71 byte).
    fn load(&mut self, code: u8, off: i16) {
        self.op(Insn::new(code, 5, 2, off, 0));
    }
    /// Passes to the kernel unless `len` bytes of packet are there.
    fn need(&mut self, len: i32) {
        self.op(Insn::new(0xbf, 4, 2, 0, 0)); // r4 = r2
        self.op(Insn::new(0x07, 4, 0, 0, len)); // r4 += len
        self.to_pass.push(self.code.len());
        self.op(Insn::new(0x2d, 4, 3, 0, 0)); // if r4 > r3 goto pass
    }
    /// Passes unless r5 (32 bits) == imm.
    fn pass_unless(&mut self, imm: i32) {
        self.to_pass.push(self.code.len());
        self.op(Insn::new(0x56, 5, 0, 0, imm)); // if w5 != imm goto pass
    }
    fn redirect(&mut self) {
        self.to_redirect.push(self.code.len());
        self.op(Insn::new(0x05, 0, 0, 0, 0)); // goto redirect
    }
    /// An IPv4 header at `l3`.
    fn ipv4(&mut self, m: &UdpMatch, l3: i16) {
        self.need(i32::from(l3) + 28);
        self.load(0x71, l3);
        self.pass_unless(0x45); // version 4, no options
        self.load(0x71, l3 + 9);
        self.pass_unless(17); // UDP
        self.load(0x69, l3 + 6);
        self.op(Insn::new(0x54, 5, 0, 0, raw16(0x3fff))); // w5 &= MF | fragment offset
        self.pass_unless(0); // not a fragment
        if let Some(a) = m.v4_addr {
            self.load(0x61, l3 + 16);
            self.pass_unless(raw32(a.octets()));
        }
        self.load(0x69, l3 + 22);
        self.pass_unless(raw16(m.port));
        self.redirect();
    }
    /// An IPv6 header at `l3`.
    fn ipv6(&mut self, m: &UdpMatch, l3: i16) {
        self.need(i32::from(l3) + 48);
        self.load(0x71, l3 + 6);
        self.pass_unless(17); // next header UDP (extension headers and fragments pass)
        if let Some(a) = m.v6_addr {
            let o = a.octets();
            for k in 0..4 {
                self.load(0x61, l3 + 24 + 4 * k as i16);
                self.pass_unless(raw32([o[4 * k], o[4 * k + 1], o[4 * k + 2], o[4 * k + 3]]));
            }
        }
        self.load(0x69, l3 + 42);
        self.pass_unless(raw16(m.port));
        self.redirect();
    }
    /// After the Ethernet type at `at` was loaded into r5: the IP versions matched.
    fn dispatch(&mut self, m: &UdpMatch, l3: i16) {
        // if w5 == type goto +N: emitted as "skip the next jump unless equal".
        for (wanted, ty) in [(m.v4, 0x0800u16), (m.v6, 0x86dd)] {
            if !wanted {
                continue;
            }
            // if w5 != ty goto over; <case>; over:
            let jump = self.code.len();
            self.op(Insn::new(0x56, 5, 0, 0, raw16(ty)));
            if ty == 0x0800 {
                self.ipv4(m, l3);
            } else {
                self.ipv6(m, l3);
            }
            let over = self.code.len();
            self.code[jump].off = (over - jump - 1) as i16;
            // The case ended in its own jumps; r5 must be reloaded for the next test.
            self.load(0x69, l3 - 2);
        }
    }
}

/// The program: see [`UdpMatch`]. Frames for the match go to the socket of their receive
/// queue (`bpf_redirect_map` on the XSK map; no socket on that queue: passed to the kernel).
fn assemble(m: &UdpMatch, map: &XskMap) -> Vec<u8> {
    let mut a = Asm {
        code: Vec::new(),
        to_pass: Vec::new(),
        to_redirect: Vec::new(),
    };
    a.op(Insn::new(0x61, 2, 1, 0, 0)); // r2 = ctx->data
    a.op(Insn::new(0x61, 3, 1, 4, 0)); // r3 = ctx->data_end
    a.op(Insn::new(0x61, 7, 1, 16, 0)); // r7 = ctx->rx_queue_index
    a.need(14);
    a.load(0x69, 12);
    a.dispatch(m, 14);
    // One VLAN tag (802.1Q or 802.1ad).
    a.load(0x69, 12);
    let q = a.code.len();
    a.op(Insn::new(0x16, 5, 0, 0, raw16(0x8100))); // if w5 == 802.1Q goto tagged
    a.to_pass.push(a.code.len());
    a.op(Insn::new(0x56, 5, 0, 0, raw16(0x88a8))); // if w5 != 802.1ad goto pass
    let tagged = a.code.len();
    a.code[q].off = (tagged - q - 1) as i16;
    a.need(18);
    a.load(0x69, 16);
    a.dispatch(m, 18);
    a.to_pass.push(a.code.len());
    a.op(Insn::new(0x05, 0, 0, 0, 0)); // goto pass
    // redirect: bpf_redirect_map(map, queue, XDP_PASS)
    let redirect = a.code.len();
    a.op(Insn::new(0x18, 1, 1, 0, map.0.as_raw_fd())); // r1 = map (pseudo map fd)
    a.op(Insn::new(0, 0, 0, 0, 0));
    a.op(Insn::new(0xbf, 2, 7, 0, 0)); // r2 = queue
    a.op(Insn::new(0xb7, 3, 0, 0, XDP_PASS)); // r3 = XDP_PASS when no socket
    a.op(Insn::new(0x85, 0, 0, 0, BPF_FUNC_REDIRECT_MAP));
    a.op(Insn::new(0x95, 0, 0, 0, 0));
    // pass: return XDP_PASS
    let pass = a.code.len();
    a.op(Insn::new(0xb7, 0, 0, 0, XDP_PASS));
    a.op(Insn::new(0x95, 0, 0, 0, 0));
    for &j in &a.to_pass {
        a.code[j].off = (pass - j - 1) as i16;
    }
    for &j in &a.to_redirect {
        a.code[j].off = (redirect - j - 1) as i16;
    }
    a.code.iter().flat_map(|i| i.bytes()).collect()
}

/// A loaded XDP program.
#[derive(Debug)]
pub struct XdpProgram(OwnedFd);

impl XdpProgram {
    /// Assembles and loads the program for `m` over `map`; `frags`: declared able to handle
    /// multi-buffer frames (`xdp.frags`, needed for frames larger than a page in native
    /// mode). The verifier's log is in the error.
    pub fn load(m: &UdpMatch, map: &XskMap, frags: bool) -> io::Result<XdpProgram> {
        let code = assemble(m, map);
        let license = c"Dual MIT/GPL";
        let mut log = vec![0u8; 64 * 1024];
        let mut a = [0u8; 128];
        put32(&mut a, 0, BPF_PROG_TYPE_XDP);
        put32(&mut a, 4, (code.len() / 8) as u32);
        put64(&mut a, 8, code.as_ptr() as u64);
        put64(&mut a, 16, license.as_ptr() as u64);
        put32(&mut a, 24, 1);
        put32(&mut a, 28, log.len() as u32);
        put64(&mut a, 32, log.as_mut_ptr() as u64);
        put32(&mut a, 44, if frags { BPF_F_XDP_HAS_FRAGS } else { 0 });
        a[48..57].copy_from_slice(b"fsdr_xdp\0");
        put32(&mut a, 68, BPF_XDP);
        match bpf(BPF_PROG_LOAD, &mut a) {
            Ok(r) => Ok(XdpProgram(owned(r))),
            Err(e) => {
                let end = log.iter().position(|&b| b == 0).unwrap_or(0);
                let text = String::from_utf8_lossy(&log[..end]);
                let last: Vec<&str> = text.lines().rev().take(3).collect();
                Err(io::Error::new(
                    e.kind(),
                    format!(
                        "loading the XDP program: {e}; verifier: {}",
                        last.join(" | ")
                    ),
                ))
            }
        }
    }
}

/// Where an XDP program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpAttach {
    /// In the driver (`XDP_FLAGS_DRV_MODE`).
    Native,
    /// In the kernel's generic path, after the socket buffer is made (`XDP_FLAGS_SKB_MODE`).
    Generic,
}

/// A program attached to an interface as a BPF link: detached when dropped (or when the
/// process ends).
#[derive(Debug)]
pub struct XdpLink(OwnedFd);

impl XdpLink {
    /// Attaches `prog` to interface `ifindex`. `EBUSY`: another program is attached there.
    pub fn attach(prog: &XdpProgram, ifindex: u32, mode: XdpAttach) -> io::Result<XdpLink> {
        let mut a = [0u8; 128];
        put32(&mut a, 0, prog.0.as_raw_fd() as u32);
        put32(&mut a, 4, ifindex);
        put32(&mut a, 8, BPF_XDP);
        put32(
            &mut a,
            12,
            match mode {
                XdpAttach::Native => XDP_FLAGS_DRV_MODE,
                XdpAttach::Generic => XDP_FLAGS_SKB_MODE,
            },
        );
        bpf(BPF_LINK_CREATE, &mut a).map(|r| XdpLink(owned(r)))
    }
}

impl AsFd for XdpLink {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_encode_registers_and_offsets_as_the_kernel_reads_them() {
        let i = Insn::new(0x61, 2, 1, 4, 0).bytes();
        assert_eq!(i[0], 0x61);
        assert_eq!(i[1], 0x12, "src in the high nibble, dst in the low one");
        assert_eq!(i16::from_ne_bytes([i[2], i[3]]), 4);
        // A port reads back as the bytes on the wire.
        assert_eq!((raw16(49152) as u16).to_ne_bytes(), 49152u16.to_be_bytes());
    }
}
