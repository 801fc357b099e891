//! What the LTTng probes cost: `ProbeSource → Probe → ProbeSink` flowgraph throughput (f32
//! items), with a mark every 32768 items (the latency study's granularity) and every 4096 items
//! (a stress case), in one of three modes named in the benchmark id:
//!
//! * `compiled-out`: built without the `lttng` feature (`cargo bench --bench probe`);
//! * `no-session`: built with it, no session recording (`--features lttng`);
//! * `recording`: built with it while a session records `fsdr_net:*` into a blocking channel
//!   (set `FSDR_NET_RECORDING=1`; `cargo xtask probe-bench` runs all three).
//!
//! One iteration is `ITEMS` items through the graph.

use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fsdr_net::{Probe, ProbeSink, ProbeSource};
use futuresdr::runtime::macros::connect;
use futuresdr::runtime::{Flowgraph, Runtime};

const ITEMS: u64 = 1 << 22;

fn mode() -> &'static str {
    if !fsdr_net::lttng::ENABLED {
        "compiled-out"
    } else if std::env::var_os("FSDR_NET_RECORDING").is_some() {
        "recording"
    } else {
        "no-session"
    }
}

fn run(granularity: u64, items: u64) -> anyhow::Result<Duration> {
    let src = ProbeSource::<f32>::new(granularity).limit(items);
    let mid = Probe::<f32>::new(src.spec());
    let snk = ProbeSink::<f32>::new(src.spec());
    let mut fg = Flowgraph::new();
    connect!(fg, src > mid > snk);
    let start = Instant::now();
    Runtime::new().run(fg)?;
    Ok(start.elapsed())
}

fn probe(c: &mut Criterion) {
    futuresdr::runtime::config::set("ctrlport_enable", false);
    let mut group = c.benchmark_group(format!("probe/{}", mode()));
    group.throughput(Throughput::Elements(ITEMS));
    for granularity in [32768u64, 4096] {
        group.bench_function(format!("granularity-{granularity}"), |b| {
            b.iter_custom(|n| run(granularity, n * ITEMS).expect("probe flowgraph"))
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .sample_size(10);
    targets = probe
}
criterion_main!(benches);
