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
pub(crate) fn route(
    net: &mut Net,
    opts: ShowOpts,
    a: &mut Args,
    out: &mut String,
    notes: &mut String,
) -> CmdResult {
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
    } else if matches(cmd, "get") {
        route_get(net, opts, a, out, notes)
    } else if matches(cmd, "flush") || matches(cmd, "save") || matches(cmd, "restore") {
        Err(Fail::new(
            1,
            format!("sluice: ip route {cmd} is not supported (add, change, replace, append, delete, show and get are)"),
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
#[derive(Clone)]
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
#[derive(Clone, Copy, Default)]
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

// ----- ip route get ----------------------------------------------------------

/// What `ip route get` asks for (`iproute_get`'s options).
#[derive(Default)]
struct GetArgs {
    dst: Option<IpAddr>,
    from: Option<IpAddr>,
    oif: Option<u32>,
    /// The input device (`iif`), by index.
    iif: Option<u32>,
    mark: u32,
    uid: Option<u32>,
    fibmatch: bool,
    connected: bool,
}

impl GetArgs {
    /// How many answers `ip route get` prints: `connected` asks again from
    /// the chosen source (unless one was given), and gets the same answer.
    fn answers(&self) -> usize {
        if self.connected && self.from.is_none() {
            2
        } else {
            1
        }
    }
}

/// One answer of the lookup: the kernel's reply to RTM_GETROUTE.
struct Got {
    /// `local`, `broadcast` or `multicast`; `None` for unicast.
    kind: Option<&'static str>,
    via: Option<IpAddr>,
    ifindex: u32,
    /// The source the kernel chose (printed unless `from` was given).
    src: Ipv4Addr,
    /// `RTCF_*` flags as iproute2 names them in the `cache` line.
    cache: &'static [&'static str],
    /// The FIB entry that matched (`fibmatch`), if one did.
    fib: Option<Listed>,
}

fn unreachable() -> Fail {
    Fail::new(2, "RTNETLINK answers: Network is unreachable")
}

/// `ip route get ADDR [from ADDR] [oif|dev DEV] [iif DEV] [mark N] [uid N]
/// [tos T] [fibmatch] [connected]`: the route the kernel would pick for a
/// packet this host sends to ADDR (IPv4), printed as iproute2 prints the
/// kernel's answer. Modelled on `ip_route_output_key_hash_rcu`: a local
/// address (or 0.0.0.0) goes out of `lo`; otherwise the longest match in
/// the local table, then in the main one (lowest metric among equals); a
/// limited broadcast or multicast destination takes that route's device
/// without its gateway; with `oif` only routes through that device count,
/// and with none the destination is taken to be on that link. The source is
/// the route's `src`, else `inet_select_addr`'s pick.
fn route_get(
    net: &mut Net,
    opts: ShowOpts,
    a: &mut Args,
    out: &mut String,
    notes: &mut String,
) -> CmdResult {
    let g = get_args(net, &opts, a, notes)?;
    let dst = match g.dst {
        None => return Err(Fail::new(1, "need at least a destination address")),
        Some(IpAddr::V6(d)) => return route_get6(net, opts, &g, d, out),
        Some(IpAddr::V4(d)) => d,
    };
    if g.from.is_some_and(|f| !net.l3.is_local(f)) {
        return Err(unreachable());
    }
    if g.iif.is_some() {
        // An input route needs forwarding, off in a new namespace.
        return Err(Fail::new(2, "RTNETLINK answers: Invalid argument"));
    }
    let got = lookup(net, dst, &g).ok_or_else(unreachable)?;
    let uid = g.uid.unwrap_or_else(caller_uid);
    let mut o = Out::new(opts.json, opts.pretty);
    if g.fibmatch {
        // No FIB entry matched (0.0.0.0, an on-link guess through `oif`).
        let Some(l) = &got.fib else {
            return Err(Fail::new(2, "RTNETLINK answers: No route to host"));
        };
        let d = net.devices.iter().find(|d| d.ifindex == l.route.ifindex);
        let d = d.ok_or_else(unreachable)?;
        // The answer's type: a multicast destination shows the default
        // route as `multicast default ...`.
        let shown = Listed {
            kind: got.kind,
            ..l.clone()
        };
        let omit = Omit {
            table: true,
            ..Omit::default()
        };
        print_route(net, &shown, d, omit, &mut o);
    } else {
        for _ in 0..g.answers() {
            print_got(net, dst, &g, &got, uid, &mut o);
        }
    }
    out.push_str(&o.finish());
    Ok(())
}

/// `ip -6 route get`: `ip6_route_output`'s choice, as iproute2 prints the
/// answer. The local table first (the addresses' `local` routes and each
/// device's `multicast ff00::/8`), then the main one, the longest match
/// through `oif` when given (no on-link guess, unlike IPv4); a local
/// destination goes out of `lo`. The source is the route's `src`, else
/// the RFC 6724 pick of [`select_addr6`] for the route's device. `from`
/// is printed as given (the kernel does not check it), `iif` answers the
/// input route (no source), and `mark`/`uid` are not echoed, as the
/// kernel's IPv6 answer has none.
fn route_get6(
    net: &Net,
    opts: ShowOpts,
    g: &GetArgs,
    dst: Ipv6Addr,
    out: &mut String,
) -> CmdResult {
    let d = IpAddr::V6(dst);
    let fib = (!dst.is_unspecified())
        .then(|| {
            longest_match(local_routes(net, true), d, g.oif).or_else(|| {
                let main = all_routes(net, true).into_iter().map(|route| Listed {
                    route,
                    kind: None,
                    local_table: false,
                });
                longest_match(main.collect(), d, g.oif)
            })
        })
        .flatten()
        .ok_or_else(unreachable)?;
    let dev_of = |i: u32| net.devices.iter().find(|x| x.ifindex == i);
    let route_dev = dev_of(fib.route.ifindex).ok_or_else(unreachable)?;
    let mut o = Out::new(opts.json, opts.pretty);
    if g.fibmatch {
        print_route(net, &fib, route_dev, Omit::default(), &mut o);
        out.push_str(&o.finish());
        return Ok(());
    }
    let dev = match fib.kind {
        Some("local") => net.devices.iter().find(|x| x.kind == DevKind::Loopback),
        _ => Some(route_dev),
    }
    .map_or("", |x| x.info.name.as_str());
    let src = match (g.iif, fib.route.src) {
        (Some(_), _) => None,
        (None, Some(IpAddr::V6(s))) => Some(s),
        _ => select_addr6(net, fib.route.ifindex, dst),
    };
    for _ in 0..g.answers() {
        o.open("");
        if let Some(k) = fib.kind {
            o.str(To::Any, "type", &format!("{k} "), k);
        }
        o.str(To::Any, "dst", &format!("{dst} "), &dst.to_string());
        let from = g.from.map_or("::".to_string(), |f| f.to_string());
        o.str(To::Any, "from", &format!("from {from} "), &from);
        if let Some(v) = fib.route.via {
            o.str(To::Any, "gateway", &format!("via {v} "), &v.to_string());
        }
        o.str(To::Any, "dev", &format!("dev {dev} "), dev);
        if fib.local_table {
            o.str(To::Any, "table", "table local ", "local");
        }
        if fib.route.proto != PROTO_BOOT {
            let p = proto_name(fib.route.proto);
            o.str(To::Any, "protocol", &format!("proto {p} "), &p);
        }
        if let Some(s) = src {
            o.str(To::Any, "prefsrc", &format!("src {s} "), &s.to_string());
        }
        let m = fib.route.metric;
        o.uint(To::Any, "metric", &format!("metric {m} "), m as u64);
        o.open_arr("flags");
        o.close();
        if let Some(i) = g.iif.and_then(dev_of) {
            let n = &i.info.name;
            o.str(To::Any, "iif", &format!("iif {n} "), n);
        }
        o.str(To::Any, "pref", "pref medium", "medium");
        o.text("\n");
        o.close();
    }
    out.push_str(&o.finish());
    Ok(())
}

/// The scope an IPv6 address has as a source or destination
/// (`__ipv6_addr_src_scope`): a multicast address's own, 2 (link) for
/// link-local addresses and `::1`, 5 for site-local, 14 (global) for the rest.
fn scope6(a: Ipv6Addr) -> i32 {
    let s = a.segments();
    if a.is_multicast() {
        (s[0] & 0x0f) as i32
    } else if s[0] & 0xffc0 == 0xfe80 || a == Ipv6Addr::LOCALHOST {
        2
    } else if s[0] & 0xffc0 == 0xfec0 {
        5
    } else {
        14
    }
}

/// The label of the kernel's default address-selection policy table
/// (RFC 6724's, `addrlabel.c`): the longest prefix that covers `a`.
fn label6(a: Ipv6Addr) -> u8 {
    const TABLE: [(u128, u8, u8); 10] = [
        (0x0000_0000_0000_0000_0000_0000_0000_0001, 128, 0),
        (0x0000_0000_0000_0000_0000_ffff_0000_0000, 96, 4),
        (0, 96, 3),
        (0x2001_0010 << 96, 28, 7),
        (0x2001_0000 << 96, 32, 6),
        (0x2002 << 112, 16, 2),
        (0x3ffe << 112, 16, 12),
        (0xfec0 << 112, 10, 11),
        (0xfc00 << 112, 7, 5),
        (0, 0, 1),
    ];
    let x = u128::from(a);
    let covers = |p: u128, len: u8| len == 0 || (x ^ p) >> (128 - len as u32) == 0;
    TABLE
        .iter()
        .find(|(p, len, _)| covers(*p, *len))
        .map_or(1, |t| t.2)
}

/// A candidate source's standing under RFC 6724's rules, compared in order.
type Rank6 = (bool, i32, bool, bool, bool, u32);

/// `ipv6_dev_get_saddr`: the source for `dst` sent out of `ifindex`. The
/// candidates are the addresses of that device (for a multicast or
/// link-scoped destination) or of every device, in device and list
/// order, less tentative ones; RFC 6724's rules rank them in turn — the
/// destination itself, enough but the narrowest scope, the outgoing
/// device, the same policy label, both ORCHID or neither, the longest
/// common prefix (up to the address's prefix length) — and the first
/// candidate of the best rank wins. (Deprecated, home, temporary and
/// optimistic addresses are not modelled, so their rules tie.)
fn select_addr6(net: &Net, ifindex: u32, dst: Ipv6Addr) -> Option<Ipv6Addr> {
    let dscope = scope6(dst);
    let only_oif = dst.is_multicast() || dscope <= 2;
    let orchid = |a: Ipv6Addr| u128::from(a) >> 100 == 0x2001_0010 >> 4;
    let mut best: Option<(Rank6, Ipv6Addr)> = None;
    for d in net
        .devices
        .iter()
        .filter(|d| !only_oif || d.ifindex == ifindex)
    {
        for x in net.l3.of(d.ifindex).filter(|x| !x.tentative(net.now)) {
            let IpAddr::V6(a) = x.addr else { continue };
            if a.is_unspecified() || a.is_multicast() {
                continue;
            }
            let sc = scope6(a);
            let scope = if sc >= dscope { -sc } else { sc - 128 };
            let common = (u128::from(a) ^ u128::from(dst)).leading_zeros();
            let rank = (
                a == dst,
                scope,
                d.ifindex == ifindex,
                label6(a) == label6(dst),
                orchid(a) == orchid(dst),
                common.min(x.plen as u32),
            );
            if best.is_none_or(|(b, _)| rank > b) {
                best = Some((rank, a));
            }
        }
    }
    best.map(|(_, a)| a)
}

/// `NEXT_ARG()`.
fn need<'a>(a: &mut Args<'a>) -> CmdResult<&'a str> {
    a.next().ok_or_else(crate::args::incomplete)
}

fn get_args(net: &Net, opts: &ShowOpts, a: &mut Args, notes: &mut String) -> CmdResult<GetArgs> {
    let mut g = GetArgs::default();
    let mut family = opts.family;
    let mut oif = None;
    let mut iif = None;
    while let Some(w) = a.next() {
        if w == "tos" || matches(w, "dsfield") {
            let v = need(a)?;
            if dsfield(v).is_none() {
                return Err(invarg("TOS value is invalid\n\n", v));
            }
        } else if matches(w, "from") {
            let v = need(a)?;
            if matches(v, "help") {
                return Err(Fail::new(255, ROUTE_USAGE));
            }
            let (x, _) = get_prefix(v, family)?;
            family = if x.is_ipv4() { 4 } else { 6 };
            g.from = Some(x);
        } else if matches(w, "iif") {
            iif = Some(need(a)?);
        } else if matches(w, "mark") {
            let v = need(a)?;
            g.mark = crate::args::get_u32(v, 0).ok_or_else(|| invarg("invalid mark value", v))?;
        } else if matches(w, "oif") || w == "dev" {
            oif = Some(need(a)?);
        } else if matches(w, "notify") {
        } else if matches(w, "connected") {
            g.connected = true;
        } else if matches(w, "vrf") {
            let v = need(a)?;
            return Err(invarg("Invalid VRF\n\n", v));
        } else if matches(w, "uid") {
            let v = need(a)?;
            g.uid = Some(crate::args::get_u32(v, 0).ok_or_else(|| invarg("invalid UID\n\n", v))?);
        } else if matches(w, "fibmatch") {
            g.fibmatch = true;
        } else {
            let w = if w == "to" { need(a)? } else { w };
            if matches(w, "help") {
                return Err(Fail::new(255, ROUTE_USAGE));
            }
            let (x, plen) = get_prefix(w, family)?;
            family = if x.is_ipv4() { 4 } else { 6 };
            let full = if x.is_ipv4() { 32 } else { 128 };
            if plen != full {
                notes.push_str(&format!(
                    "Warning: /{plen} as prefix is invalid, only /{full} (or none) is supported.\n"
                ));
            }
            g.dst = Some(x);
        }
    }
    if g.dst.is_none() {
        return Ok(g);
    }
    for (name, input) in [(iif, true), (oif, false)] {
        let Some(name) = name else { continue };
        let d = net.dev(name).ok_or_else(|| no_device(name))?;
        if input {
            g.iif = Some(d.ifindex);
        } else {
            g.oif = Some(d.ifindex);
        }
    }
    Ok(g)
}

/// `rtnl_dsfield_a2n`: a name from iproute2's `rt_dsfield` table (as
/// shipped; exact case), else a hexadecimal number up to 0xff.
fn dsfield(w: &str) -> Option<u8> {
    const NAMES: [(&str, u8); 21] = [
        ("default", 0x00),
        ("AF11", 0x28),
        ("AF12", 0x30),
        ("AF13", 0x38),
        ("AF21", 0x48),
        ("AF22", 0x50),
        ("AF23", 0x58),
        ("AF31", 0x68),
        ("AF32", 0x70),
        ("AF33", 0x78),
        ("AF41", 0x88),
        ("AF42", 0x90),
        ("AF43", 0x98),
        ("CS1", 0x20),
        ("CS2", 0x40),
        ("CS3", 0x60),
        ("CS4", 0x80),
        ("CS5", 0xa0),
        ("CS6", 0xc0),
        ("CS7", 0xe0),
        ("EF", 0xb8),
    ];
    if let Some((_, v)) = NAMES.iter().find(|(n, _)| *n == w) {
        return Some(*v);
    }
    match sluice_core::units::strtoul(w, 16) {
        Some((v, "")) => u8::try_from(v).ok(),
        _ => None,
    }
}

/// `get_prefix` as `ip route get` calls it: iproute2's complaint names the
/// family once one is known.
fn get_prefix(w: &str, family: u8) -> CmdResult<(IpAddr, u8)> {
    match prefix(w, family) {
        Some((x, plen, _)) => Ok((x, plen)),
        None if family == 0 => Err(invalid_prefix(w)),
        None => {
            let f = if family == 6 { "inet6" } else { "inet" };
            Err(Fail::new(
                1,
                format!("Error: {f} prefix is expected rather than \"{w}\"."),
            ))
        }
    }
}

/// The uid the kernel reports for the asking socket: this process's.
fn caller_uid() -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").map_or(0, |m| m.uid())
}

/// `inet_select_addr(dev, near, scope)`: the first primary IPv4 address of
/// `dev` within `scope`, one in `near`'s subnet if there is one; failing
/// that, the first primary of any device (in ifindex order) within scope
/// that is not link-scoped.
fn select_addr(net: &Net, ifindex: u32, near: Option<Ipv4Addr>, scope: u8) -> Option<Ipv4Addr> {
    let v4 = |x: &IfAddr| match x.addr {
        IpAddr::V4(a) if !x.secondary => Some(a),
        _ => None,
    };
    let mut first = None;
    for x in net.l3.of(ifindex).filter(|x| x.scope <= scope) {
        let Some(a) = v4(x) else { continue };
        if near.is_none_or(|n| covers(x.addr, x.plen, IpAddr::V4(n))) {
            return Some(a);
        }
        first = first.or(Some(a));
    }
    if first.is_some() {
        return first;
    }
    let mut devs: Vec<u32> = net.devices.iter().map(|d| d.ifindex).collect();
    devs.sort_unstable();
    devs.into_iter().find_map(|i| {
        net.l3
            .of(i)
            .filter(|x| x.scope != SCOPE_LINK && x.scope <= scope)
            .find_map(v4)
    })
}

/// The longest match for `dst` among `routes` (the first listed of equal
/// length: the lowest metric), through `oif` when given.
fn longest_match(routes: Vec<Listed>, dst: IpAddr, oif: Option<u32>) -> Option<Listed> {
    let mut best: Option<Listed> = None;
    for l in routes {
        let r = &l.route;
        if !covers(r.dst, r.plen, dst) || oif.is_some_and(|o| o != r.ifindex) {
            continue;
        }
        if best.as_ref().is_none_or(|b| r.plen > b.route.plen) {
            best = Some(l);
        }
    }
    best
}

fn lookup(net: &Net, dst: Ipv4Addr, g: &GetArgs) -> Option<Got> {
    let lo = net.devices.iter().find(|d| d.kind == DevKind::Loopback);
    let lo_index = lo.map_or(1, |d| d.ifindex);
    if let Some(o) = g.oif {
        net.devices.iter().find(|d| d.ifindex == o && d.up)?;
    }
    if dst.is_unspecified() {
        return Some(Got {
            kind: Some("local"),
            via: None,
            ifindex: lo_index,
            src: Ipv4Addr::LOCALHOST,
            cache: &["local"],
            fib: None,
        });
    }
    let special = dst.is_broadcast() || dst.is_multicast();
    if !special {
        if let Some(l) = longest_match(local_routes(net, false), IpAddr::V4(dst), g.oif) {
            let src = match l.route.src {
                Some(IpAddr::V4(s)) => s,
                _ => dst,
            };
            let (kind, ifindex, cache): (_, _, &'static [&'static str]) = match l.kind {
                Some("local") => (Some("local"), lo_index, &["local"]),
                _ => (Some("broadcast"), l.route.ifindex, &["local", "brd"]),
            };
            return Some(Got {
                kind,
                via: None,
                ifindex,
                src,
                cache,
                fib: Some(l),
            });
        }
    }
    let main: Vec<Listed> = all_routes(net, false)
        .into_iter()
        .map(|route| Listed {
            route,
            kind: None,
            local_table: false,
        })
        .collect();
    let (fib, ifindex, via, src) = match longest_match(main, IpAddr::V4(dst), g.oif) {
        Some(l) => {
            let r = &l.route;
            let src = match r.src {
                Some(IpAddr::V4(s)) => Some(s),
                _ => {
                    let gw = match r.via {
                        Some(IpAddr::V4(v)) => Some(v),
                        _ => None,
                    };
                    select_addr(net, r.ifindex, gw, r.scope)
                }
            };
            let (i, v) = (r.ifindex, r.via);
            (Some(l), i, v, src)
        }
        None => {
            // With an output device but no route through it, the
            // destination is assumed to be on its link.
            let o = g.oif?;
            (None, o, None, select_addr(net, o, None, SCOPE_LINK))
        }
    };
    let on_lo = ifindex == lo_index;
    let (kind, via, cache): (_, _, &'static [&'static str]) = if dst.is_broadcast() {
        (Some("broadcast"), None, &["local", "brd"])
    } else if dst.is_multicast() {
        // 224.0.0.1 is joined on every multicast-capable device.
        let joined = dst == Ipv4Addr::new(224, 0, 0, 1);
        let c: &'static [&'static str] = if joined { &["local", "mc"] } else { &["mc"] };
        (Some("multicast"), None, c)
    } else if on_lo {
        (None, via, &["local"])
    } else {
        (None, via, &[])
    };
    Some(Got {
        kind,
        via,
        ifindex,
        src: src.unwrap_or(Ipv4Addr::UNSPECIFIED),
        cache,
        fib,
    })
}

/// `print_route` for the kernel's answer (a cloned route).
fn print_got(net: &Net, dst: Ipv4Addr, g: &GetArgs, got: &Got, uid: u32, o: &mut Out) {
    o.open("");
    if let Some(k) = got.kind {
        o.str(To::Any, "type", &format!("{k} "), k);
    }
    o.str(To::Any, "dst", &format!("{dst} "), &dst.to_string());
    if let Some(f) = g.from {
        o.str(To::Any, "from", &format!("from {f} "), &f.to_string());
    }
    if let Some(v) = got.via {
        o.str(To::Any, "gateway", &format!("via {v} "), &v.to_string());
    }
    let name = net
        .devices
        .iter()
        .find(|d| d.ifindex == got.ifindex)
        .map_or(String::new(), |d| d.info.name.clone());
    o.str(To::Any, "dev", &format!("dev {name} "), &name);
    if g.from.is_none() {
        let s = got.src.to_string();
        o.str(To::Any, "prefsrc", &format!("src {s} "), &s);
    }
    o.open_arr("flags");
    if got.kind == Some("multicast") {
        // RTCF_MULTICAST shares its bit with RTM_F_OFFLOAD_FAILED, which
        // iproute2 6.1 names.
        o.str(To::Any, "", "rt_offload_failed ", "rt_offload_failed");
    }
    o.close();
    if g.mark != 0 {
        let m = g.mark;
        let text = if m >= 16 {
            format!("mark {m:#x} ")
        } else {
            format!("mark {m} ")
        };
        o.uint(To::Json, "mark", "", m as u64);
        o.text(&text);
    }
    o.uint(To::Any, "uid", &format!("uid {uid} "), uid as u64);
    o.text("\n    cache ");
    o.open_arr("cache");
    let n = got.cache.len();
    for (i, c) in got.cache.iter().enumerate() {
        let text = match (i, i + 1 == n) {
            (0, true) => format!("<{c}> "),
            (0, false) => format!("<{c},"),
            (_, true) => format!("{c}> "),
            _ => format!("{c},"),
        };
        o.str(To::Any, "", &text, c);
    }
    o.close();
    o.text("\n");
    o.close();
}
