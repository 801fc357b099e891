//! [`SourceStats`]: every counter of a [`UdpSource`](super::UdpSource), and its form on the
//! `stats` message port.

use std::collections::HashMap;

use fsdr_net_io::Stats;
use fsdr_net_io::depacketizer::DepacketizerStats;
use futuresdr::runtime::Pmt;
use serde::Serialize;

use crate::Error;

/// Every counter of a source: the receive engine's ([`Stats`]) and the stream's
/// ([`DepacketizerStats`]: items, zeros, missed items).
///
/// On the `stats` port it travels as a `Pmt::MapStrPmt` with one `Pmt::U64` per field; the
/// keys are [`SourceStats::KEYS`] (in that documented order; a map has none of its own), and
/// [`SourceStats::from_pmt`] rebuilds the struct from a message, so
/// [`Stats::accounted`](fsdr_net_io::Stats::accounted) holds from the message alone.
///
/// ```
/// use fsdr_net::SourceStats;
///
/// let mut s = SourceStats::default();
/// s.engine.delivered = 3;
/// s.stream.items = 300;
/// let back = SourceStats::from_pmt(&s.to_pmt()).unwrap();
/// assert_eq!(back, s);
/// assert!(SourceStats::KEYS.iter().any(|(k, _)| *k == "unconsumed"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SourceStats {
    /// The receive engine's counters.
    #[serde(flatten)]
    pub engine: Stats,
    /// The stream's counters.
    #[serde(flatten)]
    pub stream: DepacketizerStats,
}

impl SourceStats {
    /// Every key of the `stats` message with what it counts: the engine's fields
    /// ([`Stats::FIELDS`]) then the stream's ([`DepacketizerStats::FIELDS`]).
    pub const KEYS: &'static [(&'static str, &'static str)] = &const {
        let mut all = [("", ""); Stats::FIELDS.len() + DepacketizerStats::FIELDS.len()];
        let mut i = 0;
        while i < Stats::FIELDS.len() {
            all[i] = Stats::FIELDS[i];
            i += 1;
        }
        let mut j = 0;
        while j < DepacketizerStats::FIELDS.len() {
            all[i + j] = DepacketizerStats::FIELDS[j];
            j += 1;
        }
        all
    };

    /// Every field as `(key, value)` in the order of [`SourceStats::KEYS`].
    pub fn fields(&self) -> impl Iterator<Item = (&'static str, u64)> + use<> {
        self.engine.fields().chain(self.stream.fields())
    }

    /// The `stats` message.
    pub fn to_pmt(&self) -> Pmt {
        Pmt::MapStrPmt(
            self.fields()
                .map(|(k, v)| (k.to_string(), Pmt::U64(v)))
                .collect::<HashMap<_, _>>(),
        )
    }

    /// Rebuilds the counters from a `stats` message: every key of [`SourceStats::KEYS`] must
    /// be there as a `Pmt::U64`.
    pub fn from_pmt(pmt: &Pmt) -> Result<SourceStats, Error> {
        let Pmt::MapStrPmt(map) = pmt else {
            return Err(Error::config(format!(
                "a stats message is a MapStrPmt, not {pmt:?}"
            )));
        };
        let mut s = SourceStats::default();
        for (key, _) in Self::KEYS {
            let v = match map.get(*key) {
                Some(Pmt::U64(v)) => *v,
                other => {
                    return Err(Error::config(format!(
                        "stats message: {key} is {other:?}, not a U64"
                    )));
                }
            };
            let _ = s.engine.set_field(key, v) || s.stream.set_field(key, v);
        }
        Ok(s)
    }
}

/// The engine's counters are reachable directly: `stats.delivered`, `stats.accounted()`.
impl std::ops::Deref for SourceStats {
    type Target = Stats;
    fn deref(&self) -> &Stats {
        &self.engine
    }
}

impl std::fmt::Display for SourceStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{}", self.engine)?;
        let parts: Vec<String> = self
            .stream
            .fields()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        f.write_str(&parts.join(", "))
    }
}
