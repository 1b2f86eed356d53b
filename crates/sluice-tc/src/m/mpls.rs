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
