//! The token bucket shared by tbf, htb and the policer.
//!
//! The kernel keeps tokens as *time*: a bucket holds up to `depth` nanoseconds
//! of transmission at its rate ("buffer"), fills at one nanosecond per
//! nanosecond, and sending `len` bytes costs `psched_l2t_ns(rate, len)`
//! nanoseconds. A packet conforms when the tokens left after paying are not
//! negative. This is the conformance inequality TBF's essay states: over any
//! interval of length t the bytes sent are at most `burst + rate * t`.
//! (sch_tbf.c `tbf_dequeue`, sch_htb.c `htb_accnt_tokens`, act_police.c.)

use crate::rate::RateCfg;

/// A rate and a bucket depth, with the current fill.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TokenBucket {
    /// The fill rate, and the cost of a packet.
    pub rate: RateCfg,
    /// Bucket depth in nanoseconds of transmission (the kernel's `buffer`).
    pub depth: i64,
    /// Tokens in nanoseconds; negative while in debt.
    pub tokens: i64,
}

impl TokenBucket {
    /// A full bucket.
    pub fn new(rate: RateCfg, depth: i64) -> Self {
        TokenBucket {
            rate,
            depth,
            tokens: depth,
        }
    }

    /// Nanoseconds it costs to send `len` bytes.
    #[inline]
    pub fn cost(&self, len: u32) -> i64 {
        self.rate.l2t_ns(len) as i64
    }

    /// Tokens after `elapsed` ns of refilling and paying for `len` bytes,
    /// without committing: `min(tokens + elapsed, depth) - cost(len)`.
    /// (Elapsed time is capped at the depth first, as the kernel does, so
    /// a long idle period cannot overflow.)
    #[inline]
    pub fn after(&self, elapsed: i64, len: u32) -> i64 {
        let toks = elapsed
            .min(self.depth)
            .saturating_add(self.tokens)
            .min(self.depth);
        toks - self.cost(len)
    }
}
