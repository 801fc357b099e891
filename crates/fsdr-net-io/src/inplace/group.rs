//! Several in-place receivers on one port, one per stream: a radio that sends every channel to
//! one port (CHDR destination endpoints, VITA-49 stream IDs) is split by the kernel, not by a
//! thread that would have to look at each datagram before it knows where its samples go.
//! One `SO_REUSEPORT` socket per stream, bound to the same address, and a classic-BPF program
//! on the group (`sys::bpf::attach_reuseport_by_stream`) that delivers each datagram to the
//! socket of its stream; each socket has an in-place receiver of its own, which follows only
//! that stream, so each stream's payloads land in its own output buffers without a copy.

use std::sync::Arc;

use crate::Error;
use crate::engine::Backend;
use crate::format::Format;
use crate::notify::Notify;
use crate::sample::Item;
use crate::socket::OpenedSocket;
use crate::sys::bpf::{MAX_STEERED_STREAMS, StreamIdField, attach_reuseport_by_stream};

use super::{InPlaceConfig, InPlaceReceiver, ItemBuffer};

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
    /// receive thread and a socket of its own (`SO_REUSEPORT`), in the order of `ids`. The
    /// kernel delivers each datagram to the socket of its stream (a classic-BPF program on
    /// the group reads the CHDR destination endpoint or the VRT stream ID from the payload);
    /// datagrams of any other stream, and VRT packets without a stream ID, go to the first
    /// receiver, which counts them `skipped`. Every receiver of the group signals the same
    /// [`notifier`](Self::notifier), so one consumer can wait for all of them. With
    /// [`Format::Chdr`] or [`Format::Vrt`] and [`Backend::Recvmmsg`] only, without UDP GRO.
    /// A sender's GSO send is one datagram until the receiving socket is chosen: it reaches
    /// the socket of its first datagram's stream, so a sender that uses GSO (as the
    /// [emulator](crate::emulator) does) sends each stream's datagrams in sends of their own.
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
                Self::open_as(cfg.clone(), false, member)
            })
            .collect()
    }
}
