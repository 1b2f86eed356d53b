//! gate syntax (iproute2 6.1 tc/m_gate.c; notes in docs/research/gate.md):
//! `gate [index N] [priority P] [base-time T] [cycle-time T]
//! [cycle-time-ext T] [clockid C] [flags F] [sched-entry open|close
//! INTERVAL [IPV [MAXOCTETS]]]... [CONTROL]`, options in any order, each a
//! prefix (`c` is `cycle-time`), the control action last (`pipe` when none).
//! Times are nanoseconds unless a unit says otherwise; an entry's interval
//! is a number first, a time second; its IPV and MAXOCTETS are taken only
//! when they read as such. tc sends only the values that differ from the
//! defaults, and always an entry list.
//!
//! Printed as m_gate.c prints it: no kind name, then priority, clock and
//! flags, the three times, the schedule one entry a line, the control.

use super::{
    get_u32, next_arg, parse_action_control_dflt, print_action_control, soft, verdict, PrintCx,
};
use crate::args::{get_integer, invarg, matches, Args, CmdResult, Fail};
use crate::out::{Out, To, J};
use sluice_core::act::gate::{GateEntry, GateOpts, CLOCK_TAI};
use sluice_core::act::{ActionDump, ActionOpts, ActionSpec};
use sluice_core::units::{fmt_size, fmt_time_ns, parse_size, parse_time_ns};

const USAGE: &str = "Usage: gate [ priority PRIO-SPEC ] [ base-time BASE-TIME ]
       [ cycle-time CYCLE-TIME ]
       [ cycle-time-ext CYCLE-TIME-EXT ]
       [ clockid CLOCKID ] [flags FLAGS]
       [ sched-entry GATE0 INTERVAL [ INTERNAL-PRIO-VALUE MAX-OCTETS ] ]
       [ sched-entry GATE1 INTERVAL [ INTERNAL-PRIO-VALUE MAX-OCTETS ] ]
       ......
       [ sched-entry GATEn INTERVAL [ INTERNAL-PRIO-VALUE MAX-OCTETS ] ]
       [ CONTROL ]
       GATEn := open | close
       INTERVAL : nanoseconds period of gate slot
       INTERNAL-PRIO-VALUE : internal priority decide which
                             rx queue number direct to.
                             default to be -1 which means wildcard.
       MAX-OCTETS : maximum number of MSDU octets that are
                    permitted to pas the gate during the
                    specified TimeInterval.
                    default to be -1 which means wildcard.
       CONTROL := pipe | drop | continue | pass |
                  goto chain <CHAIN_INDEX>";

const ENTRY_USAGE: &str =
    "Usage: sched-entry <open | close> <interval> [ <interval ipv> <octets max bytes> ]
\"sched-entry\" is incomplete";

/// The clocks by name (`get_clockid`).
const CLOCKS: [(&str, i32); 4] = [
    ("REALTIME", 0),
    ("TAI", CLOCK_TAI),
    ("BOOTTIME", 7),
    ("MONOTONIC", 1),
];

/// `get_s64(.., 10)` then `get_time64`: nanoseconds.
fn time64(v: &str) -> Option<i64> {
    v.parse::<i64>().ok().or_else(|| parse_time_ns(v).ok())
}

/// `get_clockid`: a name, with an optional `CLOCK_` prefix, any case.
fn clockid(v: &str) -> Option<i32> {
    let name = if v.to_ascii_uppercase().contains("CLOCK_") {
        v.get(6..)?
    } else {
        v
    };
    CLOCKS
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, id)| *id)
}

/// `parse_gate_entry`, with the current word at `sched-entry`.
fn entry(a: &mut Args) -> CmdResult<GateEntry> {
    let bad = || soft(ENTRY_USAGE);
    a.next();
    let open = match a.peek().map(str::to_ascii_lowercase).as_deref() {
        Some("open") => true,
        Some("close") => false,
        _ => return Err(bad()),
    };
    a.next();
    let v = a.peek().ok_or_else(bad)?;
    let interval = match get_u32(v, 0) {
        Some(i) => i,
        None => {
            let t = time64(v).ok_or_else(bad)?;
            if t > u32::MAX as i64 {
                return Err(soft("\"interval\" is too large"));
            }
            t as u32
        }
    };
    a.next();
    let (mut ipv, mut max_octets) = (-1, -1);
    if let Some(i) = a.peek().and_then(get_integer) {
        ipv = i;
        a.next();
        if let Some(w) = a.peek() {
            let octets = match get_integer(w) {
                Some(m) => Some(m),
                None => match parse_size(w) {
                    Ok(s) if s > i32::MAX as u32 => return Err(soft("\"maxoctets\" is too large")),
                    // A size of nothing is the wildcard.
                    Ok(0) => Some(-1),
                    Ok(s) => Some(s as i32),
                    Err(_) => None,
                },
            };
            if let Some(m) = octets {
                max_octets = m;
                a.next();
            }
        }
    }
    if !open {
        (ipv, max_octets) = (-1, -1);
    }
    Ok(GateEntry {
        open,
        interval,
        ipv,
        max_octets,
    })
}

/// `parse_gate`, with the current word at `gate`.
pub(crate) fn parse(a: &mut Args) -> CmdResult<ActionSpec> {
    next_arg(a)?;
    let (mut index, mut priority, mut flags) = (0, -1, 0);
    let (mut base, mut cycle, mut ext, mut clock) = (0, 0, 0, None);
    let mut entries = vec![];
    while let Some(w) = a.peek() {
        let w = w.to_string();
        let bad = |v: &str| invarg(&w_name(&w), v);
        if matches(&w, "index") {
            let v = next_arg(a)?;
            index = get_u32(v, 10).ok_or_else(|| bad(v))?;
        } else if matches(&w, "priority") {
            let v = next_arg(a)?;
            priority = get_integer(v).ok_or_else(|| bad(v))?;
        } else if matches(&w, "base-time")
            || matches(&w, "cycle-time")
            || matches(&w, "cycle-time-ext")
        {
            let v = next_arg(a)?;
            let t = time64(v).ok_or_else(|| bad(v))? as u64;
            match w_name(&w).as_str() {
                "base-time" => base = t,
                "cycle-time" => cycle = t,
                _ => ext = t,
            }
        } else if matches(&w, "clockid") {
            let v = next_arg(a)?;
            clock = Some(clockid(v).ok_or_else(|| bad(v))?);
        } else if matches(&w, "flags") {
            let v = next_arg(a)?;
            flags = get_u32(v, 0).ok_or_else(|| bad(v))?;
        } else if matches(&w, "sched-entry") {
            entries.push(entry(a)?);
            continue;
        } else if matches(&w, "help") {
            return Err(Fail::new(255, USAGE));
        } else {
            break;
        }
        a.next();
    }
    let action = verdict(parse_action_control_dflt(a, false, super::TC_ACT_PIPE)?)?;
    if entries.is_empty() && index == 0 {
        return Err(soft("gate: must add at least one entry"));
    }
    let nonzero = |t: u64| (t != 0).then_some(t);
    Ok(ActionSpec {
        index,
        opts: ActionOpts::Gate(GateOpts {
            action,
            priority: (priority != -1).then_some(priority),
            base_time: nonzero(base),
            cycle_time: nonzero(cycle),
            cycle_time_ext: nonzero(ext),
            clockid: clock,
            flags: (flags != 0).then_some(flags),
            entries: Some(entries),
        }),
        cookie: None,
        no_percpu: false,
        offload: 0,
    })
}

/// The option a (prefix) word names, as its error message names it.
fn w_name(w: &str) -> String {
    [
        "index",
        "priority",
        "base-time",
        "cycle-time",
        "cycle-time-ext",
        "clockid",
        "flags",
    ]
    .into_iter()
    .find(|k| matches(w, k))
    .unwrap_or(w)
    .to_string()
}

/// `print_gate`.
pub(crate) fn print(d: &ActionDump, cx: &PrintCx, out: &mut Out) {
    let ActionOpts::Gate(o) = &d.opts else {
        return;
    };
    out.nl();
    match o.priority.unwrap_or(-1) {
        -1 => out.int(To::Any, "priority", "\tpriority wildcard", -1),
        p => out.int(To::Any, "priority", &format!("\tpriority {p:<8}"), p as i64),
    }
    let clock = CLOCKS
        .iter()
        .find(|(_, id)| Some(*id) == o.clockid)
        .map_or("invalid", |(n, _)| n);
    out.str(To::Any, "clockid", &format!("\tclockid {clock}"), clock);
    if let Some(f) = o.flags {
        let f = if f == 0 {
            "0".into()
        } else {
            format!("{f:#x}")
        };
        out.str(To::Any, "flags", &format!("\tflags {f}"), &f);
    }
    out.nl();
    for (key, label, t) in [
        ("base_time", "\tbase-time", o.base_time),
        ("cycle_time", "\tcycle-time", o.cycle_time),
        ("cycle_time_ext", "\tcycle-time-ext", o.cycle_time_ext),
    ] {
        let t = t.unwrap_or(0);
        out.uint(To::Json, key, "", t);
        out.text(&format!("{label} {}", fmt_time_ns(t as i64)));
    }
    if let Some(entries) = &o.entries {
        out.nl();
        out.text("\tschedule:");
        out.nl();
        out.open_arr("schedule");
        for (i, e) in entries.iter().enumerate() {
            out.open("");
            out.uint(To::Any, "number", &format!("\t number {i:4}"), i as u64);
            let state = if e.open { "open" } else { "close" };
            out.str(
                To::Any,
                "gate_state",
                &format!("\tgate-state {state} "),
                state,
            );
            out.uint(To::Json, "interval", "", e.interval as u64);
            out.text(&format!("\tinterval {}", fmt_time_ns(e.interval as i64)));
            let (ipv, octets) = (e.ipv as u32, e.max_octets as u32);
            let json = |v: i32, u: u32| J::Num(if v == -1 { "-1".into() } else { u.to_string() });
            let text = match e.ipv {
                -1 => "\t ipv wildcard".to_string(),
                _ => format!("\t ipv {ipv:<10}"),
            };
            out.item(To::Any, "ipv", &text, json(e.ipv, ipv));
            let text = match e.max_octets {
                -1 => "\t max-octets wildcard".to_string(),
                _ => format!("\t max-octets {}", fmt_size(octets)),
            };
            out.item(To::Any, "max_octets", &text, json(e.max_octets, octets));
            out.nl();
            out.close();
        }
        out.close();
    }
    print_action_control(out, "\t", o.action, "");
    super::print_index_tail(d, cx, "\n\t index ", out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::f::testutil::{ingress, tc};

    #[test]
    fn values_read_as_tc_6_1_reads_them() {
        for (s, want) in [
            ("1s", Some(1_000_000_000)),
            ("20ms", Some(20_000_000)),
            ("5us", Some(5000)),
            ("1.5", Some(1)),
            ("1e3", Some(1000)),
            ("-5", Some(-5)),
            ("9223372036854775807", Some(i64::MAX)),
            ("1h", None),
            ("abc", None),
        ] {
            assert_eq!(time64(s), want, "{s}");
        }
        for (s, want) in [
            ("tai", Some(11)),
            ("CLOCK_TAI", Some(11)),
            ("Clock_Tai", Some(11)),
            ("clock_boottime", Some(7)),
            ("MONOTONIC", Some(1)),
            ("realtime", Some(0)),
            ("11", None),
            ("CLOCK_", None),
            ("xxCLOCK_TAI", None),
        ] {
            assert_eq!(clockid(s), want, "{s}");
        }
    }

    /// Errors as tc 6.1 prints them (docs/research/gate.md §2.2, §2.3).
    #[test]
    fn parse_errors_as_iproute2_6_1() {
        let incomplete = "Command line is not complete. Try option \"help\"\n";
        let tail = |n: usize| {
            format!("bad action parsing\nparse_action: bad value ({n}:gate)!\nIllegal \"action\"\n")
        };
        let entry_err = |n| format!("{ENTRY_USAGE}\n{}", tail(n));
        for (args, stderr, code) in [
            ("", incomplete.to_string(), 255),
            ("help", format!("{USAGE}\n"), 255),
            ("sched-entry open 1 help", format!("{USAGE}\n"), 255),
            ("index", incomplete.into(), 255),
            ("index abc sched-entry open 1", "Error: argument \"abc\" is wrong: index\n".into(), 255),
            ("priority x sched-entry open 1", "Error: argument \"x\" is wrong: priority\n".into(), 255),
            ("base-time 1h sched-entry open 1", "Error: argument \"1h\" is wrong: base-time\n".into(), 255),
            ("c 1h sched-entry open 1", "Error: argument \"1h\" is wrong: cycle-time\n".into(), 255),
            ("cycle-time-e x sched-entry open 1", "Error: argument \"x\" is wrong: cycle-time-ext\n".into(), 255),
            ("clockid 11 sched-entry open 1", "Error: argument \"11\" is wrong: clockid\n".into(), 255),
            ("flags x sched-entry open 1", "Error: argument \"x\" is wrong: flags\n".into(), 255),
            ("sched-entry", entry_err(2), 255),
            ("sched-entry foo 1", entry_err(4), 255),
            ("sched-entry open", entry_err(3), 255),
            ("sched-entry open 1h", entry_err(4), 255),
            ("sched-entry open 5s", format!("\"interval\" is too large\n{}", tail(4)), 255),
            ("sched-entry open 1 2 3g", format!("\"maxoctets\" is too large\n{}", tail(6)), 255),
            ("bogus", format!("gate: must add at least one entry\n{}", tail(2)), 255),
            ("sched-entry open 1 goto", incomplete.into(), 255),
            // Parsed, then refused by the kernel.
            ("sched-entry open 0", "Error: Invalid interval for schedule entry.\nWe have an error talking to the kernel\n".into(), 255),
            ("index 5", "Error: The entry list is empty.\nWe have an error talking to the kernel\n".into(), 255),
        ] {
            let mut n = ingress();
            let o = tc(&mut n, &format!("actions add action gate {args}"));
            assert_eq!((o.stderr.as_str(), o.code), (stderr.as_str(), code), "{args}");
        }
        let mut n = ingress();
        let o = tc(&mut n, "actions add action gate sched-entry open 1 bogus");
        assert!(
            o.stderr.starts_with("Bad action type bogus\n"),
            "{}",
            o.stderr
        );
        // In a filter, a returned failure exits 1.
        let o = tc(
            &mut n,
            "filter add dev DEV parent ffff: protocol all prio 1 matchall action gate sched-entry",
        );
        assert_eq!((o.stderr.as_str(), o.code), (entry_err(2).as_str(), 1));
    }

    /// tc 6.1's print_gate fed the kernel's dumps (§4.2, §4.5).
    #[test]
    fn printed_as_iproute2_6_1_prints_it() {
        let mut n = ingress();
        for c in [
            "actions add action gate priority 1 sched-entry close 100000000ns index 100",
            "actions add action gate priority 3 base-time 1s cycle-time 20ms cycle-time-ext 5us clockid CLOCK_REALTIME flags 0x5 sched-entry open 10ms 2 1500 sched-entry close 10ms index 7 drop",
            "actions add action gate priority 0 clockid monotonic sched-entry open 1 0 1k sched-entry open 1us 7 8000000b sched-entry open 1234567 4 1m sched-entry open 4.29s -1 0b sched-entry close 999999999 sched-entry open 1s -7 -9 index 4294967295",
        ] {
            let o = tc(&mut n, c);
            assert_eq!(o.code, 0, "{c}: {}", o.stderr);
        }
        let o = tc(&mut n, "actions get action gate index 100");
        assert_eq!(
            o.stdout,
            "total acts 0\n\n\taction order 1: \n\
             \tpriority 1       \tclockid TAI\tflags 0\n\
             \tbase-time 0ns\tcycle-time 100ms\tcycle-time-ext 0ns\n\
             \tschedule:\n\
             \t number    0\tgate-state close \tinterval 100ms\t ipv wildcard\t max-octets wildcard\n\
             \tpipe\n\t index 100 ref 1 bind 0\n\tnot_in_hw\n"
        );
        let o = tc(&mut n, "actions get action gate index 4294967295");
        assert!(
            o.stdout.contains(
                "\tpriority 0       \tclockid MONOTONIC\tflags 0\n\
                 \tbase-time 0ns\tcycle-time 6.29s\tcycle-time-ext 0ns\n\
                 \tschedule:\n\
                 \t number    0\tgate-state open \tinterval 1ns\t ipv 0         \t max-octets 1Kb\n\
                 \t number    1\tgate-state open \tinterval 1us\t ipv 7         \t max-octets 8000000b\n\
                 \t number    2\tgate-state open \tinterval 1.23ms\t ipv 4         \t max-octets 1Mb\n\
                 \t number    3\tgate-state open \tinterval 4.29s\t ipv wildcard\t max-octets wildcard\n\
                 \t number    4\tgate-state close \tinterval 1e+03ms\t ipv wildcard\t max-octets wildcard\n\
                 \t number    5\tgate-state open \tinterval 1s\t ipv 4294967289\t max-octets 4096Mb\n\
                 \tpipe\n\t index 4294967295 ref 1 bind 0\n"
            ),
            "{}",
            o.stdout
        );
        let o = tc(&mut n, "-j actions get action gate index 7");
        assert_eq!(
            o.stdout,
            "[{\"total acts\":0},{\"actions\":[{\"order\":1,\"priority\":3,\"clockid\":\"REALTIME\",\"flags\":\"0x5\",\
             \"base_time\":1000000000,\"cycle_time\":20000000,\"cycle_time_ext\":5000,\"schedule\":[\
             {\"number\":0,\"gate_state\":\"open\",\"interval\":10000000,\"ipv\":2,\"max_octets\":1500},\
             {\"number\":1,\"gate_state\":\"close\",\"interval\":10000000,\"ipv\":-1,\"max_octets\":-1}],\
             \"control_action\":{\"type\":\"drop\"},\"index\":7,\"ref\":1,\"bind\":0,\"not_in_hw\":true}]}]\n"
        );
    }
}
