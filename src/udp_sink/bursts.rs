//! Where the sink's input tags cut the stream into bursts, with UHD's tag names: `tx_sob`
//! on a burst's first item, `tx_eob` on its last, `tx_time` on the item a timestamp belongs
//! to. A datagram never spans a burst boundary: a burst of N items becomes exactly the
//! datagrams its length needs, the last one short. With context packets on (VRT), the
//! setting tags (`tx_freq`, `tx_rate`, `tx_gain`, `tx_bandwidth`) cut the stream too: the
//! new context applies from a datagram's first item.

use fsdr_net_io::depacketizer::RxTime;
use futuresdr::runtime::dev::prelude::*;

/// Tag on a burst's first item (UHD's name): a datagram starts there.
pub const TAG_TX_SOB: &str = "tx_sob";
/// Tag on a burst's last item (UHD's name): the datagram ends there and carries the
/// end-of-burst flag (CHDR's EOB).
pub const TAG_TX_EOB: &str = "tx_eob";
/// Tag on the item a device time belongs to (UHD's name): a datagram starts there with that
/// timestamp, and later ones continue from it: `Tag::NamedUsize(TAG_TX_TIME.to_string(),
/// ticks)` in the device's ticks, or `Tag::NamedAny(TAG_TX_TIME.to_string(),
/// Box::new(rx_time))` (an [`RxTime`]'s `ticks`), so that the `rx_time` of a received stream
/// can be passed on (`Tag` is [`crate::Tag`]). Only with the sink's
/// [`timestamps`](crate::UdpSinkBuilder::timestamps) (CHDR, VRT) or VRT's
/// [`utc_timestamps`](crate::UdpSinkBuilder::utc_timestamps); otherwise the tag is ignored,
/// with one warning. The crate's documentation has the table of every tag.
pub const TAG_TX_TIME: &str = "tx_time";

/// What the tags say about the items in front of the sink: the part to send before the next
/// boundary.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Segment {
    /// Items up to the next boundary (all of them when there is none).
    pub len: usize,
    /// The segment's last item ends a burst (`tx_eob`).
    pub eob: bool,
    /// The segment ends at a boundary: its last datagram may be short.
    pub bounded: bool,
    /// Device ticks of the segment's first item (`tx_time` on item 0).
    pub time: Option<u64>,
    /// Settings from the segment's first item on (setting tags on item 0).
    pub settings: Vec<(String, f64)>,
}

/// The setting a tag carries (name, value), if it is one of
/// [`SETTING_TAGS`](fsdr_net_io::send::SETTING_TAGS) with a number.
fn setting(tag: &Tag) -> Option<(&str, f64)> {
    let n = name(tag).filter(|n| fsdr_net_io::send::SETTING_TAGS.contains(n))?;
    let v = match tag {
        Tag::NamedF32(_, v) => f64::from(*v),
        Tag::NamedUsize(_, v) => *v as f64,
        Tag::NamedAny(_, v) => v
            .downcast_ref::<f64>()
            .copied()
            .or_else(|| v.downcast_ref::<f32>().map(|&x| f64::from(x)))
            .or_else(|| v.downcast_ref::<u64>().map(|&x| x as f64))
            .or_else(|| v.downcast_ref::<usize>().map(|&x| x as f64))?,
        _ => return None,
    };
    Some((n, v))
}

fn name(tag: &Tag) -> Option<&str> {
    match tag {
        Tag::NamedUsize(n, _) | Tag::NamedF32(n, _) | Tag::NamedAny(n, _) => Some(n),
        Tag::String(s) => Some(s),
        _ => None,
    }
}

/// Device ticks a `tx_time` tag carries.
fn ticks(tag: &Tag) -> Option<u64> {
    match tag {
        Tag::NamedUsize(_, t) => Some(*t as u64),
        Tag::NamedAny(_, v) => v.downcast_ref::<RxTime>().map(|t| t.ticks),
        _ => None,
    }
}

/// The segment of the `available` items in front of the sink that `tags` (indices relative
/// to the first of them) allow to go out now; with `settings`, setting tags cut it too.
pub(super) fn segment(tags: &[ItemTag], available: usize, settings: bool) -> Segment {
    let mut s = Segment {
        len: available,
        ..Default::default()
    };
    for t in tags.iter().filter(|t| t.index < available) {
        let (i, tag) = (t.index, &t.tag);
        let cut = match name(tag) {
            Some(TAG_TX_EOB) => Some((i + 1, true)),
            Some(TAG_TX_SOB) if i > 0 => Some((i, false)),
            Some(TAG_TX_TIME) if i > 0 => Some((i, false)),
            Some(TAG_TX_TIME) => {
                s.time = ticks(tag).or(s.time);
                None
            }
            _ => match setting(tag).filter(|_| settings) {
                Some(_) if i > 0 => Some((i, false)),
                Some((n, v)) => {
                    s.settings.push((n.to_string(), v));
                    None
                }
                None => None,
            },
        };
        if let Some((at, eob)) = cut
            && (at < s.len || (at == s.len && !s.bounded))
        {
            s.len = at;
            s.bounded = true;
            s.eob = eob;
        } else if let Some((at, true)) = cut
            && at == s.len
        {
            s.eob = true;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(index: usize, name: &str) -> ItemTag {
        ItemTag {
            index,
            tag: Tag::NamedUsize(name.into(), 1),
        }
    }

    #[test]
    fn tags_cut_where_bursts_start_and_end() {
        assert_eq!(
            segment(&[], 100, false),
            Segment {
                len: 100,
                ..Default::default()
            }
        );
        // An end of burst on item 9 ends the segment after it.
        let s = segment(&[tag(9, TAG_TX_EOB), tag(50, TAG_TX_EOB)], 100, false);
        assert_eq!((s.len, s.eob, s.bounded), (10, true, true));
        // A start of burst on item 20 ends the segment before it, without EOB.
        let s = segment(&[tag(0, TAG_TX_SOB), tag(20, TAG_TX_SOB)], 100, false);
        assert_eq!((s.len, s.eob, s.bounded), (20, false, true));
        // An end and the next start on adjacent items: one boundary, with EOB.
        let s = segment(&[tag(10, TAG_TX_SOB), tag(9, TAG_TX_EOB)], 100, false);
        assert_eq!((s.len, s.eob), (10, true));
        let s = segment(&[tag(9, TAG_TX_EOB), tag(10, TAG_TX_SOB)], 100, false);
        assert_eq!((s.len, s.eob), (10, true));
        // A time on item 0 is the segment's; on a later item it cuts there.
        let t = |i, ticks| ItemTag {
            index: i,
            tag: Tag::NamedUsize(TAG_TX_TIME.into(), ticks),
        };
        let s = segment(&[t(0, 5000), t(30, 9000)], 100, false);
        assert_eq!((s.len, s.time, s.bounded), (30, Some(5000), true));
        // Tags past the items in front of the sink wait for them.
        assert_eq!(segment(&[tag(100, TAG_TX_EOB)], 100, false).len, 100);
        // Other tags change nothing.
        assert_eq!(segment(&[tag(3, "rx_time")], 100, false).len, 100);
    }

    #[test]
    fn settings_cut_only_when_context_packets_are_on() {
        let f = |i, name: &str, v: f64| ItemTag {
            index: i,
            tag: Tag::NamedAny(name.into(), Box::new(v)),
        };
        let tags = [
            f(0, "tx_freq", 1e9),
            f(40, "tx_rate", 2e6),
            f(50, "rx_freq", 3.0),
        ];
        let s = segment(&tags, 100, true);
        assert_eq!((s.len, s.bounded), (40, true));
        assert_eq!(s.settings, [("tx_freq".to_string(), 1e9)]);
        let s = segment(&tags, 100, false);
        assert_eq!((s.len, s.settings.len()), (100, 0));
        // Numbers of any tag kind.
        let g = ItemTag {
            index: 0,
            tag: Tag::NamedF32("tx_gain".into(), 10.5),
        };
        assert_eq!(
            segment(&[g], 10, true).settings,
            [("tx_gain".to_string(), 10.5)]
        );
    }

    #[test]
    fn a_received_time_passes_on_as_a_transmit_time() {
        let rx = RxTime {
            ticks: 123_456,
            seconds: 0.0,
            tick_rate: 1.0,
        };
        let t = ItemTag {
            index: 0,
            tag: Tag::NamedAny(TAG_TX_TIME.into(), Box::new(rx)),
        };
        assert_eq!(segment(&[t], 10, false).time, Some(123_456));
    }
}
