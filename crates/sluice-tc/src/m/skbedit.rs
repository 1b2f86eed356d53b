//! skbedit syntax (iproute2 tc/m_skbedit.c):
//! `skbedit [queue_mapping QM] [priority CLASSID] [mark MARK[/MASK]]
//! [ptype host|broadcast|multicast|otherhost] [inheritdsfield] [CONTROL]
//! [index N]`, keywords abbreviable, in any order and repeatable (the last
//! wins), the control action `pipe` when none is given. At least one edit or
//! an index must be given, else the usage text.
//!
//! Printing follows print_skbedit, quirks included: `queue_mapping` is
//! printed without a leading space, so `skbedit  mark 7` shows two spaces
//! when it is absent; the mask is C's `%#x` (`/0xff`, but `/0` for zero)
//! and a hex string in JSON; `inheritdsfield` is a JSON null.

use super::{next_arg, parse_action_control_dflt, print_action_control, soft, verdict, PrintCx};
use crate::args::{matches, Args, CmdResult, Fail};
use crate::out::{Out, To, J};
use sluice_core::act::skbedit::SkbeditOpts;
use sluice_core::act::{ActionDump, ActionOpts, ActionSpec};
use sluice_core::handle::Handle;

const USAGE: &str = "Usage: ... skbedit <[QM] [PM] [MM] [PT] [IF]>
QM = queue_mapping QUEUE_MAPPING
PM = priority PRIORITY
MM = mark MARK[/MASK]
PT = ptype PACKETYPE
IF = inheritdsfield
PACKETYPE = is one of:
  host, otherhost, broadcast, multicast
QUEUE_MAPPING = device transmit queue to use
PRIORITY = classID to assign to priority field
MARK = firewall mark to set
MASK = mask applied to firewall mark (0xffffffff by default)
note: inheritdsfield maps DS field to skb->priority";

/// The packet types by name, in the order m_skbedit.c tries them.
const PTYPES: [(&str, u16); 4] = [
    ("host", 0),
    ("broadcast", 1),
    ("multicast", 2),
    ("otherhost", 3),
];

/// `parse_skbedit`, with the current word at `skbedit`.
pub(crate) fn parse(a: &mut Args) -> CmdResult<ActionSpec> {
    let mut o = SkbeditOpts::default();
    let mut ok = 0;
    next_arg(a)?;
    while let Some(w) = a.peek() {
        if matches(w, "queue_mapping") {
            let v = next_arg(a)?;
            let q = super::get_u32(v, 10).filter(|&q| q <= 65535);
            o.queue_mapping = Some(q.ok_or_else(|| soft("Illegal queue_mapping"))? as u16);
        } else if matches(w, "priority") {
            let v = next_arg(a)?;
            let h = Handle::parse_classid(v).ok_or_else(|| soft("Illegal priority"))?;
            o.priority = Some(h.0);
        } else if matches(w, "mark") {
            let v = next_arg(a)?;
            let (m, mask) = match v.split_once('/') {
                Some((m, k)) => (m, Some(k)),
                None => (v, None),
            };
            o.mark = Some(super::get_u32(m, 0).ok_or_else(|| soft("Illegal mark"))?);
            if let Some(k) = mask {
                o.mask = Some(super::get_u32(k, 0).ok_or_else(|| soft("Illegal mask"))?);
            }
        } else if matches(w, "ptype") {
            let v = next_arg(a)?;
            let t = PTYPES.iter().find(|(name, _)| matches(v, name));
            let t = t.ok_or_else(|| soft(format!("Illegal ptype ({v})")))?;
            o.ptype = Some(t.1);
        } else if matches(w, "inheritdsfield") {
            o.inheritdsfield = true;
        } else if matches(w, "help") {
            return Err(Fail::new(255, USAGE));
        } else {
            break;
        }
        ok += 1;
        a.next();
    }
    o.action = verdict(parse_action_control_dflt(a, false, super::TC_ACT_PIPE)?)?;
    let index = super::parse_index(a, |_| "skbedit: Illegal \"index\"".into())?;
    ok += index.is_some() as u32;
    let index = index.unwrap_or(0);
    if ok == 0 {
        return Err(soft(USAGE));
    }
    Ok(ActionSpec {
        index,
        opts: ActionOpts::Skbedit(o),
        cookie: None,
        no_percpu: false,
        offload: 0,
    })
}

/// C's `%#x`: `0x` before a non-zero value only.
fn c_hash_x(v: u32) -> String {
    if v == 0 {
        "0".into()
    } else {
        format!("{v:#x}")
    }
}

/// `print_skbedit`.
pub(crate) fn print(d: &ActionDump, cx: &PrintCx, out: &mut Out) {
    let ActionOpts::Skbedit(o) = &d.opts else {
        return;
    };
    out.str(To::Any, "kind", "skbedit ", "skbedit");
    if let Some(q) = o.queue_mapping {
        out.uint(
            To::Any,
            "queue_mapping",
            &format!("queue_mapping {q}"),
            q as u64,
        );
    }
    if let Some(p) = o.priority {
        let h = Handle(p).to_string();
        out.str(To::Any, "priority", &format!(" priority {h}"), &h);
    }
    if let Some(m) = o.mark {
        out.uint(To::Any, "mark", &format!(" mark {m}"), m as u64);
    }
    if let Some(m) = o.mask {
        out.str(
            To::Any,
            "mask",
            &format!("/{}", c_hash_x(m)),
            &format!("{m:x}"),
        );
    }
    if let Some(t) = o.ptype {
        match PTYPES.iter().find(|(_, n)| *n == t) {
            Some((name, _)) => out.str(To::Any, "ptype", &format!(" ptype {name}"), name),
            None => out.uint(To::Any, "ptype", &format!(" ptype {t}"), t as u64),
        }
    }
    if o.inheritdsfield {
        out.item(To::Any, "inheritdsfield", " inheritdsfield", J::Null);
    }
    print_action_control(out, " ", o.action, "");
    out.nl();
    super::print_index_tail(d, cx, "\t index ", out);
}

#[cfg(test)]
mod tests {
    use crate::f::testutil::{dev, ingress, tc, tc_words};
    use sluice_core::packet::Skb;
    use sluice_core::packet::{Packet, ETH_P_IP};
    use sluice_core::qdisc::{Cx, Dequeue};
    use sluice_core::time::Time;

    const ADD: &str = "filter add dev DEV parent ffff: protocol ip prio 1 u32 match u32 0 0";

    #[test]
    fn parse_errors_as_iproute2_6_1() {
        // Captured from tc 6.1 (the parse fails before the kernel is asked).
        let usage = format!("{}\n", super::USAGE);
        let tail = |n: usize| {
            format!(
                "bad action parsing\nparse_action: bad value ({n}:skbedit)!\nIllegal \"action\"\n"
            )
        };
        let incomplete = "Command line is not complete. Try option \"help\"\n".to_string();
        for (opts, code, err) in [
            ("", 255, incomplete.clone()),
            ("mark", 255, incomplete.clone()),
            ("mark 7 jump", 255, incomplete.clone()),
            ("foo", 1, format!("{usage}{}", tail(2))),
            ("mark x", 1, format!("Illegal mark\n{}", tail(3))),
            ("mark 7/x", 1, format!("Illegal mask\n{}", tail(3))),
            (
                "queue_mapping 70000",
                1,
                format!("Illegal queue_mapping\n{}", tail(3)),
            ),
            (
                "queue_mapping -1",
                1,
                format!("Illegal queue_mapping\n{}", tail(3)),
            ),
            ("priority zz", 1, format!("Illegal priority\n{}", tail(3))),
            ("ptype foo", 1, format!("Illegal ptype (foo)\n{}", tail(3))),
            (
                "mark 7 index x",
                1,
                format!("skbedit: Illegal \"index\"\n{}", tail(5)),
            ),
            ("help", 255, usage.clone()),
        ] {
            let mut n = ingress();
            let o = tc(&mut n, &format!("{ADD} action skbedit {opts}"));
            assert_eq!((o.code, o.stderr), (code, err), "skbedit {opts}");
        }
        // A verdict that fails to parse is reported, left for the next
        // action (gact), which fails on it again.
        let mut n = ingress();
        let o = tc(&mut n, &format!("{ADD} action skbedit mark 7 goto chain x"));
        assert_eq!(o.code, 255);
        assert!(
            o.stderr
                .starts_with("Illegal \"chain index\"\nIllegal \"chain index\"\nUsage: ... gact"),
            "{}",
            o.stderr
        );
    }

    #[test]
    fn filters_print_skbedit_as_iproute2() {
        // tc-testing basic.json 4943, and its printed form.
        let mut n = ingress();
        let w: Vec<String> = [
            "filter",
            "add",
            "dev",
            "DEV",
            "parent",
            "ffff:",
            "handle",
            "1",
            "protocol",
            "ip",
            "prio",
            "1",
            "basic",
            "match",
            "cmp(u32 at 4 layer link mask 0xff00ff00 eq 3)",
            "action",
            "skbedit",
            "mark",
            "7",
            "pipe",
            "action",
            "gact",
            "drop",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let o = tc_words(&mut n, &w);
        assert_eq!(o.code, 0, "{}", o.stderr);
        let out = tc(&mut n, "filter show dev DEV parent ffff:").stdout;
        assert!(
            out.contains("\n\taction order 1: skbedit  mark 7 pipe\n\t index 1 ref 1 bind 1\n\n\taction order 2: gact action drop\n"),
            "{out}"
        );
        let mut n = ingress();
        let o = tc(
            &mut n,
            &format!("{ADD} action skbedit queue_mapping 3 pri 1:5 ma 0x10/0xf0 pt b inheritdsfield drop index 4"),
        );
        assert_eq!(o.code, 0, "{}", o.stderr);
        let out = tc(&mut n, "filter show dev DEV parent ffff:").stdout;
        assert!(
            out.contains("\taction order 1: skbedit queue_mapping 3 priority 1:5 mark 16/0xf0 ptype broadcast inheritdsfield drop\n\t index 4 ref 1 bind 1\n"),
            "{out}"
        );
        let j = tc(&mut n, "-j filter show dev DEV parent ffff:").stdout;
        assert!(
            j.contains(r#"{"order":1,"kind":"skbedit","queue_mapping":3,"priority":"1:5","mark":16,"mask":"f0","ptype":"broadcast","inheritdsfield":null,"control_action":{"type":"drop"},"index":4,"ref":1,"bind":1}"#),
            "{j}"
        );
    }

    #[test]
    fn standalone_actions_replace_bind_and_refuse_empty_edits() {
        let mut n = ingress();
        assert_eq!(
            tc(&mut n, "actions add action skbedit mark 1/0 index 9").code,
            0
        );
        // A mask of 0 prints as C's %#x does.
        let out = tc(&mut n, "actions get action skbedit index 9").stdout;
        assert!(
            out.contains("skbedit  mark 1/0 pipe\n\t index 9 ref 1 bind 0"),
            "{out}"
        );
        // A change replaces every field.
        let o = tc(
            &mut n,
            "actions replace action skbedit ptype otherhost index 9",
        );
        assert_eq!(o.code, 0, "{}", o.stderr);
        let out = tc(&mut n, "actions get action skbedit index 9").stdout;
        assert!(out.contains("skbedit  ptype otherhost pipe\n"), "{out}");
        // `index N` alone binds from a filter...
        let o = tc(&mut n, &format!("{ADD} action skbedit index 9"));
        assert_eq!(o.code, 0, "{}", o.stderr);
        let out = tc(&mut n, "actions get action skbedit index 9").stdout;
        assert!(out.contains("index 9 ref 2 bind 1"), "{out}");
        // ...but edits nothing standalone: EINVAL, before "exists".
        let o = tc(&mut n, "actions add action skbedit index 9");
        assert_eq!(o.code, 255);
        assert!(o.stderr.contains("Invalid argument"), "{}", o.stderr);
        let o = tc(&mut n, "actions add action skbedit index 10");
        assert_eq!(o.code, 255);
        assert!(o.stderr.contains("Invalid argument"), "{}", o.stderr);
    }

    /// An IPv4/UDP packet to 10.0.0.`dst`.
    fn udp_to(dst: u8, id: u64) -> Packet {
        let mut data = vec![0u8; 28];
        data[0] = 0x45;
        data[9] = 17;
        data[16..20].copy_from_slice(&[10, 0, 0, dst]);
        Packet::from(Skb {
            id,
            ..Packet::new(data, 100, ETH_P_IP).into_skb()
        })
    }

    /// Enqueue packets to 10.0.0.1 and 10.0.0.2 (in that order) on DEV and
    /// dequeue them all: their ids in departure order.
    fn departures(n: &mut crate::net::Net) -> Vec<u64> {
        let d = n.dev_mut("DEV").unwrap();
        let mut cx = Cx::new(Time(0));
        d.root.enqueue(udp_to(1, 1), &mut cx).unwrap();
        d.root.enqueue(udp_to(2, 2), &mut cx).unwrap();
        std::iter::from_fn(|| match d.root.dequeue(&mut cx) {
            Dequeue::Packet(p) => Some(p.id),
            _ => None,
        })
        .collect()
    }

    #[test]
    fn a_priority_edit_moves_packets_between_bands() {
        // drr at the root: a u32 filter sends everything to 1:1 and gives
        // packets to 10.0.0.2 priority 6 (TC_PRIO_INTERACTIVE); the child
        // pfifo_fast puts priority 0 in band 1 and 6 in band 0, so the
        // packet that came second leaves first.
        let base = [
            "qdisc add dev DEV root handle 1: drr",
            "class add dev DEV parent 1: classid 1:1 drr",
            "filter add dev DEV parent 1: protocol ip prio 1 u32 match ip dst 10.0.0.2/32 flowid 1:1 action skbedit priority 6",
            "filter add dev DEV parent 1: protocol ip prio 2 u32 match u32 0 0 flowid 1:1",
        ];
        let mut n = dev();
        for c in base {
            let o = tc(&mut n, c);
            assert_eq!(o.code, 0, "{c}: {}", o.stderr);
        }
        let o = tc(&mut n, "qdisc add dev DEV parent 1:1 handle 10: pfifo_fast");
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert_eq!(departures(&mut n), [2, 1]);
        // The same with a prio child and a basic filter: priority 1:1 names
        // the child's first band directly (prio's `skb->priority` path).
        let mut n = dev();
        for c in [
            "qdisc add dev DEV root handle 1: drr",
            "class add dev DEV parent 1: classid 1:1 drr",
            "qdisc add dev DEV parent 1:1 handle 10: prio",
        ] {
            assert_eq!(tc(&mut n, c).code, 0, "{c}");
        }
        let w: Vec<String> = [
            "filter",
            "add",
            "dev",
            "DEV",
            "parent",
            "1:",
            "protocol",
            "ip",
            "prio",
            "1",
            "basic",
            "match",
            "cmp(u8 at 19 layer network eq 2)",
            "flowid",
            "1:1",
            "action",
            "skbedit",
            "priority",
            "10:1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let o = tc_words(&mut n, &w);
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert_eq!(
            tc(
                &mut n,
                "filter add dev DEV parent 1: protocol ip prio 2 u32 match u32 0 0 flowid 1:1"
            )
            .code,
            0
        );
        assert_eq!(departures(&mut n), [2, 1]);
        let out = tc(&mut n, "-s filter show dev DEV parent 1:").stdout;
        assert!(out.contains("skbedit  priority 10:1 pipe"), "{out}");
        assert!(out.contains("Sent 100 bytes 1 pkt"), "{out}");
    }

    #[test]
    fn a_mark_edit_is_seen_by_a_later_fw_filter() {
        // Priority 1 sets the mark (pipe goes on to the next filter:
        // continue), priority 2 classifies by it.
        let mut n = dev();
        for c in [
            "qdisc add dev DEV root handle 1: prio",
            "filter add dev DEV parent 1: protocol ip prio 1 u32 match ip dst 10.0.0.2/32 action skbedit mark 0x2a continue",
            "filter add dev DEV parent 1: protocol ip prio 2 handle 0x2a fw flowid 1:1",
        ] {
            let o = tc(&mut n, c);
            assert_eq!(o.code, 0, "{c}: {}", o.stderr);
        }
        assert_eq!(departures(&mut n), [2, 1]);
    }
}
