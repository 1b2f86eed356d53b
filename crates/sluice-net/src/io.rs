//! Packet I/O at the edge: one small trait, the TUN device behind it in the
//! daemon and an in-memory loopback in tests.

use crate::plane::{Dir, Plane};
use sluice_core::time::Time;
use std::collections::VecDeque;

/// Largest packet read from a side (a TUN device's MTU may be raised to 64 KiB).
pub const MAX_PACKET: usize = 65536;

/// Packets read from a side per wake-up, so one busy side cannot starve the
/// other or the timers.
pub const BATCH: usize = 64;

/// Where a side's packets come from and go to.
pub trait PacketIo {
    /// Read one packet into `buf`; `Ok(None)` when none is waiting.
    fn recv(&mut self, buf: &mut [u8]) -> std::io::Result<Option<usize>>;
    /// Write one packet; `Ok(false)` when the side cannot take it now (dropped).
    fn send(&mut self, pkt: &[u8]) -> std::io::Result<bool>;
}

/// An in-memory side: packets pushed into `rx` are read by the link, and
/// what the link writes is kept in `tx`. Both are bounded.
#[derive(Debug, Default)]
pub struct Loopback {
    /// Packets waiting to be read by the link.
    pub rx: VecDeque<Vec<u8>>,
    /// Packets the link wrote, oldest first.
    pub tx: VecDeque<Vec<u8>>,
    /// Bound of `tx` (0: 4096); writes beyond it are refused.
    pub tx_limit: usize,
}

impl PacketIo for Loopback {
    fn recv(&mut self, buf: &mut [u8]) -> std::io::Result<Option<usize>> {
        Ok(self.rx.pop_front().map(|p| {
            let n = p.len().min(buf.len());
            buf[..n].copy_from_slice(&p[..n]);
            n
        }))
    }

    fn send(&mut self, pkt: &[u8]) -> std::io::Result<bool> {
        let limit = if self.tx_limit == 0 {
            4096
        } else {
            self.tx_limit
        };
        if self.tx.len() >= limit {
            return Ok(false);
        }
        self.tx.push_back(pkt.to_vec());
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

/// Read up to [`BATCH`] packets from the sending side of `dir` into the plane.
/// Returns how many were read.
pub fn read_batch(
    plane: &mut Plane,
    dir: Dir,
    side: &mut dyn PacketIo,
    buf: &mut [u8],
    now: Time,
    stats: &mut IoStats,
) -> usize {
    let mut n = 0;
    while n < BATCH {
        match side.recv(buf) {
            Ok(Some(len)) => {
                plane.input(dir, &buf[..len], now);
                n += 1;
            }
            Ok(None) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => {
                stats.errors += 1;
                break;
            }
        }
    }
    n
}

/// Poll the plane at `now` and write what is due to the two sides.
pub fn deliver(
    plane: &mut Plane,
    now: Time,
    a: &mut dyn PacketIo,
    b: &mut dyn PacketIo,
    stats: &mut IoStats,
) {
    plane.poll(now, &mut |dir, pkt| {
        let side: &mut dyn PacketIo = match dir {
            Dir::AB => &mut *b,
            Dir::BA => &mut *a,
        };
        match side.send(pkt) {
            Ok(true) => {}
            Ok(false) => stats.tx_dropped += 1,
            Err(_) => stats.errors += 1,
        }
    });
}
