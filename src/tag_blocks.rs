//! [`TagSource`] and [`TagSink`]: the two ends a flowgraph needs to put tags on a stream and
//! to see them come out — given items with given tags on given items, and every item and tag
//! kept. FutureSDR 0.0.40 has neither; the transmit tags ([`UdpSink`](crate::UdpSink)'s
//! `tx_*`) and the receive tags ([`UdpSource`](crate::UdpSource)'s `rx_*`) are shown with
//! them in the crate's documentation.

use futuresdr::runtime::dev::prelude::*;

use crate::Error;

/// Emits the items it was given, each tag on the item it was given for, then finishes.
///
/// # Stream Outputs
///
/// `output`: the items, with the tags.
///
/// # Usage
/// ```
/// use fsdr_net::{TAG_TX_EOB, TAG_TX_SOB, TagSink, TagSource};
/// use futuresdr::runtime::dev::Tag;
/// use futuresdr::runtime::macros::connect;
/// use futuresdr::runtime::{Flowgraph, Runtime};
///
/// # fn main() -> anyhow::Result<()> {
/// futuresdr::runtime::config::set("ctrlport_enable", false);
/// // One burst of 100 items: its start on item 0, its end on item 99.
/// let src = TagSource::new(
///     vec![0.5f32; 100],
///     [
///         (0, Tag::NamedUsize(TAG_TX_SOB.to_string(), 1)),
///         (99, Tag::NamedUsize(TAG_TX_EOB.to_string(), 1)),
///     ],
/// )?;
/// let snk = TagSink::<f32>::new();
/// let mut fg = Flowgraph::new();
/// connect!(fg, src > snk);
/// let fg = Runtime::new().run(fg)?;
/// let snk = fg.block(&snk)?;
/// assert_eq!(snk.items().len(), 100);
/// assert_eq!(snk.tagged(TAG_TX_EOB).map(|(i, _)| i).collect::<Vec<_>>(), [99]);
/// # Ok(())
/// # }
/// ```
#[derive(Block)]
pub struct TagSource<T: CpuSample> {
    #[output]
    output: DefaultCpuWriter<T>,
    items: Vec<T>,
    /// (item, tag), by item.
    tags: Vec<(usize, Tag)>,
    sent: usize,
}

impl<T: CpuSample> TagSource<T> {
    /// A source of `items` with each `(item, tag)` of `tags` on its item (in the order
    /// given where several share one); an error for a tag past the last item.
    pub fn new(items: Vec<T>, tags: impl IntoIterator<Item = (usize, Tag)>) -> Result<Self, Error> {
        let mut tags: Vec<(usize, Tag)> = tags.into_iter().collect();
        if let Some((at, _)) = tags.iter().find(|(at, _)| *at >= items.len()) {
            return Err(Error::config(format!(
                "a tag on item {at} of {} items",
                items.len()
            )));
        }
        tags.sort_by_key(|(at, _)| *at);
        Ok(Self {
            output: DefaultCpuWriter::default(),
            items,
            tags,
            sent: 0,
        })
    }
}

#[doc(hidden)]
impl<T: CpuSample> Kernel for TagSource<T> {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        _mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        let (out, mut tags) = self.output.slice_with_tags();
        let n = out.len().min(self.items.len() - self.sent);
        out[..n].clone_from_slice(&self.items[self.sent..self.sent + n]);
        let first = self.tags.partition_point(|(at, _)| *at < self.sent);
        for (at, tag) in self.tags[first..]
            .iter()
            .take_while(|(at, _)| *at < self.sent + n)
        {
            tags.add_tag(at - self.sent, tag.clone());
        }
        self.sent += n;
        self.output.produce(n);
        io.finished = self.sent == self.items.len();
        Ok(())
    }
}

/// Keeps every item it reads and every tag, at its item's index in the stream, for a look
/// after the run — the tags a [`UdpSource`](crate::UdpSource) put on a received stream, or
/// what any block passes on. `I` is the reader: FutureSDR's default buffer, or another
/// (such as an [`InPlaceUdpSource`](crate::InPlaceUdpSource)'s circuit).
///
/// # Stream Inputs
///
/// `input`: items and tags to keep.
///
/// # Stream Outputs
///
/// No stream outputs.
#[derive(Block)]
pub struct TagSink<T: CpuSample, I: CpuBufferReader<Item = T> = DefaultCpuReader<T>> {
    #[input]
    input: I,
    items: Vec<T>,
    tags: Vec<(usize, Tag)>,
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

    /// Every item read, in order.
    pub fn items(&self) -> &[T] {
        &self.items
    }

    /// Every tag read, with its item's index in [`items`](Self::items), in stream order.
    pub fn tags(&self) -> &[(usize, Tag)] {
        &self.tags
    }

    /// The tags named `name` (`NamedUsize`, `NamedF32`, `NamedAny` or `String`), with their
    /// items' indices.
    pub fn tagged<'a>(&'a self, name: &'a str) -> impl Iterator<Item = (usize, &'a Tag)> + 'a {
        self.tags
            .iter()
            .filter(move |(_, t)| tag_name(t) == Some(name))
            .map(|(at, t)| (*at, t))
    }
}

impl<T: CpuSample, I: CpuBufferReader<Item = T>> Default for TagSink<T, I> {
    fn default() -> Self {
        Self::new()
    }
}

/// The name of a named tag (`String` tags are their name).
fn tag_name(tag: &Tag) -> Option<&str> {
    match tag {
        Tag::NamedUsize(n, _) | Tag::NamedF32(n, _) | Tag::NamedAny(n, _) => Some(n),
        Tag::String(s) => Some(s),
        _ => None,
    }
}

#[doc(hidden)]
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
