//! `ip address` and `ip route`: parse as iproute2's ip/ipaddress.c and
//! ip/iproute.c do, change the namespace's [`L3`](crate::l3::L3) as the
//! kernel would, print as iproute2 6.1 prints (`print_addrinfo`,
//! `print_route`).

use crate::args::{invarg, matches, Args, CmdResult, Fail};
use crate::ip::{show_link, ShowOpts};
use crate::l3::{
    self, broadcast, covers, network, Dad, IfAddr, Route, PROTO_BOOT, PROTO_KERNEL, SCOPE_GLOBAL,
    SCOPE_HOST, SCOPE_LINK,
};
use crate::net::Net;
use crate::out::{Out, To};
use sluice_core::device::{DevKind, Device};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `rtnl_rtscope_n2a`.
fn scope_name(s: u8) -> String {
    match s {
        SCOPE_GLOBAL => "global".into(),
        200 => "site".into(),
        SCOPE_LINK => "link".into(),
        SCOPE_HOST => "host".into(),
        255 => "nowhere".into(),
        n => n.to_string(),
    }
}

/// `rtnl_rtscope_a2n`.
fn scope_parse(w: &str) -> Option<u8> {
    match w {
        "global" | "universe" => Some(SCOPE_GLOBAL),
        "site" => Some(200),
        "link" => Some(SCOPE_LINK),
        "host" => Some(SCOPE_HOST),
        "nowhere" => Some(255),
        _ => w.parse().ok(),
    }
}

/// `rtnl_rtprot_n2a` for the protocols /etc/iproute2/rt_protos names.
fn proto_name(p: u8) -> String {
    match p {
        0 => "unspec".into(),
        1 => "redirect".into(),
        PROTO_KERNEL => "kernel".into(),
        PROTO_BOOT => "boot".into(),
        4 => "static".into(),
        8 => "gated".into(),
        9 => "ra".into(),
        10 => "mrt".into(),
        11 => "zebra".into(),
        12 => "bird".into(),
        13 => "dnrouted".into(),
        14 => "xorp".into(),
        15 => "ntk".into(),
        16 => "dhcp".into(),
        18 => "keepalived".into(),
        42 => "babel".into(),
        99 => "openr".into(),
        186 => "bgp".into(),
        187 => "isis".into(),
        188 => "ospf".into(),
        189 => "rip".into(),
        192 => "eigrp".into(),
        n => n.to_string(),
    }
}

fn proto_parse(w: &str) -> Option<u8> {
    (0..=255u8)
        .find(|&p| proto_name(p) == w)
        .or_else(|| w.parse().ok())
}

/// `get_prefix`: ADDR[/LEN] of `family` (0: either); the address with the
/// length, or `None` (then iproute2 says "any valid prefix is expected").
fn prefix(w: &str, family: u8) -> Option<(IpAddr, u8, bool)> {
    let (a, len) = match w.split_once('/') {
        Some((a, l)) => (a, Some(l)),
        None => (w, None),
    };
    let addr: IpAddr = a.parse().ok()?;
    if (family == 4 && addr.is_ipv6()) || (family == 6 && addr.is_ipv4()) {
        return None;
    }
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let plen = match len {
        Some(l) => l.parse::<u8>().ok().filter(|&l| l <= max)?,
        None => max,
    };
    Some((addr, plen, len.is_some()))
}

fn invalid_prefix(w: &str) -> Fail {
    Fail::new(
        1,
        format!("Error: any valid prefix is expected rather than \"{w}\"."),
    )
}

/// `get_addr`: an address of the family (any when 0).
fn inet_address(w: &str, family: u8) -> CmdResult<IpAddr> {
    match prefix(w, family) {
        Some((x, _, false)) => Ok(x),
        _ => Err(Fail::new(
            1,
            format!("Error: inet address is expected rather than \"{w}\"."),
        )),
    }
}

fn no_device(name: &str) -> Fail {
    Fail::new(1, format!("Cannot find device \"{name}\""))
}

fn family_word(a: &IpAddr) -> &'static str {
    if a.is_ipv4() {
        "inet"
    } else {
        "inet6"
    }
}

fn wanted(opts: &ShowOpts, a: &IpAddr) -> bool {
    match opts.family {
        4 => a.is_ipv4(),
        6 => a.is_ipv6(),
        _ => true,
    }
}

// ----- ip address ----------------------------------------------------------

/// `ip address ...` (the words after the object).
pub(crate) fn address(
    net: &mut Net,
    opts: ShowOpts,
    a: &mut Args,
    out: &mut String,
    notes: &mut String,
) -> CmdResult {
    let cmd = a.next().unwrap_or("show");
    if matches(cmd, "add") || matches(cmd, "change") || matches(cmd, "replace") {
        let replace = !matches(cmd, "add");
        addr_modify(net, opts, a, replace)
    } else if matches(cmd, "delete") {
        addr_delete(net, opts, a, notes)
    } else if matches(cmd, "show") || matches(cmd, "list") || matches(cmd, "lst") {
        addr_show(net, opts, a, out)
    } else if matches(cmd, "flush") {
        addr_flush(net, opts, a)
    } else if matches(cmd, "help") {
        Err(Fail::new(255, ADDR_USAGE))
    } else {
        Err(Fail::new(
            255,
            format!("Command \"{cmd}\" is unknown, try \"ip address help\"."),
        ))
    }
}

const ADDR_USAGE: &str = "Usage: ip address {add|change|replace} IFADDR dev IFNAME [ LIFETIME ]
                                                      [ CONFFLAG-LIST ]
       ip address del IFADDR dev IFNAME [mngtmpaddr]
       ip address {save|flush} [ dev IFNAME ] [ scope SCOPE-ID ]
                            [ to PREFIX ] [ FLAG-LIST ] [ label LABEL ] [up]
       ip address [ show [ dev IFNAME ] [ scope SCOPE-ID ] [ master DEVICE ]
                         [ nomaster ]
                         [ type TYPE ] [ to PREFIX ] [ FLAG-LIST ]
                         [ label LABEL ] [up] [ vrf NAME ] ]
       ip address {showdump|restore}
IFADDR := PREFIX | ADDR peer PREFIX
          [ broadcast ADDR ] [ anycast ADDR ]
          [ label IFNAME ] [ scope SCOPE-ID ] [ metric METRIC ]
SCOPE-ID := [ host | link | global | NUMBER ]
FLAG-LIST := [ FLAG-LIST ] FLAG
FLAG  := [ permanent | dynamic | secondary | primary |
           [-]tentative | [-]deprecated | [-]dadfailed | temporary |
           CONFFLAG-LIST ]
CONFFLAG-LIST := [ CONFFLAG-LIST ] CONFFLAG
CONFFLAG  := [ home | nodad | mngtmpaddr | noprefixroute | autojoin ]
LIFETIME := [ valid_lft LFT ] [ preferred_lft LFT ]
LFT := forever | SECONDS";

/// What `ip address add/del` was given.
#[derive(Default)]
struct AddrArgs {
    local: Option<(IpAddr, u8, bool)>,
    dev: Option<String>,
    label: Option<String>,
    brd: Option<String>,
    scope: Option<u8>,
    nodad: bool,
    noprefixroute: bool,
}

fn addr_args(opts: &ShowOpts, a: &mut Args) -> CmdResult<AddrArgs> {
    let mut r = AddrArgs::default();
    while let Some(w) = a.next() {
        match w {
            "peer" | "remote" | "anycast" => {
                return Err(Fail::new(
                    1,
                    format!("sluice: ip address ... {w} is not supported"),
                ))
            }
            "broadcast" | "brd" => r.brd = Some(a.value()?.to_string()),
            "scope" => {
                let v = a.value()?;
                r.scope = Some(scope_parse(v).ok_or_else(|| invarg("invalid scope value.", v))?);
            }
            "dev" => r.dev = Some(a.value()?.to_string()),
            "label" => r.label = Some(a.value()?.to_string()),
            "metric" | "priority" | "preference" => {
                a.value()?;
            }
            "valid_lft" | "preferred_lft" => {
                let v = a.value()?;
                if v != "forever" {
                    return Err(Fail::new(
                        1,
                        format!("sluice: address lifetimes other than forever are not supported ({w} {v})"),
                    ));
                }
            }
            "nodad" => r.nodad = true,
            "noprefixroute" => r.noprefixroute = true,
            "home" | "mngtmpaddr" | "autojoin" | "optimistic" => {}
            w => {
                let w = if w == "local" { a.value()? } else { w };
                if r.local.is_some() {
                    return Err(Fail::new(
                        255,
                        format!("Error: either \"local\" is duplicate, or \"{w}\" is a garbage."),
                    ));
                }
                r.local = Some(prefix(w, opts.family).ok_or_else(|| invalid_prefix(w))?);
            }
        }
    }
    Ok(r)
}

/// The device `ip address add/del` names, and its index in `net.devices`.
fn addr_dev(net: &Net, r: &AddrArgs) -> CmdResult<usize> {
    let Some(d) = &r.dev else {
        return Err(Fail::new(
            1,
            "Not enough information: \"dev\" argument is required.",
        ));
    };
    net.devices
        .iter()
        .position(|x| &x.info.name == d)
        .ok_or_else(|| no_device(d))
}

fn addr_modify(net: &mut Net, opts: ShowOpts, a: &mut Args, replace: bool) -> CmdResult {
    let r = addr_args(&opts, a)?;
    let di = addr_dev(net, &r)?;
    let Some((addr, plen, _)) = r.local else {
        return Err(Fail::new(2, "RTNETLINK answers: Operation not supported"));
    };
    let d = &net.devices[di];
    let ifindex = d.ifindex;
    // `brd +` sets the host bits, `brd -` clears them (for prefixes of 30 and less).
    let brd = match (&r.brd, addr) {
        (None, _) | (_, IpAddr::V6(_)) => None,
        (Some(b), IpAddr::V4(v4)) if b == "+" || b == "-" => (plen < 31).then(|| {
            if b == "+" {
                broadcast(v4, plen)
            } else {
                Ipv4Addr::from(u32::from(v4) & !(u32::MAX >> plen))
            }
        }),
        (Some(b), _) => match inet_address(b, 4)? {
            IpAddr::V4(v) => Some(v),
            IpAddr::V6(_) => None,
        },
    };
    // iproute2's default_scope: loopback addresses are host-scoped.
    let scope = r.scope.unwrap_or(match addr {
        IpAddr::V4(v) if v.octets()[0] == 127 => SCOPE_HOST,
        IpAddr::V6(v) if v.is_loopback() => SCOPE_HOST,
        IpAddr::V6(v) if (v.segments()[0] & 0xffc0) == 0xfe80 => SCOPE_LINK,
        _ => SCOPE_GLOBAL,
    });
    let exists = net
        .l3
        .of(ifindex)
        .any(|x| x.addr == addr && (addr.is_ipv4() || x.plen == plen));
    if exists {
        if !replace {
            return Err(if addr.is_ipv4() {
                Fail::new(2, "Error: ipv4: Address already assigned.")
            } else {
                Fail::new(2, "Error: ipv6: address already assigned.")
            });
        }
        // Replacing an existing address changes only its lifetimes and
        // metric, which sluice keeps at forever and none.
        return Ok(());
    }
    if !net.l3.ipv6 && addr.is_ipv6() {
        return Err(Fail::new(
            2,
            "Error: ipv6: IPv6 is disabled on this device.",
        ));
    }
    let secondary = addr.is_ipv4()
        && net
            .l3
            .of(ifindex)
            .any(|x| x.addr.is_ipv4() && x.plen == plen && covers(x.addr, plen, addr));
    if secondary
        && net.l3.of(ifindex).any(|x| {
            x.addr.is_ipv4() && x.plen == plen && covers(x.addr, plen, addr) && x.scope != scope
        })
    {
        return Err(Fail::new(2, "Error: ipv4: Invalid scope value."));
    }
    let dad = if addr.is_ipv4() || r.nodad || d.kind == DevKind::Loopback {
        Dad::Done
    } else if net.l3.is_ready(ifindex) {
        Dad::Until(net.now + l3::dad_time(net.seed, ifindex, addr))
    } else {
        Dad::Waiting
    };
    let new = IfAddr {
        brd,
        label: if addr.is_ipv4() {
            r.label.unwrap_or_else(|| d.info.name.clone())
        } else {
            String::new()
        },
        secondary,
        nodad: r.nodad,
        noprefixroute: r.noprefixroute,
        dad,
        ..IfAddr::new(ifindex, addr, plen, scope)
    };
    net.l3.insert(new.clone());
    let d = &net.devices[di];
    net.l3.add_subnet_route(&new, d);
    Ok(())
}

fn addr_delete(net: &mut Net, opts: ShowOpts, a: &mut Args, notes: &mut String) -> CmdResult {
    let r = addr_args(&opts, a)?;
    let di = addr_dev(net, &r)?;
    let ifindex = net.devices[di].ifindex;
    let Some((addr, plen, given)) = r.local else {
        return Err(Fail::new(
            1,
            "Not enough information: \"local\" argument is required.",
        ));
    };
    // An IPv4 address without a length matches any length, with a warning.
    let wildcard = !given && addr.is_ipv4();
    if wildcard {
        notes.push_str(&format!(
            "Warning: Executing wildcard deletion to stay compatible with old scripts.\n         \
             Explicitly specify the prefix length ({addr}/{plen}) to avoid this warning.\n         \
             This special behaviour is likely to disappear in further releases,\n         \
             fix your scripts!\n"
        ));
    }
    let found = net.l3.addrs.iter().position(|x| {
        x.ifindex == ifindex
            && x.addr == addr
            && (wildcard || x.plen == plen)
            && r.label.as_ref().is_none_or(|l| *l == x.label)
    });
    match found {
        Some(i) => {
            net.l3.remove(i);
            Ok(())
        }
        None if addr.is_ipv4() => Err(Fail::new(2, "Error: ipv4: Address not found.")),
        None => Err(Fail::new(2, "Error: ipv6: address not found.")),
    }
}

/// `ip address show` filters.
#[derive(Default)]
struct AddrFilter {
    dev: Option<String>,
    up: bool,
    kind: Option<String>,
    scope: Option<u8>,
    label: Option<String>,
    primary: Option<bool>,
}

fn addr_filter(a: &mut Args) -> CmdResult<AddrFilter> {
    let mut f = AddrFilter::default();
    while let Some(w) = a.next() {
        match w {
            "up" => f.up = true,
            "type" => f.kind = Some(a.value()?.to_string()),
            "scope" => {
                // `all` is no filter.
                let v = a.value()?;
                f.scope = match scope_parse(v) {
                    Some(x) => Some(x),
                    None if v == "all" => None,
                    None => return Err(invarg("invalid \"scope\"\n\n", v)),
                };
            }
            "label" => f.label = Some(a.value()?.to_string()),
            "primary" => f.primary = Some(true),
            "secondary" => f.primary = Some(false),
            "permanent" => {}
            w => {
                let name = if w == "dev" { a.value()? } else { w };
                if f.dev.is_some() {
                    return Err(Fail::new(
                        255,
                        format!("Error: either \"dev\" is duplicate, or \"{name}\" is a garbage."),
                    ));
                }
                f.dev = Some(name.to_string());
            }
        }
    }
    Ok(f)
}

impl AddrFilter {
    fn keeps(&self, x: &IfAddr) -> bool {
        self.scope.is_none_or(|s| s == x.scope)
            && self.label.as_ref().is_none_or(|l| *l == x.label)
            && self.primary.is_none_or(|p| p != x.secondary)
    }
}

fn addr_show(net: &mut Net, opts: ShowOpts, a: &mut Args, out: &mut String) -> CmdResult {
    let f = addr_filter(a)?;
    if let Some(n) = &f.dev {
        if net.dev(n).is_none() {
            return Err(Fail::new(1, format!("Device \"{n}\" does not exist.")));
        }
    }
    let mut o = Out::new(opts.json, opts.pretty);
    for d in &net.devices {
        let mine: Vec<&IfAddr> = net
            .l3
            .of(d.ifindex)
            .filter(|x| x.addr.is_ipv4())
            .chain(net.l3.of(d.ifindex).filter(|x| x.addr.is_ipv6()))
            .filter(|x| wanted(&opts, &x.addr) && f.keeps(x))
            .collect();
        if f.dev.as_ref().is_some_and(|n| *n != d.info.name)
            || (f.up && !d.up)
            || f
                .kind
                .as_ref()
                .is_some_and(|k| Some(k.as_str()) != crate::ip::info_kind(&d.kind))
            // `ipaddr_filter`: a device whose addresses all fail goes; one
            // with none at all stays unless a family was asked for.
            || (mine.is_empty() && (opts.family != 0 || net.l3.of(d.ifindex).next().is_some()))
        {
            continue;
        }
        // One line per address, or under a label filter the addresses
        // alone (`no_link`).
        if (opts.oneline || f.label.is_some()) && !opts.brief {
            for x in &mine {
                o.open("");
                let mut text = if opts.oneline {
                    format!("{}: {}", d.ifindex, d.info.name)
                } else {
                    String::new()
                };
                print_addr(net, x, &opts, &mut o, &mut text);
                o.text(&text);
                o.close();
            }
            continue;
        }
        let lines = |o: &mut Out, text: &mut String| {
            if opts.brief {
                o.open_arr("addr_info");
                for x in &mine {
                    text.push_str(&format!("{}/{} ", x.addr, x.plen));
                    o.open("");
                    o.str(To::Json, "local", "", &x.addr.to_string());
                    o.uint(To::Json, "prefixlen", "", x.plen as u64);
                    o.close();
                }
                o.close();
                return;
            }
            o.open_arr("addr_info");
            for x in &mine {
                o.open("");
                print_addr(net, x, &opts, o, text);
                o.close();
            }
            o.close();
        };
        // `ip -6` of all devices asks IPv6 for the links, whose dump has
        // no qdisc or group; one device is asked for whole.
        let v6_dump = opts.family == 6 && f.dev.is_none();
        let opts = ShowOpts {
            addr: true,
            v6_dump,
            ..opts
        };
        show_link(net, d, opts, &mut o, Some(&lines));
    }
    out.push_str(&o.finish());
    Ok(())
}

/// `print_addrinfo` for one address: text appended to `text` (ending in a
/// newline), JSON members into the open object.
fn print_addr(net: &Net, x: &IfAddr, opts: &ShowOpts, o: &mut Out, text: &mut String) {
    let nl = if opts.oneline { "\\" } else { "\n" };
    text.push_str(&format!(
        "    {} {}/{} ",
        family_word(&x.addr),
        x.addr,
        x.plen
    ));
    o.str(To::Json, "family", "", family_word(&x.addr));
    o.str(To::Json, "local", "", &x.addr.to_string());
    o.uint(To::Json, "prefixlen", "", x.plen as u64);
    if let Some(b) = x.brd {
        text.push_str(&format!("brd {b} "));
        o.str(To::Json, "broadcast", "", &b.to_string());
    }
    let scope = scope_name(x.scope);
    text.push_str(&format!("scope {scope} "));
    o.str(To::Json, "scope", "", &scope);
    // ifa_flag_names, in bit order.
    for (on, name) in [
        (x.secondary, "secondary"),
        (x.nodad, "nodad"),
        (x.tentative(net.now), "tentative"),
        (x.noprefixroute, "noprefixroute"),
    ] {
        if on {
            text.push_str(&format!("{name} "));
            o.bool(To::Json, name, "", true);
        }
    }
    if x.addr.is_ipv4() {
        text.push_str(&x.label);
        o.str(To::Json, "label", "", &x.label);
    }
    text.push_str(&format!(
        "{nl}       valid_lft forever preferred_lft forever\n"
    ));
    o.uint(To::Json, "valid_life_time", "", u32::MAX as u64);
    o.uint(To::Json, "preferred_life_time", "", u32::MAX as u64);
}

fn addr_flush(net: &mut Net, opts: ShowOpts, a: &mut Args) -> CmdResult {
    if a.is_empty() {
        return Err(Fail::new(1, "Flush requires arguments."));
    }
    let f = addr_filter(a)?;
    let Some(name) = &f.dev else {
        return Err(Fail::new(1, "Flush requires arguments."));
    };
    let ifindex = net
        .dev(name)
        .ok_or_else(|| Fail::new(1, format!("Device \"{name}\" does not exist.")))?
        .ifindex;
    while let Some(i) = net
        .l3
        .addrs
        .iter()
        .position(|x| x.ifindex == ifindex && wanted(&opts, &x.addr) && f.keeps(x))
    {
        net.l3.remove(i);
    }
    Ok(())
}

// ----- ip route ------------------------------------------------------------

/// `ip route ...` (the words after the object).
pub(crate) fn route(net: &mut Net, opts: ShowOpts, a: &mut Args, out: &mut String) -> CmdResult {
    let cmd = a.next().unwrap_or("show");
    if matches(cmd, "add")
        || matches(cmd, "change")
        || cmd == "chg"
        || matches(cmd, "replace")
        || matches(cmd, "prepend")
        || matches(cmd, "append")
    {
        route_modify(net, opts, a, cmd)
    } else if matches(cmd, "delete") {
        route_delete(net, opts, a)
    } else if matches(cmd, "show") || matches(cmd, "list") || matches(cmd, "lst") {
        route_show(net, opts, a, out)
    } else if matches(cmd, "help") {
        Err(Fail::new(255, ROUTE_USAGE))
    } else if matches(cmd, "flush")
        || matches(cmd, "get")
        || matches(cmd, "save")
        || matches(cmd, "restore")
    {
        Err(Fail::new(
            1,
            format!("sluice: ip route {cmd} is not supported (add, change, replace, append, delete and show are)"),
        ))
    } else {
        Err(Fail::new(
            255,
            format!("Command \"{cmd}\" is unknown, try \"ip route help\"."),
        ))
    }
}

/// `ip route help` (iproute2 6.1's text).
const ROUTE_USAGE: &str = include_str!("ip_route_usage.txt");

/// What `ip route add/del/show` was given.
#[derive(Default)]
struct RouteArgs {
    dst: Option<(IpAddr, u8)>,
    default: bool,
    via: Option<IpAddr>,
    dev: Option<String>,
    metric: Option<u32>,
    proto: Option<u8>,
    scope: Option<u8>,
    src: Option<IpAddr>,
    table: Option<String>,
}

fn route_args(opts: &ShowOpts, a: &mut Args, show: bool) -> CmdResult<RouteArgs> {
    let mut r = RouteArgs::default();
    while let Some(w) = a.next() {
        match w {
            "via" => {
                let v = a.value()?;
                r.via = Some(inet_address(v, opts.family)?);
            }
            "dev" | "oif" => r.dev = Some(a.value()?.to_string()),
            "metric" | "priority" | "preference" => {
                let v = a.value()?;
                let bad = || invarg("\"metric\" value is invalid\n\n", v);
                r.metric = Some(v.parse().map_err(|_| bad())?);
            }
            "proto" | "protocol" => {
                let v = a.value()?;
                let bad = || invarg("\"protocol\" value is invalid\n\n", v);
                r.proto = Some(proto_parse(v).ok_or_else(bad)?);
            }
            "scope" => {
                let v = a.value()?;
                r.scope =
                    Some(scope_parse(v).ok_or_else(|| invarg("invalid \"scope\" value\n\n", v))?);
            }
            "src" => r.src = Some(inet_address(a.value()?, opts.family)?),
            "table" => r.table = Some(a.value()?.to_string()),
            "unicast" | "to" => {}
            w => {
                if r.dst.is_some() || r.default {
                    if show {
                        // `ip route show dev X` style: a bare word is a device.
                        r.dev = Some(w.to_string());
                        continue;
                    }
                    return Err(Fail::new(
                        255,
                        format!("Error: either \"to\" is duplicate, or \"{w}\" is a garbage."),
                    ));
                }
                if w == "default" || w == "all" {
                    r.default = w == "default";
                    if w == "all" {
                        continue;
                    }
                } else {
                    let (x, plen, _) = prefix(w, opts.family).ok_or_else(|| invalid_prefix(w))?;
                    r.dst = Some((x, plen));
                }
            }
        }
    }
    Ok(r)
}

/// The destination, defaulting to the family's `default`.
fn dst_of(r: &RouteArgs, opts: &ShowOpts) -> (IpAddr, u8) {
    match r.dst {
        Some((x, plen)) => (network(x, plen), plen),
        None => {
            let v6 = opts.family == 6 || r.via.is_some_and(|v| v.is_ipv6());
            (
                if v6 {
                    IpAddr::V6(Ipv6Addr::UNSPECIFIED)
                } else {
                    IpAddr::V4(Ipv4Addr::UNSPECIFIED)
                },
                0,
            )
        }
    }
}

fn check_table(r: &RouteArgs) -> CmdResult {
    match r.table.as_deref() {
        None | Some("main") | Some("254") => Ok(()),
        Some(t) => Err(Fail::new(
            1,
            format!("sluice: routes in table {t} are not supported (only main)"),
        )),
    }
}

fn route_modify(net: &mut Net, opts: ShowOpts, a: &mut Args, cmd: &str) -> CmdResult {
    let r = route_args(&opts, a, false)?;
    if r.dst.is_none() && !r.default {
        return Err(Fail::new(255, ROUTE_USAGE));
    }
    check_table(&r)?;
    let (dst, plen) = dst_of(&r, &opts);
    let v6 = dst.is_ipv6();
    let dev = match &r.dev {
        Some(n) => Some(net.dev(n).ok_or_else(|| no_device(n))?),
        None => None,
    };
    // fib_check_nh: a gateway must be on a link route of an up device.
    let ifindex = match (r.via, dev) {
        (Some(gw), d) => {
            let onlink = all_routes(net, v6).into_iter().find(|x| {
                x.via.is_none()
                    && covers(x.dst, x.plen, gw)
                    && d.is_none_or(|d| d.ifindex == x.ifindex)
                    && net
                        .devices
                        .iter()
                        .any(|dd| dd.ifindex == x.ifindex && dd.up)
            });
            match onlink {
                Some(x) => x.ifindex,
                None if v6 => {
                    return Err(Fail::new(
                        2,
                        "Error: Nexthop has invalid gateway or device mismatch.",
                    ))
                }
                None => return Err(Fail::new(2, "Error: Nexthop has invalid gateway.")),
            }
        }
        (None, Some(d)) => {
            if !d.up {
                return Err(Fail::new(2, "Error: Device for nexthop is not up."));
            }
            d.ifindex
        }
        (None, None) => return Err(Fail::new(2, "RTNETLINK answers: No such device")),
    };
    if let Some(s) = r.src {
        if !net.l3.is_local(s) {
            return Err(Fail::new(2, "Error: Invalid prefsrc address."));
        }
    }
    let route = Route {
        dst,
        plen,
        via: r.via,
        ifindex,
        proto: r.proto.unwrap_or(PROTO_BOOT),
        scope: r.scope.unwrap_or(if r.via.is_none() && !v6 {
            SCOPE_LINK
        } else {
            SCOPE_GLOBAL
        }),
        src: r.src,
        metric: r.metric.unwrap_or(if v6 { 1024 } else { 0 }),
    };
    let same = |x: &Route| x.dst == route.dst && x.plen == route.plen && x.metric == route.metric;
    let exists = net.l3.routes.iter().position(same);
    let taken = exists.is_some() || (v6 && derived_v6(net).iter().any(same));
    if matches(cmd, "add") && taken {
        return Err(Fail::new(2, "RTNETLINK answers: File exists"));
    }
    match exists {
        Some(i) if matches(cmd, "change") || matches(cmd, "replace") => net.l3.routes[i] = route,
        None if matches(cmd, "change") => {
            return Err(Fail::new(2, "RTNETLINK answers: No such file or directory"))
        }
        _ => net.l3.insert_route(route, matches(cmd, "prepend")),
    }
    Ok(())
}

fn route_delete(net: &mut Net, opts: ShowOpts, a: &mut Args) -> CmdResult {
    let r = route_args(&opts, a, false)?;
    check_table(&r)?;
    let (dst, plen) = dst_of(&r, &opts);
    let dev = match &r.dev {
        Some(n) => Some(net.dev(n).ok_or_else(|| no_device(n))?.ifindex),
        None => None,
    };
    let found = net.l3.routes.iter().position(|x| {
        x.dst == dst
            && x.plen == plen
            && r.metric.is_none_or(|m| m == x.metric)
            && r.via.is_none_or(|v| Some(v) == x.via)
            && dev.is_none_or(|d| d == x.ifindex)
            && r.proto.is_none_or(|p| p == x.proto)
            && r.src.is_none_or(|s| Some(s) == x.src)
    });
    match found {
        Some(i) => {
            net.l3.routes.remove(i);
            Ok(())
        }
        None => Err(Fail::new(2, "RTNETLINK answers: No such process")),
    }
}

/// A route as listed: its table and type besides the route.
struct Listed {
    route: Route,
    /// "local", "broadcast", "multicast"; `None` for unicast.
    kind: Option<&'static str>,
    local_table: bool,
}

/// The IPv6 routes the kernel makes from addresses: each address's prefix
/// on an up device (`fe80::/64` for link-locals).
fn derived_v6(net: &Net) -> Vec<Route> {
    let mut v: Vec<Route> = vec![];
    for x in net.l3.addrs.iter().filter(|x| x.addr.is_ipv6()) {
        let Some(d) = net.devices.iter().find(|d| d.ifindex == x.ifindex) else {
            continue;
        };
        if !d.up || x.plen >= 128 || x.noprefixroute || d.kind == DevKind::Loopback {
            continue;
        }
        let dst = network(x.addr, x.plen);
        if v.iter()
            .any(|r| r.dst == dst && r.plen == x.plen && r.ifindex == x.ifindex)
        {
            continue;
        }
        v.push(Route {
            dst,
            plen: x.plen,
            via: None,
            ifindex: x.ifindex,
            proto: PROTO_KERNEL,
            scope: SCOPE_GLOBAL,
            src: None,
            metric: 256,
        });
    }
    v
}

/// The main table of a family, as the kernel would dump it: IPv4 by
/// destination, longer prefixes first on the same destination, then by
/// metric (`fib_trie`); IPv6 by destination too (`fib6` tree), routes to
/// the same prefix in the order they came.
fn all_routes(net: &Net, v6: bool) -> Vec<Route> {
    let mut v: Vec<Route> = if v6 {
        derived_v6(net)
            .into_iter()
            .chain(net.l3.routes.iter().filter(|r| r.dst.is_ipv6()).cloned())
            .collect()
    } else {
        net.l3
            .routes
            .iter()
            .filter(|r| r.dst.is_ipv4())
            .cloned()
            .collect()
    };
    // The stored routes are in order already; the derived ones join them.
    let key = |r: &Route| -> (u128, u8, u32) {
        let d = match r.dst {
            IpAddr::V4(a) => u32::from(a) as u128,
            IpAddr::V6(a) => u128::from(a),
        };
        (d, u8::MAX - r.plen, r.metric)
    };
    v.sort_by_key(key);
    v
}

/// The local table (`local`, `broadcast` and `multicast` routes), derived
/// from the addresses of up devices as `fib_add_ifaddr` and addrconf add them.
fn local_routes(net: &Net, v6: bool) -> Vec<Listed> {
    let mut v = vec![];
    let up = |i: u32| net.devices.iter().find(|d| d.ifindex == i).filter(|d| d.up);
    let route =
        |dst: IpAddr, plen: u8, ifindex: u32, scope: u8, src: Option<IpAddr>, metric: u32| Route {
            dst,
            plen,
            via: None,
            ifindex,
            proto: PROTO_KERNEL,
            scope,
            src,
            metric,
        };
    if !v6 {
        for x in net.l3.addrs.iter().filter(|x| x.addr.is_ipv4()) {
            // `local` routes stay while the device is down; broadcast ones
            // come and go with it.
            let Some(d) = net.devices.iter().find(|d| d.ifindex == x.ifindex) else {
                continue;
            };
            let IpAddr::V4(a4) = x.addr else { continue };
            // The primary of the subnet is every such route's source.
            let prim = net
                .l3
                .of(x.ifindex)
                .find(|p| {
                    !p.secondary
                        && p.addr.is_ipv4()
                        && p.plen == x.plen
                        && covers(p.addr, p.plen, x.addr)
                })
                .map_or(x.addr, |p| p.addr);
            let mut add = |kind, dst: IpAddr, plen: u8, scope| {
                v.push(Listed {
                    route: route(dst, plen, x.ifindex, scope, Some(prim), 0),
                    kind: Some(kind),
                    local_table: true,
                })
            };
            add("local", x.addr, 32, SCOPE_HOST);
            if !x.secondary && x.plen < 32 && d.kind == DevKind::Loopback && !x.noprefixroute {
                add("local", x.subnet(), x.plen, SCOPE_HOST);
            }
            if !d.up {
                continue;
            }
            if let Some(b) = x.brd.filter(|b| *b != Ipv4Addr::BROADCAST) {
                add("broadcast", IpAddr::V4(b), 32, SCOPE_LINK);
            }
            if !x.secondary && x.plen < 31 {
                add(
                    "broadcast",
                    IpAddr::V4(broadcast(a4, x.plen)),
                    32,
                    SCOPE_LINK,
                );
            }
        }
        v.dedup_by(|a, b| a.route == b.route && a.kind == b.kind);
    } else {
        for x in net.l3.addrs.iter().filter(|x| x.addr.is_ipv6()) {
            if up(x.ifindex).is_some() && !x.tentative(net.now) {
                v.push(Listed {
                    route: route(x.addr, 128, x.ifindex, SCOPE_GLOBAL, None, 0),
                    kind: Some("local"),
                    local_table: true,
                });
            }
        }
        if net.l3.ipv6 {
            for d in net
                .devices
                .iter()
                .filter(|d| d.up && d.kind != DevKind::Loopback)
            {
                if net.l3.of(d.ifindex).any(|x| x.addr.is_ipv6()) {
                    v.push(Listed {
                        route: route(
                            "ff00::".parse().expect("literal"),
                            8,
                            d.ifindex,
                            SCOPE_GLOBAL,
                            None,
                            256,
                        ),
                        kind: Some("multicast"),
                        local_table: true,
                    });
                }
            }
        }
    }
    let key = |l: &Listed| -> (u128, u8) {
        match l.route.dst {
            IpAddr::V4(a) => (u32::from(a) as u128, 32 - l.route.plen),
            IpAddr::V6(a) => (u128::from(a), 128 - l.route.plen),
        }
    };
    v.sort_by_key(key);
    v
}

fn route_show(net: &mut Net, opts: ShowOpts, a: &mut Args, out: &mut String) -> CmdResult {
    let r = route_args(&opts, a, true)?;
    let dev = match &r.dev {
        Some(n) => Some(net.dev(n).ok_or_else(|| no_device(n))?.ifindex),
        None => None,
    };
    let (main, local) = match r.table.as_deref() {
        None | Some("main") | Some("254") => (true, false),
        Some("local") | Some("255") => (false, true),
        Some("all") | Some("0") => (true, true),
        Some(t) => {
            return Err(Fail::new(
                1,
                format!("sluice: routes in table {t} are not supported (only main and local)"),
            ))
        }
    };
    let families: &[bool] = match opts.family {
        4 => &[false],
        6 => &[true],
        // `table all` without a family lists both; otherwise IPv4.
        _ if main && local => &[false, true],
        _ => &[false],
    };
    let mut o = Out::new(opts.json, opts.pretty);
    for &v6 in families {
        let mut listed: Vec<Listed> = vec![];
        if main {
            listed.extend(all_routes(net, v6).into_iter().map(|route| Listed {
                route,
                kind: None,
                local_table: false,
            }));
        }
        if local {
            listed.extend(local_routes(net, v6));
        }
        for l in listed {
            let x = &l.route;
            if dev.is_some_and(|d| d != x.ifindex)
                || r.dst
                    .is_some_and(|(d, p)| !(x.plen == p && x.dst == network(d, p)))
                || r.proto.is_some_and(|p| p != x.proto)
                || r.scope.is_some_and(|sc| sc != x.scope)
            {
                continue;
            }
            let Some(d) = net.devices.iter().find(|d| d.ifindex == x.ifindex) else {
                continue;
            };
            // What a filter fixes is not printed.
            let omit = Omit {
                dev: dev.is_some(),
                proto: r.proto.is_some(),
                scope: r.scope.is_some(),
                table: !(main && local),
            };
            print_route(net, &l, d, omit, &mut o);
        }
    }
    out.push_str(&o.finish());
    Ok(())
}

/// The fields `ip route show` leaves out because its filter fixes them.
#[derive(Clone, Copy)]
struct Omit {
    dev: bool,
    proto: bool,
    scope: bool,
    table: bool,
}

/// `print_route` for one route.
fn print_route(net: &Net, l: &Listed, d: &Device, omit: Omit, o: &mut Out) {
    let x = &l.route;
    let v6 = x.dst.is_ipv6();
    o.open("");
    if let Some(k) = l.kind {
        o.str(To::Any, "type", &format!("{k} "), k);
    }
    let dst = if x.plen == 0 {
        "default".to_string()
    } else if x.plen == if v6 { 128 } else { 32 } {
        x.dst.to_string()
    } else {
        format!("{}/{}", x.dst, x.plen)
    };
    o.str(To::Any, "dst", &format!("{dst} "), &dst);
    if let Some(g) = x.via {
        o.str(To::Any, "gateway", &format!("via {g} "), &g.to_string());
    }
    if !omit.dev {
        o.str(
            To::Any,
            "dev",
            &format!("dev {} ", d.info.name),
            &d.info.name,
        );
    }
    if l.local_table && !omit.table {
        o.str(To::Any, "table", "table local ", "local");
    }
    if x.proto != PROTO_BOOT && !omit.proto {
        let p = proto_name(x.proto);
        o.str(To::Any, "protocol", &format!("proto {p} "), &p);
    }
    if x.scope != SCOPE_GLOBAL && !omit.scope {
        let s = scope_name(x.scope);
        o.str(To::Any, "scope", &format!("scope {s} "), &s);
    }
    if let Some(s) = x.src {
        o.str(To::Any, "prefsrc", &format!("src {s} "), &s.to_string());
    }
    if x.metric != 0 || v6 {
        o.uint(
            To::Any,
            "metric",
            &format!("metric {} ", x.metric),
            x.metric as u64,
        );
    }
    o.open_arr("flags");
    if !l3::carrier(&net.devices, d) && l.kind.is_none() {
        o.str(To::Any, "", "linkdown ", "linkdown");
    }
    o.close();
    if v6 {
        o.str(To::Any, "pref", "pref medium", "medium");
    }
    o.text("\n");
    o.close();
}
