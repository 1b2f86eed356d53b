//! What an arriving ACK tells the sender (Linux `tcp_ack()` and the
//! functions it calls, in the same order):
//!
//! 1. window update (`tcp_ack_update_window`, RFC 9293 SND.WL1 rule);
//! 2. SACK blocks tag the scoreboard and advance RACK; a first block below
//!    the ACK, or inside the second block, is a D-SACK (RFC 2883);
//! 3. ECE is noted (RFC 3168);
//! 4. the cumulative ACK removes segments (`tcp_clean_rtx_queue`);
//! 5. one RTT sample: from the oldest newly ACKed never-retransmitted
//!    segment, else the oldest newly SACKed one, else the timestamp echo
//!    (RFC 7323 makes that valid even for retransmissions); the newest of
//!    them is the congestion-control sample (`ca_rtt_us`) HyStart sees;
//! 6. a pending tail loss probe is resolved (`tcp_process_tlp_ack`);
//! 7. an ACK that is "dubious" — a duplicate, carrying SACK/D-SACK/ECE, or
//!    arriving outside the Open state — runs the recovery state machine;
//! 8. the transmit timer is re-armed if data was ACKed (TLP when allowed,
//!    else RTO) unless RACK armed its reordering timer;
//! 9. the delivery-rate sample is finished (`tcp_rate_gen`) and the window
//!    grows (`cong_avoid`) or is reduced (PRR), counting segments newly
//!    delivered by this ACK, SACKed ones included — or, for BBR, the
//!    algorithm sets window and pacing rate from the sample (`cong_control`).

use super::cc::{AckSample, CongestionControl};
use super::conn::{bbr_cx, CaState, TcpConnection, XmitTimer};
use super::rate::RateSample;
use super::segment::{Flags, Segment};
use super::seq::{to_wire, unwrap};
use sluice_core::time::{Duration, Time};

/// The kernel's `FLAG_*` bits for one ACK.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct AckFlags {
    /// The segment carried data (`FLAG_DATA`).
    pub has_data: bool,
    /// `snd_una` advanced (`FLAG_SND_UNA_ADVANCED`).
    pub una_advanced: bool,
    /// The window was updated (`FLAG_WIN_UPDATE`).
    pub win_update: bool,
    /// Something was newly SACKed (`FLAG_DATA_SACKED`).
    pub data_sacked: bool,
    /// Something was cumulatively ACKed (`FLAG_ACKED`, `FLAG_DATA_ACKED`).
    pub acked: bool,
    /// A retransmitted segment was ACKed (`FLAG_RETRANS_DATA_ACKED`).
    pub retrans_data_acked: bool,
    /// ECE set (`FLAG_ECE`).
    pub ece: bool,
    /// A D-SACK arrived (`FLAG_DSACKING_ACK`).
    pub dsack: bool,
    /// The D-SACK covers the tail loss probe (`FLAG_DSACK_TLP`).
    pub dsack_tlp: bool,
    /// A retransmission was found lost (`FLAG_LOST_RETRANS`).
    pub lost_retrans: bool,
    /// Re-arm TLP/RTO (`FLAG_SET_XMIT_TIMER`).
    pub set_xmit_timer: bool,
}

impl AckFlags {
    /// `FLAG_NOT_DUP`.
    fn not_dup(&self) -> bool {
        self.has_data || self.win_update || self.acked
    }
    /// `FLAG_CA_ALERT`.
    fn ca_alert(&self) -> bool {
        self.data_sacked || self.ece || self.dsack
    }
}

/// Per-ACK delivery counts and send times for RTT sampling.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Tally {
    /// Segments newly ACKed or SACKed (`acked_sacked`, PRR's DeliveredData).
    pub delivered: u32,
    /// Segments newly marked lost (`rs->losses`).
    pub newly_lost: u32,
    /// The delivery-rate sample this ACK builds.
    pub rs: RateSample,
    /// `tp->lost` before the ACK.
    lost_before: u64,
    first_ackt: Option<Time>,
    last_ackt: Option<Time>,
    first_sackt: Option<Time>,
    last_sackt: Option<Time>,
}

impl TcpConnection {
    /// Process the ACK field (and SACK/ECE/timestamp options) of `seg`.
    pub(crate) fn on_ack(&mut self, seg: &Segment, now: Time) {
        let ack = unwrap(seg.ack, self.snd_una, to_wire(self.iss, self.snd_una));
        if ack > self.snd_nxt || ack < self.snd_una {
            return;
        }
        let mut f = AckFlags {
            has_data: seg.payload_len > 0,
            una_advanced: ack > self.snd_una,
            ..Default::default()
        };
        if f.una_advanced {
            self.rec.retransmits = 0;
        }
        self.last_tsecr = seg.options.timestamp.filter(|_| self.ts_ok).map(|(_, e)| e);
        self.update_window(seg, ack, &mut f);
        if self.sb.is_empty() {
            self.snd_una = ack;
            self.ack_probe(now);
            return;
        }
        let mut t = Tally {
            lost_before: self.sb.lost_total,
            ..Default::default()
        };
        t.rs.prior_in_flight = self.sb.in_flight();
        if self.sack_ok {
            self.sacktag(seg, ack, now, &mut f, &mut t);
        }
        if self.ecn_ok && seg.flags.contains(Flags::ECE) {
            f.ece = true;
            self.stats.ece_received += 1;
        }
        self.clean_rtx_queue(ack, now, &mut f, &mut t);
        self.finish_ack(seg, now, f, t);
    }

    /// Steps 5–9 of the module doc.
    fn finish_ack(&mut self, seg: &Segment, now: Time, mut f: AckFlags, mut t: Tally) {
        let ca_rtt = self.ack_update_rtt(seg, now, &f, &t);
        t.rs.rtt = ca_rtt;
        self.cc_pkts_acked(now, ca_rtt);
        if self.rec.tlp_high_seq.is_some() {
            self.process_tlp_ack(&f, now);
        }
        if self.ack_is_dubious(&f) {
            self.fastretrans_alert(now, &mut f, &mut t);
        }
        if f.set_xmit_timer {
            self.set_xmit_timer(now);
        }
        self.cong_control(now, &f, &t);
        if self.sb.is_empty() {
            self.ack_probe(now);
        }
        // `tcp_check_space`: freed memory and cwnd not full grow the buffer.
        if f.una_advanced && self.sb.in_flight() < self.w.cwnd {
            self.expand_sndbuf();
        }
    }

    /// `tcp_ack_update_window` with the SND.WL1 rule.
    fn update_window(&mut self, seg: &Segment, ack: u64, f: &mut AckFlags) {
        let nwin = u64::from(seg.window) << self.snd_wscale;
        let seq = unwrap(
            seg.seq,
            self.rcv.rcv_nxt,
            to_wire(self.rcv.irs, self.rcv.rcv_nxt),
        );
        let newer = ack > self.snd_una || seq > self.snd_wl1;
        if newer || (seq == self.snd_wl1 && (nwin > self.snd_wnd || nwin == 0)) {
            f.win_update = true;
            self.snd_wl1 = seq;
            self.snd_wnd = nwin;
        }
    }

    /// `tcp_sacktag_write_queue`.
    fn sacktag(&mut self, seg: &Segment, ack: u64, now: Time, f: &mut AckFlags, t: &mut Tally) {
        let near = to_wire(self.iss, ack);
        let blocks: Vec<(u64, u64)> = seg
            .options
            .sack
            .as_slice()
            .iter()
            .map(|&(l, r)| (unwrap(l, ack, near), unwrap(r, ack, near)))
            .collect();
        for (i, &(s, e)) in blocks.iter().enumerate() {
            if i == 0 && is_dsack(s, e, ack, &blocks) {
                self.note_dsack(e, f);
                continue;
            }
            if s >= e || e > self.snd_nxt || s < ack {
                continue;
            }
            for d in self.sb.sack(s, e) {
                f.data_sacked = true;
                t.delivered += 1;
                self.rate.on_delivered(&mut t.rs, &d);
                let min_rtt = self.rtt.min_rtt();
                self.rack
                    .advance(d.ever_retrans, d.end, d.xmit_time, now, min_rtt);
                if !d.ever_retrans {
                    t.first_sackt = Some(t.first_sackt.map_or(d.xmit_time, |x| x.min(d.xmit_time)));
                    t.last_sackt = Some(t.last_sackt.map_or(d.xmit_time, |x| x.max(d.xmit_time)));
                }
            }
        }
    }

    fn note_dsack(&mut self, end: u64, f: &mut AckFlags) {
        f.dsack = true;
        self.stats.dsacks_received += 1;
        if self.rec.tlp_high_seq == Some(end) {
            f.dsack_tlp = true;
        }
    }

    /// `tcp_clean_rtx_queue`: drop what the cumulative ACK covers.
    fn clean_rtx_queue(&mut self, ack: u64, now: Time, f: &mut AckFlags, t: &mut Tally) {
        // Segment by segment: what is done with each reads nothing of the
        // scoreboard.
        while let Some(d) = self.sb.ack_next(ack) {
            self.rate.on_delivered(&mut t.rs, &d);
            if d.ever_retrans {
                f.retrans_data_acked = true;
            } else if !d.was_sacked {
                t.first_ackt.get_or_insert(d.xmit_time);
                t.last_ackt = Some(d.xmit_time);
            }
            if !d.was_sacked {
                t.delivered += 1;
                let min_rtt = self.rtt.min_rtt();
                self.rack
                    .advance(d.ever_retrans, d.end, d.xmit_time, now, min_rtt);
            }
        }
        self.sb.ack_trim(ack);
        if ack > self.snd_una {
            f.acked = true;
            f.set_xmit_timer = true;
            let first = self.snd_una.max(1);
            let data_end = self.write_end.min(ack);
            self.stats.bytes_acked += data_end.saturating_sub(first);
            self.snd_una = ack;
        }
    }

    /// `tcp_ack_update_rtt`: feed the estimator; returns `ca_rtt`.
    fn ack_update_rtt(
        &mut self,
        seg: &Segment,
        now: Time,
        f: &AckFlags,
        t: &Tally,
    ) -> Option<Duration> {
        let since = |x: Option<Time>| x.map(|x| now.saturating_since(x));
        let clean = !f.retrans_data_acked;
        let mut seq_rtt = since(t.first_ackt).filter(|_| clean);
        let mut ca_rtt = since(t.last_ackt).filter(|_| clean);
        if t.first_sackt.is_some() {
            seq_rtt = seq_rtt.or(since(t.first_sackt));
            ca_rtt = since(t.last_sackt);
        }
        if seq_rtt.is_none() && f.acked {
            if let Some(ts) = self.ts_rtt(seg, now) {
                seq_rtt = Some(ts);
                ca_rtt = Some(ts);
            }
        }
        if let Some(r) = seq_rtt {
            self.take_rtt_sample(r);
        }
        ca_rtt
    }

    /// RTT from the timestamp echo (millisecond resolution).
    fn ts_rtt(&self, seg: &Segment, now: Time) -> Option<Duration> {
        let (_, ecr) = seg.options.timestamp.filter(|_| self.ts_ok)?;
        if ecr == 0 {
            return None;
        }
        let ms = self.ts_clock(now).wrapping_sub(ecr);
        (ms < 1 << 31).then(|| Duration::from_millis(u64::from(ms.max(1))))
    }

    /// One valid RTT sample: estimator, RTO, statistics.
    pub(crate) fn take_rtt_sample(&mut self, rtt: Duration) {
        self.rtt.sample(rtt, self.snd_una, self.snd_nxt);
        self.stats.rtt_samples += 1;
        self.stats.max_rtt = self.stats.max_rtt.max(rtt);
    }

    fn cc_pkts_acked(&mut self, now: Time, rtt: Option<Duration>) {
        let s = AckSample {
            now,
            rtt,
            snd_una: self.snd_una,
            snd_nxt: self.snd_nxt,
            srtt: self.rtt.srtt(),
            mss: self.mss,
        };
        self.cc.pkts_acked(&mut self.w, &s);
    }

    /// `tcp_ack_is_dubious`.
    fn ack_is_dubious(&self, f: &AckFlags) -> bool {
        !f.not_dup() || f.ca_alert() || self.rec.state != CaState::Open
    }

    /// `tcp_cong_control`: PRR while reducing, else grow if allowed.
    fn cong_control(&mut self, now: Time, f: &AckFlags, t: &Tally) {
        let mut rs = t.rs;
        self.rate.delivered += u64::from(t.delivered);
        let lost = (self.sb.lost_total - t.lost_before) as u32;
        let min_rtt = self.rtt.min_rtt();
        self.rate.generate(&mut rs, t.delivered, lost, now, min_rtt);
        if let CongestionControl::Bbr(b) = &mut self.cc {
            let mut cx = bbr_cx!(self, now);
            b.on_ack(&mut self.w, &rs, &mut cx);
            return;
        }
        if self.in_cwnd_reduction() {
            self.cwnd_reduction(t.delivered, t.newly_lost, f.una_advanced);
        } else if f.acked && self.is_cwnd_limited() {
            self.cc.cong_avoid(&mut self.w, t.delivered, now);
            self.cwnd_use.snd_cwnd_stamp = now;
        }
    }

    /// `tcp_is_cwnd_limited`.
    pub(crate) fn is_cwnd_limited(&self) -> bool {
        let u = &self.cwnd_use;
        u.is_cwnd_limited || (self.w.in_slow_start() && self.w.cwnd < 2 * u.max_packets_out)
    }

    /// `tcp_ack_probe`: an ACK with nothing outstanding may open the window.
    fn ack_probe(&mut self, now: Time) {
        if self.write_end <= self.snd_nxt {
            if self.xmit_kind() == Some(XmitTimer::Probe0) {
                self.xmit_timer = None;
            }
            return;
        }
        let next_end = self.snd_nxt + (self.write_end - self.snd_nxt).min(u64::from(self.mss));
        if next_end <= self.snd_una + self.snd_wnd {
            self.rec.probes_out = 0;
            if self.xmit_kind() == Some(XmitTimer::Probe0) {
                self.xmit_timer = None;
            }
        } else {
            self.arm_probe0(now);
        }
    }
}

/// RFC 2883: a first block below the cumulative ACK, or inside the second.
fn is_dsack(s: u64, e: u64, ack: u64, blocks: &[(u64, u64)]) -> bool {
    if s < ack {
        return true;
    }
    matches!(blocks.get(1), Some(&(s2, e2)) if s >= s2 && e <= e2)
}
