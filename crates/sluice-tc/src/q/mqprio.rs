//! mqprio syntax (iproute2 tc/q_mqprio.c): `num_tc`, `map`, `queues
//! C@O...`, `hw`, and — while `hw` is still non-zero on the line — `mode`,
//! `shaper` and, after `shaper bw_rlimit`, `min_rate`/`max_rate` lists.
//! Keywords are exact words; lists take numbers until one does not read,
//! leaving that word to the loop. Printed as `tc N map ... ` and a
//! `queues:(first:last) ...` line; today's kernels add per-class entries
//! after the options, so tc 6.1 always goes on to the `mode:`/`shaper:`
//! lines. Behaviour notes: docs/research/mqprio.md.

use crate::args::{invarg, matches, Args, CmdResult, Fail};
use crate::out::{Out, To, J};
use sluice_core::qdisc::mqprio::{MqprioOpts, MAX_TC};
use sluice_core::qdisc::QdiscOpts;
use sluice_core::units::{parse_rate, strtoul};

const USAGE: &str = "Usage: ... mqprio\t[num_tc NUMBER] [map P0 P1 ...]
\t\t\t[queues count1@offset1 count2@offset2 ...] [hw 1|0]
\t\t\t[mode dcb|channel]
\t\t\t[shaper bw_rlimit SHAPER_PARAMS]
Where: SHAPER_PARAMS := { min_rate MIN_RATE1 MIN_RATE2 ...|
\t\t\t  max_rate MAX_RATE1 MAX_RATE2 ... }";

/// iproute2's `get_u8`/`get_u16` in base 10: the whole word, at most `max`.
fn get_uint(w: &str, max: u64) -> Option<u64> {
    match strtoul(w, 10) {
        Some((v, "")) if v <= max => Some(v),
        _ => None,
    }
}

/// `C@O` as tc splits it with strtok: empty pieces skipped, a third ignored.
fn count_offset(w: &str) -> Option<(u16, u16)> {
    let mut parts = w.split('@').filter(|p| !p.is_empty());
    let count = get_uint(parts.next()?, u16::MAX as u64)?;
    let offset = get_uint(parts.next()?, u16::MAX as u64)?;
    Some((count as u16, offset as u16))
}

/// Up to 16 words that `read` takes, stopping at the first it does not.
fn list<T>(a: &mut Args, read: impl Fn(&str) -> Option<T>) -> Vec<T> {
    let mut v = vec![];
    while v.len() < MAX_TC {
        match a.peek().and_then(&read) {
            Some(x) => {
                a.next();
                v.push(x);
            }
            None => break,
        }
    }
    v
}

/// `mqprio_parse_opt`.
pub(super) fn parse(a: &mut Args) -> CmdResult<QdiscOpts> {
    let mut o = MqprioOpts::default();
    let mut pairs = 0;
    // tc's mode and shaper, sent once a word other than dcb has been seen
    // (then with the last value, dcb or not), and its two rate arrays,
    // each a later list overwriting from the first slot.
    let (mut mode, mut shaper) = (None::<u16>, None::<u16>);
    let mut rates: [Option<[u64; MAX_TC]>; 2] = [None, None];
    while let Some(w) = a.next() {
        match w {
            "num_tc" => {
                let v = a.value()?;
                o.num_tc = get_uint(v, u8::MAX as u64)
                    .ok_or_else(|| Fail::new(1, "Illegal \"num_tc\""))?
                    as u8;
            }
            "map" => {
                let map = list(a, |w| get_uint(w, u8::MAX as u64).map(|v| v as u8));
                o.prio_tc_map = [0; MAX_TC];
                o.prio_tc_map[..map.len()].copy_from_slice(&map);
            }
            "queues" => {
                for (i, (count, offset)) in list(a, count_offset).into_iter().enumerate() {
                    o.count[i] = count;
                    o.offset[i] = offset;
                    pairs += 1;
                }
            }
            "hw" => {
                let v = a.value()?;
                o.hw = get_uint(v, u8::MAX as u64).ok_or_else(|| Fail::new(1, "Illegal \"hw\""))?
                    as u8;
            }
            "mode" if o.hw != 0 => {
                let v = a.value()?;
                let m = if matches(v, "dcb") {
                    0
                } else if matches(v, "channel") {
                    1
                } else {
                    return Err(Fail::new(1, format!("Illegal mode ({v})")));
                };
                if m != 0 || mode.is_some() {
                    mode = Some(m);
                }
            }
            "shaper" if o.hw != 0 => {
                let v = a.value()?;
                let s = if matches(v, "dcb") {
                    0
                } else if matches(v, "bw_rlimit") {
                    if a.is_empty() {
                        return Err(Fail::new(1, "Incomplete shaper arguments"));
                    }
                    1
                } else {
                    return Err(Fail::new(1, format!("Illegal shaper ({v})")));
                };
                if s != 0 || shaper.is_some() {
                    shaper = Some(s);
                }
            }
            "min_rate" | "max_rate" if shaper == Some(1) => {
                let given = list(a, |w| parse_rate(w).ok());
                if given.len() < o.num_tc as usize && a.is_empty() {
                    return Err(Fail::new(
                        1,
                        format!("Incomplete arguments, {w} values expected"),
                    ));
                }
                let slots = rates[usize::from(w == "max_rate")].get_or_insert([0; MAX_TC]);
                slots[..given.len()].copy_from_slice(&given);
            }
            "help" => return Err(Fail::new(1, USAGE)),
            _ => return Err(invarg("unknown argument", w)),
        }
    }
    if pairs > o.num_tc as usize {
        return Err(Fail::new(
            1,
            format!(
                "queues count/offset pair count {pairs} can not be higher than given num_tc {}",
                o.num_tc
            ),
        ));
    }
    o.mode = mode;
    o.shaper = shaper;
    // tc sends all sixteen slots of a rate list.
    [o.min_rate, o.max_rate] = rates.map(|r| r.map(|r| r.to_vec()));
    Ok(QdiscOpts::Mqprio(o))
}

/// `mqprio_print_opt`, for a dump with attributes after the options (as
/// every kernel since 6.4 sends).
pub(super) fn print(o: &MqprioOpts, out: &mut Out) {
    let num_tc = o.num_tc as usize;
    out.uint(To::Any, "tc", &format!("tc {num_tc} "), num_tc as u64);
    let mut text = String::from("map ");
    for p in o.prio_tc_map {
        text.push_str(&format!("{p} "));
    }
    let map = o
        .prio_tc_map
        .iter()
        .map(|p| J::Num(p.to_string()))
        .collect();
    out.item(To::Any, "map", &text, J::Arr(map));
    let mut text = String::from("\n             queues:");
    let mut queues = vec![];
    for i in 0..num_tc.min(MAX_TC) {
        let first = o.offset[i] as u32;
        let last = (first + o.count[i] as u32).wrapping_sub(1);
        text.push_str(&format!("({first}:{last}) "));
        queues.push(J::Arr(vec![
            J::Num(first.to_string()),
            J::Num(last.to_string()),
        ]));
    }
    out.item(To::Any, "queues", &text, J::Arr(queues));
    match o.mode {
        None => out.str(To::Any, "mode", "\n             mode:dcb", "dcb"),
        Some(1) => out.str(To::Any, "mode", "\n             mode:channel", "channel"),
        Some(_) => {}
    }
    match o.shaper {
        None => out.str(To::Any, "shaper", "\n             shaper:dcb", "dcb"),
        Some(1) => out.str(
            To::Any,
            "shaper",
            "\n             shaper:bw_rlimit",
            "bw_rlimit",
        ),
        Some(_) => {}
    }
    for (key, rates) in [("min_rate", &o.min_rate), ("max_rate", &o.max_rate)] {
        let Some(rates) = rates else { continue };
        let mut text = format!("\t{key}:");
        let mut arr = vec![];
        for i in 0..num_tc {
            let r = rates.get(i).copied().unwrap_or(0);
            text.push_str(&format!("{} ", out.rate(r)));
            arr.push(J::Num(r.to_string()));
        }
        out.item(To::Any, key, &text, J::Arr(arr));
    }
}

#[cfg(test)]
mod tests {
    use super::super::drr::tests::{net, tc};
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn parse_str(s: &str) -> CmdResult<MqprioOpts> {
        let w = words(s);
        match parse(&mut Args::new(&w))? {
            QdiscOpts::Mqprio(o) => Ok(o),
            other => panic!("{other:?}"),
        }
    }

    fn fail(s: &str) -> (i32, String) {
        let f = parse_str(s).unwrap_err();
        (f.code, f.stderr)
    }

    #[test]
    fn parse_errors_as_tc_6_1_prints_them() {
        // Observed with iproute2 6.1's tc (docs/research/mqprio.md §2).
        let unknown = |w: &str| {
            (
                255,
                format!("Error: argument \"{w}\" is wrong: unknown argument\n"),
            )
        };
        for (args, want) in [
            (
                "num_tc",
                (
                    255,
                    "Command line is not complete. Try option \"help\"\n".into(),
                ),
            ),
            ("num_tc 256", (1, "Illegal \"num_tc\"\n".into())),
            ("num_tc -1", (1, "Illegal \"num_tc\"\n".into())),
            ("num_tc 0x3", (1, "Illegal \"num_tc\"\n".into())),
            ("hw 256", (1, "Illegal \"hw\"\n".into())),
            ("mode foo", (1, "Illegal mode (foo)\n".into())),
            ("shaper foo", (1, "Illegal shaper (foo)\n".into())),
            ("shaper b", (1, "Incomplete shaper arguments\n".into())),
            (
                "shaper bw_rlimit min_rate 1mbit",
                (1, "Incomplete arguments, min_rate values expected\n".into()),
            ),
            (
                "shaper bw_rlimit max_rate",
                (1, "Incomplete arguments, max_rate values expected\n".into()),
            ),
            (
                "num_tc 2 queues 1@0 1@1 1@2",
                (
                    1,
                    "queues count/offset pair count 3 can not be higher than given num_tc 2\n"
                        .into(),
                ),
            ),
            ("bogus", unknown("bogus")),
            ("NUM_TC 2", unknown("NUM_TC")),
            ("fp E E", unknown("fp")),
            ("map 0 1 x", unknown("x")),
            ("map 256", unknown("256")),
            (
                "map 0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16",
                unknown("16"),
            ),
            ("queues 4@", unknown("4@")),
            ("queues @4", unknown("@4")),
            ("queues 65536@0", unknown("65536@0")),
            ("hw 0 mode channel", unknown("mode")),
            ("hw 1 hw 0 mode channel", unknown("mode")),
            ("hw 0 shaper dcb", unknown("shaper")),
            ("min_rate 1mbit", unknown("min_rate")),
            ("shaper dcb min_rate 1", unknown("min_rate")),
            ("shaper bw_rlimit min_rate x", unknown("x")),
        ] {
            assert_eq!(fail(args), want, "{args}");
        }
        assert_eq!(fail("help"), (1, format!("{USAGE}\n")));
    }

    #[test]
    fn what_tc_sends() {
        // The decoded requests of docs/research/mqprio.md §1.2.
        let o = parse_str("").unwrap();
        assert_eq!(o, MqprioOpts::default());
        assert_eq!(o.hw, 1);
        let o = parse_str("num_tc 2 map 1 0 queues 3@0 5@3 hw 0").unwrap();
        assert_eq!((o.num_tc, o.hw), (2, 0));
        assert_eq!(o.prio_tc_map[..3], [1, 0, 0]);
        assert_eq!(
            (&o.count[..3], &o.offset[..3]),
            (&[3, 5, 0][..], &[0, 3, 0][..])
        );
        // An explicit dcb is not sent; a stray third piece is ignored.
        let o = parse_str("mode dcb shaper dcb hw 5 queues 4@0@1").unwrap();
        assert_eq!(
            (o.mode, o.shaper, o.hw, o.count[0], o.offset[0]),
            (None, None, 5, 4, 0)
        );
        let o = parse_str(
            "num_tc 2 mode channel shaper bw_rlimit min_rate 1mbit 2Gbit max_rate 1KBps 10 hw 1",
        )
        .unwrap();
        assert_eq!((o.mode, o.shaper), (Some(1), Some(1)));
        assert_eq!(o.min_rate.as_ref().unwrap()[..3], [125_000, 250_000_000, 0]);
        assert_eq!(o.max_rate.as_ref().unwrap()[..3], [1000, 1, 0]);
        assert_eq!(o.min_rate.unwrap().len(), 16);
        // Fewer rates than classes is fine while words follow.
        assert!(parse_str("num_tc 2 shaper bw_rlimit min_rate 1mbit hw 1").is_ok());
    }

    fn text(o: &MqprioOpts) -> String {
        let mut out = Out::new(false, false);
        print(o, &mut out);
        out.finish()
    }

    #[test]
    fn printed_as_tc_6_1_prints_a_current_kernels_dump() {
        // docs/research/mqprio.md §4.2 (B) and (D).
        let o =
            parse_str("num_tc 4 map 2 2 1 0 3 3 3 3 3 3 3 3 3 3 3 3 queues 4@0 2@4 1@6 1@7 hw 0")
                .unwrap();
        assert_eq!(
            text(&o),
            "tc 4 map 2 2 1 0 3 3 3 3 3 3 3 3 3 3 3 3 \n             queues:(0:3) (4:5) (6:6) (7:7) \n             mode:dcb\n             shaper:dcb"
        );
        let mut o = parse_str("num_tc 2 map 0 0 0 0 1 1 1 1 queues 4@0 4@4").unwrap();
        o.mode = Some(1);
        o.shaper = Some(1);
        o.min_rate = Some(vec![125_000, 1_250_000]);
        o.max_rate = Some(vec![125_000_000, 1_250_000_000]);
        assert_eq!(
            text(&o),
            "tc 2 map 0 0 0 0 1 1 1 1 0 0 0 0 0 0 0 0 \n             queues:(0:3) (4:7) \n             mode:channel\n             shaper:bw_rlimit\tmin_rate:1Mbit 10Mbit \tmax_rate:1Gbit 10Gbit "
        );
        let mut out = Out::new(true, false);
        out.open("");
        print(&o, &mut out);
        out.close();
        assert_eq!(
            out.finish().trim_end(),
            r#"[{"tc":2,"map":[0,0,0,0,1,1,1,1,0,0,0,0,0,0,0,0],"queues":[[0,3],[4,7]],"mode":"channel","shaper":"bw_rlimit","min_rate":[125000,1250000],"max_rate":[125000000,1250000000]}]"#
        );
    }

    #[test]
    fn on_a_multi_queue_device_as_tc_testing_and_the_kernel_have_it() {
        let mut n = net();
        n.add_device(
            sluice_core::qdisc::DevInfo {
                name: "m0".into(),
                num_tx_queues: 8,
                ..Default::default()
            },
            sluice_core::device::DevKind::Ether,
        );
        let add = "qdisc add dev m0 root handle 1: mqprio num_tc 8 map 0 1 2 3 4 5 6 7 queues 1@0 1@1 1@2 1@3 1@4 1@5 1@6 1@7 hw 0";
        // tc's default hw 1 needs a driver.
        assert_eq!(
            tc(
                &mut n,
                "qdisc add dev m0 root handle 1: mqprio num_tc 2 map 0 1 queues 4@0 4@4"
            ),
            (
                2,
                String::new(),
                "Error: Device does not support hardware offload.\n".into()
            )
        );
        assert_eq!(tc(&mut n, add).0, 0);
        let show = tc(&mut n, "qdisc show dev m0").1;
        let mut want = String::from(
            "qdisc mqprio 1: root tc 8 map 0 1 2 3 4 5 6 7 0 0 0 0 0 0 0 0 \n             queues:(0:0) (1:1) (2:2) (3:3) (4:4) (5:5) (6:6) (7:7) \n             mode:dcb\n             shaper:dcb\n",
        );
        for q in (1..=8).rev() {
            want.push_str(&format!(
                "qdisc pfifo_fast 0: parent 1:{q} bands 3 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1\n"
            ));
        }
        assert_eq!(show, want);
        let classes = tc(&mut n, "class show dev m0").1;
        assert_eq!(classes.lines().count(), 16);
        assert!(classes.starts_with("class mqprio 1:ffe0 root \n"));
        assert!(classes.contains("class mqprio 1:8 parent 1:ffe7 \n"));
        assert_eq!(
            tc(&mut n, "qdisc change dev m0 root handle 1: mqprio hw 0"),
            (
                2,
                String::new(),
                "Error: Change operation not supported by specified qdisc.\n".into()
            )
        );
        assert_eq!(
            tc(&mut n, "qdisc add dev m0 parent 1:ffe1 handle 10: pfifo"),
            (2, String::new(), "Error: No device queue given.\n".into())
        );
        assert_eq!(
            tc(&mut n, "qdisc add dev m0 parent 1:2 handle 10: pfifo").0,
            0
        );
        assert!(tc(&mut n, "class show dev m0")
            .1
            .contains("class mqprio 1:2 parent 1:ffe1 leaf 10: \n"));
        assert_eq!(tc(&mut n, "qdisc del dev m0 root").0, 0);
        assert!(!tc(&mut n, "qdisc show dev m0").1.contains("mqprio"));
    }
}
