//! HTB syntax (iproute2 tc/q_htb.c): qdisc `default`/`r2q`/`direct_qlen`/
//! `offload`, class `rate`/`ceil`/`burst`/`cburst`/`prio`/`quantum`/`mtu`/
//! `mpu`/`overhead`/`linklayer`, and the class statistics printer.

use super::{get_u16, get_u32, size_and_cell};
use crate::args::{after, matches, rate_or_percent, Args, CmdResult, Fail};
use crate::out::{Out, To};
use crate::tc_core::{xmitsize, xmittime, HZ};
use sluice_core::qdisc::htb::{HtbClassOpts, HtbClassXstats, HtbOpts};
use sluice_core::qdisc::{ClassOpts, DevInfo, QdiscOpts};
use sluice_core::rate::{LinkLayer, RateSpec};
use sluice_core::units::fmt_size;

const USAGE: &str = "Usage: ... qdisc add ... htb [default N] [r2q N]
                      [direct_qlen P] [offload]
 default  minor id of class to which unclassified packets are sent {0}
 r2q      DRR quantums are computed as rate in Bps/r2q {10}
 debug    string of 16 numbers each 0-3 {0}

 direct_qlen  Limit of the direct queue {in packets}
 offload  enable hardware offload
... class add ... htb rate R1 [burst B1] [mpu B] [overhead O]
                      [prio P] [slot S] [pslot PS]
                      [ceil R2] [cburst B2] [mtu MTU] [quantum Q]
 rate     rate allocated to this class (class can still borrow)
 burst    max bytes burst which can be accumulated during idle period {computed}
 mpu      minimum packet size used in rate computations
 overhead per-packet size overhead used in rate computations
 linklay  adapting to a linklayer e.g. atm
 ceil     definite upper class rate (no borrows) {rate}
 cburst   burst but for ceil {computed}
 mtu      max packet size we create rate map for {1600}
 prio     priority of leaf; lower are served first {0}
 quantum  how much bytes to serve from leaf at once {use r2q}

TC HTB version 3.3
";

fn illegal(what: &str) -> Fail {
    Fail::new(1, format!("Illegal \"{what}\"\n{USAGE}"))
}

fn what_is(w: &str) -> Fail {
    Fail::new(1, format!("What is \"{w}\"?\n{USAGE}"))
}

/// `htb_parse_opt`.
pub(super) fn parse_qdisc(a: &mut Args) -> CmdResult<QdiscOpts> {
    let mut o = HtbOpts::default();
    while let Some(w) = a.next() {
        if matches(w, "r2q") {
            o.rate2quantum = get_u32(a.value()?, 10).ok_or_else(|| illegal("r2q"))?;
        } else if matches(w, "default") {
            o.defcls = get_u32(a.value()?, 16).ok_or_else(|| illegal("default"))?;
        } else if matches(w, "debug") {
            let v = a.value()?;
            o.debug = 0;
            for (i, c) in v.bytes().take(16).enumerate() {
                if !(b'0'..=b'3').contains(&c) {
                    break;
                }
                o.debug |= ((c - b'0') as u32) << (2 * i);
            }
        } else if matches(w, "direct_qlen") {
            o.direct_qlen = Some(get_u32(a.value()?, 10).ok_or_else(|| illegal("direct_qlen"))?);
        } else if matches(w, "offload") {
            o.offload = true;
        } else {
            return Err(what_is(w));
        }
    }
    Ok(QdiscOpts::Htb(o))
}

/// `htb_parse_class_opt`.
pub(super) fn parse_class(a: &mut Args, dev: Option<&DevInfo>) -> CmdResult<ClassOpts> {
    let mut o = HtbClassOpts::default();
    let (mut buffer, mut cbuffer) = (0u32, 0u32);
    let mut mtu = 1600u32;
    let (mut mpu, mut overhead) = (0u16, 0u16);
    let mut linklayer = LinkLayer::Ethernet;
    let (mut rate64, mut ceil64) = (0u64, 0u64);
    while let Some(w) = a.next() {
        if matches(w, "prio") {
            o.prio = get_u32(a.value()?, 10).ok_or_else(|| illegal("prio"))?;
        } else if matches(w, "mtu") {
            mtu = get_u32(a.value()?, 10).ok_or_else(|| illegal("mtu"))?;
        } else if matches(w, "mpu") {
            mpu = get_u16(a.value()?, 10).ok_or_else(|| illegal("mpu"))?;
        } else if matches(w, "overhead") {
            overhead = get_u16(a.value()?, 10).ok_or_else(|| illegal("overhead"))?;
        } else if matches(w, "linklayer") {
            linklayer = super::get_linklayer(a.value()?).ok_or_else(|| illegal("linklayer"))?;
        } else if matches(w, "quantum") {
            o.quantum = get_u32(a.value()?, 10).ok_or_else(|| illegal("quantum"))?;
        } else if matches(w, "burst") || w == "buffer" || w == "maxburst" {
            buffer = size_and_cell(a.value()?).map_err(|_| illegal(w))?;
        } else if matches(w, "cburst") || w == "cbuffer" || w == "cmaxburst" {
            cbuffer = size_and_cell(a.value()?).map_err(|_| illegal(w))?;
        } else if w == "ceil" {
            let v = a.value()?;
            if ceil64 != 0 {
                return Err(Fail::new(1, "Double \"ceil\" spec"));
            }
            ceil64 = rate_or_percent(v, dev).map_err(|pre| after(pre, illegal("ceil")))?;
        } else if w == "rate" {
            let v = a.value()?;
            if rate64 != 0 {
                return Err(Fail::new(1, "Double \"rate\" spec"));
            }
            rate64 = rate_or_percent(v, dev).map_err(|pre| after(pre, illegal("rate")))?;
        } else if w == "help" {
            return Err(Fail::new(1, USAGE));
        } else {
            return Err(what_is(w));
        }
    }
    if rate64 == 0 {
        return Err(Fail::new(1, "\"rate\" is required."));
    }
    if ceil64 == 0 {
        ceil64 = rate64;
    }
    if buffer == 0 {
        buffer = (rate64 / HZ) as u32 + mtu;
    }
    if cbuffer == 0 {
        cbuffer = (ceil64 / HZ) as u32 + mtu;
    }
    let spec = |rate| RateSpec {
        rate,
        overhead: overhead as i32,
        mpu,
        linklayer,
    };
    o.rate = spec(rate64);
    o.ceil = spec(ceil64);
    o.buffer = xmittime(rate64, buffer);
    o.cbuffer = xmittime(ceil64, cbuffer);
    Ok(ClassOpts::Htb(o))
}

fn linklayer_name(l: LinkLayer) -> &'static str {
    match l {
        LinkLayer::Unspec => "unspec",
        LinkLayer::Ethernet => "ethernet",
        LinkLayer::Atm => "atm",
    }
}

/// `htb_print_opt` for the qdisc.
pub(super) fn print_qdisc(o: &HtbOpts, out: &mut Out, details: bool) {
    out.int(
        To::Any,
        "r2q",
        &format!("r2q {}", o.rate2quantum as i32),
        o.rate2quantum as i32 as i64,
    );
    let def = if o.defcls == 0 {
        "0".to_string()
    } else {
        format!("{:#x}", o.defcls)
    };
    out.str(To::Any, "default", &format!(" default {def}"), &def);
    out.uint(
        To::Any,
        "direct_packets_stat",
        &format!(" direct_packets_stat {}", o.direct_pkts),
        o.direct_pkts as u64,
    );
    if details {
        let v = format!("{}.{}", o.version >> 16, o.version & 0xffff);
        out.str(To::Any, "ver", &format!(" ver {v}"), &v);
    }
    if let Some(q) = o.direct_qlen {
        out.uint(
            To::Any,
            "direct_qlen",
            &format!(" direct_qlen {q}"),
            q as u64,
        );
    }
    if o.offload {
        out.item(To::Any, "offload", " offload", crate::out::J::Null);
    }
}

/// `htb_print_opt` for a class.
pub(super) fn print_class(o: &HtbClassOpts, out: &mut Out, details: bool) {
    if o.level == 0 {
        out.int(
            To::Any,
            "prio",
            &format!("prio {} ", o.prio as i32),
            o.prio as i32 as i64,
        );
        if details {
            out.int(
                To::Any,
                "quantum",
                &format!("quantum {} ", o.quantum as i32),
                o.quantum as i32 as i64,
            );
        }
    }
    out.uint(
        To::Any,
        "rate",
        &format!("rate {} ", out.rate(o.rate.rate)),
        o.rate.rate,
    );
    if o.rate.overhead != 0 {
        out.uint(
            To::Any,
            "overhead",
            &format!("overhead {} ", o.rate.overhead as u32),
            o.rate.overhead as u32 as u64,
        );
    }
    let buffer = xmitsize(o.rate.rate, o.buffer);
    out.uint(
        To::Any,
        "ceil",
        &format!("ceil {} ", out.rate(o.ceil.rate)),
        o.ceil.rate,
    );
    let cbuffer = xmitsize(o.ceil.rate, o.cbuffer);
    let ll = o.rate.linklayer;
    if matches!(ll, LinkLayer::Atm) || details {
        let name = linklayer_name(if ll == LinkLayer::Unspec {
            LinkLayer::Ethernet
        } else {
            ll
        });
        out.str(To::Any, "linklayer", &format!("linklayer {name} "), name);
    }
    if details {
        out.uint(
            To::Any,
            "burst",
            &format!("burst {}/", fmt_size(buffer)),
            buffer as u64,
        );
        out.uint(To::Any, "burst_cell", "1", 1);
        let mpu = o.rate.mpu as u32;
        out.uint(
            To::Any,
            "mpu_rate",
            &format!(" mpu {} ", fmt_size(mpu)),
            mpu as u64,
        );
        out.uint(
            To::Any,
            "cburst",
            &format!("cburst {}/", fmt_size(cbuffer)),
            cbuffer as u64,
        );
        out.uint(To::Any, "cburst_cell", "1", 1);
        let cmpu = o.ceil.mpu as u32;
        out.uint(
            To::Any,
            "mpu_ceil",
            &format!(" mpu {} ", fmt_size(cmpu)),
            cmpu as u64,
        );
        out.int(
            To::Any,
            "level",
            &format!("level {} ", o.level as i32),
            o.level as i32 as i64,
        );
    } else {
        out.uint(
            To::Any,
            "burst",
            &format!("burst {} ", fmt_size(buffer)),
            buffer as u64,
        );
        out.uint(
            To::Any,
            "cburst",
            &format!("cburst {} ", fmt_size(cbuffer)),
            cbuffer as u64,
        );
    }
}

/// `htb_print_xstats`.
pub(super) fn print_xstats(x: &HtbClassXstats, out: &mut Out) {
    out.uint(
        To::Any,
        "lended",
        &format!(" lended: {} ", x.lended),
        x.lended as u64,
    );
    out.uint(
        To::Any,
        "borrowed",
        &format!("borrowed: {} ", x.borrowed),
        x.borrowed as u64,
    );
    out.uint(
        To::Any,
        "giants",
        &format!("giants: {}", x.giants),
        x.giants as u64,
    );
    // A literal newline in q_htb.c (kept under -oneline).
    out.text("\n");
    out.int(
        To::Any,
        "tokens",
        &format!(" tokens: {} ", x.tokens),
        x.tokens as i64,
    );
    out.int(
        To::Any,
        "ctokens",
        &format!("ctokens: {}", x.ctokens),
        x.ctokens as i64,
    );
    out.text("\n");
}
