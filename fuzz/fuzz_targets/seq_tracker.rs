//! The sequence tracker and the reorder stage: any sequence of numbers, in any width and
//! window, never panics, and what the reorder stage delivers between resyncs is in order.
#![no_main]

use fsdr_net_io::seq::{Reorder, SeqConfig, SeqEvent, SeqTracker};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let bits = [4u32, 16, 64][data[0] as usize % 3];
    let window = data[1] as usize % 100;
    let seqs: Vec<u64> = data[2..]
        .chunks(2)
        .map(|c| u64::from(c[0]) | u64::from(*c.get(1).unwrap_or(&0)) << 8)
        .collect();
    let mut t = SeqTracker::new(SeqConfig::for_bits(bits));
    for &s in &seqs {
        let _ = t.observe(s);
    }
    let mut r = Reorder::new(SeqConfig::for_bits(64), window);
    let mut out = Vec::new();
    for &s in &seqs {
        r.push(s, s, &mut out);
    }
    r.flush_all(&mut out);
    let mut last: Option<u64> = None;
    for d in out.iter().filter(|d| d.deliver) {
        if !matches!(d.event, SeqEvent::Resync | SeqEvent::First)
            && let Some(l) = last
        {
            assert!(d.item > l, "{} after {}", d.item, l);
        }
        last = Some(d.item);
    }
});
