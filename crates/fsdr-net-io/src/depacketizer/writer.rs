//! [`Writer`]: one call's output slice — zeros, staged data, then datagrams, with their tags.

use super::{DatagramIn, DatagramTags, Depacketizer, GapEvent, ItemTag, Staged, TagKind, Zeros};
use crate::format::Timestamp;
use crate::sample::Item;

/// Writes into one output slice. Dropping it (or [`Writer::finish`]) ends the call.
#[derive(Debug)]
pub struct Writer<'d, 'o, T> {
    pub(super) dp: &'d mut Depacketizer<T>,
    pub(super) out: &'o mut [T],
    pub(super) written: usize,
    pub(super) tags: Vec<ItemTag>,
    pub(super) gaps: Vec<GapEvent>,
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

    /// Tags `kind` on the item at time `at` ([`Depacketizer::tag_at`]).
    pub fn tag_at(&mut self, kind: TagKind, at: Option<Timestamp>) {
        self.dp.tag_at(kind, at);
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
        let z = &self.dp.zeros;
        let first = z.total - z.left;
        let here: Vec<(usize, TagKind)> = z
            .settings
            .iter()
            .filter(|(o, _)| (first..first + n as u64).contains(o))
            .map(|&(o, k)| (self.written + (o - first) as usize, k))
            .collect();
        for (i, k) in here {
            self.tag(i, k);
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
            // A partial unit at the end waits for the next datagram, unless a burst ends
            // here: the next burst starts with a whole item.
            if !tags.eob {
                self.dp.carry.extend_from_slice(rest);
            }
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
        if tags.is_plain() {
            // Nothing to tag: the common datagram of a running stream.
            *done += produced;
            self.dp.stats.items += produced as u64;
            if let Some(m) = self.dp.cfg.marks.as_mut() {
                m.advance(produced as u64, |block, seq| {
                    fsdr_net_lttng::arrival(block, seq, arrival_ns)
                });
            }
            return;
        }
        if tags.eob && tags.items == 0 && start > 0 {
            // An end of burst without items (a sender's EOB after its burst's last items went
            // out): it ends the burst on the last item before it, while that item is still in
            // this output. Once handed over, only `ends_of_burst` counts it.
            self.tag(start - 1, TagKind::Eob);
        }
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
    /// ([`Decoder::is_copy`](crate::sample::Decoder::is_copy)), no zeros, staged data or partial item wait, the payload is
    /// whole items and it fits.
    pub fn can_place(&self, payload_bytes: usize) -> bool {
        self.dp.can_place(payload_bytes, self.room())
    }

    /// Takes a datagram whose payload, `payload_bytes` bytes, is already in the output: at
    /// the writer's position, or after a gap that many zero items further
    /// ([`Depacketizer::zeros_before`]; in-place reception scatters payloads straight into the
    /// output buffer, and places a datagram behind a gap before the gap is filled). The zeros
    /// are written; `d.payload` is not read. Counters, tags and probe marks are those
    /// [`Writer::push`] gives the same datagram, and no payload byte is copied. Returns false,
    /// and takes nothing, when [`Writer::can_place`] does not hold or the zeros and the
    /// payload do not both fit: the caller then copies it out and uses `push`.
    pub fn push_placed(&mut self, d: &DatagramIn<'_>, payload_bytes: usize) -> bool {
        let zeros = self.dp.zeros_before(&d.gap, payload_bytes) as usize;
        let items = self.dp.decoder.items_in(payload_bytes);
        if !self.can_place(payload_bytes) || self.room() < zeros + items {
            return false;
        }
        let tags = self.begin(d, payload_bytes);
        debug_assert_eq!(self.dp.zeros.left, 0, "the zeros fit");
        let start = self.written;
        self.written += items;
        self.account(start, &tags, &mut 0, d.arrival_ns);
        true
    }

    pub(super) fn flush(&mut self) {
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

    /// Counts `d` and opens it: its gap (counters, event, and the zeros, written as far as
    /// there is room, or the missed tag when not zero filling) and the tags of its items
    /// (`payload_bytes` of payload after any carried partial unit).
    fn begin(&mut self, d: &DatagramIn<'_>, payload_bytes: usize) -> DatagramTags {
        let dp = &mut *self.dp;
        dp.stats.count_datagram(d.eob);
        let gap = d.gap.frames > 0;
        if gap || d.restart {
            // A partial unit before a gap or a restart belongs to no item any more.
            dp.carry.clear();
        }
        let zero_items = if gap {
            let items = dp.gap_items(&d.gap, payload_bytes);
            dp.stats.missed_items += items;
            self.gaps.push(GapEvent {
                frames: d.gap.frames,
                items,
                seq: d.seq,
                ambiguous: d.gap.ambiguous,
            });
            items
        } else {
            0
        };
        let filled = self.dp.cfg.zero_fill && zero_items > 0;
        let dp = &mut *self.dp;
        let items = dp.decoder.items_in(dp.carry.len() + payload_bytes);
        let (settings, on_zeros) = if dp.settings.is_empty() {
            // What `settings_for` gives without a setting waiting, without the call.
            Default::default()
        } else {
            dp.settings_for(d.timestamp, items, if filled { zero_items } else { 0 })
        };
        let mut tags = DatagramTags {
            missed: None,
            time: dp.timing.tag(d.timestamp, gap || d.restart, items),
            eob: d.eob,
            items,
            settings,
        };
        if gap {
            if filled {
                self.dp.stats.zeros_inserted += zero_items;
                self.dp.zeros = Zeros {
                    left: zero_items,
                    total: zero_items,
                    tag: Some((d.gap.frames, zero_items)),
                    settings: on_zeros,
                };
                self.write_zeros();
            } else {
                tags.missed = Some((d.gap.frames, zero_items));
            }
        }
        tags
    }

    /// Takes one datagram: records its gap (zeros, tag, event), its time and burst tags, and
    /// writes its items, staging what does not fit.
    pub fn push(&mut self, d: &DatagramIn<'_>) {
        self.flush();
        let tags = self.begin(d, d.payload.len());
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
