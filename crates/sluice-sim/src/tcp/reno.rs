//! Reno congestion avoidance (RFC 5681; Linux `tcp_reno_cong_avoid` and
//! `tcp_reno_ssthresh` in `tcp_cong.c`).
//!
//! Slow start below `ssthresh`, then one segment per window of ACKed
//! segments (about +1 MSS per RTT); a congestion event halves the window
//! (never below 2). Loss recovery itself (SACK, RACK, PRR) is the same as
//! for CUBIC: Linux keeps it outside the congestion-control module.

use super::cc::Window;

/// Grow the window for `acked` newly delivered segments.
pub fn cong_avoid(w: &mut Window, acked: u32) {
    let mut acked = acked;
    if w.in_slow_start() {
        acked = w.slow_start(acked);
        if acked == 0 {
            return;
        }
    }
    let cwnd = w.cwnd;
    w.cong_avoid_ai(cwnd, acked);
}

/// The slow-start threshold after a congestion event: half the window.
pub fn ssthresh(w: &Window) -> u32 {
    (w.cwnd >> 1).max(2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_segment_per_window_in_congestion_avoidance() {
        let mut w = Window::new(20);
        w.ssthresh = 20;
        for _ in 0..20 {
            cong_avoid(&mut w, 1);
        }
        assert_eq!(w.cwnd, 21);
        assert_eq!(ssthresh(&w), 10);
    }

    #[test]
    fn slow_start_stops_at_ssthresh() {
        let mut w = Window::new(10);
        w.ssthresh = 12;
        cong_avoid(&mut w, 5);
        assert_eq!(w.cwnd, 12);
        assert_eq!(w.cwnd_cnt, 3);
    }
}
