//! What the consumer receives: a [`Datagram`] lent from its slot, with its [`DatagramMeta`]
//! (`meta.rs`) and what sequence tracking made of it.

use std::fmt;

use super::meta::DatagramMeta;
use super::slots::SlotPool;
use crate::format::PacketInfo;
use crate::seq::{Gap, SeqEvent};

/// A received datagram, lent to the consumer; its slot returns to the receive thread when it
/// is dropped.
pub struct Datagram<'a> {
    pub(crate) pool: &'a SlotPool,
    pub(crate) free: &'a mut rtrb::Producer<u32>,
    pub(crate) slot: u32,
    pub(crate) event: SeqEvent,
    pub(crate) gap: Gap,
}

impl Datagram<'_> {
    /// The whole datagram, header included.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the consumer owns the slot while the Datagram lives (popped from the ready
        // ring, pushed back to the free ring only on drop).
        // Checked by: `ownership_moves_across_threads_in_order` under Miri;
        // `mio_accounts_for_every_datagram` under ASan.
        unsafe { self.pool.data(self.slot) }
    }

    /// The payload after the format's header.
    pub fn payload(&self) -> &[u8] {
        let b = self.bytes();
        let r = self.info().payload();
        &b[r.start.min(b.len())..r.end.min(b.len())]
    }

    /// Length, sender, arrival time, receiving thread and parsed header.
    pub fn meta(&self) -> &DatagramMeta {
        // SAFETY: as for `bytes`.
        // Checked by: `ownership_moves_across_threads_in_order` under Miri;
        // `mio_accounts_for_every_datagram` under ASan.
        unsafe { self.pool.meta(self.slot) }
    }

    /// The parsed header.
    pub fn info(&self) -> &PacketInfo {
        &self.meta().info
    }

    /// What sequence tracking made of this datagram (`InOrder` for formats without sequence
    /// numbers).
    pub fn seq_event(&self) -> SeqEvent {
        self.event
    }

    /// Frames missing from this datagram's stream just before it.
    pub fn missed_before(&self) -> u64 {
        self.gap.frames
    }

    /// Frames and (when the timestamps tell) payload bytes missing just before it.
    pub fn gap(&self) -> Gap {
        self.gap
    }
}

impl Drop for Datagram<'_> {
    fn drop(&mut self) {
        let pushed = self.free.push(self.slot);
        debug_assert!(pushed.is_ok(), "free ring sized for every slot");
    }
}

impl fmt::Debug for Datagram<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Datagram")
            .field("meta", self.meta())
            .field("event", &self.event)
            .field("gap", &self.gap)
            .finish()
    }
}
