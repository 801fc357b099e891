//! The control-message parser: any bytes (truncated, crafted, misaligned) yield messages that
//! lie inside the buffer and metadata that is either read whole or not at all; nothing reads
//! out of bounds (the parser has no `unsafe`) and nothing panics.
#![no_main]

use fsdr_net_io::sys::RecvMeta;
use fsdr_net_io::sys::cmsg::{ControlMessages, HEADER};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Every alignment of the same bytes.
    for shift in 0..data.len().min(8) {
        let buf = &data[shift..];
        let mut seen = 0usize;
        for m in ControlMessages::new(buf) {
            seen += HEADER + m.data.len();
            assert!(seen <= buf.len() + 8);
        }
        let mut meta = RecvMeta::default();
        fsdr_net_io::sys::parse_control(buf, &mut meta);
        if let Some(ns) = meta.timestamp_ns {
            assert!(ns % 1_000_000_000 < 1_000_000_000);
        }
        if let Some(seg) = meta.gro_segment {
            assert!(seg > 0);
        }
    }
});
