//! `ip link`: the subset that creates and configures devices for tc
//! (iproute2 ip/iplink.c, ip/ipaddress.c printing).

use crate::args::{matches, Args, CmdResult, Fail};
use crate::net::Net;
use crate::Outcome;
use sluice_core::device::{DevKind, Device};
use sluice_core::qdisc::{DevInfo, QdiscOpts};

/// Run `ip [options] OBJECT ...` against `net`.
pub fn run(net: &mut Net, words: &[String]) -> Outcome {
    let mut out = String::new();
    match dispatch(net, words, &mut out) {
        Ok(()) => Outcome {
            stdout: out,
            ..Default::default()
        },
        Err(f) => Outcome {
            stdout: out,
            stderr: f.stderr,
            code: f.code,
        },
    }
}

/// Does this `ip` command change state?
pub fn mutates(words: &[String]) -> bool {
    let w: Vec<&String> = words.iter().filter(|w| !w.starts_with('-')).collect();
    match (w.first(), w.get(1)) {
        (Some(o), Some(c)) => {
            matches(o, "link")
                && ["add", "delete", "set", "change"]
                    .iter()
                    .any(|x| matches(c, x))
        }
        _ => false,
    }
}

fn dispatch(net: &mut Net, words: &[String], out: &mut String) -> CmdResult {
    let words: Vec<String> = words
        .iter()
        .filter(|w| !w.starts_with('-'))
        .cloned()
        .collect();
    let mut a = Args::new(&words);
    let Some(obj) = a.next() else {
        return Err(Fail::new(
            255,
            "Usage: ip [ OPTIONS ] OBJECT { COMMAND | help }",
        ));
    };
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
        let name = if a.is_empty() {
            None
        } else {
            Some(dev_word(&mut a)?)
        };
        if let Some(n) = &name {
            if net.dev(n).is_none() {
                return Err(Fail::new(1, format!("Device \"{n}\" does not exist.")));
            }
        }
        for d in &net.devices {
            if name.as_ref().is_none_or(|n| *n == d.info.name) {
                out.push_str(&show_link(net, d));
            }
        }
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

fn link_add(net: &mut Net, a: &mut Args) -> CmdResult {
    let mut name: Option<String> = None;
    let mut kind: Option<String> = None;
    let mut peer: Option<String> = None;
    let mut mtu = 1500;
    let mut txqlen = 1000;
    while let Some(w) = a.next() {
        match w {
            "dev" | "name" => name = Some(a.value()?.to_string()),
            "type" => {
                kind = Some(a.value()?.to_string());
                if kind.as_deref() == Some("veth") {
                    while let Some(x) = a.next() {
                        if x == "peer" {
                            continue;
                        }
                        if x == "name" {
                            peer = Some(a.value()?.to_string());
                        } else if x == "address" || x == "numtxqueues" || x == "numrxqueues" {
                            a.value()?;
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
            "address" | "numtxqueues" | "numrxqueues" => {
                a.value()?;
            }
            w if name.is_none() => name = Some(w.to_string()),
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
    if net.dev(&name).is_some() {
        return Err(Fail::new(2, "RTNETLINK answers: File exists"));
    }
    let info = |n: &str| DevInfo {
        name: n.to_string(),
        mtu,
        txqueuelen: txqlen,
        hard_header_len: 14,
        seed: 0,
    };
    match kind.as_str() {
        "dummy" => {
            net.add_device(info(&name), DevKind::Dummy);
        }
        "veth" => {
            let peer = peer.unwrap_or_else(|| format!("veth{}", net.devices.len()));
            if net.dev(&peer).is_some() {
                return Err(Fail::new(2, "RTNETLINK answers: File exists"));
            }
            net.add_device(info(&peer), DevKind::Veth { peer: name.clone() });
            net.add_device(info(&name), DevKind::Veth { peer: peer.clone() });
        }
        "ether" | "sluice" => {
            net.add_device(info(&name), DevKind::Ether);
        }
        "ifb" => {
            // ifb_setup's queue length wins over a `txqueuelen` given here.
            let info = DevInfo {
                txqueuelen: IFB_TXQUEUELEN,
                ..info(&name)
            };
            net.add_device(info, DevKind::Ifb);
        }
        _ => return Err(Fail::new(2, "Error: Unknown device type.")),
    }
    Ok(())
}

fn link_set(net: &mut Net, a: &mut Args) -> CmdResult {
    let name = dev_word(a)?;
    let d = net
        .dev_mut(&name)
        .ok_or_else(|| Fail::new(1, format!("Cannot find device \"{name}\"")))?;
    while let Some(w) = a.next() {
        match w {
            "up" => d.set_up(true),
            "down" => d.set_up(false),
            "mtu" => {
                let v = a.value()?;
                d.info.mtu = v.parse().map_err(|_| {
                    Fail::new(
                        255,
                        format!("Error: argument \"{v}\" is wrong: Invalid \"mtu\" value"),
                    )
                })?;
            }
            "txqueuelen" | "qlen" | "txqlen" => {
                let v = a.value()?;
                let n = v.parse().map_err(|_| {
                    Fail::new(
                        255,
                        format!("Error: argument \"{v}\" is wrong: Invalid \"txqueuelen\" value"),
                    )
                })?;
                d.set_txqueuelen(n);
            }
            w => {
                return Err(Fail::new(
                    255,
                    format!("Error: either \"dev\" is duplicate, or \"{w}\" is a garbage."),
                ))
            }
        }
    }
    Ok(())
}

/// An ifb device's transmit queue length (`TX_Q_LIMIT` in drivers/net/ifb.c).
const IFB_TXQUEUELEN: u32 = 32;

fn show_link(net: &Net, d: &Device) -> String {
    let name = match &d.kind {
        DevKind::Veth { peer } => format!("{}@{}", d.info.name, peer),
        _ => d.info.name.clone(),
    };
    let mut flags = vec![];
    match d.kind {
        DevKind::Loopback => flags.push("LOOPBACK"),
        DevKind::Ifb => flags.extend(["BROADCAST", "NOARP"]),
        DevKind::Tun => flags.extend(["POINTOPOINT", "MULTICAST", "NOARP"]),
        _ => flags.extend(["BROADCAST", "MULTICAST"]),
    }
    let peer_up = match &d.kind {
        DevKind::Veth { peer } => net.dev(peer).is_some_and(|p| p.up),
        _ => true,
    };
    if d.up {
        flags.push("UP");
        if peer_up {
            flags.push("LOWER_UP");
        }
    } else if matches!(d.kind, DevKind::Veth { .. }) {
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
    // Loopback, ifb and TUN devices report no carrier state (operstate unknown).
    let state = if matches!(d.kind, DevKind::Loopback | DevKind::Ifb | DevKind::Tun) {
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
    let link = if d.kind == DevKind::Loopback {
        "link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00".to_string()
    } else if d.kind == DevKind::Tun {
        // ip prints the (empty) address after a space.
        "link/none ".to_string()
    } else {
        format!(
            "link/ether 02:00:00:00:{:02x}:{:02x} brd ff:ff:ff:ff:ff:ff",
            d.ifindex >> 8,
            d.ifindex & 0xff
        )
    };
    format!(
        "{}: {}: <{}> mtu {} qdisc {} state {} mode DEFAULT group default {}\n    {}\n",
        d.ifindex,
        name,
        flags.join(","),
        d.info.mtu,
        qdisc,
        state,
        if d.info.txqueuelen > 0 {
            format!("qlen {}", d.info.txqueuelen)
        } else {
            String::new()
        },
        link
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(net: &mut Net, line: &str) -> Outcome {
        let words: Vec<String> = line.split_whitespace().map(String::from).collect();
        run(net, &words)
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
