//! The connection table: what `-m state`, `-m conntrack`, `-m connmark` and
//! `CONNMARK` read and write.
//!
//! Modelled on net/netfilter/nf_conntrack_core.c with the protocol trackers
//! reduced to their timeouts. A connection is found by the 5-tuple of either
//! direction (protocol, addresses, ports; for ICMP echo the identifier), so
//! the reply of a connection finds the entry its first packet made. Its
//! state as the matches see it:
//!
//! - NEW: packets in the original direction until a reply has been seen;
//! - ESTABLISHED: replies, and everything after the first reply;
//! - INVALID: IPv4 packets whose tuple cannot be read (truncated headers).
//!
//! Timeouts are the kernel's defaults (nf_conntrack_proto_*.c): TCP 120 s
//! until the reply (SYN_SENT), 5 days established, 120 s after a FIN each
//! way (TIME_WAIT), 10 s after a RST; UDP 30 s unreplied, 120 s once both
//! directions are seen; ICMP 30 s; other protocols 600 s. Each packet
//! refreshes the timeout; an expired entry is forgotten when it is next
//! looked up, or when the collector reaches it: every new connection moves
//! a cursor a few entries on through the table and removes the expired ones
//! it passes (the kernel's garbage-collection worker also walks the table a
//! slice at a time), so a later packet of the same tuple starts a NEW
//! connection with mark 0 and the table does not fill up with the dead.
//!
//! The table holds at most `nf_conntrack_max` connections (262 144, what a
//! kernel on a machine with more than 4 GiB sets). A new connection beyond
//! that first tries an early drop (`early_drop`): of the few entries after
//! its own place in the table (the kernel looks in the next 8 hash buckets)
//! the first one that is not *assured* is evicted — a TCP connection is
//! assured once its handshake is complete (a reply, then another packet
//! from the originator), a UDP one once a reply was seen (as kernels before
//! 5.19 did), ICMP and other protocols never. If all of them are assured
//! the packet is dropped ("nf_conntrack: table full, dropping packet"),
//! which keeps established connections alive under a flood of new ones.
//! `early_drops` and `drops` count both outcomes (`conntrack -S`).
//!
//! Deviations: no TCP window tracking (sequence numbers are not checked, so
//! no packet is INVALID for being out of window; pick-up of mid-stream
//! connections is always allowed, as `nf_conntrack_tcp_loose=1`); no
//! expectations or helpers, so nothing is RELATED; NAT is not modelled;
//! which entry an early drop picks follows the table's tuple order, not the
//! kernel's randomly seeded hash. A connection is created when its first packet meets
//! the first hook, not when it leaves the last one (a dropped first packet
//! removes it again, as an unconfirmed entry is discarded).

use super::rule::{ct_state, Headers, PROTO_ICMP, PROTO_TCP, PROTO_UDP};
use crate::time::{Duration, Time};
use std::collections::BTreeMap;
use std::ops::Bound;

/// `nf_conntrack_max` on a machine with more than 4 GiB of memory.
pub const DEFAULT_MAX: usize = 262_144;

/// Entries an early drop looks at (`NF_CT_EVICTION_RANGE` buckets).
const EVICTION_RANGE: usize = 8;

/// Entries the collector passes for every new connection.
const GC_STEP: usize = 4;

/// A direction-specific identity of a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tuple {
    /// Protocol.
    pub proto: u8,
    /// Source address.
    pub src: u32,
    /// Destination address.
    pub dst: u32,
    /// Source port (ICMP: echo identifier).
    pub sport: u16,
    /// Destination port (ICMP: echo identifier).
    pub dport: u16,
}

impl Tuple {
    /// The tuple of a packet, if it can be read.
    pub fn of(h: &Headers) -> Option<Tuple> {
        let (sport, dport) = match h.proto {
            PROTO_TCP | PROTO_UDP => h.ports?,
            // Echo request (8) and reply (0) share the identifier; other ICMP
            // is tracked by addresses alone.
            PROTO_ICMP => match h.icmp? {
                (0 | 8, id) => (id, id),
                _ => (0, 0),
            },
            _ => (0, 0),
        };
        if h.later_fragment {
            return None;
        }
        Some(Tuple {
            proto: h.proto,
            src: h.src,
            dst: h.dst,
            sport,
            dport,
        })
    }

    /// The tuple of the other direction.
    pub fn reverse(&self) -> Tuple {
        Tuple {
            proto: self.proto,
            src: self.dst,
            dst: self.src,
            sport: self.dport,
            dport: self.sport,
        }
    }
}

/// Where a TCP connection is in its life, as far as timeouts care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TcpPhase {
    Open,
    Closing { fin_orig: bool, fin_reply: bool },
    Reset,
}

/// One tracked connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conn {
    /// The tuple of its first packet.
    pub orig: Tuple,
    /// `ct->mark`.
    pub mark: u32,
    /// Has a packet come back (the reply direction)?
    pub seen_reply: bool,
    /// When it is forgotten unless another packet comes.
    pub expires: Time,
    /// `IPS_ASSURED`: spared by early drops.
    pub assured: bool,
    tcp: TcpPhase,
}

/// Which direction of its connection a packet travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// Same as the first packet.
    Original,
    /// Back.
    Reply,
}

/// A packet's place in the table, found at its first hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CtRef {
    /// The connection's key (its original tuple).
    pub key: Tuple,
    /// The packet's direction.
    pub dir: Dir,
    /// The state bit the matches see.
    pub state: u8,
    /// Did this packet create the connection?
    pub created: bool,
}

/// What finding a packet's connection came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Its connection, found or new.
    Tracked(CtRef),
    /// No tuple can be read from it: untracked, INVALID to the matches.
    Untracked,
    /// The table is full and nothing could be evicted: drop the packet.
    Full,
}

/// The connection table of a namespace.
#[derive(Clone, Debug)]
pub struct Conntrack {
    conns: BTreeMap<Tuple, Conn>,
    reply_index: BTreeMap<Tuple, Tuple>,
    /// Where the collector goes on from.
    gc_cursor: Option<Tuple>,
    /// `nf_conntrack_max`: 0 means no limit, as in the kernel.
    pub max: usize,
    /// Connections evicted to make room (`early_drop`).
    pub early_drops: u64,
    /// Packets dropped because the table was full (`drop`).
    pub drops: u64,
}

impl Default for Conntrack {
    fn default() -> Self {
        Conntrack {
            conns: BTreeMap::new(),
            reply_index: BTreeMap::new(),
            gc_cursor: None,
            max: DEFAULT_MAX,
            early_drops: 0,
            drops: 0,
        }
    }
}

const SECS: fn(u64) -> Duration = Duration::from_secs;

impl Conntrack {
    /// Connections currently tracked (expired ones may linger until swept).
    pub fn len(&self) -> usize {
        self.conns.len()
    }

    /// Is the table empty?
    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    /// The connection with this original tuple.
    pub fn get(&self, key: &Tuple) -> Option<&Conn> {
        self.conns.get(key)
    }

    /// Every connection, by original tuple.
    pub fn iter(&self) -> impl Iterator<Item = &Conn> {
        self.conns.values()
    }

    fn remove(&mut self, key: &Tuple) {
        if let Some(c) = self.conns.remove(key) {
            self.reply_index.remove(&c.orig.reverse());
        }
    }

    /// Up to `n` keys from just after `from` on, wrapping around once.
    fn keys_after(&self, from: &Tuple, n: usize) -> Vec<Tuple> {
        let after = self.conns.range((Bound::Excluded(*from), Bound::Unbounded));
        let before = self.conns.range(..=*from);
        after.chain(before).take(n).map(|(k, _)| *k).collect()
    }

    /// Move the collector on: remove the expired among the next few entries.
    fn collect_garbage(&mut self, now: Time) {
        let Some(from) = self.gc_cursor.or_else(|| self.conns.keys().next().copied()) else {
            return;
        };
        let keys = self.keys_after(&from, GC_STEP);
        self.gc_cursor = keys.last().copied();
        for k in keys {
            if self.conns[&k].expires <= now {
                self.remove(&k);
            }
        }
    }

    /// Make room for `t` in a full table (`early_drop`): evict the first
    /// entry after it that is not assured; expired ones go on the way.
    /// False when there was nothing to evict.
    fn early_drop(&mut self, t: &Tuple, now: Time) -> bool {
        for k in self.keys_after(t, EVICTION_RANGE) {
            let c = &self.conns[&k];
            if c.expires <= now {
                self.remove(&k);
            } else if !c.assured {
                self.remove(&k);
                self.early_drops += 1;
            } else {
                continue;
            }
            if self.conns.len() < self.max {
                return true;
            }
        }
        false
    }

    /// Find or create the connection of a packet (`nf_conntrack_in`).
    pub fn lookup(&mut self, h: &Headers, now: Time) -> Lookup {
        let Some(t) = Tuple::of(h) else {
            return Lookup::Untracked;
        };
        if let Some((key, dir)) = self.locate(&t) {
            if self.conns[&key].expires > now {
                let c = &self.conns[&key];
                let state = if dir == Dir::Reply || c.seen_reply {
                    ct_state::ESTABLISHED
                } else {
                    ct_state::NEW
                };
                return Lookup::Tracked(CtRef {
                    key,
                    dir,
                    state,
                    created: false,
                });
            }
            self.remove(&key);
        }
        self.collect_garbage(now);
        if self.max != 0 && self.conns.len() >= self.max && !self.early_drop(&t, now) {
            self.drops += 1;
            return Lookup::Full;
        }
        self.conns.insert(
            t,
            Conn {
                orig: t,
                mark: 0,
                seen_reply: false,
                expires: now,
                assured: false,
                tcp: TcpPhase::Open,
            },
        );
        self.reply_index.insert(t.reverse(), t);
        Lookup::Tracked(CtRef {
            key: t,
            dir: Dir::Original,
            state: ct_state::NEW,
            created: true,
        })
    }

    /// The live connection a packet belongs to, in either direction, if
    /// any (a lookup that creates nothing).
    pub fn find(&self, h: &Headers, now: Time) -> Option<&Conn> {
        let (key, _) = self.locate(&Tuple::of(h)?)?;
        self.conns.get(&key).filter(|c| c.expires > now)
    }

    /// The key of the connection tuple `t` belongs to, and its direction.
    fn locate(&self, t: &Tuple) -> Option<(Tuple, Dir)> {
        if self.conns.contains_key(t) {
            Some((*t, Dir::Original))
        } else {
            self.reply_index.get(t).map(|k| (*k, Dir::Reply))
        }
    }

    /// The mark of a packet's connection.
    pub fn mark(&self, r: &CtRef) -> u32 {
        self.conns.get(&r.key).map_or(0, |c| c.mark)
    }

    /// Set the mark of a packet's connection.
    pub fn set_mark(&mut self, r: &CtRef, mark: u32) {
        if let Some(c) = self.conns.get_mut(&r.key) {
            c.mark = mark;
        }
    }

    /// Forget a connection its first packet created, when that packet was dropped.
    pub fn discard(&mut self, r: &CtRef) {
        if r.created {
            self.remove(&r.key);
        }
    }

    /// The packet has passed: note a reply, follow TCP's FIN/RST, refresh the timeout.
    pub fn update(&mut self, r: &CtRef, h: &Headers, now: Time) {
        let Some(c) = self.conns.get_mut(&r.key) else {
            return;
        };
        match (r.dir, c.orig.proto) {
            (Dir::Reply, PROTO_UDP) => c.assured = true,
            // The handshake's last ACK: the originator speaks after a reply.
            (Dir::Original, PROTO_TCP) if c.seen_reply && c.tcp == TcpPhase::Open => {
                c.assured = true
            }
            _ => {}
        }
        if r.dir == Dir::Reply {
            c.seen_reply = true;
        }
        let timeout = match c.orig.proto {
            PROTO_TCP => {
                let f = h.tcp_flags.unwrap_or(0);
                if f & super::rule::tcp_flag::RST != 0 {
                    c.tcp = TcpPhase::Reset;
                } else if f & super::rule::tcp_flag::FIN != 0 {
                    let (mut o, mut p) = match c.tcp {
                        TcpPhase::Closing {
                            fin_orig,
                            fin_reply,
                        } => (fin_orig, fin_reply),
                        _ => (false, false),
                    };
                    match r.dir {
                        Dir::Original => o = true,
                        Dir::Reply => p = true,
                    }
                    c.tcp = TcpPhase::Closing {
                        fin_orig: o,
                        fin_reply: p,
                    };
                }
                match c.tcp {
                    TcpPhase::Reset => SECS(10),
                    TcpPhase::Closing {
                        fin_orig: true,
                        fin_reply: true,
                    } => SECS(120),
                    TcpPhase::Closing { .. } => SECS(120),
                    TcpPhase::Open if !c.seen_reply => SECS(120),
                    TcpPhase::Open => SECS(432_000),
                }
            }
            PROTO_UDP if c.seen_reply => SECS(120),
            PROTO_UDP => SECS(30),
            PROTO_ICMP => SECS(30),
            _ => SECS(600),
        };
        c.expires = Time(now.0.saturating_add(timeout.as_nanos()));
    }
}
