//! The probe blocks as flowgraph blocks (with or without the `lttng` feature): counts, the
//! built-in limit, pass-through of items and tags, shared pipe ids, under both schedulers.

use fsdr_net::{Probe, ProbeSink, ProbeSource, ProbeSpec};
use futuresdr::blocks::VectorSource;
use futuresdr::runtime::dev::prelude::*;
use futuresdr::runtime::macros::connect;
use futuresdr::runtime::scheduler::{FlowScheduler, SmolScheduler};
use futuresdr::runtime::{Flowgraph, Runtime};

fn run(fg: Flowgraph, flow: bool) -> Flowgraph {
    futuresdr::runtime::config::set("ctrlport_enable", false);
    if flow {
        Runtime::with_scheduler(FlowScheduler::new()).run(fg)
    } else {
        Runtime::with_scheduler(SmolScheduler::new(2, false)).run(fg)
    }
    .expect("flowgraph runs")
}

#[test]
fn source_limit_probe_and_sink_count_every_item() -> anyhow::Result<()> {
    for flow in [false, true] {
        let src = ProbeSource::<f32>::new(1000).limit(123_457);
        let spec = src.spec();
        let mid = Probe::<f32>::new(spec);
        let snk = ProbeSink::<f32>::new(spec);
        assert_eq!((mid.spec(), snk.spec()), (spec, spec));
        let mut fg = Flowgraph::new();
        connect!(fg, src > mid > snk);
        let fg = run(fg, flow);
        assert_eq!(fg.block(&src)?.items(), 123_457);
        assert_eq!(fg.block(&mid)?.items(), 123_457);
        assert_eq!(fg.block(&snk)?.items(), 123_457);
    }
    Ok(())
}

#[test]
fn pipes_get_distinct_ids_and_sinks_follow_their_source() {
    let a = ProbeSource::<u8>::new(64);
    let b = ProbeSource::<u8>::new(64);
    assert_ne!(a.spec().block, b.spec().block);
    assert_eq!(ProbeSink::<u8>::new(b.spec()).spec().block, b.spec().block);
    let zero = ProbeSpec::fresh(0);
    assert_eq!(zero.granularity, 1, "a zero granularity is clamped to 1");
}

/// Collects items and the indices of tags.
#[derive(Block)]
struct Collect {
    #[input]
    input: DefaultCpuReader<u32>,
    items: Vec<u32>,
    tags: Vec<(usize, String)>,
}

impl Kernel for Collect {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        _mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        let (input, tags) = self.input.slice_with_tags();
        let base = self.items.len();
        for t in tags.iter() {
            if let Tag::String(s) = &t.tag {
                self.tags.push((base + t.index, s.clone()));
            }
        }
        let n = input.len();
        self.items.extend_from_slice(input);
        self.input.consume(n);
        if self.input.finished() {
            io.finished = true;
        }
        Ok(())
    }
}

/// Adds a string tag at every 1000th item.
#[derive(Block)]
struct Tagger {
    #[input]
    input: DefaultCpuReader<u32>,
    #[output]
    output: DefaultCpuWriter<u32>,
    seen: usize,
}

impl Kernel for Tagger {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        _mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        let input = self.input.slice();
        let (output, mut tags) = self.output.slice_with_tags();
        let n = input.len().min(output.len());
        output[..n].copy_from_slice(&input[..n]);
        for i in 0..n {
            if (self.seen + i).is_multiple_of(1000) {
                tags.add_tag(i, Tag::String(format!("t{}", self.seen + i)));
            }
        }
        self.seen += n;
        let done = n == input.len();
        self.input.consume(n);
        self.output.produce(n);
        if self.input.finished() && done {
            io.finished = true;
        }
        Ok(())
    }
}

#[test]
fn probe_passes_items_and_tags_unchanged() -> anyhow::Result<()> {
    let data: Vec<u32> = (0..20_000).collect();
    let src = VectorSource::<u32>::new(data.clone());
    let tag = Tagger {
        input: Default::default(),
        output: Default::default(),
        seen: 0,
    };
    let probe = Probe::<u32>::new(ProbeSpec::fresh(512));
    let snk = Collect {
        input: Default::default(),
        items: Vec::new(),
        tags: Vec::new(),
    };
    let mut fg = Flowgraph::new();
    connect!(fg, src > tag > probe > snk);
    let fg = run(fg, true);
    let c = fg.block(&snk)?;
    assert_eq!(c.items, data);
    let want: Vec<(usize, String)> = (0..20)
        .map(|k| (k * 1000, format!("t{}", k * 1000)))
        .collect();
    assert_eq!(c.tags, want);
    Ok(())
}

#[test]
fn a_probed_udp_source_names_its_pipe_and_its_sink_sees_every_item() -> anyhow::Result<()> {
    use fsdr_net::UdpSource;
    use std::time::Duration;
    let plain = UdpSource::<u8>::builder("127.0.0.1:0").build()?;
    assert_eq!(plain.probe_spec(), None);
    let src = UdpSource::<u8>::builder("127.0.0.1:0")
        .probe(1000)
        .stats_interval(None)
        .finish_after_idle(Duration::from_millis(300))
        .build()?;
    let spec = src.probe_spec().expect("probed");
    assert_eq!(spec.granularity, 1000);
    let to = src.local_addr();
    let snk = ProbeSink::<u8>::new(spec);
    let mut fg = Flowgraph::new();
    connect!(fg, src > snk);
    let tx = std::net::UdpSocket::bind("127.0.0.1:0")?;
    for _ in 0..50 {
        tx.send_to(&[7u8; 1000], to)?;
    }
    let fg = run(fg, false);
    assert_eq!(fg.block(&snk)?.items(), 50_000);
    Ok(())
}
