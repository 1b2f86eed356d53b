//! Delivery-rate estimation (Linux `tcp_rate.c`), what BBR measures the
//! path with.
//!
//! Each segment remembers, when it is sent, how much the connection had
//! delivered by then (`delivered`) and when the latest delivery happened
//! (`delivered_time`), and when the current "send phase" began
//! (`first_tx`). When an ACK newly delivers segments, the most recently
//! sent of them gives the sample: the packets delivered since it was sent,
//! over the longer of its send phase (`first_tx` to its own send time) and
//! its ACK phase (its snapshot's delivery time to now). A sample shorter
//! than the minimum RTT is implausible and dropped; one taken while the
//! application left the pipe unfilled is marked app-limited, so a
//! max-filter can ignore it unless it is higher than what it holds.
//!
//! Times are kept in nanoseconds (Linux keeps microseconds): the samples
//! differ by the rounding only.

use super::scoreboard::Delivered;
use sluice_core::time::{Duration, Time};

/// What a segment remembers of the connection when it is sent (`tx` in
/// Linux's `tcp_skb_cb`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxSnapshot {
    /// `tp->delivered` at the send.
    pub delivered: u64,
    /// `tp->delivered_mstamp` at the send; `None` once the segment has
    /// given its sample (SACKed), so a later cumulative ACK does not reuse it.
    pub delivered_time: Option<Time>,
    /// `tp->first_tx_mstamp` at the send.
    pub first_tx: Time,
    /// Sent while the application limited the connection.
    pub app_limited: bool,
}

/// The connection's side of the estimator.
#[derive(Clone, Debug, Default)]
pub struct RateState {
    /// Segments delivered (ACKed or SACKed) so far (`tp->delivered`).
    pub delivered: u64,
    /// When the latest delivery was seen (`tp->delivered_mstamp`).
    pub delivered_time: Time,
    /// Start of the current send phase (`tp->first_tx_mstamp`).
    pub first_tx: Time,
    /// While nonzero, the delivered count at which the app-limited
    /// "bubble" is gone (`tp->app_limited`).
    pub app_limited: u64,
}

/// One ACK's rate sample (`struct rate_sample`).
#[derive(Clone, Copy, Debug, Default)]
pub struct RateSample {
    /// `tp->delivered` when the sampled segment was sent.
    pub prior_delivered: u64,
    /// When the delivery before it was seen; `None`: no timing information.
    pub prior_time: Option<Time>,
    /// Packets delivered over the interval; `None`: not a valid sample.
    pub delivered: Option<u64>,
    /// The interval; `None`: not a valid sample.
    pub interval: Option<Duration>,
    /// Segments newly ACKed or SACKed by this ACK.
    pub acked_sacked: u32,
    /// Segments newly marked lost by this ACK.
    pub losses: u32,
    /// The newest RTT sample of this ACK (`ca_rtt_us`).
    pub rtt: Option<Duration>,
    /// Packets in flight before this ACK.
    pub prior_in_flight: u32,
    /// The sampled segment was sent while app-limited.
    pub is_app_limited: bool,
    /// The sampled segment had been retransmitted.
    pub is_retrans: bool,
    pub(crate) send_phase: Duration,
    pub(crate) last_end: u64,
}

impl RateState {
    /// `tcp_rate_skb_sent`: the snapshot a segment sent at `now` keeps;
    /// `packets_out` is how many were outstanding before it.
    pub fn on_sent(&mut self, packets_out: u32, now: Time) -> TxSnapshot {
        if packets_out == 0 {
            // Nothing in flight: the next ACK's interval starts now.
            self.first_tx = now;
            self.delivered_time = now;
        }
        TxSnapshot {
            delivered: self.delivered,
            delivered_time: Some(self.delivered_time),
            first_tx: self.first_tx,
            app_limited: self.app_limited != 0,
        }
    }

    /// `tcp_rate_skb_delivered`: a segment was newly ACKed or SACKed.
    pub fn on_delivered(&mut self, rs: &mut RateSample, d: &Delivered) {
        let Some(prior_time) = d.tx.delivered_time else {
            return;
        };
        // The most recently sent of the delivered segments (Linux tests
        // `prior_delivered` for "none yet", and so do we).
        let sent_after = rs.prior_delivered == 0
            || d.xmit_time > self.first_tx
            || (d.xmit_time == self.first_tx && d.end > rs.last_end);
        if sent_after {
            rs.prior_delivered = d.tx.delivered;
            rs.prior_time = Some(prior_time);
            rs.is_app_limited = d.tx.app_limited;
            rs.is_retrans = d.ever_retrans;
            rs.last_end = d.end;
            self.first_tx = d.xmit_time;
            rs.send_phase = d.xmit_time.saturating_since(d.tx.first_tx);
        }
    }

    /// `tcp_rate_gen`: finish the sample once the ACK is processed;
    /// `delivered` and `lost` are this ACK's fresh counts.
    pub fn generate(
        &mut self,
        rs: &mut RateSample,
        delivered: u32,
        lost: u32,
        now: Time,
        min_rtt: Option<Duration>,
    ) {
        if self.app_limited != 0 && self.delivered > self.app_limited {
            self.app_limited = 0;
        }
        if delivered > 0 {
            self.delivered_time = now;
        }
        rs.acked_sacked = delivered;
        rs.losses = lost;
        let Some(prior_time) = rs.prior_time else {
            rs.delivered = None;
            rs.interval = None;
            return;
        };
        rs.delivered = Some(self.delivered - rs.prior_delivered);
        let ack_phase = now.saturating_since(prior_time);
        let interval = rs.send_phase.max(ack_phase);
        rs.interval = (min_rtt.is_none_or(|m| interval >= m)).then_some(interval);
        if rs.interval.is_none() {
            rs.delivered = None;
        }
    }

    /// `tcp_rate_check_app_limited`: called when the application writes;
    /// the connection is app-limited if it has less than a segment to send,
    /// is not cwnd-limited and has no lost segment waiting.
    pub fn check_app_limited(
        &mut self,
        unsent: u64,
        mss: u32,
        in_flight: u32,
        cwnd: u32,
        lost_waiting: bool,
    ) {
        if unsent < u64::from(mss) && in_flight < cwnd && !lost_waiting {
            self.app_limited = (self.delivered + u64::from(in_flight)).max(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivered(xmit_ms: u64, end: u64, tx: TxSnapshot) -> Delivered {
        Delivered {
            xmit_time: Time(xmit_ms * 1_000_000),
            end,
            ever_retrans: false,
            was_sacked: false,
            bytes: 1000,
            fin: false,
            tx,
        }
    }

    #[test]
    fn a_window_sent_in_one_burst_is_measured_over_its_ack_phase() {
        // Ten segments sent at t = 0 with nothing in flight; their ACKs
        // arrive spread over 10 ms from t = 100 ms: ten packets over the
        // 110 ms from the send to the last ACK (the ACK phase is longer).
        let mut r = RateState::default();
        let ms = |m: u64| Time(m * 1_000_000);
        let snaps: Vec<TxSnapshot> = (0..10).map(|i| r.on_sent(i, ms(0))).collect();
        let mut rs = RateSample::default();
        for (i, s) in snaps.iter().enumerate() {
            r.on_delivered(&mut rs, &delivered(0, (i as u64 + 1) * 1000, *s));
        }
        r.delivered += 10;
        r.generate(&mut rs, 10, 0, ms(110), Some(Duration::from_millis(100)));
        assert_eq!(rs.delivered, Some(10));
        assert_eq!(rs.interval, Some(Duration::from_millis(110)));
    }

    #[test]
    fn a_sample_shorter_than_the_min_rtt_is_not_valid() {
        let mut r = RateState::default();
        let s = r.on_sent(0, Time(0));
        let mut rs = RateSample::default();
        r.on_delivered(&mut rs, &delivered(0, 1000, s));
        r.delivered += 1;
        r.generate(
            &mut rs,
            1,
            0,
            Time(5_000_000),
            Some(Duration::from_millis(10)),
        );
        assert_eq!((rs.delivered, rs.interval), (None, None));
    }

    #[test]
    fn the_app_limited_mark_lasts_until_its_bubble_is_delivered() {
        let mut r = RateState::default();
        r.check_app_limited(0, 1448, 3, 10, false);
        assert_eq!(r.app_limited, 3);
        assert!(r.on_sent(3, Time(0)).app_limited);
        let mut rs = RateSample::default();
        r.delivered = 4;
        r.generate(&mut rs, 4, 0, Time(1), None);
        assert_eq!(r.app_limited, 0);
    }
}
