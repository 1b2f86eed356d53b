//! pfifo_fast syntax: no options; printed like prio (`bands 3 priomap ...`).

use crate::args::{Args, CmdResult, Fail};
use crate::out::{Out, To, J};
use sluice_core::qdisc::QdiscOpts;

/// The fixed priomap of pfifo_fast (TC_PRIO -> band).
const PRIOMAP: [u8; 16] = [1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];

pub(super) fn parse(args: &mut Args) -> CmdResult<QdiscOpts> {
    if !args.is_empty() {
        return Err(Fail::new(
            255,
            "qdisc 'pfifo_fast' does not support option parsing",
        ));
    }
    Ok(QdiscOpts::PfifoFast(Default::default()))
}

pub(super) fn print(out: &mut Out) {
    out.uint(To::Any, "bands", "bands 3 ", 3);
    let mut text = String::from("priomap");
    for b in PRIOMAP {
        text.push_str(&format!(" {b}"));
    }
    out.item(
        To::Any,
        "priomap",
        &text,
        J::Arr(PRIOMAP.iter().map(|b| J::Num(b.to_string())).collect()),
    );
    out.bool(To::Json, "multiqueue", "", false);
}
