//! Service and protocol names, as iptables gets them from the C library
//! (`getservbyname`/`getservbyport` over /etc/services,
//! `getprotobyname`/`getprotobynumber` over /etc/protocols), with the
//! fallbacks libxtables has when those files say nothing.

use std::sync::OnceLock;

struct Db {
    /// (name or alias, port, protocol) in file order.
    services: Vec<(String, u16, String, bool)>,
    /// (name or alias, number) in file order.
    protocols: Vec<(String, u8, bool)>,
}

fn db() -> &'static Db {
    static DB: OnceLock<Db> = OnceLock::new();
    DB.get_or_init(|| {
        let mut services = vec![];
        for line in std::fs::read_to_string("/etc/services")
            .unwrap_or_default()
            .lines()
        {
            let line = line.split('#').next().unwrap_or("");
            let mut w = line.split_whitespace();
            let (Some(name), Some(pp)) = (w.next(), w.next()) else {
                continue;
            };
            let Some((port, proto)) = pp.split_once('/') else {
                continue;
            };
            let Ok(port) = port.parse::<u16>() else {
                continue;
            };
            services.push((name.to_string(), port, proto.to_string(), true));
            for alias in w {
                services.push((alias.to_string(), port, proto.to_string(), false));
            }
        }
        let mut protocols = vec![];
        for line in std::fs::read_to_string("/etc/protocols")
            .unwrap_or_default()
            .lines()
        {
            let line = line.split('#').next().unwrap_or("");
            let mut w = line.split_whitespace();
            let (Some(name), Some(num)) = (w.next(), w.next()) else {
                continue;
            };
            let Ok(num) = num.parse::<u8>() else { continue };
            protocols.push((name.to_string(), num, true));
            for alias in w {
                protocols.push((alias.to_string(), num, false));
            }
        }
        Db {
            services,
            protocols,
        }
    })
}

/// `getservbyname(name, proto)`.
pub fn service_port(name: &str, proto: &str) -> Option<u16> {
    db().services
        .iter()
        .find(|(n, _, p, _)| n == name && p == proto)
        .map(|s| s.1)
}

/// `getservbyport(port, proto)`: the first entry's official name.
pub fn service_name(port: u16, proto: &str) -> Option<&'static str> {
    db().services
        .iter()
        .find(|(_, n, p, official)| *n == port && p == proto && *official)
        .map(|s| s.0.as_str())
}

/// libxtables' own table (`xtables_chain_protos`), used when /etc/protocols does not know a name.
const CHAIN_PROTOS: &[(&str, u8)] = &[
    ("tcp", 6),
    ("sctp", 132),
    ("udp", 17),
    ("udplite", 136),
    ("icmp", 1),
    ("icmpv6", 58),
    ("ipv6-icmp", 58),
    ("esp", 50),
    ("ah", 51),
    ("ipv6-mh", 135),
    ("mh", 135),
    ("all", 0),
];

/// `xtables_parse_protocol`: a number, a name from /etc/protocols, or one of libxtables' names.
pub fn parse_protocol(s: &str) -> Option<u8> {
    let s = s.to_ascii_lowercase();
    if let Some(n) = parse_uint(&s).filter(|n| *n <= 255) {
        return Some(n as u8);
    }
    if s == "all" {
        return Some(0);
    }
    db().protocols
        .iter()
        .find(|(n, _, _)| *n == s)
        .map(|p| p.1)
        .or_else(|| CHAIN_PROTOS.iter().find(|(n, _)| *n == s).map(|p| p.1))
}

/// `proto_to_name`: the name -L prints for a protocol number (None: print the number).
pub fn protocol_name(num: u8) -> Option<&'static str> {
    if num == 0 {
        return Some("all");
    }
    db().protocols
        .iter()
        .find(|(_, n, official)| *n == num && *official)
        .map(|p| p.0.as_str())
        .or_else(|| CHAIN_PROTOS.iter().find(|(_, n)| *n == num).map(|p| p.0))
}

/// `strtoul(s, &end, 0)` over the whole string: decimal, `0x` hex or `0` octal.
pub fn parse_uint(s: &str) -> Option<u64> {
    let s = s.trim_start();
    if s.starts_with('-') || s.starts_with('+') {
        return None;
    }
    let (digits, radix) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (h, 16)
    } else if s.len() > 1 && s.starts_with('0') {
        (&s[1..], 8)
    } else {
        (s, 10)
    };
    if digits.is_empty() {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}
