//! The kernel's seeded generator and netem's correlated numbers on top of it.
//!
//! `prandom_u32_state` (lib/random32.c) is L'Ecuyer's maximally
//! equidistributed combined Tausworthe generator (LFSR113), and
//! `prandom_seed_state` (include/linux/prandom.h) folds a 64-bit seed into
//! its four words. netem draws every decision that `seed N` controls from
//! it, so the same seed gives the kernel's sequence of decisions.
//!
//! `get_crandom` (sch_netem.c) mixes each new number with the previous one:
//! `answer = (value * (2^32 - rho') + last * rho') >> 32` with
//! `rho' = rho + 1`, an AR(1) process in 32-bit fixed point.

/// `struct rnd_state`: the four Tausworthe words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Prandom {
    s: [u32; 4],
}

/// `__seed`: the Tausworthe components need their top bits non-zero.
fn seed_word(x: u32, m: u32) -> u32 {
    if x < m {
        x + m
    } else {
        x
    }
}

impl Prandom {
    /// `prandom_seed_state(state, seed)`.
    pub(crate) fn new(seed: u64) -> Self {
        let i = ((seed >> 32) ^ (seed << 10) ^ seed) as u32;
        Prandom {
            s: [
                seed_word(i, 2),
                seed_word(i, 8),
                seed_word(i, 16),
                seed_word(i, 128),
            ],
        }
    }

    /// `prandom_u32_state`.
    pub(crate) fn next_u32(&mut self) -> u32 {
        fn taus(s: u32, a: u32, b: u32, c: u32, d: u32) -> u32 {
            ((s & c) << d) ^ (((s << a) ^ s) >> b)
        }
        let s = &mut self.s;
        s[0] = taus(s[0], 6, 13, 4294967294, 18);
        s[1] = taus(s[1], 2, 27, 4294967288, 2);
        s[2] = taus(s[2], 13, 21, 4294967280, 7);
        s[3] = taus(s[3], 3, 12, 4294967168, 13);
        s[0] ^ s[1] ^ s[2] ^ s[3]
    }
}

/// `struct crndstate`: one correlated stream (delay, loss, duplicate,
/// reorder or corrupt).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Crnd {
    /// The previous answer.
    pub(crate) last: u32,
    /// The correlation, scaled to `u32::MAX` = 100 %.
    pub(crate) rho: u32,
}

impl Crnd {
    /// `init_crandom`: the kernel takes `last` from its unseeded generator.
    pub(crate) fn new(rho: u32, last: u32) -> Self {
        Crnd { last, rho }
    }

    /// `get_crandom`: a uniform number when `rho` is 0, else one pulled
    /// towards the previous answer.
    pub(crate) fn next(&mut self, prng: &mut Prandom) -> u32 {
        let value = prng.next_u32() as u64;
        if self.rho == 0 {
            return value as u32;
        }
        let rho = self.rho as u64 + 1;
        let answer = (value * ((1u64 << 32) - rho) + self.last as u64 * rho) >> 32;
        self.last = answer as u32;
        answer as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `prandom_seed_early(state, seed, false)` followed by the ten-draw
    /// warm-up, as lib/random32.c's self test seeds the generator.
    fn seeded_early(seed: u32) -> Prandom {
        let lcg = |x: u32| x.wrapping_mul(69069);
        let s1 = seed_word(lcg(seed), 2);
        let s2 = seed_word(lcg(s1), 8);
        let s3 = seed_word(lcg(s2), 16);
        let s4 = seed_word(lcg(s3), 128);
        let mut p = Prandom {
            s: [s1, s2, s3, s4],
        };
        for _ in 0..10 {
            p.next_u32();
        }
        p
    }

    #[test]
    fn the_generator_passes_the_kernels_self_test_vectors() {
        // lib/random32.c, `test1`: seed boundary cases.
        for (seed, want) in [
            (1u32, 3484351685u32),
            (2, 2623130059),
            (3, 3125133893),
            (4, 984847254),
        ] {
            assert_eq!(seeded_early(seed).next_u32(), want, "seed {seed}");
        }
    }

    #[test]
    fn seeding_keeps_the_components_valid_and_is_repeatable() {
        let p = Prandom::new(0);
        assert!(p.s[0] >= 2 && p.s[1] >= 8 && p.s[2] >= 16 && p.s[3] >= 128);
        let (mut a, mut b) = (Prandom::new(42), Prandom::new(42));
        for _ in 0..1000 {
            assert_eq!(a.next_u32(), b.next_u32());
        }
        assert_ne!(Prandom::new(1).next_u32(), Prandom::new(2).next_u32());
    }

    #[test]
    fn correlation_pulls_answers_towards_the_last_one() {
        let mut p = Prandom::new(7);
        let mut c = Crnd::new(u32::MAX, 1234);
        for _ in 0..10 {
            assert_eq!(c.next(&mut p), 1234, "100 % correlation repeats");
        }
        // Without correlation the answers are the generator's own.
        let (mut p, mut q) = (Prandom::new(7), Prandom::new(7));
        let mut c = Crnd::new(0, 99);
        for _ in 0..10 {
            assert_eq!(c.next(&mut p), q.next_u32());
        }
        // 50 %: halfway between the new value and the last answer.
        let (mut p, mut q) = (Prandom::new(9), Prandom::new(9));
        let mut c = Crnd::new(u32::MAX / 2, 0);
        let v = q.next_u32() as u64;
        assert_eq!(c.next(&mut p) as u64, (v * ((1 << 32) - (1 << 31))) >> 32);
    }
}
