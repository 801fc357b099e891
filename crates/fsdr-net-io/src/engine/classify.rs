//! The first judgement of a received datagram, the same on every receive path (the engine's
//! worker for every backend, the in-place receiver's copying path): cut short by the buffer,
//! from a sender outside the allow-list, or not a packet of the stream's format — each
//! counted once, in that order — else its parsed header, whose class the caller looks at.

use crate::format::{Format, PacketInfo};
use crate::socket::SourceFilter;
use crate::stats::LocalCounts;
use crate::sys::RecvMeta;

/// Why a datagram goes no further.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Larger than its buffer (`truncated`).
    Truncated,
    /// From a sender the filter refuses (`rejected`).
    Rejected,
    /// The format's parser refused it (`malformed`).
    Malformed,
}

impl Refused {
    /// Counts it in its one counter (the datagram was counted `received` already).
    pub(crate) fn count(self, c: &mut LocalCounts) {
        match self {
            Refused::Truncated => c.truncated += 1,
            Refused::Rejected => c.rejected += 1,
            Refused::Malformed => {
                if c.malformed == 0 {
                    tracing::debug!("malformed datagram");
                }
                c.malformed += 1;
            }
        }
    }
}

/// Admits datagram `bytes` (received with `meta`) or says why not.
pub(crate) fn admit(
    meta: &RecvMeta,
    filter: &SourceFilter,
    format: Format,
    bytes: &[u8],
) -> Result<PacketInfo, Refused> {
    if meta.truncated {
        return Err(Refused::Truncated);
    }
    if !filter.accepts(meta.source) {
        return Err(Refused::Rejected);
    }
    format.parse(bytes).map_err(|e| {
        tracing::trace!(error = %e, "malformed datagram");
        Refused::Malformed
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_comes_before_the_sender_and_the_sender_before_the_format() {
        let from = |port| Some(std::net::SocketAddr::from(([10, 0, 0, 1], port)));
        let only = SourceFilter::peer("10.0.0.1:1".parse().unwrap());
        let bad = [0u8; 3];
        let meta = |truncated, port| RecvMeta {
            len: 3,
            truncated,
            source: from(port),
            ..RecvMeta::default()
        };
        let r = |m: &RecvMeta| admit(m, &only, Format::Seq64, &bad).err();
        assert_eq!(r(&meta(true, 2)), Some(Refused::Truncated));
        assert_eq!(r(&meta(false, 2)), Some(Refused::Rejected));
        assert_eq!(r(&meta(false, 1)), Some(Refused::Malformed));
        let mut c = LocalCounts::default();
        for f in [Refused::Truncated, Refused::Rejected, Refused::Malformed] {
            f.count(&mut c);
        }
        assert_eq!((c.truncated, c.rejected, c.malformed), (1, 1, 1));
    }
}
