//! One multicast convention for every example: a receiver given a group address
//! (`--listen 239.7.7.7:47421`) joins it on `--interface` (a name or an address; `--source`
//! for a source-specific join); a sender given one (`--dest 239.7.7.7:47421`) sends on
//! `--interface` with `--ttl`.

use std::net::{IpAddr, SocketAddr};

use anyhow::{Context, Result, bail};
use fsdr_net::io::socket::{Multicast, MulticastInterface, SocketConfig};

/// The multicast flags of a receiving example.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RxMulticastArgs {
    /// With a multicast --listen address: the interface to join the group on, by name
    /// (`eth0`) or address (default: the kernel's choice).
    #[arg(long)]
    pub interface: Option<String>,
    /// With a multicast --listen address: join source-specifically, taking only this
    /// sender's datagrams (IPv4).
    #[arg(long)]
    pub source: Option<IpAddr>,
}

impl RxMulticastArgs {
    /// The group to join for `listen` (`None` for a unicast address); an error for
    /// `--interface`/`--source` without a group, or an interface that is not there.
    pub fn group(&self, listen: Option<SocketAddr>) -> Result<Option<Multicast>> {
        let Some(addr) = listen.filter(|a| a.ip().is_multicast()) else {
            if self.interface.is_some() || self.source.is_some() {
                bail!("--interface and --source need a multicast --listen address");
            }
            return Ok(None);
        };
        let interface = MulticastInterface::parse(self.interface.as_deref(), addr.ip())
            .context("--interface")?;
        Ok(Some(Multicast {
            group: addr.ip(),
            interface,
        }))
    }

    /// Sets the group (and source) on a receive socket's configuration.
    pub fn apply(&self, listen: Option<SocketAddr>, socket: &mut SocketConfig) -> Result<()> {
        socket.multicast = self.group(listen)?;
        socket.multicast_source = self.source;
        Ok(())
    }
}

/// The multicast flags of a sending example.
#[derive(Debug, Clone, clap::Args)]
pub struct TxMulticastArgs {
    /// With a multicast --dest address: the interface to send on, by name or address
    /// (default: the kernel's choice).
    #[arg(long)]
    pub interface: Option<String>,
    /// With a multicast --dest address: the packets' time to live (hops; 1 stays on the
    /// link).
    #[arg(long, default_value_t = 1)]
    pub ttl: u32,
}

impl TxMulticastArgs {
    /// The interface (IPv4 address, IPv6 index) and TTL to send to `dest` with; an error for
    /// `--interface` with a unicast destination.
    pub fn sending(&self, dest: SocketAddr) -> Result<(Option<IpAddr>, Option<u32>, u32)> {
        if !dest.ip().is_multicast() {
            if self.interface.is_some() {
                bail!("--interface needs a multicast --dest address");
            }
            return Ok((None, None, self.ttl));
        }
        let i = MulticastInterface::parse(self.interface.as_deref(), dest.ip())
            .context("--interface")?;
        Ok((i.v4(), i.v6(), self.ttl))
    }
}
