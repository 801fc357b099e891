//! Instruments shared by the review tests (the only `unsafe` here is the instrument itself,
//! never a call of the library under test).
//!
//! * `Quarantine`, the global allocator: every freed block is filled with `POISON` and never
//!   reused; every block has a 64-byte red zone behind it (pattern `REDZONE`) checked when it
//!   is freed and by `scan()`. `scan()` then reports every freed block whose poison was
//!   overwritten (a write after free, the kernel's included) and every red zone touched.
//! * `munmap`: a replacement for libc's. A writable private-anonymous or memfd/shm mapping
//!   that is unmapped is instead filled with `POISON`, kept mapped and recorded; `scan()`
//!   checks those too. Other mappings (io_uring and AF_XDP rings, files) are unmapped for real.
#![allow(dead_code, unsafe_code)]

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

pub const POISON: u8 = 0xA5;
pub const REDZONE: u8 = 0xFD;
const RZ: usize = 64;
const MAX_BLOCKS: usize = 1 << 23;
/// Keep at most this many bytes in quarantine; later frees are really freed (counted).
const MAX_QUARANTINE: usize = 6 << 30;

static Q_PTR: [AtomicUsize; MAX_BLOCKS] = [const { AtomicUsize::new(0) }; MAX_BLOCKS];
static Q_LEN: [AtomicUsize; MAX_BLOCKS] = [const { AtomicUsize::new(0) }; MAX_BLOCKS];
static Q_N: AtomicUsize = AtomicUsize::new(0);
static Q_BYTES: AtomicUsize = AtomicUsize::new(0);
static Q_OVER: AtomicUsize = AtomicUsize::new(0);
static RZ_HITS_AT_FREE: AtomicUsize = AtomicUsize::new(0);
static RZ_FIRST: AtomicUsize = AtomicUsize::new(0);
static FROZEN: AtomicBool = AtomicBool::new(false);

// Live blocks, for the red-zone scan of blocks still allocated (only sizes >= 4096).
const MAX_LIVE: usize = 1 << 16;
static L_PTR: [AtomicUsize; MAX_LIVE] = [const { AtomicUsize::new(0) }; MAX_LIVE];
static L_LEN: [AtomicUsize; MAX_LIVE] = [const { AtomicUsize::new(0) }; MAX_LIVE];

// Unmapped ranges kept.
const MAX_MAPS: usize = 1 << 14;
static M_PTR: [AtomicUsize; MAX_MAPS] = [const { AtomicUsize::new(0) }; MAX_MAPS];
static M_LEN: [AtomicUsize; MAX_MAPS] = [const { AtomicUsize::new(0) }; MAX_MAPS];
static M_N: AtomicUsize = AtomicUsize::new(0);
static M_REAL: AtomicUsize = AtomicUsize::new(0);

pub struct Quarantine;

unsafe impl GlobalAlloc for Quarantine {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        unsafe {
            let size = layout.size() + RZ;
            let align = layout.align().max(16);
            let mut p: *mut libc::c_void = std::ptr::null_mut();
            if libc::posix_memalign(&mut p, align, size) != 0 {
                return std::ptr::null_mut();
            }
            let p = p as *mut u8;
            std::ptr::write_bytes(p.add(layout.size()), REDZONE, RZ);
            if layout.size() >= 4096 {
                let h = (p as usize >> 12) % MAX_LIVE;
                for k in 0..64 {
                    let i = (h + k) % MAX_LIVE;
                    if L_PTR[i]
                        .compare_exchange(0, p as usize, Ordering::AcqRel, Ordering::Relaxed)
                        .is_ok()
                    {
                        L_LEN[i].store(layout.size(), Ordering::Release);
                        break;
                    }
                }
            }
            p
        }
    }
    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        unsafe {
            let n = layout.size();
            if layout.size() >= 4096 {
                let h = (p as usize >> 12) % MAX_LIVE;
                for k in 0..64 {
                    let i = (h + k) % MAX_LIVE;
                    if L_PTR[i].load(Ordering::Acquire) == p as usize {
                        L_PTR[i].store(0, Ordering::Release);
                        break;
                    }
                }
            }
            let rz = std::slice::from_raw_parts(p.add(n), RZ);
            if rz.iter().any(|&b| b != REDZONE) {
                RZ_HITS_AT_FREE.fetch_add(1, Ordering::Relaxed);
                let _ = RZ_FIRST.compare_exchange(0, n, Ordering::Relaxed, Ordering::Relaxed);
            }
            if FROZEN.load(Ordering::Relaxed)
                || Q_BYTES.load(Ordering::Relaxed) + n > MAX_QUARANTINE
            {
                Q_OVER.fetch_add(1, Ordering::Relaxed);
                libc::free(p as *mut libc::c_void);
                return;
            }
            std::ptr::write_bytes(p, POISON, n);
            let i = Q_N.fetch_add(1, Ordering::AcqRel);
            if i < MAX_BLOCKS {
                Q_LEN[i].store(n, Ordering::Release);
                Q_PTR[i].store(p as usize, Ordering::Release);
                Q_BYTES.fetch_add(n + RZ, Ordering::Relaxed);
            } // else: leaked, poisoned, untracked
        }
    }
}

#[global_allocator]
static GLOBAL: Quarantine = Quarantine;

fn raw_read_maps(buf: &mut [u8]) -> usize {
    unsafe {
        let fd = libc::open(
            c"/proc/self/maps".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return 0;
        }
        let mut n = 0;
        loop {
            let r = libc::read(fd, buf.as_mut_ptr().add(n) as *mut _, buf.len() - n);
            if r <= 0 {
                break;
            }
            n += r as usize;
            if n == buf.len() {
                break;
            }
        }
        libc::close(fd);
        n
    }
}

fn hex(s: &[u8]) -> usize {
    let mut v = 0usize;
    for &c in s {
        let d = match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => break,
        };
        v = v * 16 + d as usize;
    }
    v
}

static MAPS_LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
static mut MAPS_BUF: [u8; 1 << 20] = [0; 1 << 20];

/// Whether [addr, addr+len) lies inside one writable anonymous / memfd / shm mapping.
fn keepable(addr: usize, len: usize) -> bool {
    let _g = MAPS_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    #[allow(static_mut_refs)]
    let buf = unsafe { &mut MAPS_BUF };
    let n = raw_read_maps(buf);
    for line in buf[..n].split(|&c| c == b'\n') {
        let dash = match line.iter().position(|&c| c == b'-') {
            Some(d) => d,
            None => continue,
        };
        let start = hex(&line[..dash]);
        let sp = match line.iter().position(|&c| c == b' ') {
            Some(s) => s,
            None => continue,
        };
        let end = hex(&line[dash + 1..sp]);
        if addr >= start && addr < end {
            if addr + len > end {
                return false;
            }
            let perms = &line[sp + 1..sp + 5];
            if perms[0] != b'r' || perms[1] != b'w' {
                return false;
            }
            // path: after 5 whitespace-separated fields
            let mut fields = 0;
            let mut i = 0;
            let mut in_ws = false;
            while i < line.len() {
                if line[i] == b' ' {
                    if !in_ws {
                        fields += 1;
                        in_ws = true;
                    }
                } else if in_ws {
                    in_ws = false;
                    if fields == 5 {
                        break;
                    }
                }
                i += 1;
            }
            let path = if fields >= 5 {
                &line[i..]
            } else {
                &line[line.len()..]
            };
            if path.is_empty() {
                return true;
            }
            let w = |p: &[u8]| path.windows(p.len()).any(|x| x == p);
            return w(b"/memfd:") || w(b"/dev/shm") || (w(b"(deleted)") && !w(b"anon_inode"));
        }
    }
    false
}

#[unsafe(no_mangle)]
pub unsafe extern "C" fn munmap(addr: *mut libc::c_void, len: libc::size_t) -> libc::c_int {
    let a = addr as usize;
    if len > 0 && keepable(a, len) {
        let i = M_N.fetch_add(1, Ordering::AcqRel);
        if i < MAX_MAPS {
            unsafe { std::ptr::write_bytes(addr as *mut u8, POISON, len) };
            M_LEN[i].store(len, Ordering::Release);
            M_PTR[i].store(a, Ordering::Release);
            return 0;
        }
    }
    M_REAL.fetch_add(1, Ordering::Relaxed);
    unsafe { libc::syscall(libc::SYS_munmap, addr, len) as libc::c_int }
}

#[derive(Debug, Default, Clone)]
pub struct Report {
    /// Freed heap blocks tracked / bytes.
    pub freed_blocks: usize,
    pub freed_bytes: usize,
    /// Freed heap blocks whose poison was overwritten, and the bytes overwritten.
    pub dirty_blocks: usize,
    pub dirty_bytes: usize,
    /// (block size, first offset, 16 bytes there) of up to 8 dirty blocks.
    pub samples: Vec<(usize, usize, Vec<u8>)>,
    /// Red zones found touched when freed / in live blocks now.
    pub redzone_at_free: usize,
    pub redzone_live: usize,
    /// Unmapped ranges kept / dirty; unmaps done for real.
    pub kept_maps: usize,
    pub dirty_maps: usize,
    pub dirty_map_bytes: usize,
    pub real_unmaps: usize,
    pub over_quota: usize,
}

impl Report {
    pub fn clean(&self) -> bool {
        self.dirty_blocks == 0
            && self.redzone_at_free == 0
            && self.redzone_live == 0
            && self.dirty_maps == 0
    }
}

/// Checks every quarantined block and kept mapping.
pub fn scan() -> Report {
    let mut r = Report::default();
    let n = Q_N.load(Ordering::Acquire).min(MAX_BLOCKS);
    for i in 0..n {
        let p = Q_PTR[i].load(Ordering::Acquire);
        if p == 0 {
            continue;
        }
        let len = Q_LEN[i].load(Ordering::Acquire);
        r.freed_blocks += 1;
        r.freed_bytes += len;
        let s = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
        let bad = count_not(s, POISON);
        if bad.0 > 0 {
            r.dirty_blocks += 1;
            r.dirty_bytes += bad.0;
            if r.samples.len() < 8 {
                let o = bad.1;
                r.samples.push((len, o, s[o..(o + 16).min(len)].to_vec()));
            }
        }
    }
    for i in 0..MAX_LIVE {
        let p = L_PTR[i].load(Ordering::Acquire);
        if p == 0 {
            continue;
        }
        let len = L_LEN[i].load(Ordering::Acquire);
        let rz = unsafe { std::slice::from_raw_parts((p + len) as *const u8, RZ) };
        if rz.iter().any(|&b| b != REDZONE) {
            r.redzone_live += 1;
        }
    }
    r.redzone_at_free = RZ_HITS_AT_FREE.load(Ordering::Relaxed);
    let m = M_N.load(Ordering::Acquire).min(MAX_MAPS);
    for i in 0..m {
        let p = M_PTR[i].load(Ordering::Acquire);
        if p == 0 {
            continue;
        }
        let len = M_LEN[i].load(Ordering::Acquire);
        r.kept_maps += 1;
        let s = unsafe { std::slice::from_raw_parts(p as *const u8, len) };
        let bad = count_not(s, POISON);
        if bad.0 > 0 {
            r.dirty_maps += 1;
            r.dirty_map_bytes += bad.0;
            if r.samples.len() < 8 {
                let o = bad.1;
                r.samples.push((len, o, s[o..(o + 16).min(len)].to_vec()));
            }
        }
    }
    r.real_unmaps = M_REAL.load(Ordering::Relaxed);
    r.over_quota = Q_OVER.load(Ordering::Relaxed);
    r
}

fn count_not(s: &[u8], v: u8) -> (usize, usize) {
    let mut n = 0;
    let mut first = usize::MAX;
    // fast path on u64 words
    let (pre, mid, post) = unsafe { s.align_to::<u64>() };
    let w = u64::from_ne_bytes([v; 8]);
    let mut off = 0;
    for (i, &b) in pre.iter().enumerate() {
        if b != v {
            n += 1;
            first = first.min(i);
        }
    }
    off += pre.len();
    for (k, &x) in mid.iter().enumerate() {
        if x != w {
            for j in 0..8 {
                if s[off + k * 8 + j] != v {
                    n += 1;
                    first = first.min(off + k * 8 + j);
                }
            }
        }
    }
    off += mid.len() * 8;
    for (i, &b) in post.iter().enumerate() {
        if b != v {
            n += 1;
            first = first.min(off + i);
        }
    }
    (n, if first == usize::MAX { 0 } else { first })
}

/// Prints and returns the scan; `what` names the test.
pub fn report(what: &str) -> Report {
    let r = scan();
    eprintln!(
        "[{what}] freed blocks {} ({} MB), dirty after free: {} blocks / {} bytes; red zones touched: {} at free, {} live; \
         unmaps kept {} (dirty {}, {} bytes), real {}; over quota {}; lent::kept {}",
        r.freed_blocks,
        r.freed_bytes >> 20,
        r.dirty_blocks,
        r.dirty_bytes,
        r.redzone_at_free,
        r.redzone_live,
        r.kept_maps,
        r.dirty_maps,
        r.dirty_map_bytes,
        r.real_unmaps,
        r.over_quota,
        fsdr_net_io::lent::kept()
    );
    for s in &r.samples {
        eprintln!(
            "[{what}]   dirty block of {} bytes at +{}: {:02x?}",
            s.0, s.1, s.2
        );
    }
    r
}

// ---------- traffic helpers ----------

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Sends Seq64 datagrams (seq from 1, payload bytes = low byte of (seq*7 + i)) to `to`
/// until `stop`; returns the count. `size` is the whole datagram.
pub fn seq64_flood(to: SocketAddr, size: usize, stop: Arc<AtomicBool>) -> JoinHandle<u64> {
    std::thread::spawn(move || {
        let s = UdpSocket::bind(if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }).unwrap();
        s.connect(to).unwrap();
        let mut seq = 1u64;
        let mut buf = vec![0u8; size];
        while !stop.load(Ordering::Relaxed) {
            buf[..8].copy_from_slice(&seq.to_le_bytes());
            for (i, b) in buf[8..].iter_mut().enumerate() {
                *b = (seq.wrapping_mul(7) as usize + i) as u8;
            }
            let _ = s.send(&buf);
            seq += 1;
            if seq.is_multiple_of(64) {
                std::thread::yield_now();
            }
        }
        seq - 1
    })
}

pub fn freeze() {
    FROZEN.store(true, Ordering::Relaxed);
}

/// As `seq64_flood`, with faults: every 13th sequence number skipped (a gap), every 17th
/// pair swapped (a reorder), every 29th sent twice (a duplicate), and every 31st datagram
/// 200 bytes shorter (a length the in-place path does not expect).
pub fn seq64_flood_faulty(to: SocketAddr, size: usize, stop: Arc<AtomicBool>) -> JoinHandle<u64> {
    std::thread::spawn(move || {
        let s = UdpSocket::bind(if to.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }).unwrap();
        s.connect(to).unwrap();
        let mk = |seq: u64| {
            let len = if seq.is_multiple_of(31) {
                size - 200
            } else {
                size
            };
            let mut buf = vec![0u8; len];
            buf[..8].copy_from_slice(&seq.to_le_bytes());
            for (i, b) in buf[8..].iter_mut().enumerate() {
                *b = (seq.wrapping_mul(7) as usize + i) as u8;
            }
            buf
        };
        let mut seq = 1u64;
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            if seq.is_multiple_of(13) {
                seq += 1;
                continue;
            }
            if seq.is_multiple_of(17) {
                let _ = s.send(&mk(seq + 1));
                let _ = s.send(&mk(seq));
                seq += 2;
            } else {
                let _ = s.send(&mk(seq));
                if seq.is_multiple_of(29) {
                    let _ = s.send(&mk(seq));
                }
                seq += 1;
            }
            n += 1;
            if n % 64 == 0 {
                std::thread::yield_now();
            }
        }
        seq
    })
}
