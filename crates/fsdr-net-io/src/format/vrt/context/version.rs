//! DIFI's version flavor context packet (DIFI 1.1 on): an extension context packet (type 5)
//! of class (DIFI OUI, 0, 4) whose CIF0 enables only CIF1, whose CIF1 carries the V49 spec
//! compliance (VITA-49.2: 4) and the version and build code of the sender. Built and read
//! with the `vita49` crate.
//!
//! ```
//! use fsdr_net_io::format::vrt::context::version::{VersionInfo, emit_version, parse_version};
//!
//! let v = VersionInfo { year: 2026, day: 329, revision: 1, kind: 1, icd_version: 0 };
//! use fsdr_net_io::format::vrt::context::PacketTime;
//! let bytes = emit_version(7, &v, 0, true, Some(PacketTime::SampleCount(96_000))).unwrap();
//! let (stream, back) = parse_version(&bytes).unwrap();
//! assert_eq!((stream, back), (Some(7), v));
//! ```

use vita49::PacketType;
use vita49::prelude::*;

use super::{DIFI_INFO_CLASS, DIFI_OUI, DIFI_VERSION_CLASS, PacketTime, vita};
use crate::format::FormatError;

/// The CIF1 of a DIFI version packet: V49 spec compliance (bit 3), version and build code
/// (bit 2).
pub const DIFI_VERSION_CIF1: u32 = 0x0000_000C;
/// The V49 spec compliance value DIFI states: VITA-49.2.
pub const V49_2_COMPLIANCE: u32 = 4;

/// The version and build code a DIFI version packet carries (VITA-49.2 9.10.4, with DIFI's
/// split of the user-defined bits into a type and an ICD version).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionInfo {
    /// Year the sender was built, 2000 to 2127.
    pub year: u16,
    /// Day of that year, 1 to 366.
    pub day: u16,
    /// Build of that day, 0 to 63.
    pub revision: u8,
    /// DIFI's type field (4 bits).
    pub kind: u8,
    /// DIFI's ICD version (6 bits).
    pub icd_version: u8,
}

impl VersionInfo {
    /// The 32-bit version and build code: year − 2000 (7 bits), day (9), revision (6),
    /// type (4), ICD version (6). An error when a field is out of its range.
    pub fn code(&self) -> Result<u32, FormatError> {
        let ok = (2000..=2127).contains(&self.year)
            && (1..=366).contains(&self.day)
            && self.revision < 64
            && self.kind < 16
            && self.icd_version < 64;
        if !ok {
            return Err(FormatError::Context(format!(
                "version {self:?} does not fit DIFI's version and build code (year 2000-2127, \
                 day 1-366, revision < 64, type < 16, ICD version < 64)"
            )));
        }
        Ok((u32::from(self.year - 2000) << 25)
            | (u32::from(self.day) << 16)
            | (u32::from(self.revision) << 10)
            | (u32::from(self.kind) << 6)
            | u32::from(self.icd_version))
    }

    /// The fields of a version and build code.
    pub fn from_code(code: u32) -> Self {
        Self {
            year: 2000 + (code >> 25) as u16,
            day: ((code >> 16) & 0x1ff) as u16,
            revision: ((code >> 10) & 0x3f) as u8,
            kind: ((code >> 6) & 0xf) as u8,
            icd_version: (code & 0x3f) as u8,
        }
    }
}

/// Builds a DIFI version packet for `stream_id` with packet count `count` (4 bits),
/// `changed` as its context change indicator, and a timestamp when given.
pub fn emit_version(
    stream_id: u32,
    version: &VersionInfo,
    count: u8,
    changed: bool,
    time: Option<PacketTime>,
) -> Result<Vec<u8>, FormatError> {
    let code = version.code()?;
    let mut p = Vrt::new_context_packet();
    p.header_mut().set_packet_type(PacketType::ExtensionContext);
    p.set_stream_id(Some(stream_id));
    let mut id = vita49::ClassIdentifier::default();
    id.set_oui(DIFI_OUI);
    id.set_information_class_code(DIFI_INFO_CLASS);
    id.set_packet_class_code(DIFI_VERSION_CLASS);
    p.set_class_id(Some(id));
    p.header_mut().set_packet_count(count & 0xf);
    if let Some(t) = time {
        t.set(&mut p)?;
    }
    let c = p.payload_mut().context_mut().map_err(vita)?;
    c.set_context_changed(changed);
    c.set_v49_spec_compliance(Some(V49_2_COMPLIANCE));
    c.set_version_and_build_code(Some(code));
    p.update_packet_size();
    p.to_bytes().map_err(vita)
}

/// Reads a DIFI version packet: its stream ID and version. An error for any other packet.
pub fn parse_version(datagram: &[u8]) -> Result<(Option<u32>, VersionInfo), FormatError> {
    super::check_supported(datagram)?;
    let packet = Vrt::try_from(datagram).map_err(vita)?;
    let class = packet.class_id().map(|id| {
        (
            id.oui(),
            id.information_class_code(),
            id.packet_class_code(),
        )
    });
    if class != Some((DIFI_OUI, DIFI_INFO_CLASS, DIFI_VERSION_CLASS)) {
        return Err(FormatError::Context("not a DIFI version packet".into()));
    }
    let c = packet.payload().context().map_err(vita)?;
    let code = c
        .version_and_build_code()
        .copied()
        .ok_or_else(|| FormatError::Context("version packet without a version".into()))?;
    Ok((packet.stream_id(), VersionInfo::from_code(code)))
}
