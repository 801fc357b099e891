//! Parse and emit throughput of every packet format, for 8000-byte (10 GbE USRP) and
//! 1472-byte (standard MTU) datagrams. `cargo bench --bench formats`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fsdr_net::io::Format;

fn formats(c: &mut Criterion) {
    for size in [8000usize, 1472] {
        let mut group = c.benchmark_group(format!("formats/{size}B"));
        group.throughput(Throughput::Bytes(size as u64));
        for format in Format::ALL {
            // VRT datagrams are whole 32-bit words.
            let len = if format == Format::Vrt {
                size / 4 * 4
            } else {
                size
            };
            let mut dg = vec![0u8; len];
            format.emit_header(&mut dg, 1, Some(1000), false).unwrap();
            group.bench_function(format!("parse/{format}"), |b| {
                b.iter(|| black_box(format.parse(black_box(&dg)).unwrap()))
            });
            let mut seq = 0u64;
            group.bench_function(format!("emit/{format}"), |b| {
                b.iter(|| {
                    seq += 1;
                    black_box(format.emit_header(black_box(&mut dg), seq, Some(seq), false))
                })
            });
        }
        group.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20);
    targets = formats
}
criterion_main!(benches);
