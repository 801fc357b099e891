//! Several in-place receivers on one port, one per stream: a radio that sends every channel to
//! one port (CHDR destination endpoints, VITA-49 stream IDs) is split by the kernel, not by a
//! thread that would have to look at each datagram before it knows where its samples go.
//! One `SO_REUSEPORT` socket per stream, bound to the same address, and a classic-BPF program
//! on the group (`sys::bpf::attach_reuseport_by_stream`) that delivers each datagram to the
//! socket of its stream; each socket has an in-place receiver of its own, which follows only
//! that stream, so each stream's payloads land in its own output buffers without a copy.
//! The receivers run on a thread each, or fewer threads serve several (`group_thread.rs`).

use std::sync::Arc;

use crate::Error;
use crate::engine::Backend;
use crate::format::Format;
use crate::notify::Notify;
use crate::sample::Item;
use crate::socket::OpenedSocket;
use crate::sys::bpf::{MAX_STEERED_STREAMS, StreamIdField, attach_reuseport_by_stream};

use super::{InPlaceConfig, InPlaceReceiver, ItemBuffer, Runner, group_thread};

/// What a receiver of a group is given instead of opening its own: its socket of the group,
/// the notifier every receiver of the group signals, and its stream.
#[derive(Default)]
pub(super) struct Member {
    pub(super) socket: Option<OpenedSocket>,
    pub(super) notify: Option<Arc<Notify>>,
    pub(super) stream: Option<u32>,
}

/// The field that carries the stream ID in `format`'s datagrams, if it has one.
fn id_field(format: Format) -> Option<StreamIdField> {
    match format {
        Format::Chdr => Some(StreamIdField::ChdrDstEpid),
        Format::Vrt => Some(StreamIdField::VrtStreamId),
        _ => None,
    }
}

/// Whether `ids` can be told apart by the kernel in `format`'s datagrams.
fn check(format: Format, backend: Backend, gro: bool, ids: &[u32]) -> Result<StreamIdField, Error> {
    let field = id_field(format).ok_or_else(|| {
        Error::config(format!(
            "{format} datagrams carry no stream ID: one in-place receiver per stream needs CHDR \
             (destination endpoint) or VRT (stream ID)"
        ))
    })?;
    if backend != Backend::Recvmmsg {
        return Err(Error::Unsupported {
            backend,
            reason: "one in-place receiver per stream splits a port with SO_REUSEPORT sockets, \
                     read with recvmmsg (Backend::Recvmmsg)"
                .into(),
        });
    }
    if gro {
        // GRO coalesces a flow's datagrams before the socket is chosen, by the first one's
        // stream: the others of a coalesced receive would reach that stream's socket.
        return Err(Error::config(
            "one in-place receiver per stream cannot use UDP GRO: a coalesced receive goes to \
             the socket of its first datagram's stream",
        ));
    }
    if ids.is_empty() || ids.len() > MAX_STEERED_STREAMS {
        return Err(Error::config(format!(
            "one in-place receiver per stream takes 1 to {MAX_STEERED_STREAMS} stream IDs, not {}",
            ids.len()
        )));
    }
    if let Some((_, dup)) = ids
        .iter()
        .enumerate()
        .find(|(i, id)| ids[..*i].contains(id))
    {
        return Err(Error::config(format!("stream ID {dup} is given twice")));
    }
    if field == StreamIdField::ChdrDstEpid
        && let Some(id) = ids.iter().find(|&&id| id > u32::from(u16::MAX))
    {
        return Err(Error::config(format!(
            "stream ID {id}: a CHDR destination endpoint has 16 bits"
        )));
    }
    Ok(field)
}

impl<T: Item, B: ItemBuffer<T>> InPlaceReceiver<T, B> {
    /// Starts one in-place receiver per stream ID on the one address of `cfg`, each with a
    /// socket of its own (`SO_REUSEPORT`), in the order of `ids`, on one receive thread per
    /// stream up to half the CPUs ([`start_streams_on`](Self::start_streams_on) chooses). The
    /// kernel delivers each datagram to the socket of its stream (a classic-BPF program on
    /// the group reads the CHDR destination endpoint or the VRT stream ID from the payload);
    /// datagrams of any other stream, and VRT packets without a stream ID, go to the first
    /// receiver, which counts them `skipped`. Every receiver of the group signals the same
    /// [`notifier`](Self::notifier), so one consumer can wait for all of them. With
    /// [`Format::Chdr`] or [`Format::Vrt`] and [`Backend::Recvmmsg`] only, without UDP GRO.
    /// A sender's GSO send is one datagram until the receiving socket is chosen: it reaches
    /// the socket of its first datagram's stream, so a sender that uses GSO (as the
    /// [emulator](crate::emulator) does) sends each stream's datagrams in sends of their own.
    /// A receiver shut down while the others run leaves their steering as it was: its socket
    /// stays in the group until the last receiver is dropped (what comes for its stream then
    /// waits there unread).
    ///
    /// ```
    /// use fsdr_net_io::depacketizer::DepacketizerConfig;
    /// use fsdr_net_io::format::{DataHeader, Format};
    /// use fsdr_net_io::inplace::{InPlaceConfig, InPlaceReceiver};
    /// use fsdr_net_io::sample::{Decoder, WireFormat};
    /// use fsdr_net_io::{Backend, EngineConfig};
    /// use std::time::Duration;
    ///
    /// let mut engine = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    /// engine.backend = Backend::Recvmmsg;
    /// engine.format = Format::Vrt;
    /// let cfg = InPlaceConfig {
    ///     engine,
    ///     decoder: Decoder::<u8>::new(WireFormat::Plain).unwrap(),
    ///     depacketizer: DepacketizerConfig::default(),
    ///     buffers: 2,
    /// };
    /// let mut rxs = InPlaceReceiver::<u8, Vec<u8>>::start_streams(cfg, &[7, 9]).unwrap();
    /// for rx in &mut rxs {
    ///     rx.give(vec![0u8; 4096]).unwrap();
    /// }
    /// let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// for (seq, id) in [(0, 9), (0, 7), (1, 9)] {
    ///     let h = DataHeader { seq, stream_id: Some(id), ..Default::default() };
    ///     let mut dg = vec![id as u8; h.header_len(Format::Vrt) + 100];
    ///     Format::Vrt.emit_header(&mut dg, &h).unwrap();
    ///     tx.send_to(&dg, rxs[0].local_addr()).unwrap();
    /// }
    /// // Every receiver signals the one notifier.
    /// let notify = rxs[0].notifier();
    /// let mut items = [0usize; 2];
    /// while items != [100, 200] {
    ///     notify.wait_timeout(Duration::from_millis(100));
    ///     for (rx, n) in rxs.iter_mut().zip(&mut items) {
    ///         while let Some(f) = rx.take() {
    ///             *n += f.items;
    ///             rx.give(f.buffer).unwrap();
    ///         }
    ///     }
    /// }
    /// let counts: Vec<u64> = rxs.into_iter().map(|rx| rx.shutdown().0.delivered).collect();
    /// assert_eq!(counts, [1, 2]); // stream 7, stream 9
    /// ```
    pub fn start_streams(cfg: InPlaceConfig<T>, ids: &[u32]) -> Result<Vec<Self>, Error> {
        Self::start_streams_on(cfg, ids, default_threads(ids.len()))
    }

    /// [`start_streams`](Self::start_streams) with `threads` receive threads for the
    /// receivers (receiver `i` on thread `i % threads`; pinned, when
    /// [`EngineConfig::threads`](crate::EngineConfig) pins, as that many receive threads
    /// would be). With as many threads as streams each receiver has its own, which blocks in
    /// its socket; with fewer, a thread waits for all its receivers' sockets in one `ppoll`
    /// and serves each that has data, under load sleeping the poll interval
    /// ([`EngineConfig::poll_interval`](crate::EngineConfig)) once for all of them: fewer
    /// wake-ups and task switches on a loaded CPU, for streams one core can read. What each
    /// receiver delivers and counts is the same either way.
    ///
    /// ```
    /// use fsdr_net_io::depacketizer::DepacketizerConfig;
    /// use fsdr_net_io::format::{DataHeader, Format};
    /// use fsdr_net_io::inplace::{InPlaceConfig, InPlaceReceiver};
    /// use fsdr_net_io::sample::{Decoder, WireFormat};
    /// use fsdr_net_io::{Backend, EngineConfig};
    /// use std::time::Duration;
    ///
    /// let mut engine = EngineConfig::new("127.0.0.1:0".parse().unwrap());
    /// engine.backend = Backend::Recvmmsg;
    /// engine.format = Format::Chdr;
    /// let cfg = InPlaceConfig {
    ///     engine,
    ///     decoder: Decoder::<u8>::new(WireFormat::Plain).unwrap(),
    ///     depacketizer: DepacketizerConfig::default(),
    ///     buffers: 2,
    /// };
    /// // Three streams, one receive thread.
    /// let mut rxs = InPlaceReceiver::<u8, Vec<u8>>::start_streams_on(cfg, &[1, 2, 3], 1).unwrap();
    /// for rx in &mut rxs {
    ///     rx.give(vec![0u8; 4096]).unwrap();
    /// }
    /// let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    /// for (seq, id) in [(0, 3), (0, 1), (0, 2), (1, 3)] {
    ///     let h = DataHeader { seq, stream_id: Some(id), ..Default::default() };
    ///     let mut dg = vec![0u8; h.header_len(Format::Chdr) + 64];
    ///     Format::Chdr.emit_header(&mut dg, &h).unwrap();
    ///     tx.send_to(&dg, rxs[0].local_addr()).unwrap();
    /// }
    /// let notify = rxs[0].notifier();
    /// let mut items = [0usize; 3];
    /// while items != [64, 64, 128] {
    ///     notify.wait_timeout(Duration::from_millis(100));
    ///     for (rx, n) in rxs.iter_mut().zip(&mut items) {
    ///         while let Some(f) = rx.take() {
    ///             *n += f.items;
    ///             rx.give(f.buffer).unwrap();
    ///         }
    ///     }
    /// }
    /// let counts: Vec<u64> = rxs.into_iter().map(|rx| rx.shutdown().0.delivered).collect();
    /// assert_eq!(counts, [1, 1, 2]); // streams 1, 2, 3
    /// ```
    pub fn start_streams_on(
        cfg: InPlaceConfig<T>,
        ids: &[u32],
        threads: usize,
    ) -> Result<Vec<Self>, Error> {
        if threads == 0 {
            return Err(Error::config(
                "one in-place receiver per stream needs at least one receive thread",
            ));
        }
        let e = &cfg.engine;
        let field = check(e.format, e.backend, e.socket.gro, ids)?;
        let mut socket = cfg.engine.socket.clone();
        let addr = socket.bind;
        let sock_err = |source| Error::Socket { addr, source };
        let mut sockets = Vec::with_capacity(ids.len());
        for _ in ids {
            let opened = crate::socket::open_socket(&socket, true).map_err(sock_err)?;
            // The others bind where the first did (the port the kernel chose for port 0).
            socket.bind = opened.local_addr;
            sockets.push(opened);
        }
        attach_reuseport_by_stream(&sockets[0].socket, field, ids).map_err(|e| {
            Error::Unsupported {
                backend: cfg.engine.backend,
                reason: format!("SO_ATTACH_REUSEPORT_CBPF (steering by stream ID): {e}"),
            }
        })?;
        // The kernel numbers a group's sockets in the order they joined, and the program
        // returns that number; a socket that leaves gives its number to the last one. So
        // every socket stays in the group until the last receiver is gone.
        let kept = sockets
            .iter()
            .map(|o| o.socket.try_clone())
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(sock_err)?;
        let kept = Arc::new(kept);
        let notify = Arc::new(Notify::new());
        let mut cfg = cfg;
        cfg.engine.socket.bind = socket.bind;
        sockets
            .into_iter()
            .zip(ids)
            .map(|(opened, &id)| {
                let member = Member {
                    socket: Some(opened),
                    notify: Some(notify.clone()),
                    stream: Some(id),
                };
                // With a thread for each, each starts its own; else the receive loops are
                // handed to the group's threads below.
                let mut rx = Self::open_as(cfg.clone(), threads < ids.len(), member)?;
                rx._group = Some(kept.clone());
                Ok(rx)
            })
            .collect::<Result<Vec<_>, Error>>()
            .and_then(|rxs| {
                if threads < rxs.len() {
                    share_threads(rxs, threads, &cfg.engine.threads)
                } else {
                    Ok(rxs)
                }
            })
    }

    /// The receive loop of a receiver opened to run inline, taken out to run elsewhere.
    fn take_loop(&mut self) -> Option<Box<super::receiver::Receive<T, B>>> {
        match std::mem::replace(&mut self.runner, Runner::Thread(None)) {
            Runner::Inline { rx, .. } => Some(rx),
            other => {
                self.runner = other;
                None
            }
        }
    }
}

/// Receive threads for `streams` receivers of a port by default: one for each, up to half
/// the CPUs (the rest is the flowgraph's), at least one.
fn default_threads(streams: usize) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    streams.min(cpus / 2).max(1)
}

/// Starts `threads` group threads and hands each receiver's loop to one of them (receiver
/// `i` to thread `i % threads`).
fn share_threads<T: Item, B: ItemBuffer<T>>(
    mut rxs: Vec<InPlaceReceiver<T, B>>,
    threads: usize,
    opts: &crate::engine::ThreadOptions,
) -> Result<Vec<InPlaceReceiver<T, B>>, Error> {
    let mut loops: Vec<Vec<_>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, rx) in rxs.iter_mut().enumerate() {
        let l = rx
            .take_loop()
            .ok_or_else(|| Error::config("a group receiver was started on its own thread"))?;
        loops[i % threads].push(l);
    }
    for (t, group) in loops.into_iter().enumerate() {
        let (thread, dones) = group_thread::spawn(t, opts, group)?;
        for (done, rx) in dones
            .into_iter()
            .zip(rxs.iter_mut().skip(t).step_by(threads))
        {
            rx.runner = Runner::Shared {
                done,
                _thread: thread.clone(),
            };
        }
    }
    Ok(rxs)
}
