//! matchall syntax (iproute2 tc/f_matchall.c): `[skip_hw|skip_sw]
//! [classid CLASSID] [action ...]`; the handle is a number.

use super::{FPrintCx, Parsed};
use crate::args::{matches, Args, CmdResult};
use crate::m::{self, next_arg, soft, then};
use crate::out::{Out, To};
use sluice_core::cls::matchall::{MatchallDump, MatchallOpts};
use sluice_core::cls::{
    FilterOpts, TCA_CLS_FLAGS_IN_HW, TCA_CLS_FLAGS_NOT_IN_HW, TCA_CLS_FLAGS_SKIP_HW,
    TCA_CLS_FLAGS_SKIP_SW,
};
use sluice_core::handle::Handle;

const USAGE: &str = "Usage: ... matchall [skip_sw | skip_hw]
                 [ action ACTION_SPEC ] [ classid CLASSID ]

Where: SELECTOR := SAMPLE SAMPLE ...
       FILTERID := X:Y:Z
       ACTION_SPEC := ... look at individual actions

NOTE: CLASSID is parsed as hexadecimal input.";

/// C `strtol(s, NULL, 0)`: the leading number, 0 if none; `None` when it
/// saturates (`LONG_MIN`/`LONG_MAX`).
pub(super) fn strtol(s: &str) -> Option<i64> {
    let t = s.trim_start();
    let neg = t.starts_with('-');
    let Some((v, _)) = sluice_core::units::strtoul(t.trim_start_matches(['-', '+']), 0) else {
        return Some(0);
    };
    if v >= i64::MAX as u64 {
        return None;
    }
    Some(if neg { -(v as i64) } else { v as i64 })
}

/// `matchall_parse_opt`.
pub(super) fn parse(handle: Option<&str>, a: &mut Args) -> CmdResult<Parsed> {
    let mut tcm_handle = 0;
    if let Some(h) = handle {
        let v =
            strtol(h).ok_or_else(|| soft(format!("Illegal handle \"{h}\", must be numeric.")))?;
        tcm_handle = v as u32;
    }
    if a.is_empty() {
        return Ok(Parsed {
            handle: tcm_handle,
            opts: None,
        });
    }
    let mut o = MatchallOpts::default();
    let mut flags = 0;
    while let Some(w) = a.peek() {
        if matches(w, "classid") || w == "flowid" {
            let v = next_arg(a)?;
            o.classid = Some(Handle::parse_classid(v).ok_or_else(|| soft("Illegal \"classid\""))?);
        } else if matches(w, "action") {
            next_arg(a)?;
            o.actions = m::parse_actions(a).map_err(|f| then(f, "Illegal \"action\""))?;
            continue;
        } else if w == "skip_hw" || w == "skip_sw" {
            next_arg(a)?;
            flags |= if w == "skip_hw" {
                TCA_CLS_FLAGS_SKIP_HW
            } else {
                TCA_CLS_FLAGS_SKIP_SW
            };
            continue;
        } else if w == "help" {
            return Err(soft(USAGE));
        } else {
            return Err(soft(format!("What is \"{w}\"?\n{USAGE}")));
        }
        a.next();
    }
    if flags != 0 {
        if flags == TCA_CLS_FLAGS_SKIP_HW | TCA_CLS_FLAGS_SKIP_SW {
            return Err(soft("skip_hw and skip_sw are mutually exclusive"));
        }
        o.flags = Some(flags);
    }
    Ok(Parsed {
        handle: tcm_handle,
        opts: Some(FilterOpts::Matchall(o)),
    })
}

/// `matchall_print_opt`.
pub(super) fn print(d: &MatchallDump, handle: u32, cx: &FPrintCx, out: &mut Out) {
    if handle != 0 {
        out.uint(
            To::Any,
            "handle",
            &format!("handle 0x{handle:x} "),
            handle as u64,
        );
    }
    if let Some(c) = d.classid {
        let c = c.to_string();
        out.str(To::Any, "flowid", &format!("flowid {c} "), &c);
    }
    if d.flags & TCA_CLS_FLAGS_SKIP_HW != 0 {
        out.bool(To::Any, "skip_hw", "\n  skip_hw", true);
    }
    if d.flags & TCA_CLS_FLAGS_SKIP_SW != 0 {
        out.bool(To::Any, "skip_sw", "\n  skip_sw", true);
    }
    if d.flags & TCA_CLS_FLAGS_IN_HW != 0 {
        out.bool(To::Any, "in_hw", "\n  in_hw", true);
    } else if d.flags & TCA_CLS_FLAGS_NOT_IN_HW != 0 {
        out.bool(To::Any, "not_in_hw", "\n  not_in_hw", true);
    }
    if cx.act.stats {
        out.uint(
            To::Any,
            "rule_hit",
            &format!(" (rule hit {})", d.rhit),
            d.rhit,
        );
    }
    if !d.actions.is_empty() {
        m::print_actions(&d.actions, true, &cx.act, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn matchall_syntax_as_f_matchall_reads_it() {
        // tc-testing matchall f755: `handle 0xffffffff ... matchall action continue`.
        let p = parse(
            Some("0xffffffff"),
            &mut Args::new(&words("action continue")),
        )
        .unwrap();
        assert_eq!(p.handle, u32::MAX);
        // Golden classifiers.golden: a trailing skip flag wants another word.
        let e = parse(None, &mut Args::new(&words("skip_hw skip_sw"))).unwrap_err();
        assert_eq!(e.code, 255);
        let e = parse(None, &mut Args::new(&words("classid xyz"))).unwrap_err();
        assert_eq!(e.stderr, "Illegal \"classid\"\n");
    }
}
