//! The depacketizer: any sequence of datagrams (payload sizes, gaps, bursts) written through
//! output slices of any size never panics, writes exactly the items the payloads and
//! zero-filled gaps hold, and puts every tag on an item it wrote.
#![no_main]

use fsdr_net_io::depacketizer::{DatagramIn, Depacketizer, DepacketizerConfig};
use fsdr_net_io::engine::Gap;
use fsdr_net_io::sample::{Decoder, WireFormat};
use libfuzzer_sys::fuzz_target;
use num_complex::Complex;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let room = 1 + data[0] as usize % 64;
    let zero_fill = data[1] & 1 == 1;
    let mut dp = Depacketizer::<Complex<i16>>::new(
        Decoder::new(WireFormat::Sc16Chdr).unwrap(),
        DepacketizerConfig {
            zero_fill,
            ..Default::default()
        },
    );
    // Datagrams: (length, gap frames and ambiguity, eob) from each 3 bytes.
    let payload = [0x11u8; 300];
    let dgs: Vec<DatagramIn<'_>> = data[2..]
        .chunks(3)
        .map(|c| {
            let mut d = DatagramIn::new(&payload[..c[0] as usize % 300]);
            d.gap = Gap {
                frames: u64::from(*c.get(1).unwrap_or(&0) % 4),
                bytes: None,
                ambiguous: c.get(1).is_some_and(|b| b & 4 != 0),
            };
            d.eob = c.get(2).is_some_and(|b| b & 1 == 1);
            d
        })
        .collect();
    let mut out = vec![Complex::default(); room];
    let (mut next, mut total) = (0, 0u64);
    // Every call makes progress (writes an item or takes a datagram) until all is out: a
    // call that does neither would be a consumer spinning for ever.
    loop {
        let taken = next;
        let mut w = dp.writer(&mut out);
        while next < dgs.len() && !w.pending() && w.room() > 0 {
            w.push(&dgs[next]);
            next += 1;
        }
        let pending = w.pending();
        let (n, tags) = w.finish();
        assert!(n <= room);
        assert!(tags.iter().all(|t| t.index < n));
        total += n as u64;
        if next == dgs.len() && !pending {
            break;
        }
        assert!(n > 0 || next > taken, "a call without progress");
    }
    let s = dp.stats();
    assert_eq!(s.items, total);
    assert_eq!(s.datagrams, dgs.len() as u64);
    if zero_fill {
        assert_eq!(s.zeros_inserted, s.missed_items);
    }
});
