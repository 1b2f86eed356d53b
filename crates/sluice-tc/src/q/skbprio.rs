//! skbprio syntax (iproute2 tc/q_skbprio.c): `limit NUMBER` (read as a
//! size, as tc does); options are sent only when given. Printed `limit N `.

use crate::args::{Args, CmdResult, Fail};
use crate::out::{Out, To};
use sluice_core::qdisc::skbprio::SkbprioOpts;
use sluice_core::qdisc::QdiscOpts;
use sluice_core::units::parse_size;

const USAGE: &str = "Usage: ... <skbprio> [ limit NUMBER ]";

/// `skbprio_parse_opt`.
pub(super) fn parse(a: &mut Args) -> CmdResult<QdiscOpts> {
    let mut o = SkbprioOpts::default();
    while let Some(w) = a.next() {
        match w {
            "limit" => {
                let v = a.value()?;
                o.limit = Some(parse_size(v).map_err(|_| {
                    Fail::new(1, format!("skbprio: Illegal \"limit\" value:\"{v}\""))
                })?);
            }
            "help" => return Err(Fail::new(1, USAGE)),
            _ => {
                return Err(Fail::new(
                    1,
                    format!("skbprio: unknown parameter \"{w}\"\n{USAGE}"),
                ))
            }
        }
    }
    Ok(QdiscOpts::Skbprio(o))
}

/// `skbprio_print_opt`.
pub(super) fn print(o: &SkbprioOpts, out: &mut Out) {
    if let Some(l) = o.limit {
        out.uint(To::Any, "limit", &format!("limit {l} "), l as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::super::drr::tests::{net, tc};

    #[test]
    fn show_and_change_as_tc_testing() {
        // skbprio.json 283e, c086, 6733, 2958.
        let mut n = net();
        assert_eq!(tc(&mut n, "qdisc add dev d0 handle 1: root skbprio").0, 0);
        assert_eq!(
            tc(&mut n, "qdisc show dev d0").1,
            "qdisc skbprio 1: root refcnt 2 limit 64 \n"
        );
        assert_eq!(
            tc(
                &mut n,
                "qdisc change dev d0 handle 1: root skbprio limit 32"
            )
            .0,
            0
        );
        assert_eq!(
            tc(&mut n, "-j qdisc show dev d0").1,
            "[{\"kind\":\"skbprio\",\"handle\":\"1:\",\"root\":true,\"refcnt\":2,\"options\":{\"limit\":32}}]\n"
        );
        let classes = tc(&mut n, "class show dev d0").1;
        assert_eq!(classes.lines().count(), 64);
        assert!(classes.starts_with("class skbprio 1:1 parent 1: \nclass skbprio 1:2 parent 1: \n"));
        assert!(classes.ends_with("class skbprio 1:40 parent 1: \n"));
        // Queue counters only: no "Sent" part (print_tcstats2_attr without
        // TCA_STATS_BASIC), and no blank line: tc_class.c prints one only
        // after extended statistics, which skbprio does not send.
        assert_eq!(
            tc(&mut n, "-s class show dev d0 classid 1:5").1,
            "class skbprio 1:5 parent 1: \n (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n"
        );
        // The queues are not addressable classes (skbprio_find finds none),
        // and tc has no class syntax for skbprio.
        assert_eq!(
            tc(&mut n, "class change dev d0 classid 1:5"),
            (
                2,
                String::new(),
                "RTNETLINK answers: No such file or directory\n".into()
            )
        );
        assert_eq!(tc(&mut n, "class change dev d0 classid 1:5 skbprio").0, 1);
    }

    #[test]
    fn limit_round_trips_through_its_printout() {
        for l in ["0", "1", "64", "4000000000"] {
            let mut a = net();
            tc(
                &mut a,
                &format!("qdisc add dev d0 root handle 1: skbprio limit {l}"),
            );
            let pa = tc(&mut a, "qdisc show dev d0").1;
            let opts = pa.trim_end().split("refcnt 2 ").nth(1).unwrap().to_string();
            let mut b = net();
            tc(
                &mut b,
                &format!("qdisc add dev d0 root handle 1: skbprio {opts}"),
            );
            assert_eq!(tc(&mut b, "qdisc show dev d0").1, pa);
            assert_eq!(pa, format!("qdisc skbprio 1: root refcnt 2 limit {l} \n"));
        }
    }

    #[test]
    fn parse_errors_as_iproute2_6_1() {
        let mut n = net();
        for (args, code, err) in [
            (
                "limit x",
                1,
                "skbprio: Illegal \"limit\" value:\"x\"\n".to_string(),
            ),
            (
                "foo",
                1,
                format!("skbprio: unknown parameter \"foo\"\n{}\n", super::USAGE),
            ),
            ("help", 1, format!("{}\n", super::USAGE)),
            (
                "limit",
                255,
                "Command line is not complete. Try option \"help\"\n".into(),
            ),
        ] {
            let r = tc(&mut n, &format!("qdisc add dev d0 root skbprio {args}"));
            assert_eq!((r.0, r.2), (code, err), "skbprio {args}");
        }
    }
}
