//! mpls syntax (iproute2 tc/m_mpls.c): `mpls pop protocol P | push ... |
//! mac_push ... | modify ... | dec_ttl [CONTROL] [index N]`, where the
//! pushes and modify take `label`, `tc`, `ttl` and `bos`, and the pushes
//! and pop `protocol`, in any order after the verb (the last of a repeated
//! option wins; an option before the verb is refused). The control action
//! is `pipe` when none is given. tc checks the fields' ranges, that `push`
//! (not `mac_push`) has a label and `pop` a protocol, and that a push's
//! protocol is MPLS; the kernel checks the rest (notes:
//! docs/research/mpls.md).
//!
//! Printed as `mpls  VERB [protocol P] [label L] [tc T] [bos B] [ttl T]
//! CONTROL` (two spaces: the kind is printed with one after it, the verb
//! with one before; the protocol only for pop and the pushes) and
//! `\t index N ref R bind B`.

use super::{next_arg, parse_action_control_dflt, print_action_control, soft, verdict, PrintCx};
use crate::args::{incomplete, invarg, matches, Args, CmdResult, Fail};
use crate::filter::{proto_a2n, proto_n2a};
use crate::out::{Out, To};
use sluice_core::act::mpls::{verb, MplsOpts};
use sluice_core::act::{ActionDump, ActionOpts, ActionSpec};
use sluice_core::cls::Verdict;
use sluice_core::packet::is_mpls_type;

const USAGE: &str = "Usage: mpls pop [ protocol MPLS_PROTO ] [CONTROL]
       mpls push [ protocol MPLS_PROTO ] [ label MPLS_LABEL ] [ tc MPLS_TC ]
                 [ ttl MPLS_TTL ] [ bos MPLS_BOS ] [CONTROL]
       mpls mac_push [ protocol MPLS_PROTO ] [ label MPLS_LABEL ] [ tc MPLS_TC ]
                     [ ttl MPLS_TTL ] [ bos MPLS_BOS ] [CONTROL]
       mpls modify [ label MPLS_LABEL ] [ tc MPLS_TC ] [ ttl MPLS_TTL ]
                   [ bos MPLS_BOS ] [CONTROL]
           for pop, MPLS_PROTO is next header of packet - e.g. ip or mpls_uc
           for push and mac_push, MPLS_PROTO is one of mpls_uc or mpls_mc
               with default: mpls_uc
       CONTROL := reclassify | pipe | drop | continue | pass |
                  goto chain <CHAIN_INDEX>";

/// The verbs by name, in the order tc tries them (so `p` is `pop`, `m`
/// is `modify`).
const VERBS: [(&str, i32); 5] = [
    ("pop", verb::POP),
    ("push", verb::PUSH),
    ("modify", verb::MODIFY),
    ("mac_push", verb::MAC_PUSH),
    ("dec_ttl", verb::DEC_TTL),
];

fn verb_name(v: i32) -> &'static str {
    VERBS
        .iter()
        .find(|(_, n)| *n == v)
        .map_or("(null)", |(name, _)| name)
}

/// `get_u8`: a number of at most 8 bits in `base` (0: C's prefixes).
fn get_u8(arg: &str, base: u32) -> Option<u8> {
    super::get_u32(arg, base).and_then(|v| u8::try_from(v).ok())
}

/// `parse_mpls`, with the current word at `mpls`.
pub(crate) fn parse(a: &mut Args) -> CmdResult<ActionSpec> {
    let mut o = MplsOpts {
        action: Verdict::Pipe,
        m_action: 0,
        label: None,
        tc: None,
        ttl: None,
        bos: None,
        proto: None,
    };
    next_arg(a)?;
    let fields_ok = |v: i32| v == verb::PUSH || v == verb::MAC_PUSH || v == verb::MODIFY;
    let proto_ok = |v: i32| v == verb::PUSH || v == verb::MAC_PUSH || v == verb::POP;
    while let Some(w) = a.peek() {
        if let Some(&(_, v)) = VERBS.iter().find(|(name, _)| matches(w, name)) {
            if o.m_action != 0 {
                let was = verb_name(o.m_action);
                return Err(soft(format!(
                    "Error: got \"{w}\" but action already set to \"{was}\"\n{USAGE}"
                )));
            }
            o.m_action = v;
        } else if ["label", "tc", "ttl", "bos"].iter().any(|k| matches(w, k)) {
            if !fields_ok(o.m_action) {
                return Err(invarg("only valid for push, mac_push and modify", w));
            }
            let v = next_arg(a)?;
            if matches(w, "label") {
                let l = super::get_u32(v, 0).filter(|l| *l <= 0xfffff);
                o.label = Some(l.ok_or_else(|| invarg("label must be <=0xFFFFF", v))?);
            } else if matches(w, "tc") {
                let t = get_u8(v, 0).filter(|t| *t <= 7);
                o.tc = Some(t.ok_or_else(|| invarg("tc field is 3 bits max", v))?);
            } else if matches(w, "ttl") {
                let t = get_u8(v, 0).filter(|t| *t > 0);
                o.ttl = Some(t.ok_or_else(|| invarg("ttl must be >0 and <=255", v))?);
            } else {
                let b = get_u8(v, 0).filter(|b| *b <= 1);
                o.bos = Some(b.ok_or_else(|| invarg("bos must be 0 or 1", v))?);
            }
        } else if matches(w, "protocol") {
            if !proto_ok(o.m_action) {
                return Err(invarg("only valid for push, mac_push and pop", w));
            }
            let v = next_arg(a)?;
            o.proto = Some(proto_a2n(v).ok_or_else(|| invarg("protocol is invalid", v))?);
        } else if matches(w, "help") {
            return Err(Fail::new(255, USAGE));
        } else {
            break;
        }
        a.next();
    }
    if o.m_action == 0 {
        return Err(incomplete());
    }
    o.action = verdict(parse_action_control_dflt(a, false, super::TC_ACT_PIPE)?)?;
    let mut index = None;
    if a.peek().is_some_and(|w| matches(w, "index")) {
        let v = next_arg(a)?;
        index = Some(super::get_u32(v, 10).ok_or_else(|| invarg("illegal index", v))?);
        a.next();
    }
    let missing = |key: &str| Fail::new(255, format!("Error: argument \"{key}\" is required"));
    if o.m_action == verb::PUSH && o.label.is_none() {
        return Err(missing("label"));
    }
    let pushes = o.m_action == verb::PUSH || o.m_action == verb::MAC_PUSH;
    if let Some(p) = o.proto.filter(|p| pushes && *p != 0 && !is_mpls_type(*p)) {
        let mac = if o.m_action == verb::MAC_PUSH {
            "mac_"
        } else {
            ""
        };
        return Err(soft(format!(
            "invalid {mac}push protocol \"0x{p:04x}\" - use mpls_(uc|mc)"
        )));
    }
    // tc sends a protocol only when it is not 0.
    o.proto = o.proto.filter(|p| *p != 0);
    if o.m_action == verb::POP && o.proto.is_none() {
        return Err(missing("protocol"));
    }
    Ok(ActionSpec {
        index: index.unwrap_or(0),
        opts: ActionOpts::Mpls(o),
        cookie: None,
        no_percpu: false,
        offload: 0,
    })
}

/// `print_mpls`.
pub(crate) fn print(d: &ActionDump, cx: &PrintCx, out: &mut Out) {
    let ActionOpts::Mpls(o) = &d.opts else {
        return;
    };
    out.str(To::Any, "kind", "mpls ", "mpls");
    let name = verb_name(o.m_action);
    out.str(To::Any, "mpls_action", &format!(" {name}"), name);
    let v = o.m_action;
    if v == verb::POP || v == verb::PUSH || v == verb::MAC_PUSH {
        if let Some(p) = o.proto {
            let p = proto_n2a(p);
            out.str(To::Any, "protocol", &format!(" protocol {p}"), &p);
        }
    }
    if v == verb::PUSH || v == verb::MAC_PUSH || v == verb::MODIFY {
        let fields = [
            ("label", o.label),
            ("tc", o.tc.map(u32::from)),
            ("bos", o.bos.map(u32::from)),
            ("ttl", o.ttl.map(u32::from)),
        ];
        for (key, val) in fields {
            if let Some(val) = val {
                out.uint(To::Any, key, &format!(" {key} {val}"), val as u64);
            }
        }
    }
    print_action_control(out, " ", o.action, "");
    out.nl();
    super::print_index_tail(d, cx, "\t index ", out);
}

#[cfg(test)]
mod tests {
    use super::USAGE;
    use crate::f::testutil::tc;
    use crate::net::Net;

    fn tail(msg: &str, left: usize) -> String {
        format!("{msg}\nbad action parsing\nparse_action: bad value ({left}:mpls)!\nIllegal \"action\"\n")
    }

    /// iproute2 6.1's answers (docs/research/mpls.md §2.2 and §3.3; every
    /// one exits 255 from `tc actions`).
    #[test]
    fn parse_errors_as_iproute2_6_1() {
        let incomplete = "Command line is not complete. Try option \"help\"\n".to_string();
        let inv = |w: &str, m: &str| format!("Error: argument \"{w}\" is wrong: {m}\n");
        let required = |k: &str| format!("Error: argument \"{k}\" is required\n");
        let fields = "only valid for push, mac_push and modify";
        let proto = "only valid for push, mac_push and pop";
        let kernel =
            |m: &str| format!("Error: act_mpls: {m}.\nWe have an error talking to the kernel\n");
        for (args, err) in [
            ("mpls", incomplete.clone()),
            ("mpls foo", incomplete.clone()),
            ("mpls pop help", format!("{USAGE}\n")),
            ("mpls pop drop", required("protocol")),
            ("mpls pop protocol ip protocol 0", required("protocol")),
            ("mpls pop protocol", incomplete.clone()),
            (
                "mpls pop protocol 0x10000",
                inv("0x10000", "protocol is invalid"),
            ),
            ("mpls label 5 push", inv("label", fields)),
            ("mpls pop protocol ip ttl 5", inv("ttl", fields)),
            ("mpls protocol ip pop", inv("protocol", proto)),
            (
                "mpls modify label 5 protocol mpls_uc",
                inv("protocol", proto),
            ),
            ("mpls push tc 3", required("label")),
            (
                "mpls push protocol ip label 5",
                tail("invalid push protocol \"0x0800\" - use mpls_(uc|mc)", 6),
            ),
            (
                "mpls mac_push protocol ipv6",
                tail("invalid mac_push protocol \"0x86dd\" - use mpls_(uc|mc)", 4),
            ),
            ("mpls push label -1", inv("-1", "label must be <=0xFFFFF")),
            (
                "mpls push label 5 tc 256",
                inv("256", "tc field is 3 bits max"),
            ),
            (
                "mpls push label 5 ttl 0",
                inv("0", "ttl must be >0 and <=255"),
            ),
            ("mpls push label 5 bos 2", inv("2", "bos must be 0 or 1")),
            (
                "mpls push label 5 p",
                tail(
                    &format!("Error: got \"p\" but action already set to \"push\"\n{USAGE}"),
                    5,
                ),
            ),
            ("mpls dec_ttl index 0x10", inv("0x10", "illegal index")),
            ("mpls dec_ttl index", incomplete.clone()),
            // tc lets these through; the kernel refuses them.
            (
                "mpls mac_push ttl 4",
                kernel("Label is required for MPLS push"),
            ),
            ("mpls modify label 3", kernel("MPLS label out of range")),
            (
                "mpls pop protocol 0x05ff",
                kernel("Invalid protocol type for MPLS pop"),
            ),
            (
                "mpls pop protocol all",
                kernel("Invalid protocol type for MPLS pop"),
            ),
            (
                "mpls dec_ttl goto chain 3",
                "Error: can't goto NULL proto/chain.\nWe have an error talking to the kernel\n"
                    .into(),
            ),
        ] {
            let mut n = Net::new();
            let o = tc(&mut n, &format!("actions add action {args}"));
            assert_eq!((o.code, o.stderr.as_str()), (255, err.as_str()), "{args}");
            assert!(
                tc(&mut n, "actions ls action mpls").stdout.is_empty(),
                "{args}"
            );
        }
        // In a filter: tc's `return -1` exits 1, its exits 255, the kernel 2.
        for (words, code) in [("pop push", 1), ("pop", 255), ("mac_push", 2)] {
            let mut n = crate::f::testutil::ingress();
            let c = format!("filter add dev DEV ingress protocol ip matchall action mpls {words}");
            assert_eq!(tc(&mut n, &c).code, code, "{words}");
        }
    }

    /// What iproute2 6.1 printed for the kernel's dumps (§4.2, §4.6): the
    /// protocol always stored, shown for pop and the pushes only; a push's
    /// TTL 255 unless given; fields in the order label, tc, bos, ttl.
    #[test]
    fn printed_as_iproute2_6_1_prints_it() {
        let mut n = Net::new();
        for add in [
            "mpls pop protocol 0x1234 index 4",
            "mpls push label 20 index 5",
            "mpls push protocol mpls_mc label 0xfffff tc 7 ttl 64 bos 1 index 6",
            "mpls mac_push label 30 bos 0 index 7",
            "mpls modify label 99 tc 3 ttl 9 bos 0 index 8",
            "mpls dec_ttl jump 10 index 9",
            "mpls pop protocol ip goto chain 5 index 10",
        ] {
            let o = tc(&mut n, &format!("actions add action {add}"));
            let ok = add.contains("goto") == (o.code != 0);
            assert!(ok, "{add}: {}", o.stderr);
        }
        let out = tc(&mut n, "actions ls action mpls").stdout;
        for line in [
            "\taction order 0: mpls  pop protocol [4660] pipe\n\t index 4 ref 1 bind 0\n",
            "\taction order 1: mpls  push protocol mpls_uc label 20 ttl 255 pipe\n\t index 5 ref 1 bind 0\n",
            "\taction order 2: mpls  push protocol mpls_mc label 1048575 tc 7 bos 1 ttl 64 pipe\n\t index 6 ref 1 bind 0\n",
            "\taction order 3: mpls  mac_push protocol mpls_uc label 30 bos 0 ttl 255 pipe\n\t index 7 ref 1 bind 0\n",
            "\taction order 4: mpls  modify label 99 tc 3 bos 0 ttl 9 pipe\n\t index 8 ref 1 bind 0\n",
            "\taction order 5: mpls  dec_ttl jump 10\n\t index 9 ref 1 bind 0\n",
        ] {
            assert!(out.contains(line), "{out}");
        }
        let j = tc(&mut n, "-j actions get action mpls index 6").stdout;
        assert!(j.contains(r#"{"order":1,"kind":"mpls","mpls_action":"push","protocol":"mpls_mc","label":1048575,"tc":7,"bos":1,"ttl":64,"control_action":{"type":"pipe"},"index":6,"ref":1,"bind":0"#), "{j}");
        // A replace sets every parameter anew (the tc is gone).
        let r = tc(&mut n, "actions replace action mpls push label 30 index 6");
        assert_eq!(r.code, 0, "{}", r.stderr);
        let out = tc(&mut n, "actions get action mpls index 6").stdout;
        assert!(
            out.contains("mpls  push protocol mpls_uc label 30 ttl 255 pipe"),
            "{out}"
        );
    }
}
