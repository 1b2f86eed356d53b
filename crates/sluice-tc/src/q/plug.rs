//! plug syntax (iproute2 tc/q_plug.c): `block`, `release`,
//! `release_indefinite`, `limit BYTES`; the last action word wins, and the
//! message (sent only if a word was given) carries the limit given, else 0.
//! The kernel has no dump for plug, so nothing is printed.

use crate::args::{Args, CmdResult, Fail};
use sluice_core::qdisc::plug::{
    PlugMsg, PlugOpts, TCQ_PLUG_BUFFER, TCQ_PLUG_LIMIT, TCQ_PLUG_RELEASE_INDEFINITE,
    TCQ_PLUG_RELEASE_ONE,
};
use sluice_core::qdisc::QdiscOpts;
use sluice_core::units::parse_size;

const USAGE: &str = "Usage: ... plug [block | release | release_indefinite | limit NUMBER]";

/// `plug_parse_opt`.
pub(super) fn parse(a: &mut Args) -> CmdResult<QdiscOpts> {
    let mut m = PlugMsg::default();
    let mut ok = false;
    while let Some(w) = a.next() {
        match w {
            "block" => m.action = TCQ_PLUG_BUFFER,
            "release" => m.action = TCQ_PLUG_RELEASE_ONE,
            "release_indefinite" => m.action = TCQ_PLUG_RELEASE_INDEFINITE,
            "limit" => {
                m.action = TCQ_PLUG_LIMIT;
                let v = a.value()?;
                m.limit = parse_size(v)
                    .map_err(|_| Fail::new(1, format!("Illegal value for \"limit\": \"{v}\"")))?;
            }
            "help" => return Err(Fail::new(1, USAGE)),
            _ => {
                return Err(Fail::new(
                    1,
                    format!("plug: unknown parameter \"{w}\"\n{USAGE}"),
                ))
            }
        }
        ok = true;
    }
    Ok(QdiscOpts::Plug(PlugOpts {
        msg: ok.then_some(m),
    }))
}

#[cfg(test)]
mod tests {
    use super::super::drr::tests::{net, tc};

    #[test]
    fn tdc_plug_cases_and_release_through_tc() {
        let mut n = net();
        for opts in ["", "block", "release", "release_indefinite", "limit 100"] {
            let r = tc(
                &mut n,
                &format!("qdisc add dev d0 handle 1: root plug {opts}"),
            );
            assert_eq!(r.0, 0, "{opts}: {r:?}");
            // plug_print_opt prints nothing: the kernel has no dump.
            assert_eq!(
                tc(&mut n, "qdisc show dev d0").1,
                "qdisc plug 1: root refcnt 2 \n"
            );
            assert_eq!(tc(&mut n, "qdisc del dev d0 root").0, 0);
        }
        tc(&mut n, "qdisc add dev d0 handle 1: root plug");
        assert_eq!(
            tc(&mut n, "qdisc change dev d0 handle 1: root plug limit 1000").0,
            0
        );
        assert_eq!(
            tc(&mut n, "qdisc replace dev d0 handle 1: root plug release").0,
            0
        );
        // A change with no message is refused by plug_change.
        assert_eq!(
            tc(&mut n, "qdisc change dev d0 handle 1: root plug"),
            (
                2,
                String::new(),
                "RTNETLINK answers: Invalid argument\n".into()
            )
        );
    }

    #[test]
    fn parse_errors_as_iproute2_6_1() {
        let mut n = net();
        for (args, code, err) in [
            (
                "foo",
                1,
                format!("plug: unknown parameter \"foo\"\n{}\n", super::USAGE),
            ),
            ("limit x", 1, "Illegal value for \"limit\": \"x\"\n".into()),
            ("help", 1, format!("{}\n", super::USAGE)),
            (
                "limit",
                255,
                "Command line is not complete. Try option \"help\"\n".into(),
            ),
        ] {
            let r = tc(&mut n, &format!("qdisc add dev d0 root plug {args}"));
            assert_eq!((r.0, r.2), (code, err), "plug {args}");
        }
    }
}
