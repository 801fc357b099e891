//! The receivers of several channels on one port (`--channels N`, as `usrp_sim --channels N`
//! sends them: stream ID or CHDR destination endpoint c): `MultiUdpSource` and
//! `MultiInPlaceUdpSource`, an output and a sink per channel.

use anyhow::Result;
use std::net::SocketAddr;

use fsdr_net::io::StreamSelector;
use fsdr_net::io::emulator::channel_stream_id;
use fsdr_net::{MultiSourceStats, SourceStats};
use futuresdr::blocks::NullSink;
use futuresdr::runtime::buffer::circuit;
use futuresdr::runtime::dev::prelude::*;
use futuresdr::runtime::{BlockRef, Flowgraph};

use crate::Args;
use crate::Outcome;
use crate::receivers::{flowgraph_outcome, run_flowgraph, source_builder};

/// The stream IDs of the channels.
fn selectors(args: &Args) -> impl Iterator<Item = StreamSelector> + use<> {
    let format = args.format;
    (0..args.channels).map(move |c| StreamSelector::Id(channel_stream_id(format, c)))
}

/// `MultiUdpSource`, one output per channel, each into its own sink.
pub(crate) fn flowgraph_multi(args: &Args) -> Result<Outcome> {
    let src = source_builder(args, args.bind).build_streams(selectors(args))?;
    let local = src.local_addr();
    let mut fg = Flowgraph::new();
    let src = fg.add(src);
    per_channel(
        args,
        fg,
        src,
        local,
        |fg, src, c| {
            let sink = fg.add(NullSink::<u8>::new());
            fg.stream(src, move |b| output(b.outputs(), c), &sink, |b| b.input())?;
            Ok(sink)
        },
        |fg, k| Ok(fg.block(k)?.n_received()),
        |fg, b| Ok(fg.block(b)?.stats()),
    )
}

/// `MultiInPlaceUdpSource`: one zero-copy output (and in-place receive thread and socket) per
/// channel, each into a sink that reads the circuit buffer in place.
pub(crate) fn flowgraph_multi_in_place(args: &Args) -> Result<Outcome> {
    let src = source_builder(args, args.bind).build_streams_in_place(selectors(args))?;
    let local = src.local_addr();
    let mut fg = Flowgraph::new();
    let src = fg.add(src);
    per_channel(
        args,
        fg,
        src,
        local,
        |fg, src, c| {
            let sink = fg.add(NullSink::<u8, circuit::Reader<u8>>::new());
            fg.stream(src, move |b| output(b.outputs(), c), &sink, |b| b.input())?;
            fg.close_circuit(src, move |b| output(b.outputs(), c), &sink, |b| b.input())?;
            Ok(sink)
        },
        |fg, k| Ok(fg.block(k)?.n_received()),
        |fg, b| Ok(fg.block(b)?.stats()),
    )
}

/// Output `c` of a multi-stream source.
fn output<W>(outputs: &mut [W], c: usize) -> &mut W {
    outputs.get_mut(c).expect("an output per channel")
}

/// Runs a multi-stream source (added to `fg`) with a sink per channel (`sink` adds it and connects it to
/// output c) and adds up what the sinks `received` and the source's counters (`stats`).
fn per_channel<S: Kernel + 'static, K: Kernel + 'static>(
    args: &Args,
    mut fg: Flowgraph,
    src: BlockRef<S>,
    local: SocketAddr,
    sink: impl Fn(&mut Flowgraph, &BlockRef<S>, usize) -> Result<BlockRef<K>>,
    received: impl Fn(&Flowgraph, &BlockRef<K>) -> Result<usize>,
    stats: impl Fn(&Flowgraph, &BlockRef<S>) -> Result<MultiSourceStats>,
) -> Result<Outcome> {
    let mut blocks = vec![src.id()];
    let mut sinks = Vec::with_capacity(args.channels);
    for c in 0..args.channels {
        let snk = sink(&mut fg, &src, c)?;
        blocks.push(snk.id());
        sinks.push(snk);
    }
    let fg = run_flowgraph(args, fg, local, blocks)?;
    let mut bytes = 0;
    for snk in &sinks {
        bytes += received(&fg, snk)? as u64;
    }
    let s = stats(&fg, &src)?;
    let mut out = flowgraph_outcome(
        args,
        bytes,
        SourceStats {
            engine: s.engine.clone(),
            ..SourceStats::default()
        },
    );
    // Every output's own drops (a `MultiUdpSource` reader late beyond the hold) and copies.
    out.overflows += s.streams.iter().map(|o| o.overflow).sum::<u64>();
    out.copied_bytes = Some(s.streams.iter().map(|o| o.stream.copied_bytes).sum());
    Ok(out)
}
