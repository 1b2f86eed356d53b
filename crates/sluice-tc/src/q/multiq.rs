//! multiq syntax (iproute2 tc/q_multiq.c): no options but `help`; printed
//! `bands N/MAX `. The qdisc is sluice_core::qdisc::multiq; on a device with
//! one transmit queue the kernel's answer is "Operation not supported".

use crate::args::{Args, CmdResult, Fail};
use crate::out::{Out, To};
use sluice_core::qdisc::multiq::MultiqOpts;
use sluice_core::qdisc::QdiscOpts;

const USAGE: &str = "Usage: ... multiq [help]";

/// `multiq_parse_opt`.
pub(super) fn parse(a: &mut Args) -> CmdResult<QdiscOpts> {
    if let Some(w) = a.next() {
        return Err(if w == "help" {
            Fail::new(1, USAGE)
        } else {
            Fail::new(1, format!("What is \"{w}\"?\n{USAGE}"))
        });
    }
    Ok(QdiscOpts::Multiq(MultiqOpts::default()))
}

/// `multiq_print_opt`.
pub(super) fn print(o: &MultiqOpts, out: &mut Out) {
    // A plain fprintf in iproute2: text only, nothing in JSON.
    out.item(
        To::Text,
        "",
        &format!("bands {}/{} ", o.bands, o.max_bands),
        crate::out::J::Null,
    );
}

#[cfg(test)]
mod tests {
    use super::super::drr::tests::{net, tc};

    #[test]
    fn single_queue_devices_refuse_it_as_linux_does() {
        // tc-testing multiq.json 1329 (a single-queue device).
        let mut n = net();
        assert_eq!(
            tc(&mut n, "qdisc add dev d0 root handle 1: multiq"),
            (
                2,
                String::new(),
                "RTNETLINK answers: Operation not supported\n".into()
            )
        );
        assert!(!tc(&mut n, "qdisc show dev d0").1.contains("multiq"));
        // Parse errors, as iproute2 6.1's tc prints them.
        assert_eq!(
            tc(&mut n, "qdisc add dev d0 root multiq foo"),
            (
                1,
                String::new(),
                format!("What is \"foo\"?\n{}\n", super::USAGE)
            )
        );
        assert_eq!(
            tc(&mut n, "qdisc add dev d0 root multiq help"),
            (1, String::new(), format!("{}\n", super::USAGE))
        );
    }

    #[test]
    fn a_band_per_queue_of_a_multi_queue_device() {
        let mut n = net();
        n.add_device(
            sluice_core::qdisc::DevInfo {
                name: "m0".into(),
                num_tx_queues: 4,
                ..Default::default()
            },
            sluice_core::device::DevKind::Ether,
        );
        assert_eq!(tc(&mut n, "qdisc add dev m0 root handle 1: multiq").0, 0);
        // tc-testing multiq.json 20ba / 4301's patterns, with a root held by
        // the device and each of its four queues.
        assert_eq!(
            tc(&mut n, "qdisc show dev m0").1,
            "qdisc multiq 1: root refcnt 5 bands 4/4 \n"
        );
        let classes = tc(&mut n, "class show dev m0").1;
        assert_eq!(
            classes,
            (1..=4)
                .map(|i| format!("class multiq 1:{i} parent 1: \n"))
                .collect::<String>()
        );
        assert_eq!(
            tc(
                &mut n,
                "qdisc add dev m0 parent 1:2 handle 20: pfifo limit 5"
            )
            .0,
            0
        );
        assert!(tc(&mut n, "class show dev m0")
            .1
            .contains("class multiq 1:2 parent 1: leaf 20: \n"));
        assert_eq!(
            tc(&mut n, "qdisc add dev m0 parent 1:5 pfifo").2,
            "Error: Specified class not found.\n"
        );
        assert_eq!(
            tc(
                &mut n,
                "class add dev m0 parent 1: classid 1:9 htb rate 1mbit"
            )
            .2,
            "RTNETLINK answers: Operation not supported\n"
        );
    }

    #[test]
    fn prints_bands_over_max_bands() {
        let mut out = crate::out::Out::new(false, false);
        super::print(
            &sluice_core::qdisc::multiq::MultiqOpts {
                bands: 8,
                max_bands: 8,
            },
            &mut out,
        );
        // tc-testing multiq.json 20ba expects "bands 8" after the handle.
        assert_eq!(out.finish(), "bands 8/8 ");
    }
}
