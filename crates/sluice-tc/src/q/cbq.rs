//! CBQ syntax (iproute2 6.1 tc/q_cbq.c and tc/tc_cbq.c): the qdisc's
//! `bandwidth`/`avpkt`/`mpu`/`cell`/`ewma`/`allot`/`overhead`/`linklayer`,
//! a class's `rate`/`bandwidth`/`maxburst`/`minburst`/`minidle`/`bounded`/
//! `borrow`/`isolated`/`sharing`/`ewma`/`cell`/`prio`/`allot`/`avpkt`/`mpu`/
//! `weight`/`split`/`defmap`/`overhead`/`linklayer`, and the printers.
//!
//! tc computes each rate's transmission-time table (`tc_calc_rtable`, here
//! [`calc_rtable`], CBQ being its only user in sluice) and the link-sharing
//! times from `maxburst`/`minburst` (`tc_cbq_calc_maxidle`/`_offtime`), and
//! sends them with the rate, as the kernel wants. iproute2 6.1 prints CBQ
//! options with `fprintf`, so they appear as text only (under `-j` the
//! options object stays empty here, where iproute2 writes text into its JSON).

use super::{get_linklayer, get_u16, get_u32};
use crate::args::{get_integer, matches, Args, CmdResult, Fail};
use crate::out::Out;
use crate::tc_core::{tick2time, time2tick, xmittime, TIME_UNITS_PER_SEC};
use sluice_core::handle::Handle;
use sluice_core::qdisc::cbq::{
    CbqFopt, CbqLss, CbqOpts, CbqRate, CbqWrr, CbqXstats, LSS_BOUNDED, LSS_CHANGE_AVPKT,
    LSS_CHANGE_EWMA, LSS_CHANGE_FLAGS, LSS_CHANGE_MAXIDLE, LSS_CHANGE_MINIDLE,
    LSS_CHANGE_OFFTIME, LSS_ISOLATED, RTAB_ENTRIES, TC_CBQ_DEF_EWMA, TC_CBQ_MAXPRIO,
};
use sluice_core::qdisc::{ClassOpts, QdiscOpts};
use sluice_core::rate::{LinkLayer, RateSpec};
use sluice_core::units::{fmt_g, fmt_time_us, parse_rate32, parse_size};

const USAGE: &str = "Usage: ... cbq bandwidth BPS avpkt BYTES [ mpu BYTES ]
               [ cell BYTES ] [ ewma LOG ]";

const CLASS_USAGE: &str = "Usage: ... cbq\tbandwidth BPS rate BPS maxburst PKTS [ avpkt BYTES ]
\t\t[ minburst PKTS ] [ bounded ] [ isolated ]
\t\t[ allot BYTES ] [ mpu BYTES ] [ weight RATE ]
\t\t[ prio NUMBER ] [ cell BYTES ] [ ewma LOG ]
\t\t[ estimator INTERVAL TIME_CONSTANT ]
\t\t[ split CLASSID ] [ defmap MASK/CHANGE ]
\t\t[ overhead BYTES ] [ linklayer TYPE ]";

/// `explain1`: tc gives up with no usage text.
fn illegal(what: &str) -> Fail {
    Fail::new(1, format!("Illegal \"{what}\""))
}

fn fail(msg: &str) -> Fail {
    Fail::new(1, msg)
}

/// `cell BYTES`: a power of two, as its log.
fn cell_log(v: &str) -> CmdResult<i32> {
    let cell = parse_size(v).map_err(|_| illegal("cell"))?;
    (0..32)
        .find(|i| 1u32 << i == cell)
        .ok_or_else(|| fail("cell must be 2^n"))
}

/// `ewma LOG`: below 32.
fn ewma(v: &str) -> CmdResult<i32> {
    let e = get_integer(v).ok_or_else(|| illegal("ewma"))?;
    if e > 31 {
        return Err(fail("ewma_log must be < 32"));
    }
    Ok(e)
}

/// `tc_align_to_atm` / `tc_adjust_size`.
fn adjust_size(sz: u32, mpu: u32, ll: LinkLayer) -> u32 {
    let sz = sz.max(mpu);
    if ll == LinkLayer::Atm {
        sz.div_ceil(48) * 53
    } else {
        sz
    }
}

/// `tc_calc_rtable`: the table of ticks to send `(i + 1) << cell_log` bytes,
/// the cell chosen (when not given) so that `mtu` (2047 when 0) fits in 256 cells.
pub fn calc_rtable(spec: RateSpec, cell_log: i32, mtu: u32) -> CbqRate {
    let mtu = if mtu == 0 { 2047 } else { mtu };
    let mut log = cell_log;
    if log < 0 {
        log = 0;
        while (mtu >> log) > 255 {
            log += 1;
        }
    }
    let rtab = (0..RTAB_ENTRIES as u32)
        .map(|i| {
            let sz = ((i + 1) as u64) << log;
            let sz = adjust_size(sz.min(u32::MAX as u64) as u32, spec.mpu as u32, spec.linklayer);
            xmittime(spec.rate, sz)
        })
        .collect();
    CbqRate {
        spec,
        cell_log: log as u8,
        cell_align: -1,
        rtab,
    }
}

/// `tc_cbq_calc_maxidle`: scaled ticks of idle credit for `maxburst` packets.
pub fn calc_maxidle(bndw: u32, rate: u32, avpkt: u32, ewma_log: i32, maxburst: u32) -> u32 {
    let g = 1.0 - 1.0 / (1u64 << ewma_log) as f64;
    let xmt = avpkt as f64 / bndw as f64;
    let mut maxidle = xmt * (1.0 - g);
    if bndw != rate && maxburst != 0 {
        let vxmt = (avpkt as f64 / rate as f64 - xmt) * (g.powf(-(maxburst as f64)) - 1.0);
        if vxmt > maxidle {
            maxidle = vxmt;
        }
    }
    let us = maxidle * (1u64 << ewma_log) as f64 * TIME_UNITS_PER_SEC;
    time2tick(crate::tc_core::c_unsigned(us))
}

/// `tc_cbq_calc_offtime`: ticks an overlimit class sleeps so it may then send `minburst` packets.
pub fn calc_offtime(bndw: u32, rate: u32, avpkt: u32, ewma_log: i32, minburst: u32) -> u32 {
    let g = 1.0 - 1.0 / (1u64 << ewma_log) as f64;
    let mut offtime = avpkt as f64 / rate as f64 - avpkt as f64 / bndw as f64;
    if minburst == 0 {
        return 0;
    }
    if minburst == 1 {
        offtime *= g.powf(-(minburst as f64)) - 1.0;
    } else {
        offtime *= 1.0 + (g.powf(-((minburst - 1) as f64)) - 1.0) / (1.0 - g);
    }
    time2tick(crate::tc_core::c_unsigned(offtime * TIME_UNITS_PER_SEC))
}

/// Values shared by the qdisc and class parsers.
struct RateWords {
    rate: u32,
    mpu: u32,
    overhead: u16,
    linklayer: LinkLayer,
    cell_log: i32,
    ewma_log: i32,
}

impl Default for RateWords {
    fn default() -> Self {
        RateWords {
            rate: 0,
            mpu: 0,
            overhead: 0,
            linklayer: LinkLayer::Ethernet,
            cell_log: -1,
            ewma_log: -1,
        }
    }
}

impl RateWords {
    fn table(&self, mtu: u32) -> CbqRate {
        let spec = RateSpec {
            rate: self.rate as u64,
            overhead: self.overhead as i32,
            mpu: self.mpu as u16,
            linklayer: self.linklayer,
        };
        calc_rtable(spec, self.cell_log, mtu)
    }
}

/// `cbq_parse_opt`.
pub(super) fn parse_qdisc(a: &mut Args) -> CmdResult<QdiscOpts> {
    let mut r = RateWords::default();
    let (mut avpkt, mut allot) = (0u32, 0u32);
    while let Some(w) = a.next() {
        if matches(w, "bandwidth") || matches(w, "rate") {
            r.rate = parse_rate32(a.value()?).map_err(|_| illegal("bandwidth"))?;
        } else if matches(w, "ewma") {
            r.ewma_log = ewma(a.value()?)?;
        } else if matches(w, "cell") {
            r.cell_log = cell_log(a.value()?)?;
        } else if matches(w, "avpkt") {
            avpkt = parse_size(a.value()?).map_err(|_| illegal("avpkt"))?;
        } else if matches(w, "mpu") {
            r.mpu = parse_size(a.value()?).map_err(|_| illegal("mpu"))?;
        } else if matches(w, "allot") {
            // Accepted and ignored, as iproute2 says, except for the table's cell.
            allot = parse_size(a.value()?).map_err(|_| illegal("allot"))?;
        } else if matches(w, "overhead") {
            r.overhead = get_u16(a.value()?, 10).ok_or_else(|| illegal("overhead"))?;
        } else if matches(w, "linklayer") {
            r.linklayer = get_linklayer(a.value()?).ok_or_else(|| illegal("linklayer"))?;
        } else if matches(w, "help") {
            return Err(fail(USAGE));
        } else {
            return Err(fail(&format!("What is \"{w}\"?\n{USAGE}")));
        }
    }
    if r.rate == 0 {
        return Err(fail("CBQ: bandwidth is required parameter."));
    }
    if avpkt == 0 {
        return Err(fail("CBQ: \"avpkt\" is required."));
    }
    let allot = allot.max(avpkt.wrapping_mul(3) / 2);
    let rate = r.table(allot);
    let ewma_log = if r.ewma_log < 0 {
        TC_CBQ_DEF_EWMA
    } else {
        r.ewma_log as u8
    };
    let lss = CbqLss {
        change: LSS_CHANGE_MAXIDLE | LSS_CHANGE_EWMA | LSS_CHANGE_AVPKT,
        ewma_log,
        maxidle: xmittime(r.rate as u64, avpkt),
        avpkt,
        ..Default::default()
    };
    Ok(QdiscOpts::Cbq(CbqOpts {
        rate: Some(rate),
        lss: Some(lss),
        wrr: None,
        fopt: None,
    }))
}

/// `sscanf(arg, "%08x/%08x")`: the number of fields converted and their values.
fn scan_defmap(s: &str) -> (u32, u32, u32) {
    fn hex(s: &str) -> Option<(u32, &str)> {
        let t = s.trim_start();
        let (neg, t) = match t.as_bytes().first() {
            Some(b'-') => (true, &t[1..]),
            Some(b'+') => (false, &t[1..]),
            _ => (false, t),
        };
        let width = 8 - (s.len() - t.len()).min(8);
        let body = &t[..t.len().min(width)];
        let digits = if body.len() > 2
            && (body.starts_with("0x") || body.starts_with("0X"))
            && body.as_bytes()[2].is_ascii_hexdigit()
        {
            &body[2..]
        } else {
            body
        };
        let n = digits.bytes().take_while(u8::is_ascii_hexdigit).count();
        if n == 0 {
            return None;
        }
        let v = u32::from_str_radix(&digits[..n], 16).ok()?;
        let used = body.len() - digits.len() + n;
        Some((if neg { v.wrapping_neg() } else { v }, &t[used..]))
    }
    let Some((a, rest)) = hex(s) else {
        return (0, 0, 0);
    };
    match rest.strip_prefix('/').and_then(hex) {
        Some((b, _)) => (2, a, b),
        None => (1, a, 0),
    }
}

/// `cbq_parse_class_opt`. `excl`: the request is `tc class add` (NLM_F_EXCL),
/// which fills in round-robin defaults for a class given no priority.
pub(super) fn parse_class(a: &mut Args, excl: bool) -> CmdResult<ClassOpts> {
    let mut r = RateWords::default();
    let mut lss = CbqLss::default();
    let mut wrr = CbqWrr::default();
    let mut fopt = CbqFopt::default();
    let (mut wrr_ok, mut fopt_ok) = (false, false);
    let (mut bndw, mut minburst, mut maxburst) = (0u32, 0u32, 0u32);
    while let Some(w) = a.next() {
        if matches(w, "rate") {
            r.rate = parse_rate32(a.value()?).map_err(|_| illegal("rate"))?;
        } else if matches(w, "bandwidth") {
            bndw = parse_rate32(a.value()?).map_err(|_| illegal("bandwidth"))?;
        } else if matches(w, "minidle") {
            lss.minidle = get_u32(a.value()?, 0).ok_or_else(|| illegal("minidle"))?;
            lss.change |= LSS_CHANGE_MINIDLE;
        } else if matches(w, "minburst") {
            minburst = get_u32(a.value()?, 0).ok_or_else(|| illegal("minburst"))?;
            lss.change |= LSS_CHANGE_OFFTIME;
        } else if matches(w, "maxburst") {
            maxburst = get_u32(a.value()?, 0).ok_or_else(|| illegal("maxburst"))?;
            lss.change |= LSS_CHANGE_MAXIDLE;
        } else if matches(w, "bounded") {
            lss.flags |= LSS_BOUNDED;
            lss.change |= LSS_CHANGE_FLAGS;
        } else if matches(w, "borrow") {
            lss.flags &= !LSS_BOUNDED;
            lss.change |= LSS_CHANGE_FLAGS;
        } else if matches(w, "isolated") {
            lss.flags |= LSS_ISOLATED;
            lss.change |= LSS_CHANGE_FLAGS;
        } else if matches(w, "sharing") {
            lss.flags &= !LSS_ISOLATED;
            lss.change |= LSS_CHANGE_FLAGS;
        } else if matches(w, "ewma") {
            r.ewma_log = ewma(a.value()?)?;
            lss.change |= LSS_CHANGE_EWMA;
        } else if matches(w, "cell") {
            r.cell_log = cell_log(a.value()?)?;
        } else if matches(w, "prio") {
            let p = get_u32(a.value()?, 0).ok_or_else(|| illegal("prio"))?;
            if p > TC_CBQ_MAXPRIO as u32 {
                return Err(fail(&format!(
                    "\"prio\" must be number in the range 1...{TC_CBQ_MAXPRIO}"
                )));
            }
            wrr.priority = p as u8;
            wrr_ok = true;
        } else if matches(w, "allot") {
            wrr.allot = parse_size(a.value()?).map_err(|_| illegal("allot"))?;
        } else if matches(w, "avpkt") {
            lss.avpkt = parse_size(a.value()?).map_err(|_| illegal("avpkt"))?;
            lss.change |= LSS_CHANGE_AVPKT;
        } else if matches(w, "mpu") {
            r.mpu = parse_size(a.value()?).map_err(|_| illegal("mpu"))?;
        } else if matches(w, "weight") {
            wrr.weight = parse_size(a.value()?).map_err(|_| illegal("weight"))?;
            wrr_ok = true;
        } else if matches(w, "split") {
            let v = a.value()?;
            fopt.split = Handle::parse_classid(v)
                .ok_or_else(|| fail("Invalid split node ID."))?
                .0;
            fopt_ok = true;
        } else if matches(w, "defmap") {
            let (n, map, change) = scan_defmap(a.value()?);
            if n < 1 {
                return Err(fail("Invalid defmap, should be MASK32[/MASK]"));
            }
            fopt.defmap = map;
            fopt.defchange = if n == 1 { !0 } else { change };
            fopt_ok = true;
        } else if matches(w, "overhead") {
            r.overhead = get_u16(a.value()?, 10).ok_or_else(|| illegal("overhead"))?;
        } else if matches(w, "linklayer") {
            r.linklayer = get_linklayer(a.value()?).ok_or_else(|| illegal("linklayer"))?;
        } else if matches(w, "help") {
            return Err(fail(CLASS_USAGE));
        } else {
            return Err(fail(&format!("What is \"{w}\"?\n{CLASS_USAGE}")));
        }
    }
    let avpkt_allot = lss.avpkt.wrapping_mul(3) / 2;
    let mut rate = None;
    if r.rate != 0 {
        let pktsize = wrr.allot;
        if wrr.allot < avpkt_allot {
            wrr.allot = avpkt_allot;
        }
        rate = Some(r.table(pktsize));
    }
    let ewma_log = if r.ewma_log < 0 {
        TC_CBQ_DEF_EWMA as i32
    } else {
        r.ewma_log
    };
    lss.ewma_log = ewma_log as u8;
    if lss.change & (LSS_CHANGE_OFFTIME | LSS_CHANGE_MAXIDLE) != 0 {
        if lss.avpkt == 0 {
            return Err(fail("CBQ: avpkt is required for max/minburst."));
        }
        if bndw == 0 || r.rate == 0 {
            return Err(fail("CBQ: bandwidth&rate are required for max/minburst."));
        }
    }
    if wrr.priority == 0 && excl {
        wrr_ok = true;
        wrr.priority = TC_CBQ_MAXPRIO;
        if wrr.allot == 0 {
            wrr.allot = avpkt_allot;
        }
    }
    if wrr_ok {
        if wrr.weight == 0 {
            wrr.weight = if wrr.priority == TC_CBQ_MAXPRIO {
                1
            } else {
                r.rate
            };
        }
        if wrr.allot == 0 {
            return Err(fail("CBQ: \"allot\" is required to set WRR parameters."));
        }
    }
    if lss.change & LSS_CHANGE_MAXIDLE != 0 {
        lss.maxidle = calc_maxidle(bndw, r.rate, lss.avpkt, ewma_log, maxburst);
        lss.change |= LSS_CHANGE_EWMA | LSS_CHANGE_AVPKT;
    }
    if lss.change & LSS_CHANGE_OFFTIME != 0 {
        lss.offtime = calc_offtime(bndw, r.rate, lss.avpkt, ewma_log, minburst);
        lss.change |= LSS_CHANGE_EWMA | LSS_CHANGE_AVPKT;
    }
    if lss.change & LSS_CHANGE_MINIDLE != 0 {
        lss.minidle = lss.minidle.wrapping_shl(lss.ewma_log as u32);
        lss.change |= LSS_CHANGE_EWMA;
    }
    if lss.change != 0 {
        lss.change |= LSS_CHANGE_FLAGS;
    }
    Ok(ClassOpts::Cbq(CbqOpts {
        rate,
        lss: (lss.change != 0).then_some(lss),
        wrr: wrr_ok.then_some(wrr),
        fopt: fopt_ok.then_some(fopt),
    }))
}

/// `sprint_ticks`.
fn ticks(t: u32) -> String {
    fmt_time_us(tick2time(t))
}

/// `sprint_linklayer`.
fn linklayer_name(l: LinkLayer) -> &'static str {
    match l {
        LinkLayer::Unspec => "unaware",
        LinkLayer::Ethernet => "ethernet",
        LinkLayer::Atm => "atm",
    }
}

/// `cbq_print_opt`, for the qdisc and its classes alike (text only, as iproute2 6.1).
pub(super) fn print(o: &CbqOpts, out: &mut Out, details: bool) {
    let mut s = String::new();
    if let Some(r) = &o.rate {
        s += &format!("rate {} ", out.rate(r.spec.rate));
        if r.spec.linklayer == LinkLayer::Atm || details {
            s += &format!("linklayer {} ", linklayer_name(r.spec.linklayer));
        }
        if details {
            s += &format!("cell {}b ", 1u64 << r.cell_log.min(63));
            if r.spec.mpu != 0 {
                s += &format!("mpu {}b ", r.spec.mpu);
            }
            if r.spec.overhead != 0 {
                s += &format!("overhead {}b ", r.spec.overhead as u32);
            }
        }
    }
    if let Some(l) = o.lss.filter(|l| l.flags != 0) {
        let mut f = Vec::new();
        if l.flags & LSS_BOUNDED != 0 {
            f.push("bounded");
        }
        if l.flags & LSS_ISOLATED != 0 {
            f.push("isolated");
        }
        s += &format!("({}) ", f.join(","));
    }
    if let Some(w) = &o.wrr {
        if w.priority != TC_CBQ_MAXPRIO {
            s += &format!("prio {}", w.priority);
        } else {
            s += "prio no-transmit";
        }
        if details {
            s += &format!("/{} ", w.cpriority);
            if w.weight != 1 {
                s += &format!("weight {} ", out.rate(w.weight as u64));
            }
            if w.allot != 0 {
                s += &format!("allot {}b ", w.allot);
            }
        }
    }
    if let (Some(l), true) = (&o.lss, details) {
        s += &format!(
            "\nlevel {} ewma {} avpkt {}b ",
            l.level, l.ewma_log, l.avpkt
        );
        let shift = |v: u32| v.checked_shr(l.ewma_log as u32).unwrap_or(0);
        if l.maxidle != 0 {
            s += &format!("maxidle {} ", ticks(shift(l.maxidle)));
            if out.raw {
                s += &format!("[{:08x}] ", l.maxidle);
            }
        }
        if l.minidle != 0x7fff_ffff {
            s += &format!("minidle {} ", ticks(shift(l.minidle)));
            if out.raw {
                s += &format!("[{:08x}] ", l.minidle);
            }
        }
        if l.offtime != 0 {
            s += &format!("offtime {} ", ticks(l.offtime));
            if out.raw {
                s += &format!("[{:08x}] ", l.offtime);
            }
        }
    }
    if let (Some(f), true) = (&o.fopt, details) {
        s += &format!("\nsplit {} ", Handle(f.split));
        if f.defmap != 0 {
            s += &format!("defmap {:08x}", f.defmap);
        }
    }
    out.text(&s);
}

/// `cbq_print_xstats`.
pub(super) fn print_xstats(x: &CbqXstats, out: &mut Out) {
    out.text(&format!(
        "  borrowed {} overactions {} avgidle {} undertime {}",
        x.borrows,
        x.overactions,
        fmt_g(x.avgidle as f64),
        fmt_g(x.undertime as f64)
    ));
    out.nl();
}
