//! simple syntax (iproute2 tc/m_simple.c): `simple [sdata STRING]
//! [CONTROL] [index N]`, the control action `pipe` when none is given; the
//! string at most 31 bytes. Printed as m_simple.c prints it: `Simple
//! <STRING>` with no control action. Those lines are plain `fprintf`s, so
//! in JSON iproute2 6.1 writes them raw into the JSON text, which is then
//! not valid JSON; sluice writes the same bytes (as for skbmod, hfsc, qfq).

use super::{next_arg, parse_action_control_dflt, soft, verdict, PrintCx};
use crate::args::{matches, Args, CmdResult, Fail};
use crate::out::Out;
use sluice_core::act::simple::{SimpleOpts, SIMP_MAX_DATA};
use sluice_core::act::{ActionDump, ActionOpts, ActionSpec};

const USAGE: &str = "Usage:... simple [sdata STRING] [index INDEX] [CONTROL]
\tSTRING being an arbitrary string
\tINDEX := optional index value used
\tCONTROL := reclassify|pipe|drop|continue|ok";

/// `parse_simple`, with the current word at `simple`.
pub(crate) fn parse(a: &mut Args) -> CmdResult<ActionSpec> {
    let mut sdata = None;
    let mut ok = 0;
    while let Some(w) = a.peek() {
        if matches(w, "simple") {
            next_arg(a)?;
        } else if matches(w, "sdata") {
            sdata = Some(next_arg(a)?.to_string());
            ok += 1;
            a.next();
        } else if matches(w, "help") {
            return Err(Fail::new(255, USAGE));
        } else {
            break;
        }
    }
    let action = verdict(parse_action_control_dflt(a, false, super::TC_ACT_PIPE)?)?;
    let index = super::parse_index(a, |v| format!("simple: Illegal \"index\" ({v})"))?;
    ok += index.is_some() as u32;
    let index = index.unwrap_or(0);
    if ok == 0 {
        return Err(soft(USAGE));
    }
    if let Some(s) = sdata.as_deref().filter(|s| s.len() > SIMP_MAX_DATA - 1) {
        return Err(soft(format!(
            "simple: Illegal string len {} <{s}>",
            s.len()
        )));
    }
    Ok(ActionSpec {
        index,
        opts: ActionOpts::Simple(SimpleOpts { action, sdata }),
        cookie: None,
        no_percpu: false,
        offload: 0,
    })
}

/// `print_simple`.
pub(crate) fn print(d: &ActionDump, cx: &PrintCx, out: &mut Out) {
    let ActionOpts::Simple(o) = &d.opts else {
        return;
    };
    let s = o.sdata.as_deref().unwrap_or("");
    out.raw(&format!(
        "Simple <{s}>\n\t index {} ref {} bind {}",
        d.index, d.refcnt, d.bindcnt
    ));
    if cx.stats {
        super::print_tm(d, cx.now, out);
    }
    out.nl();
}

#[cfg(test)]
mod tests {
    use crate::f::testutil::{ingress, tc};

    const ADD: &str = "filter add dev DEV parent ffff: protocol ip prio 1 u32 match u32 0 0";

    #[test]
    fn parse_errors_as_iproute2_6_1_and_the_kernels_refusal() {
        let tail = "bad action parsing\nparse_action: bad value (3:simple)!\nIllegal \"action\"\n";
        let incomplete = "Command line is not complete. Try option \"help\"\n";
        let long = "0123456789012345678901234567890123";
        for (opts, code, err) in [
            ("simple", 255, incomplete.to_string()),
            ("simple sdata", 255, incomplete.to_string()),
            (
                &format!("simple sdata {long}") as &str,
                1,
                format!("simple: Illegal string len 34 <{long}>\n{tail}"),
            ),
            (
                "simple index x",
                1,
                format!("simple: Illegal \"index\" (x)\n{tail}"),
            ),
            ("simple help", 255, format!("{}\n", super::USAGE)),
            (
                "simple sdata hi foo",
                255,
                "Bad action type foo\nUsage: ... gact".into(),
            ),
            // Parsed, then refused by act_simple: no string to create with.
            (
                "simple index 4",
                2,
                "RTNETLINK answers: Invalid argument\nWe have an error talking to the kernel\n"
                    .into(),
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
        // iproute2 6.1's print_simple, fed the kernel's dump of these.
        let mut n = ingress();
        let o = tc(
            &mut n,
            &format!("{ADD} action simple sdata hello index 4 action simple sdata hi drop index 7"),
        );
        assert_eq!(o.code, 0, "{}", o.stderr);
        let out = tc(&mut n, "filter show dev DEV parent ffff:").stdout;
        assert!(
            out.ends_with(
                "\taction order 1: Simple <hello>\n\t index 4 ref 1 bind 1\n\n\
                 \taction order 2: Simple <hi>\n\t index 7 ref 1 bind 1\n\n"
            ),
            "{out}"
        );
        // A standalone one needs its string (`tc actions` exits 255 on a
        // kernel error); bound by index, it does not.
        assert_eq!(tc(&mut n, "actions add action simple index 9").code, 255);
        assert_eq!(
            tc(&mut n, "actions add action simple sdata x index 9").code,
            0
        );
        let o = tc(&mut n, &format!("{ADD} action simple index 9"));
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert!(tc(&mut n, "actions get action simple index 9")
            .stdout
            .contains("Simple <x>\n\t index 9 ref 2 bind 1\n"));
        // In JSON the same bytes land raw in the document, as 6.1 writes them.
        assert_eq!(
            tc(&mut n, "-j actions get action simple index 9").stdout,
            "[{\"total acts\":0},{\"actions\":[{\"order\":1Simple <x>\n\t index 9 ref 2 bind 1,\"not_in_hw\":true}]}]\n"
        );
    }
}
