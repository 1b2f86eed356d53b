//! fw syntax (iproute2 tc/f_fw.c): the mark is the filter handle,
//! `handle MARK[/MASK]`; options `classid`/`flowid`, `indev`, `action`, and
//! the old `police`.

use super::{FPrintCx, Parsed};
use crate::args::{matches, Args, CmdResult};
use crate::m::{self, next_arg, soft, then};
use crate::out::{Out, To};
use sluice_core::cls::fw::{FwDump, FwOpts};
use sluice_core::cls::FilterOpts;
use sluice_core::handle::Handle;

const USAGE: &str = "Usage: ... fw [ classid CLASSID ] [ indev DEV ] [ action ACTION_SPEC ]
\tCLASSID := Push matching packets to the class identified by CLASSID with format X:Y
\t\tCLASSID is parsed as hexadecimal input.
\tDEV := specify device for incoming device classification.
\tACTION_SPEC := Apply an action on matching packets.
\tNOTE: handle is represented as HANDLE[/FWMASK].
\t\tFWMASK is 0xffffffff by default.";

/// `fw_parse_opt`.
pub(super) fn parse(handle: Option<&str>, a: &mut Args) -> CmdResult<Parsed> {
    let mut tcm_handle = 0;
    let mut mask = None;
    if let Some(h) = handle {
        let (mark, m) = match h.split_once('/') {
            Some((x, y)) => (x, Some(y)),
            None => (h, None),
        };
        tcm_handle = m::get_u32(mark, 0).ok_or_else(|| soft("Illegal \"handle\""))?;
        if let Some(m) = m {
            mask = Some(m::get_u32(m, 0).ok_or_else(|| soft("Illegal \"handle\" mask"))?);
        }
    }
    if a.is_empty() {
        return Ok(Parsed {
            handle: tcm_handle,
            opts: None,
        });
    }
    let mut o = FwOpts {
        mask,
        ..Default::default()
    };
    while let Some(w) = a.peek() {
        if matches(w, "classid") || matches(w, "flowid") {
            let v = next_arg(a)?;
            o.classid = Some(Handle::parse_classid(v).ok_or_else(|| soft("Illegal \"classid\""))?);
        } else if matches(w, "police") {
            next_arg(a)?;
            o.police = Some(m::police::parse_old(a).map_err(|f| then(f, "Illegal \"police\""))?);
            continue;
        } else if matches(w, "action") {
            next_arg(a)?;
            o.actions = m::parse_actions(a).map_err(|f| then(f, "Illegal fw \"action\""))?;
            continue;
        } else if w == "indev" {
            a.next();
            let v = a.peek().ok_or_else(|| soft("Illegal indev"))?;
            o.indev = Some(v.chars().take(16).collect());
        } else if w == "help" {
            return Err(soft(USAGE));
        } else {
            return Err(soft(format!("What is \"{w}\"?\n{USAGE}")));
        }
        a.next();
    }
    Ok(Parsed {
        handle: tcm_handle,
        opts: Some(FilterOpts::Fw(o)),
    })
}

/// `fw_print_opt`.
pub(super) fn print(f: &FwDump, handle: u32, cx: &FPrintCx, out: &mut Out) {
    if handle != 0 || f.mask.is_some() {
        out.open("fw");
        match f.mask.filter(|&m| m != u32::MAX) {
            Some(mask) => {
                out.str(
                    To::Any,
                    "mark",
                    &format!("handle 0x{handle:x}"),
                    &format!("{handle:#x}"),
                );
                out.str(
                    To::Any,
                    "mask",
                    &format!("/0x{mask:x} "),
                    &format!("{mask:#x}"),
                );
            }
            None => {
                out.str(
                    To::Any,
                    "mark",
                    &format!("handle 0x{handle:x} "),
                    &format!("{handle:#x}"),
                );
                out.str(To::Json, "mask", "", "0xffffffff");
            }
        }
        out.close();
    }
    if let Some(c) = f.classid {
        let c = c.to_string();
        out.str(To::Any, "classid", &format!("classid {c} "), &c);
    }
    if let Some(p) = &f.police {
        m::police::print(p, &cx.act, out);
    }
    if let Some(dev) = &f.indev {
        out.str(To::Any, "indev", &format!("input dev {dev} "), dev);
    }
    if !f.actions.is_empty() {
        out.nl();
        m::print_actions(&f.actions, true, &cx.act, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn fw_syntax_as_f_fw_reads_it() {
        // tc-testing fw b50d: `handle 10/0xff fw flowid 10:1000 action ok`.
        let w = words("flowid 10:1000 action ok");
        let p = parse(Some("10/0xff"), &mut Args::new(&w)).unwrap();
        assert_eq!(p.handle, 10);
        let Some(FilterOpts::Fw(o)) = p.opts else {
            panic!()
        };
        assert_eq!(
            (o.mask, o.classid),
            (Some(0xff), Some(Handle::new(0x10, 0x1000)))
        );
        assert_eq!(o.actions.len(), 1);
        // Golden classifiers.golden "fw parse errors and help".
        let e = parse(Some("80/abc"), &mut Args::new(&words("flowid 1:10"))).unwrap_err();
        assert_eq!(e.stderr, "Illegal \"handle\" mask\n");
        let e = parse(Some("80"), &mut Args::new(&words("bogus"))).unwrap_err();
        assert!(e
            .stderr
            .starts_with("What is \"bogus\"?\nUsage: ... fw [ classid CLASSID ]"));
    }
}
