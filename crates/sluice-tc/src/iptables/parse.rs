//! The iptables command line: argv to an [`Invocation`], with iptables'
//! messages for everything it refuses.
//!
//! iptables reads its arguments with `getopt_long` (short options cluster,
//! `-tmangle` carries its value, a lone `!` inverts the next option) and
//! loads an extension for each `-m NAME` and `-j TARGET`; an option iptables
//! itself does not know belongs to the most recently loaded extension that
//! has it, or to the protocol's match (`-p tcp` makes `--dport` mean `-m tcp
//! --dport`). Each extension checks its options when the line ends.

use super::names::{parse_protocol, parse_uint, service_port};
use super::{param, Fail};
use sluice_core::netfilter::rule::{
    ct_state, ConnmarkOp, Inv, Match, Net4, PortRange, PortSide, RuleSpec, Target, PROTO_TCP,
    PROTO_UDP,
};

/// The listing options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ListFmt {
    /// `-v`.
    pub verbose: bool,
    /// `-n`.
    pub numeric: bool,
    /// `-x`.
    pub exact: bool,
    /// `--line-numbers`.
    pub line_numbers: bool,
}

/// What to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// `-A CHAIN`.
    Append(String),
    /// `-C CHAIN`: is there such a rule?
    Check(String),
    /// `-D CHAIN N`.
    DeleteNum(String, usize),
    /// `-D CHAIN RULE`.
    Delete(String),
    /// `-I CHAIN [N]`.
    Insert(String, usize),
    /// `-R CHAIN N`.
    Replace(String, usize),
    /// `-L [CHAIN [N]]`.
    List(Option<String>, Option<usize>),
    /// `-S [CHAIN [N]]`.
    ListRules(Option<String>, Option<usize>),
    /// `-F [CHAIN]`.
    Flush(Option<String>),
    /// `-Z [CHAIN [N]]`.
    Zero(Option<String>),
    /// `-N CHAIN`.
    NewChain(String),
    /// `-X [CHAIN]`.
    DeleteChain(Option<String>),
    /// `-P CHAIN POLICY`.
    Policy(String, String),
    /// `-E OLD NEW`.
    Rename(String, String),
    /// `-V`.
    Version,
    /// `-h`.
    Help,
}

impl Command {
    fn letter(&self) -> char {
        match self {
            Command::Append(_) => 'A',
            Command::Check(_) => 'C',
            Command::DeleteNum(..) | Command::Delete(_) => 'D',
            Command::Insert(..) => 'I',
            Command::Replace(..) => 'R',
            Command::List(..) => 'L',
            Command::ListRules(..) => 'S',
            Command::Flush(_) => 'F',
            Command::Zero(_) => 'Z',
            Command::NewChain(_) => 'N',
            Command::DeleteChain(_) => 'X',
            Command::Policy(..) => 'P',
            Command::Rename(..) => 'E',
            Command::Version => 'V',
            Command::Help => 'h',
        }
    }

    /// Does it take a rule (matches and target)?
    fn takes_rule(&self) -> bool {
        matches!(
            self,
            Command::Append(_)
                | Command::Check(_)
                | Command::Delete(_)
                | Command::Insert(..)
                | Command::Replace(..)
        )
    }
}

/// A parsed command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Invocation {
    /// `-t` (default `filter`).
    pub table: String,
    /// The command.
    pub command: Command,
    /// The rules it names: one, or one per `-s`/`-d` address when those are lists.
    pub specs: Vec<RuleSpec>,
    /// Listing options.
    pub fmt: ListFmt,
}

/// Extensions iptables has that sluice does not model: refused by name.
const UNSUPPORTED_MATCHES: &[&str] = &[
    "addrtype",
    "ah",
    "bpf",
    "cgroup",
    "cluster",
    "comment",
    "connbytes",
    "connlabel",
    "connlimit",
    "cpu",
    "dccp",
    "devgroup",
    "ecn",
    "esp",
    "hashlimit",
    "helper",
    "hl",
    "icmp",
    "iprange",
    "ipvs",
    "limit",
    "mac",
    "nfacct",
    "osf",
    "owner",
    "physdev",
    "pkttype",
    "policy",
    "quota",
    "rateest",
    "realm",
    "recent",
    "rpfilter",
    "sctp",
    "set",
    "socket",
    "statistic",
    "string",
    "tcpmss",
    "time",
    "tos",
    "ttl",
    "u32",
    "udplite",
];
const UNSUPPORTED_TARGETS: &[&str] = &[
    "AUDIT",
    "CHECKSUM",
    "CLUSTERIP",
    "CONNSECMARK",
    "CT",
    "DNAT",
    "ECN",
    "HMARK",
    "IDLETIMER",
    "LED",
    "LOG",
    "MASQUERADE",
    "NETMAP",
    "NFLOG",
    "NFQUEUE",
    "NOTRACK",
    "QUEUE",
    "RATEEST",
    "REDIRECT",
    "REJECT",
    "SECMARK",
    "SET",
    "SNAT",
    "SYNPROXY",
    "TCPMSS",
    "TCPOPTSTRIP",
    "TEE",
    "TOS",
    "TPROXY",
    "TRACE",
    "TTL",
    "ULOG",
];

fn unsupported(what: &str, name: &str) -> Fail {
    Fail {
        stderr: format!(
            "sluice iptables: {what} `{name}' is not supported by sluice (matches: tcp, udp, multiport, length, mark, connmark, dscp, state, conntrack; targets: ACCEPT, DROP, RETURN, MARK, CONNMARK, CLASSIFY, DSCP, user chains)\n"
        ),
        code: 2,
    }
}

/// An extension being built: its name and options seen so far.
#[derive(Debug)]
enum Ext {
    Tcp {
        sport: Option<Inv<PortRange>>,
        dport: Option<Inv<PortRange>>,
        flags: Option<Inv<(u8, u8)>>,
        syn: bool,
    },
    Udp {
        sport: Option<Inv<PortRange>>,
        dport: Option<Inv<PortRange>>,
    },
    Multiport {
        side: Option<(PortSide, &'static str)>,
        inv: bool,
        ports: Vec<PortRange>,
    },
    Length(Option<Inv<(u16, u16)>>),
    Mark(Option<Inv<(u32, u32)>>),
    Connmark(Option<Inv<(u32, u32)>>),
    Dscp(Option<Inv<u8>>, Option<&'static str>),
    State(Option<Inv<u8>>),
    Conntrack(Option<Inv<u8>>),
    MarkTarget(Option<(u32, u32, &'static str)>),
    ConnmarkTarget {
        op: Option<(ConnmarkOp, &'static str)>,
        nfmask: Option<u32>,
        ctmask: Option<u32>,
        mask_opt: Option<&'static str>,
    },
    Classify(Option<u32>),
    DscpTarget(Option<(u8, &'static str)>),
}

/// The long options each extension has (name, takes an argument).
fn ext_options(e: &Ext) -> &'static [&'static str] {
    match e {
        Ext::Tcp { .. } => &[
            "source-port",
            "sport",
            "destination-port",
            "dport",
            "tcp-flags",
            "syn",
            "tcp-option",
        ],
        Ext::Udp { .. } => &["source-port", "sport", "destination-port", "dport"],
        Ext::Multiport { .. } => &[
            "source-ports",
            "sports",
            "destination-ports",
            "dports",
            "ports",
        ],
        Ext::Length(_) => &["length"],
        Ext::Mark(_) | Ext::Connmark(_) => &["mark"],
        Ext::Dscp(..) => &["dscp", "dscp-class"],
        Ext::State(_) => &["state"],
        Ext::Conntrack(_) => &[
            "ctstate",
            "ctproto",
            "ctorigsrc",
            "ctorigdst",
            "ctreplsrc",
            "ctrepldst",
            "ctorigsrcport",
            "ctorigdstport",
            "ctreplsrcport",
            "ctrepldstport",
            "ctstatus",
            "ctexpire",
            "ctdir",
        ],
        Ext::MarkTarget(_) => &["set-mark", "set-xmark", "and-mark", "or-mark", "xor-mark"],
        Ext::ConnmarkTarget { .. } => &[
            "set-mark",
            "set-xmark",
            "save-mark",
            "restore-mark",
            "and-mark",
            "or-mark",
            "xor-mark",
            "mask",
            "nfmask",
            "ctmask",
        ],
        Ext::Classify(_) => &["set-class"],
        Ext::DscpTarget(_) => &["set-dscp", "set-dscp-class"],
    }
}

fn takes_arg(opt: &str) -> bool {
    !matches!(opt, "syn" | "save-mark" | "restore-mark")
}

fn ext_name(e: &Ext) -> &'static str {
    match e {
        Ext::Tcp { .. } => "tcp",
        Ext::Udp { .. } => "udp",
        Ext::Multiport { .. } => "multiport",
        Ext::Length(_) => "length",
        Ext::Mark(_) => "mark",
        Ext::Connmark(_) => "connmark",
        Ext::Dscp(..) => "dscp",
        Ext::State(_) => "state",
        Ext::Conntrack(_) => "conntrack",
        Ext::MarkTarget(_) => "MARK",
        Ext::ConnmarkTarget { .. } => "CONNMARK",
        Ext::Classify(_) => "CLASSIFY",
        Ext::DscpTarget(_) => "DSCP",
    }
}

/// Messages of libxtables' option parser (`xtables_option_parse` and friends).
fn once(ext: &str, opt: &str) -> Fail {
    param(&format!(
        "{ext}: option \"--{opt}\" can only be used once.\n"
    ))
}
fn not_inv(ext: &str, opt: &str) -> Fail {
    param(&format!("{ext}: option \"--{opt}\" cannot be inverted.\n"))
}
/// Two exclusive options: libxtables names the one first in the
/// extension's option table, then the other.
fn together(ext: &str, a: &str, b: &str) -> Fail {
    const ORDER: &[&str] = &[
        "set-xmark",
        "set-mark",
        "and-mark",
        "or-mark",
        "xor-mark",
        "save-mark",
        "restore-mark",
        "ctmask",
        "nfmask",
        "mask",
        "source-ports",
        "destination-ports",
        "ports",
        "dscp",
        "dscp-class",
        "set-dscp",
        "set-dscp-class",
    ];
    let pos = |x: &str| ORDER.iter().position(|o| *o == x).unwrap_or(usize::MAX);
    let (a, b) = if pos(b) < pos(a) { (b, a) } else { (a, b) };
    param(&format!(
        "{ext}: option \"--{a}\" cannot be used together with \"--{b}\".\n"
    ))
}
fn bad_int(ext: &str, opt: &str) -> Fail {
    param(&format!(
        "{ext}: bad integer value for option \"--{opt}\", or out of range.\n"
    ))
}

/// `xtables_strtoui` over a whole word, within `max`.
fn uint(s: &str, max: u64) -> Option<u64> {
    parse_uint(s).filter(|v| *v <= max)
}

/// `XTTYPE_MARKMASK32`: `VALUE[/MASK]`, the mask defaulting to all ones.
fn markmask(ext: &str, opt: &str, s: &str) -> Result<(u32, u32), Fail> {
    let (v, m) = match s.split_once('/') {
        Some((v, m)) => (v, Some(m)),
        None => (s, None),
    };
    let v = uint(v, u32::MAX as u64).ok_or_else(|| bad_int(ext, opt))? as u32;
    let m = match m {
        None => u32::MAX,
        Some(m) if m.contains('/') => {
            return Err(param(&format!(
                "{ext}: trailing garbage after value for option \"--{opt}\".\n"
            )))
        }
        Some(m) => uint(m, u32::MAX as u64).ok_or_else(|| bad_int(ext, opt))? as u32,
    };
    Ok((v, m))
}

fn u32_arg(ext: &str, opt: &str, s: &str) -> Result<u32, Fail> {
    if s.contains('/') {
        return Err(param(&format!(
            "{ext}: trailing garbage after value for option \"--{opt}\".\n"
        )));
    }
    uint(s, u32::MAX as u64)
        .map(|v| v as u32)
        .ok_or_else(|| bad_int(ext, opt))
}

/// `xtables_parse_port`: a number or a service name of `proto`.
fn port(s: &str, proto: &str) -> Result<u16, Fail> {
    if let Some(p) = uint(s, 65535) {
        return Ok(p as u16);
    }
    service_port(s, proto).ok_or_else(|| param(&format!("invalid port/service `{s}' specified")))
}

/// `parse_tcp_ports`: `PORT`, `A:B`, `:B`, `A:`.
fn port_range(s: &str, proto: &str) -> Result<PortRange, Fail> {
    let Some((a, b)) = s.split_once(':') else {
        let p = port(s, proto)?;
        return Ok((p, p));
    };
    let lo = if a.is_empty() { 0 } else { port(a, proto)? };
    let hi = if b.is_empty() { 65535 } else { port(b, proto)? };
    if lo > hi {
        return Err(param("invalid portrange (min > max)"));
    }
    Ok((lo, hi))
}

/// `--tcp-flags` names.
fn tcp_flags(s: &str) -> Result<u8, Fail> {
    let mut f = 0u8;
    for name in s.split(',') {
        f |= match name.to_ascii_uppercase().as_str() {
            "SYN" => 0x02,
            "ACK" => 0x10,
            "FIN" => 0x01,
            "RST" => 0x04,
            "URG" => 0x20,
            "PSH" => 0x08,
            "ALL" => 0x3f,
            "NONE" => 0,
            _ => return Err(param(&format!("Unknown TCP flag `{name}'"))),
        };
    }
    Ok(f)
}

/// `--state`/`--ctstate` lists.
fn states(s: &str, what: &str) -> Result<u8, Fail> {
    let mut bits = 0;
    for name in s.split(',') {
        bits |= match name.to_ascii_uppercase().as_str() {
            "INVALID" => ct_state::INVALID,
            "NEW" => ct_state::NEW,
            "ESTABLISHED" => ct_state::ESTABLISHED,
            "RELATED" => ct_state::RELATED,
            "UNTRACKED" => ct_state::UNTRACKED,
            // SNAT/DNAT are virtual states of NATed connections; never seen here.
            "SNAT" if what == "ctstate" => 0x20,
            "DNAT" if what == "ctstate" => 0x40,
            _ => return Err(param(&format!("Bad {what} \"{name}\""))),
        };
    }
    Ok(bits)
}

/// DSCP class names (`class_to_dscp`).
fn dscp_class(s: &str) -> Option<u8> {
    let classes: [(&str, u8); 22] = [
        ("CS0", 0x00),
        ("CS1", 0x08),
        ("CS2", 0x10),
        ("CS3", 0x18),
        ("CS4", 0x20),
        ("CS5", 0x28),
        ("CS6", 0x30),
        ("CS7", 0x38),
        ("BE", 0x00),
        ("AF11", 0x0a),
        ("AF12", 0x0c),
        ("AF13", 0x0e),
        ("AF21", 0x12),
        ("AF22", 0x14),
        ("AF23", 0x16),
        ("AF31", 0x1a),
        ("AF32", 0x1c),
        ("AF33", 0x1e),
        ("AF41", 0x22),
        ("AF42", 0x24),
        ("AF43", 0x26),
        ("EF", 0x2e),
    ];
    let up = s.to_ascii_uppercase();
    classes.iter().find(|(n, _)| *n == up).map(|c| c.1)
}

fn dscp_value(ext: &str, opt: &str, s: &str) -> Result<u8, Fail> {
    uint(s, 63).map(|v| v as u8).ok_or_else(|| {
        param(&format!(
            "{ext}: bad value for option \"--{opt}\", or out of range (0-63).\n"
        ))
    })
}

/// `-s`/`-d`: `ADDR[/MASK][,ADDR[/MASK]...]`, numeric only (sluice does no name lookups).
fn addresses(s: &str) -> Result<Vec<Net4>, Fail> {
    let mut out = vec![];
    for part in s.split(',') {
        let (a, m) = match part.split_once('/') {
            Some((a, m)) => (a, Some(m)),
            None => (part, None),
        };
        let mask = match m {
            None => u32::MAX,
            Some(m) if m.contains('.') => m
                .parse::<std::net::Ipv4Addr>()
                .map(u32::from)
                .map_err(|_| param(&format!("host/network `{m}' not found")))?,
            Some(m) => match uint(m, 32) {
                Some(0) => 0,
                Some(n) => u32::MAX << (32 - n),
                None => return Err(param(&format!("invalid mask `{m}' specified"))),
            },
        };
        let addr: std::net::Ipv4Addr = a
            .parse()
            .map_err(|_| param(&format!("host/network `{a}' not found")))?;
        out.push(Net4 {
            addr: u32::from(addr) & mask,
            mask,
        });
    }
    Ok(out)
}

/// iptables' core long options, with the short letter each stands for.
const CORE_LONG: &[(&str, char)] = &[
    ("append", 'A'),
    ("check", 'C'),
    ("delete", 'D'),
    ("insert", 'I'),
    ("replace", 'R'),
    ("list", 'L'),
    ("list-rules", 'S'),
    ("flush", 'F'),
    ("zero", 'Z'),
    ("new-chain", 'N'),
    ("delete-chain", 'X'),
    ("rename-chain", 'E'),
    ("policy", 'P'),
    ("version", 'V'),
    ("help", 'h'),
    ("protocol", 'p'),
    ("source", 's'),
    ("src", 's'),
    ("destination", 'd'),
    ("dst", 'd'),
    ("in-interface", 'i'),
    ("out-interface", 'o'),
    ("jump", 'j'),
    ("goto", 'g'),
    ("match", 'm'),
    ("table", 't'),
    ("verbose", 'v'),
    ("numeric", 'n'),
    ("exact", 'x'),
    ("fragment", 'f'),
    ("wait", 'w'),
    ("wait-interval", 'W'),
    ("set-counters", 'c'),
    ("line-numbers", '0'),
    ("ipv4", '4'),
    ("ipv6", '6'),
];

/// Short options taking an argument (getopt's `X:`).
fn short_takes_arg(c: char) -> bool {
    "ACDRINEPpsdiojgmtc".contains(c)
}

struct Parser<'a> {
    argv: &'a [String],
    i: usize,
    invert: bool,
    command: Option<Command>,
    table: Option<String>,
    fmt: ListFmt,
    proto: Option<Inv<u8>>,
    src: Option<(bool, String)>,
    dst: Option<(bool, String)>,
    iif: Option<Inv<String>>,
    oif: Option<Inv<String>>,
    /// Loaded extensions in load order; index of the target among them.
    exts: Vec<Ext>,
    target: Option<(String, Option<usize>)>,
    /// Options given, for "Illegal option with this command".
    rule_opts: Vec<char>,
}

/// Parse an iptables command line (without the program name).
pub fn parse(argv: &[String]) -> Result<Invocation, Fail> {
    let mut p = Parser {
        argv,
        i: 0,
        invert: false,
        command: None,
        table: None,
        fmt: ListFmt::default(),
        proto: None,
        src: None,
        dst: None,
        iif: None,
        oif: None,
        exts: vec![],
        target: None,
        rule_opts: vec![],
    };
    while p.i < argv.len() {
        let a = argv[p.i].clone();
        p.i += 1;
        if a == "!" {
            if p.invert {
                return Err(param("multiple consecutive ! not allowed"));
            }
            p.invert = true;
            continue;
        }
        if let Some(long) = a.strip_prefix("--").filter(|l| !l.is_empty()) {
            let (name, attached) = match long.split_once('=') {
                Some((n, v)) => (n.to_string(), Some(v.to_string())),
                None => (long.to_string(), None),
            };
            if let Some(&(_, c)) = CORE_LONG.iter().find(|(n, _)| *n == name) {
                let arg = if short_takes_arg(c) {
                    Some(match attached {
                        Some(v) => v,
                        None => p.required(&format!("--{name}"))?,
                    })
                } else {
                    attached
                };
                p.short(c, arg)?;
            } else {
                p.extension_option(&name, attached)?;
            }
            continue;
        }
        if a.len() > 1 && a.starts_with('-') {
            let chars: Vec<char> = a[1..].chars().collect();
            let mut k = 0;
            while k < chars.len() {
                let c = chars[k];
                k += 1;
                if short_takes_arg(c) || "LSFZXwW".contains(c) {
                    let rest: String = chars[k..].iter().collect();
                    let arg = if !rest.is_empty() {
                        Some(rest)
                    } else if short_takes_arg(c) {
                        Some(p.required(&format!("-{c}"))?)
                    } else {
                        None
                    };
                    p.short(c, arg)?;
                    break;
                }
                p.short(c, None)?;
            }
            continue;
        }
        return Err(Fail {
            stderr: format!(
                "Bad argument `{a}'\nTry `iptables -h' or 'iptables --help' for more information.\n"
            ),
            code: 2,
        });
    }
    p.finish()
}

impl Parser<'_> {
    /// The argument of an option that requires one (getopt's next word).
    fn required(&mut self, opt: &str) -> Result<String, Fail> {
        let v = self
            .argv
            .get(self.i)
            .cloned()
            .ok_or_else(|| param(&format!("option \"{opt}\" requires an argument")))?;
        self.i += 1;
        Ok(v)
    }

    /// iptables' `xs_has_arg`: the next word is not an option or `!`.
    fn optional(&mut self) -> Option<String> {
        let w = self.argv.get(self.i)?;
        if w.starts_with('-') || w.starts_with('!') {
            return None;
        }
        self.i += 1;
        Some(w.clone())
    }

    fn take_invert(&mut self) -> bool {
        std::mem::take(&mut self.invert)
    }

    fn set_command(&mut self, cmd: Command) -> Result<(), Fail> {
        if self.invert {
            return Err(param("unexpected ! flag"));
        }
        if let Some(old) = &self.command {
            return Err(param(&format!(
                "Cannot use -{} with -{}",
                cmd.letter(),
                old.letter()
            )));
        }
        self.command = Some(cmd);
        Ok(())
    }

    fn rulenum(s: &str) -> Result<usize, Fail> {
        uint(s, i32::MAX as u64)
            .filter(|n| *n > 0)
            .map(|n| n as usize)
            .ok_or_else(|| param(&format!("Invalid rule number `{s}'")))
    }

    fn short(&mut self, c: char, arg: Option<String>) -> Result<(), Fail> {
        let arg_or_next = |p: &mut Self, a: Option<String>| a.or_else(|| p.optional());
        match c {
            'A' => self.set_command(Command::Append(arg.unwrap_or_default())),
            'C' => self.set_command(Command::Check(arg.unwrap_or_default())),
            'D' => {
                let chain = arg.unwrap_or_default();
                let cmd = match self.optional() {
                    Some(n) => Command::DeleteNum(chain, Self::rulenum(&n)?),
                    None => Command::Delete(chain),
                };
                self.set_command(cmd)
            }
            'I' => {
                let chain = arg.unwrap_or_default();
                let n = match self.optional() {
                    Some(n) => Self::rulenum(&n)?,
                    None => 1,
                };
                self.set_command(Command::Insert(chain, n))
            }
            'R' => {
                let chain = arg.unwrap_or_default();
                let n = self
                    .optional()
                    .ok_or_else(|| param("-R requires a rule number"))?;
                let n = Self::rulenum(&n)?;
                self.set_command(Command::Replace(chain, n))
            }
            'L' | 'S' => {
                let chain = arg_or_next(self, arg);
                let n = match self.optional() {
                    Some(n) => Some(Self::rulenum(&n)?),
                    None => None,
                };
                if c == 'L' {
                    self.set_command(Command::List(chain, n))
                } else {
                    self.set_command(Command::ListRules(chain, n))
                }
            }
            'F' => {
                let chain = arg_or_next(self, arg);
                self.set_command(Command::Flush(chain))
            }
            'Z' => {
                let chain = arg_or_next(self, arg);
                if chain.is_some() {
                    // A rule number only narrows what is zeroed; all of the chain is zeroed here.
                    if let Some(n) = self.optional() {
                        Self::rulenum(&n)?;
                    }
                }
                self.set_command(Command::Zero(chain))
            }
            'N' => self.set_command(Command::NewChain(arg.unwrap_or_default())),
            'X' => {
                let chain = arg_or_next(self, arg);
                self.set_command(Command::DeleteChain(chain))
            }
            'E' => {
                let old = arg.unwrap_or_default();
                let new = self
                    .optional()
                    .ok_or_else(|| param("-E requires old-chain-name and new-chain-name"))?;
                self.set_command(Command::Rename(old, new))
            }
            'P' => {
                let chain = arg.unwrap_or_default();
                let pol = self
                    .optional()
                    .ok_or_else(|| param("-P requires a chain and a policy"))?;
                self.set_command(Command::Policy(chain, pol))
            }
            'V' => self.set_command(Command::Version),
            'h' => self.set_command(Command::Help),
            'p' => {
                let inv = self.take_invert();
                if self.proto.is_some() {
                    return Err(param("multiple -p flags not allowed"));
                }
                let s = arg.unwrap_or_default();
                let v = parse_protocol(&s)
                    .ok_or_else(|| param(&format!("unknown protocol \"{s}\" specified")))?;
                if v == 0 && inv {
                    return Err(param("rule would never match protocol"));
                }
                self.rule_opts.push('p');
                self.proto = Some(Inv { inv, v });
                Ok(())
            }
            's' | 'd' => {
                let inv = self.take_invert();
                let slot = if c == 's' { &self.src } else { &self.dst };
                if slot.is_some() {
                    return Err(param(&format!("multiple -{c} flags not allowed")));
                }
                let v = arg.unwrap_or_default();
                self.rule_opts.push(c);
                if c == 's' {
                    self.src = Some((inv, v));
                } else {
                    self.dst = Some((inv, v));
                }
                Ok(())
            }
            'i' | 'o' => {
                let inv = self.take_invert();
                let name = arg.unwrap_or_default();
                if name.len() >= 16 {
                    return Err(param(&format!(
                        "interface name `{name}' must be shorter than IFNAMSIZ (15)"
                    )));
                }
                let slot = if c == 'i' {
                    &mut self.iif
                } else {
                    &mut self.oif
                };
                if slot.is_some() {
                    return Err(param(&format!("multiple -{c} flags not allowed")));
                }
                *slot = Some(Inv { inv, v: name });
                self.rule_opts.push(c);
                Ok(())
            }
            'j' | 'g' => {
                if self.take_invert() {
                    return Err(param(&format!("cannot have ! before -{c}")));
                }
                if c == 'g' {
                    return Err(unsupported("option", "-g (goto)"));
                }
                if self.target.is_some() {
                    return Err(param("multiple -j flags not allowed"));
                }
                self.rule_opts.push('j');
                let name = arg.unwrap_or_default();
                let ext = match name.as_str() {
                    "MARK" => Some(Ext::MarkTarget(None)),
                    "CONNMARK" => Some(Ext::ConnmarkTarget {
                        op: None,
                        nfmask: None,
                        ctmask: None,
                        mask_opt: None,
                    }),
                    "CLASSIFY" => Some(Ext::Classify(None)),
                    "DSCP" => Some(Ext::DscpTarget(None)),
                    n if UNSUPPORTED_TARGETS.contains(&n) => return Err(unsupported("target", n)),
                    _ => None,
                };
                let ix = ext.map(|e| {
                    self.exts.push(e);
                    self.exts.len() - 1
                });
                self.target = Some((name, ix));
                Ok(())
            }
            'm' => {
                if self.take_invert() {
                    return Err(param("unexpected ! flag before --match"));
                }
                let name = arg.unwrap_or_default();
                self.rule_opts.push('m');
                self.load_match(&name)
            }
            't' => {
                if self.take_invert() {
                    return Err(param("unexpected ! flag before --table"));
                }
                self.table = arg;
                Ok(())
            }
            'v' => {
                self.fmt.verbose = true;
                Ok(())
            }
            'n' => {
                self.fmt.numeric = true;
                Ok(())
            }
            'x' => {
                self.fmt.exact = true;
                Ok(())
            }
            '0' => {
                self.fmt.line_numbers = true;
                Ok(())
            }
            // -w/-W (xtables lock waiting) and -4: accepted and meaningless here.
            'w' | 'W' | '4' => {
                if let Some(a) = arg {
                    let _ = a;
                } else if c != '4' {
                    let _ = self.optional();
                }
                Ok(())
            }
            '6' => Err(param("This is the IPv4 version of iptables.")),
            'f' => Err(unsupported("option", "-f (fragments)")),
            'c' => Err(unsupported("option", "-c (set counters)")),
            _ => Err(param(&format!("unknown option \"-{c}\""))),
        }
    }

    fn load_match(&mut self, name: &str) -> Result<(), Fail> {
        let ext = match name {
            "tcp" => Ext::Tcp {
                sport: None,
                dport: None,
                flags: None,
                syn: false,
            },
            "udp" => Ext::Udp {
                sport: None,
                dport: None,
            },
            "multiport" => Ext::Multiport {
                side: None,
                inv: false,
                ports: vec![],
            },
            "length" => Ext::Length(None),
            "mark" => Ext::Mark(None),
            "connmark" => Ext::Connmark(None),
            "dscp" => Ext::Dscp(None, None),
            "state" => Ext::State(None),
            "conntrack" => Ext::Conntrack(None),
            n if UNSUPPORTED_MATCHES.contains(&n) => return Err(unsupported("match", n)),
            n => {
                return Err(param(&format!(
                    "Couldn't load match `{n}':No such file or directory\n"
                )))
            }
        };
        self.exts.push(ext);
        Ok(())
    }

    /// An option iptables' core does not know: the newest loaded extension
    /// that has it, else the protocol's match, loaded for it.
    fn extension_option(&mut self, name: &str, attached: Option<String>) -> Result<(), Fail> {
        let found = self
            .exts
            .iter()
            .rposition(|e| ext_options(e).contains(&name));
        let ix = match found {
            Some(ix) => ix,
            None => {
                let proto = self.proto.as_ref().filter(|p| !p.inv).map(|p| p.v);
                let candidate = match proto {
                    Some(PROTO_TCP) => Some("tcp"),
                    Some(PROTO_UDP) => Some("udp"),
                    Some(1) => return Err(unsupported("match", "icmp")),
                    _ => None,
                };
                let has = |m: &str| match m {
                    "tcp" => ext_options(&Ext::Tcp {
                        sport: None,
                        dport: None,
                        flags: None,
                        syn: false,
                    })
                    .contains(&name),
                    _ => ext_options(&Ext::Udp {
                        sport: None,
                        dport: None,
                    })
                    .contains(&name),
                };
                match candidate {
                    Some(m) if has(m) => {
                        self.load_match(m)?;
                        self.exts.len() - 1
                    }
                    _ => return Err(param(&format!("unknown option \"--{name}\""))),
                }
            }
        };
        let arg = if takes_arg(name) {
            Some(match attached {
                Some(v) => v,
                None => self.required(&format!("--{name}"))?,
            })
        } else {
            None
        };
        let inv = self.take_invert();
        self.ext_parse(ix, name, arg.unwrap_or_default(), inv)
    }

    fn ext_parse(&mut self, ix: usize, opt: &str, arg: String, inv: bool) -> Result<(), Fail> {
        let next_word = if opt == "tcp-flags" {
            Some(self.optional())
        } else {
            None
        };
        let proto_name = match self.proto.as_ref().map(|p| p.v) {
            Some(PROTO_UDP) => "udp",
            _ => "tcp",
        };
        let e = &mut self.exts[ix];
        let ename = ext_name(e);
        match e {
            Ext::Tcp {
                sport,
                dport,
                flags,
                syn,
            } => match opt {
                "sport" | "source-port" => {
                    if sport.is_some() {
                        return Err(param("Only one `--source-port' allowed"));
                    }
                    *sport = Some(Inv {
                        inv,
                        v: port_range(&arg, "tcp")?,
                    });
                }
                "dport" | "destination-port" => {
                    if dport.is_some() {
                        return Err(param("Only one `--destination-port' allowed"));
                    }
                    *dport = Some(Inv {
                        inv,
                        v: port_range(&arg, "tcp")?,
                    });
                }
                "syn" | "tcp-flags" => {
                    if flags.is_some() {
                        return Err(param("Only one of `--syn' or `--tcp-flags'  allowed"));
                    }
                    let v = if opt == "syn" {
                        *syn = true;
                        (0x17, 0x02)
                    } else {
                        let comp = next_word
                            .flatten()
                            .ok_or_else(|| param("--tcp-flags requires two args."))?;
                        (tcp_flags(&arg)?, tcp_flags(&comp)?)
                    };
                    *flags = Some(Inv { inv, v });
                }
                _ => return Err(unsupported("option", "--tcp-option")),
            },
            Ext::Udp { sport, dport } => {
                let slot = if opt.starts_with('s') { sport } else { dport };
                if slot.is_some() {
                    return Err(param(if opt.starts_with('s') {
                        "Only one `--source-port' allowed"
                    } else {
                        "Only one `--destination-port' allowed"
                    }));
                }
                *slot = Some(Inv {
                    inv,
                    v: port_range(&arg, "udp")?,
                });
            }
            Ext::Multiport {
                side,
                inv: i,
                ports,
            } => {
                let (s, long) = match opt {
                    "sports" | "source-ports" => (PortSide::Source, "source-ports"),
                    "dports" | "destination-ports" => (PortSide::Destination, "destination-ports"),
                    _ => (PortSide::Either, "ports"),
                };
                if let Some((_, old)) = side {
                    if *old == long {
                        return Err(once("multiport", long));
                    }
                    return Err(together("multiport", long, old));
                }
                let mut slots = 0;
                for part in arg.split(',') {
                    let r = if part.contains(':') {
                        slots += 2;
                        port_range(part, proto_name)?
                    } else {
                        slots += 1;
                        let p = port(part, proto_name)?;
                        (p, p)
                    };
                    ports.push(r);
                }
                if slots > 15 {
                    return Err(param("too many ports specified"));
                }
                *side = Some((s, long));
                *i = inv;
            }
            Ext::Length(slot) => {
                if slot.is_some() {
                    return Err(once("length", "length"));
                }
                let bad = || {
                    param(&format!(
                        "length: bad value for option \"--length\" near \"{arg}\", or out of range (0-65535).\n"
                    ))
                };
                let (a, b) = match arg.split_once(':') {
                    Some((a, b)) => (a, Some(b)),
                    None => (arg.as_str(), None),
                };
                let lo = if a.is_empty() {
                    0
                } else {
                    uint(a, 65535).ok_or_else(bad)? as u16
                };
                let hi = match b {
                    None => lo,
                    Some("") => 65535,
                    Some(b) => uint(b, 65535).ok_or_else(bad)? as u16,
                };
                *slot = Some(Inv { inv, v: (lo, hi) });
            }
            Ext::Mark(slot) | Ext::Connmark(slot) => {
                if slot.is_some() {
                    return Err(once(ename, "mark"));
                }
                *slot = Some(Inv {
                    inv,
                    v: markmask(ename, "mark", &arg)?,
                });
            }
            Ext::Dscp(slot, given) => {
                if let Some(old) = given {
                    return Err(if *old == opt {
                        once("dscp", opt)
                    } else {
                        together("dscp", opt, old)
                    });
                }
                let v = if opt == "dscp" {
                    dscp_value("dscp", "dscp", &arg)?
                } else {
                    dscp_class(&arg).ok_or_else(|| param(&format!("Invalid DSCP value `{arg}'")))?
                };
                *given = Some(if opt == "dscp" { "dscp" } else { "dscp-class" });
                *slot = Some(Inv { inv, v });
            }
            Ext::State(slot) => {
                if slot.is_some() {
                    return Err(once("state", "state"));
                }
                *slot = Some(Inv {
                    inv,
                    v: states(&arg, "state")?,
                });
            }
            Ext::Conntrack(slot) => {
                if opt != "ctstate" {
                    return Err(unsupported("option", &format!("--{opt}")));
                }
                if slot.is_some() {
                    return Err(once("conntrack", "ctstate"));
                }
                *slot = Some(Inv {
                    inv,
                    v: states(&arg, "ctstate")?,
                });
            }
            Ext::MarkTarget(slot) => {
                if inv {
                    return Err(not_inv("MARK", opt));
                }
                if let Some((_, _, old)) = slot {
                    return Err(if *old == opt {
                        once("MARK", opt)
                    } else {
                        together("MARK", old, opt)
                    });
                }
                let o: &'static str = ext_options(&Ext::MarkTarget(None))
                    .iter()
                    .find(|x| **x == opt)
                    .copied()
                    .unwrap_or("set-mark");
                let (value, mask) = match opt {
                    "set-xmark" => markmask("MARK", opt, &arg)?,
                    "set-mark" => {
                        let (v, m) = markmask("MARK", opt, &arg)?;
                        (v, v | m)
                    }
                    "and-mark" => (0, !u32_arg("MARK", opt, &arg)?),
                    "or-mark" => {
                        let v = u32_arg("MARK", opt, &arg)?;
                        (v, v)
                    }
                    _ => (u32_arg("MARK", opt, &arg)?, 0),
                };
                *slot = Some((value, mask, o));
            }
            Ext::ConnmarkTarget {
                op,
                nfmask,
                ctmask,
                mask_opt,
            } => {
                if inv {
                    return Err(not_inv("CONNMARK", opt));
                }
                let o: &'static str = ext_options(e_connmark())
                    .iter()
                    .find(|x| **x == opt)
                    .copied()
                    .unwrap_or("mask");
                match opt {
                    "mask" | "nfmask" | "ctmask" => {
                        if let Some(old) = mask_opt {
                            if *old == o || (*old == "mask") != (o == "mask") {
                                return Err(if *old == o {
                                    once("CONNMARK", o)
                                } else {
                                    together("CONNMARK", old, o)
                                });
                            }
                        }
                        let v = u32_arg("CONNMARK", opt, &arg)?;
                        if opt != "ctmask" {
                            *nfmask = Some(v);
                        }
                        if opt != "nfmask" {
                            *ctmask = Some(v);
                        }
                        if mask_opt.is_none() || o == "mask" {
                            *mask_opt = Some(o);
                        }
                    }
                    _ => {
                        if let Some((_, old)) = op {
                            return Err(if *old == o {
                                once("CONNMARK", o)
                            } else {
                                together("CONNMARK", old, o)
                            });
                        }
                        let new = match opt {
                            "set-xmark" => {
                                let (v, m) = markmask("CONNMARK", opt, &arg)?;
                                ConnmarkOp::Set {
                                    value: v,
                                    ctmask: m,
                                }
                            }
                            "set-mark" => {
                                let (v, m) = markmask("CONNMARK", opt, &arg)?;
                                ConnmarkOp::Set {
                                    value: v,
                                    ctmask: v | m,
                                }
                            }
                            "and-mark" => ConnmarkOp::Set {
                                value: 0,
                                ctmask: !u32_arg("CONNMARK", opt, &arg)?,
                            },
                            "or-mark" => {
                                let v = u32_arg("CONNMARK", opt, &arg)?;
                                ConnmarkOp::Set {
                                    value: v,
                                    ctmask: v,
                                }
                            }
                            "xor-mark" => ConnmarkOp::Set {
                                value: u32_arg("CONNMARK", opt, &arg)?,
                                ctmask: 0,
                            },
                            "save-mark" => ConnmarkOp::Save {
                                nfmask: u32::MAX,
                                ctmask: u32::MAX,
                            },
                            _ => ConnmarkOp::Restore {
                                nfmask: u32::MAX,
                                ctmask: u32::MAX,
                            },
                        };
                        *op = Some((new, o));
                    }
                }
            }
            Ext::Classify(slot) => {
                if inv {
                    return Err(not_inv("CLASSIFY", opt));
                }
                if slot.is_some() {
                    return Err(once("CLASSIFY", "set-class"));
                }
                *slot = Some(classify_value(&arg)?);
            }
            Ext::DscpTarget(slot) => {
                if inv {
                    return Err(not_inv("DSCP", opt));
                }
                if let Some((_, old)) = slot {
                    return Err(if *old == opt {
                        once("DSCP", opt)
                    } else {
                        together("DSCP", old, opt)
                    });
                }
                let (v, o) = if opt == "set-dscp" {
                    (dscp_value("DSCP", "set-dscp", &arg)?, "set-dscp")
                } else {
                    (
                        dscp_class(&arg)
                            .ok_or_else(|| param(&format!("Invalid DSCP value `{arg}'")))?,
                        "set-dscp-class",
                    )
                };
                *slot = Some((v, o));
            }
        }
        Ok(())
    }

    fn finish(mut self) -> Result<Invocation, Fail> {
        if self.invert {
            return Err(param("unexpected ! flag"));
        }
        let command = self
            .command
            .take()
            .ok_or_else(|| param("no command specified"))?;
        if !command.takes_rule() {
            if let Some(c) = self.rule_opts.first() {
                return Err(param(&format!("Illegal option `-{c}' with this command")));
            }
        }
        let table = self.table.clone().unwrap_or_else(|| "filter".into());
        let mut matches = vec![];
        let mut target = Target::None;
        let tix = self.target.as_ref().and_then(|t| t.1);
        let proto = self.proto.clone().unwrap_or(Inv::new(0));
        for (ix, e) in std::mem::take(&mut self.exts).into_iter().enumerate() {
            let ext = final_check(e, &proto)?;
            match ext {
                Built::Match(m) => matches.push(m),
                Built::Target(t) if Some(ix) == tix => target = t,
                Built::Target(_) => {}
            }
        }
        let any = || (false, vec![Net4 { addr: 0, mask: 0 }]);
        let srcs = match &self.src {
            Some((inv, s)) => (*inv, addresses(s)?),
            None => any(),
        };
        let dsts = match &self.dst {
            Some((inv, s)) => (*inv, addresses(s)?),
            None => any(),
        };
        if (srcs.1.len() > 1 || dsts.1.len() > 1) && (srcs.0 || dsts.0) {
            return Err(param(
                "! not allowed with multiple source or destination IP addresses",
            ));
        }
        if let Command::Append(ch)
        | Command::Check(ch)
        | Command::Delete(ch)
        | Command::Insert(ch, _)
        | Command::Replace(ch, _) = &command
        {
            if (ch == "PREROUTING" || ch == "INPUT") && self.oif.is_some() {
                return Err(param(&format!("Can't use -o with {ch}\n")));
            }
            if (ch == "POSTROUTING" || ch == "OUTPUT") && self.iif.is_some() {
                return Err(param(&format!("Can't use -i with {ch}\n")));
            }
        }
        if let Some((name, None)) = &self.target {
            target = match name.as_str() {
                "ACCEPT" => Target::Accept,
                "DROP" => Target::Drop,
                "RETURN" => Target::Return,
                "" => Target::None,
                n => Target::Jump(n.to_string()),
            };
        }
        let mut specs = vec![];
        for s in &srcs.1 {
            for d in &dsts.1 {
                specs.push(RuleSpec {
                    proto: proto.clone(),
                    src: Inv { inv: srcs.0, v: *s },
                    dst: Inv { inv: dsts.0, v: *d },
                    iif: self.iif.clone().unwrap_or(Inv::new(String::new())),
                    oif: self.oif.clone().unwrap_or(Inv::new(String::new())),
                    matches: matches.clone(),
                    target: target.clone(),
                });
            }
        }
        Ok(Invocation {
            table,
            command,
            specs,
            fmt: self.fmt,
        })
    }
}

fn e_connmark() -> &'static Ext {
    static E: Ext = Ext::ConnmarkTarget {
        op: None,
        nfmask: None,
        ctmask: None,
        mask_opt: None,
    };
    &E
}

/// `--set-class MAJOR:MINOR` in hex, as `sscanf("%x:%x")` reads it.
fn classify_value(s: &str) -> Result<u32, Fail> {
    let bad = || param(&format!("Bad class value \"{s}\""));
    let (a, b) = s.split_once(':').ok_or_else(bad)?;
    let hex = |t: &str| {
        let end = t.find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(t.len());
        let t = &t[..end];
        if t.is_empty() {
            None
        } else {
            u64::from_str_radix(t, 16).ok().map(|v| v as u32)
        }
    };
    let (maj, min) = (hex(a).ok_or_else(bad)?, hex(b).ok_or_else(bad)?);
    Ok((maj << 16) | (min & 0xffff))
}

enum Built {
    Match(Match),
    Target(Target),
}

/// Each extension's `final_check`.
fn final_check(e: Ext, proto: &Inv<u8>) -> Result<Built, Fail> {
    let must =
        |ext: &str, opt: &str| param(&format!("{ext}: option \"--{opt}\" must be specified\n"));
    Ok(match e {
        Ext::Tcp {
            sport,
            dport,
            flags,
            ..
        } => Built::Match(Match::Tcp {
            sport: sport.filter(|r| r.v != (0, 65535) || r.inv),
            dport: dport.filter(|r| r.v != (0, 65535) || r.inv),
            flags,
        }),
        Ext::Udp { sport, dport } => Built::Match(Match::Udp {
            sport: sport.filter(|r| r.v != (0, 65535) || r.inv),
            dport: dport.filter(|r| r.v != (0, 65535) || r.inv),
        }),
        Ext::Multiport { side, inv, ports } => {
            let Some((side, _)) = side else {
                return Err(param("multiport expection an option"));
            };
            if proto.inv
                || !(proto.v == PROTO_TCP
                    || proto.v == PROTO_UDP
                    || proto.v == 132
                    || proto.v == 33
                    || proto.v == 136)
            {
                return Err(param(
                    "multiport needs `-p tcp', `-p udp', `-p udplite', `-p sctp' or `-p dccp'",
                ));
            }
            Built::Match(Match::Multiport { side, inv, ports })
        }
        Ext::Length(v) => Built::Match(Match::Length(v.ok_or_else(|| must("length", "length"))?)),
        Ext::Mark(v) => Built::Match(Match::Mark(v.ok_or_else(|| must("mark", "mark"))?)),
        Ext::Connmark(v) => {
            Built::Match(Match::Connmark(v.ok_or_else(|| must("connmark", "mark"))?))
        }
        Ext::Dscp(v, _) => Built::Match(Match::Dscp(
            v.ok_or_else(|| param("DSCP match: Parameter --dscp is required"))?,
        )),
        Ext::State(v) => Built::Match(Match::State(v.ok_or_else(|| must("state", "state"))?)),
        Ext::Conntrack(v) => {
            Built::Match(Match::Conntrack(v.ok_or_else(|| {
                param("conntrack: At least one option is required")
            })?))
        }
        Ext::MarkTarget(v) => {
            let (value, mask, _) = v.ok_or_else(|| {
                param("MARK: One of the --set-xmark, --{and,or,xor,set}-mark options is required")
            })?;
            Built::Target(Target::Mark { value, mask })
        }
        Ext::ConnmarkTarget {
            op, nfmask, ctmask, ..
        } => {
            let (op, _) = op.ok_or_else(|| param("CONNMARK target: No operation specified"))?;
            let op = match op {
                ConnmarkOp::Save { .. } => ConnmarkOp::Save {
                    nfmask: nfmask.unwrap_or(u32::MAX),
                    ctmask: ctmask.unwrap_or(u32::MAX),
                },
                ConnmarkOp::Restore { .. } => ConnmarkOp::Restore {
                    nfmask: nfmask.unwrap_or(u32::MAX),
                    ctmask: ctmask.unwrap_or(u32::MAX),
                },
                set => set,
            };
            Built::Target(Target::Connmark(op))
        }
        Ext::Classify(v) => Built::Target(Target::Classify(
            v.ok_or_else(|| must("CLASSIFY", "set-class"))?,
        )),
        Ext::DscpTarget(v) => Built::Target(Target::Dscp(
            v.ok_or_else(|| param("DSCP target: Parameter --set-dscp is required"))?
                .0,
        )),
    })
}
