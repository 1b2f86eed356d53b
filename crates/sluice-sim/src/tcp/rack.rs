//! RACK: time-based loss detection (RFC 8985; Linux `tcp_recovery.c`).
//!
//! RACK remembers the most recently *sent* segment that has been delivered
//! (ACKed or SACKed) — its send time `mstamp`, its `end_seq` and the RTT it
//! measured. A segment sent before that one and still not delivered after
//! `rtt + reo_wnd` has elapsed since its own transmission is lost. This
//! covers what dupack counting cannot: lost retransmissions (a retransmission
//! is just a later send), and losses at the tail once a probe is delivered.
//!
//! The reordering window follows Linux's `tcp_rack_reo_wnd()`: with no
//! reordering ever observed (the model never observes any), it is zero in
//! recovery and as soon as three segments are SACKed (`sacked_out ≥
//! tp->reordering`, the classic dupack threshold folded into RACK); otherwise
//! `min(min_rtt/4, srtt)`, and a segment not yet expired arms the
//! reordering timer for the remaining time (+2 ms, `TCP_TIMEOUT_MIN`).
//! A delivered retransmission whose RTT is shorter than `min_rtt` is
//! ambiguous (the original may have been delivered) and does not advance
//! RACK. Linux's adaptive `reo_wnd_steps` (DSACK-driven) is not modelled.

use super::scoreboard::Scoreboard;
use sluice_core::time::{Duration, Time};

/// `tp->reordering` default (`sysctl_tcp_reordering`).
pub const REORDERING: u32 = 3;

/// RACK state (`tp->rack`).
#[derive(Clone, Debug, Default)]
pub struct Rack {
    /// Send time of the most recently sent delivered segment.
    mstamp: Option<Time>,
    /// Its end offset (tie-breaker for equal send times).
    end_seq: u64,
    /// RTT it measured.
    rtt: Duration,
    /// Something was delivered since the last loss scan.
    advanced: bool,
}

/// `tcp_skb_sent_after`: was (t1, seq1) sent after (t2, seq2)?
fn sent_after(t1: Time, seq1: u64, t2: Time, seq2: u64) -> bool {
    t1 > t2 || (t1 == t2 && seq1 > seq2)
}

impl Rack {
    /// `tcp_rack_advance`: a segment sent at `xmit_time` ending at `end_seq`
    /// was just delivered.
    pub fn advance(
        &mut self,
        ever_retrans: bool,
        end_seq: u64,
        xmit_time: Time,
        now: Time,
        min_rtt: Option<Duration>,
    ) {
        let rtt = now.saturating_since(xmit_time);
        if ever_retrans && min_rtt.is_some_and(|m| rtt < m) {
            return;
        }
        self.advanced = true;
        self.rtt = rtt;
        let newer = match self.mstamp {
            None => true,
            Some(t) => sent_after(xmit_time, end_seq, t, self.end_seq),
        };
        if newer {
            self.mstamp = Some(xmit_time);
            self.end_seq = end_seq;
        }
    }

    /// Force a rescan on the next ACK.
    pub fn set_advanced(&mut self) {
        self.advanced = true;
    }

    /// `tcp_rack_mark_lost`: scan if RACK advanced; returns the ids newly
    /// marked lost and, if some segment may still expire, when to look again.
    pub fn mark_lost(
        &mut self,
        sb: &mut Scoreboard,
        now: Time,
        reo_wnd: Duration,
    ) -> (u32, Option<Duration>) {
        if !self.advanced {
            return (0, None);
        }
        self.advanced = false;
        self.detect_loss(sb, now, reo_wnd)
    }

    /// `tcp_rack_detect_loss`: mark expired segments sent before RACK's one.
    pub fn detect_loss(
        &self,
        sb: &mut Scoreboard,
        now: Time,
        reo_wnd: Duration,
    ) -> (u32, Option<Duration>) {
        let Some(mstamp) = self.mstamp else {
            return (0, None);
        };
        let mut lost = Vec::new();
        let mut wait: Option<Duration> = None;
        for seg in sb.in_send_order() {
            if seg.lost && !seg.retrans {
                continue;
            }
            if !sent_after(mstamp, self.end_seq, seg.xmit_time, seg.end) {
                break;
            }
            let deadline = seg.xmit_time + self.rtt + reo_wnd;
            if deadline <= now {
                lost.push(seg.id);
            } else {
                let remaining = deadline.saturating_since(now);
                wait = Some(wait.map_or(remaining, |w| w.max(remaining)));
            }
        }
        let marked = lost.into_iter().filter(|&id| sb.mark_lost(id)).count();
        (marked as u32, wait)
    }

    /// `tcp_rack_skb_timeout(…, 0) > 0`: sent too recently to be called lost
    /// by an RTO (Linux spares those in `tcp_timeout_mark_lost`).
    pub fn too_recent(&self, xmit_time: Time, now: Time) -> bool {
        xmit_time + self.rtt > now
    }
}

/// `tcp_rack_reo_wnd` without observed reordering.
pub fn reo_wnd(
    in_recovery_or_loss: bool,
    sacked_out: u32,
    min_rtt: Option<Duration>,
    srtt: Option<Duration>,
) -> Duration {
    if in_recovery_or_loss || sacked_out >= REORDERING {
        return Duration::ZERO;
    }
    let quarter = Duration(min_rtt.map_or(0, |m| m.as_nanos() / 4));
    srtt.map_or(quarter, |s| quarter.min(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_delivery_marks_earlier_sends_lost_after_rtt() {
        let mut sb = Scoreboard::default();
        for i in 0..4u64 {
            sb.push(
                1 + i * 10,
                11 + i * 10,
                false,
                Time(i * 1000),
                Default::default(),
            );
        }
        let mut rack = Rack::default();
        let now = Time(100_000);
        for d in sb.sack(21, 41) {
            rack.advance(d.ever_retrans, d.end, d.xmit_time, now, None);
        }
        // RACK.rtt = 97 µs; with a 2.5 µs window segment 0 (sent at 0) is
        // past its deadline, segment 1 (sent at 1 µs) 0.5 µs short of it.
        let reo = Duration(2500);
        let (n, wait) = rack.mark_lost(&mut sb, now, reo);
        assert_eq!(n, 1);
        assert_eq!(wait, Some(Duration(500)));
        let (n, _) = rack.detect_loss(&mut sb, Time(100_500), reo);
        assert_eq!(n, 1);
        assert_eq!(sb.lost_out, 2);
    }

    #[test]
    fn reordering_window() {
        let ms = Duration::from_millis;
        assert_eq!(reo_wnd(true, 0, Some(ms(40)), Some(ms(50))), Duration::ZERO);
        assert_eq!(
            reo_wnd(false, 3, Some(ms(40)), Some(ms(50))),
            Duration::ZERO
        );
        assert_eq!(reo_wnd(false, 1, Some(ms(40)), Some(ms(50))), ms(10));
    }
}
