//! `iptables`: the command language over sluice-core's netfilter model.
//!
//! `sluice iptables ...` (or the binary invoked as `iptables`) speaks
//! iptables 1.8's command line for the filter and mangle tables — `-A`,
//! `-C`, `-I [N]`, `-D [N|rule]`, `-R`, `-F`, `-Z`, `-N`, `-X`, `-E`, `-P`,
//! `-L [-v] [-n] [-x] [--line-numbers]`, `-S` — with the matches and targets
//! of [`sluice_core::netfilter::rule`], and prints what iptables-legacy
//! 1.8.9 prints, errors and exit codes included (2 for a bad command line,
//! 1 for what the kernel refuses, 3 for an unknown table). The tables live
//! in the namespace's [`Net`], so `-n NAME`/`$SLUICE_NETNS` and the state
//! directory work as for tc.
//!
//! Deviations: addresses are numeric (no DNS or /etc/networks lookups, so
//! `-L` without `-n` prints addresses as numbers, as iptables does when a
//! lookup fails); service and protocol names come from /etc/services and
//! /etc/protocols as in iptables. The nat, raw and security tables and the
//! extensions sluice does not model are refused with a message saying so.
//! `-h` prints a short summary rather than iptables' full help.

mod names;
pub mod parse;
pub mod print;

use crate::args::Fail;
use crate::net::Net;
use crate::Outcome;
use parse::{Command, Invocation};
use sluice_core::netfilter::rule::Target;
use sluice_core::netfilter::{Chain, NfError, Table, TableId};

/// The version iptables reports, and the prefix of its parameter errors.
pub const VERSION: &str = "iptables v1.8.9 (legacy)";

/// A command-line problem (`PARAMETER_PROBLEM`, exit 2).
pub(crate) fn param(msg: &str) -> Fail {
    Fail {
        stderr: format!(
            "{VERSION}: {msg}\nTry `iptables -h' or 'iptables --help' for more information.\n"
        ),
        code: 2,
    }
}

fn kernel(e: NfError) -> Fail {
    Fail {
        stderr: format!("iptables: {e}\n"),
        code: 1,
    }
}

const HELP: &str = "iptables v1.8.9 (legacy) as modelled by sluice

Usage: iptables [-t filter|mangle] -[ACD] chain rule-specification [options]
       iptables -I chain [rulenum] rule-specification [options]
       iptables -R chain rulenum rule-specification [options]
       iptables -D chain rulenum [options]
       iptables -[LS] [chain [rulenum]] [options]
       iptables -[FZ] [chain] [options]
       iptables -[NX] chain
       iptables -E old-chain-name new-chain-name
       iptables -P chain target [options]

Rule specification: [!] -p proto, [!] -s address[/mask], [!] -d address[/mask],
  [!] -i input-name[+], [!] -o output-name[+], -m match [options], -j target [options]
Matches: tcp, udp (--sport, --dport, --tcp-flags, --syn), multiport, length,
  mark, connmark, dscp, state, conntrack (--ctstate)
Targets: ACCEPT, DROP, RETURN, user chains, MARK, CONNMARK, CLASSIFY, DSCP
Listing: -v, -n, -x, --line-numbers
";

/// Does this iptables command line change state (so it is logged)?
pub fn mutates(argv: &[String]) -> bool {
    match parse::parse(argv) {
        Ok(inv) => !matches!(
            inv.command,
            Command::List(..)
                | Command::ListRules(..)
                | Command::Check(_)
                | Command::Version
                | Command::Help
        ),
        Err(_) => false,
    }
}

/// Run `iptables ARGS...` against `net`.
pub fn run(net: &mut Net, argv: &[String]) -> Outcome {
    match parse::parse(argv).and_then(|inv| apply(net, inv)) {
        Ok(stdout) => Outcome {
            stdout,
            ..Default::default()
        },
        Err(f) => Outcome {
            stderr: f.stderr,
            code: f.code,
            ..Default::default()
        },
    }
}

fn table_id(name: &str) -> Result<TableId, Fail> {
    match name {
        "filter" => Ok(TableId::Filter),
        "mangle" => Ok(TableId::Mangle),
        "nat" | "raw" | "security" => Err(Fail {
            stderr: format!(
                "sluice iptables: table `{name}' is not supported by sluice (it models the mangle and filter tables)\n"
            ),
            code: 3,
        }),
        _ => Err(Fail {
            stderr: format!(
                "{VERSION}: can't initialize iptables table `{name}': Table does not exist (do you need to insmod?)\nPerhaps iptables or your kernel needs to be upgraded.\n"
            ),
            code: 3,
        }),
    }
}

fn chains<'t>(t: &'t Table, name: &Option<String>) -> Result<Vec<&'t Chain>, Fail> {
    match name {
        Some(n) => Ok(vec![t.chain(n).ok_or_else(|| kernel(NfError::NoChain))?]),
        None => Ok(t.chains.iter().collect()),
    }
}

fn apply(net: &mut Net, inv: Invocation) -> Result<String, Fail> {
    match &inv.command {
        Command::Version => return Ok(format!("{VERSION}\n")),
        Command::Help => return Ok(HELP.to_string()),
        _ => {}
    }
    let t = net.netfilter.table_mut(table_id(&inv.table)?);
    // A jump must name a chain of this table (else iptables could not load
    // a target of that name).
    if let Some(Target::Jump(j)) = inv.specs.first().map(|s| &s.target) {
        if t.chain(j).is_none() {
            return Err(param(&format!(
                "Couldn't load target `{j}':No such file or directory\n"
            )));
        }
    }
    let k = |r: Result<(), NfError>| r.map_err(kernel);
    match inv.command {
        Command::Append(c) => {
            for s in inv.specs {
                k(t.append(&c, s))?;
            }
        }
        Command::Check(c) => {
            let ch = t.chain(&c).ok_or_else(|| kernel(NfError::NoChain))?;
            for s in &inv.specs {
                if !ch.rules.iter().any(|r| r.spec == *s) {
                    // libiptc's check answers ENOENT for a missing rule.
                    return Err(kernel(NfError::NoChain));
                }
            }
        }
        Command::Insert(c, n) => {
            for s in inv.specs.into_iter().rev() {
                k(t.insert(&c, n, s))?;
            }
        }
        Command::Replace(c, n) => {
            if inv.specs.len() != 1 {
                return Err(param("Replacement rule does not specify a unique address"));
            }
            let s = inv.specs.into_iter().next().unwrap_or_default();
            k(t.replace(&c, n, s))?;
        }
        Command::DeleteNum(c, n) => k(t.delete_num(&c, n))?,
        Command::Delete(c) => {
            for s in &inv.specs {
                k(t.delete_spec(&c, s))?;
            }
        }
        Command::Flush(c) => k(t.flush(c.as_deref()))?,
        Command::Zero(c) => k(t.zero(c.as_deref()))?,
        Command::NewChain(c) => {
            if c.len() >= 29 {
                return Err(param(&format!(
                    "chain name `{c}' too long (must be under 29 chars)"
                )));
            }
            if ["ACCEPT", "DROP", "RETURN", "QUEUE"].contains(&c.as_str()) || c.starts_with('!') {
                return Err(param(&format!(
                    "chain name not allowed to start with `{}'",
                    &c[..1]
                )));
            }
            k(t.new_chain(&c))?
        }
        Command::DeleteChain(c) => k(t.delete_chain(c.as_deref()))?,
        Command::Policy(c, p) => k(t.set_policy(&c, &p))?,
        Command::Rename(old, new) => k(t.rename_chain(&old, &new))?,
        Command::List(c, n) => {
            let list = chains(t, &c)?;
            return Ok(print::list(t, &list, n, &inv.fmt));
        }
        Command::ListRules(c, n) => {
            let list = chains(t, &c)?;
            return Ok(print::list_rules(&list, n, inv.fmt.verbose));
        }
        Command::Version | Command::Help => {}
    }
    Ok(String::new())
}
