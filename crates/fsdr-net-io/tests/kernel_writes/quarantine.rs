//! The instrument that sees a write into memory after it was released, the kernel's included
//! (AddressSanitizer does not see a write the kernel makes, and Miri runs no system call).
//!
//! A test binary that installs [`Quarantine`] as its global allocator and links this module
//! gets two things:
//!
//! - **Heap**: every freed block of 16 bytes or more is filled with [`POISON`] and kept, never
//!   handed back to the system allocator, so nothing else ever lives there. A byte that is no
//!   longer [`POISON`] later was written after the block was freed: [`writes_since`] finds
//!   it. A receive the kernel completes into a buffer freed under it (a slot, an overflow
//!   buffer, the `msghdr` and source address of an io_uring operation) shows here.
//! - **Mappings**: `munmap` is replaced (this binary's definition wins over the C library's
//!   for every caller linked into it): the range is replaced by a fresh inaccessible
//!   reservation instead of being returned, so no later mapping lands there. A write into it
//!   from user space faults (the test dies with SIGSEGV); a copy the kernel makes into it
//!   fails with `EFAULT`, which the receivers log ("Bad address"); [`guarded`] counts them.
//!
//! The table of kept blocks lives in its own mapping (up to [`CAPACITY`] blocks); frees beyond
//! it are returned normally and counted in [`untracked`].

#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// What a kept block is filled with.
pub const POISON: u8 = 0xD5;
/// Blocks the table holds at most.
pub const CAPACITY: usize = 1 << 24;
/// Smaller blocks are freed normally (no lent memory is that small: an `iovec` is 16 bytes).
pub const MIN_BLOCK: usize = 16;

/// One kept block: `ptr` is stored last (release), so a reader that sees it sees `len`.
struct Entry {
    len: AtomicUsize,
    ptr: AtomicUsize,
}

static TABLE: AtomicPtr<Entry> = AtomicPtr::new(std::ptr::null_mut());
static NEXT: AtomicUsize = AtomicUsize::new(0);
static UNTRACKED: AtomicUsize = AtomicUsize::new(0);
static GUARDED: AtomicUsize = AtomicUsize::new(0);
static GUARDED_BYTES: AtomicUsize = AtomicUsize::new(0);

fn table() -> *mut Entry {
    let t = TABLE.load(Ordering::Acquire);
    if !t.is_null() {
        return t;
    }
    let bytes = CAPACITY * std::mem::size_of::<Entry>();
    // SAFETY: a fresh anonymous mapping (zero-filled: every entry's `ptr` reads 0, empty);
    // made with the raw system call so that it never goes through this module's `munmap`.
    // Checked by: `the_instrument_sees_a_write_after_free`.
    let m = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            bytes,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    assert_ne!(m, libc::MAP_FAILED, "quarantine table");
    match TABLE.compare_exchange(
        std::ptr::null_mut(),
        m.cast(),
        Ordering::AcqRel,
        Ordering::Acquire,
    ) {
        Ok(_) => m.cast(),
        Err(other) => {
            // SAFETY: our own mapping, never published.
            // Checked by: `the_instrument_sees_a_write_after_free`.
            unsafe { libc::syscall(libc::SYS_munmap, m, bytes) };
            other
        }
    }
}

/// The global allocator of a test binary that checks for writes after release.
pub struct Quarantine;

// SAFETY: allocation is the system allocator's; a freed block is either returned to it
// unchanged (small, or the table full) or kept for good (never returned, so never reused).
// Checked by: `the_instrument_sees_a_write_after_free`.
unsafe impl GlobalAlloc for Quarantine {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        // Checked by: `the_instrument_sees_a_write_after_free`.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        // Checked by: `the_instrument_sees_a_write_after_free`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let len = layout.size();
        if len < MIN_BLOCK {
            // SAFETY: the caller's block, returned as it came.
            // Checked by: `the_instrument_sees_a_write_after_free`.
            return unsafe { System.dealloc(ptr, layout) };
        }
        let i = NEXT.fetch_add(1, Ordering::Relaxed);
        if i >= CAPACITY {
            UNTRACKED.fetch_add(1, Ordering::Relaxed);
            // SAFETY: as above.
            // Checked by: `the_instrument_sees_a_write_after_free`.
            return unsafe { System.dealloc(ptr, layout) };
        }
        // SAFETY: the block is ours from now on (the caller gave it up): `len` bytes.
        // Checked by: `the_instrument_sees_a_write_after_free`.
        unsafe { std::ptr::write_bytes(ptr, POISON, len) };
        // SAFETY: `i < CAPACITY`, inside the table's mapping.
        // Checked by: `the_instrument_sees_a_write_after_free`.
        let e = unsafe { &*table().add(i) };
        e.len.store(len, Ordering::Relaxed);
        e.ptr.store(ptr as usize, Ordering::Release);
    }
}

/// Where the table stands: pass it to [`writes_since`] to look only at blocks freed later.
pub fn mark() -> usize {
    NEXT.load(Ordering::Acquire).min(CAPACITY)
}

/// A kept block that was written after it was freed.
#[derive(Debug, Clone)]
pub struct Written {
    /// The block's address.
    pub ptr: usize,
    /// Its size.
    pub len: usize,
    /// The first byte that is not poison, and how many are not.
    pub first: usize,
    pub bytes: usize,
    /// Up to 16 bytes from `first`.
    pub sample: Vec<u8>,
}

/// The blocks freed since `from` (a [`mark`]) that no longer hold only poison.
pub fn writes_since(from: usize) -> Vec<Written> {
    let t = table();
    let end = mark();
    let mut found = Vec::new();
    for i in from..end {
        // SAFETY: `i < CAPACITY`.
        // Checked by: `the_instrument_sees_a_write_after_free`.
        let e = unsafe { &*t.add(i) };
        let ptr = e.ptr.load(Ordering::Acquire);
        if ptr == 0 {
            continue; // being recorded right now
        }
        let len = e.len.load(Ordering::Relaxed);
        if untouched(ptr, len) {
            continue;
        }
        let (mut first, mut bytes) = (usize::MAX, 0);
        for k in 0..len {
            // SAFETY: a kept block, never returned: `len` bytes that nothing else owns. Read
            // volatile: what is looked for is a write this thread did not make.
            // Checked by: `the_instrument_sees_a_write_after_free`.
            let b = unsafe { std::ptr::read_volatile((ptr as *const u8).add(k)) };
            if b != POISON {
                first = first.min(k);
                bytes += 1;
            }
        }
        if bytes > 0 {
            let n = (len - first).min(16);
            // SAFETY: as above, `first + n <= len`.
            // Checked by: `the_instrument_sees_a_write_after_free`.
            let sample =
                unsafe { std::slice::from_raw_parts((ptr as *const u8).add(first), n) }.to_vec();
            found.push(Written {
                ptr,
                len,
                first,
                bytes,
                sample,
            });
        }
    }
    found
}

/// Whether the kept block at `ptr` still holds only poison: a word at a time (blocks come
/// from the allocator 8-byte aligned), the tail byte by byte.
fn untouched(ptr: usize, len: usize) -> bool {
    let word = u64::from_ne_bytes([POISON; 8]);
    let words = if ptr.is_multiple_of(8) { len / 8 } else { 0 };
    for k in 0..words {
        // SAFETY: inside the kept block (k * 8 + 8 <= len), aligned; read volatile as above.
        // Checked by: `the_instrument_sees_a_write_after_free`.
        if unsafe { std::ptr::read_volatile((ptr as *const u64).add(k)) } != word {
            return false;
        }
    }
    (words * 8..len).all(|k| {
        // SAFETY: inside the kept block.
        // Checked by: `the_instrument_sees_a_write_after_free`.
        unsafe { std::ptr::read_volatile((ptr as *const u8).add(k)) == POISON }
    })
}

/// Frees returned normally because the table was full (not checked).
pub fn untracked() -> usize {
    UNTRACKED.load(Ordering::Relaxed)
}

/// Mappings replaced by an inaccessible reservation instead of being unmapped, and their bytes.
pub fn guarded() -> (usize, usize) {
    (
        GUARDED.load(Ordering::Relaxed),
        GUARDED_BYTES.load(Ordering::Relaxed),
    )
}

/// `munmap` for every caller linked into this binary: the range becomes an inaccessible
/// reservation (`PROT_NONE`, no memory behind it) that nothing else can be mapped into.
///
/// # Safety
///
/// As `munmap(2)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn munmap(addr: *mut libc::c_void, len: libc::size_t) -> libc::c_int {
    // SAFETY: MAP_FIXED over the caller's own range, which it gives up: the old pages go, a
    // reservation without access takes their place.
    // Checked by: `the_instrument_sees_a_write_after_free`.
    let m = unsafe {
        libc::mmap(
            addr,
            len,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    if m == libc::MAP_FAILED {
        // SAFETY: as munmap(2): the caller's range.
        // Checked by: `the_instrument_sees_a_write_after_free`.
        return unsafe { libc::syscall(libc::SYS_munmap, addr, len) as libc::c_int };
    }
    GUARDED.fetch_add(1, Ordering::Relaxed);
    GUARDED_BYTES.fetch_add(len, Ordering::Relaxed);
    0
}

/// Kernel copies into a guarded mapping fail with `EFAULT`; the receivers log that. A
/// `tracing` writer that keeps every line, to look for it.
#[derive(Clone, Default)]
pub struct LogLines(pub std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for LogLines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend_from_slice(buf);
        std::io::stderr().write(buf)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl LogLines {
    /// Installs it as the `tracing` subscriber (warnings and errors) of this binary; the
    /// first call wins.
    pub fn install() -> LogLines {
        static LINES: std::sync::OnceLock<LogLines> = std::sync::OnceLock::new();
        LINES
            .get_or_init(|| {
                let lines = LogLines::default();
                let writer = lines.clone();
                let _ = tracing_subscriber::fmt()
                    .with_max_level(tracing::Level::WARN)
                    .with_writer(move || writer.clone())
                    .try_init();
                lines
            })
            .clone()
    }

    /// Lines that name a failed copy into user memory.
    pub fn faults(&self) -> Vec<String> {
        let all = self.0.lock().unwrap_or_else(|e| e.into_inner());
        String::from_utf8_lossy(&all)
            .lines()
            .filter(|l| l.contains("Bad address") || l.contains("os error 14"))
            .map(str::to_string)
            .collect()
    }
}
