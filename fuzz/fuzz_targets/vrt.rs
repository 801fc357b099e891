//! VRT: any input parses to a value or an error (from the whole datagram or its
//! header alone, which cannot see the trailer); an accepted packet re-emits to the same
//! header words.
#![no_main]

use fsdr_net_io::Format;
use fsdr_net_io::format::PacketInfo;
use fsdr_net_io::format::vrt::{VrtPacket, VrtRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // A prefix that holds the header parses as the whole datagram does (in-place
    // reception parses from the header alone), or is refused. The one field a head cannot
    // show is the trailer's end of burst, and the format says when it holds one
    // (`trailer_unseen`: the in-place receiver then parses the whole datagram).
    let whole = Format::Vrt.parse(data).ok();
    for k in 0..=data.len().min(64) {
        if let Ok(h) = Format::Vrt.parse_head(&data[..k], data.len()) {
            let mut want = whole;
            if k < data.len() && Format::Vrt.trailer_unseen(&data[..k]) {
                want = want.map(|w| PacketInfo { eob: false, ..w });
            }
            assert_eq!(Some(h), want);
        }
    }
    if let Ok(info) = Format::Vrt.parse(data) {
        assert!(info.payload().end <= data.len());
        let packet = VrtPacket::new_checked(data).unwrap();
        if packet.is_data() {
            let repr = VrtRepr::parse(&packet);
            let mut again = vec![0u8; data.len()];
            repr.emit(&mut again);
            let h = repr.header_len();
            // Reserved bits are not part of the representation: bits 25:24 of the header and
            // bits 26:24 of the class ID's first word.
            let mut want = data[..h].to_vec();
            want[0..4].copy_from_slice(&again[0..4]);
            if packet.has_class_id() {
                let at = 4 * (1 + usize::from(packet.has_stream_id()));
                want[at] &= !0x07;
            }
            assert_eq!(&again[..h], &want[..]);
            // The header word itself, reserved bits 25:24 (the low bits of byte 0) aside.
            assert_eq!(again[0], data[0] & !0x03);
            assert_eq!(&again[1..4], &data[1..4]);
        }
    }
});
