//! PLACEHOLDER (being written): fq_codel syntax (iproute2 tc/q_fq_codel.c).
#![allow(dead_code, unused)]
use crate::args::{Args, CmdResult};
use crate::out::Out;
use sluice_core::qdisc::fq_codel::*;
use sluice_core::qdisc::{DevInfo, QdiscOpts};

pub(super) fn parse(a: &mut Args, dev: Option<&DevInfo>) -> CmdResult<Option<QdiscOpts>> {
    Ok(None)
}

pub(super) fn print(o: &FqCodelOpts, out: &mut Out, details: bool) {}

pub(super) fn print_xstats(x: &FqCodelXstats, out: &mut Out) {}

pub(super) fn print_class_xstats(x: &FqCodelClassXstats, out: &mut Out) {}
