//! cake syntax (iproute2 6.1 tc/q_cake.c): the shaper (`bandwidth`,
//! `unlimited`, `autorate-ingress`), `rtt` and its presets, the DiffServ
//! and flow-isolation modes, `nat`, `wash`, `split-gso`, the ACK filter,
//! `memlimit`, `fwmark`, the overhead keywords (`overhead`, `mpu`, `atm`,
//! `ptm`, `raw`, `conservative`, the ADSL/VDSL/DOCSIS/Ethernet framings),
//! `ingress`/`egress`; the qdisc's and the queues' statistics printers.
//!
//! tc sends only what was given, with iproute2's quirks: `diffserv3` is
//! never sent (its value is 0, tc's "not given"), nor are `mpu 0`,
//! `memlimit 0` or `fwmark 0`; the framing keywords add to the overhead
//! given before them; `rtt T` also sends a target of T/20.

use super::get_u32;
use crate::args::{duparg, strtol10, Args, CmdResult, Fail};
use crate::out::{Out, To};
use sluice_core::qdisc::cake::{
    ack, atm, diffserv, flow_mode, CakeClassXstats, CakeOpts, CakeXstats,
};
use sluice_core::qdisc::QdiscOpts;
use sluice_core::units::{fmt_size, fmt_time_us, parse_rate, parse_size, parse_time_us};

const USAGE: &str = "Usage: ... cake [ bandwidth RATE | unlimited* | autorate-ingress ]
                [ rtt TIME | datacentre | lan | metro | regional |
                  internet* | oceanic | satellite | interplanetary ]
                [ besteffort | diffserv8 | diffserv4 | diffserv3* ]
                [ flowblind | srchost | dsthost | hosts | flows |
                  dual-srchost | dual-dsthost | triple-isolate* ]
                [ nat | nonat* ]
                [ wash | nowash* ]
                [ split-gso* | no-split-gso ]
                [ ack-filter | ack-filter-aggressive | no-ack-filter* ]
                [ memlimit LIMIT ]
                [ fwmark MASK ]
                [ ptm | atm | noatm* ] [ overhead N | conservative | raw* ]
                [ mpu N ] [ ingress | egress* ]
                (* marks defaults)";

/// The `rtt` presets: name, target µs, interval µs.
const PRESETS: [(&str, u32, u32); 8] = [
    ("datacentre", 5, 100),
    ("lan", 50, 1000),
    ("metro", 500, 10000),
    ("regional", 1500, 30000),
    ("internet", 5000, 100000),
    ("oceanic", 15000, 300000),
    ("satellite", 50000, 1000000),
    ("interplanetary", 50000000, 1000000000),
];

const DIFFSERV_NAMES: [&str; 5] = [
    "diffserv3",
    "diffserv4",
    "diffserv8",
    "besteffort",
    "precedence",
];

const FLOWMODE_NAMES: [&str; 8] = [
    "flowblind",
    "srchost",
    "dsthost",
    "hosts",
    "flows",
    "dual-srchost",
    "dual-dsthost",
    "triple-isolate",
];

/// A message tc prints with a literal `\n` and no newline.
fn range_error(what: &str, range: &str) -> Fail {
    Fail {
        stderr: format!("Illegal \"{what}\", valid range is {range}\\n"),
        code: 1,
    }
}

/// `cake_parse_opt`.
pub(super) fn parse(a: &mut Args) -> CmdResult<Option<QdiscOpts>> {
    let mut preset_set: Option<&str> = None;
    let (mut overhead_override, mut overhead_set) = (false, false);
    let (mut interval, mut target, mut diffserv, mut memlimit, mut fwmark) =
        (0u32, 0u32, 0u32, 0u32, 0u32);
    let mut bandwidth = 0u64;
    let mut unlimited = false;
    let (mut ack_filter, mut split_gso, mut flowmode, mut autorate) = (-1i64, -1i64, -1i64, -1i64);
    let (mut ingress, mut wash, mut nat, mut atm_mode) = (-1i64, -1i64, -1i64, -1i64);
    let (mut overhead, mut mpu) = (0i64, 0i64);
    while let Some(w) = a.next() {
        if let Some(&(name, t, i)) = PRESETS.iter().find(|p| p.0 == w) {
            if let Some(prev) = preset_set {
                return Err(duparg(w, prev));
            }
            preset_set = Some(name);
            target = t;
            interval = i;
            continue;
        }
        match w {
            "bandwidth" => {
                bandwidth =
                    parse_rate(a.value()?).map_err(|_| Fail::new(1, "Illegal \"bandwidth\""))?;
                unlimited = false;
                autorate = 0;
            }
            "unlimited" => {
                bandwidth = 0;
                unlimited = true;
                autorate = 0;
            }
            "autorate-ingress" => autorate = 1,
            "rtt" => {
                interval =
                    parse_time_us(a.value()?).map_err(|_| Fail::new(1, "Illegal \"rtt\""))?;
                target = (interval / 20).max(1);
            }
            "besteffort" => diffserv = diffserv::BESTEFFORT,
            "precedence" => diffserv = diffserv::PRECEDENCE,
            "diffserv8" => diffserv = diffserv::DIFFSERV8,
            "diffserv4" | "diffserv" => diffserv = diffserv::DIFFSERV4,
            "diffserv3" => diffserv = diffserv::DIFFSERV3,
            "nowash" => wash = 0,
            "wash" => wash = 1,
            "split-gso" => split_gso = 1,
            "no-split-gso" => split_gso = 0,
            "flowblind" => flowmode = flow_mode::NONE as i64,
            "srchost" => flowmode = flow_mode::SRC_IP as i64,
            "dsthost" => flowmode = flow_mode::DST_IP as i64,
            "hosts" => flowmode = flow_mode::HOSTS as i64,
            "flows" => flowmode = flow_mode::FLOWS as i64,
            "dual-srchost" => flowmode = flow_mode::DUAL_SRC as i64,
            "dual-dsthost" => flowmode = flow_mode::DUAL_DST as i64,
            "triple-isolate" => flowmode = flow_mode::TRIPLE as i64,
            "nat" => nat = 1,
            "nonat" => nat = 0,
            "ptm" => atm_mode = atm::PTM as i64,
            "atm" => atm_mode = atm::ATM as i64,
            "noatm" => atm_mode = atm::NONE as i64,
            "raw" => {
                atm_mode = atm::NONE as i64;
                overhead = 0;
                overhead_set = true;
                overhead_override = true;
            }
            "conservative" => {
                // A whole ATM cell plus ATM framing: safe when unknown.
                atm_mode = atm::ATM as i64;
                overhead = 48;
                overhead_set = true;
            }
            // ADSL framings over ATM cells.
            "ipoa-vcmux" | "ipoa-llcsnap" | "bridged-vcmux" | "bridged-llcsnap" | "pppoa-vcmux"
            | "pppoa-llc" | "pppoe-vcmux" | "pppoe-llcsnap" => {
                atm_mode = atm::ATM as i64;
                overhead += match w {
                    "ipoa-vcmux" => 8,
                    "ipoa-llcsnap" => 16,
                    "bridged-vcmux" => 24,
                    "bridged-llcsnap" => 32,
                    "pppoa-vcmux" => 10,
                    "pppoa-llc" => 14,
                    "pppoe-vcmux" => 32,
                    _ => 40,
                };
                overhead_set = true;
            }
            // VDSL2 framings over PTM (64b/65b coding).
            "pppoe-ptm" | "bridged-ptm" => {
                atm_mode = atm::PTM as i64;
                overhead += if w == "pppoe-ptm" { 30 } else { 22 };
                overhead_set = true;
            }
            // Kept for old scripts; cake compensates for it by itself.
            "via-ethernet" => {}
            "ethernet" => {
                // Preamble, inter-frame gap and FCS.
                overhead += 38;
                overhead_set = true;
                mpu = 84;
            }
            "ether-vlan" => {
                overhead += 4;
                overhead_set = true;
            }
            "docsis" => {
                atm_mode = atm::NONE as i64;
                overhead += 18;
                overhead_set = true;
                mpu = 64;
            }
            "overhead" => {
                overhead = strtol10(a.value()?)
                    .filter(|v| (-64..=256).contains(v))
                    .map(|v| v as i64)
                    .ok_or_else(|| range_error("overhead", "-64 to 256"))?;
                overhead_set = true;
            }
            "mpu" => {
                mpu = strtol10(a.value()?)
                    .filter(|v| (0..=256).contains(v))
                    .map(|v| v as i64)
                    .ok_or_else(|| range_error("mpu", "0 to 256"))?;
            }
            "ingress" => ingress = 1,
            "egress" => ingress = 0,
            "no-ack-filter" => ack_filter = ack::NONE as i64,
            "ack-filter" => ack_filter = ack::FILTER as i64,
            "ack-filter-aggressive" => ack_filter = ack::AGGRESSIVE as i64,
            "memlimit" => {
                let v = a.value()?;
                memlimit = parse_size(v).map_err(|_| {
                    Fail::new(1, format!("Illegal value for \"memlimit\": \"{v}\""))
                })?;
            }
            "fwmark" => {
                let v = a.value()?;
                fwmark = get_u32(v, 0).ok_or_else(|| {
                    Fail::new(1, format!("Illegal value for \"fwmark\": \"{v}\""))
                })?;
            }
            "help" => return Err(Fail::new(1, USAGE)),
            _ => return Err(Fail::new(1, format!("What is \"{w}\"?\n{USAGE}"))),
        }
    }
    let set = |v: i64| (v != -1).then_some(v as u32);
    Ok(Some(QdiscOpts::Cake(CakeOpts {
        base_rate: (bandwidth != 0 || unlimited).then_some(bandwidth),
        diffserv_mode: (diffserv != 0).then_some(diffserv),
        atm: set(atm_mode),
        flow_mode: set(flowmode),
        overhead: overhead_set.then_some(overhead as i32),
        raw: overhead_override.then_some(true),
        mpu: (mpu > 0).then_some(mpu as u32),
        rtt: (interval != 0).then_some(interval),
        target: (target != 0).then_some(target),
        autorate: set(autorate),
        memory: (memlimit != 0).then_some(memlimit),
        nat: set(nat),
        wash: set(wash),
        ingress: set(ingress),
        ack_filter: set(ack_filter),
        split_gso: set(split_gso),
        fwmark: (fwmark != 0).then_some(fwmark),
    })))
}

/// `cake_print_mode`.
fn print_mode(out: &mut Out, value: u32, key: &str, table: &[&str]) {
    match table.get(value as usize) {
        Some(name) => out.str(To::Any, key, &format!("{name} "), name),
        None => {
            out.str(To::Json, key, "", "unknown");
            out.text(&format!("(?{key}?)"));
        }
    }
}

/// `cake_print_opt`.
pub(super) fn print(o: &CakeOpts, out: &mut Out, _details: bool) {
    if let Some(bw) = o.base_rate {
        if bw != 0 {
            let text = format!("bandwidth {} ", out.rate(bw));
            out.uint(To::Any, "bandwidth", &text, bw);
        } else {
            out.str(To::Any, "bandwidth", "bandwidth unlimited ", "unlimited");
        }
    }
    match o.autorate {
        Some(1) => out.str(To::Any, "autorate", "autorate-ingress ", "autorate-ingress"),
        Some(0) | None => {}
        Some(_) => out.str(To::Any, "autorate", "(?autorate?) ", "unknown"),
    }
    if let Some(d) = o.diffserv_mode {
        print_mode(out, d, "diffserv", &DIFFSERV_NAMES);
    }
    if let Some(f) = o.flow_mode {
        print_mode(out, f, "flowmode", &FLOWMODE_NAMES);
    }
    let flag = |v: Option<u32>| v.unwrap_or(0) != 0;
    let nat = flag(o.nat);
    out.text(if nat { "nat " } else { "nonat " });
    out.bool(To::Json, "nat", "", nat);
    let wash = flag(o.wash);
    out.text(if wash { "wash " } else { "nowash " });
    out.bool(To::Json, "wash", "", wash);
    let ingress = flag(o.ingress);
    if ingress {
        out.text("ingress ");
    }
    out.bool(To::Json, "ingress", "", ingress);
    match o.ack_filter.unwrap_or(0) {
        ack::AGGRESSIVE => out.str(
            To::Any,
            "ack-filter",
            "ack-filter-aggressive ",
            "aggressive",
        ),
        ack::FILTER => out.str(To::Any, "ack-filter", "ack-filter ", "enabled"),
        _ => out.str(To::Any, "ack-filter", "no-ack-filter ", "disabled"),
    }
    let gso = flag(o.split_gso);
    out.text(if gso { "split-gso " } else { "no-split-gso " });
    out.bool(To::Json, "split_gso", "", gso);
    let interval = o.rtt.unwrap_or(0);
    if interval != 0 {
        out.text(&format!("rtt {} ", fmt_time_us(interval)));
    }
    out.uint(To::Json, "rtt", "", interval as u64);
    let raw = o.raw.is_some();
    if raw {
        out.text("raw ");
    }
    out.bool(To::Json, "raw", "", raw);
    match o.atm.unwrap_or(0) {
        atm::ATM => out.str(To::Any, "atm", "atm ", "atm"),
        atm::PTM => out.str(To::Any, "atm", "ptm ", "ptm"),
        _ if !raw => out.str(To::Any, "atm", "noatm ", "noatm"),
        _ => {}
    }
    let oh = o.overhead.unwrap_or(0);
    out.int(To::Any, "overhead", &format!("overhead {oh} "), oh as i64);
    if let Some(m) = o.mpu.filter(|&m| m != 0) {
        out.uint(To::Any, "mpu", &format!("mpu {m} "), m as u64);
    }
    if let Some(m) = o.memory.filter(|&m| m != 0) {
        out.uint(
            To::Any,
            "memlimit",
            &format!("memlimit {} ", fmt_size(m)),
            m as u64,
        );
    }
    let fw = o.fwmark.unwrap_or(0);
    if fw != 0 {
        out.text(&format!("fwmark {fw:#x} "));
    }
    let hex = if fw == 0 {
        "0".to_string()
    } else {
        format!("{fw:#x}")
    };
    out.str(To::Json, "fwmark", "", &hex);
}

/// `cake_print_xstats` for the qdisc, and the newline `print_qdisc` adds.
pub(super) fn print_xstats(x: &CakeXstats, out: &mut Out) {
    out.text(&format!(
        " memory used: {} of {}\n",
        fmt_size(x.memory_used),
        fmt_size(x.memory_limit)
    ));
    out.uint(To::Json, "memory_used", "", x.memory_used as u64);
    out.uint(To::Json, "memory_limit", "", x.memory_limit as u64);
    let text = format!(" capacity estimate: {}\n", out.rate(x.capacity_estimate));
    out.uint(To::Any, "capacity_estimate", &text, x.capacity_estimate);
    let u =
        |out: &mut Out, key: &str, text: String, v: u32| out.uint(To::Any, key, &text, v as u64);
    u(
        out,
        "min_network_size",
        format!(" min/max network layer size: {:>12}", x.min_netlen),
        x.min_netlen,
    );
    u(
        out,
        "max_network_size",
        format!(" /{:>8}\n", x.max_netlen),
        x.max_netlen,
    );
    u(
        out,
        "min_adj_size",
        format!(" min/max overhead-adjusted size: {:>8}", x.min_adjlen),
        x.min_adjlen,
    );
    u(
        out,
        "max_adj_size",
        format!(" /{:>8}\n", x.max_adjlen),
        x.max_adjlen,
    );
    u(
        out,
        "avg_hdr_offset",
        format!(" average network hdr offset: {:>12}\n\n", x.avg_netoff),
        x.avg_netoff,
    );
    let n = x.tins.len();
    if n == 0 {
        out.nl();
        return;
    }
    if out.json {
        out.open_arr("tins");
        for t in &x.tins {
            out.open("");
            let j = |out: &mut Out, k: &str, v: u64| out.uint(To::Json, k, "", v);
            j(out, "threshold_rate", t.threshold_rate);
            j(out, "sent_bytes", t.sent_bytes);
            j(out, "backlog_bytes", t.backlog_bytes as u64);
            j(out, "target_us", t.target_us as u64);
            j(out, "interval_us", t.interval_us as u64);
            j(out, "peak_delay_us", t.peak_delay_us as u64);
            j(out, "avg_delay_us", t.avg_delay_us as u64);
            j(out, "base_delay_us", t.base_delay_us as u64);
            j(out, "sent_packets", t.sent_packets as u64);
            j(out, "way_indirect_hits", t.way_indirect_hits as u64);
            j(out, "way_misses", t.way_misses as u64);
            j(out, "way_collisions", t.way_collisions as u64);
            j(out, "drops", t.dropped_packets as u64);
            j(out, "ecn_mark", t.ecn_marked_packets as u64);
            j(out, "ack_drops", t.acks_dropped_packets as u64);
            j(out, "sparse_flows", t.sparse_flows as u64);
            j(out, "bulk_flows", t.bulk_flows as u64);
            j(out, "unresponsive_flows", t.unresponsive_flows as u64);
            j(out, "max_pkt_len", t.max_skblen as u64);
            j(out, "flow_quantum", t.flow_quantum as u64);
            out.close();
        }
        out.close();
        return;
    }
    match n {
        3 => out.text("                   Bulk  Best Effort        Voice\n"),
        4 => out.text("                   Bulk  Best Effort        Video        Voice\n"),
        _ => {
            let mut h = "          ".to_string();
            for i in 0..n {
                h.push_str(&format!("        Tin {i}"));
            }
            h.push('\n');
            out.text(&h);
        }
    }
    let row = |out: &mut Out, name: &str, cell: &dyn Fn(usize) -> String| {
        let mut line = name.to_string();
        for i in 0..n {
            line.push_str(&format!(" {:>12}", cell(i)));
        }
        line.push('\n');
        out.text(&line);
    };
    let t = &x.tins;
    let rates: Vec<String> = t.iter().map(|t| out.rate(t.threshold_rate)).collect();
    row(out, "  thresh  ", &|i| rates[i].clone());
    row(out, "  target  ", &|i| fmt_time_us(t[i].target_us));
    row(out, "  interval", &|i| fmt_time_us(t[i].interval_us));
    row(out, "  pk_delay", &|i| fmt_time_us(t[i].peak_delay_us));
    row(out, "  av_delay", &|i| fmt_time_us(t[i].avg_delay_us));
    row(out, "  sp_delay", &|i| fmt_time_us(t[i].base_delay_us));
    row(out, "  backlog ", &|i| fmt_size(t[i].backlog_bytes));
    row(out, "  pkts    ", &|i| t[i].sent_packets.to_string());
    row(out, "  bytes   ", &|i| t[i].sent_bytes.to_string());
    row(out, "  way_inds", &|i| t[i].way_indirect_hits.to_string());
    row(out, "  way_miss", &|i| t[i].way_misses.to_string());
    row(out, "  way_cols", &|i| t[i].way_collisions.to_string());
    row(out, "  drops   ", &|i| t[i].dropped_packets.to_string());
    row(out, "  marks   ", &|i| t[i].ecn_marked_packets.to_string());
    row(out, "  ack_drop", &|i| {
        t[i].acks_dropped_packets.to_string()
    });
    row(out, "  sp_flows", &|i| t[i].sparse_flows.to_string());
    row(out, "  bk_flows", &|i| t[i].bulk_flows.to_string());
    row(out, "  un_flows", &|i| t[i].unresponsive_flows.to_string());
    row(out, "  max_len ", &|i| t[i].max_skblen.to_string());
    row(out, "  quantum ", &|i| t[i].flow_quantum.to_string());
    out.nl();
}

/// `cake_print_xstats` for a class (one queue).
pub(super) fn print_class_xstats(x: &CakeClassXstats, out: &mut Out) {
    out.int(
        To::Any,
        "deficit",
        &format!("  deficit {}", x.deficit),
        x.deficit as i64,
    );
    out.uint(
        To::Any,
        "count",
        &format!(" count {}", x.count),
        x.count as u64,
    );
    if x.dropping {
        out.bool(To::Any, "dropping", " dropping", true);
        if let Some(d) = x.drop_next_us {
            if d < 0 {
                out.text(&format!(" drop_next -{}", fmt_time_us(d.unsigned_abs())));
            } else {
                out.uint(To::Json, "drop_next", "", d as u64);
                out.text(&format!(" drop_next {}", fmt_time_us(d as u32)));
            }
        }
    }
    out.uint(
        To::Any,
        "blue_prob",
        &format!(" blue_prob {}", x.p_drop),
        x.p_drop as u64,
    );
    if let Some(b) = x.blue_timer_us {
        // The kernel's value is never negative.
        out.uint(To::Json, "blue_timer", "", b as u64);
        out.text(&format!(" blue_timer {}", fmt_time_us(b as u32)));
    }
}

#[cfg(test)]
mod tests {
    use crate::Outcome;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn run(net: &mut crate::net::Net, line: &str) -> Outcome {
        let (opts, rest) = crate::tc::parse_global(&words(line)).unwrap();
        crate::tc::run(net, &opts, &rest)
    }

    /// A namespace with a dummy device `d0` of MTU 1500.
    fn net() -> crate::net::Net {
        let mut net = crate::net::Net::new();
        let info = sluice_core::qdisc::DevInfo {
            name: "d0".into(),
            ..Default::default()
        };
        net.add_device(info, sluice_core::device::DevKind::Dummy);
        net
    }

    /// Run `steps` (`;;`-separated `add`/`change` argument lists), then show.
    fn shown(steps: &str, flags: &str) -> String {
        let mut net = net();
        for (i, step) in steps.split(";;").enumerate() {
            let verb = if i == 0 { "add" } else { "change" };
            let o = run(
                &mut net,
                &format!("qdisc {verb} dev d0 root handle 1: cake {step}"),
            );
            assert_eq!((o.code, o.stderr.as_str()), (0, ""), "{steps}");
        }
        run(&mut net, &format!("{flags}qdisc show dev d0")).stdout
    }

    fn opts(steps: &str) -> String {
        let s = shown(steps, "");
        s.strip_prefix("qdisc cake 1: root refcnt 2 ")
            .unwrap()
            .to_string()
    }

    fn err(args: &str) -> (String, i32) {
        let mut net = net();
        let o = run(
            &mut net,
            &format!("qdisc add dev d0 root handle 1: cake {args}"),
        );
        (o.stderr, o.code)
    }

    const DEFAULT: &str = "bandwidth unlimited diffserv3 triple-isolate nonat nowash \
        no-ack-filter split-gso rtt 100ms raw overhead 0 \n";

    #[test]
    fn prints_as_iproute2_6_1() {
        // tc-testing cake.json's expectations, and the keywords' sums as
        // q_cake.c adds them.
        assert_eq!(opts(""), DEFAULT);
        for (args, want) in [
            ("bandwidth 1000", "bandwidth 1Kbit diffserv3 "),
            (
                "autorate-ingress",
                "bandwidth unlimited autorate-ingress diffserv3 ",
            ),
            ("rtt 200", "split-gso rtt 200us raw"),
            ("datacentre", "split-gso rtt 100us raw"),
            // print_time's %.3g: 1000 s is 1e+03s.
            ("interplanetary", "split-gso rtt 1e+03s raw"),
            ("besteffort", "unlimited besteffort triple-isolate"),
            ("precedence", "unlimited precedence triple-isolate"),
            ("diffserv", "unlimited diffserv4 triple-isolate"),
            ("dsthost nat", "diffserv3 dsthost nat nowash"),
            ("hosts wash", "diffserv3 hosts nonat wash no-ack"),
            (
                "flowblind no-split-gso",
                "flowblind nonat nowash no-ack-filter no-split-gso",
            ),
            (
                "dual-srchost ack-filter",
                "dual-srchost nonat nowash ack-filter split-gso",
            ),
            (
                "ack-filter-aggressive",
                "nowash ack-filter-aggressive split-gso",
            ),
            (
                "memlimit 10000 ptm",
                "raw ptm overhead 0 memlimit 10000b \n",
            ),
            ("fwmark 8 atm", "raw atm overhead 0 fwmark 0x8 \n"),
            (
                "overhead 128 mpu 256",
                "rtt 100ms noatm overhead 128 mpu 256 \n",
            ),
            (
                "conservative ingress",
                "nowash ingress no-ack-filter split-gso rtt 100ms atm overhead 48 \n",
            ),
            ("pppoe-ptm ether-vlan", "rtt 100ms ptm overhead 34 \n"),
            (
                "overhead 10 docsis",
                "rtt 100ms noatm overhead 28 mpu 64 \n",
            ),
            ("ethernet", "rtt 100ms noatm overhead 38 mpu 84 \n"),
            ("bridged-llcsnap", "rtt 100ms atm overhead 32 \n"),
            ("overhead 20 raw", "rtt 100ms raw overhead 0 \n"),
            (
                "egress via-ethernet",
                "split-gso rtt 100ms raw overhead 0 \n",
            ),
        ] {
            let o = opts(args);
            assert!(o.contains(want), "{args}: {o}");
        }
        // A change keeps what it does not name; diffserv3 is never sent.
        assert!(opts("diffserv4;;diffserv3").contains(" diffserv4 "));
        assert!(opts("overhead 128 mpu 256;;mpu 128").contains("noatm overhead 128 mpu 128 "));
        assert!(opts("bandwidth 1mbit;;unlimited").starts_with("bandwidth unlimited "));
    }

    #[test]
    fn json_as_iproute2_6_1() {
        assert_eq!(
            shown("bandwidth 8mbit fwmark 0xff memlimit 1m", "-j "),
            "[{\"kind\":\"cake\",\"handle\":\"1:\",\"root\":true,\"refcnt\":2,\"options\":{\
             \"bandwidth\":1000000,\"diffserv\":\"diffserv3\",\"flowmode\":\"triple-isolate\",\
             \"nat\":false,\"wash\":false,\"ingress\":false,\"ack-filter\":\"disabled\",\
             \"split_gso\":true,\"rtt\":100000,\"raw\":true,\"overhead\":0,\
             \"memlimit\":1048576,\"fwmark\":\"0xff\"}}]\n"
        );
        assert!(!shown("", "-j ").contains("\"atm\":\"noatm\""));
        assert!(shown("atm", "-j ")
            .contains("\"raw\":true,\"atm\":\"atm\",\"overhead\":0,\"fwmark\":\"0\""));
    }

    #[test]
    fn parse_errors_as_iproute2_6_1() {
        // Each checked against tc 6.1 run by hand.
        let usage = super::USAGE;
        assert_eq!(err("help"), (format!("{usage}\n"), 1));
        assert_eq!(err("bogus"), (format!("What is \"bogus\"?\n{usage}\n"), 1));
        let oh = "Illegal \"overhead\", valid range is -64 to 256\\n".to_string();
        for a in [
            "overhead 300",
            "overhead x",
            "overhead 0x10",
            "overhead -65",
        ] {
            assert_eq!(err(a), (oh.clone(), 1), "{a}");
        }
        let mpu = "Illegal \"mpu\", valid range is 0 to 256\\n".to_string();
        for a in ["mpu -1", "mpu 12abc", "mpu 257"] {
            assert_eq!(err(a), (mpu.clone(), 1), "{a}");
        }
        assert_eq!(
            err("lan internet"),
            (
                "Error: duplicate \"internet\": \"lan\" is the second value.\n".into(),
                255
            )
        );
        assert_eq!(
            err("memlimit x").0,
            "Illegal value for \"memlimit\": \"x\"\n"
        );
        assert_eq!(err("fwmark x").0, "Illegal value for \"fwmark\": \"x\"\n");
        assert_eq!(err("bandwidth 100%").0, "Illegal \"bandwidth\"\n");
        assert_eq!(err("rtt x").0, "Illegal \"rtt\"\n");
        assert_eq!(err("overhead").1, 255);
        // Accepted by strtol: a sign and leading blanks.
        assert!(opts("overhead +5").contains("overhead 5 "));
        assert!(opts("overhead -64").contains("overhead -64 "));
    }

    #[test]
    fn statistics_as_iproute2_6_1() {
        let mut n1 = net();
        assert_eq!(run(&mut n1, "qdisc add dev d0 root handle 1: cake").code, 0);
        let s = run(&mut n1, "-s qdisc show dev d0").stdout;
        let want = format!(
            "qdisc cake 1: root refcnt 2 {DEFAULT} Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n memory used: 0b of 15140Kb\n capacity estimate: 0bit\n min/max network layer size:        65535 /       0\n min/max overhead-adjusted size:    65535 /       0\n average network hdr offset:            0\n\n                   Bulk  Best Effort        Voice\n  thresh           0bit         0bit         0bit\n  target            5ms          5ms          5ms\n  interval        100ms        100ms        100ms\n  pk_delay          0us          0us          0us\n  av_delay          0us          0us          0us\n  sp_delay          0us          0us          0us\n  backlog            0b           0b           0b\n  pkts                0            0            0\n  bytes               0            0            0\n  way_inds            0            0            0\n  way_miss            0            0            0\n  way_cols            0            0            0\n  drops               0            0            0\n  marks               0            0            0\n  ack_drop            0            0            0\n  sp_flows            0            0            0\n  bk_flows            0            0            0\n  un_flows            0            0            0\n  max_len             0            0            0\n  quantum          1514         1514         1514\n\n"
        );
        assert_eq!(s, want);
        // diffserv4 heads its columns with four names; 8 tins are numbered.
        let mut net2 = net();
        run(
            &mut net2,
            "qdisc add dev d0 root cake bandwidth 100mbit diffserv4",
        );
        let s = run(&mut net2, "-s qdisc show dev d0").stdout;
        assert!(s.contains("\n                   Bulk  Best Effort        Video        Voice\n  thresh       6250Kbit      100Mbit       50Mbit       25Mbit\n"), "{s}");
        let mut net3 = net();
        run(&mut net3, "qdisc add dev d0 root cake besteffort");
        let s = run(&mut net3, "-s qdisc show dev d0").stdout;
        assert!(
            s.contains("\n                  Tin 0\n  thresh           0bit\n"),
            "{s}"
        );
        let j = run(&mut net3, "-s -j qdisc show dev d0").stdout;
        assert!(j.contains("\"memory_used\":0,\"memory_limit\":15503360,\"capacity_estimate\":0,\"min_network_size\":65535,"), "{j}");
        assert!(
            j.contains("\"tins\":[{\"threshold_rate\":0,\"sent_bytes\":0,"),
            "{j}"
        );
    }

    #[test]
    fn an_idle_cake_has_no_classes() {
        // tc-testing 4365.
        let mut net = net();
        run(&mut net, "qdisc add dev d0 root handle 1: cake");
        assert_eq!(run(&mut net, "class show dev d0").stdout, "");
    }
}
