//! The in-place receiver filling consecutive windows of one memory, as the zero-copy
//! `UdpSource` lends its output buffer's free space: the receiver takes them in the order
//! lent (`ItemBuffer::IN_ORDER`) and splits one it hands over before it is full
//! (`split_off`), so that the stream goes on in its rest. What comes back is put together
//! by the windows' stream positions, as the block does, and compared with the model.

use std::collections::BTreeMap;

use fsdr_net_io::inplace::{InPlaceReceiver, ItemBuffer};

use super::reference::Tag;
use super::run::{Outcome, Sample, add_tags, drive, engine_counts, inplace_config};
use super::scenario::{Scenario, Sent};

/// A window's items and tags, copied out when it came back.
type Back<T> = (Vec<T>, Vec<(usize, Tag)>);

/// `len` items of the test's memory from `ptr`, the stream's items from `start` on.
struct Window<T> {
    ptr: *mut T,
    len: usize,
    start: usize,
}

// SAFETY: a window is a range of the run's memory that only its holder touches: `run` lends
// disjoint ranges and reads one only after it came back.
// Checked by: `the_in_place_receiver_in_windows_agrees_with_the_model` under ASan.
unsafe impl<T: Send> Send for Window<T> {}

// SAFETY: `ptr` and `len` are fixed when the window is made (and only shortened by
// `split_off`, between receive calls); the memory is a boxed slice that outlives the
// receiver (`run` shuts it down before dropping the memory).
// Checked by: `the_in_place_receiver_in_windows_agrees_with_the_model` under ASan.
unsafe impl<T: Sample> ItemBuffer<T> for Window<T> {
    fn items(&mut self) -> &mut [T] {
        // SAFETY: `len` items from `ptr` are this window's, inside the run's memory.
        // Checked by: `the_in_place_receiver_in_windows_agrees_with_the_model` under ASan.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    const IN_ORDER: bool = true;

    fn split_off(&mut self, at: usize) -> Option<Self> {
        assert!(at > 0 && at < self.len, "split at {at} of {}", self.len);
        let rest = Window {
            // SAFETY: `at < len`: inside this window.
            // Checked by: `the_in_place_receiver_in_windows_agrees_with_the_model` under ASan.
            ptr: unsafe { self.ptr.add(at) },
            len: self.len - at,
            start: self.start + at,
        };
        self.len = at;
        Some(rest)
    }
}

/// Runs `sc` into windows of `buffer_items` carved one after another from a memory with
/// room for the `expected` items, the windows out at the end and a window's rest left
/// unused for every datagram.
pub fn run<T: Sample>(
    sc: &Scenario,
    stream: &[Sent],
    arrivals: &[usize],
    expected: usize,
) -> Outcome<T> {
    let (cfg, buffer_items) = inplace_config::<T>(sc);
    let buffers = cfg.buffers;
    // A window the receiver hands over short without splitting it (a hole it gave up
    // waiting for) leaves its rest unused: at most one a datagram.
    let cap = expected + (arrivals.len() + buffers + 2) * buffer_items;
    let mut memory = vec![T::default(); cap].into_boxed_slice();
    let base = memory.as_mut_ptr();
    let mut next = 0;
    let lend = |rx: &mut InPlaceReceiver<T, Window<T>>, next: &mut usize| {
        while *next + buffer_items <= cap {
            let w = Window {
                // SAFETY: `next + buffer_items <= cap`: inside the memory.
                // Checked by: `the_in_place_receiver_in_windows_agrees_with_the_model` under ASan.
                ptr: unsafe { base.add(*next) },
                len: buffer_items,
                start: *next,
            };
            if rx.give(w).is_err() {
                break;
            }
            *next += buffer_items;
        }
    };
    let mut rx = InPlaceReceiver::<T, Window<T>>::start(cfg).unwrap();
    lend(&mut rx, &mut next);
    // What came back: items and tags by the window's stream position.
    let mut back: BTreeMap<usize, Back<T>> = BTreeMap::new();
    let s = drive(rx, stream, arrivals, super::run::stall(sc), |f, rx| {
        // SAFETY: the window came back: its first `items` are the receiver's and nobody
        // else's now.
        // Checked by: `the_in_place_receiver_in_windows_agrees_with_the_model` under ASan.
        let items = unsafe { std::slice::from_raw_parts(f.buffer.ptr, f.items) }.to_vec();
        let mut tags = Vec::new();
        add_tags(&mut tags, 0, &f.tags);
        assert!(back.insert(f.buffer.start, (items, tags)).is_none());
        if let Some(rx) = rx {
            lend(rx, &mut next);
        }
    });
    drop(memory);
    let mut out = Outcome::<T> {
        counts: engine_counts(&s),
        ..Outcome::default()
    };
    for (items, tags) in back.into_values() {
        let at = out.items.len();
        out.tags.extend(tags.into_iter().map(|(i, t)| (at + i, t)));
        out.items.extend(items);
    }
    out
}
