//! etf syntax (iproute2 tc/q_etf.c): `offload`, `deadline_mode`, `delta`
//! and `clockid` by prefix (so `d` is deadline_mode), `skip_sock_check` and
//! `help` exactly; every field is always sent, `clockid` −1 when not
//! given. Printed as `clockid NAME delta N offload on|off deadline_mode
//! on|off skip_sock_check on|off`. Behaviour notes: docs/research/etf.md.

use super::taprio::{clock_name, clockid};
use crate::args::{get_integer, matches, Args, CmdResult, Fail};
use crate::out::{Out, To};
use sluice_core::qdisc::etf::{EtfOpts, DEADLINE_MODE, OFFLOAD, SKIP_SOCK_CHECK};
use sluice_core::qdisc::QdiscOpts;

const USAGE: &str = "Usage: ... etf delta NANOS clockid CLOCKID [offload] [deadline_mode]
CLOCKID must be a valid SYS-V id (i.e. CLOCK_TAI)";

fn duplicate(what: &str) -> Fail {
    Fail::new(1, format!("etf: duplicate \"{what}\" specification"))
}

/// `etf_parse_opt`.
pub(super) fn parse(a: &mut Args) -> CmdResult<QdiscOpts> {
    let mut o = EtfOpts::default();
    while let Some(w) = a.next() {
        let flag = if matches(w, "offload") {
            Some(("offload", OFFLOAD))
        } else if matches(w, "deadline_mode") {
            Some(("deadline_mode", DEADLINE_MODE))
        } else if w == "skip_sock_check" {
            Some(("skip_sock_check", SKIP_SOCK_CHECK))
        } else {
            None
        };
        if let Some((name, bit)) = flag {
            if o.flags & bit != 0 {
                return Err(duplicate(name));
            }
            o.flags |= bit;
        } else if matches(w, "delta") {
            let v = a.value()?;
            if o.delta != 0 {
                return Err(duplicate("delta"));
            }
            o.delta = get_integer(v).ok_or_else(|| {
                Fail::new(1, format!("etf: illegal value for \"delta\": \"{v}\""))
            })?;
        } else if matches(w, "clockid") {
            let v = a.value()?;
            if o.clockid != -1 {
                return Err(duplicate("clockid"));
            }
            o.clockid = clockid(v).ok_or_else(|| {
                Fail::new(
                    1,
                    format!("etf: illegal value for \"clockid\": \"{v}\".\nIt must be a valid SYS-V id (i.e. CLOCK_TAI)"),
                )
            })?;
        } else if w == "help" {
            return Err(Fail::new(1, USAGE));
        } else {
            return Err(Fail::new(
                1,
                format!("etf: unknown parameter \"{w}\"\n{USAGE}"),
            ));
        }
    }
    Ok(QdiscOpts::Etf(o))
}

/// `etf_print_opt`.
pub(super) fn print(o: &EtfOpts, out: &mut Out) {
    let clock = clock_name(Some(o.clockid));
    out.str(To::Any, "clockid", &format!("clockid {clock} "), clock);
    // Signed in the text, unsigned in JSON.
    out.uint(
        To::Any,
        "delta",
        &format!("delta {} ", o.delta),
        o.delta as u32 as u64,
    );
    let on = |bit: u32| if o.flags & bit != 0 { "on" } else { "off" };
    for (key, bit, sep) in [
        ("offload", OFFLOAD, " "),
        ("deadline_mode", DEADLINE_MODE, " "),
        ("skip_sock_check", SKIP_SOCK_CHECK, ""),
    ] {
        out.str(To::Any, key, &format!("{key} {}{sep}", on(bit)), on(bit));
    }
}

#[cfg(test)]
mod tests {
    use super::super::drr::tests::{net, tc};
    use super::*;

    fn parse_str(s: &str) -> CmdResult<EtfOpts> {
        let w: Vec<String> = s.split_whitespace().map(String::from).collect();
        match parse(&mut Args::new(&w))? {
            QdiscOpts::Etf(o) => Ok(o),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn parse_errors_and_requests_as_tc_6_1() {
        // docs/research/etf.md §1.3 and §1.4, observed with iproute2 6.1's tc.
        let fail = |s: &str| {
            let f = parse_str(s).unwrap_err();
            (f.code, f.stderr)
        };
        let clock_err = |w: &str| {
            (
                1,
                format!("etf: illegal value for \"clockid\": \"{w}\".\nIt must be a valid SYS-V id (i.e. CLOCK_TAI)\n"),
            )
        };
        let unknown = |w: &str| (1, format!("etf: unknown parameter \"{w}\"\n{USAGE}\n"));
        for (args, want) in [
            ("help", (1, format!("{USAGE}\n"))),
            ("delta 5 help", (1, format!("{USAGE}\n"))),
            (
                "clockid",
                (
                    255,
                    "Command line is not complete. Try option \"help\"\n".into(),
                ),
            ),
            ("clockid foo", clock_err("foo")),
            ("clockid 11", clock_err("11")),
            ("clockid xxCLOCK_TAI", clock_err("xxCLOCK_TAI")),
            ("clockid CLOCK_TAIX", clock_err("CLOCK_TAIX")),
            (
                "clockid tai clockid tai",
                (1, "etf: duplicate \"clockid\" specification\n".into()),
            ),
            (
                "delta 5 delta 6",
                (1, "etf: duplicate \"delta\" specification\n".into()),
            ),
            (
                "delta 1ms",
                (1, "etf: illegal value for \"delta\": \"1ms\"\n".into()),
            ),
            (
                "delta 2147483648",
                (
                    1,
                    "etf: illegal value for \"delta\": \"2147483648\"\n".into(),
                ),
            ),
            (
                "o off",
                (1, "etf: duplicate \"offload\" specification\n".into()),
            ),
            (
                "skip_sock_check skip_sock_check",
                (
                    1,
                    "etf: duplicate \"skip_sock_check\" specification\n".into(),
                ),
            ),
            ("skip", unknown("skip")),
            ("he", unknown("he")),
            ("clockid tai extra", unknown("extra")),
            ("d 5", unknown("5")),
        ] {
            assert_eq!(fail(args), want, "{args}");
        }
        for (args, want) in [
            ("", (0, -1, 0)),
            ("delta -5 clockid realtime", (-5, 0, 0)),
            ("delta 0x10 clockid boottime offload", (16, 7, 2)),
            ("delta 010 clockid tai", (8, 11, 0)),
            ("delta 0 delta 6 clockid tai", (6, 11, 0)),
            ("o de skip_sock_check clockid CLOCK_MONOTONIC", (0, 1, 7)),
        ] {
            let o = parse_str(args).unwrap();
            assert_eq!((o.delta, o.clockid, o.flags), want, "{args}");
        }
    }

    #[test]
    fn kernel_answers_and_printed_form() {
        let mut n = net();
        for (args, msg) in [
            ("", "Dynamic clockids are not supported"),
            (
                "delta -5 clockid realtime offload",
                "Invalid clockid. CLOCK_TAI must be used",
            ),
            ("delta -5 clockid tai", "Delta must be positive"),
            (
                "offload clockid tai",
                "Specified device does not support ETF offload",
            ),
        ] {
            assert_eq!(
                tc(
                    &mut n,
                    &format!("qdisc add dev d0 root handle 1: etf {args}")
                ),
                (2, String::new(), format!("Error: {msg}.\n")),
                "{args}"
            );
        }
        let add = "qdisc add dev d0 root handle 1: etf delta 300000 clockid CLOCK_TAI deadline_mode skip_sock_check";
        assert_eq!(tc(&mut n, add).0, 0);
        assert_eq!(
            tc(&mut n, "qdisc show dev d0").1,
            "qdisc etf 1: root refcnt 2 clockid TAI delta 300000 offload off deadline_mode on skip_sock_check on\n"
        );
        assert_eq!(
            tc(&mut n, "-j qdisc show dev d0").1,
            "[{\"kind\":\"etf\",\"handle\":\"1:\",\"root\":true,\"refcnt\":2,\"options\":{\"clockid\":\"TAI\",\"delta\":300000,\"offload\":\"off\",\"deadline_mode\":\"on\",\"skip_sock_check\":\"on\"}}]\n"
        );
        assert_eq!(
            tc(
                &mut n,
                "qdisc replace dev d0 root handle 1: etf delta 5 clockid tai"
            )
            .2,
            "Error: Change operation not supported by specified qdisc.\n"
        );
    }
}
