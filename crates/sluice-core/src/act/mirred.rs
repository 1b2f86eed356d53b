//! mirred: send a packet, or a copy of it, to another device's egress or ingress.
//!
//! Modelled on net/sched/act_mirred.c. The four modes are egress or ingress
//! crossed with redirect (the packet goes; the verdict defaults to `stolen`)
//! or mirror (a copy goes; the verdict defaults to `pipe`, so the original
//! carries on). The configured control action is the verdict in every case.
//!
//! A sans-IO core cannot hand a packet to another device itself: the action
//! puts what it sends in the namespace's [`MirredOutbox`], and the front end
//! that owns the devices takes it from there after the enqueue or receive
//! that ran the action ([`crate::act::ActionTable::take_mirrored`]) — to the
//! target's root qdisc for egress, to its ingress path for ingress. The front
//! end applies the kernel's two safety rules with [`Mirrored::launch`]: a
//! packet redirected more than [`MIRRED_NEST_LIMIT`] times in a row is
//! dropped, and one sent to a device that is missing or down is dropped (the
//! kernel then counts an overlimit on the action; sluice's action does not
//! learn of it). The outbox is bounded
//! ([`OUTBOX_LIMIT`]): when a front end leaves it full, the action takes the
//! kernel's "cannot do" path — an overlimit, and a redirect becomes a drop.
//!
//! The target is kept by interface index, as the kernel keeps a device
//! reference; a target deleted later shows as `*` in dumps.

use super::{check_ctrlact, Action, ActionOpts};
use crate::cls::Verdict;
use crate::device::Device;
use crate::error::{TcError, TcResult};
use crate::packet::Packet;
use crate::time::Time;
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};

/// How many redirects in a row a packet may take (`MIRRED_NEST_LIMIT`).
pub const MIRRED_NEST_LIMIT: u32 = 4;

/// Packets the outbox holds for a front end that does not take them; more
/// are dropped (a front end that delivers takes them after every packet).
pub const OUTBOX_LIMIT: usize = 1024;

/// `tc_mirred.eaction`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MirredMode {
    /// `TCA_EGRESS_REDIR` (1).
    EgressRedirect,
    /// `TCA_EGRESS_MIRROR` (2).
    EgressMirror,
    /// `TCA_INGRESS_REDIR` (3).
    IngressRedirect,
    /// `TCA_INGRESS_MIRROR` (4).
    IngressMirror,
}

impl MirredMode {
    /// Into the target's ingress path (else its egress qdisc).
    pub fn ingress(self) -> bool {
        matches!(
            self,
            MirredMode::IngressRedirect | MirredMode::IngressMirror
        )
    }
    /// The packet itself goes (else a copy).
    pub fn redirect(self) -> bool {
        matches!(
            self,
            MirredMode::EgressRedirect | MirredMode::IngressRedirect
        )
    }
}

/// The mirred options tc sends (`TCA_MIRRED_PARMS`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MirredOpts {
    /// The mode; `None` when tc sent none (`mirred index N` only binds).
    pub mode: Option<MirredMode>,
    /// Target interface index; 0 when tc named no device.
    pub ifindex: u32,
    /// The control action (the verdict).
    pub action: Verdict,
}

/// One packet the action sent, for the front end to deliver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mirrored {
    /// Target interface index.
    pub ifindex: u32,
    /// Into the target's ingress path (else its egress qdisc).
    pub ingress: bool,
    /// The packet (the original for a redirect, a copy for a mirror).
    pub pkt: Packet,
}

impl Mirrored {
    /// Ready what the action sent to go on, as `tcf_mirred_act` does once it
    /// holds the target: the target's index in `devices` (the namespace's)
    /// and the packet, marked with where it came from — `skb_iif` and
    /// `from_ingress`, where an ifb device hands it back — and, when it was
    /// taken at an ingress (`at_ingress`, on device index `from`), with the
    /// MAC header that path had pulled pushed back on: an egress target sends
    /// whole frames, and an ingress target's filters pull it again.
    ///
    /// `None`, and the packet is dropped, when the target is gone or down, or
    /// when the packet has been sent on more than [`MIRRED_NEST_LIMIT`] times
    /// (a redirect loop).
    pub fn launch(
        self,
        devices: &[Device],
        from: usize,
        at_ingress: bool,
    ) -> Option<(usize, Packet)> {
        let origin = devices.get(from)?;
        let target = devices
            .iter()
            .position(|d| d.ifindex == self.ifindex && d.up)?;
        let mut pkt = self.pkt;
        if at_ingress {
            pkt.len += origin.info.hard_header_len;
        }
        pkt.skb_iif = origin.ifindex;
        pkt.from_ingress = at_ingress;
        pkt.redirects = pkt.redirects.saturating_add(1);
        (pkt.redirects as u32 <= MIRRED_NEST_LIMIT).then_some((target, pkt))
    }
}

/// Where a namespace's mirred actions leave what they send.
pub type MirredOutbox = Arc<Mutex<Vec<Mirrored>>>;

/// Validated mirred parameters.
#[derive(Clone, Debug)]
pub struct MirredParams {
    mode: MirredMode,
    ifindex: u32,
    action: Verdict,
}

impl MirredParams {
    pub(crate) fn validate(o: &MirredOpts, in_filter: bool, creating: bool) -> TcResult<Self> {
        let mode = o
            .mode
            .ok_or_else(|| TcError::inval("act_mirred: Unknown mirred option"))?;
        if creating && o.ifindex == 0 {
            return Err(TcError::inval(
                "act_mirred: Specified device does not exist",
            ));
        }
        check_ctrlact(o.action, in_filter)?;
        Ok(MirredParams {
            mode,
            ifindex: o.ifindex,
            action: o.action,
        })
    }
}

/// A mirred action.
#[derive(Debug)]
pub struct Mirred {
    p: MirredParams,
    outbox: MirredOutbox,
    overlimits: u64,
}

impl Mirred {
    pub(crate) fn new(p: MirredParams, outbox: MirredOutbox) -> Self {
        Mirred {
            p,
            outbox,
            overlimits: 0,
        }
    }

    pub(crate) fn change(&mut self, p: MirredParams) {
        // A replace without a device keeps the old one, as the kernel does.
        let ifindex = if p.ifindex == 0 {
            self.p.ifindex
        } else {
            p.ifindex
        };
        self.p = MirredParams { ifindex, ..p };
    }
}

impl Action for Mirred {
    fn kind(&self) -> &'static str {
        "mirred"
    }

    fn act(&mut self, pkt: &mut Packet, _now: Time) -> Verdict {
        let mut outbox = self.outbox.lock().unwrap_or_else(|e| e.into_inner());
        if outbox.len() >= OUTBOX_LIMIT {
            // The kernel's "can't do" path: a redirect becomes a drop.
            self.overlimits += 1;
            return if self.p.mode.redirect() {
                Verdict::Shot
            } else {
                self.p.action
            };
        }
        outbox.push(Mirrored {
            ifindex: self.p.ifindex,
            ingress: self.p.mode.ingress(),
            pkt: pkt.clone(),
        });
        // A redirect whose verdict lets the packet go on (pipe, continue...)
        // sends a copy, as the kernel does when it cannot hand the packet over.
        self.p.action
    }

    fn drops(&self) -> u64 {
        0
    }

    fn overlimits(&self) -> u64 {
        self.overlimits
    }

    fn dump(&self) -> ActionOpts {
        ActionOpts::Mirred(MirredOpts {
            mode: Some(self.p.mode),
            ifindex: self.p.ifindex,
            action: self.p.action,
        })
    }

    fn control(&self) -> Verdict {
        self.p.action
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Skb;

    fn opts(mode: Option<MirredMode>, ifindex: u32, action: Verdict) -> MirredOpts {
        MirredOpts {
            mode,
            ifindex,
            action,
        }
    }

    #[test]
    fn refusals_as_the_kernel_words_them() {
        let e = MirredParams::validate(&opts(None, 3, Verdict::Stolen), false, true).unwrap_err();
        assert_eq!(e.describe(), "Error: act_mirred: Unknown mirred option.");
        let e = MirredParams::validate(
            &opts(Some(MirredMode::EgressRedirect), 0, Verdict::Stolen),
            false,
            true,
        )
        .unwrap_err();
        assert_eq!(
            e.describe(),
            "Error: act_mirred: Specified device does not exist."
        );
    }

    #[test]
    fn redirect_and_mirror_send_the_packet_and_answer_their_verdict() {
        let outbox = MirredOutbox::default();
        let p = MirredParams::validate(
            &opts(Some(MirredMode::IngressRedirect), 7, Verdict::Stolen),
            true,
            true,
        )
        .unwrap();
        let mut m = Mirred::new(p, outbox.clone());
        let mut pkt = Packet::from(Skb {
            len: 100,
            id: 9,
            ..Default::default()
        });
        assert_eq!(m.act(&mut pkt, Time(0)), Verdict::Stolen);
        let p = MirredParams::validate(
            &opts(Some(MirredMode::EgressMirror), 8, Verdict::Pipe),
            true,
            false,
        )
        .unwrap();
        m.change(p);
        assert_eq!(m.act(&mut pkt, Time(0)), Verdict::Pipe);
        let sent = std::mem::take(&mut *outbox.lock().unwrap());
        let got: Vec<_> = sent
            .iter()
            .map(|s| (s.ifindex, s.ingress, s.pkt.id))
            .collect();
        assert_eq!(got, [(7, true, 9), (8, false, 9)]);
    }

    #[test]
    fn a_full_outbox_turns_redirects_into_drops() {
        let outbox = MirredOutbox::default();
        let p = MirredParams::validate(
            &opts(Some(MirredMode::EgressRedirect), 7, Verdict::Stolen),
            true,
            true,
        )
        .unwrap();
        let mut m = Mirred::new(p, outbox.clone());
        let mut pkt = Packet::default();
        for _ in 0..OUTBOX_LIMIT {
            assert_eq!(m.act(&mut pkt, Time(0)), Verdict::Stolen);
        }
        assert_eq!(m.act(&mut pkt, Time(0)), Verdict::Shot);
        assert_eq!(
            (m.overlimits(), outbox.lock().unwrap().len()),
            (1, OUTBOX_LIMIT)
        );
    }
}
