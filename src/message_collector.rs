//! [`MessageCollector`]: a message sink that keeps what it receives and ends when its senders
//! have finished, so that a flowgraph with connected message ports ends by itself.

use std::sync::Arc;

use futuresdr::runtime::dev::prelude::*;

type Callback = Arc<dyn Fn(&Pmt) + Send + Sync>;

/// Keeps every message it receives (and optionally hands each to a callback, for printing),
/// and finishes once `senders` `Pmt::Finished` messages have arrived: one per connected
/// message output, since FutureSDR sends `Finished` on each. FutureSDR 0.0.40's
/// `MessagePipe`/`MessageApply` forward `Finished` but never end, so a graph with those
/// connected to a source's ports does not return from `Runtime::run`; this block does.
///
/// # Message Inputs
///
/// `in`: any message. `Pmt::Finished` counts towards the end.
///
/// # Usage
/// ```
/// use fsdr_net::MessageCollector;
///
/// // One collector for the `missed` and `stats` ports of a source: two senders.
/// let c = MessageCollector::new().senders(2).on_message(|m| println!("{m:?}"));
/// assert!(c.messages().is_empty());
/// ```
#[derive(Block)]
#[message_inputs(r#in)]
#[null_kernel]
pub struct MessageCollector {
    messages: Vec<Pmt>,
    senders: usize,
    finished: usize,
    callback: Option<Callback>,
}

impl std::fmt::Debug for MessageCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MessageCollector")
            .field("messages", &self.messages.len())
            .field("senders", &self.senders)
            .finish_non_exhaustive()
    }
}

impl Default for MessageCollector {
    fn default() -> Self {
        Self::new()
    }
}

impl MessageCollector {
    /// A collector that ends after one `Finished`.
    pub fn new() -> Self {
        Self {
            messages: Vec::new(),
            senders: 1,
            finished: 0,
            callback: None,
        }
    }

    /// The number of message outputs connected to `in` (how many `Finished` end it).
    pub fn senders(mut self, n: usize) -> Self {
        self.senders = n.max(1);
        self
    }

    /// Calls `f` with every message as it arrives (`Finished` excepted).
    pub fn on_message(mut self, f: impl Fn(&Pmt) + Send + Sync + 'static) -> Self {
        self.callback = Some(Arc::new(f));
        self
    }

    /// The messages received, in order (`Finished` excepted).
    pub fn messages(&self) -> &[Pmt] {
        &self.messages
    }

    async fn r#in(
        &mut self,
        io: &mut WorkIo,
        _mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
        p: Pmt,
    ) -> Result<Pmt> {
        match p {
            Pmt::Finished => {
                self.finished += 1;
                if self.finished >= self.senders {
                    io.finished = true;
                }
            }
            p => {
                if let Some(f) = &self.callback {
                    f(&p);
                }
                self.messages.push(p);
            }
        }
        Ok(Pmt::Ok)
    }
}
