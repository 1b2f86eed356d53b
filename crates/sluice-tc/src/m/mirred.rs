//! mirred syntax (iproute2 tc/m_mirred.c):
//! `mirred {egress|ingress} {mirror|redirect} [index N] dev DEVICE [CONTROL] [index N]`,
//! or `mirred index N` to bind an existing action. The control action may only
//! follow a mirror; after a redirect the next word starts a new action.

use super::{next_arg, parse_action_control, print_action_control, soft, verdict, PrintCx};
use crate::args::{duparg, matches, Args, CmdResult, Fail};
use crate::out::{Out, To};
use sluice_core::act::mirred::{MirredMode, MirredOpts};
use sluice_core::act::{ActionDump, ActionOpts, ActionSpec};
use sluice_core::cls::Verdict;

const USAGE: &str = "Usage: mirred <DIRECTION> <ACTION> [index INDEX] <dev DEVICENAME>
where:
\tDIRECTION := <ingress | egress>
\tACTION := <mirror | redirect>
\tINDEX  is the specific policy instance id
\tDEVICENAME is the devicename";

/// `parse_mirred`, with the current word at `mirred`.
pub(crate) fn parse(a: &mut Args) -> CmdResult<ActionSpec> {
    let w = next_arg(a)?;
    if matches(w, "egress") || matches(w, "ingress") || matches(w, "index") {
        return parse_direction(a);
    }
    if matches(w, "help") {
        return Err(Fail::new(255, USAGE));
    }
    Err(soft(format!("mirred option not supported {w}")))
}

/// `parse_direction`: the words after `mirred`.
fn parse_direction(a: &mut Args) -> CmdResult<ActionSpec> {
    let (mut egress, mut ingress) = (false, false);
    let (mut mirror, mut redirect) = (false, false);
    let (mut ok, mut index_given) = (false, false);
    let mut index = 0;
    let mut dev: Option<&str> = None;
    let mut action = Verdict::Ok;
    while let Some(w) = a.peek() {
        if matches(w, "action") {
            a.next();
            break;
        }
        if !egress && matches(w, "egress") {
            egress = true;
            if ingress {
                return Err(soft("Can't have both egress and ingress"));
            }
            next_arg(a)?;
            ok = true;
            continue;
        }
        if !ingress && matches(w, "ingress") {
            ingress = true;
            if egress {
                return Err(soft("Can't have both egress and ingress"));
            }
            next_arg(a)?;
            ok = true;
            continue;
        }
        if matches(w, "index") {
            let v = next_arg(a)?;
            index = super::get_u32(v, 10).ok_or_else(|| soft("Illegal \"index\""))?;
            index_given = true;
            if !ok {
                a.next();
                break;
            }
        } else if !ok {
            return Err(soft(format!("was expecting egress or ingress ({w})")));
        } else if !mirror && matches(w, "mirror") {
            mirror = true;
            if redirect {
                return Err(soft("Can't have both mirror and redir"));
            }
            action = Verdict::Pipe;
        } else if !redirect && matches(w, "redirect") {
            redirect = true;
            if mirror {
                return Err(soft("Can't have both mirror and redir"));
            }
            action = Verdict::Stolen;
        } else if (redirect || mirror) && matches(w, "dev") {
            let v = next_arg(a)?;
            if dev.is_some() {
                return Err(duparg("dev", v));
            }
            dev = Some(v);
            a.next();
            break;
        }
        next_arg(a)?;
    }
    let mode = match (ingress, mirror, redirect) {
        (false, true, _) => Some(MirredMode::EgressMirror),
        (false, _, true) => Some(MirredMode::EgressRedirect),
        (true, true, _) => Some(MirredMode::IngressMirror),
        (true, _, true) => Some(MirredMode::IngressRedirect),
        _ => None,
    };
    let mut ifindex = 0;
    if let Some(d) = dev {
        ifindex =
            crate::net::ifindex_of(d).ok_or_else(|| soft(format!("Cannot find device \"{d}\"")))?;
    }
    // `parse_action_control_dflt`: a mirror may be followed by its verdict;
    // a word that is no verdict is left for what follows.
    if mirror
        && a.peek()
            .is_some_and(|w| super::action_a2n(w, false).is_some())
    {
        if let Ok(raw) = parse_action_control(a, false) {
            action = verdict(raw)?;
        }
    }
    if let Some(w) = a.peek() {
        if index_given && matches(w, "index") {
            return Err(soft("mirred: Illegal double index"));
        }
        if matches(w, "index") {
            let v = next_arg(a)?;
            index = super::get_u32(v, 10).ok_or_else(|| soft("mirred: Illegal \"index\""))?;
            a.next();
        }
    }
    Ok(ActionSpec {
        index,
        opts: ActionOpts::Mirred(MirredOpts {
            mode,
            ifindex,
            action,
        }),
        cookie: None,
        no_percpu: false,
        offload: 0,
    })
}

/// `print_mirred`.
pub(crate) fn print(d: &ActionDump, cx: &PrintCx, out: &mut Out) {
    let ActionOpts::Mirred(o) = &d.opts else {
        return;
    };
    out.str(To::Any, "kind", "mirred ", "mirred");
    let (text, act, dir) = match o.mode {
        Some(MirredMode::EgressRedirect) => ("Egress Redirect", "redirect", "egress"),
        Some(MirredMode::EgressMirror) => ("Egress Mirror", "mirror", "egress"),
        Some(MirredMode::IngressRedirect) => ("Ingress Redirect", "redirect", "ingress"),
        Some(MirredMode::IngressMirror) => ("Ingress Mirror", "mirror", "ingress"),
        None => ("unknown", "unknown", "unknown"),
    };
    out.text(&format!("({text}"));
    out.str(To::Json, "mirred_action", "", act);
    out.str(To::Json, "direction", "", dir);
    let dev = crate::net::ifname_of(o.ifindex).unwrap_or_else(|| "*".into());
    out.str(To::Any, "to_dev", &format!(" to device {dev})"), &dev);
    print_action_control(out, " ", o.action, "");
    out.nl();
    super::print_index_tail(d, cx, "\tindex ", out);
}
