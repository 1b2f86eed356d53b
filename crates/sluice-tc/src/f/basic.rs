//! basic syntax (iproute2 tc/f_basic.c): `[ match EMATCH_TREE ]
//! [ classid CLASSID ] [ action ... ] [ police ... ]`; the handle is a number.

use super::matchall::strtol;
use super::{ematch, FPrintCx, Parsed};
use crate::args::{matches, Args, CmdResult};
use crate::m::{self, next_arg, soft, then};
use crate::out::{Out, To};
use sluice_core::cls::basic::{BasicDump, BasicOpts};
use sluice_core::cls::FilterOpts;
use sluice_core::handle::Handle;

pub(super) const USAGE: &str = "Usage: ... basic [ match EMATCH_TREE ]
                 [ action ACTION_SPEC ] [ classid CLASSID ]

Where:\tSELECTOR := SAMPLE SAMPLE ...
\tFILTERID := X:Y:Z
\tACTION_SPEC := ... look at individual actions

NOTE: CLASSID is parsed as hexadecimal input.";

/// `basic_parse_opt`.
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
    let mut o = BasicOpts::default();
    while let Some(w) = a.peek() {
        if matches(w, "match") {
            next_arg(a)?;
            o.ematches = Some(ematch::parse(a).map_err(|f| then(f, "Illegal \"ematch\""))?);
            continue;
        } else if matches(w, "classid") || w == "flowid" {
            let v = next_arg(a)?;
            o.classid = Some(Handle::parse_classid(v).ok_or_else(|| soft("Illegal \"classid\""))?);
        } else if matches(w, "action") {
            next_arg(a)?;
            o.actions = m::parse_actions(a).map_err(|f| then(f, "Illegal \"action\""))?;
            continue;
        } else if matches(w, "police") {
            next_arg(a)?;
            o.police = Some(m::police::parse_old(a).map_err(|f| then(f, "Illegal \"police\""))?);
            continue;
        } else if w == "help" {
            return Err(soft(USAGE));
        } else {
            return Err(soft(format!("What is \"{w}\"?\n{USAGE}")));
        }
        a.next();
    }
    Ok(Parsed {
        handle: tcm_handle,
        opts: Some(FilterOpts::Basic(o)),
    })
}

/// `basic_print_opt`.
pub(super) fn print(d: &BasicDump, handle: u32, cx: &FPrintCx, out: &mut Out) {
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
    ematch::print(&d.ematches, out);
    if let Some(p) = &d.police {
        out.nl();
        m::police::print(p, &cx.act, out);
    }
    if !d.actions.is_empty() {
        m::print_actions(&d.actions, true, &cx.act, out);
    }
}

#[cfg(test)]
mod tests {
    use crate::f::testutil::{dev, tc, tc_words};

    #[test]
    fn basic_with_ematches_as_f_basic() {
        let mut net = dev();
        assert_eq!(tc(&mut net, "qdisc add dev DEV ingress").code, 0);
        // tdc 4600's expression, then 0811's listing of two filters.
        let add = |h: &str, m: &str| {
            let mut w: Vec<String> = format!(
                "filter add dev DEV parent ffff: handle {h} protocol ip prio 1 basic match"
            )
            .split_whitespace()
            .map(String::from)
            .collect();
            w.push(m.to_string());
            w.extend(["classid", "1:1"].map(String::from));
            w
        };
        let r = tc_words(&mut net, &add("1", "cmp(u8 at 0 layer link mask 0xff eq 3) and cmp(u16 at 8 layer link mask 0x00ff gt 7) or cmp(u32 at 4 layer network mask 0xa0a0 lt 3)"));
        assert_eq!(r.code, 0, "{r:?}");
        let r = tc_words(&mut net, &add("2", "not u32(u16 0x1122 0xffff at 0)"));
        assert_eq!(r.code, 0, "{r:?}");
        let r = tc(&mut net, "filter show dev DEV parent ffff:");
        assert_eq!(
            r.stdout,
            "filter protocol ip pref 1 basic chain 0 \n\
filter protocol ip pref 1 basic chain 0 handle 0x2 flowid 1:1 \n  NOT u32(11220000/ffff0000 at 0)\n\n\
filter protocol ip pref 1 basic chain 0 handle 0x1 flowid 1:1 \n  cmp(u8 at 0 layer 0 mask 0xff eq 3)\n  AND cmp(u16 at 8 layer 0 mask 0xff gt 7)\n  OR cmp(u32 at 4 layer 1 mask 0xa0a0 lt 3)\n\n"
        );
        // A match word at the end of the line is read again as an option.
        let mut w = add("3", "cmp(u8 at 0 layer link mask 0xff gt 10)");
        w.truncate(w.len() - 2);
        let r = tc_words(&mut net, &w);
        assert_eq!(r.code, 1);
        assert!(
            r.stderr.starts_with(
                "What is \"cmp(u8 at 0 layer link mask 0xff gt 10)\"?\nUsage: ... basic"
            ),
            "{r:?}"
        );
        // An ematch error ends with the filter's line.
        let r = tc_words(&mut net, &add("3", "u32(u16 0x7788 0xffffffff at 12)"));
        assert_eq!(r.code, 1);
        assert!(
            r.stderr.starts_with("Illegal mask (>0xFFFF)\n")
                && r.stderr.ends_with("Illegal \"ematch\"\n"),
            "{r:?}"
        );
        // canid rules are kept EFF first, as the kernel keeps them.
        let r = tc_words(&mut net, &add("4", "canid(sff 0x01:0xf eff 0x02:0xf)"));
        assert_eq!(r.code, 0);
        let r = tc(
            &mut net,
            "filter get dev DEV parent ffff: handle 4 prio 1 protocol ip basic",
        );
        assert!(r.stdout.contains("canid(eff 0x2:0xF sff 0x1:0xF)"), "{r:?}");
    }
}
