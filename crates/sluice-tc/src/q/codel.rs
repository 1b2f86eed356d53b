//! PLACEHOLDER (being written): codel syntax (iproute2 tc/q_codel.c).
#![allow(dead_code, unused)]
use crate::args::{Args, CmdResult};
use crate::out::Out;
use sluice_core::qdisc::codel::*;
use sluice_core::qdisc::{DevInfo, QdiscOpts};

pub(super) fn parse(a: &mut Args, dev: Option<&DevInfo>) -> CmdResult<Option<QdiscOpts>> {
    Ok(None)
}

pub(super) fn print(o: &CodelOpts, out: &mut Out, details: bool) {}

pub(super) fn print_xstats(x: &CodelXstats, out: &mut Out) {}
