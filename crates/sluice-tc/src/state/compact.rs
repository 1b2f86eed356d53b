//! Compaction: which logged commands a later one supersedes, and the proof
//! that dropping them changes nothing.
//!
//! A namespace that has run `tc qdisc change dev eth0 root netem ...` once a
//! second for a day holds 86 400 changes of which only the last one shows.
//! [`superseded`] names the candidates: a `tc qdisc change` or `tc class
//! change` followed, later in the history, by another `change` or a
//! `replace` of the same object (same device, handle or parent, classid and
//! kind). That is only a guess — a change may set just the attributes it
//! names (fq_codel's does), and something in between may have depended on
//! the intermediate state — so the guess is checked: the shortened history
//! is replayed into a fresh namespace, and its [`fingerprint`] — everything
//! `tc`, `ip` and `iptables` can show of it, plus the counters history
//! determines — must equal the full history's. If it does not, or if any
//! command of the shortened history fails, nothing is dropped.

use super::record::Command;
use crate::args::matches;
use crate::net::Net;
use crate::{ip, iptables, tc};
use std::collections::HashMap;

/// The identity of the object a `tc qdisc|class change|replace` names, and
/// whether it is a change (droppable) or a replace (only a superseder).
fn object_key(words: &[String]) -> Option<(String, bool)> {
    let [tool, obj, cmd, rest @ ..] = words else {
        return None;
    };
    if tool != "tc" {
        return None;
    }
    let obj = if matches(obj, "qdisc") {
        "qdisc"
    } else if matches(obj, "class") {
        "class"
    } else {
        return None;
    };
    // tc tries `add` before `change` and `change` before `replace`.
    if matches(cmd, "add") {
        return None;
    }
    let is_change = matches(cmd, "change");
    if !is_change && !matches(cmd, "replace") {
        return None;
    }
    let mut key = String::from(obj);
    let mut it = rest.iter();
    while let Some(w) = it.next() {
        match w.as_str() {
            "dev" | "handle" | "parent" | "classid" => {
                key.push(' ');
                key.push_str(w);
                key.push(' ');
                key.push_str(it.next()?);
            }
            "root" | "ingress" | "clsact" => {
                key.push(' ');
                key.push_str(w);
            }
            // Anything else with arguments before the kind: not a candidate.
            "estimator" | "stab" | "ingress_block" | "egress_block" => return None,
            kind => {
                key.push_str(" kind ");
                key.push_str(kind);
                return Some((key, is_change));
            }
        }
    }
    None
}

/// Indices of commands a later command of the same object supersedes.
pub fn superseded(cmds: &[Command]) -> Vec<bool> {
    let mut drop = vec![false; cmds.len()];
    let mut later: HashMap<String, ()> = HashMap::new();
    for (i, c) in cmds.iter().enumerate().rev() {
        if let Some((key, is_change)) = object_key(&c.words) {
            if is_change && later.contains_key(&key) {
                drop[i] = true;
            }
            later.insert(key, ());
        }
    }
    drop
}

fn w(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

fn show(fp: &mut String, label: &str, o: crate::Outcome) {
    fp.push_str(label);
    fp.push_str(&format!(" [{}]\n", o.code));
    fp.push_str(&o.stdout);
    fp.push_str(&o.stderr);
}

/// Handles of qdiscs and classes, and shared block indices, in a `tc qdisc
/// show`/`tc class show` listing (the word after the kind; the number after
/// `ingress_block`/`egress_block`).
fn handles_and_blocks(listing: &str, handles: &mut Vec<String>, blocks: &mut Vec<String>) {
    for line in listing.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if matches!(f.first(), Some(&"qdisc") | Some(&"class")) {
            if let Some(h) = f.get(2) {
                handles.push(h.to_string());
            }
        }
        for pair in f.windows(2) {
            if pair[0] == "ingress_block" || pair[0] == "egress_block" {
                blocks.push(pair[1].to_string());
            }
        }
    }
}

/// Everything `tc`, `ip` and `iptables` show of `net`, and the counters its
/// history determines. Two namespaces with equal fingerprints answer every
/// listing command alike. (Listing actions marks them used by a dump, in
/// both namespaces alike.)
pub fn fingerprint(net: &mut Net) -> String {
    let opts = tc::Opts {
        stats: true,
        details: true,
        ..Default::default()
    };
    let mut fp = format!(
        "autohandle {:x} ifindex {}\n",
        net.autohandle,
        net.next_ifindex()
    );
    let devs: Vec<String> = net.devices.iter().map(|d| d.info.name.clone()).collect();
    let mut blocks = vec![];
    for dev in &devs {
        let mut handles = vec![];
        for obj in ["qdisc", "class"] {
            let o = tc::run(net, &opts, &w(&format!("{obj} show dev {dev}")));
            handles_and_blocks(&o.stdout, &mut handles, &mut blocks);
            show(&mut fp, &format!("{obj} {dev}"), o);
        }
        show(
            &mut fp,
            "filter",
            tc::run(net, &opts, &w(&format!("filter show dev {dev}"))),
        );
        for h in handles
            .iter()
            .chain(["ingress".into(), "egress".into()].iter())
        {
            let what = if h.ends_with(':') || h.contains(':') {
                format!("filter show dev {dev} parent {h}")
            } else {
                format!("filter show dev {dev} {h}")
            };
            show(&mut fp, &what, tc::run(net, &opts, &w(&what)));
        }
    }
    blocks.sort();
    blocks.dedup();
    for b in blocks {
        let what = format!("filter show block {b}");
        show(&mut fp, &what, tc::run(net, &opts, &w(&what)));
    }
    for kind in sluice_core::act::KNOWN_KINDS {
        let what = format!("actions ls action {kind}");
        show(&mut fp, &what, tc::run(net, &opts, &w(&what)));
    }
    for what in [
        "-d link show",
        "address show",
        "route show",
        "-6 route show",
    ] {
        show(&mut fp, what, ip::run(net, &w(what)));
    }
    for table in ["filter", "mangle"] {
        for what in [format!("-t {table} -S"), format!("-t {table} -L -v -n -x")] {
            show(&mut fp, &what, iptables::run(net, &w(&what)));
        }
    }
    fp
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> Command {
        Command { at: 0, words: w(s) }
    }

    #[test]
    fn only_a_change_followed_by_a_change_or_replace_of_the_same_object_is_a_candidate() {
        let cmds = [
            c("tc qdisc add dev lo root netem delay 1ms"),
            c("tc qdisc change dev lo root netem delay 2ms"),
            c("tc qdisc change dev lo root netem delay 3ms"),
            c("tc qdisc change dev lo handle 1: netem delay 3ms"),
            c("tc class change dev lo parent 1: classid 1:1 htb rate 1mbit"),
            c("tc qdisc replace dev lo root netem delay 4ms"),
            c("tc class change dev lo parent 1: classid 1:2 htb rate 1mbit"),
            c("tc qdisc change dev eth0 root netem delay 5ms"),
        ];
        assert_eq!(
            superseded(&cmds),
            [false, true, true, false, false, false, false, false]
        );
    }
}
