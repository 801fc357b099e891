//! GNU Radio seq64 and seq+size headers: any input parses to a value or an error, and what is
//! accepted stays inside the datagram and survives emit → parse.
#![no_main]

use fsdr_net_io::{DataHeader, Format};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for format in [Format::Seq64, Format::SeqPlusSize] {
        // From the header alone: as from the whole datagram, or refused.
        let whole = format.parse(data).ok();
        for k in 0..=data.len().min(32) {
            if let Ok(h) = format.parse_head(&data[..k], data.len()) {
                assert_eq!(Some(h), whole);
            }
        }
        if let Ok(info) = format.parse(data) {
            assert!(info.payload().end <= data.len());
            let mut again = data.to_vec();
            let fields = DataHeader {
                seq: info.seq.unwrap(),
                ..Default::default()
            };
            format.emit_header(&mut again, &fields).unwrap();
            assert_eq!(format.parse(&again).unwrap().seq, info.seq);
        }
    }
});
