//! The congestion-control interface and the window arithmetic shared by
//! algorithms (Linux `tcp_cong.c`).
//!
//! As in Linux, the window is counted in segments (`snd_cwnd`), grown by the
//! algorithm's `cong_avoid` hook on ACKs that deliver data while the
//! connection is cwnd-limited, and cut by its `ssthresh` hook when loss or
//! ECN is detected; the cut itself is applied gradually by PRR
//! (`recovery.rs`). Slow start (`tcp_slow_start`) adds one segment per
//! segment acknowledged up to `ssthresh`; additive increase
//! (`tcp_cong_avoid_ai`) adds one segment per `w` segments acknowledged.
//!
//! BBR is different (`tcp_bbr.c` has a `cong_control` hook): it sets the
//! window and a pacing rate itself on every ACK from a delivery-rate sample,
//! and the PRR reduction, the window restart after idle and the RFC 2861
//! decay are skipped for it, as Linux skips them for any `cong_control`.
//!
//! The algorithms are an enum rather than trait objects: three of them, no
//! dynamic loading, and the state stays `Clone` + `Debug`.

use super::bbr::Bbr;
use super::config::CongestionAlgorithm;
use super::cubic::Cubic;
use super::reno;
use sluice_core::time::{Duration, Time};

/// `TCP_INFINITE_SSTHRESH`: slow start has no ceiling yet.
pub const INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

/// The window variables every algorithm reads and writes.
#[derive(Clone, Debug)]
pub struct Window {
    /// Congestion window in segments (`snd_cwnd`).
    pub cwnd: u32,
    /// Slow-start threshold in segments (`snd_ssthresh`).
    pub ssthresh: u32,
    /// ACKed segments not yet turned into window growth (`snd_cwnd_cnt`).
    pub cwnd_cnt: u32,
    /// Upper bound on cwnd (`snd_cwnd_clamp`).
    pub clamp: u32,
}

impl Window {
    /// Initial window: `cwnd` segments, no slow-start ceiling.
    pub fn new(cwnd: u32) -> Self {
        Window {
            cwnd: cwnd.max(1),
            ssthresh: INFINITE_SSTHRESH,
            cwnd_cnt: 0,
            clamp: u32::MAX >> 1,
        }
    }

    /// `tcp_in_slow_start`.
    pub fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    /// `tcp_slow_start`: grow by `acked` up to ssthresh; returns the rest.
    pub fn slow_start(&mut self, acked: u32) -> u32 {
        let cwnd = self.cwnd.saturating_add(acked).min(self.ssthresh);
        let used = cwnd.saturating_sub(self.cwnd);
        self.cwnd = cwnd.min(self.clamp);
        acked - used.min(acked)
    }

    /// `tcp_cong_avoid_ai`: one segment per `w` segments acknowledged.
    pub fn cong_avoid_ai(&mut self, w: u32, acked: u32) {
        let w = w.max(1);
        if self.cwnd_cnt >= w {
            self.cwnd_cnt = 0;
            self.cwnd = self.cwnd.saturating_add(1);
        }
        self.cwnd_cnt = self.cwnd_cnt.saturating_add(acked);
        if self.cwnd_cnt >= w {
            let delta = self.cwnd_cnt / w;
            self.cwnd_cnt -= delta * w;
            self.cwnd = self.cwnd.saturating_add(delta);
        }
        self.cwnd = self.cwnd.min(self.clamp);
    }
}

/// What an ACK tells the algorithm (Linux's `ack_sample` plus context).
#[derive(Clone, Copy, Debug)]
pub struct AckSample {
    /// When the ACK arrived.
    pub now: Time,
    /// Newest RTT sample this ACK produced (`ca_rtt_us`), if any.
    pub rtt: Option<Duration>,
    /// `snd_una` after the ACK.
    pub snd_una: u64,
    /// `snd_nxt`.
    pub snd_nxt: u64,
    /// Smoothed RTT, for HyStart's pacing-rate estimate.
    pub srtt: Option<Duration>,
    /// Payload bytes of a full segment.
    pub mss: u32,
}

/// A congestion control algorithm and its private state.
#[derive(Clone, Debug)]
pub enum CongestionControl {
    /// CUBIC.
    Cubic(Box<Cubic>),
    /// Reno.
    Reno,
    /// BBR v1 (made at establishment, [`Bbr::new`]).
    Bbr(Box<Bbr>),
}

impl CongestionControl {
    /// The algorithm's initial state (`init` hook).
    pub fn new(algo: CongestionAlgorithm, hystart: bool, now: Time, snd_nxt: u64) -> Self {
        match algo {
            CongestionAlgorithm::Cubic => {
                CongestionControl::Cubic(Box::new(Cubic::new(hystart, now, snd_nxt)))
            }
            // BBR needs the connection's state; until it is established
            // (where `Bbr::new` replaces this) it behaves as Reno would.
            CongestionAlgorithm::Reno | CongestionAlgorithm::Bbr => CongestionControl::Reno,
        }
    }

    /// Does the algorithm set the window itself (`cong_control`)?
    pub fn controls_cwnd(&self) -> bool {
        matches!(self, CongestionControl::Bbr(_))
    }

    /// The pacing rate it asks for, bytes/s (`sk_pacing_rate`), if it paces.
    pub fn pacing_rate(&self) -> Option<u64> {
        match self {
            CongestionControl::Bbr(b) => Some(b.pacing_rate()),
            _ => None,
        }
    }

    /// `undo_cwnd`: the window after a spurious reduction is undone.
    pub fn undo_cwnd(&mut self, w: &Window, prior_cwnd: u32, cx: &super::bbr::Cx) -> u32 {
        match self {
            CongestionControl::Bbr(b) => b.undo_cwnd(w, cx),
            _ => w.cwnd.max(prior_cwnd),
        }
    }

    /// `cong_avoid`: grow the window for `acked` delivered segments. The
    /// caller has checked that the connection is cwnd-limited.
    pub fn cong_avoid(&mut self, w: &mut Window, acked: u32, now: Time) {
        match self {
            CongestionControl::Cubic(c) => c.cong_avoid(w, acked, now),
            CongestionControl::Reno => reno::cong_avoid(w, acked),
            CongestionControl::Bbr(_) => {}
        }
    }

    /// `ssthresh`: the threshold after a congestion event.
    pub fn ssthresh(&mut self, w: &Window) -> u32 {
        match self {
            CongestionControl::Cubic(c) => c.recalc_ssthresh(w),
            CongestionControl::Reno => reno::ssthresh(w),
            CongestionControl::Bbr(b) => b.ssthresh(w),
        }
    }

    /// `pkts_acked`: every ACK, with its RTT sample (HyStart lives here).
    pub fn pkts_acked(&mut self, w: &mut Window, s: &AckSample) {
        if let CongestionControl::Cubic(c) = self {
            c.acked(w, s);
        }
    }

    /// `set_state(TCP_CA_Loss)`: an RTO forgets the algorithm's history.
    pub fn on_loss_state(&mut self, now: Time, snd_nxt: u64) {
        if let CongestionControl::Cubic(c) = self {
            c.on_loss_state(now, snd_nxt);
        }
    }

    /// `cwnd_event(CA_EVENT_TX_START)`: first transmission after idle.
    pub fn on_tx_start(&mut self, now: Time, last_send: Time) {
        if let CongestionControl::Cubic(c) = self {
            c.on_tx_start(now, last_send);
        }
    }
}
