//! netfilter: the iptables tables a packet crosses before it meets tc.
//!
//! Linux's IPv4 stack calls netfilter at five hooks: PREROUTING (every
//! packet that arrives, before routing), INPUT (delivered to this host),
//! FORWARD (routed through), OUTPUT (generated here) and POSTROUTING (every
//! packet leaving, just before the egress qdisc). At each hook the tables
//! that have a chain there run in priority order — mangle, then filter —
//! and each chain's rules are tried in order: a rule whose matches all hold
//! counts the packet and runs its target. A terminal target (ACCEPT, DROP)
//! ends the table at this hook; a non-terminal one (MARK, CONNMARK,
//! CLASSIFY, DSCP) changes the packet and goes on to the next rule; a jump
//! enters a user chain, and RETURN (or its end) comes back; the end of a
//! built-in chain applies its policy, counted in the chain's own counters.
//! The mark a rule sets stays on the packet (`skb->mark`) down to the egress
//! qdisc, where the fw classifier reads it; CLASSIFY sets `skb->priority`,
//! which HTB, PRIO and others take as a class id.
//!
//! What is modelled (after net/ipv4/netfilter/ip_tables.c and the xt_*
//! modules): the mangle table (all five hooks) and the filter table (INPUT,
//! FORWARD, OUTPUT), user chains, the matches and targets of [`rule`], per
//! rule packet/byte counters (bytes of IP packet), and a connection table
//! ([`conntrack`]) for `-m state`/`-m conntrack`/`-m connmark`/`CONNMARK`.
//! Changes are made as iptables makes them: the whole table is rebuilt and
//! checked (loops, targets in hooks that refuse them), then swapped in, so a
//! refused change leaves the old table whole. The nat, raw and security
//! tables are not modelled; the language refuses them. IPv6 packets pass
//! untouched (that is ip6tables).

pub mod conntrack;
pub mod rule;

use crate::packet::{ConnMark, Packet};
use crate::time::Time;
use conntrack::{Conntrack, CtRef, Lookup};
use rule::{Counters, Headers, MatchCtx, Rule, RuleSpec, Target};
use serde::{Deserialize, Serialize};

/// A netfilter hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Hook {
    /// Arriving, before routing.
    Prerouting,
    /// Delivered locally.
    Input,
    /// Routed through.
    Forward,
    /// Generated locally.
    Output,
    /// Leaving, after routing.
    Postrouting,
}

impl Hook {
    /// Every hook, in the order iptables lists the built-in chains.
    pub const ALL: [Hook; 5] = [
        Hook::Prerouting,
        Hook::Input,
        Hook::Forward,
        Hook::Output,
        Hook::Postrouting,
    ];

    /// The built-in chain's name.
    pub fn chain_name(self) -> &'static str {
        match self {
            Hook::Prerouting => "PREROUTING",
            Hook::Input => "INPUT",
            Hook::Forward => "FORWARD",
            Hook::Output => "OUTPUT",
            Hook::Postrouting => "POSTROUTING",
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// A table sluice models.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TableId {
    /// `-t filter` (the default): INPUT, FORWARD, OUTPUT.
    Filter,
    /// `-t mangle`: all five hooks.
    Mangle,
}

impl TableId {
    /// The table's name.
    pub fn name(self) -> &'static str {
        match self {
            TableId::Filter => "filter",
            TableId::Mangle => "mangle",
        }
    }

    /// The hooks it has built-in chains at.
    pub fn hooks(self) -> &'static [Hook] {
        match self {
            TableId::Filter => &[Hook::Input, Hook::Forward, Hook::Output],
            TableId::Mangle => &Hook::ALL,
        }
    }
}

/// A built-in chain's policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Policy {
    /// ACCEPT.
    Accept,
    /// DROP.
    Drop,
}

/// A chain: built-in (with a hook and policy) or user-defined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chain {
    /// Its name.
    pub name: String,
    /// The hook of a built-in chain.
    pub hook: Option<Hook>,
    /// The policy of a built-in chain.
    pub policy: Policy,
    /// Packets the policy decided.
    pub policy_counters: Counters,
    /// Its rules.
    pub rules: Vec<Rule>,
}

/// Why a change was refused, in the words iptables prints after `iptables: `.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NfError {
    /// ENOENT.
    #[error("No chain/target/match by that name.")]
    NoChain,
    /// EEXIST.
    #[error("Chain already exists.")]
    ChainExists,
    /// `-D N` past the end.
    #[error("Index of deletion too big.")]
    DeleteIndex,
    /// `-I N` past the end + 1.
    #[error("Index of insertion too big.")]
    InsertIndex,
    /// `-R N` past the end.
    #[error("Index of replacement too big.")]
    ReplaceIndex,
    /// `-D RULE` with no such rule.
    #[error("Bad rule (does a matching rule exist in that chain?).")]
    BadRule,
    /// A jump would make a loop (ELOOP).
    #[error("Too many levels of symbolic links.")]
    Loop,
    /// `-X` of a chain still jumped to (EMLINK).
    #[error("Too many links.")]
    InUse,
    /// `-X` of a chain with rules (ENOTEMPTY).
    #[error("Directory not empty.")]
    NotEmpty,
    /// EINVAL: the kernel refused the table (a target in a hook or table
    /// that does not allow it, a match on the wrong protocol, `-X` of a
    /// built-in chain).
    #[error("Invalid argument. Run `dmesg' for more information.")]
    Invalid,
    /// `-P` with a target other than ACCEPT/DROP.
    #[error("Bad policy name. Run `dmesg' for more information.")]
    BadPolicy,
    /// `-P` on a user chain.
    #[error("Bad built-in chain name.")]
    NotBuiltin,
}

/// One table: built-in chains in hook order, then user chains by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    /// Which table.
    pub id: TableId,
    /// Its chains.
    pub chains: Vec<Chain>,
}

impl Table {
    /// The table as the kernel creates it: empty built-in chains, policy ACCEPT.
    pub fn new(id: TableId) -> Self {
        Table {
            id,
            chains: id
                .hooks()
                .iter()
                .map(|h| Chain {
                    name: h.chain_name().to_string(),
                    hook: Some(*h),
                    policy: Policy::Accept,
                    policy_counters: Counters::default(),
                    rules: vec![],
                })
                .collect(),
        }
    }

    /// The chain called `name`.
    pub fn chain(&self, name: &str) -> Option<&Chain> {
        self.chains.iter().find(|c| c.name == name)
    }

    fn chain_ix(&self, name: &str) -> Result<usize, NfError> {
        self.chains
            .iter()
            .position(|c| c.name == name)
            .ok_or(NfError::NoChain)
    }

    /// How many rules jump to `name`.
    pub fn references(&self, name: &str) -> usize {
        self.chains
            .iter()
            .flat_map(|c| &c.rules)
            .filter(|r| matches!(&r.spec.target, Target::Jump(t) if t == name))
            .count()
    }

    /// Apply `edit` to a copy, check the copy as the kernel checks a new
    /// table, and keep it only if it passes.
    fn commit(
        &mut self,
        edit: impl FnOnce(&mut Table) -> Result<(), NfError>,
    ) -> Result<(), NfError> {
        let mut next = self.clone();
        edit(&mut next)?;
        next.check()?;
        *self = next;
        Ok(())
    }

    /// The kernel's `translate_table` checks: every jump names a chain, no
    /// chain reaches itself, and each target and match is allowed in the
    /// table and at every hook its chain is reachable from.
    fn check(&self) -> Result<(), NfError> {
        let n = self.chains.len();
        let mut hooks = vec![0u8; n];
        for (i, c) in self.chains.iter().enumerate() {
            if let Some(h) = c.hook {
                let mut path = vec![];
                self.mark_reachable(i, h.bit(), &mut hooks, &mut path)?;
            }
        }
        for (i, c) in self.chains.iter().enumerate() {
            for r in &c.rules {
                check_rule(self.id, &r.spec, hooks[i])?;
            }
        }
        Ok(())
    }

    fn mark_reachable(
        &self,
        i: usize,
        bit: u8,
        hooks: &mut [u8],
        path: &mut Vec<usize>,
    ) -> Result<(), NfError> {
        if path.contains(&i) {
            return Err(NfError::Loop);
        }
        hooks[i] |= bit;
        path.push(i);
        for r in &self.chains[i].rules {
            if let Target::Jump(t) = &r.spec.target {
                let j = self.chain_ix(t)?;
                if self.chains[j].hook.is_some() {
                    return Err(NfError::Invalid);
                }
                self.mark_reachable(j, bit, hooks, path)?;
            }
        }
        path.pop();
        Ok(())
    }

    /// `-A`.
    pub fn append(&mut self, chain: &str, spec: RuleSpec) -> Result<(), NfError> {
        self.commit(|t| {
            let i = t.chain_ix(chain)?;
            t.chains[i].rules.push(Rule {
                spec,
                counters: Counters::default(),
            });
            Ok(())
        })
    }

    /// `-I CHAIN N` (1-based).
    pub fn insert(&mut self, chain: &str, num: usize, spec: RuleSpec) -> Result<(), NfError> {
        self.commit(|t| {
            let i = t.chain_ix(chain)?;
            let rules = &mut t.chains[i].rules;
            if num == 0 || num > rules.len() + 1 {
                return Err(NfError::InsertIndex);
            }
            rules.insert(
                num - 1,
                Rule {
                    spec,
                    counters: Counters::default(),
                },
            );
            Ok(())
        })
    }

    /// `-R CHAIN N` (1-based); the new rule starts with zero counters.
    pub fn replace(&mut self, chain: &str, num: usize, spec: RuleSpec) -> Result<(), NfError> {
        self.commit(|t| {
            let i = t.chain_ix(chain)?;
            let rules = &mut t.chains[i].rules;
            if num == 0 || num > rules.len() {
                return Err(NfError::ReplaceIndex);
            }
            rules[num - 1] = Rule {
                spec,
                counters: Counters::default(),
            };
            Ok(())
        })
    }

    /// `-D CHAIN N` (1-based).
    pub fn delete_num(&mut self, chain: &str, num: usize) -> Result<(), NfError> {
        self.commit(|t| {
            let i = t.chain_ix(chain)?;
            let rules = &mut t.chains[i].rules;
            if num == 0 || num > rules.len() {
                return Err(NfError::DeleteIndex);
            }
            rules.remove(num - 1);
            Ok(())
        })
    }

    /// `-D CHAIN RULE`: the first rule equal to `spec`.
    pub fn delete_spec(&mut self, chain: &str, spec: &RuleSpec) -> Result<(), NfError> {
        self.commit(|t| {
            let i = t.chain_ix(chain)?;
            let rules = &mut t.chains[i].rules;
            let at = rules
                .iter()
                .position(|r| r.spec == *spec)
                .ok_or(NfError::BadRule)?;
            rules.remove(at);
            Ok(())
        })
    }

    /// `-F [CHAIN]`.
    pub fn flush(&mut self, chain: Option<&str>) -> Result<(), NfError> {
        self.commit(|t| {
            match chain {
                Some(c) => {
                    let i = t.chain_ix(c)?;
                    t.chains[i].rules.clear();
                }
                None => t.chains.iter_mut().for_each(|c| c.rules.clear()),
            }
            Ok(())
        })
    }

    /// `-Z [CHAIN]`: rule counters and policy counters to zero.
    pub fn zero(&mut self, chain: Option<&str>) -> Result<(), NfError> {
        let zero = |c: &mut Chain| {
            c.policy_counters = Counters::default();
            c.rules
                .iter_mut()
                .for_each(|r| r.counters = Counters::default());
        };
        match chain {
            Some(name) => {
                let i = self.chain_ix(name)?;
                zero(&mut self.chains[i])
            }
            None => self.chains.iter_mut().for_each(zero),
        }
        Ok(())
    }

    /// `-N CHAIN`: user chains are kept sorted by name (bytewise), as iptables lists them.
    pub fn new_chain(&mut self, name: &str) -> Result<(), NfError> {
        if self.chain(name).is_some() {
            return Err(NfError::ChainExists);
        }
        let builtins = self.id.hooks().len();
        let at = builtins
            + self.chains[builtins..]
                .iter()
                .take_while(|c| c.name.as_bytes() < name.as_bytes())
                .count();
        self.chains.insert(
            at,
            Chain {
                name: name.to_string(),
                hook: None,
                policy: Policy::Accept,
                policy_counters: Counters::default(),
                rules: vec![],
            },
        );
        Ok(())
    }

    /// `-X [CHAIN]`: a user chain that nothing jumps to and that has no
    /// rules; without a name, every user chain, one by one.
    pub fn delete_chain(&mut self, name: Option<&str>) -> Result<(), NfError> {
        match name {
            Some(n) => {
                let i = self.chain_ix(n)?;
                if self.chains[i].hook.is_some() {
                    return Err(NfError::Invalid);
                }
                if self.references(n) > 0 {
                    return Err(NfError::InUse);
                }
                if !self.chains[i].rules.is_empty() {
                    return Err(NfError::NotEmpty);
                }
                self.chains.remove(i);
                Ok(())
            }
            None => {
                let users: Vec<String> = self
                    .chains
                    .iter()
                    .filter(|c| c.hook.is_none())
                    .map(|c| c.name.clone())
                    .collect();
                for u in users {
                    self.delete_chain(Some(&u))?;
                }
                Ok(())
            }
        }
    }

    /// `-E OLD NEW`: rename a user chain; jumps to it follow.
    pub fn rename_chain(&mut self, old: &str, new: &str) -> Result<(), NfError> {
        let i = self.chain_ix(old)?;
        if self.chains[i].hook.is_some() {
            return Err(NfError::Invalid);
        }
        if self.chain(new).is_some() {
            return Err(NfError::ChainExists);
        }
        let mut c = self.chains.remove(i);
        c.name = new.to_string();
        for r in self
            .chains
            .iter_mut()
            .flat_map(|c| c.rules.iter_mut())
            .chain(c.rules.iter_mut())
        {
            if matches!(&r.spec.target, Target::Jump(t) if t == old) {
                r.spec.target = Target::Jump(new.to_string());
            }
        }
        let builtins = self.id.hooks().len();
        let at = builtins
            + self.chains[builtins..]
                .iter()
                .take_while(|x| x.name.as_bytes() < new.as_bytes())
                .count();
        self.chains.insert(at, c);
        Ok(())
    }

    /// `-P CHAIN ACCEPT|DROP`.
    pub fn set_policy(&mut self, chain: &str, policy: &str) -> Result<(), NfError> {
        let i = self.chain_ix(chain)?;
        if self.chains[i].hook.is_none() {
            return Err(NfError::NotBuiltin);
        }
        self.chains[i].policy = match policy {
            "ACCEPT" => Policy::Accept,
            "DROP" => Policy::Drop,
            _ => return Err(NfError::BadPolicy),
        };
        Ok(())
    }
}

/// The kernel's per-extension `checkentry`: which tables and hooks allow a
/// target, and the protocol a port match needs.
fn check_rule(table: TableId, spec: &RuleSpec, hooks: u8) -> Result<(), NfError> {
    let only = |allowed: &[Hook]| {
        let mask: u8 = allowed.iter().map(|h| h.bit()).fold(0, |a, b| a | b);
        hooks & !mask == 0
    };
    let ok = match &spec.target {
        // xt_CLASSIFY: any table, at FORWARD, OUTPUT, POSTROUTING.
        Target::Classify(_) => only(&[Hook::Forward, Hook::Output, Hook::Postrouting]),
        // xt_DSCP: mangle only.
        Target::Dscp(_) => table == TableId::Mangle,
        _ => true,
    };
    if !ok {
        return Err(NfError::Invalid);
    }
    for m in &spec.matches {
        let need = match m {
            rule::Match::Tcp { .. } => Some(rule::PROTO_TCP),
            rule::Match::Udp { .. } => Some(rule::PROTO_UDP),
            _ => None,
        };
        if let Some(p) = need {
            if spec.proto.v != p || spec.proto.inv {
                return Err(NfError::Invalid);
            }
        }
    }
    Ok(())
}

/// What the hooks decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Go on.
    Accept,
    /// Dropped by a rule or a policy.
    Drop,
}

/// A namespace's netfilter: its tables and connection table.
#[derive(Clone, Debug)]
pub struct Netfilter {
    /// `-t filter`.
    pub filter: Table,
    /// `-t mangle`.
    pub mangle: Table,
    /// Tracked connections.
    pub conntrack: Conntrack,
}

impl Default for Netfilter {
    fn default() -> Self {
        Netfilter {
            filter: Table::new(TableId::Filter),
            mangle: Table::new(TableId::Mangle),
            conntrack: Conntrack::default(),
        }
    }
}

/// The interfaces a packet has at its hooks.
#[derive(Clone, Copy, Debug, Default)]
pub struct Ifaces<'a> {
    /// Where it came in (PREROUTING, INPUT, FORWARD).
    pub iif: Option<&'a str>,
    /// Where it goes out (FORWARD, OUTPUT, POSTROUTING).
    pub oif: Option<&'a str>,
}

/// Everything a chain walk needs beside the table.
struct Walk<'a> {
    h: Headers,
    ct: Option<CtRef>,
    ifaces: Ifaces<'a>,
}

enum ChainEnd {
    Accept,
    Drop,
    Fallthrough,
}

impl Netfilter {
    /// No rules anywhere and every policy ACCEPT: the hooks do nothing, and
    /// connections are not tracked (as in Linux, where conntrack runs only
    /// once a rule needs it).
    pub fn is_idle(&self) -> bool {
        [&self.filter, &self.mangle].iter().all(|t| {
            t.chains
                .iter()
                .all(|c| c.rules.is_empty() && c.policy == Policy::Accept)
        })
    }

    /// A table.
    pub fn table(&self, id: TableId) -> &Table {
        match id {
            TableId::Filter => &self.filter,
            TableId::Mangle => &self.mangle,
        }
    }

    /// A table, mutably.
    pub fn table_mut(&mut self, id: TableId) -> &mut Table {
        match id {
            TableId::Filter => &mut self.filter,
            TableId::Mangle => &mut self.mangle,
        }
    }

    /// Run a packet through `hooks` in order (e.g. `[Output, Postrouting]`
    /// for a locally generated packet), finding or creating its connection
    /// first. The interfaces are those the packet has at each hook: `iif`
    /// is shown to PREROUTING/INPUT/FORWARD, `oif` to FORWARD/OUTPUT/POSTROUTING.
    pub fn traverse(
        &mut self,
        hooks: &[Hook],
        pkt: &mut Packet,
        ifaces: Ifaces,
        now: Time,
    ) -> Verdict {
        if self.is_idle() {
            return Verdict::Accept;
        }
        let Some(h) = Headers::parse(pkt) else {
            return Verdict::Accept;
        };
        let ct = match self.conntrack.lookup(&h, now) {
            Lookup::Tracked(r) => Some(r),
            Lookup::Untracked => None,
            Lookup::Full => return Verdict::Drop,
        };
        let mut w = Walk { h, ct, ifaces };
        for &hook in hooks {
            let shown = Ifaces {
                iif: (hook != Hook::Output && hook != Hook::Postrouting)
                    .then_some(ifaces.iif)
                    .flatten(),
                oif: (hook != Hook::Prerouting && hook != Hook::Input)
                    .then_some(ifaces.oif)
                    .flatten(),
            };
            w.ifaces = shown;
            for id in [TableId::Mangle, TableId::Filter] {
                if !self.table(id).id.hooks().contains(&hook) {
                    continue;
                }
                if self.run_hook(id, hook, pkt, &mut w) == Verdict::Drop {
                    if let Some(r) = &w.ct {
                        self.conntrack.discard(r);
                    }
                    return Verdict::Drop;
                }
            }
        }
        if let Some(r) = &w.ct {
            self.conntrack.update(r, &w.h, now);
            // The skb keeps its connection (`skb->_nfct`) for tc to read.
            pkt.conn = Some(ConnMark {
                mark: self.conntrack.mark(r),
                attached: true,
            });
        }
        Verdict::Accept
    }

    /// The connection a packet no hook has seen belongs to, found by its
    /// tuple without creating one (`nf_conntrack_find_get`): what tc's
    /// connmark and ctinfo actions find on ingress. `None` while nothing
    /// tracks connections (no rules loaded).
    pub fn connection(&self, pkt: &Packet, now: Time) -> Option<ConnMark> {
        if self.is_idle() {
            return None;
        }
        let c = self.conntrack.find(&Headers::parse(pkt)?, now)?;
        Some(ConnMark {
            mark: c.mark,
            attached: false,
        })
    }

    fn run_hook(&mut self, id: TableId, hook: Hook, pkt: &mut Packet, w: &mut Walk) -> Verdict {
        let Ok(start) = self.table(id).chain_ix(hook.chain_name()) else {
            return Verdict::Accept;
        };
        match self.run_chain(id, start, pkt, w, 0) {
            ChainEnd::Accept => Verdict::Accept,
            ChainEnd::Drop => Verdict::Drop,
            ChainEnd::Fallthrough => {
                let len = u64::from(w.h.len);
                let c = &mut self.table_mut(id).chains[start];
                c.policy_counters.add(len);
                match c.policy {
                    Policy::Accept => Verdict::Accept,
                    Policy::Drop => Verdict::Drop,
                }
            }
        }
    }

    fn run_chain(
        &mut self,
        id: TableId,
        ci: usize,
        pkt: &mut Packet,
        w: &mut Walk,
        depth: usize,
    ) -> ChainEnd {
        // The table check refuses loops, so depth is bounded by the chain count.
        let nrules = self.table(id).chains[ci].rules.len();
        for ri in 0..nrules {
            let ctmark = w.ct.as_ref().map_or(0, |r| self.conntrack.mark(r));
            let ctstate = w.ct.as_ref().map_or(rule::ct_state::INVALID, |r| r.state);
            let ctx = MatchCtx {
                h: &w.h,
                mark: pkt.mark,
                ctmark,
                ctstate,
                iif: w.ifaces.iif,
                oif: w.ifaces.oif,
            };
            let table = self.table(id);
            let r = &table.chains[ci].rules[ri];
            if !r.spec.matches(&ctx) {
                continue;
            }
            let target = r.spec.target.clone();
            let len = u64::from(w.h.len);
            self.table_mut(id).chains[ci].rules[ri].counters.add(len);
            match target {
                Target::None => {}
                Target::Accept => return ChainEnd::Accept,
                Target::Drop => return ChainEnd::Drop,
                Target::Return => return ChainEnd::Fallthrough,
                Target::Jump(name) => {
                    let Ok(j) = self.table(id).chain_ix(&name) else {
                        continue;
                    };
                    if depth > self.table(id).chains.len() {
                        continue;
                    }
                    match self.run_chain(id, j, pkt, w, depth + 1) {
                        ChainEnd::Fallthrough => {}
                        end => return end,
                    }
                }
                Target::Mark { value, mask } => pkt.mark = (pkt.mark & !mask) ^ value,
                Target::Connmark(op) => self.connmark(op, pkt, w),
                Target::Classify(class) => pkt.priority = class,
                Target::Dscp(dscp) => {
                    if w.h.tos >> 2 != dscp {
                        rule::set_dscp(pkt, dscp);
                        w.h.tos = (w.h.tos & 3) | (dscp << 2);
                    }
                }
            }
        }
        ChainEnd::Fallthrough
    }

    fn connmark(&mut self, op: rule::ConnmarkOp, pkt: &mut Packet, w: &Walk) {
        let Some(r) = &w.ct else { return };
        let ct = self.conntrack.mark(r);
        match op {
            rule::ConnmarkOp::Set { value, ctmask } => {
                self.conntrack.set_mark(r, (ct & !ctmask) ^ value)
            }
            rule::ConnmarkOp::Save { nfmask, ctmask } => self
                .conntrack
                .set_mark(r, (ct & !ctmask) ^ (pkt.mark & nfmask)),
            rule::ConnmarkOp::Restore { nfmask, ctmask } => {
                pkt.mark = (pkt.mark & !nfmask) ^ (ct & ctmask)
            }
        }
    }
}

#[cfg(test)]
mod tests;
