//! Datagrams whose payload is already in the output (in-place reception): whether one can
//! be taken there, and the common case — in order, nothing to tag but the time — taken
//! without a [`Writer`](super::Writer).

use super::{DatagramIn, Depacketizer, RxTime};
use crate::sample::Item;

impl<T: Item> Depacketizer<T> {
    /// Whether a datagram with a payload of `payload_bytes`, already at the output's
    /// position, can be taken where `room` items are left: decoding is a plain copy
    /// ([`Decoder::is_copy`](crate::sample::Decoder::is_copy)) — or the in-place receiver
    /// decoded it where it lies — no zeros, staged data or
    /// partial item wait, the payload is whole items and they fit. What
    /// [`Writer::can_place`](super::Writer::can_place) says of a writer with that room.
    pub fn can_place(&self, payload_bytes: usize, room: usize) -> bool {
        let dec = &self.decoder;
        (dec.is_copy() || self.decoded_in_place)
            && !self.pending()
            && self.carry.is_empty()
            && payload_bytes.is_multiple_of(dec.unit_bytes())
            && room >= dec.items_in(payload_bytes)
    }

    /// Takes a datagram whose payload, `payload_bytes`, is already at the output's position,
    /// where `room` items are left, when it is the common case of a running stream: no gap,
    /// no restart, no end of burst, no setting waiting, and [`can_place`](Self::can_place)
    /// holds. Counters and probe marks are those [`Writer::push_placed`](super::Writer::push_placed)
    /// gives it, and so is its one possible tag: the time on its first item, returned.
    /// Returns the items taken and that time, or `None` — having changed nothing — when it
    /// is not that case (then use a [`Writer`](super::Writer)).
    ///
    /// ```
    /// use fsdr_net_io::depacketizer::{DatagramIn, Depacketizer, DepacketizerConfig};
    /// use fsdr_net_io::sample::{Decoder, WireFormat};
    ///
    /// let dec = Decoder::<u8>::new(WireFormat::Plain).unwrap();
    /// let mut dp = Depacketizer::new(dec, DepacketizerConfig::default());
    /// let d = DatagramIn::new(&[]);
    /// assert_eq!(dp.push_placed_plain(&d, 100, 1000), Some((100, None)));
    /// assert_eq!(dp.push_placed_plain(&d, 100, 10), None); // no room
    /// assert_eq!(dp.stats().items, 100);
    /// ```
    pub fn push_placed_plain(
        &mut self,
        d: &DatagramIn<'_>,
        payload_bytes: usize,
        room: usize,
    ) -> Option<(usize, Option<RxTime>)> {
        let items = self.decoder.items_in(payload_bytes);
        if d.gap.frames > 0
            || d.restart
            || d.eob
            || items == 0
            || !self.settings.is_empty()
            || !self.can_place(payload_bytes, room)
        {
            return None;
        }
        // What `Writer::push_placed` does with it: `begin` (no gap, no carried unit, no
        // setting), then `account` (the time tag on its first item, if any).
        self.stats.count_datagram(false);
        let time = self.timing.tag(d.timestamp, false, items);
        self.stats.items += items as u64;
        if let Some(m) = self.cfg.marks.as_mut() {
            m.advance(items as u64, |block, seq| {
                fsdr_net_lttng::arrival(block, seq, d.arrival_ns)
            });
        }
        Some((items, time))
    }
}
