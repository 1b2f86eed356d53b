//! taprio syntax (iproute2 tc/q_taprio.c, 6.1): `num_tc`, `map`, `queues`
//! as mqprio's, `sched-entry S MASK INTERVAL` (the mask in hex), integer
//! nanoseconds for `base-time`, `cycle-time` and `cycle-time-extension`
//! (a value that does not read silently ends the line there), `clockid`
//! by name, `flags`, `txtime-delay`. Keywords are exact words. Printed as
//! `tc N map ...`, a `queues offset O count C ...` line, `clockid NAME`,
//! then the running schedule and the pending one, each entry on its own
//! line. Behaviour notes: docs/research/taprio.md.

use crate::args::{strtol10, Args, CmdResult, Fail};
use crate::out::{Out, To, J};
use sluice_core::qdisc::mqprio::{MqprioOpts, MAX_TC};
use sluice_core::qdisc::taprio::{TaprioEntry, TaprioOpts, TaprioSchedule};
use sluice_core::qdisc::QdiscOpts;
use sluice_core::units::strtoul;

pub(super) const USAGE: &str = "Usage: ... taprio clockid CLOCKID
\t\t[num_tc NUMBER] [map P0 P1 ...] \t\t[queues COUNT@OFFSET COUNT@OFFSET COUNT@OFFSET ...] \t\t[ [sched-entry index cmd gate-mask interval] ... ] \t\t[base-time time] [txtime-delay delay]
CLOCKID must be a valid SYS-V id (i.e. CLOCK_TAI)";

const ENTRY_USAGE: &str = "Usage: ... taprio ... sched-entry <cmd> <gate mask> <interval>";

/// The clocks tc knows by name.
const CLOCKS: [(&str, i32); 4] = [
    ("REALTIME", 0),
    ("TAI", 11),
    ("BOOTTIME", 7),
    ("MONOTONIC", 1),
];

/// iproute2's `get_u8`/`get_u16`/`get_u32` in `base`: the whole word, at most `max`.
fn get_uint(w: &str, base: u32, max: u64) -> Option<u64> {
    match strtoul(w, base) {
        Some((v, "")) if v <= max => Some(v),
        _ => None,
    }
}

/// iproute2's `get_s64(.., 10)`: strtoll over the whole word, refusing
/// what overflows.
fn get_s64(w: &str) -> Option<i64> {
    strtol10(w).and_then(|v| i64::try_from(v).ok())
}

/// `get_clockid`: a name, case aside, with `CLOCK_` dropped from the start
/// when it appears anywhere in the word.
pub(super) fn clockid(w: &str) -> Option<i32> {
    let name = if w.to_ascii_uppercase().contains("CLOCK_") {
        w.get(6..)?
    } else {
        w
    };
    CLOCKS
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|&(_, id)| id)
}

pub(super) fn clock_name(id: Option<i32>) -> &'static str {
    CLOCKS
        .iter()
        .find(|&&(_, c)| Some(c) == id)
        .map_or("invalid", |&(n, _)| n)
}

/// `C@O` as tc splits it with strtok: empty pieces skipped, a third ignored.
fn count_offset(w: &str) -> Option<(u16, u16)> {
    let mut parts = w.split('@').filter(|p| !p.is_empty());
    let count = get_uint(parts.next()?, 10, u16::MAX as u64)?;
    let offset = get_uint(parts.next()?, 10, u16::MAX as u64)?;
    Some((count as u16, offset as u16))
}

/// `taprio_parse_opt`.
pub(super) fn parse(a: &mut Args) -> CmdResult<QdiscOpts> {
    let mut p = MqprioOpts {
        num_tc: 0,
        prio_tc_map: [0; MAX_TC],
        hw: 0,
        ..MqprioOpts::default()
    };
    let mut o = TaprioOpts::default();
    let (mut base, mut cycle, mut ext, mut flags, mut delay) = (0i64, 0i64, 0i64, 0u32, 0u32);
    let usage = |msg: &str| Fail::new(1, msg);
    while let Some(w) = a.next() {
        match w {
            "num_tc" => {
                let v = a.value()?;
                p.num_tc = get_uint(v, 10, u8::MAX as u64)
                    .ok_or_else(|| usage("Illegal \"num_tc\""))? as u8;
            }
            "map" => {
                let mut i = 0;
                while i < MAX_TC {
                    let Some(v) = a.peek().and_then(|w| get_uint(w, 10, u8::MAX as u64)) else {
                        break;
                    };
                    a.next();
                    p.prio_tc_map[i] = v as u8;
                    i += 1;
                }
                p.prio_tc_map[i..].fill(0);
            }
            "queues" => {
                let mut i = 0;
                while i < MAX_TC {
                    let Some((c, off)) = a.peek().and_then(count_offset) else {
                        break;
                    };
                    a.next();
                    p.count[i] = c;
                    p.offset[i] = off;
                    i += 1;
                }
            }
            "sched-entry" => {
                if a.value()? != "S" {
                    return Err(usage(ENTRY_USAGE));
                }
                let gate_mask = get_uint(a.value()?, 16, u32::MAX as u64)
                    .ok_or_else(|| usage(ENTRY_USAGE))? as u32;
                let interval = get_uint(a.value()?, 0, u32::MAX as u64)
                    .ok_or_else(|| usage(ENTRY_USAGE))? as u32;
                o.entries.push(TaprioEntry {
                    cmd: 0,
                    gate_mask,
                    interval,
                });
            }
            "base-time" | "cycle-time" | "cycle-time-extension" => {
                let v = a.value()?;
                let slot = match w {
                    "base-time" => &mut base,
                    "cycle-time" => &mut cycle,
                    _ => &mut ext,
                };
                if w != "base-time" && *slot != 0 {
                    return Err(usage(&format!("taprio: duplicate \"{w}\" specification")));
                }
                match get_s64(v) {
                    Some(t) => *slot = t,
                    // tc stops reading here and sends what it has.
                    None => break,
                }
            }
            "clockid" => {
                let v = a.value()?;
                if o.clockid.is_some() {
                    return Err(usage("taprio: duplicate \"clockid\" specification"));
                }
                o.clockid = Some(clockid(v).ok_or_else(|| {
                    usage(&format!(
                        "taprio: illegal value for \"clockid\": \"{v}\".\nIt must be a valid SYS-V id (i.e. CLOCK_TAI)"
                    ))
                })?);
            }
            "flags" | "txtime-delay" => {
                let v = a.value()?;
                let slot = if w == "flags" { &mut flags } else { &mut delay };
                if *slot != 0 {
                    return Err(usage(&format!("taprio: duplicate \"{w}\" specification")));
                }
                *slot = get_uint(v, 0, u32::MAX as u64).ok_or_else(|| Fail::new(1, ""))? as u32;
            }
            "help" => return Err(usage(USAGE)),
            _ => return Err(usage("Unknown argument")),
        }
    }
    o.flags = (flags != 0).then_some(flags);
    o.txtime_delay = (delay != 0).then_some(delay);
    o.priomap = (p.num_tc > 0).then_some(p);
    o.base_time = (base != 0).then_some(base);
    o.cycle_time = (cycle != 0).then_some(cycle);
    o.cycle_time_extension = (ext != 0).then_some(ext);
    Ok(QdiscOpts::Taprio(o))
}

/// `print_schedule`: the times (0 for a schedule not there), then the
/// entries, each on its own line.
fn print_schedule(s: Option<&TaprioSchedule>, out: &mut Out) {
    let d = TaprioSchedule::default();
    let t = s.unwrap_or(&d);
    for (key, text, v) in [
        ("base_time", "\tbase-time", t.base_time),
        ("cycle_time", " cycle-time", t.cycle_time),
        (
            "cycle_time_extension",
            " cycle-time-extension",
            t.cycle_time_extension,
        ),
    ] {
        out.uint(To::Any, key, &format!("{text} {v}"), v as u64);
    }
    let Some(s) = s else { return };
    out.open_arr("schedule");
    out.nl();
    for (i, e) in s.entries.iter().enumerate() {
        out.open("");
        out.uint(To::Any, "index", &format!("\tindex {i}"), i as u64);
        let cmd = if e.cmd == 0 { "S" } else { "Invalid" };
        out.str(To::Any, "cmd", &format!(" cmd {cmd}"), cmd);
        let mask = if e.gate_mask == 0 {
            "0".to_string()
        } else {
            format!("{:#x}", e.gate_mask)
        };
        out.str(To::Any, "gatemask", &format!(" gatemask {mask}"), &mask);
        out.uint(
            To::Any,
            "interval",
            &format!(" interval {}", e.interval),
            e.interval as u64,
        );
        out.close();
        out.nl();
    }
    out.close();
}

/// `taprio_print_opt`.
pub(super) fn print(o: &TaprioOpts, out: &mut Out) {
    let Some(p) = &o.priomap else { return };
    out.uint(To::Any, "tc", &format!("tc {} ", p.num_tc), p.num_tc as u64);
    let mut text = String::from("map");
    for m in p.prio_tc_map {
        text.push_str(&format!(" {m}"));
    }
    let map = p
        .prio_tc_map
        .iter()
        .map(|m| J::Num(m.to_string()))
        .collect();
    out.item(To::Any, "map", &text, J::Arr(map));
    out.nl();
    out.open_arr("queues");
    out.text("queues");
    for i in 0..(p.num_tc as usize).min(MAX_TC) {
        out.open("");
        let (off, count) = (p.offset[i], p.count[i]);
        out.uint(To::Any, "offset", &format!(" offset {off}"), off as u64);
        out.uint(To::Any, "count", &format!(" count {count}"), count as u64);
        out.close();
    }
    out.close();
    out.nl();
    let clock = clock_name(o.clockid);
    out.str(To::Any, "clockid", &format!("clockid {clock}"), clock);
    if let Some(f) = o.flags {
        let s = format!("{f:#x}");
        out.str(To::Any, "flags", &format!(" flags {s}"), &s);
    }
    if let Some(d) = o.txtime_delay {
        out.uint(
            To::Any,
            "txtime_delay",
            &format!(" txtime delay {}", d as i32),
            d as u64,
        );
    }
    print_schedule(o.oper.as_ref(), out);
    if let Some(admin) = &o.admin {
        // An anonymous object inside the options: invalid JSON, as 6.1's.
        out.open("");
        print_schedule(Some(admin), out);
        out.close();
    }
}

#[cfg(test)]
mod tests {
    use super::super::drr::tests::{net, tc};
    use super::*;
    use crate::net::Net;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn parse_str(s: &str) -> CmdResult<TaprioOpts> {
        let w = words(s);
        match parse(&mut Args::new(&w))? {
            QdiscOpts::Taprio(o) => Ok(o),
            other => panic!("{other:?}"),
        }
    }

    fn fail(s: &str) -> (i32, String) {
        let f = parse_str(s).unwrap_err();
        (f.code, f.stderr)
    }

    #[test]
    fn parse_errors_as_tc_6_1_prints_them() {
        // Observed with iproute2 6.1's tc (docs/research/taprio.md §2).
        let entry = (1, format!("{ENTRY_USAGE}\n"));
        let unknown = (1, "Unknown argument\n".to_string());
        let incomplete = (
            255,
            "Command line is not complete. Try option \"help\"\n".to_string(),
        );
        for (args, want) in [
            ("num_tc", incomplete.clone()),
            ("sched-entry S 01", incomplete.clone()),
            ("base-time", incomplete.clone()),
            ("num_tc 256", (1, "Illegal \"num_tc\"\n".into())),
            ("num_tc 0x3", (1, "Illegal \"num_tc\"\n".into())),
            ("num_tc 3 map 1 2 x", unknown.clone()),
            ("num_tc 3 queues 1@x", unknown.clone()),
            ("sched-entry s 01 300", entry.clone()),
            ("sched-entry H 01 300", entry.clone()),
            ("sched-entry S zz 300", entry.clone()),
            ("sched-entry S 100000000 300", entry.clone()),
            ("sched-entry S 01 -1", entry.clone()),
            ("sched-entry S 01 1ms", entry.clone()),
            (
                "cycle-time 1 cycle-time 2",
                (1, "taprio: duplicate \"cycle-time\" specification\n".into()),
            ),
            (
                "clockid tai clockid tai",
                (1, "taprio: duplicate \"clockid\" specification\n".into()),
            ),
            (
                "clockid xxCLOCK_TAI",
                (
                    1,
                    "taprio: illegal value for \"clockid\": \"xxCLOCK_TAI\".\nIt must be a valid SYS-V id (i.e. CLOCK_TAI)\n"
                        .into(),
                ),
            ),
            ("clockid 11", (1, "taprio: illegal value for \"clockid\": \"11\".\nIt must be a valid SYS-V id (i.e. CLOCK_TAI)\n".into())),
            ("flags 1 flags 2", (1, "taprio: duplicate \"flags\" specification\n".into())),
            ("flags x", (1, String::new())),
            ("txtime-delay x", (1, String::new())),
            ("max-sdu 1 2 3", unknown.clone()),
            ("cycle-time-ext 5", unknown.clone()),
            ("sched-entry S 01 300000 extra", unknown.clone()),
        ] {
            assert_eq!(fail(args), want, "{args}");
        }
        assert_eq!(fail("help"), (1, format!("{USAGE}\n")));
    }

    #[test]
    fn what_tc_sends() {
        // docs/research/taprio.md §1.2's decoded requests.
        let o = parse_str("num_tc 3 map 2 2 1 0 2 2 2 2 2 2 2 2 2 2 2 2 queues 1@0 1@1 2@2 base-time 1000000000 sched-entry S 01 300000 sched-entry S 02 300000 sched-entry S 04 400000 clockid CLOCK_TAI").unwrap();
        let p = o.priomap.as_ref().unwrap();
        assert_eq!(
            (p.num_tc, &p.count[..3], &p.offset[..3]),
            (3, &[1, 1, 2][..], &[0, 1, 2][..])
        );
        assert_eq!(
            (o.clockid, o.base_time, o.cycle_time),
            (Some(11), Some(1_000_000_000), None)
        );
        assert_eq!(o.entries.len(), 3);
        assert_eq!(
            (o.entries[2].gate_mask, o.entries[2].interval),
            (4, 400_000)
        );
        let o = parse_str("sched-entry S 0x1 0x10 sched-entry S ff 010 sched-entry S FFFFFFFF 4294967295 sched-entry S -0 +5 clockid boottime").unwrap();
        let e: Vec<(u32, u32)> = o
            .entries
            .iter()
            .map(|e| (e.gate_mask, e.interval))
            .collect();
        assert_eq!(e, [(1, 16), (0xff, 8), (u32::MAX, u32::MAX), (0, 5)]);
        assert_eq!((o.clockid, o.priomap.is_none()), (Some(7), true));
        let o = parse_str("num_tc 3 map 1 2 map 2 queues 1@0 2@1 queues 3@3 clockid tai num_tc 5")
            .unwrap();
        let p = o.priomap.unwrap();
        assert_eq!((p.num_tc, p.prio_tc_map[0], p.prio_tc_map[1]), (5, 2, 0));
        assert_eq!((&p.count[..2], &p.offset[..2]), (&[3, 2][..], &[3, 1][..]));
        let o = parse_str("cycle-time 0 cycle-time 2 base-time 3 base-time 4 flags 0 flags 2 txtime-delay 0 txtime-delay 7").unwrap();
        assert_eq!(
            (o.base_time, o.cycle_time, o.flags, o.txtime_delay),
            (Some(4), Some(2), Some(2), Some(7))
        );
        // A time that does not read ends the line: the clock and entry after it are lost.
        let o = parse_str("num_tc 1 map 0 queues 1@0 base-time x clockid tai sched-entry S 1 5")
            .unwrap();
        assert_eq!(
            (o.clockid, o.entries.len(), o.priomap.is_some()),
            (None, 0, true)
        );
        assert_eq!(
            parse_str("clockid Clock_Monotonic").unwrap().clockid,
            Some(1)
        );
    }

    fn show(n: &mut Net, args: &str) -> String {
        tc(n, args).1
    }

    fn eight_queues() -> Net {
        let mut n = net();
        n.add_device(
            sluice_core::qdisc::DevInfo {
                name: "m0".into(),
                num_tx_queues: 8,
                txqueuelen: 1000,
                ..Default::default()
            },
            sluice_core::device::DevKind::Ether,
        );
        n
    }

    #[test]
    fn kernel_answers_and_the_pending_then_running_schedule() {
        let mut n = eight_queues();
        let base = "qdisc replace dev m0 parent root handle 100 taprio num_tc 3 map 2 2 1 0 2 2 2 2 2 2 2 2 2 2 2 2 queues 1@0 1@1 2@2";
        let entries = "sched-entry S 01 300000 sched-entry S 02 300000 sched-entry S 04 400000";
        for (args, msg) in [
            (format!("{base} {entries}"), "Specifying a 'clockid' is mandatory"),
            (format!("{base} clockid TAI"), "There should be at least one entry in the schedule"),
            (format!("{base} {entries} clockid TAI flags 0x2"), "The 'clockid' cannot be specified for full offload"),
            (format!("{base} {entries} clockid TAI txtime-delay 5"), "sch_taprio: txtime-delay can only be set when txtime-assist mode is enabled"),
            (format!("{base} {entries} clockid TAI cycle-time 4294967296"), "integer out of range"),
            (format!("{base} {entries} clockid TAI flags 0x4"), "reserved bit set"),
            (format!("{base} {entries} clockid TAI flags 0x3"), "TXTIME_ASSIST and FULL_OFFLOAD are mutually exclusive"),
            ("qdisc replace dev m0 parent root handle 100 taprio num_tc 3 map 2 2 1 0 2 2 2 2 2 2 2 2 2 2 2 2 queues 1@0 1@0 1@0 sched-entry S 01 300000 clockid TAI".into(), "sch_mqprio_lib: TC 0 queues 1@0 overlap with TC 1 queues 1@0"),
            (format!("{base} sched-entry S 01 40000 clockid TAI"), "Invalid interval for schedule entry"),
            ("qdisc replace dev m0 parent root handle 100 taprio sched-entry S 01 300000 clockid TAI".into(), "'mqprio' configuration is necessary"),
        ] {
            assert_eq!(tc(&mut n, &args), (2, String::new(), format!("Error: {msg}.\n")), "{args}");
        }
        // Accepted at t = 0.5 s with base-time 1 s: pending until then.
        n.now = sluice_core::time::Time(500_000_000);
        let r = tc(
            &mut n,
            &format!("{base} base-time 1000000000 {entries} clockid CLOCK_TAI"),
        );
        assert_eq!(
            r,
            (
                0,
                String::new(),
                "Warning: sch_taprio: Size table not specified, frame length estimations may be inaccurate.\n".into()
            )
        );
        let body = "qdisc taprio 100: root refcnt 9 tc 3 map 2 2 1 0 2 2 2 2 2 2 2 2 2 2 2 2\nqueues offset 0 count 1 offset 1 count 1 offset 2 count 2\nclockid TAI";
        let list = "\n\tindex 0 cmd S gatemask 0x1 interval 300000\n\tindex 1 cmd S gatemask 0x2 interval 300000\n\tindex 2 cmd S gatemask 0x4 interval 400000\n\n";
        let times = "\tbase-time 1000000000 cycle-time 1000000 cycle-time-extension 0";
        let root = |n: &mut Net| show(n, "qdisc show dev m0 root");
        assert_eq!(
            root(&mut n),
            format!("{body}\tbase-time 0 cycle-time 0 cycle-time-extension 0{times}{list}")
        );
        n.now = sluice_core::time::Time(1_000_000_000);
        assert_eq!(root(&mut n), format!("{body}{times}{list}"));
        // Changes must keep the flags and the clock, and bring a schedule.
        assert_eq!(
            tc(
                &mut n,
                &format!(
                    "qdisc replace dev m0 parent root handle 100 taprio {entries} clockid REALTIME"
                )
            )
            .2,
            "Error: Changing the 'clockid' of a running schedule is not supported.\n"
        );
        assert_eq!(
            tc(&mut n, &format!("{base} {entries} clockid TAI flags 1")).2,
            "Error: sch_taprio: Changing 'flags' of a running schedule is not supported.\n"
        );
        assert_eq!(
            tc(&mut n, "qdisc replace dev m0 parent root handle 100 taprio num_tc 2 map 1 0 queues 1@0 1@1 sched-entry S 01 300000 clockid TAI").2,
            "Error: Changing the traffic mapping of a running schedule is not supported.\n"
        );
        let classes = show(&mut n, "class show dev m0");
        assert_eq!(classes.lines().count(), 8);
        assert!(
            classes.starts_with("class taprio 100:1 root \n"),
            "{classes}"
        );
        assert_eq!(
            tc(&mut n, "qdisc add dev m0 parent 100:7 taprio num_tc 1 map 0 queues 1@0 sched-entry S 01 300000 clockid TAI").2,
            "Error: sch_taprio: Can only be attached as root qdisc.\n"
        );
        assert!(
            show(&mut n, "qdisc show dev m0").contains("qdisc pfifo 0: parent 100:8 limit 1000p\n")
        );
    }

    #[test]
    fn json_as_tc_6_1_writes_it() {
        let mut n = eight_queues();
        n.now = sluice_core::time::Time(5_000_000_000);
        let add = "qdisc replace dev m0 handle 8001: parent root stab overhead 24 taprio num_tc 8 map 0 1 2 3 4 5 6 7 queues 1@0 1@1 1@2 1@3 1@4 1@5 1@6 1@7 base-time 0 sched-entry S ff 20000000 clockid CLOCK_TAI";
        assert_eq!(tc(&mut n, add), (0, String::new(), String::new()));
        n.now = sluice_core::time::Time(5_020_000_000);
        assert_eq!(
            show(&mut n, "-j qdisc show dev m0 root"),
            "[{\"kind\":\"taprio\",\"handle\":\"8001:\",\"root\":true,\"refcnt\":9,\"options\":{\"tc\":8,\"map\":[0,1,2,3,4,5,6,7,0,0,0,0,0,0,0,0],\"queues\":[{\"offset\":0,\"count\":1},{\"offset\":1,\"count\":1},{\"offset\":2,\"count\":1},{\"offset\":3,\"count\":1},{\"offset\":4,\"count\":1},{\"offset\":5,\"count\":1},{\"offset\":6,\"count\":1},{\"offset\":7,\"count\":1}],\"clockid\":\"TAI\",\"base_time\":0,\"cycle_time\":20000000,\"cycle_time_extension\":0,\"schedule\":[{\"index\":0,\"cmd\":\"S\",\"gatemask\":\"0xff\",\"interval\":20000000}]}}]\n"
        );
    }
}
