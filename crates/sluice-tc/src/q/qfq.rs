//! qfq syntax (iproute2 tc/q_qfq.c): the qdisc takes no options; a class
//! takes `weight NUMBER` and `maxpkt BYTES` (plain decimal numbers, the
//! keywords abbreviable). tc always sends the class's option nest, empty
//! when neither is given, so the kernel applies its defaults.
//!
//! q_qfq.c prints class options with plain `fprintf` (no JSON keys), so
//! under `-j` the text lands verbatim in the JSON stream, and it has no
//! `print_xstats`: `tc -s class show` prints no qfq statistics beyond the
//! generic ones, though the kernel sends them.

use super::get_u32;
use crate::args::{matches, Args, CmdResult, Fail};
use crate::out::Out;
use sluice_core::qdisc::qfq::{QfqClassOpts, QfqOpts};
use sluice_core::qdisc::{ClassOpts, QdiscOpts};

const USAGE: &str = "Usage: ... qfq";
const CLASS_USAGE: &str = "Usage: ... qfq weight NUMBER maxpkt BYTES";

/// `qfq_parse_opt`: any word is an error; `help` (or a prefix) only shows usage.
pub(super) fn parse(a: &mut Args) -> CmdResult<QdiscOpts> {
    if let Some(w) = a.next() {
        return Err(if matches(w, "help") {
            Fail::new(1, USAGE)
        } else {
            Fail::new(1, format!("What is \"{w}\"?\n{USAGE}"))
        });
    }
    Ok(QdiscOpts::Qfq(QfqOpts {}))
}

/// `qfq_parse_class_opt`. Ranges are the kernel's to check.
pub(super) fn parse_class(a: &mut Args) -> CmdResult<ClassOpts> {
    let mut o = QfqClassOpts::default();
    while let Some(w) = a.next() {
        if matches(w, "weight") {
            let v = a.value()?;
            o.weight = Some(get_u32(v, 10).ok_or_else(|| Fail::new(1, "Illegal \"weight\""))?);
        } else if matches(w, "maxpkt") {
            let v = a.value()?;
            o.lmax = Some(get_u32(v, 10).ok_or_else(|| Fail::new(1, "Illegal \"maxpkt\""))?);
        } else if w == "help" {
            return Err(Fail::new(1, CLASS_USAGE));
        } else {
            return Err(Fail::new(1, format!("What is \"{w}\"?\n{CLASS_USAGE}")));
        }
    }
    Ok(ClassOpts::Qfq(o))
}

/// `qfq_print_opt` (class options; the qdisc has none to print).
pub(super) fn print_class(o: &QfqClassOpts, out: &mut Out) {
    if let Some(w) = o.weight {
        out.raw(&format!("weight {w} "));
    }
    if let Some(l) = o.lmax {
        out.raw(&format!("maxpkt {l} "));
    }
}

#[cfg(test)]
mod tests {
    use crate::q::drr::tests::{net, tc};
    use sluice_core::packet::Skb;
    use sluice_core::packet::{Packet, ETH_P_IP};
    use sluice_core::qdisc::{Cx, Dequeue};
    use sluice_core::time::Time;

    #[test]
    fn qdisc_and_classes_print_as_iproute2() {
        let mut n = net();
        assert_eq!(tc(&mut n, "qdisc add dev d0 handle 1: root qfq").0, 0);
        assert_eq!(
            tc(&mut n, "qdisc show dev d0").1,
            "qdisc qfq 1: root refcnt 2 \n"
        );
        assert_eq!(tc(&mut n, "class show dev d0").1, "");
        for c in [
            "class add dev d0 parent 1: classid 1:1 qfq weight 100",
            "class add dev d0 parent 1: classid 1:2 qfq w 3 m 600",
            "class add dev d0 parent 1: classid 1:3 qfq",
        ] {
            let r = tc(&mut n, c);
            assert_eq!(r.0, 0, "{c}: {r:?}");
        }
        // Classes are dumped with parent TC_H_ROOT; the default maxpkt is
        // psched_mtu (1500 + 14), the default weight 1.
        let want = "class qfq 1:1 root weight 100 maxpkt 1514 \n\
                    class qfq 1:2 root weight 3 maxpkt 600 \n\
                    class qfq 1:3 root weight 1 maxpkt 1514 \n";
        assert_eq!(tc(&mut n, "class show dev d0").1, want);
        // q_qfq.c prints with fprintf: the same text under -j.
        assert_eq!(tc(&mut n, "-j class show dev d0").1, want);
        // No print_xstats in q_qfq.c: the generic counters only, and not
        // the newline tc_class.c prints after extended statistics it printed.
        assert_eq!(
            tc(&mut n, "-s class show dev d0 classid 1:2").1,
            "class qfq 1:2 root weight 3 maxpkt 600 \n Sent 0 bytes 0 pkt (dropped 0, overlimits 0 requeues 0) \n backlog 0b 0p requeues 0\n"
        );
        // A child grafted onto a class shows as its leaf.
        let r = tc(
            &mut n,
            "qdisc add dev d0 parent 1:1 handle 10: pfifo limit 5",
        );
        assert_eq!(r.0, 0, "{r:?}");
        assert_eq!(
            tc(&mut n, "class show dev d0 classid 1:1").1,
            "class qfq 1:1 root leaf 10: weight 100 maxpkt 1514 \n"
        );
        // A change without maxpkt goes back to psched_mtu, as in the kernel.
        assert_eq!(
            tc(&mut n, "class change dev d0 classid 1:2 qfq weight 4").0,
            0
        );
        assert_eq!(
            tc(&mut n, "class show dev d0 classid 1:2").1,
            "class qfq 1:2 root weight 4 maxpkt 1514 \n"
        );
        assert_eq!(tc(&mut n, "class del dev d0 classid 1:3").0, 0);
        assert_eq!(tc(&mut n, "qdisc del dev d0 root").0, 0);
        assert_eq!(tc(&mut n, "class show dev d0").1, "");
    }

    #[test]
    fn errors_as_iproute2_and_the_kernel() {
        let mut n = net();
        let fail = |code: i32, err: &str| (code, String::new(), err.to_string());
        assert_eq!(
            tc(&mut n, "qdisc add dev d0 root qfq foo"),
            fail(1, "What is \"foo\"?\nUsage: ... qfq\n")
        );
        assert_eq!(
            tc(&mut n, "qdisc add dev d0 root qfq he"),
            fail(1, "Usage: ... qfq\n")
        );
        tc(&mut n, "qdisc add dev d0 handle 1: root qfq");
        let add = "class add dev d0 parent 1: classid 1:1";
        for (opts, code, err) in [
            ("qfq weight x", 1, "Illegal \"weight\"\n"),
            ("qfq weight 0x10", 1, "Illegal \"weight\"\n"),
            ("qfq maxpkt -1", 1, "Illegal \"maxpkt\"\n"),
            ("qfq maxpkt 4294967296", 1, "Illegal \"maxpkt\"\n"),
            (
                "qfq weight",
                255,
                "Command line is not complete. Try option \"help\"\n",
            ),
            ("qfq help", 1, "Usage: ... qfq weight NUMBER maxpkt BYTES\n"),
            (
                "qfq hel",
                1,
                "What is \"hel\"?\nUsage: ... qfq weight NUMBER maxpkt BYTES\n",
            ),
            ("qfq weight 9999", 2, "Error: integer out of range.\n"),
            ("qfq weight 0", 2, "Error: integer out of range.\n"),
            ("qfq maxpkt 128", 2, "Error: integer out of range.\n"),
            ("qfq maxpkt 99999", 2, "Error: integer out of range.\n"),
            ("", 2, "Error: sch_qfq: missing options.\n"),
        ] {
            assert_eq!(
                tc(&mut n, &format!("{add} {opts}")),
                fail(code, err),
                "{opts}"
            );
        }
        assert_eq!(tc(&mut n, "class show dev d0").1, "");
        for m in 1..=64 {
            let c = format!("class add dev d0 parent 1: classid 1:{m:x} qfq weight 1024");
            assert_eq!(tc(&mut n, &c).0, 0);
        }
        assert_eq!(
            tc(&mut n, "class add dev d0 parent 1: classid 1:100 qfq"),
            fail(
                2,
                "Error: sch_qfq: total weight out of range (1 + 65536).\n"
            )
        );
        let r = tc(
            &mut n,
            "filter add dev d0 parent 1: protocol ip prio 1 u32 match ip dst 10.0.0.1/32 flowid 1:2",
        );
        assert_eq!(r.0, 0, "{r:?}");
        assert_eq!(
            tc(&mut n, "class del dev d0 classid 1:2"),
            fail(2, "Error: sch_qfq: QFQ class in use.\n")
        );
        // The MTU check (tc-testing 85ee and ddfa).
        let mut n = net();
        assert_eq!(tc_ip(&mut n, "link set dev d0 mtu 256"), 0);
        tc(&mut n, "qdisc add dev d0 handle 1: root qfq");
        assert_eq!(
            tc(
                &mut n,
                "class add dev d0 parent 1: classid 1:1 qfq weight 100"
            ),
            fail(2, "Error: sch_qfq: MTU size out of bounds for qfq.\n")
        );
        let r = tc(
            &mut n,
            "class add dev d0 parent 1: classid 1:1 qfq maxpkt 512",
        );
        assert_eq!(r.0, 0, "{r:?}");
    }

    fn tc_ip(net: &mut crate::net::Net, line: &str) -> i32 {
        let w: Vec<String> = line.split_whitespace().map(String::from).collect();
        crate::ip::run(net, &w).code
    }

    /// An IPv4/UDP packet to 10.0.0.`dst` of `len` bytes.
    fn udp_to(dst: u8, len: u32, id: u64) -> Packet {
        let mut data = vec![0u8; 28];
        data[0] = 0x45;
        data[9] = 17;
        data[16..20].copy_from_slice(&[10, 0, 0, dst]);
        Packet::from(Skb {
            id,
            ..Packet::new(data, len, ETH_P_IP).into_skb()
        })
    }

    #[test]
    fn u32_filters_classify_and_weights_share_the_link() {
        let mut n = net();
        for c in [
            "qdisc add dev d0 handle 1: root qfq",
            "class add dev d0 parent 1: classid 1:1 qfq weight 1",
            "class add dev d0 parent 1: classid 1:2 qfq weight 3",
            "filter add dev d0 parent 1: protocol ip prio 1 u32 match ip dst 10.0.0.1/32 flowid 1:1",
            "filter add dev d0 parent 1: protocol ip prio 2 u32 match ip dst 10.0.0.2/32 flowid 1:2",
        ] {
            let r = tc(&mut n, c);
            assert_eq!(r.0, 0, "{c}: {r:?}");
        }
        let d = n.dev_mut("d0").unwrap();
        let mut cx = Cx::new(Time(0));
        // 10.0.0.3 matches no filter and names no class: dropped.
        assert!(d.root.enqueue(udp_to(3, 1000, 0), &mut cx).is_err());
        for i in 0..200 {
            d.root.enqueue(udp_to(1, 1000, 2 * i), &mut cx).unwrap();
            d.root.enqueue(udp_to(2, 1000, 2 * i + 1), &mut cx).unwrap();
        }
        // While both are backlogged, 1:2 sends three packets for each of 1:1's.
        let mut to_two = 0;
        for _ in 0..200 {
            let Dequeue::Packet(p) = d.root.dequeue(&mut cx) else {
                panic!()
            };
            to_two += usize::from(p.data[19] == 2);
        }
        assert!((145..=155).contains(&to_two), "{to_two}");
        let s = tc(&mut n, "-s class show dev d0 classid 1:1").1;
        // Bytes and packets count at enqueue, the backlog is the child's.
        // 1:1 sent 200 - to_two of its 200: to_two are left.
        let left = to_two;
        assert_eq!(
            s,
            format!(
                "class qfq 1:1 root weight 1 maxpkt 1514 \n Sent 200000 bytes 200 pkt (dropped 0, overlimits 0 requeues 0) \n backlog {}b {}p requeues 0\n",
                left * 1000,
                left
            )
        );
        let q = tc(&mut n, "-s qdisc show dev d0").1;
        assert!(q.contains("(dropped 1, "), "{q}");
    }
}
