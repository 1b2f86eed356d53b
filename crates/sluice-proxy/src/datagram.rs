//! One direction of a UDP session, without I/O: datagrams in, the toxics'
//! qdisc stages, datagrams out when they leave.
//!
//! A datagram is one packet (docs/proxy.md) with a synthesized IPv4/UDP
//! header carrying the session's addresses and ports. Unlike a TCP stream,
//! nothing is put back in order and nothing is sent again: what netem
//! reorders arrives reordered, what a qdisc drops is lost, as on a network.
//! Of the stream toxics, `timeout` lets nothing through, `limit_data` lets
//! datagrams through until that many bytes have passed (then none), and the
//! others (`slicer`, `slow_close`, `reset_peer`, which act on a byte stream
//! or a connection) let datagrams pass unchanged. A stage that is removed
//! hands what it holds to the next at once.
//!
//! A datagram a `tc` stage corrupts (`netem corrupt`) is lost: it enters
//! the stage with real IPv4 and UDP checksums, and one that leaves with a
//! checksum that fails is dropped, as the receiving host's UDP does; no
//! program sees a flipped bit.

use crate::pipe::{ipv4_ports, rechain, stage_seed, Shaper};
use crate::toxic::{Kind, Toxic};
use sluice_core::packet::{Packet, ETH_P_IP};
use sluice_core::time::Time;
use std::net::SocketAddr;

/// Length of the synthesized IPv4 + UDP header.
const HEADER: usize = 28;

enum Body {
    /// A queue that shapes (`latency`, `bandwidth`, `tc`); what it refuses
    /// is lost, and so is what a `tc` stage corrupts (the receiver's
    /// checksum drops it).
    Shaper(Shaper),
    /// Nothing passes.
    Drop,
    /// Datagrams pass while `left` bytes remain.
    Limit { left: u64 },
    /// Everything passes.
    Pass,
}

struct Stage {
    toxic: Toxic,
    body: Body,
}

impl Stage {
    fn new(toxic: &Toxic, seed: u64, now: Time) -> Result<Stage, String> {
        let body = match (Shaper::new(&toxic.kind, now, seed)?, &toxic.kind) {
            (Some(shaper), _) => Body::Shaper(shaper),
            (None, Kind::Timeout { .. }) => Body::Drop,
            (None, Kind::LimitData { bytes }) => Body::Limit {
                left: (*bytes).max(0) as u64,
            },
            _ => Body::Pass,
        };
        Ok(Stage {
            toxic: toxic.clone(),
            body,
        })
    }
}

/// The IPv4 + UDP header of datagrams from `from` to `to`.
fn header(from: SocketAddr, to: SocketAddr) -> [u8; HEADER] {
    let mut h = [0u8; HEADER];
    ipv4_ports(&mut h, 17, from, to);
    h
}

/// One direction of a UDP session.
pub struct DatagramPipe {
    stages: Vec<Stage>,
    header: [u8; HEADER],
    seed: u64,
    /// Datagrams out of the last stage, to hand out at the next poll.
    ready: Vec<Vec<u8>>,
}

impl DatagramPipe {
    /// A direction carrying datagrams from `from` to `to` through `toxics`.
    pub fn new(
        toxics: &[Toxic],
        from: SocketAddr,
        to: SocketAddr,
        seed: u64,
        now: Time,
    ) -> Result<Self, String> {
        let mut p = DatagramPipe {
            stages: Vec::new(),
            header: header(from, to),
            seed,
            ready: Vec::new(),
        };
        p.set_toxics(toxics, now)?;
        Ok(p)
    }

    /// Replace the stages by those of `toxics`; unchanged ones are kept with
    /// what they hold, what removed ones held goes on at once.
    pub fn set_toxics(&mut self, toxics: &[Toxic], now: Time) -> Result<(), String> {
        let seed = self.seed;
        let old = rechain(
            &mut self.stages,
            toxics,
            |s| &s.toxic,
            |i, t| Stage::new(t, stage_seed(seed, i), now),
        )?;
        for (i, mut s) in old {
            let held = match &mut s.body {
                Body::Shaper(shaper) => shaper.drain(),
                _ => Vec::new(),
            };
            for p in held {
                self.enter(i.min(self.stages.len()), p, now);
            }
        }
        Ok(())
    }

    /// A datagram read at `now`.
    pub fn push(&mut self, datagram: &[u8], now: Time) {
        let data = [self.header.as_slice(), datagram].concat();
        let len = data.len() as u32;
        self.enter(0, Packet::new(data, len, ETH_P_IP), now);
    }

    /// Put a datagram into stage `i` (past the last: it is ready).
    fn enter(&mut self, i: usize, pkt: Packet, now: Time) {
        let payload = pkt.data.len().saturating_sub(HEADER) as u32;
        let Some(stage) = self.stages.get_mut(i) else {
            self.ready
                .push(pkt.data.get(HEADER..).unwrap_or_default().to_vec());
            return;
        };
        match &mut stage.body {
            Body::Shaper(shaper) => {
                // Refused: lost, as on a network.
                shaper.send(pkt, payload, now);
            }
            Body::Drop => {}
            Body::Limit { left } => {
                if payload as u64 <= *left {
                    *left -= payload as u64;
                    self.enter(i + 1, pkt, now);
                } else {
                    *left = 0;
                }
            }
            Body::Pass => self.enter(i + 1, pkt, now),
        }
    }

    /// Do everything due at `now`; the datagrams that leave go to `out`.
    pub fn poll(&mut self, now: Time, out: &mut Vec<Vec<u8>>) {
        for i in 0..self.stages.len() {
            let mut leaving = Vec::new();
            if let Body::Shaper(shaper) = &mut self.stages[i].body {
                // Corrupted: the receiver's checksum drops it.
                shaper.poll(now, &mut leaving, &mut Vec::new());
            }
            for (t, p) in leaving {
                self.enter(i + 1, p, t);
            }
        }
        out.append(&mut self.ready);
    }

    /// When [`DatagramPipe::poll`] next has something to do.
    pub fn next_wake(&self) -> Option<Time> {
        if !self.ready.is_empty() {
            return Some(Time(0));
        }
        self.stages
            .iter()
            .filter_map(|s| match &s.body {
                Body::Shaper(shaper) => shaper.next_wake(),
                _ => None,
            })
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipe::tests::toxic;

    const MS: u64 = 1_000_000;

    fn pipe(toxics: &[Toxic]) -> DatagramPipe {
        let (a, b) = (
            "10.0.0.1:5000".parse().unwrap(),
            "10.0.0.2:53".parse().unwrap(),
        );
        DatagramPipe::new(toxics, a, b, 3, Time(0)).unwrap()
    }

    /// Push `n` datagrams of 100 bytes (byte i = datagram i), 1 ms apart,
    /// and run to `until`; returns (time, datagram) as they leave.
    fn run(p: &mut DatagramPipe, n: u8, until: u64) -> Vec<(u64, Vec<u8>)> {
        let mut got = Vec::new();
        let mut now = 0;
        while now <= until {
            if now % MS == 0 && now / MS < n as u64 {
                p.push(&[(now / MS) as u8; 100], Time(now));
            }
            let mut out = Vec::new();
            p.poll(Time(now), &mut out);
            got.extend(out.into_iter().map(|d| (now, d)));
            let next_push = (now / MS + 1) * MS;
            now = p
                .next_wake()
                .map_or(next_push, |w| w.0.max(now + 1).min(next_push));
        }
        got
    }

    #[test]
    fn datagrams_keep_their_boundaries_and_latency_delays_each() {
        let mut p = pipe(&[toxic(Kind::latency(20, 0))]);
        let got = run(&mut p, 10, 100 * MS);
        assert_eq!(got.len(), 10);
        for (i, (t, d)) in got.iter().enumerate() {
            assert_eq!(*t, (20 + i as u64) * MS);
            assert_eq!(d, &vec![i as u8; 100]);
        }
    }

    #[test]
    fn a_trace_carries_datagram_bytes_and_its_queue_is_bounded() {
        // The trace `5`: 1504 bytes every 5 ms; 100-byte datagrams 1 ms
        // apart leave together at 5, 10, 15 ms.
        let attrs = serde_json::json!({"trace": "5\n"});
        let kind = Kind::parse("bandwidth", attrs.as_object().unwrap()).unwrap();
        let mut p = pipe(&[toxic(kind)]);
        let got = run(&mut p, 12, 100 * MS);
        let times: Vec<u64> = got.iter().map(|(t, _)| t / MS).collect();
        assert_eq!(times, [5, 5, 5, 5, 5, 10, 10, 10, 10, 10, 15, 15]);
        assert!(got.iter().enumerate().all(|(i, (_, d))| d[0] == i as u8));
        // An outage that never ends: what exceeds the queue is lost.
        let attrs = serde_json::json!({"schedule": "0s,0,,\n"});
        let kind = Kind::parse("bandwidth", attrs.as_object().unwrap()).unwrap();
        let mut p = pipe(&[toxic(kind)]);
        for _ in 0..1000 {
            p.push(&[0; 1400], Time(0));
        }
        let Body::Shaper(Shaper::Wire(w)) = &p.stages[0].body else {
            panic!("a wire stage")
        };
        // The queue's bytes, and one in the ring and one on the wire.
        assert_eq!(w.len() as u64, crate::wire::QUEUE_BYTES / 1400 + 2);
    }

    #[test]
    fn loss_is_loss_and_jitter_reorders() {
        let mut p = pipe(&[toxic(Kind::Tc {
            qdisc: "netem loss 50%".into(),
        })]);
        let got = run(&mut p, 200, 300 * MS);
        assert!((50..150).contains(&got.len()), "{}", got.len());
        let mut p = pipe(&[toxic(Kind::latency(50, 40))]);
        let got = run(&mut p, 100, 300 * MS);
        assert_eq!(got.len(), 100);
        assert!(
            got.windows(2).any(|w| w[1].1[0] < w[0].1[0]),
            "no datagram overtook another"
        );
    }

    #[test]
    fn corrupted_datagrams_are_lost_never_delivered() {
        // Half the datagrams get a bit flipped; the receiver's UDP checksum
        // drops those: about half arrive, every one as it was sent.
        let mut p = pipe(&[toxic(Kind::Tc {
            qdisc: "netem corrupt 50%".into(),
        })]);
        let got = run(&mut p, 200, 300 * MS);
        assert!((50..150).contains(&got.len()), "{}", got.len());
        for (_, d) in &got {
            assert_eq!(d, &vec![d[0]; 100]);
        }
    }

    #[test]
    fn limit_data_and_timeout_stop_datagrams_and_removal_flushes() {
        let mut p = pipe(&[toxic(Kind::LimitData { bytes: 350 })]);
        assert_eq!(run(&mut p, 10, 20 * MS).len(), 3);
        let mut p = pipe(&[toxic(Kind::Timeout { timeout: 0 })]);
        assert!(run(&mut p, 10, 20 * MS).is_empty());
        // A latency toxic removed while it holds datagrams hands them on at once.
        let lat = toxic(Kind::latency(1000, 0));
        let mut p = pipe(&[lat]);
        p.push(&[1; 10], Time(0));
        p.set_toxics(&[], Time(5 * MS)).unwrap();
        let mut out = Vec::new();
        p.poll(Time(5 * MS), &mut out);
        assert_eq!(out, vec![vec![1u8; 10]]);
    }
}
