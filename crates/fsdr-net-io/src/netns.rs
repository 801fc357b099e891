//! A test bed of two network namespaces joined by a veth pair: a sender and a receiver that
//! talk over a real link (multicast, jumbo frames, XDP) where nothing can leave on a real
//! interface. Made with iproute2's `ip` (needs root), removed when dropped — also when the
//! test that made it panics.
//!
//! ```no_run
//! use fsdr_net_io::netns::VethPair;
//!
//! let pair = VethPair::create("demo", 9000).expect("root and iproute2");
//! // A socket made inside namespace `b` receives what `a` sends over the veth.
//! let rx = pair.b.run(|| std::net::UdpSocket::bind((pair.b.addr, 0))).unwrap();
//! let to = rx.local_addr().unwrap();
//! pair.a.run(|| std::net::UdpSocket::bind((pair.a.addr, 0))?.send_to(b"hi", to)).unwrap();
//! let mut buf = [0u8; 8];
//! assert_eq!(rx.recv(&mut buf).unwrap(), 2);
//! ```

use std::net::Ipv4Addr;
use std::os::fd::AsFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// Runs `ip ARGS`; the error says what failed and what `ip` printed.
pub fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip {}: {e} (is iproute2 installed?)", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Whether this process may make namespaces (root).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    // Checked by: nothing to check: no memory is passed.
    unsafe { libc::geteuid() == 0 }
}

/// A test that cannot run here (`why`) fails when `FSDR_NET_REQUIRE_<NEED>` is set — as
/// `cargo xtask test` sets it wherever the need can be met — and otherwise says so on
/// stderr and returns, so that the calling test passes without pretending it checked
/// anything.
pub fn unavailable(need: &str, why: &str) {
    let var = format!("FSDR_NET_REQUIRE_{}", need.to_ascii_uppercase());
    if std::env::var_os(&var).is_some() {
        panic!("{var} is set, but this test cannot run here: {why}");
    }
    eprintln!("not run here ({why}); set {var} to make that a failure");
}

/// One end of a [`VethPair`]: its namespace, interface and address.
#[derive(Debug, Clone)]
pub struct Side {
    /// Namespace name (`ip netns exec NAME …`).
    pub netns: String,
    /// The veth interface inside it.
    pub ifname: String,
    /// Its IPv4 address (a /30 of the pair's own).
    pub addr: Ipv4Addr,
}

impl Side {
    /// `ip netns exec NETNS PROGRAM`: a command to run a program inside this namespace.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.netns]).arg(program);
        c
    }

    /// Runs `f` on a thread that has entered this namespace: the sockets it makes (and the
    /// threads it starts) live there.
    pub fn run<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        let path = format!("/var/run/netns/{}", self.netns);
        std::thread::scope(|s| {
            s.spawn(|| {
                let ns =
                    std::fs::File::open(&path).unwrap_or_else(|e| panic!("opening {path}: {e}"));
                nix::sched::setns(ns.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET)
                    .unwrap_or_else(|e| panic!("entering {path}: {e}"));
                f()
            })
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
        })
    }

    /// `ip ARGS` inside this namespace.
    pub fn ip(&self, args: &[&str]) -> Result<(), String> {
        let mut v = vec!["netns", "exec", &self.netns, "ip"];
        v.extend_from_slice(args);
        ip(&v)
    }
}

/// Two namespaces joined by a veth pair, deleted on drop. See the [module documentation](self).
#[derive(Debug)]
pub struct VethPair {
    /// The first namespace (the sender's, by convention).
    pub a: Side,
    /// The second namespace (the receiver's).
    pub b: Side,
}

static NEXT: AtomicU32 = AtomicU32::new(0);

impl VethPair {
    /// Makes namespaces `fn<tag><pid><n>a` and `…b`, a veth pair between them with `mtu`,
    /// addresses 10.(200+x).y.1/30 and .2/30 unique within this process, `lo` up in each,
    /// and multicast routed over the veth. Fails (with the reason) when not root or `ip` is
    /// missing; whatever was made is removed again.
    pub fn create(tag: &str, mtu: u32) -> Result<VethPair, String> {
        if !is_root() {
            return Err("not root: network namespaces need CAP_SYS_ADMIN".into());
        }
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let id = std::process::id();
        let base = format!("fn{}{}{n}", &tag[..tag.len().min(4)], id % 100_000);
        // Distinct subnets for parallel tests of one process: 10.(200 + n/64).(n%64*4).x.
        let (hi, lo) = (200 + (n / 64) % 50, (n % 64) * 4);
        let side = |s: &str, host: u32| Side {
            netns: format!("{base}{s}"),
            ifname: format!("v{base}{s}"),
            addr: Ipv4Addr::new(10, hi as u8, lo as u8, host as u8),
        };
        let pair = VethPair {
            a: side("a", 1),
            b: side("b", 2),
        };
        // From here on, drop cleans up whatever exists.
        ip(&["netns", "add", &pair.a.netns])?;
        ip(&["netns", "add", &pair.b.netns])?;
        ip(&[
            "link",
            "add",
            &pair.a.ifname,
            "netns",
            &pair.a.netns,
            "type",
            "veth",
            "peer",
            "name",
            &pair.b.ifname,
            "netns",
            &pair.b.netns,
        ])?;
        let mtu = mtu.to_string();
        for s in [&pair.a, &pair.b] {
            s.ip(&["addr", "add", &format!("{}/30", s.addr), "dev", &s.ifname])?;
            s.ip(&["link", "set", &s.ifname, "mtu", &mtu, "up"])?;
            s.ip(&["link", "set", "lo", "up"])?;
            // Multicast goes out on the veth (the only other interface).
            s.ip(&["route", "add", "224.0.0.0/4", "dev", &s.ifname])?;
        }
        Ok(pair)
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        // Deleting a namespace deletes its end of the pair, and the peer goes with it.
        let _ = ip(&["netns", "del", &self.a.netns]);
        let _ = ip(&["netns", "del", &self.b.netns]);
    }
}

/// Where a test's receiver and sender run for a backend: both on loopback, or — for a
/// backend that needs a real link (`xdp`) — the receiver in one namespace of a [`VethPair`]
/// and the sender in the other. Lets a test that loops over
/// [`Backend::ALL`](crate::Backend::ALL) run every backend.
///
/// ```no_run
/// use fsdr_net_io::netns::TestLink;
/// use fsdr_net_io::{Backend, Engine};
///
/// for &backend in Backend::ALL {
///     let Some(link) = TestLink::for_backend(backend) else { continue };
///     let engine = link.receive(|| Engine::start(link.config())).unwrap();
///     let to = engine.local_addr();
///     link.send(|| std::net::UdpSocket::bind("0.0.0.0:0")?.send_to(b"hi", to)).unwrap();
/// }
/// ```
#[derive(Debug)]
pub struct TestLink {
    backend: crate::Backend,
    pair: Option<VethPair>,
}

impl TestLink {
    /// The link for `backend`; `None` (said on stderr, or a failure where
    /// `FSDR_NET_REQUIRE_NETNS` is set) when it needs namespaces this process cannot make.
    pub fn for_backend(backend: crate::Backend) -> Option<TestLink> {
        let pair = if backend == crate::Backend::Xdp {
            match VethPair::create("link", 9000) {
                Ok(p) => Some(p),
                Err(e) => {
                    unavailable("netns", &format!("{backend}: {e}"));
                    return None;
                }
            }
        } else {
            None
        };
        Some(TestLink { backend, pair })
    }

    /// An engine configuration for this backend: bound to port 0 of loopback or of the
    /// receiving veth end (whose interface the `xdp` backend then uses).
    pub fn config(&self) -> crate::EngineConfig {
        let mut cfg = crate::EngineConfig::new(self.bind());
        self.apply(&mut cfg);
        cfg
    }

    /// The backend this link is for.
    pub fn backend(&self) -> crate::Backend {
        self.backend
    }

    /// Where a receiver binds: port 0 of loopback, or of the receiving veth end.
    pub fn bind(&self) -> std::net::SocketAddr {
        match &self.pair {
            None => (Ipv4Addr::LOCALHOST, 0).into(),
            Some(p) => (p.b.addr, 0).into(),
        }
    }

    /// Sets the backend, and the interface where it needs one.
    pub fn apply(&self, cfg: &mut crate::EngineConfig) {
        cfg.backend = self.backend;
        if let Some(p) = &self.pair {
            cfg.xdp.interface = Some(p.b.ifname.clone());
        }
    }

    /// Runs `f` where the receiver lives (sockets and threads it makes stay there).
    pub fn receive<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pair {
            None => f(),
            Some(p) => p.b.run(f),
        }
    }

    /// Runs `f` where the sender lives (threads it spawns stay there).
    pub fn send<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.pair {
            None => f(),
            Some(p) => p.a.run(f),
        }
    }

    /// The pair, when the backend runs over one.
    pub fn pair(&self) -> Option<&VethPair> {
        self.pair.as_ref()
    }
}
