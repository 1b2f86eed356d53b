//! `ip link`: the subset that creates and configures devices for tc
//! (iproute2 ip/iplink.c, ip/ipaddress.c printing).

use crate::args::{matches, Args, CmdResult, Fail};
use crate::net::Net;
use crate::out::{Out, To};
use crate::Outcome;
use sluice_core::device::{DevKind, Device};
use sluice_core::qdisc::mq::MAX_TX_QUEUES;
use sluice_core::qdisc::{DevInfo, QdiscOpts};

/// Run `ip [options] OBJECT ...` against `net`.
pub fn run(net: &mut Net, words: &[String]) -> Outcome {
    let (mut out, mut notes) = (String::new(), String::new());
    // Catch up with device changes made outside `ip` (a front end's own).
    net.l3.sync(&net.devices, net.seed, net.now);
    let r = dispatch(net, words, &mut out, &mut notes);
    // Devices that came, went, or changed state: what the kernel's
    // notifiers do to addresses and routes.
    net.l3.sync(&net.devices, net.seed, net.now);
    match r {
        Ok(()) => Outcome {
            stdout: out,
            stderr: notes,
            ..Default::default()
        },
        Err(f) => Outcome {
            stdout: out,
            stderr: notes + &f.stderr,
            code: f.code,
        },
    }
}

/// Where the object word of an `ip` command line is: after the options,
/// `-f FAMILY` taking its value along.
fn object_at(words: &[String]) -> usize {
    let mut i = 0;
    while i < words.len() && words[i].starts_with('-') {
        let o = words[i].trim_start_matches('-');
        i += if o == "f" || o == "family" { 2 } else { 1 };
    }
    i.min(words.len())
}

/// The object an `ip` command line names: "address", "route" or "link"
/// (abbreviations resolved as ip does), or `None`.
pub fn object(words: &[String]) -> Option<&'static str> {
    let o = words.get(object_at(words))?;
    ["address", "route", "link"]
        .into_iter()
        .find(|k| matches(o, k))
}

/// Does this `ip` command change state?
pub fn mutates(words: &[String]) -> bool {
    let changes: &[&str] = match object(words) {
        Some("address") => &["add", "change", "replace", "delete", "flush"],
        Some("route") => &["add", "change", "chg", "replace", "append", "delete"],
        Some(_) => &["add", "delete", "set", "change"],
        None => &[],
    };
    words
        .get(object_at(words) + 1)
        .is_some_and(|c| changes.iter().any(|x| matches(c, x)))
}

/// Does this changing `ip link` command touch only ifb devices: `add ...
/// type ifb`, or `set`/`delete` of a device that is an ifb device (or does
/// not exist, which the command itself refuses)? A running link accepts
/// those, for ingress shaping (its own devices stay as `sluice link up` set
/// them).
pub fn changes_only_ifb(net: &Net, words: &[String]) -> bool {
    let w: Vec<&str> = words[object_at(words)..]
        .iter()
        .skip(1)
        .map(String::as_str)
        .collect();
    let Some((cmd, rest)) = w.split_first() else {
        return false;
    };
    if matches(cmd, "add") {
        return rest.windows(2).any(|p| p == ["type", "ifb"]) && !rest.contains(&"veth");
    }
    let name = match rest {
        ["dev", n, ..] => n,
        [n, ..] => n,
        [] => return true,
    };
    net.dev(name).is_none_or(|d| d.kind == DevKind::Ifb)
}

/// The options of `ip` that change how links are shown.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct ShowOpts {
    pub json: bool,
    pub pretty: bool,
    pub stats: bool,
    pub details: bool,
    pub brief: bool,
    pub oneline: bool,
    /// `-4`/`-6` (`-f inet`/`inet6`): 4 or 6; 0 for any.
    pub family: u8,
    /// A device as `ip address` shows it (no link mode, link line only
    /// without a family filter).
    pub addr: bool,
    /// Links listed by IPv6's own dump (`ip -6 address` of all devices):
    /// no qdisc or group.
    pub v6_dump: bool,
}

fn dispatch(net: &mut Net, words: &[String], out: &mut String, notes: &mut String) -> CmdResult {
    // `ip [ OPTIONS ] OBJECT ...`: the options come first (those that do
    // not change how links are shown are accepted and ignored); a later
    // word may start with '-' (`txqueuelen -1`).
    let mut opts = ShowOpts::default();
    let n = object_at(words);
    let mut i = 0;
    while i < n {
        let w = words[i].trim_start_matches('-');
        i += 1;
        match w {
            "" => {}
            "j" | "json" => opts.json = true,
            "p" | "pretty" => opts.pretty = true,
            "br" | "brief" => opts.brief = true,
            "o" | "oneline" => opts.oneline = true,
            "4" => opts.family = 4,
            "6" => opts.family = 6,
            "f" | "family" => {
                let f = words.get(i).map(String::as_str).unwrap_or("");
                i += 1;
                opts.family = match f {
                    "inet" => 4,
                    "inet6" => 6,
                    _ => {
                        return Err(Fail::new(
                            255,
                            format!("Error: argument \"{f}\" is wrong: invalid protocol family"),
                        ))
                    }
                };
            }
            _ if "statistics".starts_with(w) => opts.stats = true,
            _ if "details".starts_with(w) => opts.details = true,
            _ => {}
        }
    }
    let words: Vec<String> = words[i.min(words.len())..].to_vec();
    let mut a = Args::new(&words);
    let Some(obj) = a.next() else {
        return Err(Fail::new(
            255,
            "Usage: ip [ OPTIONS ] OBJECT { COMMAND | help }",
        ));
    };
    if matches(obj, "address") {
        return crate::ipaddr::address(net, opts, &mut a, out, notes);
    }
    if matches(obj, "route") {
        return crate::ipaddr::route(net, opts, &mut a, out, notes);
    }
    if !matches(obj, "link") {
        return Err(Fail::new(
            255,
            format!("Object \"{obj}\" is unknown, try \"ip help\"."),
        ));
    }
    let cmd = a.next().unwrap_or("show");
    if matches(cmd, "add") {
        link_add(net, &mut a)
    } else if matches(cmd, "delete") {
        let name = dev_word(&mut a)?;
        let d = net
            .dev(&name)
            .ok_or_else(|| Fail::new(1, format!("Cannot find device \"{name}\"")))?;
        let peer = match &d.kind {
            DevKind::Veth { peer } => Some(peer.clone()),
            DevKind::Loopback => {
                return Err(Fail::new(2, "RTNETLINK answers: Operation not supported"))
            }
            _ => None,
        };
        net.devices
            .retain(|d| d.info.name != name && Some(&d.info.name) != peer.as_ref());
        Ok(())
    } else if matches(cmd, "set") || matches(cmd, "change") {
        link_set(net, &mut a)
    } else if matches(cmd, "show") || matches(cmd, "list") || matches(cmd, "lst") {
        // `up` and `type KIND` narrow the listing (ipaddr_list_flush_or_save).
        let (mut only_up, mut only_kind, mut name) = (false, None, None);
        while let Some(w) = a.peek() {
            if w == "up" {
                a.next();
                only_up = true;
            } else if w == "type" {
                a.next();
                only_kind = Some(a.value()?.to_string());
            } else {
                name = Some(dev_word(&mut a)?);
            }
        }
        if let Some(n) = &name {
            if net.dev(n).is_none() {
                return Err(Fail::new(1, format!("Device \"{n}\" does not exist.")));
            }
        }
        let mut o = Out::new(opts.json, opts.pretty);
        for d in &net.devices {
            if name.as_ref().is_none_or(|n| *n == d.info.name)
                && (!only_up || d.up)
                && only_kind
                    .as_ref()
                    .is_none_or(|k| Some(k.as_str()) == info_kind(&d.kind))
            {
                show_link(net, d, opts, &mut o, None);
            }
        }
        out.push_str(&o.finish());
        Ok(())
    } else {
        Err(Fail::new(
            255,
            format!("Command \"{cmd}\" is unknown, try \"ip link help\"."),
        ))
    }
}

fn dev_word(a: &mut Args) -> CmdResult<String> {
    let w = a.value()?;
    Ok(if w == "dev" {
        a.value()?.to_string()
    } else {
        w.to_string()
    })
}

/// `ll_addr_a2n` (hex bytes separated by colons), then iplink's check
/// that an Ethernet address has six.
fn lladdr(w: &str) -> CmdResult<[u8; 6]> {
    let bytes: Option<Vec<u8>> = w
        .split(':')
        .map(|b| u8::from_str_radix(b, 16).ok().filter(|_| !b.is_empty()))
        .collect();
    let bytes = bytes.ok_or_else(|| Fail::new(1, format!("\"{w}\" is invalid lladdr.")))?;
    bytes.as_slice().try_into().map_err(|_| {
        Fail::new(
            1,
            format!("Invalid address length {} - must be 6 bytes", bytes.len()),
        )
    })
}

fn link_add(net: &mut Net, a: &mut Args) -> CmdResult {
    let mut name: Option<String> = None;
    let mut kind: Option<String> = None;
    let mut peer: Option<String> = None;
    let (mut address, mut peer_address) = (None, None);
    let mut mtu = 1500;
    let mut txqlen = 1000;
    // (transmit, receive) queues of the device and of a veth peer.
    let (mut queues, mut peer_queues) = ((1, 1), (1, 1));
    while let Some(w) = a.next() {
        match w {
            "name" => name = Some(ifname_arg(a.value()?, "name", IFNAMSIZ)?),
            "dev" => name = Some(ifname_arg(a.value()?, "dev", usize::MAX)?),
            "type" => {
                kind = Some(a.value()?.to_string());
                if kind.as_deref() == Some("veth") {
                    while let Some(x) = a.next() {
                        if x == "peer" {
                            continue;
                        }
                        if x == "name" {
                            peer = Some(ifname_arg(a.value()?, "name", IFNAMSIZ)?);
                        } else if x == "address" {
                            peer_address = Some(lladdr(a.value()?)?);
                        } else if x == "numtxqueues" || x == "numrxqueues" {
                            queue_count(x, a, &mut peer_queues)?;
                        }
                    }
                }
            }
            "mtu" => {
                mtu = a.value()?.parse().map_err(|_| {
                    Fail::new(255, "Error: argument is wrong: Invalid \"mtu\" value")
                })?
            }
            "txqueuelen" | "qlen" | "txqlen" => {
                txqlen = a.value()?.parse().map_err(|_| {
                    Fail::new(
                        255,
                        "Error: argument is wrong: Invalid \"txqueuelen\" value",
                    )
                })?
            }
            "address" => address = Some(lladdr(a.value()?)?),
            "numtxqueues" | "numrxqueues" => queue_count(w, a, &mut queues)?,
            w if name.is_none() => name = Some(ifname_arg(w, "dev", usize::MAX)?),
            w => {
                return Err(Fail::new(
                    255,
                    format!("Error: either \"dev\" is duplicate, or \"{w}\" is a garbage."),
                ))
            }
        }
    }
    let Some(kind) = kind else {
        return Err(Fail::new(
            1,
            "Not enough information: \"type\" argument is required",
        ));
    };
    let name =
        name.ok_or_else(|| Fail::new(1, "Not enough information: \"dev\" argument is required."))?;
    let name = kernel_ifname(net, &name, &[])?;
    if net.dev(&name).is_some() {
        return Err(Fail::new(2, "RTNETLINK answers: File exists"));
    }
    // rtnl_create_link's bounds, the device's and then a veth peer's.
    for (tx, rx) in [queues, peer_queues] {
        if !(1..=MAX_TX_QUEUES).contains(&tx) {
            return Err(Fail::new(2, "Error: Invalid number of transmit queues."));
        }
        if !(1..=MAX_TX_QUEUES).contains(&rx) {
            return Err(Fail::new(2, "Error: Invalid number of receive queues."));
        }
    }
    // The link speed ethtool reports: veth's 10 Gbit/s; the others have none.
    let speed = if kind == "veth" { 10_000 } else { 0 };
    let info = |n: &str, num_tx_queues| DevInfo {
        name: n.to_string(),
        mtu,
        txqueuelen: txqlen,
        hard_header_len: 14,
        seed: 0,
        speed,
        num_tx_queues,
    };
    match kind.as_str() {
        "dummy" => {
            net.add_device(info(&name, queues.0), DevKind::Dummy);
        }
        "veth" => {
            // veth_newlink names an unnamed peer `veth%d`.
            let peer = kernel_ifname(net, peer.as_deref().unwrap_or("veth%d"), &[&name])?;
            if net.dev(&peer).is_some() || peer == name {
                return Err(Fail::new(2, "RTNETLINK answers: File exists"));
            }
            net.add_device(
                info(&peer, peer_queues.0),
                DevKind::Veth { peer: name.clone() },
            );
            if let Some(d) = net.dev_mut(&peer) {
                d.address = peer_address;
                d.num_rx_queues = peer_queues.1;
            }
            net.add_device(info(&name, queues.0), DevKind::Veth { peer: peer.clone() });
        }
        "ether" | "sluice" => {
            net.add_device(info(&name, queues.0), DevKind::Ether);
        }
        "ifb" => {
            // ifb_setup's queue length wins over a `txqueuelen` given here.
            let info = DevInfo {
                txqueuelen: IFB_TXQUEUELEN,
                ..info(&name, queues.0)
            };
            net.add_device(info, DevKind::Ifb);
        }
        _ => return Err(Fail::new(2, "Error: Unknown device type.")),
    }
    if let Some(d) = net.dev_mut(&name) {
        d.address = address;
        d.num_rx_queues = queues.1;
    }
    Ok(())
}

/// The kernel's interface-name size, with its terminating NUL.
const IFNAMSIZ: usize = 16;

/// iproute2's `check_ifname` (`name`: shorter than `IFNAMSIZ`) and
/// `check_altifname` (`dev`, or the bare name: any length, as an
/// alternative name may be): not empty, no `/`, no white space.
fn ifname_arg(w: &str, key: &str, max: usize) -> CmdResult<String> {
    let bad = w.is_empty()
        || w.len() >= max
        || w.bytes()
            .any(|b| b == b'/' || b.is_ascii_whitespace() || b == 0x0b);
    if bad {
        return Err(Fail::new(
            255,
            format!("Error: argument \"{w}\" is wrong: \"{key}\" not a valid ifname"),
        ));
    }
    Ok(w.to_string())
}

/// The name the kernel gives a new device asked for as `name`: the
/// netlink policy's length bound (`IFLA_IFNAME`, `IFNAMSIZ - 1`), then
/// `dev_valid_name` (not `.` or `..`, no `/`, `:` or white space), then a
/// `%d` in it replaced by the lowest number no device (nor one of `taken`,
/// being created alongside) uses (`dev_alloc_name`).
fn kernel_ifname(net: &Net, name: &str, taken: &[&str]) -> CmdResult<String> {
    if name.len() >= IFNAMSIZ {
        return Err(Fail::new(2, "Error: Attribute failed policy validation."));
    }
    let invalid = || Fail::new(2, "RTNETLINK answers: Invalid argument");
    if name.is_empty()
        || name == "."
        || name == ".."
        || name
            .bytes()
            .any(|b| b == b'/' || b == b':' || b.is_ascii_whitespace() || b == 0x0b)
    {
        return Err(invalid());
    }
    let Some(at) = name.find('%') else {
        return Ok(name.to_string());
    };
    if !name[at + 1..].starts_with('d') || name[at + 2..].contains('%') {
        return Err(invalid());
    }
    let used = |n: &str| net.dev(n).is_some() || taken.contains(&n);
    (0..32768)
        .map(|i| format!("{}{i}{}", &name[..at], &name[at + 2..]))
        .find(|n| n.len() < IFNAMSIZ && !used(n))
        .ok_or_else(|| Fail::new(2, "RTNETLINK answers: Too many open files in system"))
}

/// `numtxqueues N` / `numrxqueues N` into `(tx, rx)`; ip refuses what is
/// not a number, the kernel a number out of range (checked later).
fn queue_count(word: &str, a: &mut Args, queues: &mut (u32, u32)) -> Result<(), Fail> {
    let v = a.value()?;
    let n = v.parse().map_err(|_| {
        Fail::new(
            255,
            // ip/iplink.c's message ends in a newline of its own.
            format!("Error: argument \"{v}\" is wrong: Invalid \"{word}\" value\n\n"),
        )
    })?;
    if word == "numtxqueues" {
        queues.0 = n;
    } else {
        queues.1 = n;
    }
    Ok(())
}

fn link_set(net: &mut Net, a: &mut Args) -> CmdResult {
    if a.is_empty() {
        return Err(Fail::new(
            255,
            "Not enough information: \"dev\" argument is required.",
        ));
    }
    let name = dev_word(a)?;
    // ip parses every word before it sends anything, and the kernel checks
    // the MTU before it changes the rest (`do_setlink`): a refusal changes nothing.
    let (mut up, mut mtu, mut txqlen, mut address) = (None, None, None, None);
    while let Some(w) = a.next() {
        match w {
            "up" => up = Some(true),
            "down" => up = Some(false),
            "address" => address = Some(lladdr(a.value()?)?),
            "mtu" => {
                let v = a.value()?;
                // iplink.c's messages end in their own newline.
                mtu = Some(v.parse::<u32>().map_err(|_| {
                    Fail::new(
                        255,
                        format!("Error: argument \"{v}\" is wrong: Invalid \"mtu\" value\n\n"),
                    )
                })?);
            }
            "txqueuelen" | "qlen" | "txqlen" => {
                let v = a.value()?;
                // `get_integer`: any C int, stored as the kernel's unsigned.
                txqlen = Some(crate::args::get_integer(v).ok_or_else(|| {
                    Fail::new(
                        255,
                        format!(
                            "Error: argument \"{v}\" is wrong: Invalid \"txqueuelen\" value\n\n"
                        ),
                    )
                })? as u32);
            }
            w => {
                return Err(Fail::new(
                    255,
                    format!("Error: either \"dev\" is duplicate, or \"{w}\" is a garbage."),
                ))
            }
        }
    }
    let d = net
        .dev_mut(&name)
        .ok_or_else(|| Fail::new(1, format!("Cannot find device \"{name}\"")))?;
    if let Some(m) = mtu {
        // veth's bounds (ETH_MIN_MTU, ETH_MAX_MTU; `dev_validate_mtu`).
        if matches!(d.kind, DevKind::Veth { .. }) {
            if m < 68 {
                return Err(Fail::new(2, "Error: mtu less than device minimum."));
            }
            if m > 65535 {
                return Err(Fail::new(2, "Error: mtu greater than device maximum."));
            }
        }
        d.info.mtu = m;
    }
    if let Some(n) = txqlen {
        d.set_txqueuelen(n);
    }
    if let Some(x) = address {
        d.address = Some(x);
    }
    if let Some(u) = up {
        d.set_up(u);
    }
    Ok(())
}

/// An ifb device's transmit queue length (`TX_Q_LIMIT` in drivers/net/ifb.c).
const IFB_TXQUEUELEN: u32 = 32;

/// `IFLA_INFO_KIND`: the link kind `ip -d` names (none for loopback and
/// sluice's own `ether`).
pub(crate) fn info_kind(k: &DevKind) -> Option<&'static str> {
    match k {
        DevKind::Veth { .. } => Some("veth"),
        DevKind::Dummy => Some("dummy"),
        DevKind::Ifb => Some("ifb"),
        DevKind::Tun => Some("tun"),
        _ => None,
    }
}

/// What `ip address` prints after a device's link lines: its addresses,
/// as text appended to the link's and JSON members of its object.
pub(crate) type AddrLines<'a> = &'a dyn Fn(&mut Out, &mut String);

/// `print_linkinfo` (ip/ipaddress.c) for one device; under `ip address`
/// (`opts.addr`) followed by `addrs`.
pub(crate) fn show_link(
    net: &Net,
    d: &Device,
    opts: ShowOpts,
    out: &mut Out,
    addrs: Option<AddrLines>,
) {
    let peer = match &d.kind {
        DevKind::Veth { peer } => Some(peer.as_str()),
        _ => None,
    };
    let mut flags = vec![];
    match d.kind {
        DevKind::Loopback => flags.push("LOOPBACK"),
        // dummy_setup and ifb_setup: no ARP, no multicast.
        DevKind::Ifb | DevKind::Dummy => flags.extend(["BROADCAST", "NOARP"]),
        DevKind::Tun => flags.extend(["POINTOPOINT", "MULTICAST", "NOARP"]),
        _ => flags.extend(["BROADCAST", "MULTICAST"]),
    }
    // A veth's carrier is its peer being up; `M-DOWN` says the link
    // (IFLA_LINK, the peer) is down, whatever this end's state.
    let peer_up = peer.is_none_or(|p| net.dev(p).is_some_and(|p| p.up));
    if d.up {
        if !peer_up {
            flags.insert(0, "NO-CARRIER");
        }
        flags.push("UP");
        if peer_up {
            flags.push("LOWER_UP");
        }
    }
    if !peer_up {
        flags.push("M-DOWN");
    }
    let qdisc = if d.root.handle.is_unspec() {
        match d.root.qdisc.dump() {
            QdiscOpts::Noop => "noop".to_string(),
            o => o.kind().to_string(),
        }
    } else {
        d.root.kind().to_string()
    };
    // Loopback, dummy, ifb and TUN devices report no carrier state
    // (operstate unknown).
    let state = if matches!(
        d.kind,
        DevKind::Loopback | DevKind::Dummy | DevKind::Ifb | DevKind::Tun
    ) {
        if d.up {
            "UNKNOWN"
        } else {
            "DOWN"
        }
    } else if d.up && peer_up {
        "UP"
    } else if d.up {
        "LOWERLAYERDOWN"
    } else {
        "DOWN"
    };
    let (link_type, broadcast) = match d.kind {
        DevKind::Loopback => ("loopback", [0; 6]),
        DevKind::Tun => ("none", [0; 6]),
        _ => ("ether", [0xff; 6]),
    };
    let address = crate::l3::mac_of(d);
    let mac = crate::m::ll_addr_n2a;
    let name = match peer {
        Some(p) => format!("{}@{p}", d.info.name),
        None => d.info.name.clone(),
    };
    // JSON members both forms share: the names, and the flags.
    let json_names = |out: &mut Out| {
        if let Some(p) = peer {
            out.str(To::Json, "link", "", p);
        }
        out.str(To::Json, "ifname", "", &d.info.name);
    };
    let json_flags = |out: &mut Out| {
        out.open_arr("flags");
        for f in &flags {
            out.str(To::Json, "", "", f);
        }
        out.close();
    };
    if opts.brief && opts.addr {
        // `print_linkinfo_brief` for `ip address`: name, state, addresses.
        let mut text = format!("{name:<16} {state:<14} ");
        out.open("");
        json_names(out);
        out.str(To::Json, "operstate", "", state);
        if let Some(f) = addrs {
            f(out, &mut text);
        }
        text.push('\n');
        out.text(&text);
        out.close();
        return;
    }
    if opts.brief {
        // `print_linkinfo_brief`.
        let addr = address.as_ref().map(|a| format!("{} ", mac(a)));
        out.text(&format!(
            "{name:<16} {state:<14} {}<{}> \n",
            addr.as_deref().unwrap_or(""),
            flags.join(",")
        ));
        out.open("");
        json_names(out);
        out.str(To::Json, "operstate", "", state);
        if let Some(a) = &address {
            out.str(To::Json, "address", "", &mac(a));
        }
        json_flags(out);
        out.close();
        return;
    }
    let mut text = String::new();
    out.open("");
    let i = d.ifindex as u64;
    out.uint(To::Json, "ifindex", "", i);
    json_names(out);
    json_flags(out);
    out.uint(To::Json, "mtu", "", d.info.mtu as u64);
    let v6 = opts.v6_dump;
    if !v6 {
        out.str(To::Json, "qdisc", "", &qdisc);
    }
    out.str(To::Json, "operstate", "", state);
    if !opts.addr {
        out.str(To::Json, "linkmode", "", "DEFAULT");
    }
    if !v6 {
        out.str(To::Json, "group", "", "default");
    }
    // printed with %d: a length of 2^32 - 1 reads -1.
    let qlen = d.info.txqueuelen as i32;
    if qlen != 0 {
        out.int(To::Json, "txqlen", "", qlen as i64);
    }
    // Under `ip -4/-6 address` the link layer is left out.
    let link_line = opts.family == 0 || opts.details;
    if link_line {
        out.str(To::Json, "link_type", "", link_type);
        if let Some(a) = &address {
            out.str(To::Json, "address", "", &mac(a));
            out.str(To::Json, "broadcast", "", &mac(&broadcast));
        }
    }
    text.push_str(&format!(
        "{i}: {name}: <{}> mtu {} {}state {state} {}{}{}\n",
        flags.join(","),
        d.info.mtu,
        if v6 {
            String::new()
        } else {
            format!("qdisc {qdisc} ")
        },
        if opts.addr { "" } else { "mode DEFAULT " },
        if v6 { "" } else { "group default " },
        if qlen != 0 {
            format!("qlen {qlen}")
        } else {
            String::new()
        },
    ));
    if link_line {
        text.push_str(&format!("    link/{link_type} "));
        if let Some(a) = &address {
            text.push_str(&format!("{} brd {}", mac(a), mac(&broadcast)));
        }
    }
    if opts.details {
        // `dev->min_mtu`/`max_mtu` of each kind's setup; one queue each.
        let (min, max) = match d.kind {
            DevKind::Veth { .. } | DevKind::Tun => (68, 65535),
            DevKind::Ether => (68, 1500),
            _ => (0, 0),
        };
        text.push_str(&format!(
            " promiscuity 0  allmulti 0 minmtu {min} maxmtu {max} "
        ));
        for (k, v) in [
            ("promiscuity", 0),
            ("allmulti", 0),
            ("min_mtu", min),
            ("max_mtu", max),
        ] {
            out.uint(To::Json, k, "", v);
        }
        if let Some(k) = info_kind(&d.kind) {
            text.push_str(&format!("\n    {k} "));
            out.open("linkinfo");
            out.str(To::Json, "info_kind", "", k);
            out.close();
        }
        text.push_str(&format!("addrgenmode eui64 numtxqueues {} numrxqueues {} gso_max_size 65536 gso_max_segs 65535 tso_max_size 524280 tso_max_segs 65535 gro_max_size 65536 ",
            d.info.num_tx_queues, d.num_rx_queues
        ));
        out.str(To::Json, "inet6_addr_gen_mode", "", "eui64");
        for (k, v) in [
            ("num_tx_queues", d.info.num_tx_queues as u64),
            ("num_rx_queues", d.num_rx_queues as u64),
            ("gso_max_size", 65536),
            ("gso_max_segs", 65535),
            ("tso_max_size", 524280),
            ("tso_max_segs", 65535),
            ("gro_max_size", 65536),
        ] {
            out.uint(To::Json, k, "", v);
        }
    }
    if opts.stats {
        // sluice keeps no per-device counters: the kernel's zeros, in its columns.
        text.push_str("\n    RX:  bytes packets errors dropped  missed   mcast           \n             0       0      0       0       0       0 \n    TX:  bytes packets errors dropped carrier collsns           \n             0       0      0       0       0       0 ");
        out.open("stats64");
        for (dir, keys) in [
            (
                "rx",
                [
                    "bytes",
                    "packets",
                    "errors",
                    "dropped",
                    "over_errors",
                    "multicast",
                ],
            ),
            (
                "tx",
                [
                    "bytes",
                    "packets",
                    "errors",
                    "dropped",
                    "carrier_errors",
                    "collisions",
                ],
            ),
        ] {
            out.open(dir);
            for k in keys {
                out.uint(To::Json, k, "", 0);
            }
            out.close();
        }
        out.close();
    }
    if opts.oneline {
        text = text.replace('\n', "\\");
    }
    if link_line || !opts.addr {
        text.push('\n');
    }
    if let Some(f) = addrs {
        f(out, &mut text);
    }
    out.text(&text);
    out.close();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(net: &mut Net, line: &str) -> Outcome {
        let words: Vec<String> = line.split_whitespace().map(String::from).collect();
        run(net, &words)
    }

    /// Interface names as iproute2 6.1 and Linux check them, each outcome
    /// taken from `ip link add ... type veth` against the kernel: ip's own
    /// checks exit 255, the kernel's refusals 2, and a `%d` is numbered.
    #[test]
    fn link_names_are_checked_as_ip_and_the_kernel_check_them() {
        let mut net = Net::new();
        let add = |net: &mut Net, args: &[&str]| {
            let mut w: Vec<String> = vec!["link".into(), "add".into()];
            w.extend(args.iter().map(|s| s.to_string()));
            w.extend(["type", "veth"].map(String::from));
            run(net, &w)
        };
        for (args, code, err) in [
            (
                &["dev", "a b"][..],
                255,
                "Error: argument \"a b\" is wrong: \"dev\" not a valid ifname",
            ),
            (
                &["dev", "a/b"],
                255,
                "Error: argument \"a/b\" is wrong: \"dev\" not a valid ifname",
            ),
            (
                &["name", ""],
                255,
                "Error: argument \"\" is wrong: \"name\" not a valid ifname",
            ),
            (
                &["name", "abcdefghijklmnop"],
                255,
                "Error: argument \"abcdefghijklmnop\" is wrong: \"name\" not a valid ifname",
            ),
            (
                &["dev", "abcdefghijklmnop"],
                2,
                "Error: Attribute failed policy validation.",
            ),
            (
                &["abcdefghijklmnop"],
                2,
                "Error: Attribute failed policy validation.",
            ),
            (&["a:b"], 2, "RTNETLINK answers: Invalid argument"),
            (&["."], 2, "RTNETLINK answers: Invalid argument"),
            (&[".."], 2, "RTNETLINK answers: Invalid argument"),
            (&["a%s"], 2, "RTNETLINK answers: Invalid argument"),
        ] {
            let o = add(&mut net, args);
            assert_eq!((o.code, o.stderr.trim_end()), (code, err), "{args:?}");
        }
        assert_eq!(net.devices.len(), 1, "nothing was created");
        assert_eq!(add(&mut net, &["abcdefghijklmno"]).code, 0);
        assert_eq!(add(&mut net, &["x%dy"]).code, 0);
        assert_eq!(add(&mut net, &["x%dy"]).code, 0);
        let o = add(&mut net, &["name", "v1", "peer", "name", "x y"]);
        assert_eq!(o.code, 255, "{}", o.stderr);
        let names: Vec<&str> = net.devices.iter().map(|d| d.info.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "lo",
                "veth0",
                "abcdefghijklmno",
                "veth1",
                "x0y",
                "veth2",
                "x1y"
            ]
        );
    }

    /// What the state directory logs (and so replays): commands that change
    /// links, addresses or routes, whatever options come first.
    #[test]
    fn mutates_finds_the_command_after_the_options() {
        let w = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        for (line, changes) in [
            ("addr add 10.0.0.1/24 dev v0", true),
            ("-f inet a del 10.0.0.1/24 dev v0", true),
            ("-4 addr flush dev v0", true),
            ("-j -6 addr show", false),
            ("r a default via 10.0.0.254", true),
            ("-f inet6 route append 2001:db8::/64 dev v0", true),
            ("route get 10.0.0.1", false),
            ("-br link show", false),
            ("l s v0 up", true),
            ("neigh add 10.0.0.2 dev v0", false),
        ] {
            assert_eq!(mutates(&w(line)), changes, "{line}");
        }
        assert_eq!(object(&w("-f inet6 r")), Some("route"));
    }

    /// dummy_setup: `IFF_NOARP` and no multicast; no carrier state (as
    /// printed by Linux 6.x with iproute2 6.x: `<BROADCAST,NOARP,UP,LOWER_UP>
    /// mtu 1500 qdisc noqueue state UNKNOWN`; the capture kernel has no dummy
    /// driver to capture from).
    #[test]
    fn a_dummy_device_has_no_arp_and_an_unknown_state() {
        let mut net = Net::new();
        assert_eq!(ip(&mut net, "link add d0 type dummy").code, 0);
        assert_eq!(
            first_line(&ip(&mut net, "link show d0")),
            "2: d0: <BROADCAST,NOARP> mtu 1500 qdisc noop state DOWN mode DEFAULT group default qlen 1000"
        );
        assert_eq!(ip(&mut net, "link set d0 up").code, 0);
        assert_eq!(
            first_line(&ip(&mut net, "link show d0")),
            "2: d0: <BROADCAST,NOARP,UP,LOWER_UP> mtu 1500 qdisc noqueue state UNKNOWN mode DEFAULT group default qlen 1000"
        );
    }

    /// Without its MAC address (random in the kernel, derived from the index here).
    fn first_line(o: &Outcome) -> &str {
        o.stdout.lines().next().unwrap_or("")
    }

    /// Captured on Linux 6.18 with iproute2 6.1: `ip link add ifb7 type ifb`
    /// (`txqueuelen 100` given or not: ifb's own 32 stays), `ip link show`,
    /// then `ip link set ifb7 up` and `ip link show` again.
    #[test]
    fn an_ifb_device_shows_as_the_kernels_does() {
        let mut net = Net::new();
        assert_eq!(
            ip(&mut net, "link add ifb7 type ifb txqueuelen 100").code,
            0
        );
        assert_eq!(
            first_line(&ip(&mut net, "link show ifb7")),
            "2: ifb7: <BROADCAST,NOARP> mtu 1500 qdisc noop state DOWN mode DEFAULT group default qlen 32"
        );
        assert_eq!(ip(&mut net, "link set ifb7 up").code, 0);
        assert_eq!(
            first_line(&ip(&mut net, "link show ifb7")),
            "2: ifb7: <BROADCAST,NOARP,UP,LOWER_UP> mtu 1500 qdisc pfifo_fast state UNKNOWN mode DEFAULT group default qlen 32"
        );
    }
}
