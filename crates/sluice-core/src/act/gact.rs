//! gact: the generic action — a fixed verdict, optionally replaced at random.
//!
//! Modelled on net/sched/act_gact.c. Every packet gets the configured control
//! action (`drop`, `pass`/`ok`, `reclassify`, `continue`, `pipe`,
//! `goto chain N`, `jump N`). With `random TYPE ACTION VAL` another action is
//! chosen instead:
//!
//! - `determ`: every VAL-th packet (the 1st..(VAL-1)th keep the main action,
//!   the VAL-th gets the random one; a counter of its own, never reset by a
//!   replace);
//! - `netrand`: each packet independently with probability 1/VAL, from a
//!   generator the action owns, seeded when it is created (the kernel uses
//!   the global `get_random_u32`).
//!
//! VAL is at least 1 (a 0 becomes 1, as in the kernel). Every packet counts
//! in bytes/packets; those whose verdict is `drop` count as drops. Replacing
//! a gact without `random` keeps its old random setting, as the kernel does.

use super::{check_ctrlact, Action, ActionOpts};
use crate::cls::Verdict;
use crate::error::{TcError, TcResult};
use crate::packet::Packet;
use crate::time::Time;
use rand_xoshiro::rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

/// How `random` picks packets (`tc_gact_p.ptype`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GactRandKind {
    /// `PGACT_NETRAND` (1): with probability 1/VAL.
    Netrand,
    /// `PGACT_DETERM` (2): every VAL-th packet.
    Determ,
}

/// `struct tc_gact_p`: the random alternative.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GactRandom {
    /// How packets are picked.
    pub kind: GactRandKind,
    /// The verdict for picked packets (`paction`).
    pub action: Verdict,
    /// VAL (`pval`), at most 10000 in tc's syntax.
    pub pval: u16,
}

/// The gact options tc sends (`TCA_GACT_PARMS`, `TCA_GACT_PROB`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GactOpts {
    /// The control action (`tc_gact.action`).
    pub action: Verdict,
    /// `random ...`.
    #[serde(default)]
    pub random: Option<GactRandom>,
}

/// Attribute checks made before the index is looked up.
pub(crate) fn check_policy(o: &GactOpts) -> TcResult<()> {
    if let Some(r) = &o.random {
        if matches!(r.action, Verdict::GotoChain(_)) {
            return Err(TcError::inval("goto chain not allowed on fallback"));
        }
    }
    Ok(())
}

/// Validated gact parameters.
#[derive(Clone, Debug)]
pub struct GactParams {
    action: Verdict,
    random: Option<GactRandom>,
}

impl GactParams {
    pub(crate) fn validate(o: &GactOpts, in_filter: bool) -> TcResult<Self> {
        check_policy(o)?;
        check_ctrlact(o.action, in_filter)?;
        let random = o.random.map(|r| GactRandom {
            pval: r.pval.max(1),
            ..r
        });
        Ok(GactParams {
            action: o.action,
            random,
        })
    }
}

/// A generic action.
#[derive(Debug)]
pub struct Gact {
    action: Verdict,
    random: Option<GactRandom>,
    /// Packets seen by `determ` (`gact->packets`).
    determ_packets: u32,
    rng: Xoshiro256PlusPlus,
    drops: u64,
}

impl Gact {
    pub(crate) fn new(p: GactParams, seed: u64) -> Self {
        Gact {
            action: p.action,
            random: p.random,
            determ_packets: 0,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            drops: 0,
        }
    }

    pub(crate) fn change(&mut self, p: GactParams) {
        self.action = p.action;
        if p.random.is_some() {
            self.random = p.random;
        }
    }
}

impl Action for Gact {
    fn kind(&self) -> &'static str {
        "gact"
    }

    // `%` rather than `is_multiple_of`: the workspace's minimum Rust is 1.80.
    #[allow(clippy::manual_is_multiple_of)]
    fn act(&mut self, _pkt: &mut Packet, _now: Time) -> Verdict {
        let v = match self.random {
            None => self.action,
            Some(r) => {
                let pval = r.pval.max(1) as u32;
                let keep = match r.kind {
                    GactRandKind::Netrand => self.rng.next_u32() % pval != 0,
                    GactRandKind::Determ => {
                        self.determ_packets = self.determ_packets.wrapping_add(1);
                        self.determ_packets % pval != 0
                    }
                };
                if keep {
                    self.action
                } else {
                    r.action
                }
            }
        };
        if v == Verdict::Shot {
            self.drops += 1;
        }
        v
    }

    fn drops(&self) -> u64 {
        self.drops
    }

    fn dump(&self) -> ActionOpts {
        ActionOpts::Gact(GactOpts {
            action: self.action,
            random: self.random,
        })
    }

    fn control(&self) -> Verdict {
        self.action
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::ETH_P_IP;

    fn gact(action: Verdict, random: Option<GactRandom>, seed: u64) -> Gact {
        Gact::new(
            GactParams::validate(&GactOpts { action, random }, true).unwrap(),
            seed,
        )
    }

    fn run(g: &mut Gact, n: usize) -> Vec<Verdict> {
        let mut p = Packet::new(vec![0x45; 20], 100, ETH_P_IP);
        (0..n).map(|_| g.act(&mut p, Time(0))).collect()
    }

    #[test]
    fn determ_picks_every_nth_packet() {
        // `gact drop random determ ok 10`: packets 10, 20, 30 pass, the rest drop.
        let r = GactRandom {
            kind: GactRandKind::Determ,
            action: Verdict::Ok,
            pval: 10,
        };
        let mut g = gact(Verdict::Shot, Some(r), 0);
        let v = run(&mut g, 30);
        for (i, v) in v.iter().enumerate() {
            let expect = if (i + 1) % 10 == 0 {
                Verdict::Ok
            } else {
                Verdict::Shot
            };
            assert_eq!(*v, expect, "packet {}", i + 1);
        }
        assert_eq!(g.drops, 27);
    }

    #[test]
    fn netrand_picks_about_one_in_val_and_is_repeatable() {
        let r = GactRandom {
            kind: GactRandKind::Netrand,
            action: Verdict::Shot,
            pval: 20,
        };
        let mut a = gact(Verdict::Ok, Some(r), 7);
        let mut b = gact(Verdict::Ok, Some(r), 7);
        let va = run(&mut a, 20_000);
        assert_eq!(va, run(&mut b, 20_000));
        let shot = va.iter().filter(|v| **v == Verdict::Shot).count();
        // 1000 expected; 5 standard deviations is about 150.
        assert!((850..=1150).contains(&shot), "{shot}");
    }

    #[test]
    fn pval_zero_means_one_and_replace_keeps_random() {
        let r = GactRandom {
            kind: GactRandKind::Determ,
            action: Verdict::Pipe,
            pval: 0,
        };
        let mut g = gact(Verdict::Ok, Some(r), 0);
        assert_eq!(run(&mut g, 3), vec![Verdict::Pipe; 3]);
        g.change(
            GactParams::validate(
                &GactOpts {
                    action: Verdict::Shot,
                    random: None,
                },
                true,
            )
            .unwrap(),
        );
        assert_eq!(run(&mut g, 1), vec![Verdict::Pipe]);
        assert_eq!(
            GactParams::validate(
                &GactOpts {
                    action: Verdict::Ok,
                    random: Some(GactRandom {
                        kind: GactRandKind::Netrand,
                        action: Verdict::GotoChain(1),
                        pval: 2
                    })
                },
                true
            )
            .map(|_| ()),
            Err(TcError::inval("goto chain not allowed on fallback"))
        );
    }
}
