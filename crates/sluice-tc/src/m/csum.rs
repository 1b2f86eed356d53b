//! csum syntax (iproute2 tc/m_csum.c): `csum TARGET... [CONTROL] [index N]`
//! with TARGET one of `iph`/`ip4h`/`ipv4h`, `icmp`, `igmp`, `tcp`, `udp`,
//! `udplite`, `sctp` (any abbreviation, tried in that order, so `i` is
//! `iph` and `u` is `udp`) and the fillers `and`, `or`, `+`; another `csum`
//! adds more targets. The control action is `pass` when none is given.
//! Printed as `csum (iph, tcp) action pass` and `\tindex N ref R bind B`
//! (`?empty` when no known target is set).

use super::{next_arg, parse_action_control_dflt, print_action_control, soft, verdict, PrintCx};
use crate::args::{matches, Args, CmdResult, Fail};
use crate::out::{Out, To};
use sluice_core::act::csum::{flag, CsumOpts};
use sluice_core::act::{ActionDump, ActionOpts, ActionSpec};

const USAGE: &str = "Usage: ... csum <UPDATE>
Where: UPDATE := <TARGET> [<UPDATE>]
       TARGET := { ip4h | icmp | igmp | tcp | udp | udplite | sctp | <SWEETS> }
       SWEETS := { and | or | '+' }";

/// The targets by name, in the order m_csum.c tries them (0: a filler).
const TARGETS: [(&str, u32); 10] = [
    ("iph", flag::IPV4HDR),
    ("ip4h", flag::IPV4HDR),
    ("ipv4h", flag::IPV4HDR),
    ("icmp", flag::ICMP),
    ("igmp", flag::IGMP),
    ("tcp", flag::TCP),
    ("udp", flag::UDP),
    ("udplite", flag::UDPLITE),
    ("sctp", flag::SCTP),
    ("and", 0),
];

/// The printed names of the known flags, in print order.
const PRINTED: [(u32, &str); 7] = [
    (flag::IPV4HDR, "iph"),
    (flag::ICMP, "icmp"),
    (flag::IGMP, "igmp"),
    (flag::TCP, "tcp"),
    (flag::UDP, "udp"),
    (flag::UDPLITE, "udplite"),
    (flag::SCTP, "sctp"),
];

fn target(w: &str) -> Option<u32> {
    if matches(w, "or") || matches(w, "+") {
        return Some(0);
    }
    TARGETS
        .iter()
        .find(|(name, _)| matches(w, name))
        .map(|t| t.1)
}

/// `parse_csum`, with the current word at `csum`.
pub(crate) fn parse(a: &mut Args) -> CmdResult<ActionSpec> {
    let mut flags = 0;
    while let Some(w) = a.peek() {
        if matches(w, "csum") {
            next_arg(a)?;
            while let Some(f) = a.peek().and_then(target) {
                flags |= f;
                a.next();
            }
        } else if matches(w, "help") {
            return Err(Fail::new(255, USAGE));
        } else {
            break;
        }
    }
    if flags == 0 {
        return Err(soft("Illegal csum construct, empty <UPDATE> list"));
    }
    let action = verdict(parse_action_control_dflt(a, false, super::TC_ACT_OK)?)?;
    let index = super::parse_index(a, |v| format!("Illegal \"index\" ({v}) <csum>"))?;
    let index = index.unwrap_or(0);
    Ok(ActionSpec {
        index,
        opts: ActionOpts::Csum(CsumOpts {
            action,
            update_flags: flags,
        }),
        cookie: None,
        no_percpu: false,
        offload: 0,
    })
}

/// `print_csum`.
pub(crate) fn print(d: &ActionDump, cx: &PrintCx, out: &mut Out) {
    let ActionOpts::Csum(o) = &d.opts else {
        return;
    };
    out.str(To::Any, "kind", "csum ", "csum");
    let names: Vec<&str> = PRINTED
        .iter()
        .filter(|(f, _)| o.update_flags & f != 0)
        .map(|(_, n)| *n)
        .collect();
    let list = if names.is_empty() {
        "?empty".to_string()
    } else {
        names.join(", ")
    };
    out.str(To::Any, "csum", &format!("({list}) "), &list);
    print_action_control(out, "action ", o.action, "");
    out.nl();
    super::print_index_tail(d, cx, "\tindex ", out);
}

#[cfg(test)]
mod tests {
    use crate::f::testutil::{ingress, tc};

    const ADD: &str = "filter add dev DEV parent ffff: protocol ip prio 1 u32 match u32 0 0";

    #[test]
    fn parse_errors_as_iproute2_6_1() {
        let tail = |n: usize| {
            format!("bad action parsing\nparse_action: bad value ({n}:csum)!\nIllegal \"action\"\n")
        };
        let incomplete = "Command line is not complete. Try option \"help\"\n".to_string();
        for (opts, code, err) in [
            ("csum", 255, incomplete.clone()),
            (
                "csum foo",
                1,
                format!("Illegal csum construct, empty <UPDATE> list\n{}", tail(2)),
            ),
            ("csum tcp index", 255, incomplete.clone()),
            (
                "csum tcp index x",
                1,
                format!("Illegal \"index\" (x) <csum>\n{}", tail(4)),
            ),
            ("csum tcp help", 255, format!("{}\n", super::USAGE)),
            (
                "csum udp xor iph index 3",
                255,
                "Bad action type xor\nUsage: ... gact".into(),
            ),
        ] {
            let mut n = ingress();
            let o = tc(&mut n, &format!("{ADD} action {opts}"));
            assert_eq!(o.code, code, "{opts}: {}", o.stderr);
            assert!(o.stderr.starts_with(&err), "{opts}: {}", o.stderr);
        }
    }

    #[test]
    fn printed_as_iproute2_6_1_prints_it() {
        // What iproute2 6.1's print_csum made of kernel-style dumps of these.
        let mut n = ingress();
        let acts = "action csum ip and tcp index 1 \
            action csum iph icmp igmp t u udpl s goto chain 7 index 2 \
            action csum udp + udplite or sctp drop index 5";
        let o = tc(&mut n, &format!("{ADD} {acts}"));
        assert_eq!(o.code, 0, "{}", o.stderr);
        let out = tc(&mut n, "filter show dev DEV parent ffff:").stdout;
        assert!(
            out.ends_with(
                "\taction order 1: csum (iph, tcp) action pass\n\tindex 1 ref 1 bind 1\n\n\
                 \taction order 2: csum (iph, icmp, igmp, tcp, udp, udplite, sctp) action goto chain 7\n\tindex 2 ref 1 bind 1\n\n\
                 \taction order 3: csum (udp, udplite, sctp) action drop\n\tindex 5 ref 1 bind 1\n\n"
            ),
            "{out}"
        );
        let json = tc(&mut n, "-j filter show dev DEV parent ffff:").stdout;
        assert!(
            json.contains(r#"{"order":1,"kind":"csum","csum":"iph, tcp","control_action":{"type":"pass"},"index":1,"ref":1,"bind":1}"#),
            "{json}"
        );
    }
}
