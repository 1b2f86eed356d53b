//! Per-kind syntax: parsing a qdisc's options from tc's words and printing
//! them back as iproute2's `q_<kind>.c` does. One file per kind.

mod cake;
mod cbq;
mod cbs;
mod choke;
mod codel;
mod drr;
mod etf;
mod ets;
mod fifo;
mod fq;
mod fq_codel;
mod fq_pie;
mod gred;
mod hfsc;
mod hhf;
mod htb;
mod mqprio;
mod multiq;
mod netem;
mod pfifo_fast;
mod pie;
mod plug;
mod prio;
mod qfq;
mod red;
mod sfb;
mod sfq;
mod skbprio;
mod taprio;
mod tbf;
mod tc_red;

use crate::args::{Args, CmdResult};
use crate::out::Out;
use sluice_core::qdisc::{ClassOpts, DevInfo, QdiscOpts, XStats};
use sluice_core::rate::LinkLayer;

/// Parse the options after the kind word. `Ok(None)`: a kind sluice does not
/// know, which the kernel refuses ("Specified qdisc kind is unknown").
pub fn parse_qdisc(
    kind: &str,
    args: &mut Args,
    dev: Option<&DevInfo>,
) -> CmdResult<Option<QdiscOpts>> {
    let _ = dev;
    Ok(Some(match kind {
        "tbf" => return tbf::parse(args, dev),
        "prio" => return prio::parse(args),
        "netem" => return netem::parse(args, dev),
        "codel" => return codel::parse(args, dev),
        "fq_codel" => return fq_codel::parse(args, dev),
        "fq" => return fq::parse(args, dev),
        "cake" => return cake::parse(args),
        "sfq" => return sfq::parse(args, dev),
        "red" => return red::parse(args, dev),
        "choke" => return choke::parse(args, dev),
        "pie" => return pie::parse(args, dev),
        "fq_pie" => return fq_pie::parse(args, dev),
        "gred" => return gred::parse(args, dev),
        "sfb" => return sfb::parse(args),
        "hhf" => return hhf::parse(args),
        "pfifo" | "bfifo" | "pfifo_head_drop" => fifo::parse(kind, args)?,
        "pfifo_fast" => pfifo_fast::parse(args)?,
        "htb" => htb::parse_qdisc(args)?,
        "hfsc" => hfsc::parse_qdisc(args)?,
        "cbq" => cbq::parse_qdisc(args)?,
        "drr" => drr::parse(args)?,
        "qfq" => qfq::parse(args)?,
        "ets" => ets::parse(args)?,
        "skbprio" => skbprio::parse(args)?,
        "cbs" => cbs::parse(args)?,
        "plug" => plug::parse(args)?,
        "multiq" => multiq::parse(args)?,
        "mqprio" => mqprio::parse(args)?,
        "taprio" => taprio::parse(args)?,
        "etf" => etf::parse(args)?,
        // tc has no module for these: any word is unparsable.
        "noqueue" | "mq" => {
            if let Some(w) = args.peek() {
                return Err(crate::args::Fail::new(
                    1,
                    format!("Unknown qdisc \"{kind}\", hence option \"{w}\" is unparsable"),
                ));
            }
            if kind == "mq" {
                QdiscOpts::Mq
            } else {
                QdiscOpts::Noqueue
            }
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

/// Print a qdisc's options (`print_qopt`); `stats` is `tc -s`, which
/// gred's printer looks at.
pub fn print_qdisc(opts: &QdiscOpts, out: &mut Out, details: bool, stats: bool) {
    let _ = details;
    match opts {
        QdiscOpts::Pfifo(o) | QdiscOpts::PfifoHeadDrop(o) => fifo::print(false, o, out),
        QdiscOpts::Bfifo(o) => fifo::print(true, o, out),
        QdiscOpts::PfifoFast(_) => pfifo_fast::print(out),
        QdiscOpts::Htb(o) => htb::print_qdisc(o, out, details),
        QdiscOpts::Hfsc(o) => hfsc::print_qdisc(o, out),
        QdiscOpts::Cbq(o) => cbq::print(o, out, details),
        QdiscOpts::Tbf(o) => tbf::print(o, out, details),
        QdiscOpts::Prio(o) => prio::print(o, out, details),
        QdiscOpts::Sfq(o) => sfq::print(o, out, details),
        QdiscOpts::Netem(o) => netem::print(o, out, details),
        QdiscOpts::Codel(o) => codel::print(o, out, details),
        QdiscOpts::FqCodel(o) => fq_codel::print(o, out, details),
        QdiscOpts::Red(o) => red::print(o, out, details),
        QdiscOpts::Choke(o) => choke::print(o, out, details),
        QdiscOpts::Pie(o) => pie::print(o, out, details),
        QdiscOpts::FqPie(o) => fq_pie::print(o, out, details),
        QdiscOpts::Ets(o) => ets::print(o, out),
        QdiscOpts::Skbprio(o) => skbprio::print(o, out),
        QdiscOpts::Multiq(o) => multiq::print(o, out),
        QdiscOpts::Fq(o) => fq::print(o, out, details),
        QdiscOpts::Cake(o) => cake::print(o, out, details),
        QdiscOpts::Sfb(o) => sfb::print(o, out),
        QdiscOpts::Gred(o) => gred::print(o, out, details, stats),
        QdiscOpts::Hhf(o) => hhf::print(o, out),
        QdiscOpts::Cbs(o) => cbs::print(o, out),
        QdiscOpts::Mqprio(o) => mqprio::print(o, out),
        QdiscOpts::Taprio(o) => taprio::print(o, out),
        QdiscOpts::Etf(o) => etf::print(o, out),
        _ => {}
    }
}

/// Parse class options (`parse_copt`); `Err` for classless kinds. `excl`:
/// the request carries NLM_F_EXCL (`tc class add`), which CBQ looks at.
pub fn parse_class(
    kind: &str,
    args: &mut Args,
    excl: bool,
    dev: Option<&DevInfo>,
) -> CmdResult<Option<ClassOpts>> {
    match kind {
        "htb" => Ok(Some(htb::parse_class(args, dev)?)),
        "hfsc" => Ok(Some(hfsc::parse_class(args)?)),
        "cbq" => Ok(Some(cbq::parse_class(args, excl)?)),
        "drr" => Ok(Some(drr::parse_class(args)?)),
        "qfq" => Ok(Some(qfq::parse_class(args)?)),
        "ets" => Ok(Some(ets::parse_class(args)?)),
        _ => Err(crate::args::Fail::new(
            1,
            format!("Error: Qdisc \"{kind}\" is classless."),
        )),
    }
}

/// Print class options (`print_copt`).
pub fn print_class(opts: &ClassOpts, out: &mut Out, details: bool) {
    match opts {
        ClassOpts::Htb(o) => htb::print_class(o, out, details),
        ClassOpts::Hfsc(o) => hfsc::print_class(o, out),
        ClassOpts::Cbq(o) => cbq::print(o, out, details),
        ClassOpts::Drr(o) => drr::print_class(o, out),
        ClassOpts::Qfq(o) => qfq::print_class(o, out),
        ClassOpts::Ets(o) => ets::print_class(o, out),
        ClassOpts::Plain => {}
    }
}

/// Print per-kind statistics (`print_xstats`).
/// Does tc print these extended statistics (the kind sent some, and its
/// module has a `print_xstats`)?
pub fn prints_xstats(x: &XStats) -> bool {
    !matches!(
        x,
        XStats::None | XStats::Absent | XStats::QueueOnly | XStats::QfqClass(_)
    )
}

pub fn print_xstats(x: &XStats, out: &mut Out) {
    match x {
        XStats::HtbClass(h) => htb::print_xstats(h, out),
        XStats::HfscClass(x) => hfsc::print_xstats(x, out),
        XStats::Cbq(x) => cbq::print_xstats(x, out),
        XStats::SfqClass(x) => sfq::print_xstats(x, out),
        XStats::Codel(x) => codel::print_xstats(x, out),
        XStats::FqCodel(x) => fq_codel::print_xstats(x, out),
        XStats::FqCodelClass(x) => fq_codel::print_class_xstats(x, out),
        XStats::Red(x) => red::print_xstats(x, out),
        XStats::Choke(x) => choke::print_xstats(x, out),
        XStats::Pie(x) => pie::print_xstats(x, out),
        XStats::FqPie(x) => fq_pie::print_xstats(x, out),
        XStats::DrrClass(x) => drr::print_xstats(x, out),
        // q_qfq.c has no print_xstats.
        XStats::None | XStats::Absent | XStats::QueueOnly | XStats::QfqClass(_) => {}
        XStats::Fq(x) => fq::print_xstats(x, out),
        XStats::Cake(x) => cake::print_xstats(x, out),
        XStats::CakeClass(x) => cake::print_class_xstats(x, out),
        XStats::Sfb(x) => sfb::print_xstats(x, out),
        XStats::Hhf(x) => hhf::print_xstats(x, out),
    }
}

pub(crate) use crate::args::get_u32;

/// iproute2 `get_u16`.
pub(crate) fn get_u16(arg: &str, base: u32) -> Option<u16> {
    get_u32(arg, base).and_then(|v| u16::try_from(v).ok())
}

/// `get_size_and_cell`: `SIZE[/CELL]`, the cell a power of two (today's
/// kernels ignore it, so only its validity matters). The error carries the
/// text iproute2 shows: it cuts the word at the slash and restores it only
/// after the cell parsed as a number.
pub(crate) fn size_and_cell(v: &str) -> Result<u32, String> {
    let (size, cell) = match v.split_once('/') {
        Some((s, c)) => (s, Some(c)),
        None => (v, None),
    };
    let sz = sluice_core::units::parse_size(size).map_err(|_| size.to_string())?;
    if let Some(c) = cell {
        let c = crate::args::get_integer(c).ok_or_else(|| size.to_string())?;
        if !(0..32).any(|i| 1i64 << i == c as i64) {
            return Err(v.to_string());
        }
    }
    Ok(sz)
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
