//! Property tests: no byte string makes a parser or the sequence tracker panic, emit →
//! parse is the identity for every valid header, and `StreamOrder::push_next` (the in-place
//! receiver's path for the next datagram) leaves the same state as `push`.

use fsdr_net_io::format::chdr::{ChdrPacket, ChdrRepr, PacketType};
use fsdr_net_io::format::vrt::{Tsf, Tsi, VrtClassId, VrtPacket, VrtRepr, VrtTimestamp};
use fsdr_net_io::format::{DataHeader, Format, PacketClass};
use fsdr_net_io::seq::{
    Released, Reorder, SeqConfig, SeqEvent, SeqPacket, SeqTracker, StreamOrder, Timebase, Tracking,
};
use proptest::prelude::*;

proptest! {
    #[test]
    fn any_bytes_parse_to_ok_or_error(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        for format in Format::ALL {
            if let Ok(info) = format.parse(&bytes) {
                // Whatever is accepted points inside the datagram.
                prop_assert!(info.payload().end <= bytes.len());
            }
        }
    }

    #[test]
    fn emit_then_parse_is_identity(
        seq in any::<u64>(),
        ts in proptest::option::of(any::<u64>()),
        payload in 1usize..2000,
    ) {
        for format in Format::ALL {
            let payload = if format == Format::Vrt { payload * 4 } else { payload };
            let mut dg = vec![0u8; format.header_len(ts.is_some()) + payload];
            if matches!(format, Format::SeqPlusSize) && payload > i16::MAX as usize {
                continue;
            }
            let h = format.emit_header(&mut dg, &DataHeader { seq, timestamp: ts, ..Default::default() }).unwrap();
            let info = format.parse(&dg).unwrap();
            prop_assert_eq!(info.class, PacketClass::Data);
            prop_assert_eq!(info.payload(), h..dg.len());
            if let Some(bits) = format.seq_bits() {
                let mask = if bits == 64 { u64::MAX } else { (1 << bits) - 1 };
                prop_assert_eq!(info.seq, Some(seq & mask));
            }
            if matches!(format, Format::Chdr | Format::Vrt) {
                prop_assert_eq!(info.timestamp.and_then(|t| t.ticks(1.0)), ts);
            }
        }
    }

    #[test]
    fn chdr_repr_round_trip(
        vc in 0u8..64, eob: bool, eov: bool, ty in prop::sample::select(vec![0u8, 1, 2, 4, 6, 7]),
        nm in 0u8..32, seq: u16, epid: u16, ts: u64, extra in 0usize..64,
    ) {
        let pkt_type = PacketType::from_bits(ty).unwrap();
        let timestamp = (pkt_type == PacketType::DataWithTimestamp).then_some(ts);
        let len = 8 + timestamp.map_or(0, |_| 8) + 8 * nm as usize + extra;
        let repr = ChdrRepr {
            vc, eob, eov, pkt_type, num_mdata: nm, seq_num: seq, length: len as u16,
            dst_epid: epid, timestamp,
        };
        let mut buf = vec![0u8; len];
        repr.emit(&mut ChdrPacket::new_unchecked(&mut buf[..]));
        let p = ChdrPacket::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(ChdrRepr::parse(&p).unwrap(), repr);
    }

    #[test]
    fn vrt_repr_round_trip(
        ty in 0u8..4, sid: u32, class: Option<(u8, u32, u16, u16)>, trailer: Option<u32>,
        tsi in 0usize..4, tsf in 0usize..4, int: u32, frac: u64, count in 0u8..16,
        words in 0usize..32,
    ) {
        let tsi = [Tsi::None, Tsi::Utc, Tsi::Gps, Tsi::Other][tsi];
        let tsf = [Tsf::None, Tsf::SampleCount, Tsf::RealTime, Tsf::FreeRunning][tsf];
        let timestamp = (tsi != Tsi::None || tsf != Tsf::None).then_some(VrtTimestamp {
            tsi,
            integer: (tsi != Tsi::None).then_some(int),
            tsf,
            fractional: (tsf != Tsf::None).then_some(frac),
        });
        let mut repr = VrtRepr {
            packet_type: ty,
            stream_id: (ty & 1 == 1).then_some(sid),
            class_id: class.map(|(pad, o, i, p)| VrtClassId {
                pad_bits: pad & 0x1f,
                oui: o & 0x00ff_ffff,
                info_class: i,
                packet_class: p,
            }),
            trailer,
            timestamp,
            packet_count: count,
            size_words: 0,
        };
        let size = repr.header_len() / 4 + words + usize::from(trailer.is_some());
        repr.size_words = size as u16;
        let mut buf = vec![0u8; size * 4];
        repr.emit(&mut buf);
        let p = VrtPacket::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(VrtRepr::parse(&p), repr);
        prop_assert_eq!(p.payload().len(), words * 4);
    }

    #[test]
    fn tracker_and_reorder_never_panic_and_deliver_in_order(
        bits in prop::sample::select(vec![4u32, 16, 64]),
        seqs in proptest::collection::vec(any::<u64>(), 0..400),
        window in 0usize..80,
    ) {
        let mut t = SeqTracker::new(SeqConfig::for_bits(bits));
        for &s in &seqs {
            let _ = t.observe(s);
        }
        // Sequences near a moving point, with reorders, duplicates and jumps.
        let mut r = Reorder::new(SeqConfig::for_bits(64), window);
        let mut out = Vec::new();
        let mut base = 1_000u64;
        for &s in &seqs {
            base += 1;
            let seq = base.wrapping_add(s % 7).wrapping_sub(3);
            r.push(seq, seq, &mut out);
        }
        r.flush_all(&mut out);
        let mut last: Option<u64> = None;
        for d in out.iter().filter(|d| d.deliver) {
            if d.event != SeqEvent::Resync
                && d.event != SeqEvent::First
                && let Some(l) = last
            {
                prop_assert!(d.item > l, "{} after {}", d.item, l);
            }
            last = Some(d.item);
        }
    }

    /// Two orders fed the same CHDR-like stream (16-bit counter, sample-count ticks, losses,
    /// reorders, duplicates, restarts, short packets, ends of burst): one takes every
    /// datagram through `push`, the other through `push_next` wherever `is_next` holds.
    /// Every release — event, item, gap, flags — and every later widening must be the same.
    #[test]
    fn push_next_is_push_for_the_next_datagram(
        ops in proptest::collection::vec((0u8..100, 0u64..40, 0usize..3), 1..300),
        window in 0usize..12,
        timed in any::<bool>(),
    ) {
        let tracking = Tracking::for_format(Format::Chdr, 1).unwrap();
        let mut plain = StreamOrder::<u64>::new(tracking, window);
        let mut fast = StreamOrder::<u64>::new(tracking, window);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let mut k = 0u64;
        for (i, &(what, n, short)) in ops.iter().enumerate() {
            // What is sent next: mostly the next packet, else a loss, an old one, a restart.
            k = match what {
                0..=79 => k + 1,
                80..=89 => k + 1 + n,
                90..=95 => k.saturating_sub(n),
                _ => 0,
            };
            let spp = 100 - 30 * short as u64;
            let p = SeqPacket {
                seq: k % 65_536,
                ticks: timed.then_some(k * 100),
                timebase: timed.then(|| Timebase::of_rates(1.0, 1.0, 4)).flatten(),
                payload: 4 * spp as usize,
                eob: what == 42,
                fingerprint: (!timed).then_some(k),
            };
            let (wa, wb) = (plain.widen(&p), fast.widen(&p));
            prop_assert_eq!(wa, wb);
            let item = i as u64;
            plain.push(wa, &p, item, &mut a);
            if fast.is_next(&wb) {
                let event = fast.push_next(wb, &p);
                prop_assert_eq!(event, Some(SeqEvent::InOrder));
                b.push(Released {
                    ambiguous: wb.ambiguous,
                    ..Released::new(SeqEvent::InOrder, true, item)
                });
            } else {
                fast.push(wb, &p, item, &mut b);
            }
            prop_assert_eq!(&a, &b);
            prop_assert_eq!(plain.held(), fast.held());
            prop_assert_eq!(plain.held_since().is_some(), fast.held_since().is_some());
        }
        plain.flush_all(&mut a);
        fast.flush_all(&mut b);
        prop_assert_eq!(&a, &b);
    }
}
