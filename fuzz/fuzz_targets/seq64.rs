//! GNU Radio seq64 and seq+size headers: any input parses to a value or an error, and what is
//! accepted stays inside the datagram and survives emit → parse.
#![no_main]

use fsdr_net_io::Format;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    for format in [Format::Seq64, Format::SeqPlusSize] {
        if let Ok(info) = format.parse(data) {
            assert!(info.payload().end <= data.len());
            let mut again = data.to_vec();
            format
                .emit_header(&mut again, info.seq.unwrap(), None, false)
                .unwrap();
            assert_eq!(format.parse(&again).unwrap().seq, info.seq);
        }
    }
});
