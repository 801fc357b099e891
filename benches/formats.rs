//! Parse and emit cost of every packet format, and decode throughput of every wire sample
//! encoding, for 8000-byte (10 GbE USRP) and 1472-byte (standard MTU) datagrams.
//! `cargo bench --bench formats`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fsdr_net::io::Format;
use fsdr_net::io::format::DataHeader;
use fsdr_net::io::sample::{Decoder, Item, WireFormat};
use futuresdr::num_complex::{Complex, Complex32};

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
            let fields = DataHeader {
                seq: 1,
                timestamp: Some(1000),
                ..Default::default()
            };
            format.emit_header(&mut dg, &fields).unwrap();
            group.bench_function(format!("parse/{format}"), |b| {
                b.iter(|| black_box(format.parse(black_box(&dg)).unwrap()))
            });
            let mut seq = 0u64;
            group.bench_function(format!("emit/{format}"), |b| {
                b.iter(|| {
                    seq += 1;
                    let fields = DataHeader {
                        seq,
                        timestamp: Some(seq),
                        ..Default::default()
                    };
                    black_box(format.emit_header(black_box(&mut dg), &fields))
                })
            });
        }
        group.finish();
    }
}

/// Decodes a payload of `bytes` wire bytes (8-byte aligned, as a slot's payload after an
/// 8- or 16-byte header is) into items `T`.
fn decode<T: Item>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    wire: WireFormat,
    bytes: usize,
) {
    let d = Decoder::<T>::new(wire).unwrap();
    let payload: Vec<u8> = (0..bytes).map(|i| (i * 7) as u8).collect();
    let mut out = vec![T::default(); d.items_in(bytes)];
    group.bench_function(format!("{wire}->{}", T::NAME.replace(' ', "")), |b| {
        b.iter(|| black_box(d.decode(black_box(&payload), &mut out)))
    });
}

fn samples(c: &mut Criterion) {
    let bytes = 7984; // one CHDR datagram's payload: 1996 sc16 samples
    let mut group = c.benchmark_group("decode");
    group.throughput(Throughput::Bytes(bytes as u64));
    for wire in [
        WireFormat::Sc16Chdr,
        WireFormat::Sc16Item32Le,
        WireFormat::Sc16Item32Be,
        WireFormat::Sc8Item32Be,
        WireFormat::Sc8Difi,
        WireFormat::Fc32,
    ] {
        decode::<Complex32>(&mut group, wire, bytes);
    }
    decode::<Complex<i16>>(&mut group, WireFormat::Sc16Item32Be, bytes);
    decode::<Complex<i16>>(&mut group, WireFormat::Plain, bytes);
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20);
    targets = formats, samples
}
criterion_main!(benches);
