//! Timed events of a scenario: at a simulated time, run commands on a node
//! (the tc/ip/iptables lines its `tc = [...]` runs, through the same path)
//! or change a link's wire (rate, outage, delay, loss, buffer, carrier).
//!
//! ```toml
//! [[event]]
//! at = "10s"
//! node = "router"
//! commands = ["tc qdisc change dev eth1 root fq_codel"]
//!
//! [[event]]
//! at = "20s"
//! link = "bottleneck"        # its name, `A-B` as its ends are written, or one end
//! direction = "ab"           # ab | ba | both (default)
//! rate = "0"                 # an outage; or down = true / up = true, delay, loss, buffer,
//!                            # trace (+ trace_once), schedule (played from this time)
//! ```
//!
//! Everything is checked when the scenario is built, before anything runs:
//! the keys each kind takes, the time, the node or link, the values; the
//! commands are run once on a copy of the network as it will be (see
//! `run::build_with`), so a command that fails shows then, with the event's
//! time. An event runs before anything else that happens at its time.

use crate::limits;
use crate::scenario::{substitute, value_text, EventSpec, LinkSpec};
use sluice_core::port::{TxBuffer, WireChange};
use sluice_core::time::{Duration, Time};
use std::collections::BTreeMap;
use std::path::Path;

/// What an event does.
#[derive(Clone, Debug)]
pub enum Action {
    /// Run these command lines (already split into words) on node `node`.
    Commands {
        /// Node index.
        node: usize,
        /// The lines as written (after `${}` substitution) and their words.
        lines: Vec<(String, Vec<String>)>,
    },
    /// Change the wire leaving interface `iface` of node `node`.
    Wire {
        /// Node index.
        node: usize,
        /// Interface index on the node.
        iface: usize,
        /// The change.
        change: WireChange,
    },
}

/// An event ready to run.
#[derive(Clone, Debug)]
pub struct Timed {
    /// When.
    pub at: Time,
    /// `event at 10s`, the start of its messages.
    pub what: String,
    /// What it does.
    pub action: Action,
}

/// Where each link's ends are: `(node, iface)` of a and of b, by link index.
pub type LinkEnds = [((usize, usize), (usize, usize))];

/// Where the events of a scenario act, and what they may read.
pub struct Context<'a> {
    /// The scenario's links.
    pub links: &'a [LinkSpec],
    /// Where each link's ends are.
    pub ends: &'a LinkEnds,
    /// A node's index by name.
    pub node_index: &'a dyn Fn(&str) -> Option<usize>,
    /// The variables in force.
    pub vars: &'a BTreeMap<String, String>,
    /// The end of the run.
    pub duration: Time,
    /// Where trace and schedule files are read from.
    pub dir: Option<&'a Path>,
}

/// The scenario's events, checked, as actions sorted by time (a wire
/// event over both directions becomes two).
pub fn build(events: &[EventSpec], cx: &Context) -> Result<Vec<Timed>, String> {
    let (vars, duration) = (cx.vars, cx.duration);
    let mut out = vec![];
    for e in events {
        let at = limits::time(
            &substitute(&e.at, vars)?,
            "event: at",
            Duration::ZERO,
            limits::MAX_TIME,
        )?;
        let what = format!("event at {}", limits::fmt_duration(at));
        let at = Time(at.0);
        if at >= duration {
            return Err(format!(
                "{what}: at: not before the end of the run ({})",
                limits::fmt_duration(Duration(duration.0))
            ));
        }
        match (&e.node, &e.link) {
            (Some(_), Some(_)) => {
                return Err(format!(
                    "{what}: node and link: an event runs commands on a node or changes a link, not both"
                ))
            }
            (None, None) => {
                return Err(format!(
                    "{what}: give node + commands, or link + what changes"
                ))
            }
            (Some(n), None) => {
                let node = commands_event(e, n, &what, cx.node_index, vars)?;
                out.push(Timed {
                    at,
                    what,
                    action: node,
                });
            }
            (None, Some(l)) => {
                for (node, iface, change) in wire_event(e, l, cx, &what)? {
                    out.push(Timed {
                        at,
                        what: what.clone(),
                        action: Action::Wire {
                            node,
                            iface,
                            change,
                        },
                    });
                }
            }
        }
    }
    // Stable: events at the same time run in the order written.
    out.sort_by_key(|t| t.at);
    Ok(out)
}

fn commands_event(
    e: &EventSpec,
    node: &str,
    what: &str,
    node_index: &dyn Fn(&str) -> Option<usize>,
    vars: &BTreeMap<String, String>,
) -> Result<Action, String> {
    let wire_keys = [
        ("direction", e.direction.is_some()),
        ("rate", e.rate.is_some()),
        ("delay", e.delay.is_some()),
        ("loss", e.loss.is_some()),
        ("buffer", e.buffer.is_some()),
        ("down", e.down.is_some()),
        ("up", e.up.is_some()),
        ("trace", e.trace.is_some()),
        ("trace_once", e.trace_once.is_some()),
        ("schedule", e.schedule.is_some()),
    ];
    if let Some((k, _)) = wire_keys.iter().find(|(_, given)| *given) {
        return Err(format!(
            "{what}: {k}: a key of a link event, not of a node's commands"
        ));
    }
    let node = substitute(node, vars)?;
    let ix = node_index(&node).ok_or_else(|| format!("{what}: node: unknown node {node:?}"))?;
    let commands = e
        .commands
        .as_ref()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| format!("{what}: commands: a node event runs at least one command"))?;
    let mut lines = vec![];
    for c in commands {
        let line = substitute(c, vars)?;
        let words: Vec<String> = line.split_whitespace().map(String::from).collect();
        if !matches!(
            words.first().map(String::as_str),
            Some("tc" | "ip" | "iptables")
        ) {
            return Err(format!(
                "{what}: node {node}: not a tc/ip/iptables command: {line:?}"
            ));
        }
        lines.push((line, words));
    }
    Ok(Action::Commands { node: ix, lines })
}

/// The link an event names: its name, `A-B` as its ends are written, or
/// one of its ends (`node:device`).
fn find_link(name: &str, links: &[LinkSpec]) -> Option<usize> {
    links
        .iter()
        .position(|l| l.label() == name || format!("{}-{}", l.a, l.b) == name)
        .or_else(|| links.iter().position(|l| l.a == name || l.b == name))
}

fn wire_event(
    e: &EventSpec,
    link: &str,
    cx: &Context,
    what: &str,
) -> Result<Vec<(usize, usize, WireChange)>, String> {
    let (links, ends, vars) = (cx.links, cx.ends, cx.vars);
    if e.commands.is_some() {
        return Err(format!(
            "{what}: commands: a key of a node event (node = \"...\"), not of a link's"
        ));
    }
    let link = substitute(link, vars)?;
    let li = find_link(&link, links).ok_or_else(|| {
        format!(
            "{what}: link: no link {link:?} (links: {})",
            links
                .iter()
                .map(LinkSpec::label)
                .collect::<Vec<_>>()
                .join(", ")
        )
    })?;
    let sub = |s: &String| substitute(s, vars);
    let key = |k: &str| format!("{what}: {k}");
    let mut change = WireChange::default();
    if let Some(r) = &e.rate {
        let r = sub(r)?;
        change.rate_bps = Some(match r.trim() {
            "0" => 0,
            t => limits::rate(t, &key("rate"))?,
        });
    }
    if let Some(d) = &e.delay {
        change.delay = Some(limits::time(
            &sub(d)?,
            &key("delay"),
            Duration::ZERO,
            limits::MAX_TIME,
        )?);
    }
    if let Some(l) = &e.loss {
        change.loss = Some(loss(l, &key("loss"), vars)?);
    }
    if let Some(b) = &e.buffer {
        change.buffer = Some(buffer(&sub(b)?, &key("buffer"), 0)?);
    }
    if let Some(t) = &e.trace {
        if e.rate.is_some() {
            return Err(format!(
                "{what}: trace and rate: the capacity is a trace or a rate, not both"
            ));
        }
        let trace = crate::varying::trace(t, &key("trace"), cx.dir, vars)?;
        change.trace = Some((trace, e.trace_once.unwrap_or(false)));
    } else if e.trace_once.is_some() {
        return Err(format!("{what}: trace_once: the event starts no trace"));
    }
    if let Some(sch) = &e.schedule {
        change.schedule = Some(crate::varying::schedule(
            &sub(sch)?,
            &key("schedule"),
            cx.dir,
        )?);
    }
    match (e.down, e.up) {
        (Some(true), Some(true)) => {
            return Err(format!("{what}: down and up: one or the other"));
        }
        (Some(d), None) => change.up = Some(!d),
        (None, Some(u)) => change.up = Some(u),
        (Some(d), Some(u)) => change.up = Some(u && !d),
        (None, None) => {}
    }
    if change == WireChange::default() {
        return Err(format!(
            "{what}: a link event changes something: rate, delay, loss, buffer, down, up, trace or schedule"
        ));
    }
    let (a, b) = ends[li];
    let dirs: &[(usize, usize)] = match e.direction.as_ref().map(sub).transpose()?.as_deref() {
        None | Some("both") => &[a, b],
        Some("ab") => &[a],
        Some("ba") => &[b],
        Some(other) => {
            return Err(format!(
                "{}: {other:?} is not ab, ba or both",
                key("direction")
            ))
        }
    };
    Ok(dirs.iter().map(|&(n, i)| (n, i, change.clone())).collect())
}

/// A loss probability: a number 0..1 or a percentage `"1%"`.
fn loss(v: &toml::Value, what: &str, vars: &BTreeMap<String, String>) -> Result<f64, String> {
    let t = substitute(&value_text(v), vars)?;
    let t = t.trim();
    let p = match t.strip_suffix('%') {
        Some(pct) => pct.trim().parse::<f64>().map(|p| p / 100.0),
        None => t.parse::<f64>(),
    }
    .map_err(|_| format!("{what}: not a probability: {t:?} (e.g. 0.01 or \"1%\")"))?;
    limits::probability(p, what)
}

/// A transmit buffer: `100p` packets (at least `least`), or bytes (`64000b`, `64k`).
pub fn buffer(s: &str, what: &str, least: u64) -> Result<TxBuffer, String> {
    if let Some(n) = s.trim().strip_suffix('p') {
        let n = limits::integer(n, what, least, u64::from(u32::MAX))?;
        return Ok(TxBuffer::Packets(n as u32));
    }
    let b = s.trim();
    limits::bytes(
        b.strip_suffix('b').unwrap_or(b),
        what,
        1,
        u64::from(u32::MAX),
    )
    .map(TxBuffer::Bytes)
}
