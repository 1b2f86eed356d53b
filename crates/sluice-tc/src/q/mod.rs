//! Per-kind syntax: parsing a qdisc's options from tc's words and printing
//! them back as iproute2's `q_<kind>.c` does. One file per kind.

mod fifo;
mod htb;
mod pfifo_fast;

use crate::args::{Args, CmdResult};
use crate::out::Out;
use sluice_core::qdisc::{ClassOpts, DevInfo, QdiscOpts, XStats};
use sluice_core::rate::LinkLayer;
use sluice_core::units::strtoul;

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
        "htb" => htb::parse_qdisc(args)?,
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
        QdiscOpts::Htb(o) => htb::print_qdisc(o, out, details),
        _ => {}
    }
}

/// Parse class options (`parse_copt`); `Err` for classless kinds.
pub fn parse_class(kind: &str, args: &mut Args) -> CmdResult<Option<ClassOpts>> {
    match kind {
        "htb" => Ok(Some(htb::parse_class(args)?)),
        _ => Err(crate::args::Fail::new(1, format!("Error: Qdisc \"{kind}\" is classless."))),
    }
}

/// Print class options (`print_copt`).
pub fn print_class(opts: &ClassOpts, out: &mut Out, details: bool) {
    match opts {
        ClassOpts::Htb(o) => htb::print_class(o, out, details),
        ClassOpts::Plain => {}
    }
}

/// Print per-kind statistics (`print_xstats`).
pub fn print_xstats(x: &XStats, out: &mut Out) {
    match x {
        XStats::HtbClass(h) => htb::print_xstats(h, out),
        XStats::None | XStats::SfqClass(_) => {}
    }
}

/// iproute2 `get_u32(val, arg, base)`: the whole word a number that fits 32 bits.
pub(crate) fn get_u32(arg: &str, base: u32) -> Option<u32> {
    match strtoul(arg, base) {
        Some((v, "")) if v <= u32::MAX as u64 => Some(v as u32),
        _ => None,
    }
}

/// iproute2 `get_u16`.
pub(crate) fn get_u16(arg: &str, base: u32) -> Option<u16> {
    get_u32(arg, base).and_then(|v| u16::try_from(v).ok())
}

/// iproute2 `get_linklayer`: `ethernet`, `atm`, `adsl` (prefixes allowed).
pub(crate) fn get_linklayer(arg: &str) -> Option<LinkLayer> {
    use crate::args::matches;
    if matches(arg, "ethernet") {
        Some(LinkLayer::Ethernet)
    } else if matches(arg, "atm") || matches(arg, "adsl") {
        Some(LinkLayer::Atm)
    } else {
        None
    }
}
