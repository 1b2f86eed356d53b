//! PLACEHOLDER (being written): `tc filter`, `tc chain` (iproute2 tc/tc_filter.c).
#![allow(unused)]
use crate::args::{Args, CmdResult, Fail};
use crate::net::Net;
use crate::out::Out;
use crate::tc::Opts;

/// `tc filter ...`.
pub fn filter_cmd(net: &mut Net, opts: &Opts, a: &mut Args, out: &mut Out) -> CmdResult {
    Err(Fail::new(255, "Object \"filter\" is unknown, try \"tc help\"."))
}

/// `tc chain ...`.
pub fn chain_cmd(net: &mut Net, opts: &Opts, a: &mut Args, out: &mut Out) -> CmdResult {
    Err(Fail::new(255, "Object \"chain\" is unknown, try \"tc help\"."))
}
