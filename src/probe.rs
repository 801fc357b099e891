//! LTTng probe blocks: [`ProbeSource`] (`tx`), [`ProbeSink`] (`rx`) and the pass-through
//! [`Probe`] (`probe`), which mark every `granularity`-th item of a pipe so that a trace
//! gives the latency from one point of a flowgraph to another (see `fsdr-net-lttng` and
//! `tracing/README.md`).
//!
//! A pipe is named by a [`ProbeSpec`]: the source draws a fresh id, and the sink and probes
//! that measure it are built from the source's spec, so tx and rx of one pipe match without
//! any bookkeeping. Without the `lttng` feature the blocks still count items and the
//! tracepoint calls compile to nothing.

use futuresdr::runtime::dev::prelude::*;

use crate::io::sample::Item;
use fsdr_net_lttng::Marks;

/// Names one measured pipe: its id and how many items lie between two marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeSpec {
    /// Pipe id (the `block` field of the events).
    pub block: u64,
    /// Items between two marks (the `seq` field counts marks).
    pub granularity: u64,
}

impl ProbeSpec {
    /// A spec with a fresh pipe id for this process.
    pub fn fresh(granularity: u64) -> Self {
        ProbeSpec {
            block: fsdr_net_lttng::next_block_id(),
            granularity: granularity.max(1),
        }
    }
}

/// A null source that fires `fsdr_net:tx` at every `granularity`-th item it produces.
///
/// Items are produced without being written (any bit pattern is a valid [`Item`]), as
/// FutureSDR's `NullSource` does, so the source costs next to nothing.
///
/// # Stream Inputs
///
/// No stream inputs.
///
/// # Stream Outputs
///
/// `output`: items of type `T`, `limit` of them if set, else without end.
///
/// # Usage
/// ```
/// use fsdr_net::{ProbeSink, ProbeSource};
///
/// let src = ProbeSource::<f32>::new(32768).limit(1 << 20);
/// let snk = ProbeSink::<f32>::new(src.spec());
/// assert_eq!(src.spec(), snk.spec());
/// ```
#[derive(Block)]
pub struct ProbeSource<T: Item> {
    #[output]
    output: DefaultCpuWriter<T>,
    marks: Marks,
    spec: ProbeSpec,
    limit: Option<u64>,
}

impl<T: Item> ProbeSource<T> {
    /// A source of a new pipe, marking every `granularity` items.
    pub fn new(granularity: u64) -> Self {
        Self::with_spec(ProbeSpec::fresh(granularity))
    }

    /// A source with a given pipe id and granularity.
    pub fn with_spec(spec: ProbeSpec) -> Self {
        Self {
            output: DefaultCpuWriter::default(),
            marks: Marks::new(spec.block, spec.granularity),
            spec,
            limit: None,
        }
    }

    /// Stop after `items` items (a built-in head).
    pub fn limit(mut self, items: u64) -> Self {
        self.limit = Some(items);
        self
    }

    /// The pipe this source starts; build its sink and probes from it.
    pub fn spec(&self) -> ProbeSpec {
        self.spec
    }

    /// Items produced.
    pub fn items(&self) -> u64 {
        self.marks.items()
    }
}

#[doc(hidden)]
impl<T: Item> Kernel for ProbeSource<T> {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        _mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        let room = self.output.slice().len() as u64;
        let n = match self.limit {
            Some(l) => room.min(l - self.marks.items()),
            None => room,
        };
        // Marks fire before the items become visible downstream, so tx precedes rx.
        self.marks.advance(n, fsdr_net_lttng::tx);
        self.output.produce(n as usize);
        if self.limit.is_some_and(|l| self.marks.items() >= l) {
            io.finished = true;
        }
        Ok(())
    }
}

/// A null sink that fires `fsdr_net:rx` at every `granularity`-th item it consumes.
///
/// # Stream Inputs
///
/// `input`: items of type `T`.
///
/// # Stream Outputs
///
/// No stream outputs.
///
/// # Usage
/// ```
/// use fsdr_net::{ProbeSink, ProbeSource};
///
/// let src = ProbeSource::<u8>::new(4096);
/// let snk = ProbeSink::<u8>::new(src.spec());
/// assert_eq!(snk.items(), 0);
/// ```
#[derive(Block)]
pub struct ProbeSink<T: Item> {
    #[input]
    input: DefaultCpuReader<T>,
    marks: Marks,
    spec: ProbeSpec,
}

impl<T: Item> ProbeSink<T> {
    /// The sink of the pipe `spec` (take it from the pipe's source).
    pub fn new(spec: ProbeSpec) -> Self {
        Self {
            input: DefaultCpuReader::default(),
            marks: Marks::new(spec.block, spec.granularity),
            spec,
        }
    }

    /// The pipe this sink ends.
    pub fn spec(&self) -> ProbeSpec {
        self.spec
    }

    /// Items consumed.
    pub fn items(&self) -> u64 {
        self.marks.items()
    }
}

#[doc(hidden)]
impl<T: Item> Kernel for ProbeSink<T> {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        _mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        let n = self.input.slice().len();
        self.marks.advance(n as u64, fsdr_net_lttng::rx);
        self.input.consume(n);
        if self.input.finished() {
            io.finished = true;
        }
        Ok(())
    }
}

/// A pass-through block that fires `fsdr_net:probe` at every `granularity`-th item going
/// through, to instrument any edge of a flowgraph. Tags are passed on.
///
/// # Stream Inputs
///
/// `input`: items of type `T`.
///
/// # Stream Outputs
///
/// `output`: the same items, unchanged.
///
/// # Usage
/// ```
/// use fsdr_net::{Probe, ProbeSource};
///
/// let src = ProbeSource::<f32>::new(1024);
/// let mid = Probe::<f32>::new(src.spec());
/// assert_eq!(mid.spec().block, src.spec().block);
/// ```
#[derive(Block)]
pub struct Probe<T: Item> {
    #[input]
    input: DefaultCpuReader<T>,
    #[output]
    output: DefaultCpuWriter<T>,
    marks: Marks,
    spec: ProbeSpec,
}

impl<T: Item> Probe<T> {
    /// A probe on the pipe `spec` (take it from the pipe's source).
    pub fn new(spec: ProbeSpec) -> Self {
        Self {
            input: DefaultCpuReader::default(),
            output: DefaultCpuWriter::default(),
            marks: Marks::new(spec.block, spec.granularity),
            spec,
        }
    }

    /// The pipe this probe watches.
    pub fn spec(&self) -> ProbeSpec {
        self.spec
    }

    /// Items passed through.
    pub fn items(&self) -> u64 {
        self.marks.items()
    }
}

#[doc(hidden)]
impl<T: Item> Kernel for Probe<T> {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        _mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        let (input, in_tags) = self.input.slice_with_tags();
        let (output, mut out_tags) = self.output.slice_with_tags();
        let n = input.len().min(output.len());
        output[..n].copy_from_slice(&input[..n]);
        for t in in_tags.iter().filter(|t| t.index < n) {
            out_tags.add_tag(t.index, t.tag.clone());
        }
        let drained = n == input.len();
        self.marks.advance(n as u64, fsdr_net_lttng::probe);
        self.input.consume(n);
        self.output.produce(n);
        if self.input.finished() && drained {
            io.finished = true;
        }
        Ok(())
    }
}
