//! Zero copy into FutureSDR's default buffer: a [`UdpSource`](super::UdpSource) built with
//! [`zero_copy`](super::UdpSourceBuilder::zero_copy) lends consecutive windows of its output's
//! free space (the double-mapped circular buffer, whose free space is one contiguous range
//! that no reader sees until it is produced) to an in-place receive thread, which puts each
//! payload straight at its sample position, and produces each window once it comes back,
//! in order.
//!
//! A window handed over before it is full (the latency budget, a gap the stream goes on
//! behind) is split by the receiver: the part filled comes back, the stream goes on in the
//! rest, so every item stays where the receiver wrote it. Only a window that comes back
//! shorter than lent unsplit (the receiver's hand-over ring had no room for one more piece;
//! the end of the stream) leaves a hole in front of the windows lent after it: those are
//! moved down to the write position as they come back (counted in `copied_bytes`), and no
//! window is lent until all are back, so the next ones start at the write position again.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::ptr::NonNull;
use std::time::Instant;

use fsdr_net_io::depacketizer::DepacketizerStats;
use fsdr_net_io::depacketizer::{Depacketizer, GapEvent};
use fsdr_net_io::format::vrt::context::IfContext;
use fsdr_net_io::inplace::{Filled, InPlaceReceiver, ItemBuffer};
use fsdr_net_io::sample::Decoder;
use fsdr_net_io::sample::Item;
use fsdr_net_io::{Backend, EngineConfig, Overload, Stats, StatsHandle};
use futuresdr::runtime::dev::prelude::*;

use super::{Call, Feed, UdpSource, UdpSourceBuilder, post_found, tags_of};
use crate::Error;

/// A range of the output buffer's free space, lent to the receive thread.
pub(super) struct Window<T> {
    ptr: NonNull<T>,
    len: usize,
    /// Its first item's position in the stream of items produced.
    start: u64,
}

// SAFETY: a window is memory of the output buffer that only its holder touches: the lane
// lends disjoint ranges of the writer's free space, which readers do not see until they are
// produced, and touches a range only after its window came back.
// Checked by: `zero_copy_delivers_every_item_without_a_copy` and
// `zero_copy_is_exact_with_windows_handed_over_early_and_faults`.
unsafe impl<T: Item> Send for Window<T> {}

// SAFETY: `items` returns the same range every time: `ptr` and `len` are fixed when the
// window is made, and the circular buffer's double mapping stays in place for the writer's
// life, which outlasts the receiver (the source shuts it down in `deinit`, and its field
// comes before the writer's, so it is dropped, and its thread joined, first).
// Checked by: `zero_copy_delivers_every_item_without_a_copy` and
// `zero_copy_is_exact_with_windows_handed_over_early_and_faults`.
unsafe impl<T: Item> ItemBuffer<T> for Window<T> {
    fn items(&mut self) -> &mut [T] {
        // SAFETY: see the impl: `len` items from `ptr` are this window's, valid and
        // touched by no one else while it is lent.
        // Checked by: `zero_copy_delivers_every_item_without_a_copy` and
        // `zero_copy_is_exact_with_windows_handed_over_early_and_faults` (debug builds check
        // the raw slice's bounds; ASan runs fsdr-net-io's tests, not these).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    const IN_ORDER: bool = true;

    fn split_off(&mut self, at: usize) -> Option<Self> {
        if at == 0 || at >= self.len {
            return None;
        }
        // SAFETY: `at < len`: the rest starts inside this window, so it is not null.
        // Checked by: `zero_copy_delivers_every_item_without_a_copy` and
        // `zero_copy_is_exact_with_windows_handed_over_early_and_faults` (debug builds check
        // the raw slice's bounds; ASan runs fsdr-net-io's tests, not these).
        let ptr = unsafe { NonNull::new_unchecked(self.ptr.as_ptr().add(at)) };
        let rest = Window {
            ptr,
            len: self.len - at,
            start: self.start + at as u64,
        };
        self.len = at;
        Some(rest)
    }
}

/// What [`WindowLane::take`] leaves to the block: the messages of the windows produced.
#[derive(Default)]
pub(super) struct Produced {
    pub(super) gaps: Vec<GapEvent>,
    pub(super) contexts: Vec<IfContext>,
    /// Some window held items.
    pub(super) data: bool,
}

/// The in-place receiver of a zero-copy `UdpSource` and the windows it holds.
pub(super) struct WindowLane<T: Item> {
    /// The receiver (`None` once shut down).
    pub(super) rx: Option<InPlaceReceiver<T, Window<T>>>,
    handle: StatsHandle,
    window_items: usize,
    /// The most windows lent at once.
    windows: usize,
    /// Items produced so far: the write position.
    produced: u64,
    /// Where the next window starts.
    next: u64,
    /// Stream ranges lent and not back yet, in order (a window the receiver split comes
    /// back in pieces).
    out: VecDeque<(u64, u64)>,
    /// Windows back from the receiver, waiting for a range lent before them.
    back: Vec<Filled<Window<T>>>,
    /// A window was produced shorter than lent while later ones were out: those sit
    /// behind a hole and are moved down; no window is lent until all are back.
    skewed: bool,
    /// Bytes moved down behind a short window.
    moved_bytes: u64,
    /// A window came back (the datagrams' size is known, if it is to be).
    came_back: bool,
    /// Final counters, once shut down.
    final_stats: Option<(Stats, DepacketizerStats)>,
    backend: Backend,
    local_addr: SocketAddr,
}

impl<T: Item> WindowLane<T> {
    pub(super) fn new(
        rx: InPlaceReceiver<T, Window<T>>,
        backend: Backend,
        windows: usize,
        items: usize,
    ) -> Self {
        Self {
            backend,
            local_addr: rx.local_addr(),
            handle: rx.stats_handle(),
            rx: Some(rx),
            window_items: items,
            windows,
            produced: 0,
            next: 0,
            out: VecDeque::new(),
            back: Vec::new(),
            skewed: false,
            moved_bytes: 0,
            came_back: false,
            final_stats: None,
        }
    }

    /// The receiver's counters (final once shut down), with the bytes moved behind short
    /// windows in the stream's `copied_bytes`.
    pub(super) fn stats(&self) -> (Stats, DepacketizerStats) {
        let (engine, mut stream) = match (&self.final_stats, &self.rx) {
            (Some(s), _) => s.clone(),
            (None, Some(rx)) => (rx.stats(), rx.depacketizer_stats()),
            (None, None) => Default::default(),
        };
        stream.copied_bytes += self.moved_bytes;
        (engine, stream)
    }

    /// The backend it receives with.
    pub(super) fn backend(&self) -> Backend {
        self.backend
    }

    /// The bound address.
    pub(super) fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Fires when the receiver hands a window back (it must still run).
    pub(super) fn notified(&self) -> fsdr_net_io::Notified {
        let rx = self.rx.as_ref().expect("receiver present");
        rx.notifier().notified()
    }

    /// A handle on the receiver's counters.
    pub(super) fn stats_handle(&self) -> StatsHandle {
        self.handle.clone()
    }

    /// Lends windows of `output`'s free space, up to the most allowed, unless windows out
    /// sit behind a hole.
    pub(super) fn lend(&mut self, output: &mut DefaultCpuWriter<T>) {
        let Some(rx) = self.rx.as_mut() else { return };
        if self.out.is_empty() && self.back.is_empty() {
            self.next = self.produced;
            self.skewed = false;
        }
        if self.skewed {
            return;
        }
        // Windows end where datagrams end once their size is known, so that none straddles
        // two (windows lent before are as long as configured).
        let (size, d) = (
            self.window_items as u64,
            rx.datagram_items().unwrap_or(1) as u64,
        );
        // Until a window came back the datagrams' size may be unknown: lend one, so that
        // the rest are sized to them.
        let most = if self.came_back { self.windows } else { 1 };
        let free = output.slice();
        let base = free.as_mut_ptr();
        let room = free.len();
        while self.out.len() < most {
            let end = (self.next + size) / d * d;
            let len = if end > self.next {
                end - self.next
            } else {
                size
            } as usize;
            let ahead = (self.next - self.produced) as usize;
            if ahead + len > room {
                return;
            }
            // SAFETY: `ahead + len <= room`: the window lies inside the free space
            // `slice` returned, whose start `base` is never null.
            // Checked by: `zero_copy_delivers_every_item_without_a_copy` and
            // `zero_copy_is_exact_with_windows_handed_over_early_and_faults` (debug builds check
            // the raw slice's bounds; ASan runs fsdr-net-io's tests, not these).
            let ptr = unsafe { NonNull::new_unchecked(base.add(ahead)) };
            let w = Window {
                ptr,
                len,
                start: self.next,
            };
            if rx.give(w).is_err() {
                return;
            }
            let end = self.next + len as u64;
            self.out.push_back((self.next, end));
            self.next = end;
        }
    }

    /// Produces every window that came back with nothing lent before it still out.
    pub(super) fn take(&mut self, output: &mut DefaultCpuWriter<T>) -> Produced {
        let mut p = Produced::default();
        if let Some(rx) = self.rx.as_mut() {
            while let Some(f) = rx.take() {
                self.came_back = true;
                returned(&mut self.out, f.buffer.start, f.buffer.len);
                self.back.push(f);
            }
        }
        while let Some(i) = self.first_back() {
            if self
                .out
                .front()
                .is_some_and(|&(start, _)| start < self.back[i].buffer.start)
            {
                break;
            }
            let f = self.back.swap_remove(i);
            self.produce(output, f, &mut p);
        }
        p
    }

    /// The window back with the first start.
    fn first_back(&self) -> Option<usize> {
        (0..self.back.len()).min_by_key(|&i| self.back[i].buffer.start)
    }

    /// Stops the receiver and produces what it still had filled.
    pub(super) fn shutdown(&mut self, output: Option<&mut DefaultCpuWriter<T>>) -> Produced {
        let mut p = Produced::default();
        let Some(rx) = self.rx.take() else { return p };
        let (engine, stream, rest) = rx.shutdown();
        self.final_stats = Some((engine, stream));
        self.back.extend(rest);
        self.back.sort_by_key(|f| f.buffer.start);
        self.out.clear();
        if let Some(output) = output {
            for f in std::mem::take(&mut self.back) {
                self.produce(output, f, &mut p);
            }
        }
        self.back.clear();
        p
    }

    /// Puts one window's items downstream at the write position, moving them down if a
    /// short window before them left a hole.
    fn produce(
        &mut self,
        output: &mut DefaultCpuWriter<T>,
        f: Filled<Window<T>>,
        p: &mut Produced,
    ) {
        let Filled {
            buffer,
            items,
            tags,
            gaps,
            contexts,
        } = f;
        p.gaps.extend(gaps);
        p.contexts.extend(contexts);
        if items < buffer.len && (!self.out.is_empty() || !self.back.is_empty()) {
            self.skewed = true;
        }
        if items == 0 {
            return;
        }
        let (out, mut out_tags) = output.slice_with_tags();
        let off = (buffer.start - self.produced) as usize;
        if off + items > out.len() {
            // Cannot happen: the window lay inside the free space, which only shrinks by
            // what is produced in front of it. Never write past it.
            debug_assert!(false, "window outside the free space");
            tracing::error!(
                off,
                items,
                room = out.len(),
                "window outside the free space"
            );
            return;
        }
        if off > 0 {
            out.copy_within(off..off + items, 0);
            self.moved_bytes += (items * std::mem::size_of::<T>()) as u64;
        }
        for t in tags {
            for tag in tags_of(t.kind) {
                out_tags.add_tag(t.index, tag);
            }
        }
        output.produce(items);
        self.produced += items as u64;
        p.data = true;
    }
}

/// Takes the range `[start, start + len)` of a window that came back out of the ranges
/// lent (it lies inside one of them: a window as lent, or a piece of one the receiver split).
fn returned(out: &mut VecDeque<(u64, u64)>, start: u64, len: usize) {
    let end = start + len as u64;
    let Some(i) = out
        .iter()
        .position(|&(a, b)| a <= start && start < b.max(a + 1))
    else {
        return;
    };
    let (a, b) = out[i];
    match (a < start, end < b) {
        (false, false) => {
            out.remove(i);
        }
        (true, false) => out[i] = (a, start),
        (false, true) => out[i] = (end, b),
        (true, true) => {
            out[i] = (a, start);
            out.insert(i + 1, (end, b));
        }
    }
}

/// Windows lent at once when `in_place_buffers` is not set.
pub(super) const ZERO_COPY_WINDOWS: usize = 8;

/// Whether [`UdpSourceBuilder::build`] receives in place when `zero_copy` was not set: when
/// the items are the wire's bytes or decoded where they land (sc16 into `Complex<f32>`:
/// [`Decoder::decodes_in_place`]), no backend was chosen and the policy under overload is to
/// pause (the in-place receiver's only one).
pub(super) fn by_default<T: Item>(
    cfg: &EngineConfig,
    decoder: &Decoder<T>,
    backend_set: bool,
) -> bool {
    (decoder.is_copy() || decoder.decodes_in_place())
        && !backend_set
        && cfg.backend == Backend::Mio
        && matches!(cfg.overload, Overload::Pause)
}

impl<T: Item> UdpSourceBuilder<T> {
    /// [`build`](Self::build) receiving in place.
    pub(super) fn build_zero_copy(mut self) -> Result<UdpSource<T>, Error> {
        // Few windows: they cycle through the circular buffer, and a small one stays in the
        // cache the kernel's copy writes through (32 of 64 datagrams cost 1.19x the loop
        // at 800 MB/s, 8 1.08x: docs/measurements/2026-11-28.md).
        self.in_place_buffers.get_or_insert(ZERO_COPY_WINDOWS);
        let (p, cfg) = self.in_place_parts()?;
        let backend = p.backend;
        let max_datagram = cfg.engine.slot_size;
        let dp = Depacketizer::new(cfg.decoder, cfg.depacketizer.clone());
        let block = dp.marks().map_or(0, |m| m.block());
        let rx = InPlaceReceiver::start(cfg)?;
        let lane = WindowLane::new(rx, backend, p.buffers, p.items);
        let mut src = UdpSource::new(
            Feed::Window(lane),
            dp,
            max_datagram,
            p.buffers * p.items,
            p.stats_interval,
            p.idle_finish,
            block,
        );
        src.clock.set_batch_workers(p.batch_workers);
        Ok(src)
    }
}

impl<T: Item> UdpSource<T> {
    /// `work` of a zero-copy source: lends windows, produces the ones back, posts their
    /// messages, ends after the idle time, sleeps until the receiver signals.
    pub(super) async fn work_window(
        &mut self,
        io: &mut WorkIo,
        mo: &mut MessageOutputs,
        call: Call,
    ) -> Result<()> {
        let now = call.now;
        let lane = self.window.as_mut().expect("a zero-copy source");
        if lane.rx.is_none() {
            io.finished = true;
            return Ok(());
        }
        lane.lend(&mut self.output);
        let p = lane.take(&mut self.output);
        lane.lend(&mut self.output);
        self.post(p, mo, now).await?;
        if self.clock.stats_due(call) {
            mo.post("stats", self.stats().to_pmt()).await?;
        }
        let lane = self.window.as_mut().expect("a zero-copy source");
        if self.clock.idle_over(now) {
            // The stream is over: stop the receive thread, pass on what it still had, and
            // say so with the final counters.
            let p = lane.shutdown(Some(&mut self.output));
            self.post(p, mo, now).await?;
            mo.post("stats", self.stats().to_pmt()).await?;
            io.finished = true;
            return Ok(());
        }
        self.clock
            .sleep(io, lane.notified(), [self.clock.idle_end()], now);
        Ok(())
    }

    /// Posts the gaps and contexts of windows produced.
    async fn post(&mut self, p: Produced, mo: &mut MessageOutputs, now: Instant) -> Result<()> {
        post_found(mo, &p.gaps, &p.contexts).await?;
        if p.data {
            self.clock.data(now);
        }
        Ok(())
    }
}
