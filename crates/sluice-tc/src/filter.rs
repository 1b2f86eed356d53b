//! `tc filter` and `tc chain` (iproute2 tc/tc_filter.c).
//!
//! `add|change|replace|delete` and `tc chain add|delete` share one parser
//! (`tc_filter_modify`): `dev`, `block`, the parent (`root`, `ingress`,
//! `egress`, `parent ID`), `handle`, `pref`/`priority`, `protocol`, `chain`,
//! `estimator`, then the classifier kind and its options (`f/`). As in
//! iproute2 the device is looked up before the kind's options are parsed,
//! and `add`/`replace` default the protocol to `all`.
//!
//! `get` and `show` print with `print_filter`: the kernel's message header
//! (parent, protocol, pref, kind, chain, each left out when it is what the
//! request asked for), then the kind's options.
//!
//! The parent a dump reports is the block's `classid`, which the kernel
//! takes from the last `tc filter add` on that block: filters added to an
//! ingress qdisc as `parent ffff:` show `parent ffff:` when listed with
//! `ingress`, and those added with `ingress` show nothing more there.

use crate::args::{duparg, invarg, matches, Args, CmdResult, Fail};
use crate::f::{self, FPrintCx};
use crate::m::{self, PrintCx};
use crate::net::Net;
use crate::out::{Out, To};
use crate::tc::{nodev, Opts};
use sluice_core::act::EstimatorSpec;
use sluice_core::cls::shared::{self, SharedBlock, SharedBlockRef};
use sluice_core::cls::{Block, ClsEnv, FilterCmd, FilterDump, FilterMsg};
use sluice_core::error::{Errno, TcError};
use sluice_core::handle::Handle;
use sluice_core::time::Time;

/// The classifier kinds sluice has (`tc filter add ... KIND`).
pub const KINDS: [&str; 6] = f::KINDS;

const USAGE: &str = "Usage: tc filter [ add | del | change | replace | show ] [ dev STRING ]
       tc filter [ add | del | change | replace | show ] [ block BLOCK_INDEX ]
       tc filter get dev STRING parent CLASSID protocol PROTO handle FILTERID pref PRIO FILTER_TYPE
       tc filter get block BLOCK_INDEX protocol PROTO handle FILTERID pref PRIO FILTER_TYPE
       [ pref PRIO ] protocol PROTO [ chain CHAIN_INDEX ]
       [ estimator INTERVAL TIME_CONSTANT ]
       [ root | ingress | egress | parent CLASSID ]
       [ handle FILTERID ] [ [ FILTER_TYPE ] [ help | OPTIONS ] ]

       tc filter show [ dev STRING ] [ root | ingress | egress | parent CLASSID ]
       tc filter show [ block BLOCK_INDEX ]
Where:
FILTER_TYPE := { rsvp | u32 | bpf | fw | route | etc. }
FILTERID := ... format depends on classifier, see there
OPTIONS := ... try tc filter add <desired FILTER_KIND> help";

const CHAIN_USAGE: &str = "Usage: tc chain [ add | del | get | show ] [ dev STRING ]
       tc chain [ add | del | get | show ] [ block BLOCK_INDEX ] ]";

/// `ETH_P_ALL`.
const ETH_P_ALL: u16 = 0x0003;

/// `ll_proto_n2a`/`ll_proto_a2n`'s table (lib/ll_proto.c), host order.
const LL_PROTO: &[(u16, &str)] = &[
    (0x0060, "loop"),
    (0x0200, "pup"),
    (0x0201, "pupat"),
    (0x0800, "ip"),
    (0x0805, "x25"),
    (0x0806, "arp"),
    (0x08FF, "bpq"),
    (0x0a00, "ieeepup"),
    (0x0a01, "ieeepupat"),
    (0x6000, "dec"),
    (0x6001, "dna_dl"),
    (0x6002, "dna_rc"),
    (0x6003, "dna_rt"),
    (0x6004, "lat"),
    (0x6005, "diag"),
    (0x6006, "cust"),
    (0x6007, "sca"),
    (0x8035, "rarp"),
    (0x809B, "atalk"),
    (0x80F3, "aarp"),
    (0x8137, "ipx"),
    (0x86DD, "ipv6"),
    (0x8863, "ppp_disc"),
    (0x8864, "ppp_ses"),
    (0x884c, "atmmpoa"),
    (0x8884, "atmfate"),
    (0x0001, "802_3"),
    (0x0002, "ax25"),
    (0x0003, "all"),
    (0x0004, "802_2"),
    (0x0005, "snap"),
    (0x0006, "ddcmp"),
    (0x0007, "wan_ppp"),
    (0x0008, "ppp_mp"),
    (0x0009, "localtalk"),
    (0x000C, "can"),
    (0x0010, "ppptalk"),
    (0x0011, "tr_802_2"),
    (0x0015, "mobitex"),
    (0x0016, "control"),
    (0x0017, "irda"),
    (0x0018, "econet"),
    (0x88CA, "tipc"),
    (0x8892, "profinet"),
    (0x88A2, "aoe"),
    (0x88A4, "ethercat"),
    (0x8100, "802.1Q"),
    (0x88A8, "802.1ad"),
    (0x8847, "mpls_uc"),
    (0x8848, "mpls_mc"),
    (0x6558, "teb"),
    (0x8100, "802.1Q"),
    (0x88cc, "LLDP"),
    (0x0800, "ipv4"),
];

/// `ll_proto_a2n`: a name (any case) or a 16-bit number.
pub(crate) fn proto_a2n(s: &str) -> Option<u16> {
    LL_PROTO
        .iter()
        .find(|(_, n)| n.eq_ignore_ascii_case(s))
        .map(|(id, _)| *id)
        .or_else(|| m::get_u16(s, 0))
}

/// `ll_proto_n2a`.
pub(crate) fn proto_n2a(id: u16) -> String {
    LL_PROTO
        .iter()
        .find(|(p, _)| *p == id)
        .map_or_else(|| format!("[{id}]"), |(_, n)| n.to_string())
}

/// A kernel refusal of a filter or chain request (`rtnl_talk` failing).
fn kernel_err(e: TcError) -> Fail {
    Fail::new(
        2,
        format!("{}\nWe have an error talking to the kernel", e.describe()),
    )
}

/// The words before the kind, as the three parsers of tc_filter.c read them.
#[derive(Debug, Default)]
struct Common<'a> {
    dev: Option<&'a str>,
    block: u32,
    parent: u32,
    handle: Option<&'a str>,
    prio: u32,
    protocol: Option<u16>,
    chain: Option<u32>,
    estimator: Option<EstimatorSpec>,
    kind: Option<&'a str>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Which {
    Modify,
    Get,
    List,
}

/// The loop of `tc_filter_modify`, `tc_filter_get` and `tc_filter_list`.
/// `Ok(None)`: `help` was asked for (usage printed, status 0).
fn parse_common<'a>(
    a: &mut Args<'a>,
    which: Which,
    help_printed: &mut String,
) -> CmdResult<Option<Common<'a>>> {
    let mut c = Common::default();
    while let Some(w) = a.next() {
        if w == "dev" {
            let v = a.value()?;
            if c.dev.is_some() {
                return Err(duparg("dev", v));
            }
            if c.block != 0 {
                let msg = if which == Which::List {
                    "Error: \"dev\" cannot be used in the same time as \"block\""
                } else {
                    "Error: \"dev\" and \"block\" are mutually exclusive"
                };
                return Err(Fail::new(255, msg));
            }
            c.dev = Some(v);
        } else if matches(w, "block") {
            let v = a.value()?;
            if c.block != 0 {
                return Err(duparg("block", v));
            }
            if c.dev.is_some() {
                let msg = if which == Which::List {
                    "Error: \"block\" cannot be used in the same time as \"dev\""
                } else {
                    "Error: \"dev\" and \"block\" are mutually exclusive"
                };
                return Err(Fail::new(255, msg));
            }
            c.block = m::get_u32(v, 0)
                .filter(|&b| b != 0)
                .ok_or_else(|| invarg("invalid block index value", v))?;
        } else if w == "root" || w == "ingress" || w == "egress" {
            if c.parent != 0 {
                return Err(Fail::new(
                    255,
                    format!("Error: \"{w}\" is duplicate parent ID"),
                ));
            }
            c.parent = match w {
                "root" => Handle::ROOT.0,
                "ingress" => Handle::new(0xffff, Handle::MIN_INGRESS).0,
                _ => Handle::new(0xffff, Handle::MIN_EGRESS).0,
            };
        } else if w == "parent" {
            let v = a.value()?;
            if c.parent != 0 {
                return Err(duparg("parent", v));
            }
            let msg = if which == Which::List {
                "invalid parent ID"
            } else {
                "Invalid parent ID"
            };
            c.parent = Handle::parse_classid(v).ok_or_else(|| invarg(msg, v))?.0;
        } else if w == "handle" {
            let v = a.value()?;
            if c.handle.is_some() {
                return Err(duparg("handle", v));
            }
            c.handle = Some(v);
        } else if matches(w, "preference") || matches(w, "priority") {
            let v = a.value()?;
            if c.prio != 0 {
                return Err(duparg("priority", v));
            }
            c.prio = match (which, m::get_u32(v, 0)) {
                (Which::List, Some(p)) => p,
                (Which::List, None) => return Err(invarg("invalid preference", v)),
                (_, Some(p)) if p <= 0xFFFF => p,
                _ => return Err(invarg("invalid priority value", v)),
            };
        } else if matches(w, "protocol") {
            let v = a.value()?;
            if c.protocol.is_some_and(|p| which != Which::List || p != 0) {
                return Err(duparg("protocol", v));
            }
            c.protocol = Some(proto_a2n(v).ok_or_else(|| invarg("invalid protocol", v))?);
        } else if matches(w, "chain") {
            let v = a.value()?;
            if c.chain.is_some() {
                return Err(duparg("chain", v));
            }
            c.chain = Some(m::get_u32(v, 0).ok_or_else(|| invarg("invalid chain index value", v))?);
        } else if which == Which::Modify && matches(w, "estimator") {
            c.estimator = Some(crate::tc::parse_estimator(a)?);
        } else if matches(w, "help") {
            if which == Which::List {
                // tc_filter_list prints the usage and goes on.
                help_printed.push_str(USAGE);
                help_printed.push('\n');
                continue;
            }
            return Ok(None);
        } else if which == Which::List {
            return Err(Fail::new(
                255,
                format!(" What is \"{w}\"? Try \"tc filter help\""),
            ));
        } else {
            if which == Which::Get && w.is_empty() {
                return Err(invarg("invalid filter name", w));
            }
            c.kind = Some(w);
            break;
        }
    }
    Ok(Some(c))
}

/// The commands that go through `tc_filter_modify`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Modify {
    Filter(FilterCmd),
    Delete,
    ChainAdd,
    ChainDelete,
}

fn garbage(a: &Args) -> CmdResult {
    match a.peek() {
        Some(w) => {
            let mut msg = String::new();
            if matches(w, "help") {
                msg.push_str(USAGE);
                msg.push('\n');
            }
            msg.push_str(&format!(
                "Garbage instead of arguments \"{w} ...\". Try \"tc filter help\"."
            ));
            Err(Fail::new(255, msg))
        }
        None => Ok(()),
    }
}

/// `tc_filter_modify`.
fn modify(net: &mut Net, a: &mut Args, cmd: Modify) -> CmdResult {
    let Some(c) = parse_common(a, Which::Modify, &mut String::new())? else {
        return Err(Fail::new(0, USAGE));
    };
    let creates = matches!(cmd, Modify::Filter(FilterCmd::Add | FilterCmd::Replace));
    let protocol = c.protocol.unwrap_or(if creates { ETH_P_ALL } else { 0 });
    if let Some(d) = c.dev {
        if net.dev(d).is_none() {
            return Err(nodev(d));
        }
    }
    let parsed = match c.kind {
        Some(k) => f::parse(k, c.handle, protocol, a)?,
        None => {
            if c.handle.is_some() {
                return Err(Fail::new(
                    255,
                    "Must specify filter type when using \"handle\"",
                ));
            }
            garbage(a)?;
            f::Parsed::default()
        }
    };
    let msg = FilterMsg {
        chain: c.chain.unwrap_or(0),
        prio: c.prio as u16,
        protocol,
        handle: parsed.handle,
        kind: c.kind.map(String::from),
        opts: parsed.opts,
        estimator: c.estimator,
    };
    kernel_modify(net, &c, &msg, cmd).map_err(kernel_err)
}

/// Shared block `index` (`tcf_block_refcnt_get`).
fn shared_block(net: &Net, index: u32) -> Result<SharedBlockRef, TcError> {
    net.blocks
        .get(index)
        .ok_or_else(|| TcError::inval("Block of given index was not found"))
}

/// What the kernel does with a `tc_filter_modify` request.
fn kernel_modify(net: &mut Net, c: &Common, msg: &FilterMsg, cmd: Modify) -> Result<(), TcError> {
    match cmd {
        Modify::Filter(fc) if msg.prio == 0 && fc == FilterCmd::Change => {
            return Err(TcError::msg(
                Errno::ENOENT,
                "Invalid filter command with priority of zero",
            ));
        }
        Modify::Delete
            if msg.prio == 0 && (msg.protocol != 0 || msg.handle != 0 || msg.kind.is_some()) =>
        {
            return Err(TcError::msg(
                Errno::ENOENT,
                "Cannot flush filters with protocol, handle or kind set",
            ));
        }
        _ => {}
    }
    let names: Vec<String> = net.devices.iter().map(|d| d.info.name.clone()).collect();
    let dev_exists = |n: &str| names.iter().any(|d| d == n);
    if c.block != 0 {
        let b = shared_block(net, c.block)?;
        let mut g = shared::lock(&b);
        let SharedBlock { block, cls, .. } = &mut *g;
        return match cmd {
            Modify::Filter(fc) => {
                let mut env = ClsEnv {
                    actions: &mut net.actions,
                    shared: cls,
                    qdisc: Handle::UNSPEC,
                    dev_exists: &dev_exists,
                    now: net.now,
                };
                block.change_filter(msg, fc, &mut env)
            }
            Modify::Delete => block.delete_filter(msg),
            Modify::ChainAdd => block.add_chain(msg.chain, msg.kind.as_deref()),
            Modify::ChainDelete => block.delete_chain(msg.chain),
        };
    }
    let Some(dname) = c.dev else {
        return Err(TcError::errno(Errno::ENODEV));
    };
    let Net {
        devices,
        actions,
        now,
        ..
    } = net;
    let dev = devices
        .iter_mut()
        .find(|d| d.info.name == dname)
        .ok_or(TcError::errno(Errno::ENODEV))?;
    let parent = Handle(c.parent);
    match cmd {
        Modify::Filter(fc) => dev.change_filter(parent, msg, fc, actions, &dev_exists, *now),
        Modify::Delete => dev.block_mut(parent)?.delete_filter(msg),
        Modify::ChainAdd => dev
            .block_mut(parent)?
            .add_chain(msg.chain, msg.kind.as_deref()),
        Modify::ChainDelete => dev.block_mut(parent)?.delete_chain(msg.chain),
    }
}

/// The request fields `print_filter` compares the answer with.
#[derive(Clone, Copy, Debug, Default)]
struct Shown {
    parent: u32,
    block: u32,
    prio: u32,
    protocol: u16,
    chain: Option<u32>,
}

/// Where the kernel says a dumped filter is: under a qdisc or class of the
/// device, or in a shared block (`TCM_IFINDEX_MAGIC_BLOCK`), which has no
/// parent.
#[derive(Clone, Copy, Debug)]
enum Origin {
    Parent(Handle),
    Block(u32),
}

fn print_origin(origin: Origin, shown: &Shown, out: &mut Out) {
    let p = match origin {
        Origin::Block(b) => {
            if shown.block != b {
                out.uint(To::Any, "block", &format!("block {b} "), b as u64);
            }
            return;
        }
        Origin::Parent(p) => p,
    };
    if shown.parent != 0 && shown.parent == p.0 {
        return;
    }
    if p.is_root() {
        out.bool(To::Any, "root", "root ", true);
    } else if p == Handle::new(0xffff, Handle::MIN_INGRESS) {
        out.bool(To::Any, "ingress", "ingress ", true);
    } else if p == Handle::new(0xffff, Handle::MIN_EGRESS) {
        out.bool(To::Any, "egress", "egress ", true);
    } else {
        let s = p.to_string();
        out.str(To::Any, "parent", &format!("parent {s} "), &s);
    }
}

/// `print_filter` for a filter message.
fn print_filter(
    d: &FilterDump,
    origin: Origin,
    shown: &Shown,
    opts: &Opts,
    now: Time,
    out: &mut Out,
) {
    out.open("");
    out.text("filter ");
    print_origin(origin, shown, out);
    if !(shown.protocol != 0 && shown.protocol == d.protocol) && d.protocol != 0 {
        let p = proto_n2a(d.protocol);
        out.str(To::Any, "protocol", &format!("protocol {p} "), &p);
    }
    let prio = d.prio as u32;
    if !(shown.prio != 0 && shown.prio == prio) && prio != 0 {
        out.uint(To::Any, "pref", &format!("pref {prio} "), prio as u64);
    }
    out.str(To::Any, "kind", &format!("{} ", d.kind), d.kind);
    if shown.chain != Some(d.chain) {
        out.uint(
            To::Any,
            "chain",
            &format!("chain {} ", d.chain),
            d.chain as u64,
        );
    }
    if let Some(o) = &d.opts {
        out.open("options");
        let cx = FPrintCx {
            act: PrintCx {
                stats: opts.stats,
                details: opts.details,
                now,
            },
            pretty: opts.pretty,
            protocol: d.protocol,
        };
        f::print(o, d.handle, &cx, out);
        out.close();
    }
    out.nl();
    if let (true, Some(s)) = (opts.stats, &d.stats) {
        // The old police's TCA_STATS, printed by fprintf (text only).
        out.text(&format!(
            " Sent {} bytes {} pkts (dropped {}, overlimits {}) ",
            s.bytes, s.packets, s.drops, s.overlimits
        ));
        out.nl();
    }
    out.close();
}

/// `print_filter` for a chain message.
fn print_chain(chain: u32, origin: Origin, shown: &Shown, out: &mut Out) {
    out.open("");
    out.text("chain ");
    print_origin(origin, shown, out);
    if shown.chain != Some(chain) {
        out.uint(To::Any, "chain", &format!("chain {chain} "), chain as u64);
    }
    out.nl();
    out.close();
}

/// `tc_filter_get` (`chain`: `tc chain get`).
fn get(net: &mut Net, opts: &Opts, a: &mut Args, chain_get: bool, out: &mut Out) -> CmdResult {
    let Some(c) = parse_common(a, Which::Get, &mut String::new())? else {
        return Err(Fail::new(0, if chain_get { CHAIN_USAGE } else { USAGE }));
    };
    let must = |what: &str| Fail::new(255, format!("Must specify filter {what}"));
    if !chain_get {
        if c.protocol.is_none() {
            return Err(must("protocol"));
        }
        if c.prio == 0 {
            return Err(must("priority"));
        }
    }
    if c.parent == 0 {
        return Err(must("parent"));
    }
    if !chain_get && c.kind.is_none() {
        return Err(must("type"));
    }
    match c.dev {
        Some(d) if net.dev(d).is_none() => return Err(nodev(d)),
        Some(_) => {}
        None if c.block != 0 => {}
        None => {
            return Err(Fail::new(
                255,
                "Must specify netdevice \"dev\" or block index \"block\"",
            ))
        }
    }
    let mut parsed = f::Parsed::default();
    if let (false, Some(k)) = (chain_get, c.kind) {
        let mut rest = a.clone();
        parsed = f::parse(k, c.handle, c.protocol.unwrap_or(0), &mut rest)?;
    }
    if c.handle.is_none() && !chain_get {
        return Err(Fail::new(255, "Must specify filter \"handle\""));
    }
    garbage(a)?;
    // A block asked for is not repeated in the answer.
    let shown = Shown {
        block: c.block,
        ..Default::default()
    };
    let msg = FilterMsg {
        chain: c.chain.unwrap_or(0),
        prio: c.prio as u16,
        protocol: c.protocol.unwrap_or(0),
        handle: parsed.handle,
        kind: c.kind.map(String::from),
        opts: parsed.opts,
        estimator: None,
    };
    // What to get from a block: the filter, or with `chain_get` the chain.
    let answer = |block: &Block, origin: Origin, out: &mut Out| -> CmdResult {
        if chain_get {
            let index = c.chain.unwrap_or(0);
            block.get_chain(index).map_err(kernel_err)?;
            print_chain(index, origin, &shown, out);
        } else {
            let d = block.get_filter(&msg).map_err(kernel_err)?;
            print_filter(&d, origin, &shown, opts, net.now, out);
        }
        Ok(())
    };
    if c.block != 0 {
        let b = shared_block(net, c.block).map_err(kernel_err)?;
        let g = shared::lock(&b);
        return answer(&g.block, Origin::Block(c.block), out);
    }
    let dev = net.dev(c.dev.unwrap_or_default()).expect("looked up above");
    let parent = Handle(c.parent);
    let block = dev.block(parent).map_err(kernel_err)?;
    let reported = if parent.is_unspec() {
        dev.root.handle
    } else {
        parent
    };
    let origin = if chain_get {
        Origin::Parent(dev.find(parent.qdisc()).map_or(reported, |q| q.handle))
    } else {
        Origin::Parent(reported)
    };
    answer(block, origin, out)
}

/// `tc_filter_list` (`chains`: `tc chain show`).
fn list(net: &mut Net, opts: &Opts, a: &mut Args, chains: bool, out: &mut Out) -> CmdResult {
    let mut c = parse_common(a, Which::List, &mut out.warnings)?.unwrap_or_default();
    // tc lists every device for an empty name (`if (d[0])`).
    c.dev = c.dev.filter(|d| !d.is_empty());
    let shown = Shown {
        parent: c.parent,
        block: c.block,
        prio: c.prio,
        protocol: c.protocol.unwrap_or(0),
        chain: c.chain,
    };
    let req = Handle(c.parent);
    // The shared block asked for, or the one the device's filters are in.
    let shared = match c.dev {
        None if c.block != 0 => Some(
            net.blocks
                .get(c.block)
                .ok_or_else(|| Fail::new(1, format!("Cannot find block \"{}\"", c.block)))?,
        ),
        None => return Ok(()),
        Some(dname) => {
            let dev = net.dev(dname).ok_or_else(|| nodev(dname))?;
            dev.shared_block(req).ok().flatten()
        }
    };
    if let Some(b) = shared {
        let g = shared::lock(&b);
        let origin = Origin::Block(g.index);
        dump_block(&g.block, origin, &c, &shown, chains, opts, net.now, out);
        return Ok(());
    }
    let dev = net.dev(c.dev.unwrap_or_default()).expect("looked up above");
    // The kernel answers an impossible request with an empty dump.
    let Ok(block) = dev.block(req) else {
        return Ok(());
    };
    let origin = if chains {
        Origin::Parent(if req.is_unspec() {
            dev.root.handle
        } else {
            dev.find(req.qdisc()).map_or(req, |q| q.handle)
        })
    } else {
        Origin::Parent(block.classid)
    };
    dump_block(block, origin, &c, &shown, chains, opts, net.now, out);
    Ok(())
}

/// The chains (`chains`) or filters of `block` a list request asks for.
#[allow(clippy::too_many_arguments)]
fn dump_block(
    block: &Block,
    origin: Origin,
    c: &Common,
    shown: &Shown,
    chains: bool,
    opts: &Opts,
    now: Time,
    out: &mut Out,
) {
    if chains {
        for index in block.chains() {
            if c.chain.is_none_or(|i| i == index) {
                print_chain(index, origin, shown, out);
            }
        }
        return;
    }
    // tcm_info carries the priority's low 16 bits.
    let prio = (c.prio & 0xFFFF) as u16;
    for d in block.dump(c.chain, prio, shown.protocol) {
        print_filter(&d, origin, shown, opts, now, out);
    }
}

/// `tc filter ...`.
pub fn filter_cmd(net: &mut Net, opts: &Opts, a: &mut Args, out: &mut Out) -> CmdResult {
    let Some(cmd) = a.next() else {
        return Ok(());
    };
    if matches(cmd, "add") {
        modify(net, a, Modify::Filter(FilterCmd::Add))
    } else if matches(cmd, "change") {
        modify(net, a, Modify::Filter(FilterCmd::Change))
    } else if matches(cmd, "replace") {
        modify(net, a, Modify::Filter(FilterCmd::Replace))
    } else if matches(cmd, "delete") {
        modify(net, a, Modify::Delete)
    } else if matches(cmd, "get") {
        get(net, opts, a, false, out)
    } else if matches(cmd, "list") || matches(cmd, "show") || matches(cmd, "lst") {
        list(net, opts, a, false, out)
    } else if matches(cmd, "help") {
        Err(Fail::new(0, USAGE))
    } else {
        Err(Fail::new(
            255,
            format!("Command \"{cmd}\" is unknown, try \"tc filter help\"."),
        ))
    }
}

/// `tc chain ...`.
pub fn chain_cmd(net: &mut Net, opts: &Opts, a: &mut Args, out: &mut Out) -> CmdResult {
    let Some(cmd) = a.next() else {
        return list(net, opts, a, true, out);
    };
    if matches(cmd, "add") {
        modify(net, a, Modify::ChainAdd)
    } else if matches(cmd, "delete") {
        modify(net, a, Modify::ChainDelete)
    } else if matches(cmd, "get") {
        get(net, opts, a, true, out)
    } else if matches(cmd, "list") || matches(cmd, "show") || matches(cmd, "lst") {
        list(net, opts, a, true, out)
    } else if matches(cmd, "help") {
        Err(Fail::new(0, CHAIN_USAGE))
    } else {
        Err(Fail::new(
            255,
            format!("Command \"{cmd}\" is unknown, try \"tc chain help\"."),
        ))
    }
}

#[cfg(test)]
mod tests {
    use crate::net::Net;
    use crate::{ip, tc, Outcome};

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    /// The golden captures' starting point: veth DEV/PEER, both up.
    fn veth() -> Net {
        let mut net = Net::new();
        for c in [
            "link add dev DEV type veth peer name PEER",
            "link set dev DEV up",
            "link set dev PEER up",
        ] {
            assert_eq!(ip::run(&mut net, &words(c)).code, 0, "{c}");
        }
        net
    }

    fn tc(net: &mut Net, line: &str) -> Outcome {
        let (opts, rest) = tc::parse_global(&words(line)).expect("options");
        tc::run(net, &opts, &rest)
    }

    fn ok(net: &mut Net, line: &str) -> String {
        let o = tc(net, line);
        assert_eq!((o.code, o.stderr.as_str()), (0, ""), "{line}");
        o.stdout
    }

    #[test]
    fn conditioner_filters_print_as_in_conditioner_golden() {
        let mut net = veth();
        for c in [
            "qdisc add dev DEV root handle 1: htb default 20",
            "class add dev DEV parent 1: classid 1:1 htb rate 220kbit burst 6k",
            "filter add dev DEV parent 1:0 protocol ip prio 10 u32 match ip tos 0x10 0xff flowid 1:10",
            "filter add dev DEV parent 1:0 protocol ip prio 10 u32 match ip protocol 1 0xff flowid 1:10",
            "filter add dev DEV parent 1: protocol ip prio 10 u32 match ip protocol 6 0xff \
             match u8 0x05 0x0f at 0 match u16 0x0000 0xffc0 at 2 match u8 0x10 0xff at 33 flowid 1:10",
        ] {
            ok(&mut net, c);
        }
        let want = "\
filter parent 1: protocol ip pref 10 u32 chain 0 
filter parent 1: protocol ip pref 10 u32 chain 0 fh 800: ht divisor 1 
filter parent 1: protocol ip pref 10 u32 chain 0 fh 800::800 order 2048 key ht 800 bkt 0 *flowid 1:10 not_in_hw 
  match 00100000/00ff0000 at 0
filter parent 1: protocol ip pref 10 u32 chain 0 fh 800::801 order 2049 key ht 800 bkt 0 *flowid 1:10 not_in_hw 
  match 00010000/00ff0000 at 8
filter parent 1: protocol ip pref 10 u32 chain 0 fh 800::802 order 2050 key ht 800 bkt 0 *flowid 1:10 not_in_hw 
  match 00060000/00ff0000 at 8
  match 05000000/0f00ffc0 at 0
  match 00100000/00ff0000 at 32
";
        assert_eq!(ok(&mut net, "filter show dev DEV"), want);
        // u32.golden "u32 match ip protocol 6 0xff" with -p.
        let pretty = ok(&mut net, "-p filter show dev DEV parent 1: prio 10");
        assert!(
            pretty.contains("*flowid 1:10 not_in_hw \n  match IP protocol 1\n"),
            "{pretty}"
        );
        let json = ok(&mut net, "-j filter show dev DEV");
        assert!(json.starts_with(
            "[{\"parent\":\"1:\",\"protocol\":\"ip\",\"pref\":10,\"kind\":\"u32\",\"chain\":0},"
        ));
        assert!(json.contains("\"options\":{\"fh\":\"800::800\",\"order\":2048,\"key_ht\":\"800\",\"bkt\":\"0\",\"flowid\":\"1:10\",\"not_in_hw\":true,\"match\":{\"value\":\"100000\",\"mask\":\"ff0000\",\"offmask\":\"\",\"off\":0}}"));
    }

    #[test]
    fn errors_and_chains_as_in_u32_golden() {
        let mut net = veth();
        ok(&mut net, "qdisc add dev DEV root handle 1: htb default 20");
        let cases = [
            ("filter add dev DEV parent 1: protocol ip prio 10 u32 match ip tos 0x10 flowid 1:10", 1, "Illegal \"match\"\n"),
            ("filter add dev DEV parent 1: protocol ip prio 10 foo match ip src 10.0.0.0/8", 1, "Unknown filter \"foo\", hence option \"match\" is unparsable\n"),
            ("filter add dev DEV parent 1: protocol ip prio 10", 2, "Error: Filter kind and protocol must be specified.\nWe have an error talking to the kernel\n"),
            ("filter add dev DEV parent 9: protocol ip prio 10 u32 match u32 0 0 flowid 1:10", 2, "Error: Parent Qdisc doesn't exists.\nWe have an error talking to the kernel\n"),
            ("filter add", 2, "RTNETLINK answers: No such device\nWe have an error talking to the kernel\n"),
            ("filter show dev DEV bogus", 255, " What is \"bogus\"? Try \"tc filter help\"\n"),
            ("filter get dev DEV parent 1: protocol ip prio 10 u32", 255, "Must specify filter \"handle\"\n"),
            ("filter add dev nosuch parent 1: protocol ip prio 1 u32 match bogus", 1, "Cannot find device \"nosuch\"\n"),
        ];
        for (c, code, err) in cases {
            let o = tc(&mut net, c);
            assert_eq!((o.code, o.stderr.as_str()), (code, err), "{c}");
        }
        ok(&mut net, "filter add dev DEV parent 1: protocol ip prio 10 chain 1 u32 match u32 0 0 flowid 1:10");
        ok(
            &mut net,
            "filter add dev DEV parent 1: protocol ip prio 10 u32 match u32 0 0 flowid 1:10",
        );
        assert_eq!(
            ok(&mut net, "chain show dev DEV"),
            "chain parent 1: chain 1 \nchain parent 1: chain 0 \n"
        );
        ok(&mut net, "chain add dev DEV parent 1: chain 3");
        assert!(ok(&mut net, "chain show dev DEV").ends_with("chain parent 1: chain 3 \n"));
        assert_eq!(ok(&mut net, "filter show dev DEV chain 3"), "");
    }

    #[test]
    fn actions_print_as_m_police_and_m_gact_do() {
        let mut net = veth();
        ok(
            &mut net,
            "actions add action police rate 1mbit burst 100k overhead 64 index 64",
        );
        // tc-testing police f057 and iproute2 print_police / tc_print_one_action;
        // no `used_hw_stats` before a `tc actions ls` (as the kernel here for mirred).
        let want = "total acts 0\n\n\taction order 1:  police 0x40 rate 1Mbit burst 100Kb mtu 2Kb action reclassify overhead 64b \n\tref 1 bind 0 \n\tnot_in_hw\n";
        assert_eq!(ok(&mut net, "actions get action police index 64"), want);
        ok(&mut net, "actions add action pass index 8");
        // tc-testing gact e89a: `gact action pass.*index 8 ref`.
        let ls = ok(&mut net, "actions ls action gact");
        assert_eq!(ls, "total acts 1\n\n\taction order 0: gact action pass\n\t random type none pass val 0\n\t index 8 ref 1 bind 0\n\tnot_in_hw\n\tused_hw_stats disabled\n");
        // Golden actions.golden: a failed get trips over the next word.
        let o = tc(&mut net, "actions get action gact index 1");
        assert_eq!(o.code, 255);
        assert_eq!(o.stderr, "Error: TC action with specified index not found.\nWe have an error talking to the kernel\nCommand \"action\" is unknown, try \"tc actions help\".\n");
        let o = tc(&mut net, "actions flush action bogus");
        assert_eq!(
            (o.code, o.stderr.as_str()),
            (
                1,
                "Error: Cannot flush unknown TC action.\nWe have an error flushing\n"
            )
        );
    }
}
