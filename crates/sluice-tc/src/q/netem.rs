//! PLACEHOLDER (being written): netem syntax (iproute2 tc/q_netem.c).
#![allow(dead_code, unused)]
use crate::args::{Args, CmdResult};
use crate::out::Out;
use sluice_core::qdisc::netem::*;
use sluice_core::qdisc::{DevInfo, QdiscOpts};

pub(super) fn parse(a: &mut Args, dev: Option<&DevInfo>) -> CmdResult<Option<QdiscOpts>> {
    Ok(None)
}

pub(super) fn print(o: &NetemOpts, out: &mut Out, details: bool) {}
