//! Per-kind syntax: parsing a qdisc's options from tc's words and printing
//! them back as iproute2's `q_<kind>.c` does. One file per kind.

mod fifo;
mod pfifo_fast;

use crate::args::{Args, CmdResult};
use crate::out::Out;
use sluice_core::qdisc::{ClassOpts, DevInfo, QdiscOpts, XStats};

/// Parse the options after the kind word. `Ok(None)`: a kind sluice does not
/// know, which the kernel refuses ("Specified qdisc kind is unknown").
pub fn parse_qdisc(
    kind: &str,
    args: &mut Args,
    dev: Option<&DevInfo>,
) -> CmdResult<Option<QdiscOpts>> {
    let _ = dev;
    Ok(Some(match kind {
        "pfifo" | "bfifo" | "pfifo_head_drop" => fifo::parse(kind, args)?,
        "pfifo_fast" => pfifo_fast::parse(args)?,
        "noqueue" => {
            if let Some(w) = args.peek() {
                return Err(crate::args::Fail::new(
                    1,
                    format!("Unknown qdisc \"noqueue\", hence option \"{w}\" is unparsable"),
                ));
            }
            QdiscOpts::Noqueue
        }
        _ => {
            if let Some(w) = args.peek() {
                return Err(crate::args::Fail::new(
                    1,
                    format!("Unknown qdisc \"{kind}\", hence option \"{w}\" is unparsable"),
                ));
            }
            return Ok(None);
        }
    }))
}

/// Print a qdisc's options (`print_qopt`).
pub fn print_qdisc(opts: &QdiscOpts, out: &mut Out, details: bool) {
    let _ = details;
    match opts {
        QdiscOpts::Pfifo(o) | QdiscOpts::PfifoHeadDrop(o) => fifo::print(false, o, out),
        QdiscOpts::Bfifo(o) => fifo::print(true, o, out),
        QdiscOpts::PfifoFast(_) => pfifo_fast::print(out),
        _ => {}
    }
}

/// Parse class options (`parse_copt`); `Err` for classless kinds.
pub fn parse_class(kind: &str, args: &mut Args) -> CmdResult<Option<ClassOpts>> {
    let _ = args;
    Err(crate::args::Fail::new(
        1,
        format!("Error: Qdisc \"{kind}\" is classless."),
    ))
}

/// Print class options (`print_copt`).
pub fn print_class(opts: &ClassOpts, out: &mut Out, details: bool) {
    let _ = (opts, out, details);
}

/// Print per-kind statistics (`print_xstats`).
pub fn print_xstats(x: &XStats, out: &mut Out) {
    let _ = (x, out);
}
