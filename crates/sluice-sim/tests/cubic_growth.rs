//! CUBIC's window after a loss follows RFC 9438's
//! `W(t) = C·(t − K)³ + W_max`, `C = 0.4`, `K = ∛(W_max·(1 − β)/C)`,
//! `β = 0.7`; Reno grows one segment per RTT.
//!
//! The algorithm is driven directly with an ideal ACK clock: every RTT
//! (100 ms) the whole window is acknowledged, one ACK per segment, evenly
//! spaced. Linux aims one `delay_min` ahead (the window should reach the
//! curve by the time the ACKs of this round return), so the window at `t`
//! lies between `W(t)` and `W(t + RTT)`, up to rounding to whole segments.

use sluice_core::time::{Duration, Time};
use sluice_sim::tcp::cc::{AckSample, CongestionControl, Window};
use sluice_sim::tcp::CongestionAlgorithm;

const RTT: Duration = Duration::from_millis(100);

/// Run the ACK clock from `start` for `secs`, recording cwnd at each RTT.
fn drive(cc: &mut CongestionControl, w: &mut Window, start: Time, secs: f64) -> Vec<(f64, u32)> {
    let mut out = Vec::new();
    let mut now = start;
    let rounds = (secs / RTT.as_secs_f64()).round() as u64;
    for _ in 0..rounds {
        let n = w.cwnd;
        let gap = Duration(RTT.as_nanos() / u64::from(n));
        for _ in 0..n {
            now += gap;
            let s = AckSample {
                now,
                rtt: Some(RTT),
                snd_una: 0,
                snd_nxt: 0,
                srtt: Some(RTT),
                mss: 1448,
            };
            cc.pkts_acked(w, &s);
            cc.cong_avoid(w, 1, now);
        }
        out.push((now.saturating_since(start).as_secs_f64(), w.cwnd));
    }
    out
}

fn cubic_w(t: f64, w_max: f64) -> f64 {
    let k = (w_max * 0.3 / 0.4).cbrt();
    0.4 * (t - k).powi(3) + w_max
}

#[test]
fn cubic_follows_the_cubic_curve_after_a_loss() {
    let mut cc = CongestionControl::new(CongestionAlgorithm::Cubic, false, Time::ZERO, 0);
    let mut w = Window::new(100);
    w.ssthresh = 100;
    // Settle delay_min (CUBIC ignores samples within 1 s of an epoch).
    let t0 = Time(Duration::from_secs(5).as_nanos());
    let s = AckSample {
        now: t0,
        rtt: Some(RTT),
        snd_una: 0,
        snd_nxt: 0,
        srtt: Some(RTT),
        mss: 1448,
    };
    cc.pkts_acked(&mut w, &s);
    // Loss at W_max = 100: ssthresh = β·100, recovery ends at cwnd = ssthresh.
    let ssthresh = cc.ssthresh(&w);
    assert_eq!(ssthresh, 70, "β = 717/1024");
    w.cwnd = ssthresh;
    w.ssthresh = ssthresh;
    let trace = drive(&mut cc, &mut w, t0, 8.0);
    let k = (100.0f64 * 0.3 / 0.4).cbrt();
    for target in [1.0, 2.0, 3.0, k, 5.0, 6.0, 7.0] {
        let &(t, cwnd) = trace
            .iter()
            .min_by(|a, b| (a.0 - target).abs().total_cmp(&(b.0 - target).abs()))
            .unwrap();
        let lo = cubic_w(t, 100.0).min(cubic_w(t + 0.1, 100.0)) - 1.5;
        let hi = cubic_w(t, 100.0).max(cubic_w(t + 0.1, 100.0)) + 1.5;
        println!("t = {t:.2} s: cwnd {cwnd}, W(t) = {:.1}", cubic_w(t, 100.0));
        assert!(
            (lo..=hi).contains(&f64::from(cwnd)),
            "t {t}: cwnd {cwnd} not in [{lo:.1}, {hi:.1}]"
        );
    }
}

#[test]
fn reno_adds_one_segment_per_rtt() {
    let mut cc = CongestionControl::new(CongestionAlgorithm::Reno, false, Time::ZERO, 0);
    let mut w = Window::new(100);
    w.ssthresh = 100;
    assert_eq!(cc.ssthresh(&w), 50);
    w.cwnd = 50;
    w.ssthresh = 50;
    let trace = drive(&mut cc, &mut w, Time::ZERO, 2.0);
    let cwnds: Vec<u32> = trace.iter().map(|x| x.1).collect();
    assert_eq!(cwnds, (51..=70).collect::<Vec<u32>>());
}
