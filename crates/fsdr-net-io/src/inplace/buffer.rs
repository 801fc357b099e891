//! [`ItemBuffer`]: the memory the in-place receiver writes into.

use crate::sample::Item;

/// Memory a receive thread can write items into: an output buffer of the consumer.
/// Implemented for `Vec<T>`; the FutureSDR block implements it for the circuit buffer.
///
/// # Safety
/// The receiver hands the kernel pointers into the slice `items` returns, and the kernel
/// writes through them after later calls of `items` (and after the value was moved between
/// threads). So, for as long as the value lives, every call of `items` must return the same
/// memory — the same address and length — which must not move when the value moves (heap
/// memory, not memory inside the value), and nothing but the holder of the value may access
/// it. A `Vec` that is not resized, a `Box<[T]>`, or FutureSDR's circuit buffer (a boxed
/// slice whose valid length is not changed while lent) keep this. The one change allowed is
/// [`split_off`](Self::split_off), which the receiver calls only between receive calls:
/// from then on `items` returns the first `at` items of what it returned before, and the
/// new value the rest.
pub unsafe trait ItemBuffer<T>: Send + 'static {
    /// All items of the buffer: the same memory every time (see the trait's safety rule).
    fn items(&mut self) -> &mut [T];

    /// True for buffers that are consecutive windows of one memory, such as FutureSDR's
    /// circular buffer lent piece by piece: the receiver then fills them in the order they
    /// were lent, so that the stream goes on in the next window. By default (false) it
    /// fills the buffer returned last first, whose memory is likeliest still in the cache.
    const IN_ORDER: bool = false;

    /// Gives the items from `at` on as a buffer of its own and keeps the first `at`: `None`
    /// (the default) where the memory cannot be split. An [`IN_ORDER`](Self::IN_ORDER)
    /// buffer that splits is handed over at its fill level (the latency budget, a gap) with
    /// the stream going on in its rest, so that the windows after it stay where the stream
    /// reaches them. Called only with `at` inside the buffer, neither end.
    fn split_off(&mut self, at: usize) -> Option<Self>
    where
        Self: Sized,
    {
        let _ = at;
        None
    }
}

// SAFETY: a Vec's elements live on the heap and stay in place when the Vec moves; `items`
// neither grows nor shrinks it, so it returns the same memory every time.
// Checked by: `the_buffer_returned_last_is_filled_next_and_lending_is_bounded` under ASan.
unsafe impl<T: Item> ItemBuffer<T> for Vec<T> {
    fn items(&mut self) -> &mut [T] {
        self
    }
}
