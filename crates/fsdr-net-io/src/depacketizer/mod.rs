//! [`Depacketizer`]: turns received datagrams into a stream of items with tags, without any
//! runtime. Zero-fill for missed frames, staging when the output is short, partial items
//! carried across datagrams, time/end-of-burst/gap tags and the probe marks all live here; the
//! FutureSDR source block is a thin wrapper that lends it output buffers.
//!
//! Tags of a datagram are the same whether it is written at once or staged and written over
//! several calls: a gap's `Missed` tag on its first zero (or, without zero-fill, on the
//! datagram's first item), `Time` on the datagram's first item, `Eob` on its last.
//!
//! ```
//! use fsdr_net_io::depacketizer::{DatagramIn, Depacketizer, DepacketizerConfig, TagKind};
//! use fsdr_net_io::engine::Gap;
//! use fsdr_net_io::sample::{Decoder, WireFormat};
//!
//! let mut dp = Depacketizer::<i16>::new(
//!     Decoder::new(WireFormat::Plain).unwrap(),
//!     DepacketizerConfig { zero_fill: true, ..Default::default() },
//! );
//! let mut out = vec![0i16; 16];
//! let mut w = dp.writer(&mut out);
//! w.push(&DatagramIn::new(&[1, 0, 2, 0]));
//! // Two frames of two items were lost before the next datagram.
//! let mut d = DatagramIn::new(&[3, 0, 4, 0]);
//! d.gap = Gap { frames: 2, bytes: None };
//! w.push(&d);
//! let (written, tags) = w.finish();
//! assert_eq!(&out[..written], &[1, 2, 0, 0, 0, 0, 3, 4]);
//! assert_eq!(tags[0].index, 2);
//! assert_eq!(tags[0].kind, TagKind::Missed { frames: 2, items: 4 });
//! ```

use fsdr_net_lttng::Marks;
use serde::{Deserialize, Serialize};

use crate::engine::{Datagram, Gap};
use crate::format::Timestamp;
use crate::sample::{Decoder, Item};
use crate::seq::SeqEvent;
use crate::stats::field_table;

/// The value of a time tag: the timestamp of the item it is on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RxTime {
    /// Device ticks (CHDR timestamp; VRT converted to ticks of the tick rate).
    pub ticks: u64,
    /// Seconds: ticks divided by the tick rate.
    pub seconds: f64,
    /// Ticks per second (VRT sample counts: the sample rate), so that a consumer can do
    /// exact arithmetic on `ticks`.
    pub tick_rate: f64,
}

/// What a tag says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum TagKind {
    /// `frames` frames were missed just before this item (the first zero of a zero-filled gap,
    /// or the first item after the gap).
    Missed {
        /// Frames missing.
        frames: u64,
        /// Items those frames held (zero-filled when zero-fill is on).
        items: u64,
    },
    /// The timestamp of this item: on the first item of a stream, after gaps and restarts,
    /// and where timestamps jump.
    Time(RxTime),
    /// The last item of a burst.
    Eob,
    /// A radio setting from a context packet (VRT/DIFI), on the first item after it:
    /// `rx_rate`, `rx_freq`, `rx_bandwidth` or `rx_gain` (GNU Radio's UHD source names) and
    /// its value in SI units (samples/s, Hz, dB).
    Setting {
        /// Tag name.
        name: &'static str,
        /// Value.
        value: f64,
    },
}

/// A tag on an item of the output slice a [`Writer`] was lent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ItemTag {
    /// Index in that output slice.
    pub index: usize,
    /// The tag.
    pub kind: TagKind,
}

/// One gap, for a `missed` message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct GapEvent {
    /// Frames missed.
    pub frames: u64,
    /// Items missed (zero-filled when zero-fill is on).
    pub items: u64,
    /// Sequence number of the datagram after the gap.
    pub seq: Option<u64>,
}

/// The counters of a depacketizer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DepacketizerStats {
    /// Items written, zeros included.
    pub items: u64,
    /// Zero items inserted for missed frames.
    pub zeros_inserted: u64,
    /// Items lost at gaps, zero-filled or not.
    pub missed_items: u64,
    /// Datagrams taken.
    pub datagrams: u64,
    /// Datagrams that did not fit the output and were staged (copied) for later calls.
    pub staged: u64,
    /// Payload bytes copied after the kernel (decoded into the output, or staged).
    pub copied_bytes: u64,
}

field_table!(DepacketizerStats {
    items, "Items written, zeros included.";
    zeros_inserted, "Zero items inserted for missed frames.";
    missed_items, "Items lost at gaps, zero-filled or not.";
    datagrams, "Datagrams taken.";
    staged, "Datagrams that did not fit the output and were staged (copied) for later calls.";
    copied_bytes, "Payload bytes copied after the kernel (decoded into the output, or staged).";
});

/// How a [`Depacketizer`] tags and fills.
#[derive(Debug, Clone, Default)]
pub struct DepacketizerConfig {
    /// Insert zeros for missed frames so the sample timeline stays aligned.
    pub zero_fill: bool,
    /// Device tick rate in Hz for time tags; `None`: no time tags.
    pub tick_rate: Option<f64>,
    /// Ticks per item (tick rate / sample rate); with it, time tags also go wherever the
    /// timestamps jump, not only at the start and after gaps.
    pub ticks_per_item: Option<f64>,
    /// Probe marks of the output items (LTTng `fsdr_net:arrival`).
    pub marks: Option<Marks>,
}

/// One datagram as the depacketizer needs it.
#[derive(Debug, Clone, Copy)]
pub struct DatagramIn<'a> {
    /// Payload bytes.
    pub payload: &'a [u8],
    /// What sequence tracking found just before it.
    pub gap: Gap,
    /// The stream (re)starts here (first datagram, sender restart): time is tagged.
    pub restart: bool,
    /// Timestamp of its first sample.
    pub timestamp: Option<Timestamp>,
    /// End of burst.
    pub eob: bool,
    /// Sequence number (for gap messages).
    pub seq: Option<u64>,
    /// When it arrived (CLOCK_MONOTONIC ns), for probe marks.
    pub arrival_ns: u64,
}

impl<'a> DatagramIn<'a> {
    /// A datagram with only a payload.
    pub fn new(payload: &'a [u8]) -> Self {
        Self {
            payload,
            gap: Gap::default(),
            restart: false,
            timestamp: None,
            eob: false,
            seq: None,
            arrival_ns: 0,
        }
    }

    /// What the engine delivered.
    pub fn from_datagram(d: &'a Datagram<'_>) -> Self {
        let info = d.info();
        Self {
            payload: d.payload(),
            gap: d.gap(),
            restart: matches!(d.seq_event(), SeqEvent::First | SeqEvent::Resync),
            timestamp: info.timestamp,
            eob: info.eob,
            seq: info.seq,
            arrival_ns: d.meta().arrival.monotonic_ns,
        }
    }
}

/// The tags of one datagram, at item offsets from its first item.
#[derive(Debug, Clone, Default)]
struct DatagramTags {
    missed: Option<(u64, u64)>,
    time: Option<RxTime>,
    eob: bool,
    /// Items the datagram produces (carried partial item included).
    items: usize,
    /// Settings from a context packet that came before it (rare: empty, no allocation).
    settings: Vec<TagKind>,
}

impl DatagramTags {
    /// The tags on items `from..from + n` of the datagram, with their offsets.
    fn within(&self, from: usize, n: usize) -> impl Iterator<Item = (usize, TagKind)> + '_ {
        let first = (from == 0 && n > 0).then_some(0);
        let settings = first
            .into_iter()
            .flat_map(move |o| self.settings.iter().map(move |&k| (o, k)));
        let missed = first
            .zip(self.missed)
            .map(|(o, (frames, items))| (o, TagKind::Missed { frames, items }));
        let time = first.zip(self.time).map(|(o, t)| (o, TagKind::Time(t)));
        let last = self.items.checked_sub(1);
        let eob = last
            .filter(|&l| self.eob && (from..from + n).contains(&l))
            .map(|l| (l, TagKind::Eob));
        missed.into_iter().chain(time).chain(settings).chain(eob)
    }
}

/// A datagram that did not fit: its payload (copied), how far it was written, its tags.
#[derive(Debug, Default)]
struct Staged {
    payload: Vec<u8>,
    pos: usize,
    done: usize,
    tags: DatagramTags,
    arrival_ns: u64,
}

/// Zeros still to write for a gap, and its tag (on the first zero).
#[derive(Debug, Default)]
struct Zeros {
    left: u64,
    /// Frames and items of the gap.
    tag: Option<(u64, u64)>,
}

/// The depacketizer. See the [module documentation](self).
#[derive(Debug)]
pub struct Depacketizer<T> {
    decoder: Decoder<T>,
    cfg: DepacketizerConfig,
    /// Bytes of a unit split across datagrams.
    carry: Vec<u8>,
    zeros: Zeros,
    staged: Option<Staged>,
    /// Spare buffer for the next staged payload.
    spare: Vec<u8>,
    next_ticks: Option<u64>,
    /// Settings to tag on the next datagram's first item.
    settings: Vec<TagKind>,
    stats: DepacketizerStats,
}

impl<T: Item> Depacketizer<T> {
    /// A depacketizer decoding with `decoder`.
    pub fn new(decoder: Decoder<T>, cfg: DepacketizerConfig) -> Self {
        Self {
            carry: Vec::with_capacity(decoder.unit_bytes()),
            decoder,
            cfg,
            zeros: Zeros::default(),
            staged: None,
            spare: Vec::new(),
            next_ticks: None,
            settings: Vec::new(),
            stats: DepacketizerStats::default(),
        }
    }

    /// The counters.
    pub fn stats(&self) -> DepacketizerStats {
        self.stats
    }

    /// The probe marks, when configured.
    pub fn marks(&self) -> Option<&Marks> {
        self.cfg.marks.as_ref()
    }

    /// The decoder.
    pub fn decoder(&self) -> &Decoder<T> {
        &self.decoder
    }

    /// Items a datagram of `payload_bytes` can produce at most (with a carried unit).
    pub fn max_items(&self, payload_bytes: usize) -> usize {
        self.decoder.items_in(payload_bytes) + self.decoder.items_per_unit()
    }

    /// Tags `kind` (a [`TagKind::Setting`] from a context packet) on the first item of the
    /// next datagram taken.
    pub fn tag_next_datagram(&mut self, kind: TagKind) {
        self.settings.push(kind);
    }

    /// Whether zeros or a staged datagram wait for room.
    pub fn pending(&self) -> bool {
        self.zeros.left > 0 || self.staged.is_some()
    }

    /// Lends `out` for writing: pending zeros and staged data first, then datagrams.
    pub fn writer<'o>(&mut self, out: &'o mut [T]) -> Writer<'_, 'o, T> {
        let mut w = Writer {
            dp: self,
            out,
            written: 0,
            tags: Vec::new(),
            gaps: Vec::new(),
        };
        w.flush();
        w
    }

    fn time_tag(
        &mut self,
        ts: Option<Timestamp>,
        discontinuity: bool,
        items: usize,
    ) -> Option<RxTime> {
        let tick_rate = self.cfg.tick_rate?;
        let ticks = ts?.ticks(tick_rate)?;
        let first = self.next_ticks.is_none();
        let jumped =
            self.cfg.ticks_per_item.is_some() && self.next_ticks.is_some_and(|t| t != ticks);
        // Without a rate per item the next timestamp is unknown: tag only at discontinuities.
        self.next_ticks = Some(
            self.cfg
                .ticks_per_item
                .map_or(ticks, |tpi| ticks + (items as f64 * tpi).round() as u64),
        );
        (discontinuity || first || jumped).then(|| RxTime {
            ticks,
            seconds: ticks as f64 / tick_rate,
            tick_rate,
        })
    }
}

/// Writes into one output slice. Dropping it (or [`Writer::finish`]) ends the call.
#[derive(Debug)]
pub struct Writer<'d, 'o, T> {
    dp: &'d mut Depacketizer<T>,
    out: &'o mut [T],
    written: usize,
    tags: Vec<ItemTag>,
    gaps: Vec<GapEvent>,
}

impl<T: Item> Writer<'_, '_, T> {
    /// Items written so far.
    pub fn written(&self) -> usize {
        self.written
    }

    /// Room left.
    pub fn room(&self) -> usize {
        self.out.len() - self.written
    }

    /// Whether a datagram of `payload_bytes` can be taken now without staging: nothing is
    /// pending and its items fit.
    pub fn fits(&self, payload_bytes: usize) -> bool {
        !self.dp.pending() && self.room() >= self.dp.max_items(payload_bytes)
    }

    /// Whether anything waits for room (then [`Writer::push`] would stage).
    pub fn pending(&self) -> bool {
        self.dp.pending()
    }

    /// Items written, tags (indices into the slice) — and, through [`Writer::take_gaps`],
    /// the gaps seen.
    pub fn finish(self) -> (usize, Vec<ItemTag>) {
        let Writer { written, tags, .. } = self;
        (written, tags)
    }

    /// Tags `kind` on the first item of the next datagram pushed
    /// ([`Depacketizer::tag_next_datagram`]).
    pub fn tag_next_datagram(&mut self, kind: TagKind) {
        self.dp.tag_next_datagram(kind);
    }

    /// The gaps seen by this writer so far (for `missed` messages).
    pub fn take_gaps(&mut self) -> Vec<GapEvent> {
        std::mem::take(&mut self.gaps)
    }

    fn tag(&mut self, index: usize, kind: TagKind) {
        self.tags.push(ItemTag { index, kind });
    }

    fn write_zeros(&mut self) {
        let n = (self.dp.zeros.left as usize).min(self.room());
        if n == 0 {
            return;
        }
        if let Some((frames, items)) = self.dp.zeros.tag.take() {
            self.tag(self.written, TagKind::Missed { frames, items });
        }
        self.out[self.written..self.written + n].fill(T::default());
        self.written += n;
        self.dp.zeros.left -= n as u64;
        self.dp.stats.items += n as u64;
        if let Some(m) = self.dp.cfg.marks.as_mut() {
            m.advance(n as u64, |_, _| {});
        }
    }

    /// Decodes `payload[*pos..]` (after any carried partial unit) into the room left; tags
    /// from `tags` at offsets `*done..`. Returns whether the whole payload went out.
    fn write_payload(
        &mut self,
        payload: &[u8],
        pos: &mut usize,
        done: &mut usize,
        tags: &DatagramTags,
        arrival_ns: u64,
    ) -> bool {
        let dec = self.dp.decoder;
        let unit = dec.unit_bytes();
        let per = dec.items_per_unit();
        let start = self.written;
        let pos_before = *pos;
        // Complete a carried unit first.
        if !self.dp.carry.is_empty() && *pos < payload.len() {
            if self.room() < per {
                return false;
            }
            let take = (unit - self.dp.carry.len()).min(payload.len() - *pos);
            self.dp.carry.extend_from_slice(&payload[*pos..*pos + take]);
            *pos += take;
            if self.dp.carry.len() == unit {
                let n = dec.decode(&self.dp.carry, &mut self.out[self.written..]);
                self.written += n;
                self.dp.carry.clear();
            }
        }
        let rest = &payload[*pos..];
        let units = (rest.len() / unit).min(self.room() / per);
        let n = dec.decode(&rest[..units * unit], &mut self.out[self.written..]);
        self.written += n;
        *pos += units * unit;
        let rest = &payload[*pos..];
        let all = rest.len() < unit;
        if all {
            // A partial unit at the end waits for the next datagram.
            self.dp.carry.extend_from_slice(rest);
            *pos = payload.len();
        }
        self.dp.stats.copied_bytes += (*pos - pos_before) as u64;
        self.account(start, tags, done, arrival_ns);
        all
    }

    /// Counts, tags and marks the items from `start` to the writer's position: items
    /// `*done..` of a datagram with `tags`.
    fn account(&mut self, start: usize, tags: &DatagramTags, done: &mut usize, arrival_ns: u64) {
        let produced = self.written - start;
        for (offset, kind) in tags.within(*done, produced) {
            self.tag(start + offset - *done, kind);
        }
        *done += produced;
        self.dp.stats.items += produced as u64;
        if let Some(m) = self.dp.cfg.marks.as_mut() {
            m.advance(produced as u64, |block, seq| {
                fsdr_net_lttng::arrival(block, seq, arrival_ns)
            });
        }
    }

    /// Whether a datagram with a payload of `payload_bytes` that is already at the writer's
    /// position can be taken by [`Writer::push_placed`]: decoding is a plain copy
    /// ([`Decoder::is_copy`]), no zeros, staged data or partial item wait, the payload is
    /// whole items and it fits.
    pub fn can_place(&self, payload_bytes: usize) -> bool {
        let dec = &self.dp.decoder;
        dec.is_copy()
            && !self.dp.pending()
            && self.dp.carry.is_empty()
            && payload_bytes.is_multiple_of(dec.unit_bytes())
            && self.room() >= dec.items_in(payload_bytes)
    }

    /// Takes a datagram whose payload, `payload_bytes` bytes, the kernel already put at the
    /// writer's position (in-place reception scatters payloads straight into the output
    /// buffer); `d.payload` is not read. Counters, tags and probe marks are those
    /// [`Writer::push`] gives the same datagram, and nothing is copied. Returns false, and
    /// takes nothing, when [`Writer::can_place`] does not hold or the datagram follows a gap
    /// (zeros must go where its payload is): the caller then copies it out and uses `push`.
    pub fn push_placed(&mut self, d: &DatagramIn<'_>, payload_bytes: usize) -> bool {
        if d.gap.frames > 0 || !self.can_place(payload_bytes) {
            return false;
        }
        let dp = &mut *self.dp;
        dp.stats.datagrams += 1;
        let items = dp.decoder.items_in(payload_bytes);
        let tags = DatagramTags {
            missed: None,
            time: dp.time_tag(d.timestamp, d.restart, items),
            eob: d.eob,
            items,
            settings: std::mem::take(&mut dp.settings),
        };
        let start = self.written;
        self.written += items;
        self.account(start, &tags, &mut 0, d.arrival_ns);
        true
    }

    fn flush(&mut self) {
        self.write_zeros();
        if self.dp.zeros.left > 0 {
            return;
        }
        if let Some(mut s) = self.dp.staged.take() {
            let payload = std::mem::take(&mut s.payload);
            let done = self.write_payload(&payload, &mut s.pos, &mut s.done, &s.tags, s.arrival_ns);
            s.payload = payload;
            if done {
                self.dp.spare = std::mem::take(&mut s.payload);
            } else {
                self.dp.staged = Some(s);
            }
        }
    }

    /// Takes one datagram: records its gap (zeros, tag, event), its time and burst tags, and
    /// writes its items, staging what does not fit.
    pub fn push(&mut self, d: &DatagramIn<'_>) {
        self.flush();
        let dp = &mut *self.dp;
        dp.stats.datagrams += 1;
        let gap = d.gap.frames > 0;
        if gap {
            // A partial unit before a gap belongs to no item any more.
            dp.carry.clear();
            let items = match d.gap.bytes {
                Some(b) => dp.decoder.items_in(b as usize) as u64,
                None => d.gap.frames * dp.decoder.items_in(d.payload.len()) as u64,
            };
            dp.stats.missed_items += items;
            self.gaps.push(GapEvent {
                frames: d.gap.frames,
                items,
                seq: d.seq,
            });
        }
        let dp = &mut *self.dp;
        let items = dp.decoder.items_in(dp.carry.len() + d.payload.len());
        let mut tags = DatagramTags {
            missed: None,
            time: dp.time_tag(d.timestamp, gap || d.restart, items),
            eob: d.eob,
            items,
            settings: std::mem::take(&mut dp.settings),
        };
        if gap {
            let zero_items = self.gaps.last().map_or(0, |g| g.items);
            if self.dp.cfg.zero_fill && zero_items > 0 {
                self.dp.stats.zeros_inserted += zero_items;
                self.dp.zeros = Zeros {
                    left: zero_items,
                    tag: Some((d.gap.frames, zero_items)),
                };
                self.write_zeros();
            } else {
                tags.missed = Some((d.gap.frames, zero_items));
            }
        }
        let (mut pos, mut done) = (0, 0);
        let all = self.dp.zeros.left == 0
            && self.write_payload(d.payload, &mut pos, &mut done, &tags, d.arrival_ns);
        if !all {
            let dp = &mut *self.dp;
            dp.stats.staged += 1;
            let mut payload = std::mem::take(&mut dp.spare);
            payload.clear();
            payload.extend_from_slice(&d.payload[pos..]);
            dp.stats.copied_bytes += payload.len() as u64;
            dp.staged = Some(Staged {
                payload,
                pos: 0,
                done,
                tags,
                arrival_ns: d.arrival_ns,
            });
        }
    }
}

#[cfg(test)]
mod tests;
