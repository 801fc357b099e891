//! A sink that keeps every item and tag it reads, for the flowgraph tests that check both
//! (`#[path]`-included by each).

use futuresdr::runtime::dev::prelude::*;

/// Collects items and their tags (absolute indices), from FutureSDR's default buffer or
/// (`I`) another reader, such as the in-place source's circuit.
#[derive(Block)]
pub struct TagSink<T: CpuSample, I: CpuBufferReader<Item = T> = DefaultCpuReader<T>> {
    #[input]
    input: I,
    /// Every item read, in order.
    pub items: Vec<T>,
    /// Every tag read, at its item's index in `items`.
    pub tags: Vec<(usize, Tag)>,
}

impl<T: CpuSample, I: CpuBufferReader<Item = T>> TagSink<T, I> {
    /// An empty sink.
    pub fn new() -> Self {
        Self {
            input: I::default(),
            items: Vec::new(),
            tags: Vec::new(),
        }
    }
}

impl<T: CpuSample, I: CpuBufferReader<Item = T>> Kernel for TagSink<T, I> {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        _mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        let (items, tags) = self.input.slice_with_tags();
        let base = self.items.len();
        for t in tags.iter() {
            self.tags.push((base + t.index, t.tag.clone()));
        }
        let n = items.len();
        self.items.extend_from_slice(items);
        self.input.consume(n);
        if self.input.finished() {
            io.finished = true;
        }
        Ok(())
    }
}
