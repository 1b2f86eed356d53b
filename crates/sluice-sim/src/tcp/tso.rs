//! How many segments a sender puts in one packet (Linux `tcp_tso_segs()`,
//! `tcp_tso_autosize()`, `tcp_update_pacing_rate()`).
//!
//! A Linux sender does not hand its device one segment at a time. Its TCP
//! builds *GSO packets*: one set of headers with up to 64 KiB of payload
//! behind it, which the device (TSO) or the stack after the qdisc (GSO, on
//! by default even where the hardware cannot) cuts into wire-sized
//! segments. Every qdisc on the way sees such a packet whole — a packet
//! fifo counts it as one packet — and a router that receives its segments
//! back to back puts them together again (GRO) before its own qdisc. So a
//! `pfifo limit 1000` in front of Linux senders holds more than 1000
//! segments, and the kernel's TCP decides how many more.
//!
//! Since Linux 3.12 the size is *autosized* from the pacing rate, so that a
//! packet is about a millisecond of the flow's data (`sk_pacing_shift` =
//! 10: rate / 1024 bytes), never under `tcp_min_tso_segs` = 2 segments (BBR:
//! 1 below 1.2 Mbit/s), plus, on short paths, a share of the 64 KiB maximum
//! that halves with every 512 µs of minimum RTT (`tcp_tso_rtt_log` = 9: a
//! 1 ms path adds 32 KiB, one of 16 ms or more nothing), at most the
//! device's GSO size less the headers TCP reserves (65 536 − 1 − 320).
//!
//! The pacing rate is the congestion control's own where it sets one (BBR).
//! For the others Linux computes it on every ACK even when nothing paces
//! (`tcp_update_pacing_rate`): `mss × max(cwnd, packets_out) / srtt`, times
//! 2 while cwnd is under half of ssthresh (slow start) and 1.2 after; before
//! the first RTT sample it is unlimited, so the first flight goes in packets
//! as large as cwnd allows. The rate is computed here when a packet is
//! built rather than stored at each ACK: both read the same cwnd and srtt,
//! since a packet is built right after the ACK that let it go.
//!
//! Not modelled: `tcp_tso_should_defer` (waiting for more cwnd to fill a
//! larger packet; with the autosized goals of a few segments Linux defers
//! only when less than a third of cwnd is free), and retransmissions in
//! packets of several segments. A node with `gso = false` sends one
//! segment per packet (`ethtool -K DEV gso off tso off`).

use super::cc::CongestionControl;
use super::conn::TcpConnection;

/// `sk_gso_max_size`: the device's 64 KiB less TCP's header reserve.
pub(super) const GSO_MAX_BYTES: u64 = 65_536 - 1 - 320;
/// `sk_pacing_shift`: a packet is about 1/1024 s of the pacing rate.
pub(super) const PACING_SHIFT: u32 = 10;
/// `tcp_tso_rtt_log`: the bonus for short paths halves every 2^9 µs of min RTT.
const TSO_RTT_LOG: u32 = 9;
/// `tcp_min_tso_segs`.
const MIN_TSO_SEGS: u32 = 2;
/// BBR's `bbr_min_tso_rate`: under it, one segment per packet (bit/s).
pub(super) const BBR_MIN_TSO_RATE: u64 = 1_200_000;
/// `tcp_pacing_ss_ratio` and `tcp_pacing_ca_ratio`, percent.
const PACING_SS_RATIO: u64 = 200;
const PACING_CA_RATIO: u64 = 120;

impl TcpConnection {
    /// `tcp_tso_segs`: segments the next packet may carry.
    pub fn tso_segs(&self) -> u32 {
        if !self.cfg.gso {
            return 1;
        }
        let min_segs = match &self.cc {
            CongestionControl::Bbr(b) => b.min_tso_segs(),
            _ => MIN_TSO_SEGS,
        };
        let mut bytes = self.sk_pacing_rate() >> PACING_SHIFT;
        let shift = self
            .rtt
            .min_rtt()
            .map_or(u64::MAX, |r| (r.0 / 1000) >> TSO_RTT_LOG);
        if shift < 32 {
            bytes += GSO_MAX_BYTES >> shift;
        }
        let segs = bytes.min(GSO_MAX_BYTES) / u64::from(self.mss.max(1));
        (segs as u32).max(min_segs)
    }

    /// `sk_pacing_rate` in bytes/s: the congestion control's, else
    /// `tcp_update_pacing_rate`'s (unlimited before an RTT sample).
    fn sk_pacing_rate(&self) -> u64 {
        if let Some(rate) = self.cc.pacing_rate() {
            return rate;
        }
        let srtt_us8 = self.rtt.srtt_us8();
        if srtt_us8 == 0 {
            return u64::MAX;
        }
        let ratio = if self.w.cwnd < self.w.ssthresh / 2 {
            PACING_SS_RATIO
        } else {
            PACING_CA_RATIO
        };
        let segs = u64::from(self.w.cwnd.max(self.sb.packets_out));
        u64::from(self.mss) * 80_000 * ratio * segs / srtt_us8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::{CongestionAlgorithm, TcpConfig};
    use sluice_core::time::Duration;

    fn conn(cc: CongestionAlgorithm) -> TcpConnection {
        let cfg = TcpConfig {
            congestion: cc,
            ..TcpConfig::default()
        };
        TcpConnection::new(cfg, 40000, 5201)
    }

    #[test]
    fn before_an_rtt_sample_a_packet_is_as_large_as_the_device_allows() {
        // 65 215 bytes / 1448 = 45 segments (cwnd, not the size, limits the first flight).
        assert_eq!(conn(CongestionAlgorithm::Cubic).tso_segs(), 45);
    }

    #[test]
    fn a_packet_is_a_millisecond_of_the_pacing_rate_and_at_least_two_segments() {
        let mut c = conn(CongestionAlgorithm::Cubic);
        // 22 ms path, cwnd 10 in slow start: 1448 × 10 × 2 / 0.022 = 1.32 MB/s,
        // 1 286 bytes a millisecond: under one segment, so the minimum of 2.
        c.rtt.sample(Duration::from_millis(22), 0, 0);
        assert_eq!(c.tso_segs(), 2);
        // cwnd 400 after slow start: × 1.2 → 31.6 MB/s, 30 850 bytes: 21 segments.
        c.w.cwnd = 400;
        c.w.ssthresh = 300;
        assert_eq!(c.tso_segs(), 21);
        // Without GSO, one.
        c.cfg.gso = false;
        assert_eq!(c.tso_segs(), 1);
    }

    #[test]
    fn short_paths_add_a_share_of_64_kib_halving_every_512_us() {
        let mut c = conn(CongestionAlgorithm::Cubic);
        // 1.2 ms: 1200 >> 9 = 2, so 65 215 / 4 = 16 303 bytes more; the rate
        // (1448 × 10 × 2 / 0.0012 = 24.1 MB/s) gives 23 567: 39 870 bytes, 27 segments.
        c.rtt.sample(Duration::from_micros(1200), 0, 0);
        assert_eq!(c.tso_segs(), 27);
    }
}
