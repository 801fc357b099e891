//! [`ContextSender`]: the context packets (and DIFI version packets) a VRT sender puts beside
//! its data packets — on start, whenever a setting changes, and every N data packets — so
//! that a DIFI receiver learns the stream's sample rate, frequency, bandwidth and gain.
//!
//! Which DIFI version each part follows (IEEE-ISTO 4900: 1.0 of 2021, 1.1, 1.2):
//!
//! | what the sender does | DIFI |
//! |---|---|
//! | standard context packet: type 4, class (DIFI OUI, 0, 1), CIF0 `0xFBB98000` with every required field (each must be set: [`IfContext::difi_missing`]), change indicator on changes | 1.0 on; the layout the DIFI validator checks for 1.1 |
//! | [`ContextSender::vita49`]: VITA-49.2 context packets without DIFI's class, only the fields set (the others' CIF0 bits clear) | **not DIFI** |
//! | version packet: type 5, class (DIFI OUI, 0, 4), CIF0 `0x80000002`/`0x00000002`, CIF1 `0x0000000C`, V49 spec `4`, version and build code with DIFI's type and ICD version bits | 1.1 on |
//! | context and version packets before the data they describe, with the data's stream ID, own packet counts | 1.0 on |
//! | timestamps as the data packets carry them: with `UdpSinkBuilder::utc_timestamps` (`Framer::utc_timestamps`) integer UTC seconds and picoseconds (TSI = 1, TSF = 2), exact for integer sample rates | 1.0 on; with `timestamps` a sample count (TSF = 1): VITA-49, **not DIFI** |
//! | end of burst: a trailer on the burst's last data packet (VITA-49.2 user indicator, UHD's EOB) | **not DIFI** (its data packets carry no trailer, and it has no bursts) |
//! | DIFI 1.2's additions (extension packets, further context fields) | not sent |

use crate::format::FormatError;
use crate::format::vrt::DIFI_OUI;
use crate::format::vrt::context::version::{VersionInfo, emit_version};
use crate::format::vrt::context::{
    DIFI_CONTEXT_CLASS, DIFI_INFO_CLASS, IfContext, PacketTime, emit_context_at,
};

/// The tag names (UHD's) that change a setting of the stream, and the context field each one
/// sets.
pub const SETTING_TAGS: [&str; 4] = ["tx_rate", "tx_freq", "tx_bandwidth", "tx_gain"];

/// Decides when a VRT sender sends context packets, and builds them: a DIFI 1.x standard
/// context packet (class DIFI OUI, 0, 1; every field DIFI requires, each set, or building
/// the packet is an error) or, [`ContextSender::vita49`], a VITA-49.2 context packet with the
/// fields set and no others, with the data packets' stream ID, first before any data, again before the first data packet
/// after a setting changed (with the change indicator set), and every `every` data packets
/// (the same context, change indicator clear); with a [`VersionInfo`], a DIFI 1.1 version
/// packet goes with the first and with every repeated context packet. Context and version
/// packets count their own packet counts (VITA-49: per stream and packet type).
///
/// ```
/// use fsdr_net_io::format::vrt::context::{IfContext, PacketTime, parse_context};
/// use fsdr_net_io::send::ContextSender;
///
/// let mut ctx = ContextSender::vita49(IfContext {
///     sample_rate_sps: Some(1e6),
///     rf_ref_freq_hz: Some(2.4e9),
///     ..Default::default()
/// }, 1)
/// .every(100);
/// assert!(ctx.due());
/// let first = ctx.packets(Some(PacketTime::SampleCount(0))).unwrap();
/// let sent = parse_context(&first[0]).unwrap();
/// assert_eq!(sent.rf_ref_freq_hz, Some(2.4e9));
/// assert_eq!(sent.bandwidth_hz, None, "not set, not sent");
/// ctx.data_sent(99);
/// assert!(!ctx.due());
/// assert!(ctx.apply("tx_freq", 2.5e9));
/// assert!(ctx.due());
/// let changed = parse_context(&ctx.packets(None).unwrap()[0]).unwrap();
/// assert_eq!((changed.rf_ref_freq_hz, changed.changed), (Some(2.5e9), true));
/// ```
#[derive(Debug, Clone)]
pub struct ContextSender {
    ctx: IfContext,
    every: u64,
    version: Option<VersionInfo>,
    /// Data packets since the last context packet.
    since: u64,
    /// Nothing sent yet, or a setting changed since.
    pending: bool,
    changed: bool,
    context_count: u8,
    version_count: u8,
    sent: u64,
}

impl ContextSender {
    /// Sends `ctx` (its stream ID and class ID replaced: `stream_id`, DIFI's standard
    /// context class) on start and on changes; no repeats, no version packets. Every field
    /// DIFI requires must be set ([`IfContext::difi_missing`]) when the packets are built.
    pub fn new(mut ctx: IfContext, stream_id: u32) -> Self {
        ctx.class_id = Some((DIFI_OUI, DIFI_INFO_CLASS, DIFI_CONTEXT_CLASS));
        Self::vita49(ctx, stream_id)
    }

    /// Sends `ctx` as VITA-49.2 context packets (its stream ID replaced: `stream_id`; its
    /// class ID as given, none by default): each states the fields set and no others, a field
    /// not set has its CIF0 bit clear, as VITA-49.2 leaves out what a sender does not know.
    pub fn vita49(mut ctx: IfContext, stream_id: u32) -> Self {
        ctx.stream_id = Some(stream_id);
        Self {
            ctx,
            every: 0,
            version: None,
            since: 0,
            pending: true,
            changed: true,
            context_count: 0,
            version_count: 0,
            sent: 0,
        }
    }

    /// Repeats the context every `n` data packets (0: never).
    pub fn every(mut self, n: u64) -> Self {
        self.every = n;
        self
    }

    /// Sends a DIFI version packet with the first and every repeated context packet.
    pub fn version(mut self, v: VersionInfo) -> Self {
        self.version = Some(v);
        self
    }

    /// The context as it stands.
    pub fn context(&self) -> &IfContext {
        &self.ctx
    }

    /// Data packets until a repeat is due (`u64::MAX` without repeats): a sender cuts its
    /// batch there.
    pub fn until_due(&self) -> u64 {
        if self.pending {
            0
        } else if self.every == 0 {
            u64::MAX
        } else {
            self.every.saturating_sub(self.since)
        }
    }

    /// Whether context packets go before the next data packet.
    pub fn due(&self) -> bool {
        self.until_due() == 0
    }

    /// Takes a setting by its tag name ([`SETTING_TAGS`]: Hz, samples per second, dB);
    /// returns whether it changed the context. Other names change nothing.
    pub fn apply(&mut self, name: &str, value: f64) -> bool {
        let c = &mut self.ctx;
        let before = c.clone();
        match name {
            "tx_rate" => c.sample_rate_sps = Some(value),
            "tx_freq" => c.rf_ref_freq_hz = Some(value),
            "tx_bandwidth" => c.bandwidth_hz = Some(value),
            // The whole gain in stage 1, as a USRP's one gain value.
            "tx_gain" => c.gain_db = Some((value as f32, 0.0)),
            _ => return false,
        }
        let changed = *c != before;
        if changed {
            self.pending = true;
            self.changed = true;
        }
        changed
    }

    /// The packets due now, in sending order (context, then version), stamped with the
    /// time `at` of the next data packet's first item (the time from which the settings
    /// apply), in the data's kind of timestamp. Resets the repeat count.
    pub fn packets(&mut self, at: Option<PacketTime>) -> Result<Vec<Vec<u8>>, FormatError> {
        let mut ctx = self.ctx.clone();
        ctx.changed = self.changed;
        let mut out = vec![emit_context_at(&ctx, self.context_count, at)?];
        // Versions go with the first context and with the repeats, not with each change.
        let with_version = self.sent == 0 || !self.changed;
        if let (Some(v), true) = (self.version, with_version) {
            let id = self.ctx.stream_id.unwrap_or(0);
            out.push(emit_version(
                id,
                &v,
                self.version_count,
                self.sent == 0,
                at,
            )?);
            self.version_count = self.version_count.wrapping_add(1) & 0xf;
        }
        self.context_count = self.context_count.wrapping_add(1) & 0xf;
        self.sent += 1;
        self.since = 0;
        self.pending = false;
        self.changed = false;
        Ok(out)
    }

    /// Counts data packets sent.
    pub fn data_sent(&mut self, n: u64) {
        self.since += n;
    }

    /// Context packets built so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::vrt::context::version::parse_version;
    use crate::format::vrt::context::{Difi, parse_context};

    /// A context with every field DIFI requires.
    fn difi_ctx() -> IfContext {
        IfContext {
            reference_point_id: Some(0),
            bandwidth_hz: Some(8e6),
            if_ref_freq_hz: Some(0.0),
            rf_ref_freq_hz: Some(2.4e9),
            if_band_offset_hz: Some(0.0),
            reference_level_dbm: Some(-10.0),
            gain_db: Some((20.0, 0.0)),
            sample_rate_sps: Some(10e6),
            timestamp_adjustment_fs: Some(0),
            timestamp_cal_time: Some(0),
            state_indicators: Some(0),
            payload_format: crate::sample::WireFormat::Sc16Item32Be.vita49_payload_format(),
            ..IfContext::default()
        }
    }

    /// A field not set is never sent as a zero: DIFI's packets need every field they carry
    /// set (an error naming those that are not), VITA-49.2's leave it out.
    #[test]
    fn a_field_not_set_is_an_error_in_difi_and_absent_in_vita49() {
        let ctx = IfContext {
            bandwidth_hz: None,
            gain_db: None,
            ..difi_ctx()
        };
        let e = ContextSender::new(ctx.clone(), 1)
            .packets(None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("bandwidth_hz, gain_db") && e.contains("DIFI"),
            "{e}"
        );
        let sent = ContextSender::vita49(ctx, 1).packets(None).unwrap();
        let c = parse_context(&sent[0]).unwrap();
        assert_eq!((c.bandwidth_hz, c.gain_db, c.difi), (None, None, None));
        assert_eq!(c.rf_ref_freq_hz, Some(2.4e9));
        assert_eq!(c.changes(None), [("rx_rate", 10e6), ("rx_freq", 2.4e9)]);
    }

    #[test]
    fn context_on_start_on_changes_and_every_n_with_versions_on_start_and_repeats() {
        let v = VersionInfo {
            year: 2026,
            day: 329,
            revision: 0,
            kind: 1,
            icd_version: 0,
        };
        let mut s = ContextSender::new(difi_ctx(), 5).every(10).version(v);
        let first = s.packets(Some(PacketTime::SampleCount(0))).unwrap();
        assert_eq!(first.len(), 2);
        let c = parse_context(&first[0]).unwrap();
        assert_eq!(c.difi, Some(Difi::StandardContext { complete: true }));
        assert_eq!(
            (c.stream_id, c.changed, c.sample_count),
            (Some(5), true, Some(0))
        );
        assert_eq!(parse_version(&first[1]).unwrap(), (Some(5), v));
        assert_eq!(
            parse_context(&first[1]).unwrap().difi,
            Some(Difi::VersionFlavor)
        );
        // A change: context only, change indicator set.
        s.data_sent(3);
        assert_eq!(s.until_due(), 7);
        assert!(s.apply("tx_freq", 1e9));
        let changed = s.packets(Some(PacketTime::SampleCount(300))).unwrap();
        assert_eq!(changed.len(), 1);
        let c = parse_context(&changed[0]).unwrap();
        assert_eq!((c.rf_ref_freq_hz, c.changed), (Some(1e9), true));
        // A repeat: the same context, no change, with a version.
        s.data_sent(10);
        assert!(s.due());
        let again = s.packets(Some(PacketTime::SampleCount(1300))).unwrap();
        assert_eq!(again.len(), 2);
        let c = parse_context(&again[0]).unwrap();
        assert_eq!((c.rf_ref_freq_hz, c.changed), (Some(1e9), false));
        // Packet counts per packet type.
        let count = |b: &[u8]| b[1] & 0xf;
        assert_eq!(
            [count(&first[0]), count(&changed[0]), count(&again[0])],
            [0, 1, 2]
        );
        assert_eq!([count(&first[1]), count(&again[1])], [0, 1]);
    }

    #[test]
    fn a_version_out_of_range_is_an_error() {
        let v = VersionInfo {
            year: 1999,
            day: 1,
            revision: 0,
            kind: 0,
            icd_version: 0,
        };
        let mut s = ContextSender::new(difi_ctx(), 0).version(v);
        assert!(s.packets(None).is_err());
    }
}
