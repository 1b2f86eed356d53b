//! ets syntax (iproute2 tc/q_ets.c): `bands N`, `strict N`, `quanta Q...`,
//! `priomap P...` for the qdisc; `quantum Q` for a band.
//!
//! `quanta` and `priomap` take values until the next keyword. tc counts
//! bands as `quanta + strict` when `bands` is not given, checks that they
//! cover the strict bands and quanta and that the priomap stays within them,
//! and leaves the rest (at most 16 bands, a quantum per DRR band, 16
//! priorities) to the kernel. tc checks duplicates by value, so
//! `bands 0 bands 3` is accepted. It also keeps no bound on the number of
//! quanta; they are sent as given (17 quanta make 17 bands, which the kernel
//! refuses), with the band count truncated to a byte as tc's `__u8` does.
//!
//! Printing follows `ets_print_opt`: `bands N `, `strict N ` when dumped,
//! `quanta Q1 Q2 ... ` and `priomap P1 ... P16 ` (JSON arrays); `-d` adds
//! nothing. A band prints `quantum Q ` unless it is strict.

use super::get_u32;
use crate::args::{incomplete, Args, CmdResult, Fail};
use crate::out::{Out, To, J};
use sluice_core::qdisc::ets::{EtsClassOpts, EtsOpts, TCQ_ETS_MAX_BANDS};
use sluice_core::qdisc::{ClassOpts, QdiscOpts};

const USAGE: &str =
    "Usage: ... ets [bands NUMBER] [strict NUMBER] [quanta Q1 Q2...] [priomap P1 P2...]";
const CLASS_USAGE: &str = "Usage: ... ets [quantum Q1]";
/// `TC_PRIO_MAX`.
const TC_PRIO_MAX: usize = 15;

/// `parse_quantum`.
fn parse_quantum(w: &str) -> CmdResult<u32> {
    match get_u32(w, 10) {
        None => Err(Fail::new(1, "Illegal \"quanta\" element")),
        Some(0) => Err(Fail::new(1, "\"quanta\" must be > 0")),
        Some(q) => Ok(q),
    }
}

/// `parse_nbands`.
fn parse_nbands(w: &str, what: &str) -> CmdResult<u8> {
    let v = get_u32(w, 10).ok_or_else(|| Fail::new(1, format!("Illegal \"{what}\"")))?;
    if v as usize > TCQ_ETS_MAX_BANDS {
        return Err(Fail::new(
            1,
            format!("The number of \"{what}\" must be <= {TCQ_ETS_MAX_BANDS}"),
        ));
    }
    Ok(v as u8)
}

#[derive(PartialEq)]
enum Mode {
    None,
    Quanta,
    Priomap,
}

/// `ets_parse_opt`.
pub(super) fn parse(a: &mut Args) -> CmdResult<QdiscOpts> {
    let (mut nbands, mut nstrict) = (0u8, 0u8);
    let mut quanta: Vec<u32> = Vec::new();
    let mut priomap: Vec<u32> = Vec::new();
    let mut mode = Mode::None;
    while let Some(w) = a.next() {
        match w {
            "bands" => {
                if nbands != 0 {
                    return Err(Fail::new(1, "Duplicate \"bands\""));
                }
                nbands = parse_nbands(a.value()?, "bands")?;
                mode = Mode::None;
            }
            "strict" => {
                if nstrict != 0 {
                    return Err(Fail::new(1, "Duplicate \"strict\""));
                }
                nstrict = parse_nbands(a.value()?, "strict")?;
                mode = Mode::None;
            }
            "quanta" => {
                if !quanta.is_empty() {
                    return Err(Fail::new(1, "Duplicate \"quanta\""));
                }
                quanta.push(parse_quantum(a.value()?)?);
                mode = Mode::Quanta;
            }
            "priomap" => {
                if !priomap.is_empty() {
                    return Err(Fail::new(1, "Duplicate \"priomap\""));
                }
                let v = a.value()?;
                push_prio(&mut priomap, v)?;
                mode = Mode::Priomap;
            }
            "help" => return Err(Fail::new(1, USAGE)),
            _ if mode == Mode::Quanta => quanta.push(parse_quantum(w)?),
            _ if mode == Mode::Priomap => push_prio(&mut priomap, w)?,
            _ => return Err(Fail::new(1, format!("What is \"{w}\"?\n{USAGE}"))),
        }
    }
    if nbands == 0 {
        nbands = (quanta.len() + nstrict as usize) as u8;
    }
    if nbands == 0 {
        return Err(Fail::new(
            1,
            format!("One of \"bands\", \"quanta\" or \"strict\" needs to be specified\n{USAGE}"),
        ));
    }
    if nstrict as usize + quanta.len() > nbands as usize {
        return Err(Fail::new(
            1,
            format!("Not enough total bands to cover all the strict bands and quanta\n{USAGE}"),
        ));
    }
    if priomap.iter().any(|&b| b >= nbands as u32) {
        return Err(Fail::new(1, "\"priomap\" element is out of bounds"));
    }
    Ok(QdiscOpts::Ets(EtsOpts {
        nbands: Some(nbands),
        nstrict: (nstrict != 0).then_some(nstrict),
        quanta: (!quanta.is_empty()).then_some(quanta),
        // tc stores each band in a __u8.
        priomap: (!priomap.is_empty()).then(|| priomap.iter().map(|&b| b as u8).collect()),
    }))
}

fn push_prio(priomap: &mut Vec<u32>, w: &str) -> CmdResult {
    let band = get_u32(w, 10).ok_or_else(|| Fail::new(1, "Illegal \"priomap\" element"))?;
    if priomap.len() > TC_PRIO_MAX {
        return Err(Fail::new(
            1,
            format!("\"priomap\" index cannot be higher than {TC_PRIO_MAX}"),
        ));
    }
    priomap.push(band);
    Ok(())
}

/// `ets_parse_copt`.
pub(super) fn parse_class(a: &mut Args) -> CmdResult<ClassOpts> {
    let mut quantum = 0u32;
    while let Some(w) = a.next() {
        match w {
            "quantum" => {
                if quantum != 0 {
                    return Err(Fail::new(1, "Duplicate \"quantum\""));
                }
                quantum = parse_quantum(a.next().ok_or_else(incomplete)?)?;
            }
            "help" => return Err(Fail::new(1, CLASS_USAGE)),
            _ => return Err(Fail::new(1, format!("What is \"{w}\"?\n{CLASS_USAGE}"))),
        }
    }
    Ok(ClassOpts::Ets(EtsClassOpts {
        quantum: (quantum != 0).then_some(quantum),
    }))
}

/// A JSON array printed in text as `NAME V1 V2 ... ` (`open_json_array`
/// prints the name, each value `" %u"`, `close_json_array` the `" "`).
fn array(out: &mut Out, key: &str, values: &[u64]) {
    let mut text = key.to_string();
    for v in values {
        text.push_str(&format!(" {v}"));
    }
    text.push(' ');
    let j = values.iter().map(|v| J::Num(v.to_string())).collect();
    out.item(To::Any, key, &text, J::Arr(j));
}

/// `ets_print_opt`.
pub(super) fn print(o: &EtsOpts, out: &mut Out) {
    let Some(nbands) = o.nbands else { return };
    out.uint(To::Any, "bands", &format!("bands {nbands} "), nbands as u64);
    if let Some(s) = o.nstrict {
        out.uint(To::Any, "strict", &format!("strict {s} "), s as u64);
    }
    if let Some(q) = &o.quanta {
        let v: Vec<u64> = q.iter().map(|&x| x as u64).collect();
        array(out, "quanta", &v);
    }
    if let Some(p) = &o.priomap {
        let v: Vec<u64> = p.iter().map(|&x| x as u64).collect();
        array(out, "priomap", &v);
    }
}

/// `ets_print_copt`.
pub(super) fn print_class(o: &EtsClassOpts, out: &mut Out) {
    if let Some(q) = o.quantum {
        out.uint(To::Any, "quantum", &format!("quantum {q} "), q as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::super::drr::tests::{net, tc};

    const DEFAULT_MAP: &str = "priomap 3 3 3 3 3 3 3 3 3 3 3 3 3 3 3 3 ";

    #[test]
    fn qdisc_show_text_and_json() {
        let mut n = net();
        let r = tc(
            &mut n,
            "qdisc add dev d0 handle 1: root ets bands 4 strict 1 quanta 1000 500",
        );
        assert_eq!(r.0, 0, "{r:?}");
        let want = "qdisc ets 1: root refcnt 2 bands 4 strict 1 quanta 1000 500 1514 priomap 3 3 3 3 3 3 3 3 3 3 3 3 3 3 3 3 \n";
        assert_eq!(tc(&mut n, "qdisc show dev d0").1, want);
        assert_eq!(tc(&mut n, "-d qdisc show dev d0").1, want);
        assert_eq!(
            tc(&mut n, "-j qdisc show dev d0").1,
            "[{\"kind\":\"ets\",\"handle\":\"1:\",\"root\":true,\"refcnt\":2,\"options\":{\"bands\":4,\"strict\":1,\"quanta\":[1000,500,1514],\"priomap\":[3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3]}}]\n"
        );
        // All strict: no quanta.
        let mut n = net();
        tc(&mut n, "qdisc add dev d0 handle 1: root ets strict 4");
        assert_eq!(
            tc(&mut n, "qdisc show dev d0").1,
            format!("qdisc ets 1: root refcnt 2 bands 4 strict 4 {DEFAULT_MAP}\n")
        );
    }

    #[test]
    fn classes_are_the_bands() {
        // tc-testing ets.json cb8b, 1b4e, f642, 0a5f, 28c6, 6979.
        let mut n = net();
        tc(
            &mut n,
            "qdisc add dev d0 handle 1: root ets strict 1 quanta 4000 3000",
        );
        assert_eq!(
            tc(&mut n, "class show dev d0").1,
            "class ets 1:1 root \nclass ets 1:2 root quantum 4000 \nclass ets 1:3 root quantum 3000 \n"
        );
        assert_eq!(
            tc(&mut n, "class change dev d0 classid 1:2 ets quantum 1500").0,
            0
        );
        assert_eq!(tc(&mut n, "class change dev d0 classid 1:1 ets").0, 0);
        assert_eq!(
            tc(&mut n, "class change dev d0 classid 1:1 ets quantum 1500"),
            (
                2,
                String::new(),
                "Error: Strict bands do not have a configurable quantum.\n".into()
            )
        );
        assert_eq!(
            tc(
                &mut n,
                "class add dev d0 parent 1: classid 1:7 ets quantum 1500"
            ),
            (
                2,
                String::new(),
                "Error: Fine-grained class addition and removal is not supported.\n".into()
            )
        );
        assert_eq!(tc(&mut n, "class change dev d0 classid 1:7 ets").0, 2);
        assert_eq!(tc(&mut n, "class del dev d0 classid 1:2").0, 2);
        assert!(tc(&mut n, "qdisc show dev d0")
            .1
            .contains("bands 3 strict 1 quanta 1500 3000 priomap"));
    }

    #[test]
    fn parse_errors_as_iproute2_6_1() {
        // Captured from iproute2 6.1's tc on Linux 6.18.
        let mut n = net();
        let usage = format!("{}\n", super::USAGE);
        let cases: &[(&str, i32, String)] = &[
            (
                "",
                1,
                format!(
                    "One of \"bands\", \"quanta\" or \"strict\" needs to be specified\n{usage}"
                ),
            ),
            (
                "bands 17",
                1,
                "The number of \"bands\" must be <= 16\n".into(),
            ),
            ("bands x", 1, "Illegal \"bands\"\n".into()),
            ("bands -1", 1, "Illegal \"bands\"\n".into()),
            (
                "quanta",
                255,
                "Command line is not complete. Try option \"help\"\n".into(),
            ),
            (
                "strict",
                255,
                "Command line is not complete. Try option \"help\"\n".into(),
            ),
            ("quanta 0", 1, "\"quanta\" must be > 0\n".into()),
            ("quanta x", 1, "Illegal \"quanta\" element\n".into()),
            (
                "bands 2 quanta 1 2 3",
                1,
                format!("Not enough total bands to cover all the strict bands and quanta\n{usage}"),
            ),
            (
                "bands 2 priomap 0 1 2",
                1,
                "\"priomap\" element is out of bounds\n".into(),
            ),
            (
                "bands 5 priomap 0 0 1 0 1 2 0 1 2 3 0 1 2 3 4 0 1 2",
                1,
                "\"priomap\" index cannot be higher than 15\n".into(),
            ),
            ("foo", 1, format!("What is \"foo\"?\n{usage}")),
            ("help", 1, usage.clone()),
            ("bands 2 bands 3", 1, "Duplicate \"bands\"\n".into()),
            ("quanta 1 quanta 2", 1, "Duplicate \"quanta\"\n".into()),
            ("strict 1 strict 2", 1, "Duplicate \"strict\"\n".into()),
            ("priomap x", 1, "Illegal \"priomap\" element\n".into()),
            // Past tc, refused by the kernel (tc-testing 65b6, 9877).
            (
                "quanta 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17",
                2,
                "Error: sch_ets: Invalid number of bands.\n".into(),
            ),
            (
                "strict 9 quanta 1 2 3 4 5 6 7 8",
                2,
                "Error: sch_ets: Invalid number of bands.\n".into(),
            ),
        ];
        for (args, code, err) in cases {
            let r = tc(&mut n, &format!("qdisc add dev d0 root ets {args}"));
            assert_eq!((r.0, &r.2), (*code, err), "ets {args}");
        }
        // tc checks duplicates by value: a zero `bands` can be given again.
        assert_eq!(
            tc(
                &mut n,
                "qdisc add dev d0 root handle 1: ets bands 0 bands 3"
            )
            .0,
            0
        );
        let class_usage = format!("{}\n", super::CLASS_USAGE);
        for (args, code, err) in [
            ("quantum 0", 1, "\"quanta\" must be > 0\n".to_string()),
            (
                "quantum",
                255,
                "Command line is not complete. Try option \"help\"\n".into(),
            ),
            ("quantum 5 quantum 6", 1, "Duplicate \"quantum\"\n".into()),
            ("foo", 1, format!("What is \"foo\"?\n{class_usage}")),
            ("help", 1, class_usage.clone()),
        ] {
            let r = tc(
                &mut n,
                &format!("class change dev d0 classid 1:1 ets {args}"),
            );
            assert_eq!((r.0, r.2), (code, err), "ets class {args}");
        }
    }
}

#[cfg(test)]
mod roundtrip {
    use super::super::drr::tests::{net, tc};
    use proptest::prelude::*;

    /// The options of the root qdisc as `qdisc show` prints them.
    fn printed(n: &mut crate::net::Net) -> String {
        let line = tc(n, "qdisc show dev d0").1;
        let at = line.find("refcnt 2 ").expect("a root qdisc") + "refcnt 2 ".len();
        line[at..].trim_end().to_string()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
        /// Print an ets, feed the printout back to tc: the same qdisc.
        #[test]
        fn print_then_parse_gives_the_same_ets(
            nbands in 1u8..=16,
            strict_frac in 0u8..=16,
            quanta in prop::collection::vec(1u32..100_000, 0..16),
            map in prop::collection::vec(0u8..16, 0..=16),
        ) {
            let nstrict = strict_frac % (nbands + 1);
            let nq = quanta.len().min((nbands - nstrict) as usize);
            let mut cmd = format!("qdisc add dev d0 root handle 1: ets bands {nbands}");
            if nstrict > 0 {
                cmd += &format!(" strict {nstrict}");
            }
            if nq > 0 {
                cmd += " quanta";
                for q in &quanta[..nq] {
                    cmd += &format!(" {q}");
                }
            }
            if !map.is_empty() {
                cmd += " priomap";
                for b in &map {
                    cmd += &format!(" {}", b % nbands);
                }
            }
            let mut a = net();
            prop_assert_eq!(tc(&mut a, &cmd).0, 0, "{}", cmd);
            let pa = printed(&mut a);
            let mut b = net();
            let again = format!("qdisc add dev d0 root handle 1: ets {pa}");
            prop_assert_eq!(tc(&mut b, &again).0, 0, "{}", again);
            prop_assert_eq!(printed(&mut b), pa);
            let oa = a.dev("d0").unwrap().root.qdisc.dump();
            let ob = b.dev("d0").unwrap().root.qdisc.dump();
            prop_assert_eq!(oa, ob);
        }
    }
}
