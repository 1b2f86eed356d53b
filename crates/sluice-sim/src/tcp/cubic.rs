//! CUBIC congestion control (RFC 9438), as Linux's `tcp_cubic.c` does it.
//!
//! After a congestion event at window `W_max` the window is cut to
//! `β·W_max` (β = 717/1024 ≈ 0.7) and then follows
//! `W(t) = C·(t − K)³ + W_max` with `C = 0.4` segments/s³ and
//! `K = ∛(W_max·(1 − β)/C)`: concave up to `W_max`, flat around it, convex
//! beyond. Linux evaluates `W` one `delay_min` ahead of now (the target the
//! window should reach by the time this ACK's effect returns) and turns the
//! gap into `cnt`, the number of ACKed segments per +1 segment; it is capped
//! at 20 (≥5% growth per RTT) while no loss has been seen, floored at 2
//! (≤1.5× per RTT), and tightened by the "TCP-friendly" Reno estimate
//! (RFC 9438 §4.3) so CUBIC is never slower than Reno would be.
//!
//! Fixed-point as in the kernel: time in 1/1024 s (`BICTCP_HZ`), jiffies of
//! 1 ms (`HZ = 1000`), `cube_rtt_scale = 410` (C·1024), `cube_factor =
//! 2^40/410` for K. Fast convergence: a flow whose `W_max` shrinks releases
//! bandwidth by remembering `W_max·(1 + β)/2`. The cube root is exact
//! integer arithmetic rather than Linux's table + one Newton step (which is
//! within 0.2%).
//!
//! HyStart (Ha & Rhee 2011, Linux default on): in slow start, once cwnd ≥ 16,
//! leave slow start (`ssthresh = cwnd`) when either a round's minimum RTT
//! over 8 samples exceeds `delay_min + clamp(delay_min/8, 4 ms, 16 ms)`
//! (delay increase), or ACKs arriving ≤ 2 ms apart form a train longer than
//! `(delay_min + ack_delay)/2` (the pipe is full). `ack_delay` is Linux's
//! TSO/GRO cushion `min(1 ms, 4·64 KiB / pacing_rate)` with the rate Linux
//! would compute (200% of cwnd·mss/srtt in slow start); the model does not
//! pace, so the threshold is halved as for `SK_PACING_NONE`. This is the
//! classic HyStart of `tcp_cubic.c`, not HyStart++ (RFC 9406), which Linux
//! does not implement.

use super::cc::{AckSample, Window};
use sluice_core::time::Time;

const BETA: u64 = 717;
const BETA_SCALE: u64 = 1024;
const CUBE_RTT_SCALE: u128 = 410;
const CUBE_FACTOR: u64 = (1u64 << 40) / 410;
/// `8·(1024 + β)/3/(1024 − β)`: Reno-equivalent ACKs per segment, × 8.
const FRIENDLY_SCALE: u64 = 8 * (BETA_SCALE + BETA) / 3 / (BETA_SCALE - BETA);
const HZ: u32 = 1000;
const HYSTART_LOW_WINDOW: u32 = 16;
const HYSTART_ACK_DELTA_US: u64 = 2000;
const HYSTART_MIN_SAMPLES: u8 = 8;
const HYSTART_DELAY_MIN_US: u32 = 4000;
const HYSTART_DELAY_MAX_US: u32 = 16000;
const GSO_MAX_SIZE: u64 = 65536;

/// CUBIC's per-connection state (`struct bictcp`).
#[derive(Clone, Debug, Default)]
pub struct Cubic {
    /// ACKed segments per +1 cwnd.
    cnt: u32,
    last_max_cwnd: u32,
    last_cwnd: u32,
    last_time: u32,
    origin_point: u32,
    /// Time to reach the origin, in 1/1024 s.
    k: u32,
    delay_min_us: u32,
    epoch_start: Option<u32>,
    ack_cnt: u32,
    tcp_cwnd: u32,
    hystart: Hystart,
}

#[derive(Clone, Debug, Default)]
struct Hystart {
    enabled: bool,
    found: bool,
    round_start_us: u64,
    end_seq: u64,
    last_ack_us: u64,
    curr_rtt_us: u32,
    sample_cnt: u8,
}

fn jiffies(t: Time) -> u32 {
    (t.as_nanos() / 1_000_000) as u32
}

fn micros(t: Time) -> u64 {
    t.as_nanos() / 1000
}

/// Floor of the cube root, exact.
fn cube_root(a: u64) -> u32 {
    let mut x = (a as f64).cbrt() as u64;
    let cube = |x: u64| u128::from(x).pow(3);
    while cube(x + 1) <= u128::from(a) {
        x += 1;
    }
    while x > 0 && cube(x) > u128::from(a) {
        x -= 1;
    }
    x as u32
}

impl Cubic {
    /// Fresh state; HyStart's first round ends at `snd_nxt`.
    pub fn new(hystart: bool, now: Time, snd_nxt: u64) -> Self {
        let mut c = Cubic::default();
        c.hystart.enabled = hystart;
        c.hystart_reset(now, snd_nxt);
        c
    }

    /// The window the last loss was taken at (`last_max_cwnd`).
    pub fn w_max(&self) -> u32 {
        self.last_max_cwnd
    }

    /// K in seconds (for tests and reports).
    pub fn k_secs(&self) -> f64 {
        f64::from(self.k) / 1024.0
    }

    /// True once HyStart has ended slow start.
    pub fn hystart_found(&self) -> bool {
        self.hystart.found
    }

    fn reset(&mut self) {
        let hystart = std::mem::take(&mut self.hystart);
        *self = Cubic::default();
        self.hystart.enabled = hystart.enabled;
    }

    fn hystart_reset(&mut self, now: Time, snd_nxt: u64) {
        let h = &mut self.hystart;
        h.round_start_us = micros(now);
        h.last_ack_us = h.round_start_us;
        h.end_seq = snd_nxt;
        h.curr_rtt_us = u32::MAX;
        h.sample_cnt = 0;
    }

    /// `cubictcp_cong_avoid` (the caller checked cwnd-limitedness).
    pub fn cong_avoid(&mut self, w: &mut Window, acked: u32, now: Time) {
        let mut acked = acked;
        if w.in_slow_start() {
            acked = w.slow_start(acked);
            if acked == 0 {
                return;
            }
        }
        self.update(w.cwnd, acked, now);
        w.cong_avoid_ai(self.cnt, acked);
    }

    /// `bictcp_update`: recompute `cnt` from the cubic function.
    fn update(&mut self, cwnd: u32, acked: u32, now: Time) {
        let now_j = jiffies(now);
        self.ack_cnt = self.ack_cnt.saturating_add(acked);
        if self.last_cwnd == cwnd && (now_j.wrapping_sub(self.last_time) as i32) <= (HZ / 32) as i32
        {
            return;
        }
        if !(self.epoch_start.is_some() && now_j == self.last_time) {
            self.last_cwnd = cwnd;
            self.last_time = now_j;
            let epoch = self.start_epoch_if_needed(cwnd, acked, now_j);
            self.cnt = self.cubic_cnt(cwnd, now_j, epoch);
        }
        self.tcp_friendliness(cwnd);
        self.cnt = self.cnt.max(2);
    }

    fn start_epoch_if_needed(&mut self, cwnd: u32, acked: u32, now_j: u32) -> u32 {
        if let Some(e) = self.epoch_start {
            return e;
        }
        self.epoch_start = Some(now_j);
        self.ack_cnt = acked;
        self.tcp_cwnd = cwnd;
        if self.last_max_cwnd <= cwnd {
            self.k = 0;
            self.origin_point = cwnd;
        } else {
            let gap = u64::from(self.last_max_cwnd - cwnd);
            self.k = cube_root(CUBE_FACTOR.saturating_mul(gap));
            self.origin_point = self.last_max_cwnd;
        }
        now_j
    }

    /// The cubic target one `delay_min` ahead, as ACKs per +1 segment.
    fn cubic_cnt(&self, cwnd: u32, now_j: u32, epoch: u32) -> u32 {
        let elapsed = i64::from(now_j.wrapping_sub(epoch) as i32).max(0) as u64;
        let ahead = u64::from(self.delay_min_us).div_ceil(1000);
        let t = ((elapsed + ahead) << 10) / u64::from(HZ);
        let k = u64::from(self.k);
        let offs = u128::from(t.abs_diff(k));
        let delta = ((CUBE_RTT_SCALE * offs * offs * offs) >> 40).min(u128::from(u32::MAX)) as u32;
        let target = if t < k {
            self.origin_point.saturating_sub(delta)
        } else {
            self.origin_point.saturating_add(delta)
        };
        let mut cnt = if target > cwnd {
            cwnd / (target - cwnd)
        } else {
            cwnd.saturating_mul(100)
        };
        if self.last_max_cwnd == 0 {
            cnt = cnt.min(20);
        }
        cnt
    }

    /// RFC 9438 §4.3: never grow slower than Reno would.
    fn tcp_friendliness(&mut self, cwnd: u32) {
        let delta = ((u64::from(cwnd) * FRIENDLY_SCALE) >> 3).max(1) as u32;
        if self.ack_cnt > delta {
            let n = (self.ack_cnt - 1) / delta;
            self.ack_cnt -= n * delta;
            self.tcp_cwnd = self.tcp_cwnd.saturating_add(n);
        }
        if self.tcp_cwnd > cwnd {
            let max_cnt = cwnd / (self.tcp_cwnd - cwnd);
            self.cnt = self.cnt.min(max_cnt);
        }
    }

    /// `cubictcp_recalc_ssthresh`: remember `W_max`, return `β·cwnd`.
    pub fn recalc_ssthresh(&mut self, w: &Window) -> u32 {
        self.epoch_start = None;
        let cwnd = u64::from(w.cwnd);
        self.last_max_cwnd = if w.cwnd < self.last_max_cwnd {
            (cwnd * (BETA_SCALE + BETA) / (2 * BETA_SCALE)) as u32
        } else {
            w.cwnd
        };
        ((cwnd * BETA / BETA_SCALE) as u32).max(2)
    }

    /// `cubictcp_state(TCP_CA_Loss)`.
    pub fn on_loss_state(&mut self, now: Time, snd_nxt: u64) {
        self.reset();
        self.hystart_reset(now, snd_nxt);
    }

    /// `cubictcp_cwnd_event(CA_EVENT_TX_START)`: shift the epoch by the idle
    /// time so an application pause does not count as growth time.
    pub fn on_tx_start(&mut self, now: Time, last_send: Time) {
        let now_j = jiffies(now);
        let delta = now_j.wrapping_sub(jiffies(last_send)) as i32;
        if let (Some(e), true) = (self.epoch_start, delta > 0) {
            let shifted = e.wrapping_add(delta as u32);
            let after_now = (shifted.wrapping_sub(now_j) as i32) > 0;
            self.epoch_start = Some(if after_now { now_j } else { shifted });
        }
    }

    /// `cubictcp_acked`: track `delay_min`, run HyStart in slow start.
    pub fn acked(&mut self, w: &mut Window, s: &AckSample) {
        let Some(rtt) = s.rtt else { return };
        if let Some(e) = self.epoch_start {
            if (jiffies(s.now).wrapping_sub(e) as i32) < HZ as i32 {
                return; // samples right after a reduction are not trusted
            }
        }
        let delay = ((rtt.as_nanos() / 1000).min(u64::from(u32::MAX)) as u32).max(1);
        if self.delay_min_us == 0 || self.delay_min_us > delay {
            self.delay_min_us = delay;
        }
        if !self.hystart.found && w.in_slow_start() && self.hystart.enabled {
            self.hystart_update(w, delay, s);
        }
    }

    fn hystart_update(&mut self, w: &mut Window, delay: u32, s: &AckSample) {
        if s.snd_una > self.hystart.end_seq {
            self.hystart_reset(s.now, s.snd_nxt);
        }
        if w.cwnd < HYSTART_LOW_WINDOW {
            return;
        }
        if self.ack_train_found(w, s) || self.delay_increase_found(delay) {
            self.hystart.found = true;
            w.ssthresh = w.cwnd;
        }
    }

    fn ack_train_found(&mut self, w: &Window, s: &AckSample) -> bool {
        let now = micros(s.now);
        let h = &mut self.hystart;
        if now.saturating_sub(h.last_ack_us) > HYSTART_ACK_DELTA_US {
            return false;
        }
        h.last_ack_us = now;
        let threshold = (u64::from(self.delay_min_us) + ack_delay_us(w, s)) >> 1;
        now.saturating_sub(h.round_start_us) > threshold
    }

    fn delay_increase_found(&mut self, delay: u32) -> bool {
        let h = &mut self.hystart;
        h.curr_rtt_us = h.curr_rtt_us.min(delay);
        if h.sample_cnt < HYSTART_MIN_SAMPLES {
            h.sample_cnt += 1;
            return false;
        }
        let thresh = (self.delay_min_us >> 3).clamp(HYSTART_DELAY_MIN_US, HYSTART_DELAY_MAX_US);
        h.curr_rtt_us > self.delay_min_us.saturating_add(thresh)
    }
}

/// `hystart_ack_delay`: TSO/GRO cushion from Linux's pacing-rate estimate.
fn ack_delay_us(w: &Window, s: &AckSample) -> u64 {
    let Some(srtt) = s.srtt else { return 0 };
    let srtt_us = (srtt.as_nanos() / 1000).max(1);
    // Slow start: 200% of cwnd·mss/srtt, in bytes per second.
    let rate = 2 * u64::from(w.cwnd) * u64::from(s.mss) * 1_000_000 / srtt_us;
    if rate == 0 {
        return 0;
    }
    (GSO_MAX_SIZE * 4 * 1_000_000 / rate).min(1000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::time::Duration;

    #[test]
    fn cube_root_is_exact_floor() {
        for a in [0u64, 1, 7, 8, 26, 27, 1_000_000, u64::MAX / 3] {
            let x = u128::from(cube_root(a));
            assert!(x.pow(3) <= u128::from(a) && (x + 1).pow(3) > u128::from(a));
        }
    }

    #[test]
    fn beta_and_k() {
        let mut c = Cubic::new(false, Time::ZERO, 0);
        let w = Window::new(100);
        assert_eq!(c.recalc_ssthresh(&w), 70); // 100·717/1024
        assert_eq!(c.w_max(), 100);
        let mut w = Window::new(70);
        w.ssthresh = 70;
        c.cong_avoid(&mut w, 1, Time(Duration::from_secs(10).as_nanos()));
        // K = ∛(30/0.4) ≈ 4.22 s
        assert!(
            (c.k_secs() - (30.0f64 / 0.4).cbrt()).abs() < 0.01,
            "{}",
            c.k_secs()
        );
    }

    #[test]
    fn fast_convergence_lowers_w_max() {
        let mut c = Cubic::new(false, Time::ZERO, 0);
        c.recalc_ssthresh(&Window::new(100));
        c.recalc_ssthresh(&Window::new(80));
        assert_eq!(c.w_max(), 80 * 1741 / 2048);
    }
}
