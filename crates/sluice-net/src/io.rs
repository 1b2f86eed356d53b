//! Packet I/O at the edge: one small trait, the TUN device behind it in the
//! daemon and an in-memory loopback in tests.

use crate::plane::{parse_ip_vec, Dir, Plane};
use crate::vnet::{VnetHdr, VNET_HDR_LEN};
use sluice_core::packet::Packet;
use sluice_core::time::Time;
use std::collections::VecDeque;

/// Largest read from a side: a 64 KiB IP packet (a GSO packet, or a TUN
/// device whose MTU was raised) behind its virtio-net header.
pub const MAX_PACKET: usize = 65536 + VNET_HDR_LEN;

/// Packets read from a side per wake-up, so one busy side cannot starve the
/// other or the timers.
pub const BATCH: usize = 64;

/// Where a side's packets come from and go to.
pub trait PacketIo {
    /// Read one packet into `buf`, its virtio-net header (if the side has
    /// [`PacketIo::vnet_hdr`]) into `hdr`; the packet's length, or
    /// `Ok(None)` when none is waiting.
    fn recv(
        &mut self,
        hdr: &mut [u8; VNET_HDR_LEN],
        buf: &mut [u8],
    ) -> std::io::Result<Option<usize>>;
    /// Do packets come with a virtio-net header ([`crate::vnet`])?
    fn vnet_hdr(&self) -> bool {
        false
    }
    /// Write one packet; `Ok(false)` when the side cannot take it now (dropped).
    fn send(&mut self, pkt: &Packet) -> std::io::Result<bool>;
}

/// An in-memory side: packets pushed into `rx` are read by the link, and
/// what the link writes is kept in `tx`. Both are bounded.
#[derive(Debug, Default)]
pub struct Loopback {
    /// Packets waiting to be read by the link (behind a virtio-net header
    /// when `vnet_hdr` is set).
    pub rx: VecDeque<Vec<u8>>,
    /// Packets the link wrote, oldest first.
    pub tx: VecDeque<Packet>,
    /// Bound of `tx` (0: 4096); writes beyond it are refused.
    pub tx_limit: usize,
    /// Whether `rx` packets carry a virtio-net header.
    pub vnet_hdr: bool,
}

impl PacketIo for Loopback {
    fn recv(
        &mut self,
        hdr: &mut [u8; VNET_HDR_LEN],
        buf: &mut [u8],
    ) -> std::io::Result<Option<usize>> {
        let Some(p) = self.rx.pop_front() else {
            return Ok(None);
        };
        let mut p = &p[..];
        if self.vnet_hdr {
            let n = p.len().min(VNET_HDR_LEN);
            hdr[..n].copy_from_slice(&p[..n]);
            p = &p[n..];
        }
        let n = p.len().min(buf.len());
        buf[..n].copy_from_slice(&p[..n]);
        Ok(Some(n))
    }

    fn vnet_hdr(&self) -> bool {
        self.vnet_hdr
    }

    fn send(&mut self, pkt: &Packet) -> std::io::Result<bool> {
        let limit = if self.tx_limit == 0 {
            4096
        } else {
            self.tx_limit
        };
        if self.tx.len() >= limit {
            return Ok(false);
        }
        self.tx.push_back(pkt.clone());
        Ok(true)
    }
}

/// Counters of the I/O around the plane.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct IoStats {
    /// Writes the receiving side refused (its queue was full).
    pub tx_dropped: u64,
    /// Read or write errors other than "try again".
    pub errors: u64,
}

/// Packets up to this long are copied out of the receive buffer into one
/// of their own size; longer ones (GSO packets) keep the buffer, which
/// goes back to [`Buffers`] once they are written out.
pub const COPY_BELOW: usize = 16 << 10;

/// Receive buffers of [`MAX_PACKET`] bytes, recycled: a large packet
/// travels in the buffer it was read into, so reading 64 KiB GSO packets
/// neither copies them nor makes the allocator fault fresh pages in.
#[derive(Debug, Default)]
pub struct Buffers {
    free: Vec<Vec<u8>>,
}

impl Buffers {
    /// Buffers kept for reuse at most (4 MiB).
    pub const KEEP: usize = 64;

    /// A buffer of [`MAX_PACKET`] bytes.
    pub fn take(&mut self) -> Vec<u8> {
        let mut b = self.free.pop().unwrap_or_default();
        b.resize(MAX_PACKET, 0);
        b
    }

    /// Keep a packet's buffer for reuse, if it is a receive buffer.
    pub fn give(&mut self, b: Vec<u8>) {
        if b.capacity() >= MAX_PACKET && self.free.len() < Self::KEEP {
            self.free.push(b);
        }
    }
}

/// The side packets of `dir` come from.
fn source<'s>(dir: Dir, a: &'s mut dyn PacketIo, b: &'s mut dyn PacketIo) -> &'s mut dyn PacketIo {
    match dir {
        Dir::AB => a,
        Dir::BA => b,
    }
}

/// Read up to [`BATCH`] packets from the sending side of `dir` into the
/// plane, delivering after each what became due at `now` (an unshaped
/// packet leaves before the next is read). Returns how many were read.
pub fn read_batch(
    plane: &mut Plane,
    dir: Dir,
    a: &mut dyn PacketIo,
    b: &mut dyn PacketIo,
    bufs: &mut Buffers,
    now: Time,
    stats: &mut IoStats,
) -> usize {
    let mut hdr = [0u8; VNET_HDR_LEN];
    let mut n = 0;
    while n < BATCH {
        let side = source(dir, a, b);
        let vnet = side.vnet_hdr();
        let mut buf = bufs.take();
        let len = match side.recv(&mut hdr, &mut buf) {
            Ok(Some(len)) => len,
            Ok(None) => {
                bufs.give(buf);
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {
                bufs.give(buf);
                continue;
            }
            Err(_) => {
                bufs.give(buf);
                stats.errors += 1;
                break;
            }
        };
        let data = if len < COPY_BELOW {
            let d = buf[..len].to_vec();
            bufs.give(buf);
            d
        } else {
            buf.truncate(len);
            buf
        };
        let pkt = if vnet {
            VnetHdr::parse(&hdr).and_then(|h| h.to_packet(data))
        } else {
            parse_ip_vec(data)
        };
        plane.input_packet(dir, pkt, now);
        n += 1;
        deliver(plane, now, a, b, bufs, stats);
    }
    n
}

/// Poll the plane at `now` and write what is due to the two sides.
pub fn deliver(
    plane: &mut Plane,
    now: Time,
    a: &mut dyn PacketIo,
    b: &mut dyn PacketIo,
    bufs: &mut Buffers,
    stats: &mut IoStats,
) {
    plane.poll(now, &mut |dir, mut pkt| {
        let side: &mut dyn PacketIo = match dir {
            Dir::AB => &mut *b,
            Dir::BA => &mut *a,
        };
        match side.send(&pkt) {
            Ok(true) => {}
            Ok(false) => stats.tx_dropped += 1,
            Err(_) => stats.errors += 1,
        }
        bufs.give(std::mem::take(&mut pkt.data));
    });
}
