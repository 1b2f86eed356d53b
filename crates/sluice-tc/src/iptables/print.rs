//! What `iptables -L` and `iptables -S` print, column for column as
//! iptables 1.8 (iptables.c `print_header`/`print_firewall`/`print_rule4`,
//! and each extension's `print`/`save`).

use super::names::{protocol_name, service_name};
use super::parse::ListFmt;
use sluice_core::netfilter::rule::{
    ct_state, ConnmarkOp, Inv, Match, Net4, PortRange, PortSide, Rule, RuleSpec, Target, PROTO_UDP,
};
use sluice_core::netfilter::{Chain, Table};
use std::fmt::Write;

/// `xtables_print_num`: a counter in a column (`-x` prints it whole).
fn num(n: u64, f: &ListFmt) -> String {
    if f.exact {
        return format!("{n:>8} ");
    }
    if n <= 99999 {
        return format!("{n:>5} ");
    }
    let mut n = (n + 500) / 1000;
    for unit in ['K', 'M', 'G'] {
        if n <= 9999 {
            return format!("{n:>4}{unit} ");
        }
        n = (n + 500) / 1000;
    }
    format!("{n:>4}T ")
}

/// The same without padding (the policy line's counters).
fn num_bare(n: u64, f: &ListFmt) -> String {
    num(n, f).trim_start().to_string()
}

/// The chain's title line and column header.
fn header(t: &Table, c: &Chain, f: &ListFmt, out: &mut String) {
    if c.hook.is_some() {
        let pol = match c.policy {
            sluice_core::netfilter::Policy::Accept => "ACCEPT",
            sluice_core::netfilter::Policy::Drop => "DROP",
        };
        let _ = write!(out, "Chain {} (policy {pol}", c.name);
        if f.verbose {
            let _ = write!(
                out,
                " {}packets, {}bytes",
                num_bare(c.policy_counters.packets, f),
                num_bare(c.policy_counters.bytes, f)
            );
        }
        out.push_str(")\n");
    } else {
        let _ = writeln!(
            out,
            "Chain {} ({} references)",
            c.name,
            t.references(&c.name)
        );
    }
    if f.line_numbers {
        out.push_str("num  ");
    }
    if f.verbose {
        if f.exact {
            out.push_str("    pkts      bytes ");
        } else {
            out.push_str(" pkts bytes ");
        }
    }
    out.push_str("target     prot opt ");
    if f.verbose {
        out.push_str("in     out     ");
    }
    out.push_str("source               destination         \n");
}

fn mask_suffix(mask: u32) -> String {
    if mask == u32::MAX {
        return String::new();
    }
    let ones = mask.leading_ones();
    if mask.checked_shl(ones).unwrap_or(0) == 0 {
        format!("/{ones}")
    } else {
        format!("/{}", std::net::Ipv4Addr::from(mask))
    }
}

fn addr_col(n: &Inv<Net4>, f: &ListFmt) -> String {
    let text = if n.v.mask == 0 && !f.numeric {
        "anywhere".to_string()
    } else {
        format!(
            "{}{}",
            std::net::Ipv4Addr::from(n.v.addr),
            mask_suffix(n.v.mask)
        )
    };
    format!("{}{text:<19} ", if n.inv { '!' } else { ' ' })
}

fn port_text(p: u16, proto: &str, f: &ListFmt) -> String {
    if !f.numeric {
        if let Some(name) = service_name(p, proto) {
            return name.to_string();
        }
    }
    p.to_string()
}

fn ports_l(label: &str, r: &Option<Inv<PortRange>>, proto: &str, f: &ListFmt, out: &mut String) {
    let Some(r) = r else { return };
    if r.v == (0, 65535) && !r.inv {
        return;
    }
    let inv = if r.inv { "!" } else { "" };
    if r.v.0 == r.v.1 {
        let _ = write!(out, " {label}:{inv}{}", port_text(r.v.0, proto, f));
    } else {
        let _ = write!(
            out,
            " {label}s:{inv}{}:{}",
            port_text(r.v.0, proto, f),
            port_text(r.v.1, proto, f)
        );
    }
}

/// TCP flag names in the order iptables prints them.
pub fn tcp_flag_names(mut flags: u8) -> String {
    const NAMES: [(&str, u8); 6] = [
        ("FIN", 0x01),
        ("SYN", 0x02),
        ("RST", 0x04),
        ("PSH", 0x08),
        ("ACK", 0x10),
        ("URG", 0x20),
    ];
    if flags == 0 {
        return "NONE".into();
    }
    let mut parts = vec![];
    for (n, b) in NAMES {
        if flags & b != 0 {
            parts.push(n);
            flags &= !b;
        }
    }
    parts.join(",")
}

fn state_names(bits: u8) -> String {
    const NAMES: [(&str, u8); 7] = [
        ("INVALID", ct_state::INVALID),
        ("NEW", ct_state::NEW),
        ("RELATED", ct_state::RELATED),
        ("ESTABLISHED", ct_state::ESTABLISHED),
        ("UNTRACKED", ct_state::UNTRACKED),
        ("SNAT", 0x20),
        ("DNAT", 0x40),
    ];
    NAMES
        .iter()
        .filter(|(_, b)| bits & b != 0)
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join(",")
}

fn mark_text(v: u32, m: u32) -> String {
    if m == u32::MAX {
        format!(" 0x{v:x}")
    } else {
        format!(" 0x{v:x}/0x{m:x}")
    }
}

fn multiport_list(ports: &[PortRange], proto: &str, f: &ListFmt) -> String {
    ports
        .iter()
        .map(|&(a, b)| {
            if a == b {
                port_text(a, proto, f)
            } else {
                format!("{}:{}", port_text(a, proto, f), port_text(b, proto, f))
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn match_l(m: &Match, spec: &RuleSpec, f: &ListFmt, out: &mut String) {
    let proto = if spec.proto.v == PROTO_UDP {
        "udp"
    } else {
        "tcp"
    };
    match m {
        Match::Tcp {
            sport,
            dport,
            flags,
        } => {
            out.push_str(" tcp");
            ports_l("spt", sport, "tcp", f, out);
            ports_l("dpt", dport, "tcp", f, out);
            if let Some(fl) = flags {
                let inv = if fl.inv { "!" } else { "" };
                if f.numeric {
                    let _ = write!(out, " flags:{inv}0x{:02X}/0x{:02X}", fl.v.0, fl.v.1);
                } else {
                    let _ = write!(
                        out,
                        " flags:{inv}{}/{}",
                        tcp_flag_names(fl.v.0),
                        tcp_flag_names(fl.v.1)
                    );
                }
            }
        }
        Match::Udp { sport, dport } => {
            out.push_str(" udp");
            ports_l("spt", sport, "udp", f, out);
            ports_l("dpt", dport, "udp", f, out);
        }
        Match::Multiport { side, inv, ports } => {
            let which = match side {
                PortSide::Source => "sports ",
                PortSide::Destination => "dports ",
                PortSide::Either => "ports ",
            };
            let _ = write!(
                out,
                " multiport {which}{}{}",
                if *inv { " !" } else { "" },
                multiport_list(ports, proto, f)
            );
        }
        Match::Length(r) => {
            let inv = if r.inv { "!" } else { "" };
            if r.v.0 == r.v.1 {
                let _ = write!(out, " length {inv}{}", r.v.0);
            } else {
                let _ = write!(out, " length {inv}{}:{}", r.v.0, r.v.1);
            }
        }
        Match::Mark(m) => {
            let _ = write!(
                out,
                " mark match{}{}",
                if m.inv { " !" } else { "" },
                mark_text(m.v.0, m.v.1)
            );
        }
        Match::Connmark(m) => {
            let _ = write!(
                out,
                " connmark match {}{}",
                if m.inv { "!" } else { "" },
                mark_text(m.v.0, m.v.1)
            );
        }
        Match::Dscp(d) => {
            let _ = write!(
                out,
                " DSCP match {}0x{:02x}",
                if d.inv { "!" } else { "" },
                d.v
            );
        }
        Match::State(s) => {
            let _ = write!(
                out,
                " {}state {}",
                if s.inv { "! " } else { "" },
                state_names(s.v)
            );
        }
        Match::Conntrack(s) => {
            let _ = write!(
                out,
                " {}ctstate {}",
                if s.inv { "! " } else { "" },
                state_names(s.v)
            );
        }
    }
}

/// `MARK`/`CONNMARK` set forms as `-L` names them.
fn xset_l(prefix: &str, value: u32, mask: u32) -> String {
    if value == 0 {
        format!(" {prefix} and 0x{:x}", !mask)
    } else if value == mask {
        format!(" {prefix} or 0x{value:x}")
    } else if mask == 0 {
        format!(" {prefix} xor 0x{value:x}")
    } else if mask == u32::MAX {
        format!(" {prefix} set 0x{value:x}")
    } else {
        format!(" {prefix} xset 0x{value:x}/0x{mask:x}")
    }
}

fn masks_l(verb: &str, nfmask: u32, ctmask: u32, save: bool) -> String {
    if nfmask == u32::MAX && ctmask == u32::MAX {
        format!(" CONNMARK {verb}")
    } else if nfmask == ctmask {
        format!(" CONNMARK {verb} mask 0x{nfmask:x}")
    } else if save {
        format!(" CONNMARK {verb} nfmask 0x{nfmask:x} ctmask ~0x{ctmask:x}")
    } else {
        format!(" CONNMARK {verb} ctmask 0x{ctmask:x} nfmask ~0x{nfmask:x}")
    }
}

fn target_l(t: &Target) -> String {
    match t {
        Target::Mark { value, mask } => xset_l("MARK", *value, *mask),
        Target::Connmark(ConnmarkOp::Set { value, ctmask }) => xset_l("CONNMARK", *value, *ctmask),
        Target::Connmark(ConnmarkOp::Save { nfmask, ctmask }) => {
            masks_l("save", *nfmask, *ctmask, true)
        }
        Target::Connmark(ConnmarkOp::Restore { nfmask, ctmask }) => {
            masks_l("restore", *nfmask, *ctmask, false)
        }
        Target::Classify(c) => format!(" CLASSIFY set {:x}:{:x}", c >> 16, c & 0xffff),
        Target::Dscp(d) => format!(" DSCP set 0x{d:02x}"),
        _ => String::new(),
    }
}

fn iface_col(p: &Inv<String>, f: &ListFmt) -> String {
    let name = if p.v.is_empty() {
        if f.numeric {
            "*"
        } else {
            "any"
        }
    } else {
        &p.v
    };
    format!("{}{name}", if p.inv { "!" } else { "" })
}

/// One rule's `-L` line.
pub fn rule_line(num_: usize, r: &Rule, f: &ListFmt) -> String {
    let s = &r.spec;
    let mut out = String::new();
    if f.line_numbers {
        let _ = write!(out, "{num_:<4} ");
    }
    if f.verbose {
        out.push_str(&num(r.counters.packets, f));
        out.push_str(&num(r.counters.bytes, f));
    }
    let _ = write!(out, "{:<9} ", s.target.name());
    out.push(if s.proto.inv { '!' } else { ' ' });
    match protocol_name(s.proto.v).filter(|_| !f.numeric) {
        Some(n) => {
            let _ = write!(out, "{n:<5}");
        }
        None => {
            let _ = write!(out, "{:<5}", s.proto.v);
        }
    }
    out.push_str("-- ");
    if f.verbose {
        let _ = write!(out, " {:<6} ", iface_col(&s.iif, f));
        let _ = write!(out, "{:<6} ", iface_col(&s.oif, f));
    }
    out.push_str(&addr_col(&s.src, f));
    out.push_str(&addr_col(&s.dst, f));
    for m in &s.matches {
        match_l(m, s, f, &mut out);
    }
    out.push_str(&target_l(&s.target));
    out.push('\n');
    out
}

/// `-L [CHAIN [N]]` over the chains given.
pub fn list(t: &Table, chains: &[&Chain], rulenum: Option<usize>, f: &ListFmt) -> String {
    let mut out = String::new();
    for (i, c) in chains.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        if rulenum.is_none() {
            header(t, c, f, &mut out);
        }
        for (k, r) in c.rules.iter().enumerate() {
            if rulenum.is_none_or(|n| n == k + 1) {
                out.push_str(&rule_line(k + 1, r, f));
            }
        }
    }
    out
}

fn save_ports(opt: &str, r: &Option<Inv<PortRange>>, out: &mut String) {
    let Some(r) = r else { return };
    if r.v == (0, 65535) {
        return;
    }
    if r.inv {
        out.push_str(" !");
    }
    if r.v.0 == r.v.1 {
        let _ = write!(out, " --{opt} {}", r.v.0);
    } else {
        let _ = write!(out, " --{opt} {}:{}", r.v.0, r.v.1);
    }
}

fn match_s(m: &Match, out: &mut String) {
    let _ = write!(out, " -m {}", m.name());
    let bang = |inv: bool| if inv { " !" } else { "" };
    match m {
        Match::Tcp {
            sport,
            dport,
            flags,
        } => {
            save_ports("sport", sport, out);
            save_ports("dport", dport, out);
            if let Some(fl) = flags {
                let _ = write!(
                    out,
                    "{} --tcp-flags {} {}",
                    bang(fl.inv),
                    tcp_flag_names(fl.v.0),
                    tcp_flag_names(fl.v.1)
                );
            }
        }
        Match::Udp { sport, dport } => {
            save_ports("sport", sport, out);
            save_ports("dport", dport, out);
        }
        Match::Multiport { side, inv, ports } => {
            let opt = match side {
                PortSide::Source => "sports",
                PortSide::Destination => "dports",
                PortSide::Either => "ports",
            };
            let list = ports
                .iter()
                .map(|&(a, b)| {
                    if a == b {
                        a.to_string()
                    } else {
                        format!("{a}:{b}")
                    }
                })
                .collect::<Vec<_>>()
                .join(",");
            let _ = write!(out, "{} --{opt} {list}", bang(*inv));
        }
        Match::Length(r) => {
            if r.v.0 == r.v.1 {
                let _ = write!(out, "{} --length {}", bang(r.inv), r.v.0);
            } else {
                let _ = write!(out, "{} --length {}:{}", bang(r.inv), r.v.0, r.v.1);
            }
        }
        Match::Mark(m) | Match::Connmark(m) => {
            let _ = write!(out, "{} --mark{}", bang(m.inv), mark_text(m.v.0, m.v.1));
        }
        Match::Dscp(d) => {
            let _ = write!(out, "{} --dscp 0x{:02x}", bang(d.inv), d.v);
        }
        Match::State(s) => {
            let _ = write!(out, "{} --state {}", bang(s.inv), state_names(s.v));
        }
        Match::Conntrack(s) => {
            let _ = write!(out, "{} --ctstate {}", bang(s.inv), state_names(s.v));
        }
    }
}

fn target_s(t: &Target) -> String {
    match t {
        Target::Mark { value, mask } => format!(" --set-xmark 0x{value:x}/0x{mask:x}"),
        Target::Connmark(ConnmarkOp::Set { value, ctmask }) => {
            format!(" --set-xmark 0x{value:x}/0x{ctmask:x}")
        }
        Target::Connmark(ConnmarkOp::Save { nfmask, ctmask }) => {
            format!(" --save-mark --nfmask 0x{nfmask:x} --ctmask 0x{ctmask:x}")
        }
        Target::Connmark(ConnmarkOp::Restore { nfmask, ctmask }) => {
            format!(" --restore-mark --nfmask 0x{nfmask:x} --ctmask 0x{ctmask:x}")
        }
        Target::Classify(c) => format!(" --set-class {:04x}:{:04x}", c >> 16, c & 0xffff),
        Target::Dscp(d) => format!(" --set-dscp 0x{d:02x}"),
        _ => String::new(),
    }
}

/// One rule as `-S` prints it (what `-A` would recreate it).
pub fn rule_save(chain: &str, r: &Rule, counters: bool) -> String {
    let s = &r.spec;
    let mut out = format!("-A {chain}");
    for (letter, n) in [('s', &s.src), ('d', &s.dst)] {
        if n.v.mask == 0 && n.v.addr == 0 && !n.inv {
            continue;
        }
        let ones = n.v.mask.leading_ones();
        let mask = if n.v.mask.checked_shl(ones).unwrap_or(0) == 0 {
            ones.to_string()
        } else {
            std::net::Ipv4Addr::from(n.v.mask).to_string()
        };
        let _ = write!(
            out,
            "{} -{letter} {}/{mask}",
            if n.inv { " !" } else { "" },
            std::net::Ipv4Addr::from(n.v.addr)
        );
    }
    for (letter, i) in [('i', &s.iif), ('o', &s.oif)] {
        if !i.v.is_empty() {
            let _ = write!(out, "{} -{letter} {}", if i.inv { " !" } else { "" }, i.v);
        }
    }
    if s.proto.v != 0 {
        let name = protocol_name(s.proto.v)
            .map(String::from)
            .unwrap_or_else(|| s.proto.v.to_string());
        let _ = write!(out, "{} -p {name}", if s.proto.inv { " !" } else { "" });
    }
    for m in &s.matches {
        match_s(m, &mut out);
    }
    if counters {
        let _ = write!(out, " -c {} {}", r.counters.packets, r.counters.bytes);
    }
    if !s.target.name().is_empty() {
        let _ = write!(out, " -j {}{}", s.target.name(), target_s(&s.target));
    }
    out.push('\n');
    out
}

/// `-S [CHAIN [N]]`.
pub fn list_rules(chains: &[&Chain], rulenum: Option<usize>, counters: bool) -> String {
    let mut out = String::new();
    if rulenum.is_none() {
        for c in chains {
            if c.hook.is_some() {
                let pol = match c.policy {
                    sluice_core::netfilter::Policy::Accept => "ACCEPT",
                    sluice_core::netfilter::Policy::Drop => "DROP",
                };
                let _ = write!(out, "-P {} {pol}", c.name);
                if counters {
                    let _ = write!(
                        out,
                        " -c {} {}",
                        c.policy_counters.packets, c.policy_counters.bytes
                    );
                }
                out.push('\n');
            } else {
                let _ = writeln!(out, "-N {}", c.name);
            }
        }
    }
    for c in chains {
        for (k, r) in c.rules.iter().enumerate() {
            if rulenum.is_none_or(|n| n == k + 1) {
                out.push_str(&rule_save(&c.name, r, counters));
            }
        }
    }
    out
}
