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
    /// The interface the stream arrives on: with a multicast --listen address the one to
    /// join the group on, by name (`eth0`) or address (default: the kernel's choice); with
    /// `--backend xdp` the one to attach to, by name.
    #[arg(long)]
    pub interface: Option<String>,
    /// With a multicast --listen address: join source-specifically, taking only this
    /// sender's datagrams (IPv4).
    #[arg(long)]
    pub source: Option<IpAddr>,
}

impl RxMulticastArgs {
    /// Checks the flags before anything starts: `--source` needs a group, `--interface` a
    /// group or the xdp backend (`xdp`), and a group's interface must be there.
    pub fn check(&self, listen: Option<SocketAddr>, xdp: bool) -> Result<()> {
        let group = listen.is_some_and(|a| a.ip().is_multicast());
        if !group && self.source.is_some() {
            bail!("--source needs a multicast --listen address");
        }
        if !group && !xdp && self.interface.is_some() {
            bail!("--interface needs a multicast --listen address or --backend xdp");
        }
        if xdp && self.interface.is_none() {
            bail!("--backend xdp needs --interface IFACE, the interface the stream arrives on");
        }
        self.group(listen).map(drop)
    }

    /// The group to join for `listen` (`None` for a unicast address); an error for an
    /// interface that is not there.
    pub fn group(&self, listen: Option<SocketAddr>) -> Result<Option<Multicast>> {
        let Some(addr) = listen.filter(|a| a.ip().is_multicast()) else {
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

    /// With the xdp backend: the interface to attach to.
    pub fn apply_xdp(&self, cfg: &mut fsdr_net::io::EngineConfig) {
        if cfg.backend == fsdr_net::io::Backend::Xdp {
            cfg.xdp.interface = self.interface.clone();
        }
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
