//! police syntax (iproute2 tc/m_police.c): `rate BPS burst BYTES[/CELL]`,
//! `mtu`, `peakrate`, `avrate`, `mpu`, `overhead`, `linklayer`,
//! `pkts_rate`/`pkts_burst`, a verdict or `conform-exceed EXCEED[/CONFORM]`,
//! `index N`. Used as an action (`action police ...`) and as the old
//! `police ...` option of u32 and fw.
//!
//! tc computes what the kernel stores: the burst as transmission time in
//! psched ticks at the rate, and the rate table's cell size from the mtu
//! (2047 bytes when none is given), whose `cell_log` the kernel checks.

use super::{
    argc, next_arg, parse_action_control, parse_action_control_slash, print_action_control, soft,
    verdict, PrintCx,
};
use crate::args::{duparg, invarg, matches, Args, CmdResult, Fail};
use crate::out::{Out, To};
use crate::tc_core::{xmitsize, xmittime};
use sluice_core::act::police::{PoliceOpts, PoliceSpec};
use sluice_core::act::{ActionDump, ActionOpts, ActionSpec};
use sluice_core::rate::{LinkLayer, RateSpec};
use sluice_core::units::{fmt_size, parse_rate, parse_rate32, parse_size};

const USAGE: &str = "Usage: ... police [ rate BPS burst BYTES[/BYTES] ] 
\t\t[ pkts_rate RATE pkts_burst PACKETS ] [ mtu BYTES[/BYTES] ]
\t\t[ peakrate BPS ] [ avrate BPS ] [ overhead BYTES ]
\t\t[ linklayer TYPE ] [ CONTROL ]
Where: CONTROL := conform-exceed <EXCEEDACT>[/NOTEXCEEDACT]
\t\t  Define how to handle packets which exceed (<EXCEEDACT>)
\t\t  or conform (<NOTEXCEEDACT>) the configured bandwidth limit.
       EXCEEDACT/NOTEXCEEDACT := { pipe | ok | reclassify | drop | continue |
\t\t\t\t   goto chain <CHAIN_INDEX> }";

/// `action police ...`, the current word at `police`.
pub(crate) fn parse_action(a: &mut Args) -> CmdResult<ActionSpec> {
    next_arg(a)?;
    let p = parse(a)?;
    Ok(ActionSpec {
        index: p.index,
        opts: ActionOpts::Police(p.opts),
        cookie: None,
        no_percpu: false,
        offload: 0,
    })
}

/// `parse_police`: the old `police ...` of u32 and fw, the current word
/// after `police`.
pub(crate) fn parse_old(a: &mut Args) -> CmdResult<PoliceSpec> {
    if argc(a) == 0 {
        return Err(soft(""));
    }
    parse(a)
}

#[derive(Default)]
struct Words {
    index: u32,
    buffer: u32,
    rcell_log: Option<u8>,
    mtu: u32,
    pcell_log: Option<u8>,
    mpu: u32,
    rate64: u64,
    avrate: u32,
    prate64: u64,
    action: Option<i32>,
    result: Option<i32>,
    overhead: u16,
    linklayer: Option<LinkLayer>,
    pps64: u64,
    ppsburst64: u64,
}

/// `get_size_and_cell`: the size, and the cell's log2 if one was given.
fn size_and_cell(v: &str, what: &str) -> CmdResult<(u32, Option<u8>)> {
    let sz = crate::q::size_and_cell(v).map_err(|shown| invarg(what, &shown))?;
    let cell = v
        .split_once('/')
        .and_then(|(_, c)| crate::args::get_integer(c));
    Ok((sz, cell.map(|c| c.trailing_zeros() as u8)))
}

/// `act_parse_police` after the kind word: the options up to the first
/// word it does not know.
fn parse(a: &mut Args) -> CmdResult<PoliceSpec> {
    let mut w = Words::default();
    let mut ok = 0;
    while let Some(word) = a.peek() {
        if matches(word, "index") {
            let v = next_arg(a)?;
            w.index = super::get_u32(v, 10).ok_or_else(|| invarg("index", v))?;
        } else if matches(word, "burst") || word == "buffer" || word == "maxburst" {
            let v = next_arg(a)?;
            if w.buffer != 0 {
                return Err(duparg("buffer/burst", v));
            }
            (w.buffer, w.rcell_log) = size_and_cell(v, "buffer")?;
        } else if word == "mtu" || word == "minburst" {
            let v = next_arg(a)?;
            if w.mtu != 0 {
                return Err(duparg("mtu/minburst", v));
            }
            (w.mtu, w.pcell_log) = size_and_cell(v, "mtu")?;
        } else if word == "mpu" {
            let v = next_arg(a)?;
            if w.mpu != 0 {
                return Err(duparg("mpu", v));
            }
            w.mpu = parse_size(v).map_err(|_| invarg("mpu", v))?;
        } else if word == "rate" {
            let v = next_arg(a)?;
            if w.rate64 != 0 {
                return Err(duparg("rate", v));
            }
            w.rate64 = parse_rate(v).map_err(|_| invarg("rate", v))?;
        } else if word == "avrate" {
            let v = next_arg(a)?;
            if w.avrate != 0 {
                return Err(duparg("avrate", v));
            }
            w.avrate = parse_rate32(v).map_err(|_| invarg("avrate", v))?;
        } else if matches(word, "peakrate") {
            let v = next_arg(a)?;
            if w.prate64 != 0 {
                return Err(duparg("peakrate", v));
            }
            w.prate64 = parse_rate(v).map_err(|_| invarg("peakrate", v))?;
        } else if [
            "reclassify",
            "drop",
            "shot",
            "continue",
            "pass",
            "ok",
            "pipe",
            "goto",
        ]
        .iter()
        .any(|k| matches(word, k))
        {
            w.action = Some(parse_action_control(a, false)?);
            ok += 1;
            continue;
        } else if word == "conform-exceed" {
            next_arg(a)?;
            let (exceed, conform) = parse_action_control_slash(a, true)?;
            w.action = Some(exceed);
            if conform.is_some() {
                w.result = conform;
            }
            ok += 1;
            continue;
        } else if matches(word, "overhead") {
            let v = next_arg(a)?;
            w.overhead = super::get_u16(v, 10).ok_or_else(|| invarg("overhead", v))?;
        } else if matches(word, "linklayer") {
            let v = next_arg(a)?;
            w.linklayer = Some(crate::q::get_linklayer(v).ok_or_else(|| invarg("linklayer", v))?);
        } else if matches(word, "pkts_rate") {
            let v = next_arg(a)?;
            if w.pps64 != 0 {
                return Err(duparg("pkts_rate", v));
            }
            w.pps64 = super::get_u64(v, 10).ok_or_else(|| invarg("pkts_rate", v))?;
        } else if matches(word, "pkts_burst") {
            let v = next_arg(a)?;
            if w.ppsburst64 != 0 {
                return Err(duparg("pkts_burst", v));
            }
            w.ppsburst64 = super::get_u64(v, 10).ok_or_else(|| invarg("pkts_burst", v))?;
        } else if word == "help" {
            return Err(Fail::new(255, USAGE));
        } else {
            break;
        }
        a.next();
        ok += 1;
    }
    if ok == 0 {
        return Err(soft(""));
    }
    check(&w)?;
    build(&w)
}

/// The consistency checks of `act_parse_police`.
fn check(w: &Words) -> CmdResult {
    if w.rate64 != 0 && w.avrate != 0 {
        return Err(soft(""));
    }
    if w.rate64 == 0 && w.avrate == 0 && w.index == 0 && w.mtu == 0 && w.pps64 == 0 {
        return Err(soft(
            "'rate' or 'avrate' or 'mtu' or 'pkts_rate' MUST be specified.",
        ));
    }
    if w.rate64 != 0 && w.buffer == 0 && w.avrate == 0 {
        return Err(soft("'burst' requires 'rate'."));
    }
    if w.pps64 != 0 && w.ppsburst64 == 0 {
        return Err(soft("'pkts_burst' requires 'pkts_rate'."));
    }
    if w.pps64 != 0 && w.rate64 != 0 {
        return Err(soft(
            "'rate' and 'pkts_rate' are not allowed in same action.",
        ));
    }
    if w.prate64 != 0 {
        if w.rate64 == 0 {
            return Err(soft("'peakrate' requires 'rate'."));
        }
        if w.mtu == 0 {
            return Err(soft("'mtu' is required, if 'peakrate' is requested."));
        }
    }
    Ok(())
}

/// `tc_calc_rtable_64`'s cell size: the given one, else the smallest with
/// 256 cells covering the mtu (2047 bytes when none).
fn cell_log(given: Option<u8>, mtu: u32) -> u8 {
    given.unwrap_or_else(|| {
        let mtu = if mtu == 0 { 2047 } else { mtu };
        let mut c = 0;
        while (mtu >> c) > 255 {
            c += 1;
        }
        c
    })
}

/// What tc sends: `struct tc_police` and the attributes around it.
fn build(w: &Words) -> CmdResult<PoliceSpec> {
    let linklayer = w.linklayer.unwrap_or(LinkLayer::Ethernet);
    let spec = |rate: u64| RateSpec {
        rate,
        overhead: w.overhead as i32,
        mpu: w.mpu as u16,
        linklayer,
    };
    let mut o = PoliceOpts {
        exceed: super::verdict(w.action.unwrap_or(1))?,
        conform: match w.result {
            Some(r) if r != 0 => Some(verdict(r)?),
            _ => None,
        },
        mtu: w.mtu,
        avrate: (w.avrate != 0).then_some(w.avrate),
        ..Default::default()
    };
    if w.rate64 != 0 {
        o.rate = Some(spec(w.rate64));
        o.rate_cell_log = cell_log(w.rcell_log, w.mtu);
        o.burst = xmittime(w.rate64, w.buffer);
    }
    if w.prate64 != 0 {
        o.peakrate = Some(spec(w.prate64));
        o.peak_cell_log = cell_log(w.pcell_log, w.mtu);
    }
    if w.pps64 != 0 {
        o.pkts_rate = Some(w.pps64);
        o.pkts_burst = Some(xmittime(w.pps64, w.ppsburst64 as u32) as u64);
    }
    Ok(PoliceSpec {
        index: w.index,
        opts: o,
    })
}

/// `print_police` (also `tc_print_police` for the old form in filters).
pub(crate) fn print(d: &ActionDump, cx: &PrintCx, out: &mut Out) {
    let ActionOpts::Police(o) = &d.opts else {
        return;
    };
    out.str(To::Json, "kind", "", "police");
    out.text(&format!(" police 0x{:x} ", d.index));
    out.uint(To::Json, "index", "", d.index as u64);
    let rate = o.rate.filter(|r| r.rate != 0);
    let rate64 = rate.map_or(0, |r| r.rate);
    out.text(&format!("rate {} ", out.rate(rate64)));
    let buffer = xmitsize(rate64, o.burst);
    out.text(&format!("burst {} ", fmt_size(buffer)));
    out.text(&format!("mtu {} ", fmt_size(o.mtu)));
    let prate64 = o.peakrate.map_or(0, |r| r.rate);
    if prate64 != 0 {
        out.text(&format!("peakrate {} ", out.rate(prate64)));
    }
    if let Some(av) = o.avrate {
        out.text(&format!("avrate {} ", out.rate(av as u64)));
    }
    if let (Some(pps), Some(burst)) = (o.pkts_rate, o.pkts_burst) {
        let b = xmitsize(pps, burst.min(u32::MAX as u64) as u32) as u64;
        out.uint(To::Any, "pkts_rate", &format!("pkts_rate {pps} "), pps);
        out.uint(To::Any, "pkts_burst", &format!("pkts_burst {b} "), b);
    }
    print_action_control(out, "action ", o.exceed, "");
    match o.conform.filter(|c| c.to_raw() != 0) {
        Some(c) => print_action_control(out, "/", c, " "),
        None => out.text(" "),
    }
    let overhead = rate.map_or(0, |r| r.overhead) as u32;
    out.uint(
        To::Any,
        "overhead",
        &format!("overhead {} ", fmt_size(overhead)),
        overhead as u64,
    );
    let ll = rate.map_or(LinkLayer::Unspec, |r| r.linklayer);
    if ll == LinkLayer::Atm || cx.details {
        let name = match ll {
            LinkLayer::Unspec => "unspec",
            LinkLayer::Ethernet => "ethernet",
            LinkLayer::Atm => "atm",
        };
        out.str(To::Any, "linklayer", &format!("linklayer {name} "), name);
    }
    out.nl();
    out.int(
        To::Any,
        "ref",
        &format!("\tref {} ", d.refcnt),
        d.refcnt as i64,
    );
    out.int(
        To::Any,
        "bind",
        &format!("bind {} ", d.bindcnt),
        d.bindcnt as i64,
    );
    if cx.stats {
        super::print_tm(d, cx.now, out);
    }
    out.nl();
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::cls::Verdict;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_conditioner_policer_as_tc_sends_it() {
        // The Ultimate Traffic Conditioner's ingress policer:
        // `police rate 800kbit burst 10k drop flowid :1`.
        let w = words("rate 800kbit burst 10k drop flowid :1");
        let mut a = Args::new(&w);
        let p = parse_old(&mut a).unwrap();
        assert_eq!(a.peek(), Some("flowid"));
        assert_eq!(p.opts.exceed, Verdict::Shot);
        assert_eq!(p.opts.rate.unwrap().rate, 100_000);
        assert_eq!(p.opts.rate_cell_log, 3);
        // 10240 bytes at 100000 B/s: 102.4 ms = 1600000 ticks of 64 ns.
        assert_eq!(p.opts.burst, 1_600_000);
    }

    #[test]
    fn parse_errors_as_m_police_reports_them() {
        // Golden actions.golden "police parse errors and help".
        let cases = [
            ("police rate 1mbit", 1, "'burst' requires 'rate'.\n"),
            (
                "police burst 10k",
                1,
                "'rate' or 'avrate' or 'mtu' or 'pkts_rate' MUST be specified.\n",
            ),
            (
                "police rate abc burst 10k",
                255,
                "Error: argument \"abc\" is wrong: rate\n",
            ),
            (
                "police rate 1mbit burst abc",
                255,
                "Error: argument \"abc\" is wrong: buffer\n",
            ),
            (
                "police rate 1mbit burst 10k conform-exceed foo",
                1,
                "Bad action type foo\n",
            ),
            (
                "police",
                255,
                "Command line is not complete. Try option \"help\"\n",
            ),
        ];
        for (cmd, code, msg) in cases {
            let w = words(cmd);
            let e = parse_action(&mut Args::new(&w)).unwrap_err();
            assert_eq!((e.code, e.stderr.as_str()), (code, msg), "{cmd}");
        }
    }
}
