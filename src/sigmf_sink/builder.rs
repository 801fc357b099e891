//! [`SigmfSinkBuilder`]: a recording's global fields and what is known of its stream's end,
//! checked at [`build`](SigmfSinkBuilder::build).

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use futuresdr::runtime::dev::prelude::*;

use super::{EndKnown, GlobalInfo, SigmfItem, SigmfSink};
use crate::Error;

/// Builds a [`SigmfSink`].
#[derive(Debug, Clone)]
pub struct SigmfSinkBuilder<T> {
    pub(super) path: PathBuf,
    pub(super) info: GlobalInfo,
    pub(super) end: EndKnown,
    pub(super) _items: std::marker::PhantomData<T>,
}

impl<T: SigmfItem> SigmfSinkBuilder<T> {
    /// `core:sample_rate` (also taken from the first `rx_rate` tag when not given).
    pub fn sample_rate(mut self, sps: f64) -> Self {
        self.info.sample_rate = Some(sps);
        self
    }

    /// `core:hw`: the hardware that recorded.
    pub fn hw(mut self, hw: impl Into<String>) -> Self {
        self.info.hw = Some(hw.into());
        self
    }

    /// `core:description`.
    pub fn description(mut self, text: impl Into<String>) -> Self {
        self.info.description = Some(text.into());
        self
    }

    /// `core:frequency` of the first capture segment (later ones take it from `rx_freq`
    /// tags).
    pub fn frequency(mut self, hz: f64) -> Self {
        self.info.frequency = Some(hz);
        self
    }

    /// The stream's length, when known (a sender's sample count, UHD's `num_samps`): a
    /// stream that ends shorter lost its end, and the recording says so — its missing
    /// samples are written as zeros, as a zero-filling source fills a gap, under an
    /// annotation labelled `gap` with their count, so the recording has the stream's length
    /// and its time. Only when the input ends (the source finished), not when the
    /// flowgraph is stopped.
    pub fn expected_samples(mut self, n: u64) -> Self {
        self.end.samples = Some(n);
        self
    }

    /// The sender marks its stream's end with an end of burst (a USRP's CHDR stream, which
    /// [`UdpSource`](crate::UdpSource) tags `rx_eob`): an input that ends without it on
    /// its last item lost its end, how much of it unknown, and the description says so.
    /// Only when the input ends, not when the flowgraph is stopped; with
    /// [`expected_samples`](Self::expected_samples) a short stream's count is known, and
    /// the zeros say it instead.
    pub fn end_of_burst_ends(mut self, on: bool) -> Self {
        self.end.end_of_burst = on;
        self
    }

    /// Creates the data file (replacing an existing one).
    pub fn build(self) -> Result<SigmfSink<T>, Error> {
        if let Some(r) = self
            .info
            .sample_rate
            .filter(|r| !(r.is_finite() && *r > 0.0))
        {
            return Err(Error::config(format!(
                "sample_rate {r} must be a positive number"
            )));
        }
        if let Some(f) = self.info.frequency.filter(|f| !f.is_finite()) {
            return Err(Error::config(format!("frequency {f} must be a number")));
        }
        let (data_path, meta_path) = paths(&self.path)?;
        let file = File::create(&data_path)
            .map_err(|e| Error::config(format!("creating {}: {e}", data_path.display())))?;
        Ok(SigmfSink {
            input: DefaultCpuReader::default(),
            data: Some(BufWriter::with_capacity(1 << 20, file)),
            data_path,
            meta_path,
            info: self.info,
            items: 0,
            tick_rate: None,
            segments: Vec::new(),
            annotations: Vec::new(),
            rate: None,
            rate_changes: Vec::new(),
            written: None,
            end: self.end,
            last_eob: None,
            input_ended: false,
            missing_end: None,
        })
    }
}

/// The data and metadata paths of a recording named by either file or by its base name.
fn paths(path: &Path) -> Result<(PathBuf, PathBuf), Error> {
    let s = path.to_string_lossy();
    let base = s
        .strip_suffix(".sigmf-data")
        .or_else(|| s.strip_suffix(".sigmf-meta"))
        .unwrap_or(&s)
        .to_string();
    if base.is_empty() {
        return Err(Error::config("a SigMF recording needs a file name"));
    }
    Ok((
        PathBuf::from(format!("{base}.sigmf-data")),
        PathBuf::from(format!("{base}.sigmf-meta")),
    ))
}
