//! Timers (Linux `tcp_timer.c`, `tcp_rearm_rto()`, `tcp_schedule_loss_probe()`).
//!
//! Like Linux, one transmit timer serves four jobs (`icsk_pending`): the
//! retransmission timeout, the tail loss probe, RACK's reordering timeout and
//! the zero-window probe; arming one replaces the other. Beside it run the
//! delayed-ACK timer (receiver) and TIME-WAIT. [`TcpConnection::poll_timeout`]
//! reports the earliest deadline; [`TcpConnection::on_timeout`] runs every
//! expired one.
//!
//! - **RTO** (RFC 6298 with Linux's estimator, `rtt.rs`): armed `rto` after
//!   the latest ACK of new data or retransmission of the head. On expiry:
//!   enter Loss, retransmit the head, double the RTO (up to 120 s). After
//!   `max_retransmits` expiries without progress the connection aborts.
//!   When the timer replaces a TLP or reordering timer, the RTO is measured
//!   from the head's last transmission, not from now (`tcp_rto_delta_us`).
//! - **TLP** (RFC 8985 §7): in Open or CWR with SACK, `2·srtt` (+2 ms, or
//!   +200 ms with a single segment out, covering a delayed ACK), never later
//!   than the RTO. On expiry send one new segment if the window allows (even
//!   beyond cwnd), else retransmit the last segment; one probe per episode.
//! - **Reordering timer**: RACK's wait for segments not yet expired (+2 ms).
//! - **Zero-window probe**: with nothing in flight and the peer's window too
//!   small for the next segment, probe after `max(rto, 200 ms)`, doubling;
//!   the probe is a bare ACK with `seq = snd_una − 1` (which the peer must
//!   answer), or data if some window has opened.
//! - **SYN / SYN-ACK**: 1 s, then 2 s, 4 s, … (Linux ≥ 6.5 makes the first
//!   four SYN retransmissions linear by default, `tcp_syn_linear_timeouts`;
//!   the classic exponential schedule is modelled).

use super::conn::{TcpConnection, TcpError, TcpState, XmitTimer};
use sluice_core::time::{Duration, Time};

/// Probe timeout with a single segment out adds `TCP_RTO_MIN` for a delayed ACK.
const TLP_ONE_SEGMENT_EXTRA: Duration = Duration::from_millis(200);
/// `TCP_TIMEOUT_MIN`.
const TIMEOUT_MIN: Duration = Duration::from_millis(2);
/// `TCP_TIMEOUT_INIT`.
const TIMEOUT_INIT: Duration = Duration::from_secs(1);

impl TcpConnection {
    /// The earliest time `on_timeout` must be called, if any.
    pub fn poll_timeout(&self) -> Option<Time> {
        let delack = self
            .rcv
            .delack_deadline()
            .filter(|_| self.is_established() && self.state != TcpState::Closed);
        [
            self.xmit_timer.map(|(t, _)| t),
            delack,
            self.time_wait_until,
            self.pacing_wake,
        ]
        .into_iter()
        .fold(None, sluice_core::qdisc::Dequeue::earliest)
    }

    /// Run every timer that has expired by `now`.
    pub fn on_timeout(&mut self, now: Time) {
        if self.pacing_wake.is_some_and(|t| t <= now) {
            self.pacing_wake = None; // data may go: the caller polls
        }
        if self.rcv.delack_deadline().is_some_and(|t| t <= now) {
            self.rcv.on_delack_timeout(self.rtt.rto());
        }
        if let Some((t, kind)) = self.xmit_timer {
            if t <= now {
                self.fire(kind, now);
                if self.xmit_timer == Some((t, kind)) {
                    self.xmit_timer = None;
                }
            }
        }
        if self.time_wait_until.is_some_and(|t| t <= now) {
            self.time_wait_until = None;
            self.state = TcpState::Closed;
        }
    }

    fn fire(&mut self, kind: XmitTimer, now: Time) {
        match (self.state, kind) {
            (TcpState::SynSent, _) => self.syn_timeout(now),
            (TcpState::SynReceived, _) => self.synack_timeout(now),
            (TcpState::Closed | TcpState::Listen | TcpState::TimeWait, _) => {}
            (_, XmitTimer::Retrans) => self.retransmit_timer(now),
            (_, XmitTimer::LossProbe) => self.send_loss_probe(now),
            (_, XmitTimer::ReoTimeout) => self.reo_timeout(now),
            (_, XmitTimer::Probe0) => self.probe_timer(now),
        }
    }

    fn syn_timeout(&mut self, now: Time) {
        if self.hs.retries >= self.cfg.syn_retries {
            self.abort(TcpError::TimedOut);
            return;
        }
        self.hs.retries += 1;
        self.stats.syn_retransmits += 1;
        self.rtt.backoff();
        self.send_syn(now);
    }

    fn synack_timeout(&mut self, now: Time) {
        if self.hs.retries >= self.cfg.synack_retries {
            self.abort(TcpError::TimedOut);
            return;
        }
        self.hs.retries += 1;
        self.stats.syn_retransmits += 1;
        self.rtt.backoff();
        self.send_synack(now);
    }

    /// `tcp_retransmit_timer`.
    fn retransmit_timer(&mut self, now: Time) {
        let Some(head) = self.sb.head().map(|h| h.id) else {
            self.xmit_timer = None;
            return;
        };
        if self.rec.retransmits >= self.cfg.max_retransmits {
            self.abort(TcpError::TimedOut);
            return;
        }
        self.stats.rtos += 1;
        self.enter_loss(now);
        let seg = self.retransmit(head, now);
        self.outbox.push_back(seg);
        self.rec.retransmits += 1;
        self.rtt.backoff();
        self.xmit_timer = Some((now + self.rtt.rto(), XmitTimer::Retrans));
    }

    /// `tcp_send_loss_probe`.
    fn send_loss_probe(&mut self, now: Time) {
        if self.rec.tlp_high_seq.is_some() {
            self.rearm_rto(now);
            return;
        }
        self.rec.tlp_retrans = false;
        let seg = match self.next_new_data(now, true) {
            Some(seg) => seg,
            None => {
                let Some(last) = self.sb.last().map(|s| s.id) else {
                    self.rearm_rto(now);
                    return;
                };
                self.rec.tlp_retrans = true;
                self.retransmit(last, now)
            }
        };
        self.outbox.push_back(seg);
        self.rec.tlp_high_seq = Some(self.snd_nxt);
        self.stats.tlp_probes += 1;
        self.xmit_timer = None;
        self.rearm_rto(now);
    }

    /// `tcp_rack_reo_timeout`.
    fn reo_timeout(&mut self, now: Time) {
        let prior = self.sb.in_flight();
        let reo = self.reo_wnd();
        self.rack.detect_loss(&mut self.sb, now, reo);
        if self.sb.in_flight() != prior && self.rec.state != super::conn::CaState::Recovery {
            self.enter_recovery_on_timer();
        }
        if self.xmit_kind() != Some(XmitTimer::Retrans) {
            self.rearm_rto(now);
        }
    }

    /// `tcp_probe_timer`.
    fn probe_timer(&mut self, now: Time) {
        if !self.sb.is_empty() || self.write_end <= self.snd_nxt {
            self.rec.probes_out = 0;
            self.xmit_timer = None;
            return;
        }
        if let Some(seg) = self.next_new_data(now, true) {
            self.outbox.push_back(seg);
            self.rec.probes_out = 0;
            return;
        }
        let probe = self.zero_window_probe(now);
        self.outbox.push_back(probe);
        self.rec.probes_out += 1;
        self.xmit_timer = None;
        self.arm_probe0(now);
    }

    /// `tcp_check_probe_timer`: nothing in flight, the window blocks the
    /// next segment, and no other transmit job is pending.
    pub(crate) fn check_probe_timer(&mut self, now: Time) {
        if self.sb.is_empty() && self.xmit_timer.is_none() {
            let base = self.rtt.rto().max(self.cfg.rto_min);
            self.xmit_timer = Some((now + base, XmitTimer::Probe0));
        }
    }

    /// (Re)arm the zero-window probe with backoff (`tcp_probe0_when`).
    pub(crate) fn arm_probe0(&mut self, now: Time) {
        if !self.sb.is_empty() {
            return;
        }
        let base = self.rtt.rto().max(self.cfg.rto_min).as_nanos();
        let when = base
            .saturating_mul(1u64 << self.rec.probes_out.min(20))
            .min(self.cfg.rto_max.as_nanos());
        self.xmit_timer = Some((now + Duration(when), XmitTimer::Probe0));
    }

    /// `tcp_rearm_rto`: relative to the head's transmission when replacing
    /// a TLP or reordering timer, else a full RTO from now.
    pub(crate) fn rearm_rto(&mut self, now: Time) {
        let Some(head) = self.sb.head() else {
            self.xmit_timer = None;
            return;
        };
        let relative = matches!(
            self.xmit_kind(),
            Some(XmitTimer::LossProbe | XmitTimer::ReoTimeout)
        );
        let rto = if relative {
            (head.xmit_time + self.rtt.rto())
                .saturating_since(now)
                .max(Duration(1))
        } else {
            self.rtt.rto()
        };
        self.xmit_timer = Some((now + rto, XmitTimer::Retrans));
    }

    /// `tcp_schedule_loss_probe`; false when no probe is allowed now.
    pub(crate) fn schedule_loss_probe(&mut self, now: Time, advancing_rto: bool) -> bool {
        use super::conn::CaState;
        let state_ok = matches!(self.rec.state, CaState::Open | CaState::Cwr);
        if !self.cfg.tlp || !self.sack_ok || self.sb.is_empty() || !state_ok {
            return false;
        }
        let mut timeout = match self.rtt.srtt() {
            Some(srtt) => {
                let extra = if self.sb.packets_out == 1 {
                    TLP_ONE_SEGMENT_EXTRA
                } else {
                    TIMEOUT_MIN
                };
                Duration(srtt.as_nanos() * 2) + extra
            }
            None => TIMEOUT_INIT,
        };
        let rto_delta = if advancing_rto {
            self.rtt.rto()
        } else {
            let head = self.sb.head().map_or(now, |h| h.xmit_time);
            (head + self.rtt.rto()).saturating_since(now)
        };
        if rto_delta > Duration::ZERO {
            timeout = timeout.min(rto_delta);
        }
        self.xmit_timer = Some((now + timeout, XmitTimer::LossProbe));
        true
    }

    /// `tcp_set_xmit_timer`: a probe if allowed, else the RTO.
    pub(crate) fn set_xmit_timer(&mut self, now: Time) {
        if !self.schedule_loss_probe(now, true) {
            self.rearm_rto(now);
        }
    }
}
