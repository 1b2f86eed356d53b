//! Loss recovery and window reduction: Linux's congestion state machine
//! (`tcp_fastretrans_alert()` and friends in `tcp_input.c`) with RACK-TLP
//! loss detection (RFC 8985) and Proportional Rate Reduction (RFC 6937).
//!
//! **Why RACK-TLP rather than RFC 6675.** Linux detects loss with RACK only
//! (since 4.18 by default; the dupack-threshold rule survives inside RACK as a
//! zero reordering window once three segments are SACKed), so RACK is what
//! makes the model behave like Linux. It also matters for the bundled
//! examples' experiments: after a slow-start overshoot into a full drop-tail
//! queue, many retransmissions are themselves dropped; RFC 6675 can only
//! repair a lost retransmission with an RTO, while RACK detects it one RTT
//! later because segments sent after it are SACKed. That difference is the one
//! between smoltcp's 1.6 Mbit/s and ns-3/Linux's 9.6 Mbit/s in
//! docs/simulator.md.
//!
//! States (`CaState`): **Open**; **Disorder** (SACKs seen, no loss);
//! **CWR** (ECE received, or a loss repaired by a tail loss probe: window
//! reduced once per window of data); **Recovery** (RACK marked a segment
//! lost: ssthresh from the congestion control, then PRR); **Loss** (after an
//! RTO: everything outstanding not sent within the last RACK RTT is lost,
//! cwnd = in-flight + 1, slow start back up to ssthresh). CWR and Recovery
//! end when `snd_una` passes `high_seq` (`snd_nxt` when they began), with
//! cwnd set to ssthresh; Loss ends the same way, keeping the slow-start cwnd.
//!
//! **PRR** (`tcp_cwnd_reduction`): while in flight exceeds ssthresh, send
//! `ceil(prr_delivered · ssthresh / prior_cwnd) − prr_out`; below it, send
//! as much as was delivered plus one when `snd_una` advanced without new
//! loss (PRR-SSRB), up to ssthresh; and at least one segment at the start
//! (the fast retransmit). cwnd is set to in-flight + that allowance.
//!
//! **Undo** (Eifel, RFC 3522, as `tcp_try_undo_loss/_recovery`): when an ACK
//! echoes a timestamp older than the episode's first retransmission, the
//! original transmission was delivered and the reduction is reverted. D-SACK
//! based undo and F-RTO (RFC 5682) are not modelled.
//!
//! **TLP** resolution (`tcp_process_tlp_ack`): if the ACK for the probe's
//! sequence shows the probe repaired a loss (it was a retransmission, the
//! ACK moved past it and no D-SACK said the original arrived), the window is
//! reduced once as for ECN.

use super::ack::{AckFlags, Tally};
use super::cc::{CongestionControl, INFINITE_SSTHRESH};
use super::conn::{bbr_cx, CaState, TcpConnection, XmitTimer};
use super::rack;
use sluice_core::time::{Duration, Time};

/// `TCP_TIMEOUT_MIN` (2 jiffies), added to the reordering timer.
pub const TIMEOUT_MIN: Duration = Duration::from_millis(2);

impl TcpConnection {
    /// `tcp_in_cwnd_reduction`.
    pub(crate) fn in_cwnd_reduction(&self) -> bool {
        matches!(self.rec.state, CaState::Cwr | CaState::Recovery)
    }

    /// `tcp_current_ssthresh`.
    pub(crate) fn current_ssthresh(&self) -> u32 {
        if self.in_cwnd_reduction() {
            self.w.ssthresh
        } else {
            let c = self.w.cwnd;
            self.w.ssthresh.max((c >> 1) + (c >> 2))
        }
    }

    /// `tcp_fastretrans_alert`.
    pub(crate) fn fastretrans_alert(&mut self, now: Time, f: &mut AckFlags, t: &mut Tally) {
        if self.rec.state == CaState::Open {
            self.rec.retrans_stamp = None;
        } else if self.snd_una >= self.rec.high_seq {
            self.end_of_episode(now);
        }
        match self.rec.state {
            CaState::Recovery => self.identify_loss(now, f, t),
            CaState::Loss => {
                self.process_loss(now, f);
                self.identify_loss(now, f, t);
                if self.rec.state == CaState::Open || f.lost_retrans {
                    self.detect_or_open(now, f, t);
                }
            }
            _ => self.detect_or_open(now, f, t),
        }
    }

    /// Exit conditions when `high_seq` has been acknowledged.
    fn end_of_episode(&mut self, now: Time) {
        match self.rec.state {
            CaState::Cwr if self.snd_una != self.rec.high_seq => {
                self.end_cwnd_reduction(now);
                self.rec.state = CaState::Open;
            }
            CaState::Recovery => {
                if !self.try_undo(now, false) {
                    self.end_cwnd_reduction(now);
                }
                self.rec.state = CaState::Open;
            }
            _ => {}
        }
    }

    /// The `default:` branch: look for loss, else try to reopen.
    fn detect_or_open(&mut self, now: Time, f: &mut AckFlags, t: &mut Tally) {
        self.identify_loss(now, f, t);
        if self.sb.lost_out == 0 {
            self.try_to_open(now, f);
            return;
        }
        self.enter_recovery(f.ece);
    }

    /// `tcp_identify_packet_loss` → `tcp_rack_mark_lost`.
    fn identify_loss(&mut self, now: Time, f: &mut AckFlags, t: &mut Tally) {
        if self.sb.is_empty() {
            return;
        }
        let prior_retrans = self.sb.retrans_out;
        let reo = self.reo_wnd();
        let (marked, wait) = self.rack.mark_lost(&mut self.sb, now, reo);
        t.newly_lost += marked;
        if let Some(w) = wait {
            self.xmit_timer = Some((now + w + TIMEOUT_MIN, XmitTimer::ReoTimeout));
            f.set_xmit_timer = false;
        }
        if self.sb.retrans_out < prior_retrans {
            f.lost_retrans = true;
            self.stats.lost_retransmits += u64::from(prior_retrans - self.sb.retrans_out);
        }
    }

    pub(crate) fn reo_wnd(&self) -> Duration {
        let in_rec = self.rec.state >= CaState::Recovery;
        rack::reo_wnd(
            in_rec,
            self.sb.sacked_out,
            self.rtt.min_rtt(),
            self.rtt.srtt(),
        )
    }

    /// `tcp_try_to_open`.
    fn try_to_open(&mut self, now: Time, f: &AckFlags) {
        if !self.any_retrans_done() {
            self.rec.retrans_stamp = None;
        }
        if f.ece {
            self.enter_cwr(now);
        }
        if self.rec.state != CaState::Cwr {
            self.try_keep_open();
        }
    }

    /// `tcp_try_keep_open`: Disorder while anything is SACKed, lost or
    /// retransmitted, else Open.
    fn try_keep_open(&mut self) {
        let disorder = self.sb.sacked_out + self.sb.lost_out > 0 || self.any_retrans_done();
        let state = if disorder {
            CaState::Disorder
        } else {
            CaState::Open
        };
        if self.rec.state != state {
            self.rec.state = state;
            self.rec.high_seq = self.snd_nxt;
        }
    }

    /// `tcp_any_retrans_done`.
    fn any_retrans_done(&self) -> bool {
        self.sb.retrans_out > 0 || self.sb.head().is_some_and(|h| h.ever_retrans)
    }

    /// `tcp_enter_cwr`: ECE (or a repaired tail loss) reduces the window.
    pub(crate) fn enter_cwr(&mut self, _now: Time) {
        self.rec.prior_ssthresh = 0;
        if self.rec.state < CaState::Cwr {
            self.rec.undo_marker = false;
            self.init_cwnd_reduction();
            self.rec.state = CaState::Cwr;
            self.stats.ecn_reductions += 1;
        }
    }

    /// `tcp_enter_recovery`.
    fn enter_recovery(&mut self, ece: bool) {
        self.rec.prior_ssthresh = 0;
        self.rec.undo_marker = true;
        if !self.in_cwnd_reduction() {
            if !ece {
                self.rec.prior_ssthresh = self.current_ssthresh();
            }
            self.init_cwnd_reduction();
        }
        self.rec.state = CaState::Recovery;
        self.stats.recoveries += 1;
    }

    /// The reordering timer found losses outside Recovery.
    pub(crate) fn enter_recovery_on_timer(&mut self) {
        self.enter_recovery(false);
        if !self.cc.controls_cwnd() {
            self.cwnd_reduction(1, 0, false);
        }
    }

    /// `tcp_init_cwnd_reduction`.
    fn init_cwnd_reduction(&mut self) {
        self.rec.high_seq = self.snd_nxt;
        self.rec.tlp_high_seq = None;
        self.w.cwnd_cnt = 0;
        self.rec.prior_cwnd = self.w.cwnd;
        self.rec.prr_delivered = 0;
        self.rec.prr_out = 0;
        self.w.ssthresh = self.cc.ssthresh(&self.w);
        self.rec.queue_cwr = self.ecn_ok;
    }

    /// `tcp_end_cwnd_reduction`.
    fn end_cwnd_reduction(&mut self, now: Time) {
        if self.w.ssthresh < INFINITE_SSTHRESH && !self.cc.controls_cwnd() {
            self.w.cwnd = self.w.ssthresh;
            self.cwnd_use.snd_cwnd_stamp = now;
        }
    }

    /// `tcp_cwnd_reduction`: PRR (RFC 6937) with Linux's SSRB variant.
    pub(crate) fn cwnd_reduction(&mut self, delivered: u32, newly_lost: u32, una_advanced: bool) {
        if delivered == 0 || self.rec.prior_cwnd == 0 {
            return;
        }
        let r = &mut self.rec;
        let in_flight = i64::from(self.sb.in_flight());
        let delta = i64::from(self.w.ssthresh) - in_flight;
        r.prr_delivered += delivered;
        let mut sndcnt = if delta < 0 {
            let dividend = u64::from(self.w.ssthresh) * u64::from(r.prr_delivered)
                + u64::from(r.prior_cwnd)
                - 1;
            (dividend / u64::from(r.prior_cwnd)) as i64 - i64::from(r.prr_out)
        } else {
            let mut n =
                (i64::from(r.prr_delivered) - i64::from(r.prr_out)).max(i64::from(delivered));
            if una_advanced && newly_lost == 0 {
                n += 1;
            }
            n.min(delta)
        };
        if r.prr_out == 0 {
            sndcnt = sndcnt.max(1);
        }
        self.w.cwnd = (in_flight + sndcnt.max(0)).clamp(1, i64::from(u32::MAX)) as u32;
    }

    /// `tcp_enter_loss`: called by the RTO before retransmitting the head.
    pub(crate) fn enter_loss(&mut self, now: Time) {
        self.timeout_mark_lost(now);
        let reduce = self.rec.state <= CaState::Disorder
            || self.snd_una >= self.rec.high_seq
            || (self.rec.state == CaState::Loss && self.rec.retransmits == 0);
        if reduce {
            self.rec.prior_ssthresh = self.current_ssthresh();
            self.rec.prior_cwnd = self.w.cwnd;
            self.w.ssthresh = self.cc.ssthresh(&self.w);
            self.rec.undo_marker = true;
        }
        self.w.cwnd = self.sb.in_flight() + 1;
        self.w.cwnd_cnt = 0;
        self.cwnd_use.snd_cwnd_stamp = now;
        self.rec.state = CaState::Loss;
        self.cc.on_loss_state(now, self.snd_nxt);
        if let CongestionControl::Bbr(b) = &mut self.cc {
            b.on_loss_state(&bbr_cx!(self, now));
        }
        self.rec.high_seq = self.snd_nxt;
        self.rec.queue_cwr = self.ecn_ok;
    }

    /// `tcp_timeout_mark_lost`: all but recently sent segments are lost.
    fn timeout_mark_lost(&mut self, now: Time) {
        let head = self.sb.head().map(|h| h.id);
        for id in self.sb.ids() {
            let recent = self
                .sb
                .get(id)
                .is_some_and(|s| self.rack.too_recent(s.xmit_time, now));
            if Some(id) != head && recent {
                continue;
            }
            self.sb.mark_lost(id);
        }
    }

    /// `tcp_process_loss` without F-RTO.
    fn process_loss(&mut self, now: Time, f: &AckFlags) {
        if f.una_advanced && self.try_undo(now, true) {
            return;
        }
        if self.snd_una >= self.rec.high_seq {
            self.rec.state = CaState::Open;
        }
    }

    /// `tcp_try_undo_loss` / `tcp_try_undo_recovery`: Eifel detection with
    /// the timestamp echo of the ACK being processed.
    fn try_undo(&mut self, now: Time, unmark_loss: bool) -> bool {
        if !self.rec.undo_marker || !self.packet_delayed() {
            return false;
        }
        if unmark_loss {
            self.sb.unmark_lost();
        }
        let cx = bbr_cx!(self, now);
        self.w.cwnd = self.cc.undo_cwnd(&self.w, self.rec.prior_cwnd, &cx);
        if self.rec.prior_ssthresh > self.w.ssthresh {
            self.w.ssthresh = self.rec.prior_ssthresh;
            self.rec.queue_cwr = false;
        }
        self.cwnd_use.snd_cwnd_stamp = now;
        self.rec.undo_marker = false;
        self.rack.set_advanced();
        self.rec.retransmits = 0;
        self.rec.state = CaState::Open;
        self.stats.undos += 1;
        true
    }

    /// `tcp_packet_delayed`: the ACK echoes a time before the first
    /// retransmission, so the original transmission got through.
    fn packet_delayed(&self) -> bool {
        let (Some(stamp), Some(ecr)) = (self.rec.retrans_stamp, self.last_tsecr) else {
            return false;
        };
        ecr != 0 && (ecr.wrapping_sub(stamp) as i32) < 0
    }

    /// `tcp_process_tlp_ack`.
    pub(crate) fn process_tlp_ack(&mut self, f: &AckFlags, now: Time) {
        let Some(high) = self.rec.tlp_high_seq else {
            return;
        };
        if self.snd_una < high {
            return;
        }
        if !self.rec.tlp_retrans || f.dsack_tlp {
            self.rec.tlp_high_seq = None;
        } else if self.snd_una > high {
            self.init_cwnd_reduction();
            self.rec.state = CaState::Cwr;
            self.end_cwnd_reduction(now);
            self.try_keep_open();
            self.stats.tlp_recoveries += 1;
        } else if !(f.una_advanced || f.has_data || f.win_update || f.data_sacked) {
            self.rec.tlp_high_seq = None;
        }
    }
}
