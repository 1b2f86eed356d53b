//! Service and protocol names, as iptables gets them from the C library
//! (`getservbyname`/`getservbyport` over /etc/services,
//! `getprotobyname`/`getprotobynumber` over /etc/protocols), with the
//! fallbacks libxtables has when those files say nothing, and a copy of
//! Debian's well-known entries where the files are missing.

use std::sync::OnceLock;

struct Db {
    /// (name or alias, port, protocol) in file order.
    services: Vec<(String, u16, String, bool)>,
    /// (name or alias, number) in file order.
    protocols: Vec<(String, u8, bool)>,
}

/// Debian netbase's well-known ports and protocols, for machines without
/// /etc/services or /etc/protocols (minimal container images).
const FALLBACK_SERVICES: &str = "tcpmux 1/tcp
echo 7/tcp
echo 7/udp
discard 9/tcp
discard 9/udp
systat 11/tcp
daytime 13/tcp
daytime 13/udp
netstat 15/tcp
qotd 17/tcp
chargen 19/tcp
chargen 19/udp
ftp-data 20/tcp
ftp 21/tcp
fsp 21/udp
ssh 22/tcp
telnet 23/tcp
smtp 25/tcp
time 37/tcp
time 37/udp
whois 43/tcp
tacacs 49/tcp
tacacs 49/udp
domain 53/tcp
domain 53/udp
bootps 67/udp
bootpc 68/udp
tftp 69/udp
gopher 70/tcp
finger 79/tcp
http 80/tcp
kerberos 88/tcp
kerberos 88/udp
iso-tsap 102/tcp
acr-nema 104/tcp
pop3 110/tcp
sunrpc 111/tcp
sunrpc 111/udp
auth 113/tcp
nntp 119/tcp
ntp 123/udp
epmap 135/tcp
netbios-ns 137/udp
netbios-dgm 138/udp
netbios-ssn 139/tcp
imap2 143/tcp
snmp 161/tcp
snmp 161/udp
snmp-trap 162/tcp
snmp-trap 162/udp
cmip-man 163/tcp
cmip-man 163/udp
cmip-agent 164/tcp
cmip-agent 164/udp
mailq 174/tcp
xdmcp 177/udp
bgp 179/tcp
smux 199/tcp
qmtp 209/tcp
z3950 210/tcp
ipx 213/udp
ptp-event 319/udp
ptp-general 320/udp
pawserv 345/tcp
zserv 346/tcp
rpc2portmap 369/tcp
rpc2portmap 369/udp
codaauth2 370/tcp
codaauth2 370/udp
clearcase 371/udp
ldap 389/tcp
ldap 389/udp
svrloc 427/tcp
svrloc 427/udp
https 443/tcp
https 443/udp
snpp 444/tcp
microsoft-ds 445/tcp
kpasswd 464/tcp
kpasswd 464/udp
submissions 465/tcp
saft 487/tcp
isakmp 500/udp
rtsp 554/tcp
rtsp 554/udp
nqs 607/tcp
asf-rmcp 623/udp
qmqp 628/tcp
ipp 631/tcp
ldp 646/tcp
ldp 646/udp
exec 512/tcp
biff 512/udp
login 513/tcp
who 513/udp
shell 514/tcp
syslog 514/udp
printer 515/tcp
talk 517/udp
ntalk 518/udp
route 520/udp
gdomap 538/tcp
gdomap 538/udp
uucp 540/tcp
klogin 543/tcp
kshell 544/tcp
dhcpv6-client 546/udp
dhcpv6-server 547/udp
afpovertcp 548/tcp
nntps 563/tcp
submission 587/tcp
ldaps 636/tcp
ldaps 636/udp
tinc 655/tcp
tinc 655/udp
silc 706/tcp
kerberos-adm 749/tcp
domain-s 853/tcp
domain-s 853/udp
rsync 873/tcp
ftps-data 989/tcp
ftps 990/tcp
telnets 992/tcp
imaps 993/tcp
pop3s 995/tcp
kerberos4 750/udp
kerberos4 750/tcp
kerberos-master 751/udp
kerberos-master 751/tcp
passwd-server 752/udp
krb-prop 754/tcp
supfilesrv 871/tcp
poppassd 106/tcp
moira-db 775/tcp
moira-update 777/tcp
moira-ureg 779/udp
spamd 783/tcp";
const FALLBACK_PROTOCOLS: &str = "ip 0
hopopt 0
icmp 1
igmp 2
ggp 3
ipencap 4
st 5
tcp 6
egp 8
igp 9
pup 12
udp 17
hmp 20
xns-idp 22
rdp 27
iso-tp4 29
dccp 33
xtp 36
ddp 37
idpr-cmtp 38
ipv6 41
ipv6-route 43
ipv6-frag 44
idrp 45
rsvp 46
gre 47
esp 50
ah 51
skip 57
ipv6-icmp 58
ipv6-nonxt 59
ipv6-opts 60
rspf 73
vmtp 81
eigrp 88
ospf 89
ax.25 93
ipip 94
etherip 97
encap 98
pim 103
ipcomp 108
vrrp 112
l2tp 115
isis 124
sctp 132
fc 133
mobility-header 135
udplite 136
mpls-in-ip 137
manet 138
hip 139
shim6 140
wesp 141
rohc 142
ethernet 143
mptcp 262";

fn read_or(path: &str, fallback: &str) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|_| fallback.to_string())
}

fn db() -> &'static Db {
    static DB: OnceLock<Db> = OnceLock::new();
    DB.get_or_init(|| {
        let mut services = vec![];
        for line in read_or("/etc/services", FALLBACK_SERVICES).lines() {
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
        for line in read_or("/etc/protocols", FALLBACK_PROTOCOLS).lines() {
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
