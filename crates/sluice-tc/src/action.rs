//! `tc actions` (iproute2 tc/m_action.c): `add`, `change`/`replace`,
//! `get`/`delete action KIND index N ...`, `list`/`show`/`lst` and
//! `flush action KIND`.
//!
//! As in iproute2, `do_action` is a loop: after `add` or `get` it goes on
//! with the words the command left (a second command, or nothing). A failed
//! `get`/`delete` in the kernel does not advance the words, so the loop then
//! trips over the word after the verb ("Command "action" is unknown"); the
//! captures show exactly that. Every failure exits with 255 except a failed
//! flush (1).

use crate::args::{matches, Args, CmdResult, Fail};
use crate::m::{self, next_arg, then, PrintCx};
use crate::net::Net;
use crate::out::{Out, To};
use crate::tc::Opts;
use sluice_core::act::ActionDump;
use sluice_core::error::TcError;

/// The action kinds iproute2 6.1's tc knows (sluice has
/// `sluice_core::act::KNOWN_KINDS` of them).
pub const IPROUTE2_KINDS: [&str; 21] = m::IPROUTE2_KINDS;

const USAGE: &str = "usage: tc actions <ACTSPECOP>*
Where: \tACTSPECOP := ACR | GD | FL
\tACR := add | change | replace <ACTSPEC>*
\tGD := get | delete | <ACTISPEC>*
\tFL := ls | list | flush | <ACTNAMESPEC>
\tACTNAMESPEC :=  action <ACTNAME>
\tACTISPEC := <ACTNAMESPEC> <INDEXSPEC>
\tACTSPEC := action <ACTDETAIL> [INDEXSPEC] [HWSTATSSPEC] [SKIPSPEC]
\tINDEXSPEC := index <32 bit indexvalue>
\tHWSTATSSPEC := hw_stats [ immediate | delayed | disabled ]
\tSKIPSPEC := [ skip_sw | skip_hw ]
\tACTDETAIL := <ACTNAME> <ACTPARAMS>
\t\tExample ACTNAME is gact, mirred, bpf, etc
\t\tEach action has its own parameters (ACTPARAMS)

";

/// The kind a name resolves to: iproute2 reads kinds it cannot load as gact.
fn kind_of(k: &str) -> &str {
    if m::IPROUTE2_KINDS.contains(&k) {
        k
    } else {
        "gact"
    }
}

fn talk_err(e: TcError) -> String {
    format!("{}\nWe have an error talking to the kernel\n", e.describe())
}

/// What one round of `do_action` did.
enum Step {
    /// Go on with the words left.
    Next,
    /// Stop with this status (0: success).
    Exit(i32),
}

/// `tc actions ...`.
pub fn actions_cmd(net: &mut Net, opts: &Opts, a: &mut Args, out: &mut Out) -> CmdResult {
    let mut stderr = String::new();
    let cx = PrintCx {
        stats: opts.stats,
        details: opts.details,
        now: net.now,
    };
    while let Some(cmd) = a.peek() {
        let step = if matches(cmd, "add") {
            modify(net, a, false, &mut stderr)
        } else if matches(cmd, "change") || matches(cmd, "replace") {
            modify(net, a, true, &mut stderr)
        } else if matches(cmd, "delete") || matches(cmd, "get") {
            a.next();
            get_delete(net, a, cmd.starts_with('g'), &cx, out, &mut stderr)
        } else if matches(cmd, "list") || matches(cmd, "show") || matches(cmd, "lst") {
            return list(net, a, &cx, out);
        } else if matches(cmd, "flush") {
            return flush(net, a, out);
        } else if matches(cmd, "help") {
            return Err(Fail::new(255, USAGE));
        } else {
            stderr.push_str(&format!(
                "Command \"{cmd}\" is unknown, try \"tc actions help\".\n"
            ));
            Step::Exit(255)
        };
        match step {
            Step::Next => {}
            Step::Exit(0) => break,
            Step::Exit(code) => return Err(Fail { stderr, code }),
        }
    }
    if stderr.is_empty() {
        Ok(())
    } else {
        Err(Fail { stderr, code: 0 })
    }
}

/// `tc_action_modify`: parse the action list and create or change it.
fn modify(net: &mut Net, a: &mut Args, replace: bool, stderr: &mut String) -> Step {
    a.next();
    let specs = match m::parse_actions(a) {
        Ok(s) => s,
        Err(f) => {
            let f = then(f, "Illegal \"action\"");
            stderr.push_str(&f.stderr);
            return Step::Exit(255);
        }
    };
    match net.actions.add(&specs, replace, net.now) {
        Ok(_) => Step::Next,
        Err(e) => {
            stderr.push_str(&talk_err(e));
            Step::Exit(255)
        }
    }
}

/// `tc_action_gd`: `action KIND index N`, repeated.
fn get_delete(
    net: &mut Net,
    a: &mut Args,
    get: bool,
    cx: &PrintCx,
    out: &mut Out,
    stderr: &mut String,
) -> Step {
    let start = a.clone();
    let mut targets: Vec<(String, u32)> = Vec::new();
    while let Some(w) = a.peek() {
        if w == "action" {
            a.next();
            continue;
        }
        if w == "help" {
            return Step::Exit(255);
        }
        let kind = kind_of(w);
        a.next();
        let no_index = format!("Error: no index specified action: {kind}\n");
        match a.peek() {
            Some(i) if matches(i, "index") => {}
            _ => {
                stderr.push_str(&no_index);
                return Step::Exit(255);
            }
        }
        let v = match next_arg(a) {
            Ok(v) => v,
            Err(f) => {
                stderr.push_str(&f.stderr);
                return Step::Exit(f.code);
            }
        };
        let Some(index) = m::get_u32(v, 10) else {
            stderr.push_str("Illegal \"index\"\n");
            return Step::Exit(255);
        };
        a.next();
        targets.push((kind.to_string(), index));
    }
    let res = if get {
        let mut dumps = Vec::new();
        let mut err = None;
        for (k, i) in &targets {
            match net.actions.get(k, *i) {
                Ok(mut d) => {
                    d.order = dumps.len() as u32 + 1;
                    dumps.push(d);
                }
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        match err {
            None => {
                print_action(0, &dumps, cx, out);
                Ok(())
            }
            Some(e) => Err(e),
        }
    } else {
        let t: Vec<(&str, u32)> = targets.iter().map(|(k, i)| (k.as_str(), *i)).collect();
        net.actions.delete(&t)
    };
    match res {
        Ok(()) => Step::Next,
        Err(e) => {
            // rtnl_talk failed: the words are not advanced.
            stderr.push_str(&talk_err(e));
            *a = start;
            Step::Next
        }
    }
}

/// `print_action` for one answer: `total acts N`, then the actions.
fn print_action(total: usize, acts: &[ActionDump], cx: &PrintCx, out: &mut Out) {
    out.open("");
    let t = total as u64;
    out.uint(To::Any, "total acts", &format!("total acts {t}"), t);
    out.nl();
    out.close();
    out.open("");
    m::print_actions(acts, false, cx, out);
    out.close();
}

/// The kind word of `ls`/`flush`: the word after the next one.
fn list_kind<'a>(a: &mut Args<'a>) -> CmdResult<&'a str> {
    if a.rest().len() <= 2 {
        return Err(Fail::new(255, USAGE));
    }
    a.next();
    a.next();
    Ok(a.next().unwrap_or_default())
}

/// `tc actions ls action KIND`.
fn list(net: &mut Net, a: &mut Args, cx: &PrintCx, out: &mut Out) -> CmdResult {
    let kind = list_kind(a)?;
    if a.peek() == Some("since") {
        let v = next_arg(a)?;
        m::get_u32(v, 0).ok_or_else(|| crate::args::invarg("dump time \"since\" is invalid", v))?;
    }
    let known = sluice_core::act::KNOWN_KINDS.contains(&kind);
    let acts = if known {
        net.actions.list(kind)
    } else {
        Vec::new()
    };
    if !acts.is_empty() {
        print_action(acts.len(), &acts, cx, out);
    }
    Ok(())
}

/// `tc actions flush action KIND`.
fn flush(net: &mut Net, a: &mut Args, out: &mut Out) -> CmdResult {
    let kind = list_kind(a)?;
    match net.actions.flush(kind) {
        Ok(r) => {
            if let Some(w) = r.warning {
                out.warn(w);
            }
            Ok(())
        }
        Err(e) => Err(Fail::new(
            1,
            format!("{}\nWe have an error flushing", e.describe()),
        )),
    }
}
