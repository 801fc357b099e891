//! The latency flowgraph of FutureSDR's scheduler study, with fsdr-net's probe blocks:
//! P parallel pipes of `ProbeSource → S × CopyRand → ProbeSink`, where each copy stage moves a
//! random 1..=512 items per call. The source fires `fsdr_net:tx` and the sink `fsdr_net:rx`
//! every `granularity` items; a trace of a run gives the latency distribution
//! (`cargo xtask latency` records and analyses one).
//!
//! ```text
//! cargo run --release --features lttng --example latency -- --pipes 2 --stages 2
//! ```
//! Without `--features lttng` it runs the same flowgraph with the tracepoints compiled out.

mod common;

use std::time::Instant;

use anyhow::{Result, bail};
use clap::Parser;
use fsdr_net::{ProbeSink, ProbeSource};
use futuresdr::runtime::dev::prelude::*;
use futuresdr::runtime::scheduler::{FlowScheduler, SmolScheduler};
use futuresdr::runtime::{Flowgraph, Runtime};

/// P pipes of ProbeSource → S random-copy stages → ProbeSink.
#[derive(Parser, Debug)]
#[command(allow_negative_numbers = true)]
#[command(version)]
struct Args {
    /// Parallel pipes.
    #[arg(long, default_value_t = 2)]
    pipes: usize,
    /// Copy stages per pipe.
    #[arg(long, default_value_t = 2)]
    stages: usize,
    /// Items between two tracepoint marks.
    #[arg(long, default_value_t = 32768)]
    granularity: u64,
    /// Items per pipe (accepts 1e8). Marks fall on items 0, G, 2G, …, so N items carry
    /// ⌈N / G⌉ marks: exactly N / G for the default 2^27 and any power-of-two granularity.
    #[arg(long, default_value = "134217728", value_parser = common::parse_u64)]
    items: u64,
    /// Largest copy per call of a stage.
    #[arg(long, default_value_t = 512)]
    max_copy: usize,
    /// Scheduler: smol (FutureSDR's default, one worker per core), smol1 (one worker) or
    /// flow.
    #[arg(long, default_value = "smol")]
    scheduler: String,
    /// Print one line of JSON instead of text.
    #[arg(long)]
    json: bool,
}

/// Copies a random 1..=`max` items per call (bounded by input and output), as FutureSDR's
/// `CopyRand` in its latency study.
#[derive(Block)]
struct CopyRand {
    #[input]
    input: DefaultCpuReader<f32>,
    #[output]
    output: DefaultCpuWriter<f32>,
    max: usize,
    rng: u64,
}

impl CopyRand {
    fn new(max: usize, seed: u64) -> Self {
        CopyRand {
            input: Default::default(),
            output: Default::default(),
            max: max.max(1),
            rng: seed | 1,
        }
    }

    /// xorshift64: cheap and good enough to vary the copy size.
    fn next(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        self.rng
    }
}

impl Kernel for CopyRand {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        _mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        let r = self.next();
        let input = self.input.slice();
        let output = self.output.slice();
        let avail = input.len().min(output.len()).min(self.max);
        if avail > 0 {
            let n = 1 + (r % avail as u64) as usize;
            output[..n].copy_from_slice(&input[..n]);
            let left = input.len() - n;
            self.input.consume(n);
            self.output.produce(n);
            if left > 0 {
                io.call_again = true;
            }
        }
        if self.input.finished() && self.input.slice().is_empty() {
            io.finished = true;
        }
        Ok(())
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    common::init_logging();
    futuresdr::runtime::config::set("ctrlport_enable", false);
    if args.pipes == 0 || args.granularity == 0 {
        bail!("--pipes and --granularity must be at least 1");
    }
    let mut fg = Flowgraph::new();
    let mut sinks = Vec::new();
    let mut specs = Vec::new();
    // Blocks are added in flow order, pipe by pipe (the flow scheduler follows that order).
    for p in 0..args.pipes {
        let src = ProbeSource::<f32>::new(args.granularity).limit(args.items);
        specs.push(src.spec());
        let snk = ProbeSink::<f32>::new(src.spec());
        let src = fg.add(src);
        let mut prev = src.id();
        for s in 0..args.stages {
            let c = fg.add(CopyRand::new(args.max_copy, (p * 1000 + s + 1) as u64));
            fg.stream_dyn(prev, "output", c.id(), "input")?;
            prev = c.id();
        }
        let snk = fg.add(snk);
        fg.stream_dyn(prev, "output", snk.id(), "input")?;
        sinks.push(snk);
    }
    let start = Instant::now();
    let fg = match args.scheduler.as_str() {
        "smol" => Runtime::new().run(fg)?,
        "smol1" => Runtime::with_scheduler(SmolScheduler::new(1, false)).run(fg)?,
        "flow" => Runtime::with_scheduler(FlowScheduler::new()).run(fg)?,
        other => bail!("unknown scheduler {other:?}: smol, smol1 or flow"),
    };
    let seconds = start.elapsed().as_secs_f64();
    let mut received = Vec::new();
    for s in &sinks {
        received.push(fg.block(s)?.items());
    }
    let marks: Vec<u64> = received
        .iter()
        .map(|&n| n.div_ceil(args.granularity))
        .collect();
    if args.json {
        println!(
            "{}",
            serde_json::json!({
                "pipes": args.pipes,
                "stages": args.stages,
                "granularity": args.granularity,
                "items": args.items,
                "scheduler": args.scheduler,
                "seconds": seconds,
                "blocks": specs.iter().map(|s| s.block).collect::<Vec<_>>(),
                "received": received,
                "marks": marks,
                "tracepoints": fsdr_net::lttng::ENABLED,
            })
        );
    } else {
        for (spec, (n, m)) in specs.iter().zip(received.iter().zip(&marks)) {
            println!("pipe {}: {n} items, {m} marks", spec.block);
        }
        println!(
            "{} pipes × {} stages, {} scheduler: {:.2} s, {:.1} M items/s per pipe (tracepoints {})",
            args.pipes,
            args.stages,
            args.scheduler,
            seconds,
            args.items as f64 / seconds / 1e6,
            if fsdr_net::lttng::ENABLED {
                "compiled in"
            } else {
                "compiled out"
            }
        );
    }
    if received.iter().any(|&n| n != args.items) {
        bail!(
            "a sink received {received:?} items instead of {}",
            args.items
        );
    }
    Ok(())
}
