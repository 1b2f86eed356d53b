//! PLACEHOLDER (being written): `tc actions` (iproute2 tc/m_action.c).
#![allow(unused)]
use crate::args::{Args, CmdResult, Fail};
use crate::net::Net;
use crate::out::Out;
use crate::tc::Opts;

/// `tc actions ...`.
pub fn actions_cmd(net: &mut Net, opts: &Opts, a: &mut Args, out: &mut Out) -> CmdResult {
    Err(Fail::new(255, "Object \"actions\" is unknown, try \"tc help\"."))
}
