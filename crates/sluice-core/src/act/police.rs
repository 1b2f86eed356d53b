//! police: a token-bucket policer that sorts packets into conforming and exceeding.
//!
//! Modelled on net/sched/act_police.c. A policer holds up to three buckets,
//! all kept as time in nanoseconds like the kernel's:
//!
//! - the rate bucket: depth `burst` (sent by tc in psched ticks), filled at one
//!   nanosecond per nanosecond, a packet costs its transmission time at `rate`
//!   (overhead, mpu and ATM framing included);
//! - the peak bucket (with `peakrate`): depth = the time of one `mtu` at the
//!   peak rate, so back-to-back packets cannot exceed the peak rate;
//! - the packet bucket (`pkts_rate`/`pkts_burst`), in place of the rate
//!   bucket: each packet costs 1/pkts_rate seconds.
//!
//! A packet longer than `mtu` exceeds. Otherwise the elapsed time since the
//! last conforming packet (capped at `burst`) refills the buckets; if none
//! would go negative the packet conforms, the buckets are committed and the
//! conform action (`TCA_POLICE_RESULT`, default `ok`) is the verdict; else
//! nothing is committed and the exceed action (default `reclassify` in tc,
//! `drop` in the conditioner scripts in `examples/`) is. Exceeding packets count as overlimits, and
//! any packet whose verdict is `drop` as a drop. With `avrate`, a packet
//! exceeds whenever the estimated rate is at or above it (the estimator comes
//! from the filter's `estimator` option; without it the kernel refuses
//! `avrate` with EINVAL, and so do we).
//!
//! Invariant (the token-bucket bound): over any interval of length t the
//! conforming bytes cost at most `burst + t` of transmission time at `rate`.
//!
//! Lengths are the packet's accounting length (`Packet::len`). Deviation:
//! lengths beyond 2^31 bytes are costed as 2^31 bytes so the 64-bit cost
//! arithmetic cannot overflow; real packets are far shorter.

use super::{check_ctrlact, Action, ActionOpts, EstimatorSpec};
use crate::cls::Verdict;
use crate::error::{Errno, TcError, TcResult};
use crate::packet::Packet;
use crate::qdisc::token_bucket::TokenBucket;
use crate::rate::{RateCfg, RateSpec};
use crate::stats::{RateEstimator, Stats};
use crate::time::{ticks_to_ns, Time};
use serde::{Deserialize, Serialize};

/// The police options tc sends (`struct tc_police` and the `TCA_POLICE_*` attributes).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoliceOpts {
    /// `tc_police.action`: the verdict for exceeding packets.
    pub exceed: Verdict,
    /// `TCA_POLICE_RESULT`: the verdict for conforming packets (`None`: ok).
    #[serde(default)]
    pub conform: Option<Verdict>,
    /// `tc_police.rate` (with `TCA_POLICE_RATE64` beyond 32 bits); `None` or
    /// a zero rate means no byte-rate limit.
    #[serde(default)]
    pub rate: Option<RateSpec>,
    /// `tc_police.rate.cell_log` as tc computed it from the mtu (the kernel
    /// refuses a rate whose cell_log is 0 or 32 and more).
    #[serde(default)]
    pub rate_cell_log: u8,
    /// `tc_police.burst`: the bucket depth in psched ticks (64 ns).
    #[serde(default)]
    pub burst: u32,
    /// `tc_police.mtu` in bytes; 0 = the default (`255 << cell_log` with a
    /// rate, unlimited without).
    #[serde(default)]
    pub mtu: u32,
    /// `tc_police.peakrate`.
    #[serde(default)]
    pub peakrate: Option<RateSpec>,
    /// `tc_police.peakrate.cell_log`.
    #[serde(default)]
    pub peak_cell_log: u8,
    /// `TCA_POLICE_AVRATE` in bytes per second.
    #[serde(default)]
    pub avrate: Option<u32>,
    /// `TCA_POLICE_PKTRATE64`: packets per second.
    #[serde(default)]
    pub pkts_rate: Option<u64>,
    /// `TCA_POLICE_PKTBURST64`: packet bucket depth in psched ticks.
    #[serde(default)]
    pub pkts_burst: Option<u64>,
}

impl Default for PoliceOpts {
    fn default() -> Self {
        PoliceOpts {
            exceed: Verdict::Reclassify,
            conform: None,
            rate: None,
            rate_cell_log: 0,
            burst: 0,
            mtu: 0,
            peakrate: None,
            peak_cell_log: 0,
            avrate: None,
            pkts_rate: None,
            pkts_burst: None,
        }
    }
}

/// The old-style `police` attribute of u32 and fw (`TCA_U32_POLICE`,
/// `TCA_FW_POLICE`): a policer with its index but no action wrapper.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoliceSpec {
    /// `tc_police.index`; 0 = allocate.
    #[serde(default)]
    pub index: u32,
    /// The policer.
    pub opts: PoliceOpts,
}

fn present(r: &Option<RateSpec>) -> Option<RateSpec> {
    r.filter(|s| s.rate != 0)
}

/// Attribute checks the kernel makes before looking at the index (`police_policy`).
pub(crate) fn check_policy(o: &PoliceOpts) -> TcResult<()> {
    if o.pkts_rate == Some(0) || o.pkts_burst == Some(0) {
        return Err(TcError::errno(Errno::ERANGE));
    }
    // tc_ratespec.overhead and .mpu are 16-bit fields.
    for r in [o.rate, o.peakrate].into_iter().flatten() {
        if !(0..=u16::MAX as i32).contains(&r.overhead) {
            return Err(TcError::errno(Errno::EINVAL));
        }
    }
    Ok(())
}

/// Validated policer parameters (`struct tcf_police_params`).
#[derive(Clone, Debug)]
pub struct PoliceParams {
    opts: PoliceOpts,
    exceed: Verdict,
    conform: Verdict,
    /// Effective mtu in bytes.
    mtu: u32,
    /// Rate bucket depth in ns.
    burst: i64,
    rate: Option<RateCfg>,
    peak: Option<RateCfg>,
    /// Peak bucket depth in ns: one mtu at the peak rate.
    mtu_ptoks: i64,
    /// Bytes per second; 0 = no average-rate limit.
    avrate: u32,
    pps: Option<RateCfg>,
    /// Packet bucket depth in ns.
    pkt_burst: i64,
}

/// Longest length costed exactly (see the essay).
const MAX_COSTED_LEN: u32 = 1 << 31;

fn cost(r: &RateCfg, len: u32) -> i64 {
    r.l2t_ns(len.min(MAX_COSTED_LEN)) as i64
}

impl PoliceParams {
    /// `tcf_police_init` after the index lookup: validate everything.
    pub(crate) fn validate(
        o: &PoliceOpts,
        in_filter: bool,
        have_est: bool,
        creating: bool,
        est_active: bool,
    ) -> TcResult<Self> {
        check_ctrlact(o.exceed, in_filter)?;
        let rate = present(&o.rate);
        let peak = rate.and(present(&o.peakrate));
        // qdisc_get_rtab refuses these; the policer reports only ENOMEM.
        if rate.is_some() && (o.rate_cell_log == 0 || o.rate_cell_log >= 32) {
            return Err(TcError::errno(Errno::ENOMEM));
        }
        if peak.is_some() && (o.peak_cell_log == 0 || o.peak_cell_log >= 32) {
            return Err(TcError::errno(Errno::ENOMEM));
        }
        if !have_est && o.avrate.is_some() && (creating || !est_active) {
            return Err(TcError::errno(Errno::EINVAL));
        }
        if matches!(o.conform, Some(Verdict::GotoChain(_))) {
            return Err(TcError::inval("goto chain not allowed on fallback"));
        }
        if o.pkts_rate.is_some() != o.pkts_burst.is_some() {
            return Err(TcError::inval(
                "Both or neither packet-per-second burst and rate must be provided",
            ));
        }
        if o.pkts_rate.is_some() && rate.is_some() {
            return Err(TcError::inval(
                "packet-per-second and byte-per-second rate limits not allowed in same action",
            ));
        }
        let mtu = match (o.mtu, rate) {
            (0, Some(_)) => (255u64 << o.rate_cell_log) as u32,
            (0, None) => u32::MAX,
            (m, _) => m,
        };
        let rate = rate.map(RateCfg::new);
        let peak = peak.map(RateCfg::new);
        let mtu_ptoks = peak.as_ref().map_or(0, |p| cost(p, mtu));
        let pps = o.pkts_rate.map(|r| {
            RateCfg::new(RateSpec {
                rate: r,
                ..Default::default()
            })
        });
        let pkt_burst = o
            .pkts_burst
            .map_or(0, |b| ticks_to_ns(b.min(u64::MAX >> 7)) as i64);
        let mut opts = o.clone();
        opts.mtu = mtu;
        Ok(PoliceParams {
            opts,
            exceed: o.exceed,
            conform: o.conform.unwrap_or(Verdict::Ok),
            mtu,
            burst: ticks_to_ns(o.burst as u64) as i64,
            rate,
            peak,
            mtu_ptoks,
            avrate: o.avrate.unwrap_or(0),
            pps,
            pkt_burst,
        })
    }
}

/// A policer: parameters and bucket state.
#[derive(Debug)]
pub struct Police {
    params: PoliceParams,
    /// When the buckets were last committed (`tcfp_t_c`).
    t_c: Time,
    /// Rate bucket tokens in ns.
    toks: i64,
    /// Peak bucket tokens in ns.
    ptoks: i64,
    /// Packet bucket tokens in ns.
    pkttoks: i64,
    drops: u64,
    overlimits: u64,
    est: Option<RateEstimator>,
    est_bytes: u64,
    est_packets: u64,
}

impl Police {
    /// A new policer with full buckets (the packet bucket starts empty, as in the kernel).
    pub(crate) fn new(params: PoliceParams, now: Time, est: Option<EstimatorSpec>) -> Self {
        let mut p = Police {
            params: params.clone(),
            t_c: now,
            toks: 0,
            ptoks: 0,
            pkttoks: 0,
            drops: 0,
            overlimits: 0,
            est: None,
            est_bytes: 0,
            est_packets: 0,
        };
        p.change(params, now, est);
        p
    }

    /// Install new parameters: the byte and peak buckets refill, the packet
    /// bucket keeps its tokens (`tcf_police_init` on replace).
    pub(crate) fn change(&mut self, params: PoliceParams, now: Time, est: Option<EstimatorSpec>) {
        self.t_c = now;
        self.toks = params.burst;
        if params.peak.is_some() {
            self.ptoks = params.mtu_ptoks;
        }
        if let Some(e) = est {
            self.est = Some(RateEstimator::new(e.interval_log, e.ewma_log));
        }
        self.params = params;
    }

    pub(crate) fn has_estimator(&self) -> bool {
        self.est.is_some()
    }

    fn exceeds_avrate(&self) -> bool {
        let p = &self.params;
        if p.avrate == 0 {
            return false;
        }
        // gen_estimator_read fails without an estimator; the estimate is in
        // bytes per second in the kernel, bits per second in ours.
        match &self.est {
            Some(e) => e.read().0 / 8 >= p.avrate as u64,
            None => true,
        }
    }

    /// The conform test and bucket update (`tcf_police_act` between the locks).
    fn conforms(&mut self, len: u32, now: Time) -> bool {
        let p = &self.params;
        let elapsed = now
            .saturating_since(self.t_c)
            .as_nanos()
            .min(i64::MAX as u64) as i64;
        let mut toks = elapsed.min(p.burst);
        let mut ptoks = 0;
        let mut ppstoks = 0;
        if let Some(peak) = &p.peak {
            ptoks = (toks + self.ptoks).min(p.mtu_ptoks) - cost(peak, len);
        }
        if let Some(rate) = &p.rate {
            let tb = TokenBucket {
                rate: *rate,
                depth: p.burst,
                tokens: self.toks,
            };
            toks = tb.after(elapsed, len.min(MAX_COSTED_LEN));
        } else if let Some(pps) = &p.pps {
            let tb = TokenBucket {
                rate: *pps,
                depth: p.pkt_burst,
                tokens: self.pkttoks,
            };
            ppstoks = tb.after(elapsed, 1);
        }
        if (toks | ptoks | ppstoks) >= 0 {
            self.t_c = now;
            self.toks = toks;
            self.ptoks = ptoks;
            self.pkttoks = ppstoks;
            return true;
        }
        false
    }
}

impl Action for Police {
    fn kind(&self) -> &'static str {
        "police"
    }

    fn act(&mut self, pkt: &mut Packet, now: Time) -> Verdict {
        // The samples due by now saw the counters without this packet,
        // which `tcf_police_act` then counts before reading the estimate.
        if let Some(e) = &mut self.est {
            let s = Stats {
                bytes: self.est_bytes,
                packets: self.est_packets,
                ..Default::default()
            };
            e.advance(now, &s);
        }
        self.est_bytes += pkt.len as u64;
        self.est_packets += pkt.segs() as u64;
        let p = &self.params;
        // A GSO packet is checked segment by segment (`tcf_police_mtu_check`).
        let ret = if self.exceeds_avrate() || crate::gso::seg_len(pkt) > p.mtu {
            None
        } else if p.rate.is_none() && p.pps.is_none() {
            // Only an mtu (or avrate) limit: conforming packets are not counted.
            return p.conform;
        } else if self.conforms(pkt.len, now) {
            Some(self.params.conform)
        } else {
            None
        };
        let ret = ret.unwrap_or_else(|| {
            self.overlimits += 1;
            self.params.exceed
        });
        if ret == Verdict::Shot {
            self.drops += 1;
        }
        ret
    }

    fn drops(&self) -> u64 {
        self.drops
    }

    fn overlimits(&self) -> u64 {
        self.overlimits
    }

    fn dump(&self) -> ActionOpts {
        ActionOpts::Police(self.params.opts.clone())
    }

    fn estimator(&self) -> Option<(RateEstimator, u64, u64)> {
        self.est.map(|e| (e, self.est_bytes, self.est_packets))
    }

    fn control(&self) -> Verdict {
        self.params.exceed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::act::ActionDump;
    use crate::packet::ETH_P_IP;
    use crate::time::PSCHED_SHIFT;

    /// What tc sends for `police rate R burst B [mtu M]`: the burst as the
    /// transmission time of B bytes at R in psched ticks, cell_log from the mtu.
    fn tc_police(rate_bps: u64, burst_bytes: u64, mtu: u32, exceed: Verdict) -> PoliceOpts {
        let mut cell_log = 0u8;
        let m = if mtu == 0 { 2047 } else { mtu };
        while (m >> cell_log) > 255 {
            cell_log += 1;
        }
        let burst_ns = burst_bytes * 1_000_000_000 / rate_bps;
        PoliceOpts {
            exceed,
            rate: Some(RateSpec {
                rate: rate_bps,
                ..Default::default()
            }),
            rate_cell_log: cell_log,
            burst: (burst_ns >> PSCHED_SHIFT) as u32,
            mtu,
            ..Default::default()
        }
    }

    fn police(o: &PoliceOpts) -> Police {
        Police::new(
            PoliceParams::validate(o, true, false, true, false).unwrap(),
            Time(0),
            None,
        )
    }

    fn pkt(len: u32) -> Packet {
        Packet::new(vec![0x45; 20], len, ETH_P_IP)
    }

    #[test]
    fn the_dumped_estimate_is_read_at_the_dumps_time() {
        // 1000-byte packets every 10 ms (800 kbit/s) for 20 s, under an
        // estimator sampling every 250 ms (interval -2) with ewma_log 1.
        let o = tc_police(1_000_000, 10 * 1024, 0, Verdict::Shot);
        let params = PoliceParams::validate(&o, true, true, true, false).unwrap();
        let spec = EstimatorSpec {
            interval_log: -2,
            ewma_log: 1,
        };
        let mut p = Police::new(params, Time(0), Some(spec));
        let last = Time(19_990_000_000);
        for i in 0..2000 {
            assert_eq!(p.act(&mut pkt(1000), Time(i * 10_000_000)), Verdict::Ok);
        }
        let dump = |now| {
            let (e, b, n) = p.estimator().unwrap();
            ActionDump {
                order: 1,
                kind: "police".into(),
                index: 1,
                refcnt: 1,
                bindcnt: 1,
                opts: p.dump(),
                stats: Default::default(),
                tm: Default::default(),
                cookie: None,
                estimator: Some((e, b, n)),
                used_hw_stats: false,
                no_percpu: false,
                offload: 0,
            }
            .rate_est(now)
            .unwrap()
        };
        // Right after the traffic: the rate it had (within the EWMA's ripple).
        let (bps, pps) = dump(last);
        assert!((760_000..=840_000).contains(&bps), "{bps}");
        assert!((95..=105).contains(&pps), "{pps}");
        // Ten seconds of silence later the estimate has decayed (halved at
        // every 250 ms sample), as the kernel's timer would have made it;
        // the last sample alone would still say 800 kbit/s.
        assert_eq!(dump(Time(last.0 + 10_000_000_000)), (0, 0));
        assert!(p.est.unwrap().read().0 > 700_000);
    }

    #[test]
    fn the_conditioner_policer_passes_its_rate_plus_the_burst_and_drops_the_rest() {
        // police rate 800kbit burst 10k drop, offered 2 Mbit/s of 1000-byte
        // packets (one every 4 ms) for 10 s of virtual time.
        let o = tc_police(100_000, 10 * 1024, 0, Verdict::Shot);
        let mut p = police(&o);
        let (mut passed, mut dropped, mut offered) = (0u64, 0u64, 0u64);
        let secs = 10;
        for i in 0..(secs * 250) {
            let now = Time(i * 4_000_000);
            offered += 1;
            match p.act(&mut pkt(1000), now) {
                Verdict::Ok => passed += 1000,
                Verdict::Shot => dropped += 1,
                v => panic!("unexpected verdict {v:?}"),
            }
        }
        // Physics: at most burst + rate * t bytes conform.
        let bound = 10 * 1024 + 100_000 * secs;
        assert!(passed <= bound, "{passed} > {bound}");
        let expect = 100_000 * secs + 10 * 1024;
        assert!(
            (passed as f64 - expect as f64).abs() / (expect as f64) < 0.02,
            "{passed} vs {expect}"
        );
        // Counters add up: every exceeding packet is an overlimit and a drop.
        assert_eq!(p.drops, dropped);
        assert_eq!(p.overlimits, dropped);
        assert_eq!(passed / 1000 + dropped, offered);
    }

    #[test]
    fn conform_and_exceed_actions_and_their_counters() {
        // 1 Mbit/s, burst of exactly 3000 bytes; conform pipe, exceed continue.
        let mut o = tc_police(125_000, 3000, 0, Verdict::Continue);
        o.conform = Some(Verdict::Pipe);
        let mut p = police(&o);
        // Default mtu: 255 << 3 = 2040 bytes with the default cell_log.
        assert_eq!(p.params.mtu, 2040);
        // The 3000-byte bucket holds exactly three 1000-byte packets.
        for _ in 0..3 {
            assert_eq!(p.act(&mut pkt(1000), Time(0)), Verdict::Pipe);
        }
        assert_eq!(p.act(&mut pkt(1000), Time(0)), Verdict::Continue);
        // After 8 ms (1000 bytes at 1 Mbit/s) one more fits.
        assert_eq!(p.act(&mut pkt(1000), Time(8_000_000)), Verdict::Pipe);
        // Longer than the mtu: exceeds however full the bucket is.
        assert_eq!(
            p.act(&mut pkt(2041), Time(10_000_000_000)),
            Verdict::Continue
        );
        assert_eq!((p.overlimits, p.drops), (2, 0));
    }

    #[test]
    fn peakrate_limits_back_to_back_packets() {
        // rate 1 Mbit/s burst 100 kB, peakrate 2 Mbit/s with mtu 1500: after
        // one mtu the peak bucket is empty even though the rate bucket is full.
        let mut o = tc_police(125_000, 100_000, 1500, Verdict::Shot);
        o.peakrate = Some(RateSpec {
            rate: 250_000,
            ..Default::default()
        });
        o.peak_cell_log = 3;
        let mut p = police(&o);
        assert_eq!(p.act(&mut pkt(1500), Time(0)), Verdict::Ok);
        assert_eq!(p.act(&mut pkt(1500), Time(0)), Verdict::Shot);
        // 1500 bytes at 2 Mbit/s take 6 ms.
        assert_eq!(p.act(&mut pkt(1500), Time(5_900_000)), Verdict::Shot);
        assert_eq!(p.act(&mut pkt(1500), Time(6_000_000)), Verdict::Ok);
    }

    #[test]
    fn packet_rate_policing() {
        // pkts_rate 1000 pkts_burst 10 (in ticks: 10 packets' worth = 10 ms).
        let o = PoliceOpts {
            exceed: Verdict::Shot,
            pkts_rate: Some(1000),
            pkts_burst: Some(10_000_000 >> PSCHED_SHIFT),
            ..Default::default()
        };
        let mut p = police(&o);
        assert_eq!(p.params.mtu, u32::MAX);
        // The packet bucket starts empty: nothing conforms at creation time,
        // 5 ms later 5 packets do.
        assert_eq!(p.act(&mut pkt(100), Time(0)), Verdict::Shot);
        let ok = (0..10)
            .filter(|_| p.act(&mut pkt(100), Time(5_000_000)) == Verdict::Ok)
            .count();
        assert_eq!(ok, 5);
    }

    #[test]
    fn validation_follows_the_kernel() {
        let good = tc_police(125_000, 10_000, 0, Verdict::Shot);
        let v = |o: &PoliceOpts| PoliceParams::validate(o, true, false, true, false).map(|_| ());
        let mut o = good.clone();
        o.rate_cell_log = 0;
        assert_eq!(v(&o), Err(TcError::errno(Errno::ENOMEM)));
        let mut o = good.clone();
        o.avrate = Some(1000);
        assert_eq!(v(&o), Err(TcError::errno(Errno::EINVAL)));
        let mut o = good.clone();
        o.conform = Some(Verdict::GotoChain(1));
        assert_eq!(
            v(&o),
            Err(TcError::inval("goto chain not allowed on fallback"))
        );
        let mut o = good.clone();
        o.pkts_rate = Some(10);
        assert_eq!(
            v(&o),
            Err(TcError::inval(
                "Both or neither packet-per-second burst and rate must be provided"
            ))
        );
        o.pkts_burst = Some(10);
        assert_eq!(
            v(&o),
            Err(TcError::inval(
                "packet-per-second and byte-per-second rate limits not allowed in same action"
            ))
        );
        let mut o = good.clone();
        o.exceed = Verdict::GotoChain(3);
        assert_eq!(
            PoliceParams::validate(&o, false, false, true, false).map(|_| ()),
            Err(TcError::inval("can't goto NULL proto/chain"))
        );
        let mut o = good;
        o.pkts_rate = Some(0);
        assert_eq!(check_policy(&o), Err(TcError::errno(Errno::ERANGE)));
    }

    #[test]
    fn the_dump_recreates_the_same_policer() {
        let o = tc_police(125_000, 10_000, 0, Verdict::Shot);
        let p = police(&o);
        let ActionOpts::Police(d) = p.dump() else {
            panic!()
        };
        assert_eq!(d.mtu, 2040);
        let again = police(&d);
        assert_eq!(again.dump(), p.dump());
    }

    proptest::proptest! {
        /// The token-bucket bound: over any run, conforming bytes never exceed
        /// burst + rate * elapsed.
        #[test]
        fn conforming_bytes_stay_under_the_bucket_bound(
            gaps in proptest::collection::vec(0u64..20_000_000, 1..300),
            lens in proptest::collection::vec(40u32..1500, 300),
        ) {
            let o = tc_police(125_000, 5_000, 1500, Verdict::Shot);
            let mut p = police(&o);
            let (mut now, mut passed) = (0u64, 0u64);
            for (g, len) in gaps.iter().zip(lens.iter()) {
                now += g;
                if p.act(&mut pkt(*len), Time(now)) == Verdict::Ok {
                    passed += *len as u64;
                }
            }
            let bound = 5_000 + 125_000 * now / 1_000_000_000 + 1;
            proptest::prop_assert!(passed <= bound, "{} > {}", passed, bound);
        }
    }
}
