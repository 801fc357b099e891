//! [`Current`]: a buffer lent by the consumer while the receive thread fills it — its
//! place on the stream, its fill level, and what goes out with it (tags, gaps, contexts).

use super::ItemBuffer;
use crate::depacketizer::{GapEvent, ItemTag};
use crate::format::vrt::context::IfContext;

/// The buffer being filled.
pub(super) struct Current<B> {
    pub(super) buffer: B,
    /// Which buffer taken this is, unique in the process: what a call's layout names its
    /// buffer by. A start does not name one: a buffer that holds no item of the stream (one
    /// of zero items, or one the stream leaves at its start) shares it with the next.
    pub(super) id: u64,
    /// The stream's item index of its first item (items handed over before it).
    pub(super) start: u64,
    /// Items written.
    pub(super) pos: usize,
    /// Where the stream goes on in the next buffer, when a datagram placed ahead of a gap
    /// did not fit behind this one's last (`None`: its end).
    pub(super) end: Option<usize>,
    pub(super) tags: Vec<ItemTag>,
    pub(super) gaps: Vec<GapEvent>,
    /// Contexts that changed a setting while it was filled.
    pub(super) contexts: Vec<IfContext>,
    /// Datagrams in it, and when the first of them arrived.
    pub(super) datagrams: usize,
    pub(super) first_ns: u64,
}

impl<B> Current<B> {
    /// An empty buffer for the stream from stream position `start` on.
    pub(super) fn fresh(buffer: B, start: u64, end: Option<usize>) -> Self {
        static TAKEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Self {
            buffer,
            id: TAKEN.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            start,
            pos: 0,
            end,
            tags: Vec::new(),
            gaps: Vec::new(),
            contexts: Vec::new(),
            datagrams: 0,
            first_ns: 0,
        }
    }

    /// Where the next items go: from the write position to the buffer's end (or to where
    /// the stream goes on in the next buffer).
    pub(super) fn out<T>(&mut self) -> &mut [T]
    where
        B: ItemBuffer<T>,
    {
        let (pos, end) = (self.pos, self.end);
        let items = self.buffer.items();
        let end = end.unwrap_or(items.len());
        &mut items[pos..end]
    }
}

/// The buffer taken as `id` among the current one and those taken ahead (a function of the
/// two fields, so that the caller may borrow the receiver's other areas beside it).
pub(super) fn layout_buffer<'a, B>(
    cur: &'a mut Option<Current<B>>,
    ahead: &'a mut std::collections::VecDeque<Current<B>>,
    id: u64,
) -> Option<&'a mut Current<B>> {
    cur.iter_mut().chain(ahead.iter_mut()).find(|c| c.id == id)
}
