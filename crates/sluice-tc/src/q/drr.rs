//! drr syntax (iproute2 tc/q_drr.c): the qdisc takes no options; a class
//! takes `quantum SIZE`. tc always sends the class's option nest (empty
//! without `quantum`), so the kernel keeps or defaults the quantum.

use crate::args::{Args, CmdResult, Fail};
use crate::out::{Out, To};
use sluice_core::qdisc::drr::{DrrClassOpts, DrrClassXstats, DrrOpts};
use sluice_core::qdisc::{ClassOpts, QdiscOpts};
use sluice_core::units::{fmt_size, parse_size};

const USAGE: &str = "Usage: ... drr";
const CLASS_USAGE: &str = "Usage: ... drr quantum SIZE";

/// `drr_parse_opt`: only `help`.
pub(super) fn parse(a: &mut Args) -> CmdResult<QdiscOpts> {
    if let Some(w) = a.next() {
        return Err(if w == "help" {
            Fail::new(1, USAGE)
        } else {
            Fail::new(1, format!("What is \"{w}\"?\n{USAGE}"))
        });
    }
    Ok(QdiscOpts::Drr(DrrOpts {}))
}

/// `drr_parse_class_opt`.
pub(super) fn parse_class(a: &mut Args) -> CmdResult<ClassOpts> {
    let mut o = DrrClassOpts::default();
    while let Some(w) = a.next() {
        match w {
            "quantum" => {
                let v = a.value()?;
                o.quantum = Some(parse_size(v).map_err(|_| Fail::new(1, "Illegal \"quantum\""))?);
            }
            "help" => return Err(Fail::new(1, CLASS_USAGE)),
            _ => return Err(Fail::new(1, format!("What is \"{w}\"?\n{CLASS_USAGE}"))),
        }
    }
    Ok(ClassOpts::Drr(o))
}

/// `drr_print_opt` (class options).
pub(super) fn print_class(o: &DrrClassOpts, out: &mut Out) {
    if let Some(q) = o.quantum {
        out.uint(
            To::Any,
            "quantum",
            &format!("quantum {} ", fmt_size(q)),
            q as u64,
        );
    }
}

/// `drr_print_xstats`.
pub(super) fn print_xstats(x: &DrrClassXstats, out: &mut Out) {
    out.uint(
        To::Any,
        "deficit",
        &format!(" deficit {} ", fmt_size(x.deficit)),
        x.deficit as u64,
    );
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::net::Net;
    use sluice_core::device::DevKind;
    use sluice_core::qdisc::DevInfo;

    /// A namespace with a dummy device `d0` (MTU 1500), and a runner.
    pub(crate) fn net() -> Net {
        let mut n = Net::new();
        n.add_device(
            DevInfo {
                name: "d0".into(),
                ..DevInfo::default()
            },
            DevKind::Dummy,
        );
        n
    }

    pub(crate) fn tc(net: &mut Net, line: &str) -> (i32, String, String) {
        let w: Vec<String> = line.split_whitespace().map(String::from).collect();
        let (opts, rest) = crate::tc::parse_global(&w).unwrap();
        let o = crate::tc::run(net, &opts, &rest);
        (o.code, o.stdout, o.stderr)
    }

    #[test]
    fn tdc_drr_cases() {
        // tc-testing drr.json 0385 / 3092: a bare drr shows no options and no classes.
        let mut n = net();
        assert_eq!(tc(&mut n, "qdisc add dev d0 handle 1: root drr").0, 0);
        assert_eq!(
            tc(&mut n, "qdisc show dev d0").1,
            "qdisc drr 1: root refcnt 2 \n"
        );
        assert_eq!(tc(&mut n, "class show dev d0").1, "");
    }

    #[test]
    fn classes_print_quantum_and_deficit() {
        let mut n = net();
        tc(&mut n, "qdisc add dev d0 handle 1: root drr");
        assert_eq!(
            tc(&mut n, "class add dev d0 parent 1: classid 1:1 drr").0,
            0
        );
        let r = tc(
            &mut n,
            "class add dev d0 parent 1: classid 1:2 drr quantum 6kb",
        );
        assert_eq!(r.0, 0, "{r:?}");
        // Classes are dumped with parent TC_H_ROOT; quantum as sprint_size,
        // the default psched_mtu = 1500 + 14.
        assert_eq!(
            tc(&mut n, "class show dev d0").1,
            "class drr 1:1 root quantum 1514b \nclass drr 1:2 root quantum 6Kb \n"
        );
        // print_class: the stats, a newline, drr_print_xstats, a newline.
        let s = tc(&mut n, "-s class show dev d0 classid 1:1").1;
        assert_eq!(
            s,
            "class drr 1:1 root quantum 1514b \n Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n deficit 0b \n"
        );
    }

    #[test]
    fn class_options_round_trip_through_their_printout() {
        // sprint_size rounds to Kb within 16 bytes (as iproute2 does), so the
        // printout is what must survive a second pass; exact sizes stay exact.
        for q in ["1514", "6kb", "1030", "100", "1mb", "3000"] {
            let mut a = net();
            tc(&mut a, "qdisc add dev d0 handle 1: root drr");
            tc(
                &mut a,
                &format!("class add dev d0 parent 1: classid 1:1 drr quantum {q}"),
            );
            let pa = tc(&mut a, "class show dev d0").1;
            let opts = pa.trim_end().split("root ").nth(1).unwrap().to_string();
            let mut b = net();
            tc(&mut b, "qdisc add dev d0 handle 1: root drr");
            let r = tc(
                &mut b,
                &format!("class add dev d0 parent 1: classid 1:1 drr {opts}"),
            );
            assert_eq!(r.0, 0, "{r:?}");
            assert_eq!(tc(&mut b, "class show dev d0").1, pa, "quantum {q}");
        }
    }

    #[test]
    fn children_graft_onto_classes() {
        let mut n = net();
        tc(&mut n, "qdisc add dev d0 handle 1: root drr");
        tc(&mut n, "class add dev d0 parent 1: classid 1:1 drr");
        let r = tc(
            &mut n,
            "qdisc add dev d0 parent 1:1 handle 10: pfifo limit 5",
        );
        assert_eq!(r.0, 0, "{r:?}");
        assert_eq!(
            tc(&mut n, "class show dev d0").1,
            "class drr 1:1 root leaf 10: quantum 1514b \n"
        );
        assert_eq!(
            tc(&mut n, "qdisc show dev d0").1,
            "qdisc drr 1: root refcnt 2 \nqdisc pfifo 10: parent 1:1 limit 5p\n"
        );
        // A class a filter points to cannot go; one without can.
        assert_eq!(tc(&mut n, "class del dev d0 classid 1:1").0, 0);
        assert_eq!(
            tc(&mut n, "qdisc show dev d0").1,
            "qdisc drr 1: root refcnt 2 \n"
        );
        assert_eq!(tc(&mut n, "class del dev d0 classid 1:1").0, 2);
        tc(&mut n, "class add dev d0 parent 1: classid 1:2 drr");
        let r = tc(
            &mut n,
            "filter add dev d0 parent 1: protocol ip prio 1 u32 match ip dst 10.0.0.1/32 flowid 1:2",
        );
        assert_eq!(r.0, 0, "{r:?}");
        assert_eq!(
            tc(&mut n, "class del dev d0 classid 1:2"),
            (2, String::new(), "Error: DRR class is in use.\n".into())
        );
    }

    #[test]
    fn errors_as_iproute2_and_the_kernel() {
        let mut n = net();
        assert_eq!(
            tc(&mut n, "qdisc add dev d0 root drr quantum 1"),
            (
                1,
                String::new(),
                "What is \"quantum\"?\nUsage: ... drr\n".into()
            )
        );
        tc(&mut n, "qdisc add dev d0 handle 1: root drr");
        assert_eq!(
            tc(
                &mut n,
                "class add dev d0 parent 1: classid 1:1 drr quantum x"
            )
            .2,
            "Illegal \"quantum\"\n"
        );
        assert_eq!(
            tc(
                &mut n,
                "class add dev d0 parent 1: classid 1:1 drr quantum 0"
            ),
            (
                2,
                String::new(),
                "Error: Specified DRR quantum cannot be zero.\n".into()
            )
        );
        assert_eq!(
            tc(&mut n, "class add dev d0 parent 1: classid 1:1"),
            (
                2,
                String::new(),
                "Error: DRR options are required for this operation.\n".into()
            )
        );
        // tc-testing drr.json 4009: no class may be TC_H_ROOT.
        let r = tc(&mut n, "class add dev d0 parent 1: classid ffff:ffff drr");
        assert_eq!(r.0, 2, "{r:?}");
        assert_eq!(tc(&mut n, "class show dev d0").1, "");
        assert_eq!(
            tc(&mut n, "class add dev d0 parent 1: classid 1:1 drr foo").2,
            "What is \"foo\"?\nUsage: ... drr quantum SIZE\n"
        );
    }
}
