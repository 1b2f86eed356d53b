//! TBF syntax (iproute2 tc/q_tbf.c): `rate`, `burst`, `limit` or `latency`,
//! `peakrate` with `mtu`/`minburst`, `mpu`, `overhead`, `linklayer`.

use super::{get_linklayer, get_u16, size_and_cell};
use crate::args::{after, matches, rate_or_percent, Args, CmdResult, Fail};
use crate::out::{Out, To};
use crate::tc_core::{tick2time, xmitsize, xmittime, TIME_UNITS_PER_SEC};
use sluice_core::qdisc::tbf::{limit_from_latency, TbfOpts};
use sluice_core::qdisc::{DevInfo, QdiscOpts};
use sluice_core::rate::{LinkLayer, RateSpec};
use sluice_core::units::{fmt_size, fmt_time_us, parse_size, parse_time_us};

const USAGE: &str = "Usage: ... tbf limit BYTES burst BYTES[/BYTES] rate KBPS [ mtu BYTES[/BYTES] ]
\t[ peakrate KBPS ] [ latency TIME ] [ overhead BYTES ] [ linklayer TYPE ]";

fn illegal(what: &str, val: &str) -> Fail {
    Fail::new(1, format!("tbf: illegal value for \"{what}\": \"{val}\""))
}

fn dup(what: &str) -> Fail {
    Fail::new(1, format!("tbf: duplicate \"{what}\" specification"))
}

/// `tbf_parse_opt`.
pub(super) fn parse(a: &mut Args, dev: Option<&DevInfo>) -> CmdResult<Option<QdiscOpts>> {
    let (mut limit, mut latency) = (0u32, 0u32);
    let (mut buffer, mut mtu, mut mpu) = (0u32, 0u32, 0u32);
    let (mut rate64, mut prate64) = (0u64, 0u64);
    let mut overhead = 0u16;
    let mut linklayer = LinkLayer::Ethernet;
    while let Some(w) = a.next() {
        if matches(w, "limit") {
            let v = a.value()?;
            if limit != 0 {
                return Err(dup("limit"));
            }
            if latency != 0 {
                return Err(Fail::new(
                    1,
                    "tbf: specifying both \"latency\" and \"limit\" is not allowed",
                ));
            }
            limit = parse_size(v).map_err(|_| illegal("limit", v))?;
        } else if matches(w, "latency") {
            let v = a.value()?;
            if latency != 0 {
                return Err(dup("latency"));
            }
            if limit != 0 {
                return Err(Fail::new(
                    1,
                    "tbf: specifying both \"limit\" and \"/latency\" is not allowed",
                ));
            }
            latency = parse_time_us(v).map_err(|_| illegal("latency", v))?;
        } else if matches(w, "burst") || w == "buffer" || w == "maxburst" {
            let v = a.value()?;
            if buffer != 0 {
                return Err(dup("buffer/burst/maxburst"));
            }
            buffer = size_and_cell(v).map_err(|shown| illegal(w, &shown))?;
        } else if w == "mtu" || w == "minburst" {
            let v = a.value()?;
            if mtu != 0 {
                return Err(dup("mtu/minburst"));
            }
            mtu = size_and_cell(v).map_err(|shown| illegal(w, &shown))?;
        } else if w == "mpu" {
            let v = a.value()?;
            if mpu != 0 {
                return Err(dup("mpu"));
            }
            mpu = parse_size(v).map_err(|_| illegal("mpu", v))?;
        } else if w == "rate" {
            let v = a.value()?;
            if rate64 != 0 {
                return Err(dup("rate"));
            }
            rate64 = rate_or_percent(v, dev).map_err(|pre| after(pre, illegal("rate", v)))?;
        } else if matches(w, "peakrate") {
            let v = a.value()?;
            if prate64 != 0 {
                return Err(dup("peakrate"));
            }
            prate64 = rate_or_percent(v, dev).map_err(|pre| after(pre, illegal("peakrate", v)))?;
        } else if matches(w, "overhead") {
            let v = a.value()?;
            if overhead != 0 {
                return Err(dup("overhead"));
            }
            overhead = get_u16(v, 10).ok_or_else(|| illegal("overhead", v))?;
        } else if matches(w, "linklayer") {
            let v = a.value()?;
            linklayer = get_linklayer(v).ok_or_else(|| illegal("linklayer", v))?;
        } else if w == "help" {
            return Err(Fail::new(1, USAGE));
        } else {
            return Err(Fail::new(
                1,
                format!("tbf: unknown parameter \"{w}\"\n{USAGE}"),
            ));
        }
    }
    let mut errors = String::new();
    if rate64 == 0 {
        errors.push_str("tbf: the \"rate\" parameter is mandatory.\n");
    }
    if buffer == 0 {
        errors.push_str("tbf: the \"burst\" parameter is mandatory.\n");
    }
    if prate64 != 0 && mtu == 0 {
        errors.push_str("tbf: when \"peakrate\" is specified, \"mtu\" must also be specified.\n");
    }
    if limit == 0 && latency == 0 {
        errors.push_str("tbf: either \"limit\" or \"latency\" is required.\n");
    }
    if !errors.is_empty() {
        return Err(Fail::new(1, format!("{errors}{USAGE}")));
    }
    if limit == 0 {
        let peak = (prate64 != 0).then_some((prate64, mtu));
        limit = limit_from_latency(rate64, buffer, peak, latency);
    }
    let spec = |rate: u64| RateSpec {
        rate: rate.min(u32::MAX as u64),
        overhead: overhead as i32,
        mpu: mpu as u16,
        linklayer,
    };
    let mut o = TbfOpts {
        rate: spec(rate64),
        peakrate: if prate64 != 0 {
            spec(prate64)
        } else {
            RateSpec::default()
        },
        limit,
        buffer_ticks: xmittime(rate64.min(u32::MAX as u64), buffer),
        mtu_ticks: 0,
        rate64: (rate64 >= 1 << 32).then_some(rate64),
        prate64: (prate64 >= 1 << 32).then_some(prate64),
        burst: Some(buffer),
        pburst: None,
        rtab: true,
        ptab: prate64 != 0,
    };
    if prate64 != 0 {
        o.mtu_ticks = xmittime(prate64.min(u32::MAX as u64), mtu);
        o.pburst = Some(mtu);
    }
    Ok(Some(QdiscOpts::Tbf(o)))
}

/// `tbf_print_opt`.
pub(super) fn print(o: &TbfOpts, out: &mut Out, details: bool) {
    let rate64 = o.rate64.unwrap_or(o.rate.rate);
    out.uint(
        To::Any,
        "rate",
        &format!("rate {} ", out.rate(rate64)),
        rate64,
    );
    let buffer = xmitsize(rate64, o.buffer_ticks);
    if details {
        let b = format!("{}/1", fmt_size(buffer));
        out.str(To::Any, "burst", &format!("burst {b} "), &b);
        let mpu = o.rate.mpu as u32;
        out.uint(
            To::Any,
            "mpu",
            &format!("mpu {} ", fmt_size(mpu)),
            mpu as u64,
        );
    } else {
        out.uint(
            To::Any,
            "burst",
            &format!("burst {} ", fmt_size(buffer)),
            buffer as u64,
        );
    }
    let prate64 = o.prate64.unwrap_or(o.peakrate.rate);
    if prate64 != 0 {
        out.text(&format!("peakrate {} ", out.rate(prate64)));
        if o.mtu_ticks != 0 || o.peakrate.mpu != 0 {
            let mtu = xmitsize(prate64, o.mtu_ticks);
            if details {
                let m = format!("{}/1", fmt_size(mtu));
                out.str(To::Any, "mtu", &format!("mtu {m} "), &m);
                let mpu = o.peakrate.mpu as u32;
                out.uint(
                    To::Any,
                    "mpu",
                    &format!("mpu {} ", fmt_size(mpu)),
                    mpu as u64,
                );
            } else {
                out.uint(
                    To::Any,
                    "minburst",
                    &format!("minburst {} ", fmt_size(mtu)),
                    mtu as u64,
                );
            }
        }
    }
    let mut latency =
        TIME_UNITS_PER_SEC * (o.limit as f64 / rate64 as f64) - tick2time(o.buffer_ticks) as f64;
    if prate64 != 0 {
        let lat2 =
            TIME_UNITS_PER_SEC * (o.limit as f64 / prate64 as f64) - tick2time(o.mtu_ticks) as f64;
        if lat2 > latency {
            latency = lat2;
        }
    }
    if latency >= 0.0 {
        let us = crate::tc_core::c_unsigned(latency);
        out.uint(To::Json, "lat", "", latency as u64);
        out.text(&format!("lat {} ", fmt_time_us(us)));
    } else {
        out.uint(
            To::Any,
            "limit",
            &format!("limit {} ", fmt_size(o.limit)),
            o.limit as u64,
        );
    }
    if o.rate.overhead != 0 {
        out.int(
            To::Any,
            "overhead",
            &format!("overhead {} ", o.rate.overhead),
            o.rate.overhead as i64,
        );
    }
    let ll = o.rate.linklayer;
    if ll == LinkLayer::Atm || details {
        let name = if ll == LinkLayer::Atm {
            "atm"
        } else {
            "ethernet"
        };
        out.str(To::Any, "linklayer", &format!("linklayer {name} "), name);
    }
}
