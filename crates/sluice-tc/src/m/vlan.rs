//! vlan syntax (iproute2 tc/m_vlan.c): `vlan pop | push ... | modify ... |
//! pop_eth | push_eth dst_mac MAC src_mac MAC [CONTROL] [index N]`, where
//! push and modify take `id ID`, `protocol 802.1Q|802.1ad` and `priority
//! 0-7` in any order after the verb (the last of a repeated option wins).
//! The control action is `pipe` when none is given. tc sends only what was
//! typed; it checks the id's 16 bits, the kernel its range.
//!
//! Printed as `vlan  VERB [id N protocol P [priority Q]] CONTROL` (two
//! spaces: the kind is printed with one after it, the verb with one
//! before) and `\t index N ref R bind B`.

use super::{next_arg, parse_action_control_dflt, print_action_control, soft, verdict, PrintCx};
use crate::args::{invarg, matches, Args, CmdResult, Fail};
use crate::filter::{proto_a2n, proto_n2a};
use crate::out::{Out, To};
use sluice_core::act::vlan::{verb, VlanOpts};
use sluice_core::act::{ActionDump, ActionOpts, ActionSpec};
use sluice_core::cls::Verdict;
use sluice_core::packet::{ETH_P_8021AD, ETH_P_8021Q};

const USAGE: &str = "Usage: vlan pop [CONTROL]
       vlan push [ protocol VLANPROTO ] id VLANID [ priority VLANPRIO ] [CONTROL]
       vlan modify [ protocol VLANPROTO ] id VLANID [ priority VLANPRIO ] [CONTROL]
       vlan pop_eth [CONTROL]
       vlan push_eth dst_mac LLADDR src_mac LLADDR [CONTROL]
       VLANPROTO is one of 802.1Q or 802.1AD
            with default: 802.1Q
       CONTROL := reclassify | pipe | drop | continue | pass |
                  goto chain <CHAIN_INDEX>";

/// The verbs by name, in the order tc tries them (so `p` is `pop`).
const VERBS: [(&str, i32); 5] = [
    ("pop", verb::POP),
    ("push", verb::PUSH),
    ("modify", verb::MODIFY),
    ("pop_eth", verb::POP_ETH),
    ("push_eth", verb::PUSH_ETH),
];

fn verb_name(v: i32) -> &'static str {
    VERBS
        .iter()
        .find(|(_, n)| *n == v)
        .map_or("(null)", |(name, _)| name)
}

/// A failure tc reports with its usage (`return -1` after `explain()`).
fn with_usage(msg: &str) -> Fail {
    soft(format!("{msg}\n{USAGE}"))
}

/// A link-layer address option's value, or tc's complaint (the lladdr
/// line, then `invarg` naming the word up to its first colon, which
/// ll_addr_a2n has cut there by then).
fn mac(w: &str, what: &str) -> CmdResult<[u8; 6]> {
    super::ll_addr(w).map(|(m, _)| m).map_err(|line| {
        let first = if w.contains('.') {
            w
        } else {
            w.split(':').next().unwrap_or(w)
        };
        let mut f = invarg(&format!("{what} is invalid"), first);
        f.stderr = format!("{line}\n{}", f.stderr);
        f
    })
}

/// `parse_vlan`, with the current word at `vlan`.
pub(crate) fn parse(a: &mut Args) -> CmdResult<ActionSpec> {
    let mut o = VlanOpts {
        action: Verdict::Pipe,
        v_action: 0,
        id: None,
        protocol: None,
        priority: None,
        dst_mac: None,
        src_mac: None,
    };
    next_arg(a)?;
    let push_attrs = |v: i32| v == verb::PUSH || v == verb::MODIFY;
    while let Some(w) = a.peek() {
        if let Some(&(_, v)) = VERBS.iter().find(|(name, _)| matches(w, name)) {
            if o.v_action != 0 {
                return Err(with_usage(&format!(
                    "unexpected \"{w}\" - action already specified"
                )));
            }
            o.v_action = v;
        } else if matches(w, "id") || matches(w, "protocol") || matches(w, "priority") {
            if !push_attrs(o.v_action) {
                return Err(invarg("only valid for push/modify", w));
            }
            let v = next_arg(a)?;
            if matches(w, "id") {
                o.id = Some(super::get_u16(v, 0).ok_or_else(|| invarg("id is invalid", v))?);
            } else if matches(w, "protocol") {
                o.protocol = Some(proto_a2n(v).ok_or_else(|| invarg("protocol is invalid", v))?);
            } else {
                let p = super::get_u32(v, 0).filter(|p| *p <= 7);
                o.priority = Some(p.ok_or_else(|| invarg("prio is invalid", v))? as u8);
            }
        } else if matches(w, "dst_mac") || matches(w, "src_mac") {
            if o.v_action != verb::PUSH_ETH {
                return Err(invarg("only valid for push_eth", w));
            }
            let v = next_arg(a)?;
            if matches(w, "dst_mac") {
                o.dst_mac = Some(mac(v, "dst_mac")?);
            } else {
                o.src_mac = Some(mac(v, "src_mac")?);
            }
        } else if matches(w, "help") {
            return Err(Fail::new(255, USAGE));
        } else {
            break;
        }
        a.next();
    }
    o.action = verdict(parse_action_control_dflt(a, false, super::TC_ACT_PIPE)?)?;
    let index = super::parse_index(a, |_| "vlan: Illegal \"index\"".into())?.unwrap_or(0);
    let name = verb_name(o.v_action);
    if push_attrs(o.v_action) && o.id.is_none() {
        return Err(with_usage(&format!("id needs to be set for {name}")));
    }
    if o.v_action == verb::PUSH_ETH {
        if o.dst_mac.is_none() {
            return Err(with_usage(&format!("dst_mac needs to be set for {name}")));
        }
        if o.src_mac.is_none() {
            return Err(with_usage(&format!("src_mac needs to be set for {name}")));
        }
    }
    if o.protocol
        .is_some_and(|p| p != ETH_P_8021Q && p != ETH_P_8021AD)
    {
        return Err(with_usage("protocol not supported"));
    }
    Ok(ActionSpec {
        index,
        opts: ActionOpts::Vlan(o),
        cookie: None,
        no_percpu: false,
        offload: 0,
    })
}

/// `print_vlan`.
pub(crate) fn print(d: &ActionDump, cx: &PrintCx, out: &mut Out) {
    let ActionOpts::Vlan(o) = &d.opts else {
        return;
    };
    out.str(To::Any, "kind", "vlan ", "vlan");
    let name = verb_name(o.v_action);
    out.str(To::Any, "vlan_action", &format!(" {name}"), name);
    if let Some(id) = o.id {
        out.uint(To::Any, "id", &format!(" id {id}"), id as u64);
    }
    if let Some(p) = o.protocol {
        let p = proto_n2a(p);
        out.str(To::Any, "protocol", &format!(" protocol {p}"), &p);
    }
    if let Some(p) = o.priority {
        out.uint(To::Any, "priority", &format!(" priority {p}"), p as u64);
    }
    for (key, m) in [("dst_mac", o.dst_mac), ("src_mac", o.src_mac)] {
        if let Some(m) = m {
            let s = super::ll_addr_n2a(&m);
            out.str(To::Any, key, &format!(" {key} {s}"), &s);
        }
    }
    print_action_control(out, " ", o.action, "");
    out.nl();
    super::print_index_tail(d, cx, "\t index ", out);
}

#[cfg(test)]
mod tests {
    use super::USAGE;
    use crate::f::testutil::{ingress, tc};
    use crate::net::Net;
    use sluice_core::packet::{Packet, ETH_P_IP};
    use sluice_core::time::Time;

    fn tail(msg: &str, left: usize) -> String {
        format!("{msg}\n{USAGE}\nbad action parsing\nparse_action: bad value ({left}:vlan)!\nIllegal \"action\"\n")
    }

    /// iproute2 6.1's answers (docs/research/vlan.md §2; every one exits 255).
    #[test]
    fn parse_errors_as_iproute2_6_1() {
        let incomplete = "Command line is not complete. Try option \"help\"\n".to_string();
        let inv = |w: &str, m: &str| format!("Error: argument \"{w}\" is wrong: {m}\n");
        for (args, err) in [
            ("vlan", incomplete.clone()),
            ("vlan pop pop", tail("unexpected \"pop\" - action already specified", 3)),
            ("vlan push id 3 p 802.1ad", tail("unexpected \"p\" - action already specified", 6)),
            ("vlan pop i 3", inv("i", "only valid for push/modify")),
            ("vlan pop d", inv("d", "only valid for push_eth")),
            ("vlan push", tail("id needs to be set for push", 2)),
            ("vlan push priority 3", tail("id needs to be set for push", 4)),
            ("vlan push id", incomplete.clone()),
            ("vlan push id 65536", inv("65536", "id is invalid")),
            ("vlan push id 3 protocol ABCD", inv("ABCD", "protocol is invalid")),
            ("vlan push id 3 protocol ip", tail("protocol not supported", 6)),
            ("vlan push id 3 priority 010", inv("010", "prio is invalid")),
            ("vlan push_eth src_mac 02:00:00:00:00:01", tail("dst_mac needs to be set for push_eth", 4)),
            (
                "vlan push_eth dst_mac 02:00:100:00:00:01 src_mac 02:00:00:00:00:01",
                format!("\"100\" is invalid lladdr.\n{}", inv("02", "dst_mac is invalid")),
            ),
            (
                "vlan push_eth dst_mac 1.2.3.400 src_mac 1",
                format!("\"1.2.3.400\" is invalid lladdr.\n{}", inv("1.2.3.400", "dst_mac is invalid")),
            ),
            ("vlan pop h", format!("{USAGE}\n")),
            (
                "vlan pop reclassify index 429496729599",
                "vlan: Illegal \"index\"\nbad action parsing\nparse_action: bad value (5:vlan)!\nIllegal \"action\"\n".into(),
            ),
            (
                "vlan push id 3 protocol ip index abc",
                "vlan: Illegal \"index\"\nbad action parsing\nparse_action: bad value (8:vlan)!\nIllegal \"action\"\n".into(),
            ),
            // The kernel's checks, with no message of their own.
            ("vlan push id 5678", "RTNETLINK answers: Numerical result out of range\nWe have an error talking to the kernel\n".into()),
            ("vlan index 5", "RTNETLINK answers: Invalid argument\nWe have an error talking to the kernel\n".into()),
        ] {
            let mut n = Net::new();
            let o = tc(&mut n, &format!("actions add action {args}"));
            assert_eq!((o.code, o.stderr.as_str()), (255, err.as_str()), "{args}");
        }
    }

    /// What iproute2 6.1 printed for the kernel's dumps (§3): push always
    /// shows its TPID and priority, modify a priority only when given.
    #[test]
    fn printed_as_iproute2_6_1_prints_it() {
        let mut n = Net::new();
        for add in [
            "vlan push id 123 index 18",
            "vlan modify protocol 802.1ad id 500 reclassify index 12",
            "vlan push_eth d 02:00:00:00:00:01 s aa:bb:cc:dd:ee:ff pass index 4",
            "vlan pop jump 10 index 8",
        ] {
            let o = tc(&mut n, &format!("actions add action {add}"));
            assert_eq!(o.code, 0, "{add}: {}", o.stderr);
        }
        let out = tc(&mut n, "actions ls action vlan").stdout;
        for line in [
            "\taction order 0: vlan  push_eth dst_mac 02:00:00:00:00:01 src_mac aa:bb:cc:dd:ee:ff pass\n\t index 4 ref 1 bind 0\n",
            "\taction order 1: vlan  pop jump 10\n\t index 8 ref 1 bind 0\n",
            "\taction order 2: vlan  modify id 500 protocol 802.1ad reclassify\n\t index 12 ref 1 bind 0\n",
            "\taction order 3: vlan  push id 123 protocol 802.1Q priority 0 pipe\n\t index 18 ref 1 bind 0\n",
        ] {
            assert!(out.contains(line), "{out}");
        }
        let j = tc(&mut n, "-j actions get action vlan index 18").stdout;
        assert!(j.contains(r#"{"order":1,"kind":"vlan","vlan_action":"push","id":123,"protocol":"802.1Q","priority":0,"control_action":{"type":"pipe"},"index":18,"ref":1,"bind":0"#), "{j}");
    }

    /// `no_percpu` is kept from creation and listed before `not_in_hw`
    /// (docs/research/vlan.md §3.3 C; upstream tc-testing 1a3d).
    #[test]
    fn the_no_percpu_flag_is_kept_and_listed() {
        let mut n = Net::new();
        assert_eq!(tc(&mut n, "actions add action vlan pop no_percpu").code, 0);
        let out = tc(&mut n, "actions ls action vlan").stdout;
        assert!(
            out.contains("\t index 1 ref 1 bind 0\n\tno_percpu\tnot_in_hw\n"),
            "{out}"
        );
        let j = tc(&mut n, "-j actions ls action vlan").stdout;
        assert!(
            j.contains(r#""bind":0,"no_percpu":true,"not_in_hw":true"#),
            "{j}"
        );
    }

    /// A tagged packet is the tag's protocol to filters: after a push, a
    /// `protocol ip` filter no longer sees it, a `protocol 802.1Q` one does.
    #[test]
    fn filters_see_a_pushed_tags_protocol() {
        let mut n = ingress();
        for c in [
            "filter add dev DEV parent ffff: protocol all prio 1 matchall action vlan push id 5 priority 2 pipe action goto chain 1",
            "filter add dev DEV parent ffff: protocol ip prio 1 chain 1 matchall action drop",
            "filter add dev DEV parent ffff: protocol 802.1Q prio 2 chain 1 matchall action pass",
        ] {
            let o = tc(&mut n, c);
            assert_eq!(o.code, 0, "{c}: {}", o.stderr);
        }
        let dev = n.dev_mut("DEV").unwrap();
        let got = dev.receive(Packet::new(vec![0x45; 20], 100, ETH_P_IP), Time(1));
        let p = got.expect("passed by the 802.1Q filter, not dropped by the ip one");
        assert_eq!(p.vlan.map(|t| (t.proto, t.tci)), Some((0x8100, 0x4005)));
    }
}
