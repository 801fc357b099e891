//! [`SigmfSink`]: records a stream as a SigMF recording — the samples in a `.sigmf-data`
//! file, and a `.sigmf-meta` written with the `wcsng-sigmf` library: datatype, sample rate,
//! hardware and description, one capture segment per time discontinuity or retune (with the
//! frequency and the UTC time of its first sample), one annotation per gap, and what is
//! known of a lost end: zeros annotated with their count where the stream's length is
//! known, a note in the description where only its missing end of burst shows it.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use futuresdr::num_complex::Complex;
use futuresdr::runtime::dev::prelude::*;
use sigmf::annotation::Annotation;
use sigmf::capture::Capture;
use sigmf::datatype::Datatype;
use sigmf::global::Global;
use sigmf::meta::Metadata;
use sigmf::validation::ValidationPolicy;

use crate::io::depacketizer::RxTime;
use crate::io::sample::Item;
use crate::{TAG_EOB, TAG_MISSED, TAG_MISSED_ITEMS, TAG_TIME};

mod builder;

pub use builder::SigmfSinkBuilder;

/// The SigMF version the metadata declares.
const SIGMF_VERSION: &str = "1.2.6";

/// Items a SigMF recording can hold, with their `core:datatype`.
pub trait SigmfItem: Item {
    /// SigMF's name of the item's layout in memory (this host is little-endian).
    const DATATYPE: &'static str;
}

macro_rules! sigmf_items {
    ($($t:ty => $name:literal),* $(,)?) => {
        $(impl SigmfItem for $t {
            const DATATYPE: &'static str = $name;
        })*
    };
}

sigmf_items! {
    Complex<f32> => "cf32_le",
    Complex<i16> => "ci16_le",
    Complex<i8> => "ci8",
    f32 => "rf32_le",
    i16 => "ri16_le",
    i8 => "ri8",
    u8 => "ru8",
}

/// What goes into the global object of the metadata.
#[derive(Debug, Clone, Default)]
struct GlobalInfo {
    sample_rate: Option<f64>,
    hw: Option<String>,
    description: Option<String>,
    frequency: Option<f64>,
}

/// A capture segment being recorded.
#[derive(Debug, Clone, PartialEq)]
struct Segment {
    start: u64,
    frequency: Option<f64>,
    /// Device time (taken as UTC) of the segment's first sample.
    time: Option<RxTime>,
}

/// What the sink knows of where its stream should end.
#[derive(Debug, Clone, Copy, Default)]
struct EndKnown {
    /// The stream's length (samples).
    samples: Option<u64>,
    /// The sender ends its stream with an end of burst (`rx_eob` on the last item).
    end_of_burst: bool,
}

/// The note the description gets when the stream ended without its end of burst.
const END_MISSING: &str = "The end of the stream is missing: it ended without the end of \
    burst its sender marks its end with, so its last samples were lost; how many, nothing in \
    the stream can say (fsdr-net).";

/// Writes its input to a SigMF recording: the items as they are in memory (the datatype is
/// [`SigmfItem::DATATYPE`]), and, when the input ends (or the flowgraph stops), the metadata:
/// `core:sample_rate`, `core:hw`, `core:description`, `core:recorder`, `core:sha512`; a
/// capture segment at the start and wherever the `rx_time` tags show a time discontinuity
/// or an `rx_freq` tag a retune (`core:datetime` from the time, `core:frequency`); and one
/// annotation per `rx_missed` tag (`core:sample_count` from `rx_missed_items`: the
/// zero-filled samples, label `gap`, the frames missed in the comment). A stream known to
/// have lost its end says so: with [`expected_samples`](SigmfSinkBuilder::expected_samples),
/// its missing samples as zeros under a `gap` annotation with their count; with
/// [`end_of_burst_ends`](SigmfSinkBuilder::end_of_burst_ends), a note in `core:description`
/// when it ended without its end of burst.
///
/// # Stream Inputs
///
/// `input`: the samples, with [`UdpSource`](crate::UdpSource)'s tags.
///
/// # Stream Outputs
///
/// No stream outputs.
///
/// # Usage
/// ```no_run
/// use fsdr_net::prelude::*;
/// use fsdr_net::SigmfSink;
/// use futuresdr::num_complex::Complex;
/// use futuresdr::runtime::macros::connect;
/// use futuresdr::runtime::{Flowgraph, Runtime};
///
/// # fn main() -> anyhow::Result<()> {
/// let src = UdpSource::<Complex<i16>>::builder("0.0.0.0:49000")
///     .format(Format::Chdr)
///     .tick_rate(200e6)
///     .sample_rate(50e6)
///     .zero_fill_missed(true)
///     .build()?;
/// let rec = SigmfSink::<Complex<i16>>::builder("capture.sigmf-data")
///     .sample_rate(50e6)
///     .hw("USRP X310")
///     .build()?;
/// let mut fg = Flowgraph::new();
/// connect!(fg, src > rec);
/// Runtime::new().run(fg)?;
/// # Ok(())
/// # }
/// ```
#[derive(Block)]
pub struct SigmfSink<T: SigmfItem> {
    #[input]
    input: DefaultCpuReader<T>,
    data: Option<BufWriter<File>>,
    data_path: PathBuf,
    meta_path: PathBuf,
    info: GlobalInfo,
    items: u64,
    /// Device ticks per second, from the time tags.
    tick_rate: Option<f64>,
    segments: Vec<Segment>,
    /// (first sample, samples, frames) of each gap.
    annotations: Vec<(u64, u64, u64)>,
    /// The stream's sample rate now, and where it changed from the first (an `rx_rate`
    /// tag): `core:sample_rate` is one value for the recording, so each change starts a
    /// capture segment and is stated in an annotation from there.
    rate: Option<f64>,
    rate_changes: Vec<(u64, f64)>,
    /// The outcome of writing the recording, once written.
    written: Option<Result<(), String>>,
    end: EndKnown,
    /// The last item an `rx_eob` tag ended a burst on.
    last_eob: Option<u64>,
    /// The input ended (the stream did, not the flowgraph's run).
    input_ended: bool,
    /// What the recording says of a lost end: `Some(Some(n))` for n samples zero-filled,
    /// `Some(None)` for an end lost uncounted.
    missing_end: Option<Option<u64>>,
}

impl<T: SigmfItem> SigmfSink<T> {
    /// A builder for a recording at `path` (`name.sigmf-data`, `name.sigmf-meta` or `name`).
    pub fn builder(path: impl AsRef<Path>) -> SigmfSinkBuilder<T> {
        SigmfSinkBuilder {
            path: path.as_ref().to_path_buf(),
            info: GlobalInfo::default(),
            end: EndKnown::default(),
            _items: std::marker::PhantomData,
        }
    }

    /// The metadata file.
    pub fn meta_path(&self) -> &Path {
        &self.meta_path
    }

    /// The data file.
    pub fn data_path(&self) -> &Path {
        &self.data_path
    }

    /// Samples written.
    pub fn items(&self) -> u64 {
        self.items
    }

    /// Whether the recording was completed, or why not (`None` while it runs).
    pub fn outcome(&self) -> Option<&Result<(), String>> {
        self.written.as_ref()
    }

    /// What the recording says of a lost end, once written: `Some(Some(n))` when its last
    /// `n` samples did not arrive (zero-filled and annotated), `Some(None)` when the stream
    /// ended without its end of burst (noted in the description), `None` when its end
    /// arrived or nothing is known of it.
    pub fn missing_end(&self) -> Option<Option<u64>> {
        self.missing_end
    }

    fn rate(&self) -> Option<f64> {
        self.rate.or(self.info.sample_rate)
    }

    /// Records the tags of the items `base..` of the stream.
    fn note_tags(&mut self, base: u64, tags: &[ItemTag]) {
        let mut missed: Option<(u64, u64)> = None;
        for t in tags {
            let at = base + t.index as u64;
            match &t.tag {
                Tag::NamedAny(name, v) if name == TAG_TIME => {
                    if let Some(rx) = v.downcast_ref::<RxTime>() {
                        self.time_at(at, *rx);
                    }
                }
                Tag::NamedAny(name, v) if name == "rx_freq" => {
                    if let Some(&f) = v.downcast_ref::<f64>() {
                        self.frequency_at(at, f);
                    }
                }
                Tag::NamedAny(name, v) if name == "rx_rate" => {
                    if let Some(&r) = v.downcast_ref::<f64>() {
                        self.rate_at(at, r);
                    }
                }
                Tag::NamedUsize(name, _) if name == TAG_EOB => {
                    self.last_eob = Some(at);
                }
                Tag::NamedUsize(name, frames) if name == TAG_MISSED => {
                    missed = Some((at, *frames as u64));
                }
                Tag::NamedUsize(name, n) if name == TAG_MISSED_ITEMS => {
                    if let Some((m_at, frames)) = missed.take().filter(|(a, _)| *a == at) {
                        self.annotations.push((m_at, *n as u64, frames));
                    }
                }
                _ => {}
            }
        }
    }

    /// Device ticks per sample, once both rates are known (the tick rate from a time tag).
    fn ticks_per_sample(&self) -> Option<f64> {
        Some(self.tick_rate? / self.rate()?)
    }

    /// The device time of sample `at`, extrapolated from the start of its segment.
    fn expected_time(&self, at: u64) -> Option<RxTime> {
        let s = self.segments.last()?;
        let t0 = s.time?;
        let ticks = t0.ticks + ((at - s.start) as f64 * self.ticks_per_sample()?).round() as u64;
        Some(RxTime {
            ticks,
            seconds: t0.seconds + (ticks - t0.ticks) as f64 / t0.tick_rate,
            tick_rate: t0.tick_rate,
        })
    }

    fn time_at(&mut self, at: u64, rx: RxTime) {
        if rx.tick_rate > 0.0 {
            self.tick_rate = Some(rx.tick_rate);
        }
        // Compared in ticks: seconds since 1970 in an f64 are only good to a few 100 ns.
        let continuous = self
            .expected_time(at)
            .zip(self.ticks_per_sample())
            .is_some_and(|(t, per_sample)| rx.ticks.abs_diff(t.ticks) as f64 <= 0.5 * per_sample);
        if !continuous {
            let frequency = self
                .segments
                .last()
                .and_then(|s| s.frequency)
                .or(self.info.frequency);
            self.start_segment(at, frequency, Some(rx));
        }
    }

    /// The sample rate from sample `at` on.
    fn rate_at(&mut self, at: u64, sps: f64) {
        if self.info.sample_rate.is_none() {
            self.info.sample_rate = Some(sps);
        } else if self.rate() != Some(sps) {
            let time = self.expected_time(at);
            let frequency = self
                .segments
                .last()
                .and_then(|s| s.frequency)
                .or(self.info.frequency);
            self.start_segment(at, frequency, time);
            self.rate_changes.push((at, sps));
        }
        self.rate = Some(sps);
    }

    fn frequency_at(&mut self, at: u64, hz: f64) {
        if self.segments.last().and_then(|s| s.frequency) == Some(hz) {
            return;
        }
        let time = self.expected_time(at);
        self.start_segment(at, Some(hz), time);
    }

    /// Starts a segment at `at`, or updates the one that starts there.
    fn start_segment(&mut self, at: u64, frequency: Option<f64>, time: Option<RxTime>) {
        match self.segments.last_mut() {
            Some(s) if s.start == at => {
                s.frequency = frequency.or(s.frequency);
                s.time = time.or(s.time);
            }
            _ => self.segments.push(Segment {
                start: at,
                frequency,
                time,
            }),
        }
    }

    /// Flushes the data and writes the metadata (once).
    fn finish(&mut self) {
        if self.written.is_some() {
            return;
        }
        let result = self.write_recording();
        if let Err(e) = &result {
            tracing::error!(error = %e, path = %self.meta_path.display(), "SigMF recording");
        }
        self.written = Some(result);
    }

    /// Where the input ended by itself, what is known of a lost end: the samples missing
    /// from a known length, or an end of burst missing.
    fn judge_end(&mut self) -> Option<Option<u64>> {
        if !self.input_ended {
            return None;
        }
        if let Some(n) = self.end.samples {
            return (n > self.items).then_some(Some(n - self.items));
        }
        let seen = self.items > 0 && self.last_eob == Some(self.items - 1);
        (self.end.end_of_burst && !seen).then_some(None)
    }

    fn write_recording(&mut self) -> Result<(), String> {
        let mut data = self.data.take().ok_or("no data file")?;
        self.missing_end = self.judge_end();
        if let Some(Some(n)) = self.missing_end {
            // The missing end as zeros, as a zero-filling source fills a gap.
            let zeros = vec![0u8; 1 << 20];
            let mut left = n * std::mem::size_of::<T>() as u64;
            while left > 0 {
                let k = left.min(zeros.len() as u64) as usize;
                data.write_all(&zeros[..k]).map_err(|e| e.to_string())?;
                left -= k as u64;
            }
            self.annotations.push((self.items, n, 0));
            self.items += n;
        }
        data.flush().map_err(|e| e.to_string())?;
        drop(data);
        let datatype = Datatype::from_str(T::DATATYPE).map_err(|e| e.to_string())?;
        if self.segments.first().is_none_or(|s| s.start != 0) {
            self.segments.insert(
                0,
                Segment {
                    start: 0,
                    frequency: self.info.frequency,
                    time: None,
                },
            );
        }
        let captures = self
            .segments
            .iter()
            .map(|s| {
                let mut c = Capture::new(s.start);
                if let Some(f) = s.frequency {
                    c.set_frequency(f);
                }
                if let Some(t) = s.time.and_then(iso8601) {
                    c.set_datetime(t);
                }
                c
            })
            .collect();
        let annotations = self
            .annotations
            .iter()
            .map(|&(start, count, frames)| {
                let comment = if start + count == self.items && self.missing_end.is_some() {
                    format!(
                        "the stream's end: its last {count} samples did not arrive, \
                         zero-filled by fsdr-net"
                    )
                } else {
                    format!("{frames} frames missed, {count} samples zero-filled by fsdr-net")
                };
                Annotation::builder(start)
                    .sample_count(count.max(1))
                    .label("gap")
                    .comment(comment)
                    .generator("fsdr-net")
                    .build()
                    .map_err(|e| e.to_string())
            })
            .chain(self.rate_changes.iter().map(|&(start, sps)| {
                Annotation::builder(start)
                    .sample_count((self.items - start).max(1))
                    .label("sample_rate")
                    .comment(format!(
                        "the stream is at {sps} samples/s from here (core:sample_rate is the \
                         recording's first rate)"
                    ))
                    .generator("fsdr-net")
                    .build()
                    .map_err(|e| e.to_string())
            }))
            .collect::<Result<Vec<_>, _>>()?;
        // SigMF keeps annotations in sample order (a rate change can precede a gap).
        let mut annotations = annotations;
        annotations.sort_by_key(|a| a.sample_start);
        let mut meta = Metadata::new(Global::new(SIGMF_VERSION, datatype), annotations, captures);
        if let Some(r) = self.info.sample_rate {
            meta.set_sample_rate(r);
        }
        if let Some(hw) = &self.info.hw {
            meta.set_hw(hw.clone());
        }
        let description = match (&self.info.description, self.missing_end) {
            (Some(d), Some(None)) => Some(format!("{d}. {END_MISSING}")),
            (None, Some(None)) => Some(END_MISSING.to_string()),
            (d, _) => d.clone(),
        };
        if let Some(d) = description {
            meta.set_description(d);
        }
        meta.set_recorder(format!("fsdr-net {}", env!("CARGO_PKG_VERSION")));
        let mut f = File::open(&self.data_path).map_err(|e| e.to_string())?;
        let digest = sigmf::utils::hash::hash_from_reader(&mut f).map_err(|e| e.to_string())?;
        meta.set_sha512(digest);
        let report = meta.validate(ValidationPolicy::StrictSupportedVersion);
        if !report.is_valid() {
            let issues: Vec<String> = report
                .issues
                .iter()
                .map(|i| format!("{}: {}", i.code, i.message))
                .collect();
            return Err(format!("invalid SigMF metadata: {}", issues.join("; ")));
        }
        meta.replace_atomic(&self.meta_path, ValidationPolicy::StrictSupportedVersion)
            .map_err(|e| e.to_string())?;
        Ok(())
    }
}

/// A device time (seconds since the Unix epoch) as an ISO 8601 UTC time (`core:datetime`),
/// to the nanosecond from the ticks.
fn iso8601(t: RxTime) -> Option<String> {
    let nanos = match t.tick_rate {
        // Integer tick rates (every USRP's) split exactly: ticks as f64 lose up to 64 ticks.
        r if r >= 1.0 && r.fract() == 0.0 && r <= u64::MAX as f64 => {
            let r = r as u64;
            let (whole, rest) = (t.ticks / r, t.ticks % r);
            i128::from(whole) * 1_000_000_000 + (rest as f64 / r as f64 * 1e9).round() as i128
        }
        _ => (t.seconds * 1e9).round() as i128,
    };
    let t = time::OffsetDateTime::from_unix_timestamp_nanos(nanos).ok()?;
    t.format(&time::format_description::well_known::Rfc3339)
        .ok()
}

#[doc(hidden)]
impl<T: SigmfItem> Kernel for SigmfSink<T> {
    async fn work(
        &mut self,
        io: &mut WorkIo,
        _mo: &mut MessageOutputs,
        _meta: &mut BlockMeta,
    ) -> Result<()> {
        let (items, tags) = self.input.slice_with_tags();
        let n = items.len();
        if n > 0 {
            let bytes = bytemuck::cast_slice::<T, u8>(items);
            let tags = tags.clone();
            if let Some(d) = self.data.as_mut() {
                d.write_all(bytes)?;
            }
            self.note_tags(self.items, &tags);
            self.items += n as u64;
            self.input.consume(n);
        }
        if self.input.finished() {
            self.input_ended = true;
            self.finish();
            io.finished = true;
        }
        Ok(())
    }

    async fn deinit(&mut self, _mo: &mut MessageOutputs, _meta: &mut BlockMeta) -> Result<()> {
        self.finish();
        Ok(())
    }
}

#[cfg(test)]
mod tests;
