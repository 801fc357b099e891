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
//! use fsdr_net_io::seq::Gap;
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
//! d.gap = Gap { frames: 2, ..Default::default() };
//! w.push(&d);
//! let (written, tags) = w.finish();
//! assert_eq!(&out[..written], &[1, 2, 0, 0, 0, 0, 3, 4]);
//! assert_eq!(tags[0].index, 2);
//! assert_eq!(tags[0].kind, TagKind::Missed { frames: 2, items: 4 });
//! ```

use fsdr_net_lttng::Marks;
use serde::{Deserialize, Serialize};

use crate::Error;
use crate::engine::Datagram;
use crate::format::Timestamp;
use crate::sample::{Decoder, Item};
use crate::seq::Gap;
use crate::seq::SeqEvent;
use crate::stats::field_table;

mod placed;
mod timing;
mod writer;

pub use writer::Writer;

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
    /// The format could not prove the count ([`Gap::ambiguous`]): the loss is `frames` plus
    /// an unknown multiple of the counter's period; or the size (the time shows other than
    /// whole packets where it cannot size the gap exactly).
    #[serde(default)]
    pub ambiguous: bool,
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
    /// Datagrams that ended a burst (CHDR's EOB flag): a USRP ends every burst, and a stream
    /// it stops, with one.
    pub ends_of_burst: u64,
    /// Datagrams taken since the last end of burst (all of them when none came). 0 when the
    /// stream's last datagram ended its burst: then nothing at its end was lost unseen, which
    /// no sequence number can show (a lost last packet leaves no gap behind it).
    pub after_end_of_burst: u64,
}

field_table!(DepacketizerStats {
    items, "Items written, zeros included.";
    zeros_inserted, "Zero items inserted for missed frames.";
    missed_items, "Items lost at gaps, zero-filled or not.";
    datagrams, "Datagrams taken.";
    staged, "Datagrams that did not fit the output and were staged (copied) for later calls.";
    copied_bytes, "Payload bytes copied after the kernel (decoded into the output, or staged).";
    ends_of_burst, "Datagrams that ended a burst (CHDR's EOB flag, VRT's trailer indicator).";
    after_end_of_burst, "Datagrams taken since the last end of burst (all when none came): 0 when the stream ended with one.";
});

impl DepacketizerStats {
    /// Counts one datagram taken, and whether it ended a burst.
    fn count_datagram(&mut self, eob: bool) {
        self.datagrams += 1;
        if eob {
            self.ends_of_burst += 1;
            self.after_end_of_burst = 0;
        } else {
            self.after_end_of_burst += 1;
        }
    }

    /// Whether the stream's last datagram ended its burst: `Some(true)` when it did (nothing
    /// at the end was lost unseen), `Some(false)` when the stream ended bursts before but not
    /// its last one (its end may be lost: a lost last packet leaves no gap), `None` when no
    /// datagram ended a burst (the format or the sender does not mark ends).
    ///
    /// ```
    /// use fsdr_net_io::depacketizer::DepacketizerStats;
    ///
    /// let mut s = DepacketizerStats::default();
    /// assert_eq!(s.ended_with_end_of_burst(), None);
    /// s.ends_of_burst = 1;
    /// assert_eq!(s.ended_with_end_of_burst(), Some(true));
    /// s.after_end_of_burst = 3;
    /// assert_eq!(s.ended_with_end_of_burst(), Some(false));
    /// ```
    pub fn ended_with_end_of_burst(&self) -> Option<bool> {
        (self.ends_of_burst > 0).then_some(self.after_end_of_burst == 0)
    }
}

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

impl DepacketizerConfig {
    /// Checks the rates: a tick rate and ticks per item, where set, must be finite and
    /// positive (a NaN or negative rate would put meaningless times in every time tag).
    ///
    /// ```
    /// use fsdr_net_io::depacketizer::DepacketizerConfig;
    ///
    /// let mut cfg = DepacketizerConfig { tick_rate: Some(200e6), ..Default::default() };
    /// assert!(cfg.check().is_ok());
    /// cfg.ticks_per_item = Some(f64::NAN);
    /// let e = cfg.check().unwrap_err();
    /// assert!(e.to_string().contains("ticks per item"), "{e}");
    /// ```
    pub fn check(&self) -> Result<(), Error> {
        for (what, value) in [
            ("tick rate", self.tick_rate),
            ("ticks per item", self.ticks_per_item),
        ] {
            if let Some(x) = value.filter(|x| !(x.is_finite() && *x > 0.0)) {
                return Err(Error::config(format!(
                    "depacketizer: the {what} must be finite and positive, not {x}"
                )));
            }
        }
        Ok(())
    }

    /// The configuration with every rate that [`DepacketizerConfig::check`] refuses left
    /// out (no time tags from it).
    fn without_bad_rates(mut self) -> Self {
        let good = |x: &f64| x.is_finite() && *x > 0.0;
        self.tick_rate = self.tick_rate.filter(good);
        self.ticks_per_item = self.ticks_per_item.filter(good);
        self
    }
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
    /// Settings from context packets that apply from one of its items, with the item's
    /// offset (rare: empty, no allocation).
    settings: Vec<(usize, TagKind)>,
}

impl DatagramTags {
    /// Whether no item of the datagram gets a tag (no gap, time, setting or end of burst).
    fn is_plain(&self) -> bool {
        self.missed.is_none() && self.time.is_none() && self.settings.is_empty() && !self.eob
    }

    /// The tags on items `from..from + n` of the datagram, with their offsets.
    fn within(&self, from: usize, n: usize) -> impl Iterator<Item = (usize, TagKind)> + '_ {
        let first = (from == 0 && n > 0).then_some(0);
        let settings = self
            .settings
            .iter()
            .filter(move |(o, _)| (from..from + n).contains(o))
            .copied();
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

/// Settings that apply from a zero of a filled gap, with the zero's index in the gap.
type ZeroSettings = Vec<(u64, TagKind)>;

/// Zeros still to write for a gap, and its tag (on the first zero).
#[derive(Debug, Default)]
struct Zeros {
    left: u64,
    /// Zeros of the gap in all.
    total: u64,
    /// Frames and items of the gap.
    tag: Option<(u64, u64)>,
    /// Settings that apply from a zero of the gap, with its index in the gap.
    settings: ZeroSettings,
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
    timing: timing::Timing,
    /// Settings waiting for the item they apply from.
    settings: Vec<timing::PendingSetting>,
    stats: DepacketizerStats,
    /// The in-place receiver decodes payloads where they landed before it places them
    /// ([`Decoder::decode_in_place`]): placing then needs no plain copy.
    decoded_in_place: bool,
}

impl<T: Item> Depacketizer<T> {
    /// A depacketizer decoding with `decoder`. A rate that
    /// [`DepacketizerConfig::check`] refuses (not finite and positive) is left out, with a
    /// warning: no time tags from it rather than meaningless ones.
    /// [`Depacketizer::try_new`] returns the error instead.
    pub fn new(decoder: Decoder<T>, cfg: DepacketizerConfig) -> Self {
        if let Err(e) = cfg.check() {
            tracing::warn!("{e}; left out: no time tags from it");
        }
        let cfg = cfg.without_bad_rates();
        let timing = timing::Timing::new(&cfg);
        Self {
            carry: Vec::with_capacity(decoder.unit_bytes()),
            decoder,
            cfg,
            zeros: Zeros::default(),
            staged: None,
            spare: Vec::new(),
            timing,
            settings: Vec::new(),
            stats: DepacketizerStats::default(),
            decoded_in_place: false,
        }
    }

    /// Says that payloads placed from now on were decoded where they lie
    /// ([`Decoder::decode_in_place`]), so that a decoder that is not a plain copy may place
    /// them; false when it cannot decode in place. For the in-place receiver, which decodes
    /// each one before it places it.
    pub(crate) fn place_decoded(&mut self) -> bool {
        self.decoded_in_place = self.decoder.decodes_in_place();
        self.decoded_in_place
    }

    /// As [`Depacketizer::new`], but a rate that [`DepacketizerConfig::check`] refuses is
    /// an error.
    ///
    /// ```
    /// use fsdr_net_io::depacketizer::{Depacketizer, DepacketizerConfig};
    /// use fsdr_net_io::sample::{Decoder, WireFormat};
    ///
    /// let cfg = DepacketizerConfig { tick_rate: Some(-1.0), ..Default::default() };
    /// let dec = Decoder::<i16>::new(WireFormat::Plain).unwrap();
    /// assert!(Depacketizer::try_new(dec, cfg).is_err());
    /// ```
    pub fn try_new(decoder: Decoder<T>, cfg: DepacketizerConfig) -> Result<Self, Error> {
        cfg.check()?;
        Ok(Self::new(decoder, cfg))
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

    /// Items a datagram of `payload_bytes` after `gap` produces: a gap drops a carried
    /// partial unit, else it is completed first.
    pub(crate) fn items_after(&self, gap: &Gap, payload_bytes: usize) -> usize {
        let carried = if gap.frames > 0 { 0 } else { self.carry.len() };
        self.decoder.items_in(carried + payload_bytes)
    }

    /// Tags `kind` (a [`TagKind::Setting`] from a context packet) on the first item of the
    /// next datagram taken.
    pub fn tag_next_datagram(&mut self, kind: TagKind) {
        self.settings
            .push(timing::PendingSetting { kind, at: None });
    }

    /// Tags `kind` on the item at time `at` (a context packet's timestamp: the time from
    /// which its settings apply), also when that item is a zero of a filled gap or comes
    /// several datagrams later. Without a timestamp, or where it cannot be compared with the
    /// data's (no sample rate configured), on the first item of the next datagram taken.
    pub fn tag_at(&mut self, kind: TagKind, at: Option<Timestamp>) {
        let at = self.timing.anchor(at);
        self.settings.push(timing::PendingSetting { kind, at });
    }

    /// The settings that apply from an item of a datagram stamped `ts` with `items` items
    /// (offsets into it), and those from a zero of the `zeros` zero-filled items before it
    /// (offsets into the gap); the rest keep waiting.
    fn settings_for(
        &mut self,
        ts: Option<Timestamp>,
        items: usize,
        zeros: u64,
    ) -> (Vec<(usize, TagKind)>, ZeroSettings) {
        let (mut on_data, mut on_zeros) = (Vec::new(), Vec::new());
        if self.settings.is_empty() {
            return (on_data, on_zeros);
        }
        let timing = &self.timing;
        self.settings.retain(|s| {
            let off = match s.at {
                None => Some(0),
                Some(at) => timing.offset(at, ts).or(Some(0)),
            };
            match off {
                Some(o) if o >= items as i128 && items > 0 => true,
                Some(o) if o < 0 && -o <= i128::from(zeros) => {
                    on_zeros.push(((i128::from(zeros) + o) as u64, s.kind));
                    false
                }
                Some(o) => {
                    on_data.push((o.clamp(0, items.saturating_sub(1) as i128) as usize, s.kind));
                    false
                }
                None => true,
            }
        });
        // A new sample rate holds from this datagram on (time tags carry it).
        for (_, kind) in on_data.iter() {
            if let TagKind::Setting {
                name: "rx_rate",
                value,
            } = *kind
            {
                self.timing.set_sample_rate(value);
            }
        }
        (on_data, on_zeros)
    }

    /// Items a gap stands for before a datagram of `payload_bytes`: from the gap's bytes
    /// where sequence tracking sized it, else its frames × this datagram's items.
    pub fn gap_items(&self, gap: &Gap, payload_bytes: usize) -> u64 {
        if gap.frames == 0 {
            return 0;
        }
        // Per item, not per wire unit: a gap need not be whole words of a packing that puts
        // two samples in one (sc8 in item32).
        let per_item = (self.decoder.unit_bytes() / self.decoder.items_per_unit()).max(1) as u64;
        match gap.bytes {
            Some(b) => b / per_item,
            None => gap
                .frames
                .saturating_mul(self.decoder.items_in(payload_bytes) as u64),
        }
    }

    /// Zero items written before a datagram with `gap` and `payload_bytes` of payload (0
    /// without zero filling): where [`Writer::push_placed`] expects its payload.
    pub fn zeros_before(&self, gap: &Gap, payload_bytes: usize) -> u64 {
        if self.cfg.zero_fill {
            self.gap_items(gap, payload_bytes)
        } else {
            0
        }
    }

    /// Counts payload bytes copied outside a writer (in-place reception moving a payload to
    /// its sample position).
    pub fn count_copied(&mut self, bytes: u64) {
        self.stats.copied_bytes += bytes;
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
}

#[cfg(test)]
mod tests;
