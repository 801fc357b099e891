//! VITA-49 IF context packets (and DIFI's), parsed and emitted with the `vita49` crate: the
//! radio's sample rate, RF frequency, bandwidth, gain, reference level and the other CIF0
//! fields, converted to SI units as the standard's fixed-point formats say.
//!
//! ```
//! use fsdr_net_io::format::vrt::context::{IfContext, emit_context, parse_context};
//!
//! let ctx = IfContext {
//!     stream_id: Some(7),
//!     sample_rate_sps: Some(25e6),
//!     rf_ref_freq_hz: Some(2.4e9),
//!     ..IfContext::default()
//! };
//! let bytes = emit_context(&ctx, 3, Some(1_000)).unwrap();
//! let back = parse_context(&bytes).unwrap();
//! assert_eq!(back.sample_rate_sps, Some(25e6));
//! assert_eq!(back.rf_ref_freq_hz, Some(2.4e9));
//! assert_eq!(back.sample_count, Some(1_000));
//! ```

use serde::{Deserialize, Serialize};
use vita49::prelude::*;
use vita49::{DeviceId, Gain, PacketType, Tsf, Tsi};

use super::DIFI_OUI;
use crate::format::FormatError;

pub mod version;

/// DIFI's information class code of its standard packets.
pub const DIFI_INFO_CLASS: u16 = 0x0000;
/// DIFI's packet class code of the standard context packet.
pub const DIFI_CONTEXT_CLASS: u16 = 0x0001;
/// DIFI's packet class code of the version flavor context packet.
pub const DIFI_VERSION_CLASS: u16 = 0x0004;
/// The CIF0 of a DIFI 1.x standard context packet: change indicator, reference point,
/// bandwidth, IF and RF reference frequency, IF band offset, reference level, gain, sample
/// rate, timestamp adjustment and calibration time, state and event indicators, data packet
/// payload format.
pub const DIFI_STANDARD_CIF0: u32 = 0xFBB9_8000;
/// The CIF0 of a DIFI version flavor context packet: change indicator and CIF1.
pub const DIFI_VERSION_CIF0: u32 = 0x8000_0002;

/// CIF0 bit 31, the context field change indicator.
const CHANGED: u32 = 1 << 31;

/// What a context packet is as far as DIFI is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Difi {
    /// Not a DIFI packet (no class ID, another OUI or class).
    No,
    /// A DIFI standard context packet; `complete` when its CIF0 is exactly the standard's
    /// (every required field present, nothing else; the change indicator either way).
    StandardContext {
        /// CIF0 equals [`DIFI_STANDARD_CIF0`].
        complete: bool,
    },
    /// A DIFI version flavor context packet (versions, not radio settings).
    VersionFlavor,
}

/// The IF context of one stream, as one context packet states it. Fields the packet does not
/// carry are `None`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct IfContext {
    /// Stream ID (the data stream the context describes).
    pub stream_id: Option<u32>,
    /// Integer timestamp (seconds; UTC/GPS/other as the header says).
    pub integer_seconds: Option<u32>,
    /// Fractional timestamp as a sample count (TSF = sample count).
    pub sample_count: Option<u64>,
    /// Context field change indicator: some field changed since the last context packet.
    pub changed: bool,
    /// Reference point ID.
    pub reference_point_id: Option<u32>,
    /// Bandwidth in Hz.
    pub bandwidth_hz: Option<f64>,
    /// IF reference frequency in Hz.
    pub if_ref_freq_hz: Option<f64>,
    /// RF reference frequency in Hz.
    pub rf_ref_freq_hz: Option<f64>,
    /// RF reference frequency offset in Hz.
    pub rf_offset_hz: Option<f64>,
    /// IF band offset in Hz.
    pub if_band_offset_hz: Option<f64>,
    /// Reference level in dBm.
    pub reference_level_dbm: Option<f32>,
    /// Gain of stage 1 and stage 2 in dB.
    pub gain_db: Option<(f32, f32)>,
    /// Over-range count.
    pub over_range_count: Option<u32>,
    /// Sample rate in samples per second.
    pub sample_rate_sps: Option<f64>,
    /// Timestamp adjustment in femtoseconds.
    pub timestamp_adjustment_fs: Option<i64>,
    /// Timestamp calibration time (seconds, as the integer timestamp).
    pub timestamp_cal_time: Option<u32>,
    /// Temperature in °C.
    pub temperature_c: Option<f32>,
    /// Device identifier: manufacturer OUI and device code.
    pub device_id: Option<(u32, u16)>,
    /// State and event indicators (the raw word).
    pub state_indicators: Option<u32>,
    /// Data packet payload format (the raw 64-bit field).
    pub payload_format: Option<u64>,
    /// Class ID: OUI, information class code, packet class code.
    pub class_id: Option<(u32, u16, u16)>,
    /// DIFI standard or version flavor packet.
    pub difi: Option<Difi>,
}

impl IfContext {
    /// Total gain in dB (stage 1 plus stage 2), the value of GNU Radio's `rx_gain`.
    pub fn gain_total_db(&self) -> Option<f64> {
        self.gain_db.map(|(a, b)| f64::from(a) + f64::from(b))
    }

    /// The radio settings of `self` that differ from `before`, each as (name, value).
    /// `before = None`: every setting present. The names are GNU Radio's UHD source tags.
    pub fn changes(&self, before: Option<&IfContext>) -> Vec<(&'static str, f64)> {
        let pick = |c: &IfContext| {
            [
                ("rx_rate", c.sample_rate_sps),
                ("rx_freq", c.rf_ref_freq_hz),
                ("rx_bandwidth", c.bandwidth_hz),
                ("rx_gain", c.gain_total_db()),
            ]
        };
        let now = pick(self);
        let old = before.map(pick);
        now.iter()
            .enumerate()
            .filter_map(|(i, &(name, v))| {
                let v = v?;
                let same = old.is_some_and(|o| o[i].1 == Some(v));
                (!same).then_some((name, v))
            })
            .collect()
    }

    /// The fields a DIFI standard context packet carries ([`DIFI_STANDARD_CIF0`]) that this
    /// context does not set, by their names here: a DIFI sender states every one (DIFI
    /// requires them; VITA-49.2 leaves a field it does not know out, its CIF0 bit clear).
    ///
    /// ```
    /// use fsdr_net_io::format::vrt::context::IfContext;
    /// let ctx = IfContext { rf_ref_freq_hz: Some(2.4e9), ..IfContext::default() };
    /// assert!(ctx.difi_missing().contains(&"bandwidth_hz"));
    /// assert!(!ctx.difi_missing().contains(&"rf_ref_freq_hz"));
    /// ```
    pub fn difi_missing(&self) -> Vec<&'static str> {
        [
            ("reference_point_id", self.reference_point_id.is_none()),
            ("bandwidth_hz", self.bandwidth_hz.is_none()),
            ("if_ref_freq_hz", self.if_ref_freq_hz.is_none()),
            ("rf_ref_freq_hz", self.rf_ref_freq_hz.is_none()),
            ("if_band_offset_hz", self.if_band_offset_hz.is_none()),
            ("reference_level_dbm", self.reference_level_dbm.is_none()),
            ("gain_db", self.gain_db.is_none()),
            ("sample_rate_sps", self.sample_rate_sps.is_none()),
            (
                "timestamp_adjustment_fs",
                self.timestamp_adjustment_fs.is_none(),
            ),
            ("timestamp_cal_time", self.timestamp_cal_time.is_none()),
            ("state_indicators", self.state_indicators.is_none()),
            ("payload_format", self.payload_format.is_none()),
        ]
        .into_iter()
        .filter_map(|(name, missing)| missing.then_some(name))
        .collect()
    }

    /// Whether any field other than the timestamps and the change indicator differs.
    pub fn settings_differ(&self, other: &IfContext) -> bool {
        let strip = |c: &IfContext| IfContext {
            integer_seconds: None,
            sample_count: None,
            changed: false,
            ..c.clone()
        };
        strip(self) != strip(other)
    }
}

/// The radio settings of every stream, from its context packets: what a receiver needs to
/// tag a setting once, where it changes, and report each new context once.
///
/// ```
/// use fsdr_net_io::format::vrt::context::{ContextTracker, IfContext, emit_context};
///
/// let mut t = ContextTracker::default();
/// let ctx = IfContext { sample_rate_sps: Some(1e6), rf_ref_freq_hz: Some(9e8), ..Default::default() };
/// let packet = emit_context(&ctx, 0, None).unwrap();
/// assert_eq!(t.take(&packet), [("rx_rate", 1e6), ("rx_freq", 9e8)]);
/// assert!(t.take(&packet).is_empty(), "the same settings again: nothing new");
/// assert_eq!(t.drain_new().len(), 1);
/// ```
#[derive(Debug, Default)]
pub struct ContextTracker {
    last: std::collections::HashMap<Option<u32>, IfContext>,
    new: Vec<IfContext>,
    malformed: u64,
}

impl ContextTracker {
    /// Takes a context packet: returns the settings (tag name, value) that changed for its
    /// stream, and keeps the context for [`ContextTracker::drain_new`] when any field did. A
    /// packet the parser refuses is counted ([`ContextTracker::malformed`]) and changes
    /// nothing.
    pub fn take(&mut self, packet: &[u8]) -> Vec<(&'static str, f64)> {
        let ctx = match parse_context(packet) {
            Ok(c) => c,
            Err(e) => {
                if self.malformed == 0 {
                    tracing::warn!(error = %e, "context packet not understood");
                }
                self.malformed += 1;
                return Vec::new();
            }
        };
        // A version packet states no radio settings: the stream's settings stay as they are.
        if ctx.difi == Some(Difi::VersionFlavor) {
            return Vec::new();
        }
        let before = self.last.get(&ctx.stream_id);
        if before.is_some_and(|b| !ctx.settings_differ(b)) {
            return Vec::new();
        }
        let changes = ctx.changes(before);
        self.new.push(ctx.clone());
        self.last.insert(ctx.stream_id, ctx);
        changes
    }

    /// The contexts that changed something since the last call.
    pub fn drain_new(&mut self) -> Vec<IfContext> {
        std::mem::take(&mut self.new)
    }

    /// The last context of a stream.
    pub fn current(&self, stream_id: Option<u32>) -> Option<&IfContext> {
        self.last.get(&stream_id)
    }

    /// Context packets the parser refused.
    pub fn malformed(&self) -> u64 {
        self.malformed
    }
}

fn vita(e: impl std::fmt::Display) -> FormatError {
    FormatError::Context(e.to_string())
}

/// CIF1 fields the `vita49` crate (2.0) does not implement and panics on: 3-D pointing
/// vector structure (28), array of CIFs (11), sector scan (9), index list (7).
const CIF1_UNSUPPORTED: u32 = (1 << 28) | (1 << 11) | (1 << 9) | (1 << 7);
/// CIF3 fields it does not implement: age (17), shelf life (16).
const CIF3_UNSUPPORTED: u32 = (1 << 17) | (1 << 16);
/// CIF0's variable-length fields, GPS ASCII (10) and context association lists (9): the
/// crate allocates what their count words say (gigabytes from a crafted packet) before it
/// checks them against the packet.
const CIF0_UNSUPPORTED: u32 = (1 << 10) | (1 << 9);

/// Refuses, before the `vita49` crate sees them, context packets with fields that crate does
/// not implement (it panics on them): found by the `vrt_context` fuzz target.
fn check_supported(datagram: &[u8]) -> Result<(), FormatError> {
    // Only IF and extension context packets (types 4, 5) go to the crate: it also parses
    // command packets, whose payloads are laid out otherwise.
    if !matches!(datagram.first().map(|b| b >> 4), Some(4 | 5)) {
        return Err(FormatError::Context("not a context packet".into()));
    }
    let info = crate::format::Format::Vrt.parse(datagram)?;
    let words: Vec<u32> = datagram[info.payload()]
        .chunks_exact(4)
        .take(5)
        .map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    let Some(&cif0) = words.first() else {
        return Err(FormatError::Context("context packet without CIF0".into()));
    };
    if cif0 & CIF0_UNSUPPORTED != 0 {
        return Err(FormatError::Context(format!(
            "CIF0 fields {:#010x} (GPS ASCII, context association lists) are not supported",
            cif0 & CIF0_UNSUPPORTED
        )));
    }
    // The enabled CIF words follow CIF0 in order: CIF1, CIF2, CIF3, CIF7.
    let mut next = 1;
    for (bit, name, unsupported) in [
        (1, "CIF1", CIF1_UNSUPPORTED),
        (2, "CIF2", 0),
        (3, "CIF3", CIF3_UNSUPPORTED),
        (7, "CIF7", 0),
    ] {
        if cif0 & (1 << bit) == 0 {
            continue;
        }
        let Some(&w) = words.get(next) else {
            return Err(FormatError::Context(format!("{name} word missing")));
        };
        if w & unsupported != 0 {
            return Err(FormatError::Context(format!(
                "{name} fields {:#010x} are not supported",
                w & unsupported
            )));
        }
        next += 1;
    }
    Ok(())
}

/// Parses a VRT context packet (types 4 and 5).
pub fn parse_context(datagram: &[u8]) -> Result<IfContext, FormatError> {
    check_supported(datagram)?;
    let packet = Vrt::try_from(datagram).map_err(vita)?;
    if !matches!(
        packet.header().packet_type(),
        PacketType::Context | PacketType::ExtensionContext
    ) {
        return Err(FormatError::Context("not a context packet".into()));
    }
    let c = packet.payload().context().map_err(vita)?;
    let class_id = packet.class_id().map(|id| {
        (
            id.oui(),
            id.information_class_code(),
            id.packet_class_code(),
        )
    });
    let cif0 = Cif0Manipulators::cif0(c).as_u32();
    let difi = class_id.map(|(oui, info, class)| match (oui, info, class) {
        // Bit 31 is the change indicator, a flag rather than a field.
        (DIFI_OUI, DIFI_INFO_CLASS, DIFI_CONTEXT_CLASS) => Difi::StandardContext {
            complete: cif0 | CHANGED == DIFI_STANDARD_CIF0,
        },
        (DIFI_OUI, DIFI_INFO_CLASS, DIFI_VERSION_CLASS) if cif0 | CHANGED == DIFI_VERSION_CIF0 => {
            Difi::VersionFlavor
        }
        _ => Difi::No,
    });
    Ok(IfContext {
        stream_id: packet.stream_id(),
        integer_seconds: packet.integer_timestamp(),
        sample_count: (packet.header().tsf() == Tsf::SampleCount)
            .then(|| packet.fractional_timestamp())
            .flatten(),
        changed: c.context_changed(),
        reference_point_id: c.reference_point_id().copied(),
        bandwidth_hz: c.bandwidth_hz(),
        if_ref_freq_hz: c.if_ref_freq_hz(),
        rf_ref_freq_hz: c.rf_ref_freq_hz(),
        rf_offset_hz: c.rf_ref_freq_offset_hz(),
        if_band_offset_hz: c.if_band_offset_hz(),
        reference_level_dbm: c.reference_level_db(),
        gain_db: c.gain().map(|g| (g.stage_1_gain_db(), g.stage_2_gain_db())),
        over_range_count: c.over_range_count().copied(),
        sample_rate_sps: c.sample_rate_sps(),
        // 64-bit two's complement femtoseconds (VITA-49.2 9.7.3.1).
        timestamp_adjustment_fs: c.timestamp_adjustment().map(|&v| v as i64),
        timestamp_cal_time: c.timestamp_cal_time().copied(),
        // Lower 16 bits, two's complement, 6 fractional bits, °C (VITA-49.2 9.10.5).
        temperature_c: c.temperature().map(|&v| f32::from(v as u16 as i16) / 64.0),
        device_id: c
            .device_id()
            .map(|d| (d.manufacturer_oui(), d.device_code())),
        state_indicators: c.state_indicators().copied(),
        payload_format: c.signal_data_payload_format().copied(),
        class_id,
        difi,
    })
}

/// The time a context packet carries: the data's kind of timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PacketTime {
    /// A sample count (TSF = sample count), with `IfContext::integer_seconds` if set.
    SampleCount(u64),
    /// UTC seconds and picoseconds within the second (TSI = UTC, TSF = real time), DIFI's.
    Utc {
        /// Integer seconds.
        seconds: u32,
        /// Picoseconds within the second.
        picoseconds: u64,
    },
}

impl PacketTime {
    /// Sets `p`'s timestamps.
    fn set(self, p: &mut Vrt) -> Result<(), FormatError> {
        match self {
            PacketTime::SampleCount(t) => p.set_fractional_timestamp(Some(t), Tsf::SampleCount),
            PacketTime::Utc {
                seconds,
                picoseconds,
            } => {
                p.set_integer_timestamp(Some(seconds), Tsi::Utc)
                    .map_err(vita)?;
                p.set_fractional_timestamp(Some(picoseconds), Tsf::RealTimePs)
            }
        }
        .map_err(vita)
    }
}

/// Builds a context packet stating `ctx` (timestamps from `sample_count` and
/// `ctx.integer_seconds`), with packet count `count` (4 bits). A field `ctx` leaves out is
/// not in the packet (its CIF0 bit clear: VITA-49.2's "not stated"), never a zero; with
/// `ctx.class_id` of DIFI's standard context class every field DIFI requires must be set
/// ([`IfContext::difi_missing`]), or it is an error.
pub fn emit_context(
    ctx: &IfContext,
    count: u8,
    sample_count: Option<u64>,
) -> Result<Vec<u8>, FormatError> {
    emit_context_at(ctx, count, sample_count.map(PacketTime::SampleCount))
}

/// [`emit_context`] with any [`PacketTime`] (DIFI's UTC seconds and picoseconds too).
pub fn emit_context_at(
    ctx: &IfContext,
    count: u8,
    time: Option<PacketTime>,
) -> Result<Vec<u8>, FormatError> {
    let mut p = Vrt::new_context_packet();
    p.set_stream_id(Some(ctx.stream_id.unwrap_or(0)));
    let difi_standard = ctx.class_id == Some((DIFI_OUI, DIFI_INFO_CLASS, DIFI_CONTEXT_CLASS));
    let missing = ctx.difi_missing();
    if difi_standard && !missing.is_empty() {
        return Err(FormatError::Context(format!(
            "a DIFI standard context packet states every field DIFI requires; not set: {}",
            missing.join(", ")
        )));
    }
    if let Some((oui, info, class)) = ctx.class_id {
        let mut id = vita49::ClassIdentifier::default();
        id.set_oui(oui);
        id.set_information_class_code(info);
        id.set_packet_class_code(class);
        p.set_class_id(Some(id));
    }
    p.header_mut().set_packet_count(count & 0xf);
    if let Some(s) = ctx.integer_seconds {
        p.set_integer_timestamp(Some(s), Tsi::Utc).map_err(vita)?;
    }
    if let Some(t) = time {
        t.set(&mut p)?;
    }
    // The fixed-point fields hold a bounded range; the `vita49` setters panic outside it.
    const U44: f64 = (1u64 << 44) as f64;
    const I43: f64 = (1u64 << 43) as f64;
    for (name, v, lo, hi) in [
        ("bandwidth", ctx.bandwidth_hz, 0.0, U44),
        ("rf_freq", ctx.rf_ref_freq_hz, 0.0, U44),
        ("sample_rate", ctx.sample_rate_sps, 0.0, U44),
        ("if_freq", ctx.if_ref_freq_hz, -I43, I43),
        ("rf_offset", ctx.rf_offset_hz, -I43, I43),
        ("if_band_offset", ctx.if_band_offset_hz, -I43, I43),
        (
            "reference_level",
            ctx.reference_level_dbm.map(f64::from),
            -256.0,
            256.0,
        ),
        (
            "gain stage 1",
            ctx.gain_db.map(|g| f64::from(g.0)),
            -256.0,
            256.0,
        ),
        (
            "gain stage 2",
            ctx.gain_db.map(|g| f64::from(g.1)),
            -256.0,
            256.0,
        ),
    ] {
        if let Some(v) = v
            && !(v >= lo && v < hi)
        {
            return Err(FormatError::Context(format!(
                "{name} {v} is outside what VITA-49 can carry ({lo} to below {hi})"
            )));
        }
    }
    let c = p.payload_mut().context_mut().map_err(vita)?;
    c.set_context_changed(ctx.changed);
    c.set_reference_point_id(ctx.reference_point_id);
    c.set_bandwidth_hz(ctx.bandwidth_hz);
    c.set_if_ref_freq_hz(ctx.if_ref_freq_hz);
    c.set_rf_ref_freq_hz(ctx.rf_ref_freq_hz);
    c.set_rf_ref_freq_offset_hz(ctx.rf_offset_hz);
    c.set_if_band_offset_hz(ctx.if_band_offset_hz);
    c.set_reference_level_db(ctx.reference_level_dbm);
    c.set_gain(ctx.gain_db.map(|(a, b)| Gain::new(a, b)));
    c.set_over_range_count(ctx.over_range_count);
    c.set_sample_rate_sps(ctx.sample_rate_sps);
    c.set_timestamp_adjustment(ctx.timestamp_adjustment_fs.map(|v| v as u64));
    c.set_timestamp_cal_time(ctx.timestamp_cal_time);
    c.set_temperature(
        ctx.temperature_c
            .map(|t| i32::from((t * 64.0).round() as i16) & 0xffff),
    );
    c.set_device_id(ctx.device_id.map(|(oui, code)| {
        let mut d = DeviceId::default();
        d.set_manufacturer_oui(oui);
        d.set_device_code(code);
        d
    }));
    c.set_state_indicators(ctx.state_indicators);
    c.set_signal_data_payload_format(ctx.payload_format);
    p.update_packet_size();
    p.to_bytes().map_err(vita)
}

#[cfg(test)]
mod tests;
