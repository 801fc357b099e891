//! Parse and emit cost of every packet format, and decode throughput of every wire sample
//! encoding, for 8000-byte (10 GbE USRP) and 1472-byte (standard MTU) datagrams, and what
//! the sequence layer costs per datagram of a clean stream. `cargo bench --bench formats`.

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

/// The sequence layer's cost per datagram of a clean CHDR stream (1996 samples of sc16 a
/// datagram at 491.52 Msps, ticks at 200 MHz) as every receiver runs it: the packet's facts
/// from its parsed header (`Tracking::packet`, which reads the timestamp with the rates),
/// its 64-bit number and place (`StreamOrder::widen`), and its release (`push`). Without
/// rates the ratio is learnt from the stream; with them it is configured. `learnt-odd`:
/// 490.517 Msps (`cargo xtask loss --rates 1966`'s rate), 50000/490517 ticks a byte, whose
/// estimate goes on narrowing for gigabytes.
fn sequence(c: &mut Criterion) {
    use fsdr_net::io::format::{PacketClass, PacketInfo, Timestamp};
    use fsdr_net::io::seq::{StreamClock, StreamOrder, Tracking};
    let mut group = c.benchmark_group("sequence");
    group.throughput(Throughput::Elements(1));
    let rates = StreamClock {
        tick_rate: Some(200e6),
        sample_rate: Some(491.52e6),
        bytes_per_sample: 4,
    };
    for (name, clock, sps) in [
        ("learnt", StreamClock::default(), 491_520_000u128),
        ("learnt-odd", StreamClock::default(), 490_517_000),
        ("configured", rates, 491_520_000),
    ] {
        let tracking = Tracking::for_format(Format::Chdr, 1)
            .unwrap()
            .with_clock(clock);
        let mut order = StreamOrder::new(tracking, 64);
        let mut out = Vec::new();
        let (spp, mut k) = (1996u64, 0u64);
        group.bench_function(format!("chdr/{name}"), |b| {
            b.iter(|| {
                // 1996 samples are 812 109.375 ticks at 200 MHz: whole ticks, rounded.
                let ticks = (u128::from(k * spp) * 400_000_000 / sps).div_ceil(2) as u64;
                let info = PacketInfo {
                    class: PacketClass::Data,
                    seq: Some(k & 0xffff),
                    payload_offset: 16,
                    payload_len: 7984,
                    timestamp: Some(Timestamp::Ticks(ticks)),
                    eob: false,
                    stream_id: None,
                };
                let p = tracking.packet(black_box(&info));
                let w = order.widen(&p);
                order.push(w, &p, k, &mut out);
                k += 1;
                black_box(out.pop())
            })
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20);
    targets = formats, samples, sequence
}
criterion_main!(benches);
