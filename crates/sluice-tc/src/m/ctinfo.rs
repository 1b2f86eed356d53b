//! ctinfo syntax (iproute2 tc/m_ctinfo.c):
//! `ctinfo [dscp MASK [STATEMASK]] [cpmark [MASK]] [zone ZONE] [CONTROL]
//! [index N]`, in that order. A word after `dscp MASK` or `cpmark` that
//! reads as a number is taken as the optional mask, anything else is left
//! for what follows. Masks are C numbers (`0x` hex, leading-0 octal); zero
//! masks are not sent (so `cpmark 0` asks for nothing). tc itself refuses
//! a DSCP mask that is not 6 contiguous bits or overlaps the state mask.
//!
//! Printed as `ctinfo zone Z pipe`, then the index line with ` dscp MASK
//! STATEMASK` and ` cpmark MASK` as C's `%#010llx` (so a zero state mask
//! is `0000000000`; JSON has `%#llx` strings) and, under `-s`, the ages
//! and ` DSCP set N error N CPMARK set N`.

use super::connmark::{keyed, skip_kind};
use super::{parse_action_control_dflt, print_action_control, soft, verdict, PrintCx};
use crate::args::{matches, Args, CmdResult};
use crate::out::{Out, To};
use sluice_core::act::ctinfo::CtinfoOpts;
use sluice_core::act::{ActionDump, ActionOpts, ActionSpec};

pub(crate) const USAGE: &str = "Usage: ... ctinfo [dscp mask [statemask]] [cpmark [mask]] [zone ZONE] [CONTROL] [index <INDEX>]
where :
\tdscp   MASK bitmask location of stored DSCP
\t       STATEMASK bitmask to determine conditional restoring
\tcpmark MASK mask applied to mark on restoration
\tZONE is the conntrack zone
\tCONTROL := reclassify | pipe | drop | continue | ok |
\t           goto chain <CHAIN_INDEX>";

/// After a keyword: the next word as an optional number (consumed if it
/// is one), as m_ctinfo.c's `NEXT_ARG_OK` / `NEXT_ARG_FWD` steps read it.
fn optional_number(a: &mut Args) -> Option<u32> {
    a.next();
    let v = super::get_u32(a.peek()?, 0)?;
    a.next();
    Some(v)
}

/// `parse_ctinfo`, with the current word at `ctinfo`.
pub(crate) fn parse(a: &mut Args) -> CmdResult<ActionSpec> {
    skip_kind(a, "ctinfo", USAGE)?;
    let mut o = CtinfoOpts::default();
    let (mut dscp, mut state, mut cpmark) = (0, 0, 0);
    if a.peek().is_some_and(|w| matches(w, "dscp")) {
        let v = super::next_arg(a)?;
        dscp = super::get_u32(v, 0).ok_or_else(|| soft("ctinfo: Illegal dscp \"mask\""))?;
        state = optional_number(a).unwrap_or(0);
    }
    if a.peek().is_some_and(|w| matches(w, "cpmark")) {
        cpmark = optional_number(a).unwrap_or(u32::MAX);
    }
    o.zone = keyed(a, "ctinfo", "zone", super::get_u16)?.unwrap_or(0);
    o.action = verdict(parse_action_control_dflt(a, false, super::TC_ACT_PIPE)?)?;
    let index = keyed(a, "ctinfo", "index", super::get_u32)?.unwrap_or(0);
    if dscp & state != 0 {
        return Err(soft("ctinfo: dscp mask & statemask must NOT overlap"));
    }
    if dscp != 0 && dscp >> dscp.trailing_zeros() != 0x3f {
        return Err(soft("ctinfo: dscp mask must be 6 contiguous bits long"));
    }
    let nonzero = |v: u32| (v != 0).then_some(v);
    o.dscp_mask = nonzero(dscp);
    o.dscp_statemask = nonzero(state);
    o.cpmark_mask = nonzero(cpmark);
    Ok(ActionSpec {
        index,
        opts: ActionOpts::Ctinfo(o),
        cookie: None,
        no_percpu: false,
        offload: 0,
    })
}

/// `print_0xhex`: C's `%#010llx` in text, `%#llx` in JSON.
fn hex(out: &mut Out, key: &str, lead: &str, v: u32) {
    let text = if v == 0 {
        format!("{lead}0000000000")
    } else {
        format!("{lead}{v:#010x}")
    };
    let json = if v == 0 {
        "0".to_string()
    } else {
        format!("{v:#x}")
    };
    out.str(To::Any, key, &text, &json);
}

/// `print_ctinfo`.
pub(crate) fn print(d: &ActionDump, cx: &PrintCx, out: &mut Out) {
    let ActionOpts::Ctinfo(o) = &d.opts else {
        return;
    };
    out.str(To::Any, "kind", "ctinfo ", "ctinfo");
    let z = o.zone as u64;
    out.uint(To::Any, "zone", &format!("zone {z}"), z);
    print_action_control(out, " ", o.action, "");
    out.nl();
    let i = d.index as u64;
    out.uint(To::Any, "index", &format!("\t index {i}"), i);
    let r = d.refcnt;
    out.int(To::Any, "ref", &format!(" ref {r}"), r as i64);
    let b = d.bindcnt;
    out.int(To::Any, "bind", &format!(" bind {b}"), b as i64);
    if let Some(m) = o.dscp_mask {
        hex(out, "dscpmask", " dscp ", m);
        hex(out, "dscpstatemask", " ", o.dscp_statemask.unwrap_or(0));
    }
    if let Some(m) = o.cpmark_mask {
        hex(out, "cpmark", " cpmark ", m);
    }
    if cx.stats {
        super::print_tm(d, cx.now, out);
        let c = o.counters;
        out.uint(
            To::Any,
            "dscpset",
            &format!(" DSCP set {}", c.dscp_set),
            c.dscp_set,
        );
        let e = c.dscp_error;
        out.uint(To::Any, "dscperror", &format!(" error {e}"), e);
        let m = c.cpmark_set;
        out.uint(To::Any, "cpmarkset", &format!(" CPMARK set {m}"), m);
    }
    out.nl();
}

#[cfg(test)]
mod tests {
    use crate::f::testutil::{dev, ingress, tc};

    const ADD: &str = "filter add dev DEV parent ffff: protocol ip prio 1 u32 match u32 0 0";

    #[test]
    fn parse_errors_as_iproute2_6_1() {
        // Each captured from tc 6.1 (the parse fails before the kernel is asked).
        let tail = |n: usize, kind: &str| {
            format!(
                "bad action parsing\nparse_action: bad value ({n}:{kind})!\nIllegal \"action\"\n"
            )
        };
        let incomplete = "Command line is not complete. Try option \"help\"\n".to_string();
        let gact = |w: &str| format!("Bad action type {w}\nUsage: ... gact");
        for (opts, code, err) in [
            ("connmark zone", 255, incomplete.clone()),
            (
                "connmark zone x",
                1,
                format!("connmark: Illegal \"zone\"\n{}", tail(3, "connmark")),
            ),
            (
                "connmark zone 70000",
                1,
                format!("connmark: Illegal \"zone\"\n{}", tail(3, "connmark")),
            ),
            (
                "connmark zone -1",
                1,
                format!("connmark: Illegal \"zone\"\n{}", tail(3, "connmark")),
            ),
            (
                "connmark zone 3 index -1",
                1,
                format!("connmark: Illegal \"index\"\n{}", tail(5, "connmark")),
            ),
            (
                "connmark help",
                255,
                format!("{}\n", super::super::connmark::USAGE),
            ),
            ("connmark zone 1 goto chain", 255, incomplete.clone()),
            ("connmark zone 1 foo", 255, gact("foo")),
            ("ctinfo dscp", 255, incomplete.clone()),
            (
                "ctinfo dscp x",
                1,
                format!("ctinfo: Illegal dscp \"mask\"\n{}", tail(3, "ctinfo")),
            ),
            (
                "ctinfo dscp 0x3f 0x20",
                1,
                format!(
                    "ctinfo: dscp mask & statemask must NOT overlap\n{}",
                    tail(4, "ctinfo")
                ),
            ),
            (
                "ctinfo dscp 0x1f",
                1,
                format!(
                    "ctinfo: dscp mask must be 6 contiguous bits long\n{}",
                    tail(3, "ctinfo")
                ),
            ),
            (
                "ctinfo cpmark 0x10 zone x",
                1,
                format!("ctinfo: Illegal \"zone\"\n{}", tail(5, "ctinfo")),
            ),
            // `cpmark` is not read after `index`: it is the next action's word.
            ("ctinfo dscp 0xfc index 2 cpmark", 255, gact("cpmark")),
            // A third number after `dscp` is no option.
            ("ctinfo dscp 0xfc 0x100 0x5", 255, gact("0x5")),
            ("ctinfo help", 255, format!("{}\n", super::USAGE)),
        ] {
            let mut n = ingress();
            let o = tc(&mut n, &format!("{ADD} action {opts}"));
            assert_eq!(o.code, code, "{opts}: {}", o.stderr);
            assert!(o.stderr.starts_with(&err), "{opts}: {}", o.stderr);
        }
        // Accepted: the kind's name again (abbreviated), zero masks.
        for opts in [
            "connmark c zone 2",
            "ctinfo dscp 0xfc 3 cpmark 0 zone 1 drop index 1",
        ] {
            let mut n = ingress();
            let o = tc(&mut n, &format!("{ADD} action {opts}"));
            assert_eq!(o.code, 0, "{opts}: {}", o.stderr);
        }
    }

    #[test]
    fn standalone_actions_are_kept_listed_and_flushed() {
        let mut n = dev();
        for cmd in [
            "actions add action connmark zone 3 index 4",
            "actions add action ctinfo cpmark 0x10 index 2",
        ] {
            let o = tc(&mut n, cmd);
            assert_eq!(o.code, 0, "{cmd}: {}", o.stderr);
        }
        let o = tc(&mut n, "actions ls action connmark");
        assert!(
            o.stdout.starts_with(
                "total acts 1\n\n\taction order 0: connmark zone 3 pipe\n\t index 4 ref 1 bind 0\n"
            ),
            "{}",
            o.stdout
        );
        let o = tc(&mut n, "actions get action ctinfo index 2");
        assert!(
            o.stdout
                .contains("\t index 2 ref 1 bind 0 cpmark 0x00000010\n"),
            "{}",
            o.stdout
        );
        assert_eq!(tc(&mut n, "actions flush action ctinfo").code, 0);
        assert_eq!(tc(&mut n, "actions ls action ctinfo").stdout, "");
        assert!(tc(&mut n, "actions ls action connmark")
            .stdout
            .contains("connmark zone 3"));
    }

    /// What iproute2 6.1's own tc printed for kernel-style dumps of these
    /// actions (its print_connmark / print_ctinfo fed hand-built
    /// RTM_NEWTFILTER messages; this kernel has neither action).
    const PRINTED: &str = "\taction order 1: connmark zone 7 pipe
\t index 3 ref 1 bind 1

\taction order 2: connmark zone 0 goto chain 5
\t index 4 ref 1 bind 1

\taction order 3: ctinfo zone 0 pipe
\t index 1 ref 1 bind 1 dscp 0xfc000000 0x01000000

\taction order 4: ctinfo zone 9 drop
\t index 2 ref 1 bind 1 dscp 0x0000003f 0000000000 cpmark 0x0000ff00

\taction order 5: ctinfo zone 0 pipe
\t index 5 ref 1 bind 1

\taction order 6: ctinfo zone 0 pipe
\t index 6 ref 1 bind 1 cpmark 0xffffffff
";

    const JSON: &str = r#""actions":[{"order":1,"kind":"connmark","zone":7,"control_action":{"type":"pipe"},"index":3,"ref":1,"bind":1},{"order":2,"kind":"connmark","zone":0,"control_action":{"type":"goto","chain":5},"index":4,"ref":1,"bind":1},{"order":3,"kind":"ctinfo","zone":0,"control_action":{"type":"pipe"},"index":1,"ref":1,"bind":1,"dscpmask":"0xfc000000","dscpstatemask":"0x1000000"},{"order":4,"kind":"ctinfo","zone":9,"control_action":{"type":"drop"},"index":2,"ref":1,"bind":1,"dscpmask":"0x3f","dscpstatemask":"0","cpmark":"0xff00"},{"order":5,"kind":"ctinfo","zone":0,"control_action":{"type":"pipe"},"index":5,"ref":1,"bind":1},{"order":6,"kind":"ctinfo","zone":0,"control_action":{"type":"pipe"},"index":6,"ref":1,"bind":1,"cpmark":"0xffffffff"}]"#;

    #[test]
    fn connmark_and_ctinfo_print_as_iproute2_6_1() {
        let mut n = ingress();
        let acts = "action connmark zone 7 index 3 action connmark goto chain 5 index 4 \
            action ctinfo dscp 0xfc000000 0x01000000 \
            action ctinfo dscp 0x3f cpmark 0xff00 zone 9 drop index 2 \
            action ctinfo index 5 action ctinfo cpmark index 6";
        let o = tc(&mut n, &format!("{ADD} {acts}"));
        assert_eq!(o.code, 0, "{}", o.stderr);
        let out = tc(&mut n, "filter show dev DEV parent ffff:").stdout;
        assert!(out.ends_with(&format!("{PRINTED}\n")), "{out}");
        let json = tc(&mut n, "-j filter show dev DEV parent ffff:").stdout;
        assert!(json.contains(JSON), "{json}");
        // Under -s, ctinfo's counters follow the ages (none printed at
        // age 0) on the index line.
        let out = tc(&mut n, "-s filter show dev DEV parent ffff:").stdout;
        assert!(
            out.contains(" cpmark 0x0000ff00 DSCP set 0 error 0 CPMARK set 0\n"),
            "{out}"
        );
    }
}
