//! [`StreamSelector`]: which datagrams of a port belong to one stream, for receivers that
//! split one port into several outputs (a multi-channel radio, several DIFI streams).

use std::fmt;
use std::net::SocketAddr;

/// Chooses the datagrams of one stream on a port shared by several.
///
/// ```
/// use fsdr_net_io::StreamSelector;
///
/// let ch1 = StreamSelector::Id(1); // channel 1 (0-based): VRT stream ID 1, CHDR endpoint 1
/// assert!(ch1.matches(Some(1), "127.0.0.1:5000".parse().unwrap()));
/// assert!(!ch1.matches(Some(0), "127.0.0.1:5000".parse().unwrap()));
/// assert_eq!(StreamSelector::key_of(Some(7), "127.0.0.1:5000".parse().unwrap()), "id 7 from 127.0.0.1:5000");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamSelector {
    /// The stream identifier in the header: VITA-49 stream ID, CHDR destination endpoint.
    Id(u32),
    /// Every datagram from one sender address.
    Sender(SocketAddr),
    /// A stream ID from one sender.
    IdFrom(u32, SocketAddr),
}

impl StreamSelector {
    /// Whether a datagram with this stream identifier from `source` belongs to the stream.
    pub fn matches(&self, stream_id: Option<u32>, source: SocketAddr) -> bool {
        match *self {
            StreamSelector::Id(id) => stream_id == Some(id),
            StreamSelector::Sender(a) => source == a,
            StreamSelector::IdFrom(id, a) => stream_id == Some(id) && source == a,
        }
    }

    /// The name under which datagrams no selector took are counted.
    pub fn key_of(stream_id: Option<u32>, source: SocketAddr) -> String {
        match stream_id {
            Some(id) => format!("id {id} from {source}"),
            None => format!("from {source}"),
        }
    }
}

impl fmt::Display for StreamSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StreamSelector::Id(id) => write!(f, "id {id}"),
            StreamSelector::Sender(a) => write!(f, "from {a}"),
            StreamSelector::IdFrom(id, a) => write!(f, "id {id} from {a}"),
        }
    }
}
