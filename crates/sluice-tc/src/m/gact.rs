//! gact syntax (iproute2 tc/m_gact.c, built with `CONFIG_GACT_PROB`):
//! `[gact] CONTROL [random netrand|determ CONTROL VAL] [index N]`, or
//! `gact index N` to bind an existing action.

use super::{next_arg, parse_action_control, print_action_control, soft, verdict, PrintCx};
use crate::args::{matches, Args, CmdResult, Fail};
use crate::out::{Out, To};
use sluice_core::act::gact::{GactOpts, GactRandKind, GactRandom};
use sluice_core::act::{ActionDump, ActionOpts, ActionSpec};
use sluice_core::cls::Verdict;

const USAGE: &str = "Usage: ... gact <ACTION> [RAND] [INDEX]
Where: \tACTION := reclassify | drop | continue | pass | pipe |
       \t          goto chain <CHAIN_INDEX> | jump <JUMP_COUNT>
\tRAND := random <RANDTYPE> <ACTION> <VAL>
\tRANDTYPE := netrand | determ
\tVAL : = value not exceeding 10000
\tJUMP_COUNT := Absolute jump from start of action list
\tINDEX := index value used

";

/// `usage()`: the explanation, after what was printed, and `exit(-1)`.
fn usage(printed: Fail) -> Fail {
    Fail {
        stderr: format!("{}{USAGE}", printed.stderr),
        code: 255,
    }
}

/// `parse_gact`, with the current word at `gact` or at the control verdict.
pub(crate) fn parse(a: &mut Args) -> CmdResult<ActionSpec> {
    if a.peek().is_some_and(|w| matches(w, "gact")) {
        next_arg(a)?;
    }
    let mut action = 0;
    let mut random = None;
    let bind_by_index = a.peek().is_some_and(|w| matches(w, "index"));
    if !bind_by_index {
        action =
            parse_action_control(a, false).map_err(|f| if f.code == 1 { usage(f) } else { f })?;
        if let Some(w) = a.peek() {
            if matches(w, "random") {
                random = Some(parse_random(a)?);
            } else if matches(w, "help") {
                return Err(usage(Fail::new(255, "")));
            }
        }
    }
    let mut index = 0;
    if let Some(w) = a.peek() {
        if matches(w, "index") {
            let v = next_arg(a)?;
            index = super::get_u32(v, 10).ok_or_else(|| soft("Illegal \"index\""))?;
            a.next();
        } else if matches(w, "help") {
            return Err(usage(Fail::new(255, "")));
        }
    }
    Ok(ActionSpec {
        index,
        opts: ActionOpts::Gact(GactOpts {
            action: verdict(action)?,
            random,
        }),
        cookie: None,
        no_percpu: false,
        offload: 0,
    })
}

/// `random netrand|determ CONTROL VAL`.
fn parse_random(a: &mut Args) -> CmdResult<GactRandom> {
    let w = next_arg(a)?;
    let kind = if matches(w, "netrand") {
        GactRandKind::Netrand
    } else if matches(w, "determ") {
        GactRandKind::Determ
    } else {
        return Err(soft("Illegal \"random type\""));
    };
    next_arg(a)?;
    let paction =
        parse_action_control(a, false).map_err(|f| if f.code == 1 { usage(f) } else { f })?;
    // iproute2 prints the uninitialised value when VAL does not parse; on
    // the captured build that is 0x1000.
    let pval = a
        .peek()
        .and_then(|w| super::get_u16(w, 10))
        .ok_or_else(|| soft("Illegal probability val 0x1000"))?;
    if pval > 10000 {
        return Err(soft(format!("Illegal probability val  0x{pval:x}")));
    }
    a.next();
    Ok(GactRandom {
        kind,
        action: verdict(paction)?,
        pval,
    })
}

/// `print_gact`.
pub(crate) fn print(d: &ActionDump, cx: &PrintCx, out: &mut Out) {
    let ActionOpts::Gact(o) = &d.opts else { return };
    out.str(To::Any, "kind", "gact ", "gact");
    print_action_control(out, "action ", o.action, "");
    let (kind, paction, pval) = match &o.random {
        Some(r) => (
            match r.kind {
                GactRandKind::Netrand => "netrand",
                GactRandKind::Determ => "determ",
            },
            r.action,
            r.pval,
        ),
        None => ("none", Verdict::Ok, 0),
    };
    out.open("prob");
    out.nl();
    out.str(
        To::Any,
        "random_type",
        &format!("\t random type {kind}"),
        kind,
    );
    print_action_control(out, " ", paction, " ");
    out.int(To::Any, "val", &format!("val {pval}"), pval as i64);
    out.close();
    out.nl();
    super::print_index_tail(d, cx, "\t index ", out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn gact_syntax_as_m_gact_reads_it() {
        let w = words("drop random determ ok 10 index 7");
        let s = parse(&mut Args::new(&w)).unwrap();
        assert_eq!(s.index, 7);
        let ActionOpts::Gact(o) = s.opts else {
            panic!()
        };
        assert_eq!(o.action, Verdict::Shot);
        let r = o.random.unwrap();
        assert_eq!(
            (r.kind, r.action, r.pval),
            (GactRandKind::Determ, Verdict::Ok, 10)
        );
        // Golden actions.golden "gact parse errors and help".
        let w = words("gact drop random determ ok");
        let e = parse(&mut Args::new(&w)).unwrap_err();
        assert_eq!(
            (e.code, e.stderr.as_str()),
            (1, "Illegal probability val 0x1000\n")
        );
        let w = words("gact help");
        let e = parse(&mut Args::new(&w)).unwrap_err();
        assert_eq!(e.code, 255);
        assert!(e
            .stderr
            .starts_with("Bad action type help\nUsage: ... gact <ACTION>"));
        let w = words("gact drop index abc");
        let e = parse(&mut Args::new(&w)).unwrap_err();
        assert_eq!(e.stderr, "Illegal \"index\"\n");
    }
}
