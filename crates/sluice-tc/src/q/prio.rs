//! prio syntax (iproute2 tc/q_prio.c): `bands N`, `priomap P1 P2 ...`,
//! `multiqueue`.
//!
//! tc starts from 3 bands and pfifo_fast's priomap and overwrites the map
//! from its first entry on, as many entries as are given (the rest keep the
//! default). Each entry is checked against the bands known at that point, so
//! `bands` must come before `priomap`; tc accepts `bands` after `priomap` but
//! prints its usage first. The kernel checks the result again (2..=16 bands,
//! every entry below `bands`). `multiqueue` is sent as a nested attribute that
//! today's kernels ignore, so it leaves no trace here.
//!
//! Deviation: the usage tc prints for `priomap ... bands N` before going on
//! is not shown, because option parsing cannot write to stderr on success.

use super::get_u32;
use crate::args::{incomplete, Args, CmdResult, Fail};
use crate::out::{Out, To, J};
use sluice_core::qdisc::prio::PrioOpts;
use sluice_core::qdisc::QdiscOpts;
use sluice_core::units::strtoul;

const USAGE: &str = "Usage: ... prio bands NUMBER priomap P1 P2...[multiqueue]";

/// `TC_PRIO_MAX`: the priomap has `TC_PRIO_MAX + 1` entries.
const TC_PRIO_MAX: usize = 15;

/// iproute2 `get_integer(val, arg, 10)`: a decimal C `int`, sign allowed.
fn get_int10(arg: &str) -> Option<i32> {
    match strtoul(arg, 10) {
        Some((v, "")) => i32::try_from(v as i64).ok(),
        _ => None,
    }
}

/// `prio_parse_opt`.
pub(super) fn parse(a: &mut Args) -> CmdResult<Option<QdiscOpts>> {
    let mut o = PrioOpts::default();
    let mut pmap_mode = false;
    let mut idx = 0usize;
    while let Some(w) = a.next() {
        match w {
            "bands" => {
                // tc prints its usage here and goes on (see the deviation above).
                let v = a.next().ok_or_else(|| {
                    let mut f = incomplete();
                    if pmap_mode {
                        f.stderr = format!("{USAGE}\n{}", f.stderr);
                    }
                    f
                })?;
                o.bands = get_int10(v).ok_or_else(|| Fail::new(1, "Illegal \"bands\""))?;
            }
            "priomap" => {
                if pmap_mode {
                    return Err(Fail::new(1, "Error: duplicate priomap"));
                }
                pmap_mode = true;
            }
            "multiqueue" => {}
            "help" => return Err(Fail::new(1, USAGE)),
            _ => {
                if !pmap_mode {
                    return Err(Fail::new(1, format!("What is \"{w}\"?\n{USAGE}")));
                }
                let band =
                    get_u32(w, 10).ok_or_else(|| Fail::new(1, "Illegal \"priomap\" element"))?;
                // C compares `unsigned band >= int bands` as unsigned.
                if band >= o.bands as u32 {
                    return Err(Fail::new(1, "\"priomap\" element is out of bands"));
                }
                if idx > TC_PRIO_MAX {
                    return Err(Fail::new(
                        1,
                        format!("\"priomap\" index > TC_PRIO_MAX={TC_PRIO_MAX}"),
                    ));
                }
                o.priomap[idx] = band as u8;
                idx += 1;
            }
        }
    }
    Ok(Some(QdiscOpts::Prio(o)))
}

/// `prio_print_opt`. The kernel never dumps `TCA_PRIO_MQ`, so multiqueue is
/// only the JSON `false`.
pub(super) fn print(o: &PrioOpts, out: &mut Out, _details: bool) {
    let bands = o.bands as u32;
    out.uint(To::Any, "bands", &format!("bands {bands} "), bands as u64);
    let mut text = String::from("priomap");
    for b in o.priomap {
        text.push_str(&format!(" {b}"));
    }
    let map = o.priomap.iter().map(|b| J::Num(b.to_string())).collect();
    out.item(To::Any, "priomap", &text, J::Arr(map));
    out.bool(To::Json, "multiqueue", "", false);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn parse_str(s: &str) -> CmdResult<PrioOpts> {
        let w = words(s);
        match parse(&mut Args::new(&w))? {
            Some(QdiscOpts::Prio(o)) => Ok(o),
            other => panic!("{other:?}"),
        }
    }

    fn text(o: &PrioOpts) -> String {
        let mut out = Out::new(false, false);
        print(o, &mut out, false);
        out.finish()
    }

    fn err(s: &str) -> (String, i32) {
        let f = parse_str(s).unwrap_err();
        (f.stderr, f.code)
    }

    #[test]
    fn bare_prio_prints_the_default_map() {
        // Kernel dump of a bare `prio`, as for pfifo_fast (fifo.golden).
        let o = parse_str("").unwrap();
        assert_eq!(text(&o), "bands 3 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1");
    }

    #[test]
    fn bands_and_priomap_round_trip() {
        // tc-testing prio.json 5769 and 1971.
        let o = parse_str("bands 4 priomap 1 1 2 2 3 3 0 0 1 2 3 0 0 0 0 0").unwrap();
        assert_eq!(text(&o), "bands 4 priomap 1 1 2 2 3 3 0 0 1 2 3 0 0 0 0 0");
        let o = parse_str("bands 8 priomap 1 1 2 2 3 3 4 4 5 5 6 6 7 7 0 0").unwrap();
        assert_eq!(text(&o), "bands 8 priomap 1 1 2 2 3 3 4 4 5 5 6 6 7 7 0 0");
        let w = words(&text(&o));
        assert_eq!(parse_str(&w.join(" ")).unwrap(), o);
    }

    #[test]
    fn a_short_priomap_keeps_the_default_tail() {
        let o = parse_str("bands 4 priomap 3 3").unwrap();
        assert_eq!(text(&o), "bands 4 priomap 3 3 2 2 1 2 0 0 1 1 1 1 1 1 1 1");
    }

    #[test]
    fn kernel_checks_bands_not_tc() {
        // help.golden: `prio bands 1` and `bands 17` get past tc.
        assert_eq!(parse_str("bands 1").unwrap().bands, 1);
        assert_eq!(parse_str("bands 17").unwrap().bands, 17);
        assert_eq!(parse_str("bands -1").unwrap().bands, -1);
    }

    #[test]
    fn parse_errors_as_iproute2() {
        // help.golden, "parse errors of qdiscs missing in kernel".
        assert_eq!(err("bands abc"), ("Illegal \"bands\"\n".into(), 1));
        assert_eq!(
            err("priomap 1 2 3"),
            ("\"priomap\" element is out of bands\n".into(), 1)
        );
        assert_eq!(
            err("bands 3 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1 1"),
            ("\"priomap\" index > TC_PRIO_MAX=15\n".into(), 1)
        );
        assert_eq!(err("bogus"), (format!("What is \"bogus\"?\n{USAGE}\n"), 1));
        assert_eq!(err("help"), (format!("{USAGE}\n"), 1));
        assert_eq!(
            err("priomap 1 priomap"),
            ("Error: duplicate priomap\n".into(), 1)
        );
        assert_eq!(
            err("priomap x"),
            ("Illegal \"priomap\" element\n".into(), 1)
        );
        assert_eq!(err("bands").1, 255);
        assert_eq!(
            err("priomap 1 bands"),
            (
                format!("{USAGE}\nCommand line is not complete. Try option \"help\"\n"),
                255
            )
        );
    }

    #[test]
    fn json_as_iproute2() {
        // fifo.golden's pfifo_fast options, which tc prints with prio's printer.
        let mut out = Out::new(true, false);
        out.open("");
        out.open("options");
        print(&PrioOpts::default(), &mut out, false);
        out.close();
        out.close();
        assert_eq!(
            out.finish(),
            "[{\"options\":{\"bands\":3,\"priomap\":[1,2,2,2,1,2,0,0,1,1,1,1,1,1,1,1],\"multiqueue\":false}}]\n"
        );
    }
}
