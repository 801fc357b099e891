//! Property tests: no byte string makes a parser or the sequence tracker panic, and emit →
//! parse is the identity for every valid header.

use fsdr_net_io::format::chdr::{ChdrPacket, ChdrRepr, PacketType};
use fsdr_net_io::format::vrt::{Tsf, Tsi, VrtClassId, VrtPacket, VrtRepr, VrtTimestamp};
use fsdr_net_io::format::{DataHeader, Format, PacketClass};
use fsdr_net_io::seq::{Reorder, SeqConfig, SeqEvent, SeqTracker};
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
}
