//! BBR congestion control, version 1 (Linux `net/ipv4/tcp_bbr.c`), the
//! default `net.ipv4.tcp_congestion_control` of many distributions.
//!
//! BBR builds a model of the path from two measurements — the bottleneck
//! bandwidth, the windowed maximum of the delivery-rate samples
//! ([`super::rate`]) over the last ten round trips, and the round-trip
//! propagation time, the windowed minimum RTT over ten seconds — and sends
//! at the rate the model says, pacing every segment, with a window of about
//! twice the bandwidth-delay product. It moves between four modes:
//!
//! - **STARTUP**: pacing and window gain 2/ln 2 ≈ 2.89, doubling the rate
//!   each round, until three rounds in a row raise the bandwidth by less
//!   than 25 % ("full pipe").
//! - **DRAIN**: pacing gain ln 2/2 until the data in flight is down to one
//!   BDP, emptying the queue STARTUP built.
//! - **PROBE_BW**: a cycle of eight phases of one min-RTT each, pacing at
//!   5/4 of the bandwidth (to find more), 3/4 (to drain what that queued),
//!   then six at 1; the cycle starts at a random phase other than 3/4.
//! - **PROBE_RTT**: when the min-RTT is ten seconds old, four packets in
//!   flight for at least 200 ms and a round, to see the path empty.
//!
//! In loss recovery the window follows packet conservation for the first
//! round and is restored when recovery ends; a long-term sampler detects a
//! token-bucket policer (steady loss at a steady rate) and then paces at
//! the policed rate for up to 48 rounds. Units are the kernel's: bandwidth
//! in packets per µs scaled by 2²⁴, gains scaled by 2⁸.
//!
//! Differences from the kernel: the ACK-maybe-delayed flag of a sample is
//! not modelled (a delayed ACK's RTT can refresh an expired min-RTT
//! filter); the random phase comes from a generator seeded by the
//! connection, so runs repeat; TSO is absent, so the quantization budget is
//! computed from the pacing rate as `bbr_tso_segs_goal` does but segments
//! leave one at a time.

use super::cc::Window;
use super::conn::CaState;
use super::rate::{RateSample, RateState};
use super::tso::{BBR_MIN_TSO_RATE, GSO_MAX_BYTES, PACING_SHIFT};
use sluice_core::time::{Duration, Time};

const BW_SCALE: u32 = 24;
const BW_UNIT: u64 = 1 << BW_SCALE;
const BBR_SCALE: u32 = 8;
const BBR_UNIT: u32 = 1 << BBR_SCALE;

const HIGH_GAIN: u32 = BBR_UNIT * 2885 / 1000 + 1;
const DRAIN_GAIN: u32 = BBR_UNIT * 1000 / 2885;
const CWND_GAIN: u32 = BBR_UNIT * 2;
const PACING_GAIN: [u32; CYCLE_LEN] = [
    BBR_UNIT * 5 / 4,
    BBR_UNIT * 3 / 4,
    BBR_UNIT,
    BBR_UNIT,
    BBR_UNIT,
    BBR_UNIT,
    BBR_UNIT,
    BBR_UNIT,
];
const CYCLE_LEN: usize = 8;
const CYCLE_RAND: u32 = 7;
/// Rounds the bandwidth max-filter spans.
const BW_RTTS: u32 = CYCLE_LEN as u32 + 2;
const MIN_RTT_WIN_MS: u32 = 10_000;
const PROBE_RTT_MODE_MS: u32 = 200;
const CWND_MIN_TARGET: u32 = 4;
const FULL_BW_THRESH: u32 = BBR_UNIT * 5 / 4;
const FULL_BW_CNT: u32 = 3;
const PACING_MARGIN_PERCENT: u64 = 1;
const INIT_CWND: u32 = 10;
// Long-term (policer) sampling.
const LT_INTVL_MIN_RTTS: u32 = 4;
const LT_LOSS_THRESH: u64 = 50;
const LT_BW_RATIO: u64 = BBR_UNIT as u64 / 8;
const LT_BW_DIFF: u64 = 4000 / 8; // bytes/s
const LT_BW_MAX_RTTS: u32 = 48;
// ACK aggregation.
const EXTRA_ACKED_GAIN: u32 = BBR_UNIT;
const EXTRA_ACKED_WIN_RTTS: u32 = 5;
const ACK_EPOCH_ACKED_RESET_THRESH: u32 = 1 << 20;
const EXTRA_ACKED_MAX_US: u64 = 100_000;

/// BBR's modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Ramp up to fill the pipe.
    Startup,
    /// Drain the queue STARTUP made.
    Drain,
    /// Cycle the pacing gain around the bandwidth.
    ProbeBw,
    /// Cut in flight to refresh the min-RTT.
    ProbeRtt,
}

/// What BBR reads of the connection (and the two fields it writes).
pub struct Cx<'a> {
    /// Now.
    pub now: Time,
    /// Payload bytes of a full segment (`mss_cache`).
    pub mss: u32,
    /// The delivery-rate state (BBR marks app-limited in PROBE_RTT).
    pub rate: &'a mut RateState,
    /// Packets in flight.
    pub in_flight: u32,
    /// The connection's min-RTT (`tcp_min_rtt`).
    pub min_rtt: Option<Duration>,
    /// Smoothed RTT.
    pub srtt: Option<Duration>,
    /// The loss-recovery state.
    pub ca_state: CaState,
    /// Segments ever marked lost (`tp->lost`).
    pub lost: u64,
    /// When the next segment may leave (`tcp_wstamp_ns`).
    pub wstamp: Time,
}

/// Kathleen Nichols' windowed max filter (`lib/win_minmax.c`): the best
/// three samples of a window, so the max is known as older ones expire.
#[derive(Clone, Copy, Debug, Default)]
struct MaxFilter {
    s: [(u32, u32); 3], // (time, value)
}

impl MaxFilter {
    fn get(&self) -> u32 {
        self.s[0].1
    }

    fn reset(&mut self, t: u32, v: u32) -> u32 {
        self.s = [(t, v); 3];
        v
    }

    fn running_max(&mut self, win: u32, t: u32, v: u32) -> u32 {
        if v >= self.s[0].1 || t.wrapping_sub(self.s[0].0) > win {
            return self.reset(t, v);
        }
        if v >= self.s[1].1 {
            self.s[2] = (t, v);
            self.s[1] = (t, v);
        } else if v >= self.s[2].1 {
            self.s[2] = (t, v);
        }
        self.subwin_update(win, (t, v))
    }

    fn subwin_update(&mut self, win: u32, val: (u32, u32)) -> u32 {
        let dt = val.0.wrapping_sub(self.s[0].0);
        if dt > win {
            self.s = [self.s[1], self.s[2], val];
            if val.0.wrapping_sub(self.s[0].0) > win {
                self.s = [self.s[1], self.s[2], val];
            }
        } else if self.s[1].0 == self.s[0].0 && dt > win / 4 {
            self.s[1] = val;
            self.s[2] = val;
        } else if self.s[2].0 == self.s[1].0 && dt > win / 2 {
            self.s[2] = val;
        }
        self.s[0].1
    }
}

/// One connection's BBR state.
#[derive(Clone, Debug)]
pub struct Bbr {
    mode: Mode,
    min_rtt_us: u32,
    min_rtt_stamp: u32,
    probe_rtt_done_stamp: u32,
    bw: MaxFilter,
    rtt_cnt: u32,
    next_rtt_delivered: u64,
    cycle_time: Time,
    prev_ca_state: CaState,
    packet_conservation: bool,
    round_start: bool,
    idle_restart: bool,
    probe_rtt_round_done: bool,
    lt_is_sampling: bool,
    lt_rtt_cnt: u32,
    lt_use_bw: bool,
    lt_bw: u32,
    lt_last_delivered: u64,
    lt_last_stamp: u32,
    lt_last_lost: u64,
    pacing_gain: u32,
    cwnd_gain: u32,
    full_bw_reached: bool,
    full_bw_cnt: u32,
    cycle_idx: usize,
    has_seen_rtt: bool,
    prior_cwnd: u32,
    full_bw: u32,
    ack_epoch_time: Time,
    extra_acked: [u32; 2],
    ack_epoch_acked: u32,
    extra_acked_win_rtts: u32,
    extra_acked_win_idx: usize,
    /// `sk_pacing_rate`, bytes/s.
    pacing_rate: u64,
    rng: u64,
}

fn jiffies(t: Time) -> u32 {
    (t.0 / 1_000_000) as u32
}

fn micros(d: Duration) -> u64 {
    d.0 / 1000
}

/// After `b` in 32-bit serial arithmetic (`after(a, b)`).
fn after(a: u32, b: u32) -> bool {
    (b.wrapping_sub(a) as i32) < 0
}

impl Bbr {
    /// `bbr_init`, at the connection's establishment.
    pub fn new(w: &mut Window, cx: &mut Cx, seed: u64) -> Self {
        w.ssthresh = super::cc::INFINITE_SSTHRESH;
        let mut b = Bbr {
            mode: Mode::Startup,
            min_rtt_us: cx.min_rtt.map_or(u32::MAX, |r| micros(r) as u32),
            min_rtt_stamp: jiffies(cx.now),
            probe_rtt_done_stamp: 0,
            bw: MaxFilter::default(),
            rtt_cnt: 0,
            next_rtt_delivered: cx.rate.delivered,
            cycle_time: Time::ZERO,
            prev_ca_state: CaState::Open,
            packet_conservation: false,
            round_start: false,
            idle_restart: false,
            probe_rtt_round_done: false,
            lt_is_sampling: false,
            lt_rtt_cnt: 0,
            lt_use_bw: false,
            lt_bw: 0,
            lt_last_delivered: 0,
            lt_last_stamp: 0,
            lt_last_lost: 0,
            pacing_gain: HIGH_GAIN,
            cwnd_gain: HIGH_GAIN,
            full_bw_reached: false,
            full_bw_cnt: 0,
            cycle_idx: 0,
            has_seen_rtt: false,
            prior_cwnd: 0,
            full_bw: 0,
            ack_epoch_time: cx.now,
            extra_acked: [0; 2],
            ack_epoch_acked: 0,
            extra_acked_win_rtts: 0,
            extra_acked_win_idx: 0,
            pacing_rate: 0,
            rng: seed | 1,
        };
        b.init_pacing_rate_from_rtt(w, cx);
        b.reset_lt_bw_sampling(cx);
        b
    }

    /// The mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The pacing rate, bytes/s.
    pub fn pacing_rate(&self) -> u64 {
        self.pacing_rate
    }

    /// The bandwidth estimate, bits/s (for reports).
    pub fn bw_bps(&self, mss: u32) -> u64 {
        (u64::from(self.bw()) * u64::from(mss) * 8 * 1_000_000) >> BW_SCALE
    }

    fn random_below(&mut self, n: u32) -> u32 {
        // xorshift64*: the kernel draws from its random pool; a seeded
        // generator keeps runs repeatable.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        let r = self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (((r >> 32) * u64::from(n)) >> 32) as u32
    }

    fn max_bw(&self) -> u32 {
        self.bw.get()
    }

    fn bw(&self) -> u32 {
        if self.lt_use_bw {
            self.lt_bw
        } else {
            self.max_bw()
        }
    }

    fn extra_acked(&self) -> u32 {
        self.extra_acked[0].max(self.extra_acked[1])
    }

    /// `bbr_rate_bytes_per_sec`.
    fn rate_bytes_per_sec(mss: u32, rate: u64, gain: u32) -> u64 {
        let mut rate = rate * u64::from(mss);
        rate = (rate * u64::from(gain)) >> BBR_SCALE;
        rate *= 1_000_000 / 100 * (100 - PACING_MARGIN_PERCENT);
        rate >> BW_SCALE
    }

    fn init_pacing_rate_from_rtt(&mut self, w: &Window, cx: &Cx) {
        let rtt_us = match cx.srtt {
            Some(s) => {
                self.has_seen_rtt = true;
                micros(s).max(1)
            }
            None => 1000,
        };
        let bw = u64::from(w.cwnd) * BW_UNIT / rtt_us;
        self.pacing_rate = Self::rate_bytes_per_sec(cx.mss, bw, HIGH_GAIN);
    }

    fn set_pacing_rate(&mut self, w: &Window, cx: &Cx, bw: u32, gain: u32) {
        let rate = Self::rate_bytes_per_sec(cx.mss, u64::from(bw), gain);
        if !self.has_seen_rtt && cx.srtt.is_some() {
            self.init_pacing_rate_from_rtt(w, cx);
        }
        if self.full_bw_reached || rate > self.pacing_rate {
            self.pacing_rate = rate;
        }
    }

    /// `bbr_min_tso_segs`: one segment a packet below 1.2 Mbit/s, else two.
    pub fn min_tso_segs(&self) -> u32 {
        if self.pacing_rate < BBR_MIN_TSO_RATE / 8 {
            1
        } else {
            2
        }
    }

    fn tso_segs_goal(&self, mss: u32) -> u32 {
        let bytes = (self.pacing_rate >> PACING_SHIFT).min(GSO_MAX_BYTES);
        ((bytes / u64::from(mss.max(1))) as u32)
            .max(self.min_tso_segs())
            .min(0x7F)
    }

    fn save_cwnd(&mut self, w: &Window) {
        if self.prev_ca_state < CaState::Recovery && self.mode != Mode::ProbeRtt {
            self.prior_cwnd = w.cwnd;
        } else {
            self.prior_cwnd = self.prior_cwnd.max(w.cwnd);
        }
    }

    /// `cwnd_event(CA_EVENT_TX_START)`: sending resumes after idle.
    pub fn on_tx_start(&mut self, w: &mut Window, cx: &mut Cx) {
        if cx.rate.app_limited == 0 {
            return;
        }
        self.idle_restart = true;
        self.ack_epoch_time = cx.now;
        self.ack_epoch_acked = 0;
        match self.mode {
            Mode::ProbeBw => self.set_pacing_rate(w, cx, self.bw(), BBR_UNIT),
            Mode::ProbeRtt => self.check_probe_rtt_done(w, cx),
            _ => {}
        }
    }

    fn bdp(&self, bw: u32, gain: u32) -> u32 {
        if self.min_rtt_us == u32::MAX {
            return INIT_CWND;
        }
        let w = u64::from(bw) * u64::from(self.min_rtt_us);
        (((w * u64::from(gain)) >> BBR_SCALE) + BW_UNIT - 1)
            .checked_div(BW_UNIT)
            .unwrap_or(0)
            .min(u64::from(u32::MAX)) as u32
    }

    fn quantization_budget(&self, mss: u32, cwnd: u32) -> u32 {
        let mut cwnd = cwnd.saturating_add(3 * self.tso_segs_goal(mss));
        cwnd = (cwnd.saturating_add(1)) & !1;
        if self.mode == Mode::ProbeBw && self.cycle_idx == 0 {
            cwnd = cwnd.saturating_add(2);
        }
        cwnd
    }

    fn inflight(&self, mss: u32, bw: u32, gain: u32) -> u32 {
        self.quantization_budget(mss, self.bdp(bw, gain))
    }

    /// `bbr_packets_in_net_at_edt`: what will be in flight when the next
    /// segment leaves.
    fn packets_in_net_at_edt(&self, cx: &Cx, inflight_now: u32) -> u32 {
        let edt = cx.wstamp.max(cx.now);
        let interval_us = micros(edt.saturating_since(cx.now));
        let interval_delivered = ((u64::from(self.bw()) * interval_us) >> BW_SCALE) as u32;
        let mut at_edt = inflight_now;
        if self.pacing_gain > BBR_UNIT {
            at_edt += self.tso_segs_goal(cx.mss);
        }
        at_edt.saturating_sub(interval_delivered)
    }

    fn ack_aggregation_cwnd(&self) -> u32 {
        if !self.full_bw_reached {
            return 0;
        }
        let max_aggr = (u64::from(self.bw()) * EXTRA_ACKED_MAX_US / BW_UNIT) as u32;
        ((EXTRA_ACKED_GAIN * self.extra_acked()) >> BBR_SCALE).min(max_aggr)
    }

    /// `bbr_set_cwnd_to_recover_or_restore`.
    fn recover_or_restore(
        &mut self,
        w: &Window,
        rs: &RateSample,
        cx: &Cx,
        acked: u32,
    ) -> (u32, bool) {
        let (prev, state) = (self.prev_ca_state, cx.ca_state);
        let mut cwnd = w.cwnd;
        if rs.losses > 0 {
            cwnd = cwnd.saturating_sub(rs.losses).max(1);
        }
        if state == CaState::Recovery && prev != CaState::Recovery {
            self.packet_conservation = true;
            self.next_rtt_delivered = cx.rate.delivered;
            cwnd = cx.in_flight + acked;
        } else if prev >= CaState::Recovery && state < CaState::Recovery {
            cwnd = cwnd.max(self.prior_cwnd);
            self.packet_conservation = false;
        }
        self.prev_ca_state = state;
        if self.packet_conservation {
            return (cwnd.max(cx.in_flight + acked), true);
        }
        (cwnd, false)
    }

    fn set_cwnd(&mut self, w: &mut Window, rs: &RateSample, cx: &Cx, bw: u32, gain: u32) {
        let acked = rs.acked_sacked;
        let mut cwnd = w.cwnd;
        if acked > 0 {
            let (c, conserving) = self.recover_or_restore(w, rs, cx, acked);
            cwnd = c;
            if !conserving {
                let mut target = self.bdp(bw, gain);
                target += self.ack_aggregation_cwnd();
                target = self.quantization_budget(cx.mss, target);
                if self.full_bw_reached {
                    cwnd = (cwnd + acked).min(target);
                } else if cwnd < target || cx.rate.delivered < u64::from(INIT_CWND) {
                    cwnd += acked;
                }
                cwnd = cwnd.max(CWND_MIN_TARGET);
            }
        }
        w.cwnd = cwnd.min(w.clamp);
        if self.mode == Mode::ProbeRtt {
            w.cwnd = w.cwnd.min(CWND_MIN_TARGET);
        }
    }

    fn is_next_cycle_phase(&self, rs: &RateSample, cx: &Cx) -> bool {
        let elapsed = micros(cx.rate.delivered_time.saturating_since(self.cycle_time));
        let is_full_length = elapsed > u64::from(self.min_rtt_us);
        if self.pacing_gain == BBR_UNIT {
            return is_full_length;
        }
        let inflight = self.packets_in_net_at_edt(cx, rs.prior_in_flight);
        let bw = self.max_bw();
        if self.pacing_gain > BBR_UNIT {
            return is_full_length
                && (rs.losses > 0 || inflight >= self.inflight(cx.mss, bw, self.pacing_gain));
        }
        is_full_length || inflight <= self.inflight(cx.mss, bw, BBR_UNIT)
    }

    fn advance_cycle_phase(&mut self, cx: &Cx) {
        self.cycle_idx = (self.cycle_idx + 1) & (CYCLE_LEN - 1);
        self.cycle_time = cx.rate.delivered_time;
    }

    fn reset_probe_bw_mode(&mut self, cx: &Cx) {
        self.mode = Mode::ProbeBw;
        self.cycle_idx = CYCLE_LEN - 1 - self.random_below(CYCLE_RAND) as usize;
        self.advance_cycle_phase(cx);
    }

    fn reset_mode(&mut self, cx: &Cx) {
        if self.full_bw_reached {
            self.reset_probe_bw_mode(cx);
        } else {
            self.mode = Mode::Startup;
        }
    }

    fn reset_lt_bw_sampling_interval(&mut self, cx: &Cx) {
        self.lt_last_stamp = jiffies(cx.rate.delivered_time);
        self.lt_last_delivered = cx.rate.delivered;
        self.lt_last_lost = cx.lost;
        self.lt_rtt_cnt = 0;
    }

    fn reset_lt_bw_sampling(&mut self, cx: &Cx) {
        self.lt_bw = 0;
        self.lt_use_bw = false;
        self.lt_is_sampling = false;
        self.reset_lt_bw_sampling_interval(cx);
    }

    fn lt_bw_interval_done(&mut self, cx: &Cx, bw: u32) {
        if self.lt_bw > 0 {
            let diff = u64::from(bw.abs_diff(self.lt_bw));
            let close = diff * u64::from(BBR_UNIT) <= LT_BW_RATIO * u64::from(self.lt_bw)
                || Self::rate_bytes_per_sec(cx.mss, diff, BBR_UNIT) <= LT_BW_DIFF;
            if close {
                // A policer: pace at the average of the two intervals.
                self.lt_bw = ((u64::from(bw) + u64::from(self.lt_bw)) >> 1) as u32;
                self.lt_use_bw = true;
                self.pacing_gain = BBR_UNIT;
                self.lt_rtt_cnt = 0;
                return;
            }
        }
        self.lt_bw = bw;
        self.reset_lt_bw_sampling_interval(cx);
    }

    /// `bbr_lt_bw_sampling`: a long-term rate under steady loss is a policer's.
    fn lt_bw_sampling(&mut self, rs: &RateSample, cx: &Cx) {
        if self.lt_use_bw {
            if self.mode == Mode::ProbeBw && self.round_start {
                self.lt_rtt_cnt += 1;
                if self.lt_rtt_cnt >= LT_BW_MAX_RTTS {
                    self.reset_lt_bw_sampling(cx);
                    self.reset_probe_bw_mode(cx);
                }
            }
            return;
        }
        if !self.lt_is_sampling {
            if rs.losses == 0 {
                return;
            }
            self.reset_lt_bw_sampling_interval(cx);
            self.lt_is_sampling = true;
        }
        if rs.is_app_limited {
            self.reset_lt_bw_sampling(cx);
            return;
        }
        if self.round_start {
            self.lt_rtt_cnt += 1;
        }
        if self.lt_rtt_cnt < LT_INTVL_MIN_RTTS {
            return;
        }
        if self.lt_rtt_cnt > 4 * LT_INTVL_MIN_RTTS {
            self.reset_lt_bw_sampling(cx);
            return;
        }
        if rs.losses == 0 {
            return;
        }
        let lost = cx.lost - self.lt_last_lost;
        let delivered = cx.rate.delivered - self.lt_last_delivered;
        if delivered == 0 || (lost << BBR_SCALE) < LT_LOSS_THRESH * delivered {
            return;
        }
        let t = jiffies(cx.rate.delivered_time).wrapping_sub(self.lt_last_stamp) as i32;
        if t < 1 {
            return;
        }
        if t as u32 >= u32::MAX / 1000 {
            self.reset_lt_bw_sampling(cx);
            return;
        }
        let bw = delivered * BW_UNIT / (t as u64 * 1000);
        self.lt_bw_interval_done(cx, bw.min(u64::from(u32::MAX)) as u32);
    }

    fn update_bw(&mut self, rs: &RateSample, cx: &Cx) {
        self.round_start = false;
        let (Some(delivered), Some(interval)) = (rs.delivered, rs.interval) else {
            return;
        };
        let interval_us = micros(interval);
        if interval_us == 0 {
            return;
        }
        if rs.prior_delivered >= self.next_rtt_delivered {
            self.next_rtt_delivered = cx.rate.delivered;
            self.rtt_cnt += 1;
            self.round_start = true;
            self.packet_conservation = false;
        }
        self.lt_bw_sampling(rs, cx);
        let bw = (delivered * BW_UNIT / interval_us).min(u64::from(u32::MAX)) as u32;
        if !rs.is_app_limited || bw >= self.max_bw() {
            self.bw.running_max(BW_RTTS, self.rtt_cnt, bw);
        }
    }

    fn update_ack_aggregation(&mut self, w: &Window, rs: &RateSample, cx: &Cx) {
        if rs.acked_sacked == 0 || rs.delivered.is_none() || rs.interval.is_none() {
            return;
        }
        if self.round_start {
            self.extra_acked_win_rtts = (self.extra_acked_win_rtts + 1).min(0x1F);
            if self.extra_acked_win_rtts >= EXTRA_ACKED_WIN_RTTS {
                self.extra_acked_win_rtts = 0;
                self.extra_acked_win_idx ^= 1;
                self.extra_acked[self.extra_acked_win_idx] = 0;
            }
        }
        let epoch_us = micros(cx.rate.delivered_time.saturating_since(self.ack_epoch_time));
        let mut expected = (u64::from(self.bw()) * epoch_us / BW_UNIT) as u32;
        if self.ack_epoch_acked <= expected
            || self.ack_epoch_acked + rs.acked_sacked >= ACK_EPOCH_ACKED_RESET_THRESH
        {
            self.ack_epoch_acked = 0;
            self.ack_epoch_time = cx.rate.delivered_time;
            expected = 0;
        }
        self.ack_epoch_acked = (self.ack_epoch_acked + rs.acked_sacked).min(0xFFFFF);
        let extra = (self.ack_epoch_acked - expected).min(w.cwnd);
        let slot = &mut self.extra_acked[self.extra_acked_win_idx];
        *slot = (*slot).max(extra);
    }

    fn check_full_bw_reached(&mut self, rs: &RateSample) {
        if self.full_bw_reached || !self.round_start || rs.is_app_limited {
            return;
        }
        let thresh = (u64::from(self.full_bw) * u64::from(FULL_BW_THRESH)) >> BBR_SCALE;
        if u64::from(self.max_bw()) >= thresh {
            self.full_bw = self.max_bw();
            self.full_bw_cnt = 0;
            return;
        }
        self.full_bw_cnt += 1;
        self.full_bw_reached = self.full_bw_cnt >= FULL_BW_CNT;
    }

    fn check_drain(&mut self, w: &mut Window, cx: &Cx) {
        if self.mode == Mode::Startup && self.full_bw_reached {
            self.mode = Mode::Drain;
            w.ssthresh = self.inflight(cx.mss, self.max_bw(), BBR_UNIT);
        }
        if self.mode == Mode::Drain
            && self.packets_in_net_at_edt(cx, cx.in_flight)
                <= self.inflight(cx.mss, self.max_bw(), BBR_UNIT)
        {
            self.reset_probe_bw_mode(cx);
        }
    }

    fn check_probe_rtt_done(&mut self, w: &mut Window, cx: &Cx) {
        if self.probe_rtt_done_stamp == 0 || !after(jiffies(cx.now), self.probe_rtt_done_stamp) {
            return;
        }
        self.min_rtt_stamp = jiffies(cx.now);
        w.cwnd = w.cwnd.max(self.prior_cwnd);
        self.reset_mode(cx);
    }

    fn update_min_rtt(&mut self, w: &mut Window, rs: &RateSample, cx: &mut Cx) {
        let now = jiffies(cx.now);
        let expired = after(now, self.min_rtt_stamp.wrapping_add(MIN_RTT_WIN_MS));
        if let Some(rtt) = rs.rtt {
            let us = micros(rtt).min(u64::from(u32::MAX - 1)) as u32;
            if us < self.min_rtt_us || expired {
                self.min_rtt_us = us;
                self.min_rtt_stamp = now;
            }
        }
        if expired && !self.idle_restart && self.mode != Mode::ProbeRtt {
            self.mode = Mode::ProbeRtt;
            self.save_cwnd(w);
            self.probe_rtt_done_stamp = 0;
        }
        if self.mode == Mode::ProbeRtt {
            cx.rate.app_limited = (cx.rate.delivered + u64::from(cx.in_flight)).max(1);
            if self.probe_rtt_done_stamp == 0 && cx.in_flight <= CWND_MIN_TARGET {
                self.probe_rtt_done_stamp = now.wrapping_add(PROBE_RTT_MODE_MS).max(1);
                self.probe_rtt_round_done = false;
                self.next_rtt_delivered = cx.rate.delivered;
            } else if self.probe_rtt_done_stamp != 0 {
                if self.round_start {
                    self.probe_rtt_round_done = true;
                }
                if self.probe_rtt_round_done {
                    self.check_probe_rtt_done(w, cx);
                }
            }
        }
        if rs.delivered.is_some_and(|d| d > 0) {
            self.idle_restart = false;
        }
    }

    fn update_gains(&mut self) {
        (self.pacing_gain, self.cwnd_gain) = match self.mode {
            Mode::Startup => (HIGH_GAIN, HIGH_GAIN),
            Mode::Drain => (DRAIN_GAIN, HIGH_GAIN),
            Mode::ProbeBw if self.lt_use_bw => (BBR_UNIT, CWND_GAIN),
            Mode::ProbeBw => (PACING_GAIN[self.cycle_idx], CWND_GAIN),
            Mode::ProbeRtt => (BBR_UNIT, BBR_UNIT),
        };
    }

    /// `bbr_main` (`cong_control`): update the model with this ACK's rate
    /// sample, then set the pacing rate and the window.
    pub fn on_ack(&mut self, w: &mut Window, rs: &RateSample, cx: &mut Cx) {
        self.update_bw(rs, cx);
        self.update_ack_aggregation(w, rs, cx);
        if self.mode == Mode::ProbeBw && self.is_next_cycle_phase(rs, cx) {
            self.advance_cycle_phase(cx);
        }
        self.check_full_bw_reached(rs);
        self.check_drain(w, cx);
        self.update_min_rtt(w, rs, cx);
        self.update_gains();
        let bw = self.bw();
        self.set_pacing_rate(w, cx, bw, self.pacing_gain);
        self.set_cwnd(w, rs, cx, bw, self.cwnd_gain);
    }

    /// `bbr_ssthresh`: remember the window; the threshold stays.
    pub fn ssthresh(&mut self, w: &Window) -> u32 {
        self.save_cwnd(w);
        w.ssthresh
    }

    /// `bbr_undo_cwnd`: a spurious slow-down; the window stays.
    pub fn undo_cwnd(&mut self, w: &Window, cx: &Cx) -> u32 {
        self.full_bw = 0;
        self.full_bw_cnt = 0;
        self.reset_lt_bw_sampling(cx);
        w.cwnd
    }

    /// `bbr_set_state(TCP_CA_Loss)`: an RTO ends the round.
    pub fn on_loss_state(&mut self, cx: &Cx) {
        self.prev_ca_state = CaState::Loss;
        self.full_bw = 0;
        self.round_start = true;
        let rs = RateSample {
            losses: 1,
            ..Default::default()
        };
        self.lt_bw_sampling(&rs, cx);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gains_are_the_kernels() {
        assert_eq!(HIGH_GAIN, 739);
        assert_eq!(DRAIN_GAIN, 88);
        assert_eq!(PACING_GAIN[..2], [320, 192]);
    }

    #[test]
    fn the_max_filter_forgets_a_sample_older_than_its_window() {
        let mut f = MaxFilter::default();
        f.running_max(10, 0, 100);
        f.running_max(10, 3, 50);
        assert_eq!(f.get(), 100);
        for t in 4..=11 {
            f.running_max(10, t, 60);
        }
        assert_eq!(
            f.get(),
            60,
            "100 from round 0 is out of a 10-round window at round 11"
        );
    }

    #[test]
    fn pacing_rate_is_bandwidth_times_gain_less_the_margin() {
        // 1 packet/ms of 1448 bytes = 1.448 MB/s; gain 1; 1 % margin.
        let bw = BW_UNIT / 1000;
        let r = Bbr::rate_bytes_per_sec(1448, bw, BBR_UNIT);
        assert!((1_433_000..=1_434_000).contains(&r), "{r}");
    }
}
