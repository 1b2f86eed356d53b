//! multiq syntax (iproute2 tc/q_multiq.c): no options but `help`; printed
//! `bands N/MAX `. sluice's devices have one transmit queue, so the kernel's
//! answer to creating one is "Operation not supported"
//! (sluice_core::qdisc::multiq).

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
        // Parse errors, as iproute2 6.1's tc on this machine prints them.
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
