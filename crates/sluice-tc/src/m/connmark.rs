//! connmark syntax (iproute2 tc/m_connmark.c):
//! `connmark [zone ZONE] [CONTROL] [index N]`, in that order, each once;
//! the control action `pipe` when none is given. Printed as
//! `connmark zone Z pipe` and the index line.

use super::{next_arg, parse_action_control_dflt, print_action_control, soft, verdict, PrintCx};
use crate::args::{matches, Args, CmdResult, Fail};
use crate::out::{Out, To};
use sluice_core::act::connmark::ConnmarkOpts;
use sluice_core::act::{ActionDump, ActionOpts, ActionSpec};

pub(crate) const USAGE: &str = "Usage: ... connmark [zone ZONE] [CONTROL] [index <INDEX>]
where :
\tZONE is the conntrack zone
\tCONTROL := reclassify | pipe | drop | continue | ok |
\t           goto chain <CHAIN_INDEX>";

/// Words that repeat the kind's name (any abbreviation of it) are skipped;
/// `help` gives the usage (exit 255). Shared with ctinfo.
pub(crate) fn skip_kind(a: &mut Args, kind: &str, usage: &str) -> CmdResult {
    while let Some(w) = a.peek() {
        if matches(w, kind) {
            a.next();
        } else if matches(w, "help") {
            return Err(Fail::new(255, usage));
        } else {
            break;
        }
    }
    Ok(())
}

/// `KEY VALUE` if the current word abbreviates `key`: the value read by
/// `read` (base 10), or `Illegal "KEY"` from `kind`'s parser.
pub(crate) fn keyed<T>(
    a: &mut Args,
    kind: &str,
    key: &str,
    read: fn(&str, u32) -> Option<T>,
) -> CmdResult<Option<T>> {
    if !a.peek().is_some_and(|w| matches(w, key)) {
        return Ok(None);
    }
    let v = next_arg(a)?;
    let v = read(v, 10).ok_or_else(|| soft(format!("{kind}: Illegal \"{key}\"")))?;
    a.next();
    Ok(Some(v))
}

/// `parse_connmark`, with the current word at `connmark`.
pub(crate) fn parse(a: &mut Args) -> CmdResult<ActionSpec> {
    skip_kind(a, "connmark", USAGE)?;
    let zone = keyed(a, "connmark", "zone", super::get_u16)?.unwrap_or(0);
    let action = verdict(parse_action_control_dflt(a, false, super::TC_ACT_PIPE)?)?;
    let index = keyed(a, "connmark", "index", super::get_u32)?.unwrap_or(0);
    Ok(ActionSpec {
        index,
        opts: ActionOpts::Connmark(ConnmarkOpts { action, zone }),
        cookie: None,
        no_percpu: false,
        offload: 0,
    })
}

/// `print_connmark`.
pub(crate) fn print(d: &ActionDump, cx: &PrintCx, out: &mut Out) {
    let ActionOpts::Connmark(o) = &d.opts else {
        return;
    };
    out.str(To::Any, "kind", "connmark ", "connmark");
    let z = o.zone as u64;
    out.uint(To::Any, "zone", &format!("zone {z}"), z);
    print_action_control(out, " ", o.action, "");
    out.nl();
    super::print_index_tail(d, cx, "\t index ", out);
}
