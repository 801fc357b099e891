//! Zero copy for [`MultiUdpSource`]: one in-place receiver per stream (the receivers of
//! [`MultiInPlaceUdpSource`](super::MultiInPlaceUdpSource), the kernel sorting the
//! datagrams to their sockets) fills windows of its output's default buffer, as a zero-copy
//! [`UdpSource`](super::UdpSource) does for its one output (`window.rs`).

use std::time::Instant;

use futuresdr::runtime::dev::prelude::*;

use fsdr_net_io::sample::Item;

use super::inplace::skipped_keys;
use super::window::Produced;
use super::{MultiSourceStats, MultiUdpSource, SourceStats, context_pmt, gap_pmt};

impl<T: Item> MultiUdpSource<T> {
    /// Whether the outputs are filled in place ([`UdpSourceBuilder::zero_copy`]), each by
    /// an in-place receiver of its own, rather than by the engine and a copy.
    ///
    /// [`UdpSourceBuilder::zero_copy`]: crate::UdpSourceBuilder::zero_copy
    pub fn zero_copy(&self) -> bool {
        !self.windows.is_empty()
    }

    /// Every counter of a zero-copy source: live while running, final once shut down.
    pub(super) fn windows_stats(&self) -> MultiSourceStats {
        let each = self.windows.iter().map(|lane| {
            let (engine, stream) = lane.stats();
            SourceStats { engine, stream }
        });
        let skipped = self
            .windows
            .iter()
            .flat_map(|lane| skipped_keys(&lane.stats_handle()));
        MultiSourceStats::of_receivers(&self.selectors, each, skipped)
    }

    /// `work` of a zero-copy source: each output lends windows and produces the ones back;
    /// their messages are posted; the source ends after the idle time, or sleeps until a
    /// receiver signals.
    pub(super) async fn work_windows(
        &mut self,
        io: &mut WorkIo,
        mo: &mut MessageOutputs,
        now: Instant,
    ) -> Result<()> {
        if self.windows.iter().all(|lane| lane.rx.is_none()) {
            io.finished = true;
            return Ok(());
        }
        let mut produced = Vec::with_capacity(self.windows.len());
        for (lane, out) in self.windows.iter_mut().zip(&mut self.outputs) {
            lane.lend(out);
            let p = lane.take(out);
            lane.lend(out);
            produced.push(p);
        }
        self.post_windows(mo, produced, now).await?;
        if self.clock.idle_over(now) {
            // Every stream is over: stop the receivers, pass on what they still had, and
            // say so with the final counters.
            let produced: Vec<_> = self
                .windows
                .iter_mut()
                .zip(&mut self.outputs)
                .map(|(lane, out)| lane.shutdown(Some(out)))
                .collect();
            self.post_windows(mo, produced, now).await?;
            mo.post("stats", self.stats().to_pmt()).await?;
            io.finished = true;
            return Ok(());
        }
        // The receivers of one group signal one notifier.
        let notified = self.windows[0].notified();
        self.clock.sleep(io, notified, [self.clock.idle_end()], now);
        Ok(())
    }

    /// Posts the gaps (with their output) and contexts of the windows produced, output by
    /// output.
    async fn post_windows(
        &mut self,
        mo: &mut MessageOutputs,
        produced: Vec<Produced>,
        now: Instant,
    ) -> Result<()> {
        for (i, p) in produced.into_iter().enumerate() {
            for g in &p.gaps {
                let mut pmt = gap_pmt(g);
                if let Pmt::MapStrPmt(m) = &mut pmt {
                    m.insert("output".to_string(), Pmt::U64(i as u64));
                }
                mo.post("missed", pmt).await?;
            }
            for c in &p.contexts {
                mo.post("context", context_pmt(c)).await?;
            }
            if p.data {
                self.clock.data(now);
            }
        }
        Ok(())
    }
}
