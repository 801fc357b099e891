//! CHDR: any input parses to a value or an error (from the whole datagram or its
//! header alone); an accepted packet's fields re-emit to the
//! same header.
#![no_main]

use fsdr_net_io::Format;
use fsdr_net_io::format::chdr::{ChdrPacket, ChdrRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // A prefix that holds the header parses as the whole datagram does (in-place
    // reception parses from the header alone), or is refused.
    let whole = Format::Chdr.parse(data).ok();
    for k in 0..=data.len().min(64) {
        if let Ok(h) = Format::Chdr.parse_head(&data[..k], data.len()) {
            assert_eq!(Some(h), whole);
        }
    }
    if let Ok(info) = Format::Chdr.parse(data) {
        assert!(info.payload().end <= data.len());
        let packet = ChdrPacket::new_checked(data).unwrap();
        let repr = ChdrRepr::parse(&packet).unwrap();
        let mut again = data.to_vec();
        repr.emit(&mut ChdrPacket::new_unchecked(&mut again[..]));
        assert_eq!(&again[..repr.header_len()], &data[..repr.header_len()]);
    }
});
