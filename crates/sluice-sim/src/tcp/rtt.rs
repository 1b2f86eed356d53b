//! RTT estimation and the retransmission timeout, as Linux computes them.
//!
//! RFC 6298 smooths the RTT with gain 1/8 and its variation with gain 1/4 and
//! sets `RTO = max(RTO_min, SRTT + 4·RTTVAR)`. Linux's `tcp_rtt_estimator()`
//! keeps the 1/8 gain for SRTT but treats the variation differently, and
//! this module follows Linux (units: microseconds, like the kernel):
//!
//! - `mdev` tracks four times the mean deviation (`mdev = 3/4 mdev + |err|`),
//!   and decreases only with gain 1/32 when the sample is below SRTT, so an
//!   RTT that drops does not inflate the RTO.
//! - `mdev_max` is the largest `mdev` seen in the current RTT period (one
//!   window of data, tracked with `rtt_seq`), restarted at `RTO_min` each
//!   period; `rttvar` follows it up immediately and decays towards it by 1/4
//!   per period.
//! - `RTO = SRTT + rttvar`, capped at `RTO_max`. Because `rttvar ≥ RTO_min`
//!   always, the RTO is at least `SRTT + 200 ms` — the reason a Linux RTO in
//!   a bloated 1.2 s queue is about 1.4 s, not `max(200 ms, …)`.
//! - The first sample sets `SRTT = m`, `mdev = 2m`, so the RTO is `3m`
//!   (or `m + RTO_min` if larger).
//!
//! Exponential backoff doubles the RTO itself (`icsk_rto <<= 1`) on each
//! timeout; the next valid sample recomputes it from SRTT (RFC 6298 5.5/5.7).
//! `min_rtt` is the minimum over the connection (Linux windows it over
//! 5 minutes, longer than any simulated run).

use sluice_core::time::Duration;

/// Linux's RTT estimator state.
#[derive(Clone, Debug)]
pub struct RttEstimator {
    /// Smoothed RTT × 8, in µs; 0 before the first sample.
    srtt_us8: u64,
    mdev_us: u64,
    mdev_max_us: u64,
    rttvar_us: u64,
    /// `snd_nxt` when the current RTT period began.
    rtt_seq: u64,
    rto: Duration,
    min_rtt: Option<Duration>,
    latest: Option<Duration>,
    rto_min_us: u64,
    rto_max: Duration,
}

impl RttEstimator {
    /// No sample yet: the RTO is `initial`.
    pub fn new(initial: Duration, rto_min: Duration, rto_max: Duration) -> Self {
        RttEstimator {
            srtt_us8: 0,
            mdev_us: 0,
            mdev_max_us: 0,
            rttvar_us: 0,
            rtt_seq: 0,
            rto: initial.min(rto_max),
            min_rtt: None,
            latest: None,
            rto_min_us: rto_min.as_nanos() / 1000,
            rto_max,
        }
    }

    /// Feed one RTT sample taken when `snd_una`/`snd_nxt` are as given.
    pub fn sample(&mut self, rtt: Duration, snd_una: u64, snd_nxt: u64) {
        let m = (rtt.as_nanos() / 1000).max(1);
        self.latest = Some(rtt);
        self.min_rtt = Some(self.min_rtt.map_or(rtt, |r| r.min(rtt)));
        if self.srtt_us8 == 0 {
            self.first_sample(m, snd_nxt);
        } else {
            self.update(m, snd_una, snd_nxt);
        }
        self.srtt_us8 = self.srtt_us8.max(1);
        let rto_us = (self.srtt_us8 >> 3) + self.rttvar_us;
        self.rto = Duration::from_micros(rto_us).min(self.rto_max);
    }

    fn first_sample(&mut self, m: u64, snd_nxt: u64) {
        self.srtt_us8 = m << 3;
        self.mdev_us = m << 1;
        self.rttvar_us = self.mdev_us.max(self.rto_min_us);
        self.mdev_max_us = self.rttvar_us;
        self.rtt_seq = snd_nxt;
    }

    fn update(&mut self, m: u64, snd_una: u64, snd_nxt: u64) {
        let srtt = (self.srtt_us8 >> 3) as i64;
        let err = m as i64 - srtt;
        self.srtt_us8 = (self.srtt_us8 as i64 + err).max(1) as u64;
        let quarter = (self.mdev_us >> 2) as i64;
        let step = if err < 0 {
            let d = -err - quarter;
            if d > 0 {
                d >> 3
            } else {
                d
            }
        } else {
            err - quarter
        };
        self.mdev_us = (self.mdev_us as i64 + step).max(0) as u64;
        if self.mdev_us > self.mdev_max_us {
            self.mdev_max_us = self.mdev_us;
            self.rttvar_us = self.rttvar_us.max(self.mdev_max_us);
        }
        if snd_una > self.rtt_seq {
            if self.mdev_max_us < self.rttvar_us {
                self.rttvar_us -= (self.rttvar_us - self.mdev_max_us) >> 2;
            }
            self.rtt_seq = snd_nxt;
            self.mdev_max_us = self.rto_min_us;
        }
    }

    /// Double the RTO after a timeout (`icsk_rto <<= 1`, capped).
    pub fn backoff(&mut self) {
        self.rto = Duration(self.rto.as_nanos().saturating_mul(2)).min(self.rto_max);
    }

    /// The current RTO (`icsk_rto`).
    pub fn rto(&self) -> Duration {
        self.rto
    }

    /// Smoothed RTT, if any sample was taken.
    pub fn srtt(&self) -> Option<Duration> {
        (self.srtt_us8 > 0).then(|| Duration::from_micros(self.srtt_us8 >> 3))
    }

    /// Smoothed RTT × 8 in µs, as the kernel's `srtt_us` (0 = none).
    pub fn srtt_us8(&self) -> u64 {
        self.srtt_us8
    }

    /// The smallest RTT sample seen.
    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    /// The most recent sample.
    pub fn latest(&self) -> Option<Duration> {
        self.latest
    }

    /// The variation term of the RTO (`rttvar_us`).
    pub fn rttvar(&self) -> Duration {
        Duration::from_micros(self.rttvar_us)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn est() -> RttEstimator {
        RttEstimator::new(
            Duration::from_secs(1),
            Duration::from_millis(200),
            Duration::from_secs(120),
        )
    }

    #[test]
    fn first_sample_gives_three_rtt_or_rtt_plus_min() {
        let mut e = est();
        assert_eq!(e.rto(), Duration::from_secs(1));
        e.sample(Duration::from_millis(100), 0, 10);
        // rttvar = max(2·100 ms, 200 ms) = 200 ms; RTO = 100 + 200 = 300 ms.
        assert_eq!(e.rto(), Duration::from_millis(300));
        let mut e = est();
        e.sample(Duration::from_millis(22), 0, 10);
        assert_eq!(e.rto(), Duration::from_millis(222));
    }

    #[test]
    fn steady_rtt_keeps_rto_at_srtt_plus_min() {
        let mut e = est();
        for i in 0..200u64 {
            e.sample(Duration::from_millis(1200), i * 10, i * 10 + 10);
        }
        let rto = e.rto().as_nanos() as f64 / 1e6;
        assert!((rto - 1400.0).abs() < 5.0, "rto {rto} ms");
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let mut e = est();
        e.backoff();
        assert_eq!(e.rto(), Duration::from_secs(2));
        for _ in 0..10 {
            e.backoff();
        }
        assert_eq!(e.rto(), Duration::from_secs(120));
    }
}
