//! pfifo, bfifo, pfifo_head_drop syntax (iproute2 tc/q_fifo.c): `limit N`.

use crate::args::{Args, CmdResult, Fail};
use crate::out::{Out, To};
use sluice_core::qdisc::fifo::FifoOpts;
use sluice_core::qdisc::QdiscOpts;
use sluice_core::units::{fmt_size, parse_size};

fn usage(_kind: &str) -> String {
    "Usage: ... <[p|b]fifo | pfifo_head_drop> [ limit NUMBER ]".to_string()
}

pub(super) fn parse(kind: &str, args: &mut Args) -> CmdResult<QdiscOpts> {
    let mut o = FifoOpts::default();
    while let Some(w) = args.next() {
        match w {
            "limit" => {
                let v = args.value()?;
                o.limit = Some(parse_size(v).map_err(|_| {
                    Fail::new(1, format!("{kind}: Illegal value for \"limit\": \"{v}\""))
                })?);
            }
            "help" => return Err(Fail::new(1, usage(kind))),
            _ => {
                return Err(Fail::new(
                    1,
                    format!("{kind}: unknown parameter \"{w}\"\n{}", usage(kind)),
                ))
            }
        }
    }
    Ok(match kind {
        "bfifo" => QdiscOpts::Bfifo(o),
        "pfifo_head_drop" => QdiscOpts::PfifoHeadDrop(o),
        _ => QdiscOpts::Pfifo(o),
    })
}

pub(super) fn print(bytes: bool, o: &FifoOpts, out: &mut Out) {
    let limit = o.limit.unwrap_or(0);
    if bytes {
        out.uint(
            To::Any,
            "limit",
            &format!("limit {}", fmt_size(limit)),
            limit as u64,
        );
    } else {
        out.uint(To::Any, "limit", &format!("limit {limit}p"), limit as u64);
    }
}
