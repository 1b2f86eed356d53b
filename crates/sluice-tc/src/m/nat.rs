//! nat syntax (iproute2 tc/m_nat.c): `nat DIRECTION OLD NEW [nat
//! DIRECTION OLD NEW]... [CONTROL] [index N]` with DIRECTION a prefix of
//! `ingress` or `egress`, OLD an address with an optional prefix length or
//! netmask (`default`, `any`, `all`: 0.0.0.0) and NEW an address (its
//! prefix is read and dropped). The mask is tc's `~0 << (32 - plen)` as an
//! x86 machine computes it, so a prefix length of 0 gives all ones. A later
//! construct replaces the addresses; `egress` once given stays. The control
//! action is `pass` when none is given.
//!
//! Printed as `nat DIRECTION OLD/LEN NEW CONTROL` and `\t index N ref R
//! bind B`, where LEN is what iproute2 6.1 computes from the mask read in
//! the wrong byte order: 32 for every prefix of 8 or more, 24 + p for a
//! prefix p below 8 (its bug, kept: scripts parse this output). In JSON
//! the kind's key is `type`.

use super::{next_arg, parse_action_control_dflt, print_action_control, soft, verdict, PrintCx};
use crate::args::{matches, Args, CmdResult, Fail};
use crate::f::u32::get_prefix;
use crate::out::{Out, To};
use sluice_core::act::nat::{NatOpts, FLAG_EGRESS};
use sluice_core::act::{ActionDump, ActionOpts, ActionSpec};
use sluice_core::cls::Verdict;
use std::net::Ipv4Addr;

const USAGE: &str = "Usage: ... nat NAT
NAT := DIRECTION OLD NEW
DIRECTION := { ingress | egress }
OLD := PREFIX
NEW := ADDRESS";

/// An IPv4 address (and prefix length) as `get_prefix_1(AF_INET)` reads it.
fn prefix(w: &str) -> Option<(Ipv4Addr, u32)> {
    let (b, plen) = get_prefix(w, false)?;
    Some((Ipv4Addr::new(b[0], b[1], b[2], b[3]), plen))
}

/// `parse_nat_args`: DIRECTION OLD NEW, with the current word at DIRECTION.
/// `None` when one of them is not what it should be.
fn construct(a: &mut Args, o: &mut NatOpts) -> CmdResult<Option<()>> {
    let dir = a.peek().unwrap_or_default();
    if matches(dir, "egress") {
        o.flags |= FLAG_EGRESS;
    } else if !matches(dir, "ingress") {
        return Ok(None);
    }
    let Some((old, plen)) = prefix(next_arg(a)?) else {
        return Ok(None);
    };
    let Some((new, _)) = prefix(next_arg(a)?) else {
        return Ok(None);
    };
    o.old_addr = old;
    o.new_addr = new;
    // x86 shifts by the count modulo 32: a prefix of 0 keeps every bit.
    o.mask = Ipv4Addr::from(u32::MAX.wrapping_shl(32 - plen));
    a.next();
    Ok(Some(()))
}

/// `parse_nat`, with the current word at `nat`.
pub(crate) fn parse(a: &mut Args) -> CmdResult<ActionSpec> {
    let mut o = NatOpts {
        action: Verdict::Ok,
        old_addr: Ipv4Addr::UNSPECIFIED,
        new_addr: Ipv4Addr::UNSPECIFIED,
        mask: Ipv4Addr::UNSPECIFIED,
        flags: 0,
    };
    while let Some(w) = a.peek() {
        if matches(w, "nat") {
            let dir = next_arg(a)?;
            let mut tried = a.clone();
            if construct(&mut tried, &mut o)?.is_none() {
                return Err(soft(format!("Illegal nat construct ({dir})\n{USAGE}")));
            }
            *a = tried;
        } else if matches(w, "help") {
            return Err(Fail::new(255, USAGE));
        } else {
            break;
        }
    }
    o.action = verdict(parse_action_control_dflt(a, false, super::TC_ACT_OK)?)?;
    let index = super::parse_index(a, |_| "Nat: Illegal \"index\"".into())?.unwrap_or(0);
    Ok(ActionSpec {
        index,
        opts: ActionOpts::Nat(o),
        cookie: None,
        no_percpu: false,
        offload: 0,
    })
}

/// The prefix length iproute2 6.1 prints for `mask`: `ffs` of the mask's
/// bytes read as a little-endian number.
fn printed_len(mask: Ipv4Addr) -> u32 {
    let x = u32::from_le_bytes(mask.octets());
    if x == 0 {
        0
    } else {
        32 - x.trailing_zeros()
    }
}

/// `print_nat`.
pub(crate) fn print(d: &ActionDump, cx: &PrintCx, out: &mut Out) {
    let ActionOpts::Nat(o) = &d.opts else {
        return;
    };
    out.str(To::Any, "type", " nat ", "nat");
    let dir = if o.flags & FLAG_EGRESS != 0 {
        "egress"
    } else {
        "ingress"
    };
    out.str(To::Any, "direction", dir, dir);
    let old = format!("{}/{}", o.old_addr, printed_len(o.mask));
    out.str(To::Any, "old_addr", &format!(" {old}"), &old);
    let new = o.new_addr.to_string();
    out.str(To::Any, "new_addr", &format!(" {new}"), &new);
    print_action_control(out, " ", o.action, "");
    out.nl();
    super::print_index_tail(d, cx, "\t index ", out);
}

#[cfg(test)]
mod tests {
    use super::USAGE;
    use crate::f::testutil::tc;
    use crate::net::Net;

    /// iproute2 6.1's answer when a construct fails: `left` words from `nat` on.
    fn construct_failed(word: &str, left: usize) -> String {
        format!(
            "Illegal nat construct ({word})\n{USAGE}\nbad action parsing\nparse_action: bad value ({left}:nat)!\nIllegal \"action\"\n"
        )
    }

    #[test]
    fn parse_errors_as_iproute2_6_1() {
        let incomplete = "Command line is not complete. Try option \"help\"\n".to_string();
        for (args, err) in [
            ("nat", incomplete.clone()),
            ("nat ingress", incomplete.clone()),
            ("nat egress 1.2.3.4", incomplete.clone()),
            ("nat foo 1.2.3.4 5.6.7.8", construct_failed("foo", 4)),
            ("nat INGRESS 1.2.3.4 5.6.7.8", construct_failed("INGRESS", 4)),
            ("nat nat ingress 1.2.3.4 5.6.7.8", construct_failed("nat", 5)),
            ("nat help", construct_failed("help", 2)),
            ("nat index 5", construct_failed("index", 3)),
            ("nat ingress foo 5.6.7.8", construct_failed("ingress", 4)),
            ("nat ingress 1.2.3.4 foo pipe", construct_failed("ingress", 5)),
            ("nat ingress 1.1.1.1 1.1888.2.2 index 7", construct_failed("ingress", 6)),
            ("nat ingress 1.2.3.4/33 5.6.7.8", construct_failed("ingress", 4)),
            ("nat ingress default/8 5.6.7.8", construct_failed("ingress", 4)),
            ("nat ingress 1.2.3. 5.6.7.8", construct_failed("ingress", 4)),
            ("nat egress 1.2.3.4 ::1", construct_failed("egress", 4)),
            ("nat ingress 1.2.3.4 5.6.7.8 index", incomplete.clone()),
            (
                "nat ingress 1.1.1.1 1.18.2.2 index 4294967295555",
                "Nat: Illegal \"index\"\nbad action parsing\nparse_action: bad value (6:nat)!\nIllegal \"action\"\n".into(),
            ),
            ("nat ingress 1.2.3.4 5.6.7.8 help", format!("{USAGE}\n")),
            ("nat ingress 1.2.3.4 5.6.7.8 nat egress 1.1.1.1", incomplete.clone()),
            ("nat ingress 1.2.3.4 5.6.7.8 nat foo 1.1.1.1 2.2.2.2", construct_failed("foo", 8)),
        ] {
            let mut n = Net::new();
            let o = tc(&mut n, &format!("actions add action {args}"));
            assert_eq!((o.code, o.stderr.as_str()), (255, err.as_str()), "{args}");
        }
        // Words after the index start another action (here: gact's error).
        let mut n = Net::new();
        let o = tc(
            &mut n,
            "actions add action nat ingress 1.1.1.1 1.18.2.2 another_arg index 12",
        );
        assert_eq!(o.code, 255);
        assert!(
            o.stderr
                .starts_with("Bad action type another_arg\nUsage: ... gact"),
            "{}",
            o.stderr
        );
    }

    /// What iproute2 6.1 printed for kernel-style dumps of such actions
    /// (docs/research/nat.md §3), and the mask tc sends.
    #[test]
    fn printed_as_iproute2_6_1_prints_it() {
        let mut n = Net::new();
        for add in [
            "nat ingress 192.168.1.1 200.200.200.1",
            "nat egress 10.1.2.3/8 192.168.1.1 pipe index 5",
            "nat i 10.0.0.0/1 1.2.3.4 n e 9.9.9.0/255.255.255.0 8.8.8.8/16 n ingress 16.0.0.0/4 1.2.3.4 goto chain 3 index 9",
            "nat ingress any 10.10.10.1 jump 2 index 12",
        ] {
            let o = tc(&mut n, &format!("actions add action {add}"));
            // goto chain needs a filter: refused standalone, nothing created.
            if add.contains("goto") {
                assert_eq!(o.stderr, "Error: can't goto NULL proto/chain.\nWe have an error talking to the kernel\n");
                continue;
            }
            assert_eq!(o.code, 0, "{add}: {}", o.stderr);
        }
        let out = tc(&mut n, "actions ls action nat").stdout;
        let want = "total acts 3\n\n\
            \taction order 0:  nat ingress 192.168.1.1/32 200.200.200.1 pass\n\t index 1 ref 1 bind 0\n\tnot_in_hw\n";
        assert!(out.starts_with(want), "{out}");
        assert!(out.contains("\taction order 1:  nat egress 10.1.2.3/32 192.168.1.1 pipe\n\t index 5 ref 1 bind 0\n"), "{out}");
        assert!(out.contains("\taction order 2:  nat ingress 0.0.0.0/32 10.10.10.1 jump 2\n\t index 12 ref 1 bind 0\n"), "{out}");
        let j = tc(&mut n, "-j actions ls action nat").stdout;
        assert!(j.contains(r#"{"order":0,"type":"nat","direction":"ingress","old_addr":"192.168.1.1/32","new_addr":"200.200.200.1","control_action":{"type":"pass"},"index":1,"ref":1,"bind":0,"not_in_hw":true"#), "{j}");
        // In a filter: a later construct's addresses, egress kept, prefixes
        // below 8 printed as 6.1 prints them (/1 -> 25, /4 -> 28).
        let mut n = crate::f::testutil::ingress();
        let add = "filter add dev DEV parent ffff: protocol ip matchall \
            action nat i 10.0.0.0/1 1.2.3.4 n e 9.9.9.0/255.255.255.0 8.8.8.8/16 goto chain 3 \
            action nat ingress 16.0.0.0/4 1.2.3.4";
        let o = tc(&mut n, add);
        assert_eq!(o.code, 0, "{}", o.stderr);
        let out = tc(&mut n, "filter show dev DEV parent ffff:").stdout;
        let want = "\taction order 1:  nat egress 9.9.9.0/32 8.8.8.8 goto chain 3\n\t index 1 ref 1 bind 1\n\n\
            \taction order 2:  nat ingress 16.0.0.0/28 1.2.3.4 pass\n\t index 2 ref 1 bind 1\n\n";
        assert!(out.ends_with(want), "{out}");
        let mut n = crate::f::testutil::ingress();
        let o = tc(&mut n, "filter add dev DEV parent ffff: protocol ip matchall action nat ingress 10.0.0.0/1 1.2.3.4");
        assert_eq!(o.code, 0);
        let out = tc(&mut n, "filter show dev DEV parent ffff:").stdout;
        assert!(
            out.contains("nat ingress 10.0.0.0/25 1.2.3.4 pass"),
            "{out}"
        );
    }

    /// The `struct tc_nat` iproute2 6.1 sent for these (captured with
    /// strace, docs/research/nat.md §1.4): old, new, mask, flags.
    #[test]
    fn sends_what_iproute2_6_1_sends() {
        use sluice_core::act::ActionOpts;
        for (args, old, new, mask, flags) in [
            (
                "egress 10.10.10.1 20.20.20.1",
                "10.10.10.1",
                "20.20.20.1",
                "255.255.255.255",
                1,
            ),
            (
                "ingress 10.1.2.3/24 192.168.7.9/16",
                "10.1.2.3",
                "192.168.7.9",
                "255.255.255.0",
                0,
            ),
            (
                "ingress 10.0.0.0/255.255.0.0 1.2.3.4",
                "10.0.0.0",
                "1.2.3.4",
                "255.255.0.0",
                0,
            ),
            (
                "ingress 10.0.0.0/0 1.2.3.4",
                "10.0.0.0",
                "1.2.3.4",
                "255.255.255.255",
                0,
            ),
            (
                "ingress 1.2.3.4/0.0.0.0 1.2.3.4",
                "1.2.3.4",
                "1.2.3.4",
                "255.255.255.255",
                0,
            ),
            (
                "ingress 10.0.0.0/1 1.2.3.4",
                "10.0.0.0",
                "1.2.3.4",
                "128.0.0.0",
                0,
            ),
            (
                "ingress 10.0.0.0/31 1.2.3.4",
                "10.0.0.0",
                "1.2.3.4",
                "255.255.255.254",
                0,
            ),
            (
                "ingress all 10.10.10.1",
                "0.0.0.0",
                "10.10.10.1",
                "255.255.255.255",
                0,
            ),
            (
                "ingress 1.2.3.4 default",
                "1.2.3.4",
                "0.0.0.0",
                "255.255.255.255",
                0,
            ),
            (
                "ingress 10.8 20.1.2",
                "10.8.0.0",
                "20.1.2.0",
                "255.255.255.255",
                0,
            ),
            (
                "ingress 0x0a.0x01.010.1 0xc0.168.0.1",
                "10.1.8.1",
                "192.168.0.1",
                "255.255.255.255",
                0,
            ),
            (
                "ingress 1.2.3.4/010 5.6.7.8",
                "1.2.3.4",
                "5.6.7.8",
                "255.0.0.0",
                0,
            ),
            (
                "eg 1.2.3.4 5.6.7.8 nat ingress 9.9.9.9 8.8.8.8",
                "9.9.9.9",
                "8.8.8.8",
                "255.255.255.255",
                1,
            ),
        ] {
            let words: Vec<String> = format!("nat {args}").split(' ').map(String::from).collect();
            let spec = super::parse(&mut crate::args::Args::new(&words)).expect(args);
            let ActionOpts::Nat(o) = spec.opts else {
                panic!("nat")
            };
            let got = (
                o.old_addr.to_string(),
                o.new_addr.to_string(),
                o.mask.to_string(),
                o.flags,
            );
            assert_eq!(got, (old.into(), new.into(), mask.into(), flags), "{args}");
        }
    }
}
