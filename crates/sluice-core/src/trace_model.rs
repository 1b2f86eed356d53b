//! Generated capacity traces: a seeded random walk of a cellular link's
//! capacity, written out as a Mahimahi delivery-opportunity trace
//! ([`crate::trace`]).
//!
//! # The model (`walk`)
//!
//! Measured cellular traces (Winstein et al., NSDI 2013, the traces
//! Mahimahi ships) share three traits: the capacity wanders over an order
//! of magnitude within seconds, it forgets where it was after a few
//! seconds (it does not drift away for good), and now and then it drops to
//! nothing for a few hundred milliseconds (a handover, a fade). The model
//! has one knob for each:
//!
//! - **A mean-reverting walk in log space.** `x = ln(capacity / median)`
//!   follows an Ornstein–Uhlenbeck process, sampled every `step`:
//!   `x[k+1] = a·x[k] + volatility·√(1 − a²)·N(0, 1)` with
//!   `a = exp(−step / reversion)`. Its stationary law is
//!   `N(0, volatility²)`: `volatility` is the standard deviation of the log
//!   capacity (0.5: most of the time within ×0.6 to ×1.65 of the median),
//!   `reversion` the time it takes to forget (its autocorrelation falls by
//!   `e` per `reversion`). The walk starts from its stationary law, so the
//!   trace has no warm-up.
//! - **Fades.** Fades start as a Poisson process of `fades` per minute and
//!   last an exponentially distributed time of mean `fade`; during one the
//!   capacity is 0 (the walk goes on underneath).
//! - **The mean.** The sampled capacities are scaled so their mean over the
//!   trace, fades included, is `mean` exactly: a scenario that asks for 12
//!   Mbit/s gets 12 Mbit/s over the run, whatever the seed.
//!
//! The capacity, constant within each step, becomes opportunities of
//! [`OPPORTUNITY_BYTES`] by accumulating credit millisecond by millisecond:
//! millisecond `m` (1-based) earns the capacity of `(m − 1, m]` in
//! opportunities and writes one line `m` per whole opportunity it holds;
//! the remainder carries over. The last line is the trace's duration (one
//! opportunity is added there if the credit did not put one), so the
//! trace repeats with the period asked for.
//!
//! Everything is drawn from one xoshiro256++ generator seeded with `seed`
//! (normal deviates by Box–Muller): the same parameters give the same
//! trace on every run. Across machines the random draws are the same too;
//! the capacities go through `exp`, `ln` and `cos`, which Rust takes from
//! the platform's math library, so a library that rounds one of them
//! differently in the last bit could move an opportunity by a millisecond
//! now and then (the mean stays exact). Nothing here reads a clock or a
//! global RNG.

use crate::time::Duration;
use crate::trace::{Trace, OPPORTUNITY_BYTES};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// The most opportunities a generated trace may hold (128 MiB of
/// timestamps): 140 s at 1 Gbit/s is 11.6 million.
pub const MAX_OPPORTUNITIES: u64 = 16 << 20;

/// The parameters of the `walk` model (see the module documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct WalkModel {
    /// Seed of the generator.
    pub seed: u64,
    /// Mean capacity over the trace, bits/s.
    pub mean_bps: u64,
    /// Length of one pass of the trace (whole milliseconds).
    pub duration: Duration,
    /// Standard deviation of ln(capacity) (0: a constant rate, fades aside).
    pub volatility: f64,
    /// Time constant of the mean reversion.
    pub reversion: Duration,
    /// How often the walk takes a new value (whole milliseconds).
    pub step: Duration,
    /// Fades starting per minute, on average.
    pub fades_per_min: f64,
    /// Mean length of a fade.
    pub fade: Duration,
}

impl Default for WalkModel {
    fn default() -> Self {
        WalkModel {
            seed: 0,
            mean_bps: 12_000_000,
            duration: Duration::from_secs(60),
            volatility: 0.5,
            reversion: Duration::from_secs(2),
            step: Duration::from_millis(10),
            fades_per_min: 0.0,
            fade: Duration::from_millis(300),
        }
    }
}

const MS: u64 = 1_000_000;

impl WalkModel {
    /// Check the parameters: what is wrong, named by its key.
    pub fn validate(&self) -> Result<(), String> {
        let whole_ms = |d: Duration| d.0 >= MS && d.0.is_multiple_of(MS);
        if !whole_ms(self.duration) || self.duration.0 / MS > crate::trace::MAX_TRACE_MS {
            return Err("duration: a whole number of milliseconds, 1ms to a year".into());
        }
        if !whole_ms(self.step) || self.step > self.duration {
            return Err("step: a whole number of milliseconds, at most the duration".into());
        }
        if self.reversion.0 == 0 {
            return Err("reversion: more than 0".into());
        }
        if self.mean_bps == 0 {
            return Err("mean: more than 0".into());
        }
        if !(0.0..=5.0).contains(&self.volatility) {
            return Err(format!(
                "volatility: {} is not in 0..5 (the standard deviation of ln capacity)",
                self.volatility
            ));
        }
        if !(0.0..=600.0).contains(&self.fades_per_min) {
            return Err(format!(
                "fades: {} is not in 0..600 per minute",
                self.fades_per_min
            ));
        }
        if self.fades_per_min > 0.0 && self.fade.0 == 0 {
            return Err("fade: more than 0 when there are fades".into());
        }
        let opportunities = u128::from(self.mean_bps) * u128::from(self.duration.0)
            / 1_000_000_000
            / (u128::from(OPPORTUNITY_BYTES) * 8);
        if opportunities > u128::from(MAX_OPPORTUNITIES) {
            return Err(format!(
                "mean × duration: {opportunities} opportunities, more than the {MAX_OPPORTUNITIES} \
                 a generated trace may hold; shorten it (it repeats)"
            ));
        }
        Ok(())
    }

    /// The capacity of every step, bits/s (fades are 0), scaled to `mean_bps`.
    pub fn capacities(&self) -> Result<Vec<f64>, String> {
        self.validate()?;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(self.seed);
        let steps = self.duration.0.div_ceil(self.step.0) as usize;
        let a = (-(self.step.0 as f64) / self.reversion.0 as f64).exp();
        let kick = self.volatility * (1.0 - a * a).sqrt();
        let mut x = self.volatility * normal(&mut rng);
        // Fades: the chance one starts in a step, and the chance it goes on.
        let step_min = self.step.0 as f64 / 60e9;
        let p_start = 1.0 - (-self.fades_per_min * step_min).exp();
        let p_end = 1.0 - (-(self.step.0 as f64) / self.fade.0.max(1) as f64).exp();
        let mut fading = false;
        let mut caps = Vec::with_capacity(steps);
        for _ in 0..steps {
            let (u_start, u_end): (f64, f64) = (rng.gen(), rng.gen());
            fading = if fading {
                u_end >= p_end
            } else {
                u_start < p_start
            };
            caps.push(if fading { 0.0 } else { x.exp() });
            x = a * x + kick * normal(&mut rng);
        }
        // Scale so the mean over the trace (the last step may be partial)
        // is the mean asked for.
        let last = self.duration.0 - (steps as u64 - 1) * self.step.0;
        let weight = |i: usize| if i + 1 == steps { last } else { self.step.0 } as f64;
        let total: f64 = caps.iter().enumerate().map(|(i, c)| c * weight(i)).sum();
        if total <= 0.0 {
            // Faded all along: nothing to scale; the trace keeps its one
            // closing opportunity.
            return Ok(caps);
        }
        let scale = self.mean_bps as f64 * self.duration.0 as f64 / total;
        Ok(caps.into_iter().map(|c| c * scale).collect())
    }

    /// The trace (see the module documentation).
    pub fn generate(&self) -> Result<Trace, String> {
        let caps = self.capacities()?;
        let (step_ms, end_ms) = (self.step.0 / MS, self.duration.0 / MS);
        let per_opportunity = f64::from(OPPORTUNITY_BYTES) * 8.0;
        let mut ms = Vec::new();
        let mut credit = 0.0f64;
        for m in 1..=end_ms {
            let bps = caps[((m - 1) / step_ms) as usize];
            credit += bps / 1000.0 / per_opportunity;
            while credit >= 1.0 {
                ms.push(m);
                credit -= 1.0;
            }
        }
        if ms.last() != Some(&end_ms) {
            ms.push(end_ms);
        }
        Trace::from_ms(ms).map_err(|e| e.reason)
    }
}

/// A standard normal deviate (Box–Muller; one of the pair is used).
fn normal(rng: &mut Xoshiro256PlusPlus) -> f64 {
    let u1: f64 = 1.0 - rng.gen::<f64>(); // (0, 1]: ln is finite
    let u2: f64 = rng.gen();
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Time;

    fn model() -> WalkModel {
        WalkModel {
            seed: 7,
            mean_bps: 12_000_000,
            duration: Duration::from_secs(140),
            fades_per_min: 4.0,
            ..WalkModel::default()
        }
    }

    #[test]
    fn the_trace_has_the_mean_and_period_asked_for() {
        let t = model().generate().unwrap();
        assert_eq!(t.period_ms(), 140_000);
        let mean = t.mean_bps();
        // Rounding to whole opportunities: within one of them over 140 s.
        assert!((mean - 12e6).abs() < 1504.0 * 8.0 * 2.0 / 140.0, "{mean}");
    }

    #[test]
    fn the_same_seed_gives_the_same_trace_and_another_seed_another() {
        let a = model().generate().unwrap();
        assert_eq!(a, model().generate().unwrap());
        let b = WalkModel { seed: 8, ..model() }.generate().unwrap();
        assert_ne!(a, b);
    }

    #[test]
    fn the_capacity_wanders_and_fades() {
        let m = model();
        let caps = m.capacities().unwrap();
        let faded = caps.iter().filter(|c| **c == 0.0).count();
        // 4 fades a minute of 300 ms mean over 140 s: ~2.8 s of 140 s in
        // fades, 280 of 14000 steps; far from none and far from most.
        assert!((50..1500).contains(&faded), "{faded}");
        let logs: Vec<f64> = caps.iter().filter(|c| **c > 0.0).map(|c| c.ln()).collect();
        let mu = logs.iter().sum::<f64>() / logs.len() as f64;
        let sd = (logs.iter().map(|l| (l - mu).powi(2)).sum::<f64>() / logs.len() as f64).sqrt();
        // The stationary deviation is 0.5; 140 s is 70 reversion times.
        assert!((0.3..0.7).contains(&sd), "{sd}");
    }

    #[test]
    fn no_volatility_and_no_fades_is_a_constant_rate() {
        let t = WalkModel {
            volatility: 0.0,
            duration: Duration::from_secs(1),
            mean_bps: 12_032_000, // one opportunity per millisecond
            ..WalkModel::default()
        }
        .generate()
        .unwrap();
        assert_eq!(
            t.opportunities_between(Time::ZERO, Time(1_000_000_000), true),
            999
        );
        assert_eq!(t.opportunities().len(), 1000);
    }

    #[test]
    fn bad_parameters_name_their_key() {
        let e = |m: WalkModel| m.validate().unwrap_err();
        assert!(e(WalkModel {
            step: Duration(1500),
            ..model()
        })
        .starts_with("step:"));
        assert!(e(WalkModel {
            volatility: -1.0,
            ..model()
        })
        .starts_with("volatility:"));
        assert!(e(WalkModel {
            mean_bps: 100_000_000_000,
            ..model()
        })
        .starts_with("mean × duration:"));
    }
}
