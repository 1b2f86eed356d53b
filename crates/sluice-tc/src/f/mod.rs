//! Per-classifier syntax: parsing a filter's options from tc's words and
//! printing a dumped element back, as iproute2's `f_<kind>.c` do. One file
//! per kind sluice has ([`u32`], [`fw`], [`matchall`], [`flower`], [`flow`], [`basic`]),
//! and the ematch expressions flow and basic share ([`ematch`]).
//!
//! Kinds iproute2 knows but sluice does not (bpf, route, ...) have
//! their options skipped: the kernel's answer, "TC classifier not found", is
//! what a kernel without those modules gives. Kinds iproute2 does not know
//! accept no options (`parse_nofopt`).

pub(crate) mod basic;
pub(crate) mod ematch;
pub(crate) mod flow;
pub(crate) mod flower;
pub(crate) mod fw;
pub(crate) mod matchall;
pub(crate) mod u32;

use crate::args::{Args, CmdResult, Fail};
use crate::m::PrintCx;
use crate::out::Out;
use sluice_core::cls::{FilterElemOpts, FilterOpts};

/// A parsed filter: the handle tc puts in `tcm_handle`, and `TCA_OPTIONS`.
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    pub handle: u32,
    pub opts: Option<FilterOpts>,
}

/// What printing a filter element needs besides the dump.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FPrintCx {
    /// Action printing (`-s`, `-d`, the clock).
    pub act: PrintCx,
    /// `-p`: u32 decodes its keys.
    pub pretty: bool,
    /// The filter's EtherType (`f_proto`), which picks u32's key decoder.
    pub protocol: u16,
}

/// The classifiers sluice has.
pub const KINDS: [&str; 6] = ["u32", "fw", "matchall", "flower", "flow", "basic"];

/// Classifiers compiled into iproute2 6.1 that sluice does not have.
const FOREIGN: [&str; 5] = ["bpf", "cgroup", "route", "rsvp", "tcindex"];

/// `q->parse_fopt` for `kind`, the words after the kind; `protocol` is the
/// filter's EtherType (host order; 0 when none was given).
pub(crate) fn parse(
    kind: &str,
    handle: Option<&str>,
    protocol: u16,
    a: &mut Args,
) -> CmdResult<Parsed> {
    match kind {
        "u32" => u32::parse(handle, a),
        "fw" => fw::parse(handle, a),
        "matchall" => matchall::parse(handle, a),
        "flower" => flower::parse(handle, protocol, a),
        "flow" => flow::parse(handle, a),
        "basic" => basic::parse(handle, a),
        k if FOREIGN.contains(&k) => {
            // Accepted unread: the kernel refuses the kind.
            while a.next().is_some() {}
            Ok(Parsed::default())
        }
        k => parse_nofopt(k, handle, a),
    }
}

/// `parse_nofopt`: a kind iproute2 has no parser for takes no options.
fn parse_nofopt(kind: &str, handle: Option<&str>, a: &mut Args) -> CmdResult<Parsed> {
    if let Some(w) = a.peek() {
        return Err(Fail::new(
            1,
            format!("Unknown filter \"{kind}\", hence option \"{w}\" is unparsable"),
        ));
    }
    let handle = match handle {
        Some(h) => crate::m::get_u32(h, 16)
            .ok_or_else(|| Fail::new(1, format!("Unparsable filter ID \"{h}\"")))?,
        None => 0,
    };
    Ok(Parsed { handle, opts: None })
}

/// `q->print_fopt`: one element's options.
pub(crate) fn print(opts: &FilterElemOpts, handle: u32, cx: &FPrintCx, out: &mut Out) {
    match opts {
        FilterElemOpts::U32Table { divisor } => u32::print_table(handle, *divisor, out),
        FilterElemOpts::U32(k) => u32::print(k, handle, cx, out),
        FilterElemOpts::Fw(f) => fw::print(f, handle, cx, out),
        FilterElemOpts::Matchall(m) => matchall::print(m, handle, cx, out),
        FilterElemOpts::Flower(f) => flower::print(f, handle, cx, out),
        FilterElemOpts::Flow(f) => flow::print(f, handle, cx, out),
        FilterElemOpts::Basic(b) => basic::print(b, handle, cx, out),
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    use crate::net::Net;
    use crate::{ip, tc, Outcome};

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    /// A namespace with the veth pair DEV/PEER, as the golden captures start.
    pub(crate) fn dev() -> Net {
        let mut net = Net::new();
        for c in [
            "link add dev DEV type veth peer name PEER",
            "link set dev DEV up",
        ] {
            assert_eq!(ip::run(&mut net, &words(c)).code, 0, "{c}");
        }
        net
    }

    /// [`dev`] with an ingress qdisc on DEV, where action tests add filters.
    pub(crate) fn ingress() -> Net {
        let mut n = dev();
        assert_eq!(tc(&mut n, "qdisc add dev DEV ingress").code, 0);
        n
    }

    /// `tc WORDS...`, split at spaces.
    pub(crate) fn tc(net: &mut Net, line: &str) -> Outcome {
        tc_words(net, &words(line))
    }

    /// `tc` with the words as given (quoted arguments keep their spaces).
    pub(crate) fn tc_words(net: &mut Net, w: &[String]) -> Outcome {
        let (opts, rest) = tc::parse_global(w).expect("options");
        tc::run(net, &opts, &rest)
    }
}
